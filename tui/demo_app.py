"""``upwatch --demo``: the real dashboard on four simulated hosts (see ``tui/demo.py``)."""

from __future__ import annotations

import dataclasses
import json

from probes.clock import Clock, ScaledClock
from probes.store.history import History, StartRecord, phase_durations
from probes.logs.journal_json import parse_record
from probes.fold.model import HostModel
from probes.transport.replay.runner import ReplayRunner
from probes.transport.replay.scenario import Scenario
from probes.spec import HostSpec
from tui.app import UpwatchApp, make_app
from tui.config import Config
from tui.demo import demo_scenarios


#: Earlier starts seeded into the demo's history: each phase's duration times these factors (the
#: README says: six earlier starts, each phase within ±12% of this start's; tests/test_demo_history.py
#: checks it against what is written).
_EARLIER = (0.92, 1.0, 1.06, 0.97, 1.12, 1.0)
#: The hung host's earlier starts got through graph capture and warm-up in these many seconds.
_HUNG_REST_S = (("graph_capture", 95.0), ("warmup", 20.0))


def seed_demo_history(history: History, scenarios: list[Scenario]) -> int:
    """Write made-up earlier starts of the demo's hosts into ``history``, so the cards show typical
    durations, an ETA and "slower than usual": for each scenario that does not fail, six starts a
    day apart whose phases took what the scenario's own start takes (times :data:`_EARLIER`;
    measured as the history measures a start, :func:`~probes.store.history.phase_durations`); the hung
    host's earlier starts finished graph capture (:data:`_HUNG_REST_S`). All end before the
    scenarios begin, so the demo's own starts never count as their own history.
    Returns the number of starts written."""
    written = 0
    for sc in scenarios:
        model = HostModel(sc.host, sc.unit, sc.engine)
        for entry in sc.journal:
            model.apply(parse_record(json.dumps(dict(entry.fields))))
        end = sc.start + (sc.journal[-1].offset_s if sc.journal else 0.0)
        st = model.state(end)
        if st.start_began is None or st.state == "failed" or st.restart_loop:
            continue  # the crash-looping host never had a good start to compare with
        phases = list(phase_durations(st.phases))  # a phase the start comes back to counts once, summed
        if st.state != "ready":
            phases += [p for p in _HUNG_REST_S if p[0] not in dict(phases)]
        for k, factor in enumerate(_EARLIER):
            began = sc.start - 86400.0 * (len(_EARLIER) - k)
            scaled = tuple((ph, round(d * factor, 1)) for ph, d in phases)
            total = round(sum(d for _, d in scaled), 1)
            written += history.add(StartRecord(sc.host, sc.unit, st.model, st.args_hash, st.engine, began,
                                               began + total, "ready", total, scaled))
    return written


def make_demo_app(speed: float = 10.0, clock: Clock | None = None, start: float | None = None,
                  read_only: bool = False, history: History | None = None,
                  seed_history: bool = False, names: list[str] | None = None,
                  start_watchers: bool = True) -> UpwatchApp:
    """The demo app: the scenarios of :func:`tui.demo.demo_scenarios`, each behind a
    :class:`~probes.transport.replay.runner.ReplayRunner`, on a clock running ``speed`` times faster than real.

    Args:
        speed: clock seconds per real second (ignored when ``clock`` is given).
        clock: an explicit clock (tests pass a :class:`~probes.clock.ManualClock`).
        start: the scenarios' start time, epoch seconds (default: the clock's now).
        read_only: the actions are off. (They are on otherwise, against the simulated hosts, and
            not written to the audit log.)
        history: a start history to show typical durations from and write to (tests, the
            screenshot script); None (the default) keeps the demo's starts out of any history.
        seed_history: first write made-up earlier starts into ``history``
            (:func:`seed_demo_history`), so typical durations and ETAs show from the beginning.
        names: a fleet instead of the four hosts: host ``i`` is named ``names[i]`` and runs the
            scenario ``i % 4`` (:func:`fleet_scenarios`); None: the four demo hosts.
        start_watchers: False leaves the probes stopped (see :func:`tui.app.make_app`).
    """
    clock = clock or ScaledClock(speed)
    t0 = clock.now() if start is None else start
    scenarios = {s.host: s for s in (demo_scenarios(t0) if names is None else fleet_scenarios(t0, names))}
    if history is not None and seed_history:
        seed_demo_history(history, list(scenarios.values()))
    config = Config(hosts=tuple(HostSpec(s.host, s.unit, s.port, s.engine) for s in scenarios.values()),
                    title="upwatch demo")
    return make_app(config, lambda spec: ReplayRunner(scenarios[spec.name], clock, start=t0), clock,
                    read_only=read_only, audit=None, history=history, demo=True,
                    start_watchers=start_watchers)


def fleet_scenarios(t0: float, names: list[str]) -> list[Scenario]:
    """The demo's four scenarios (:func:`tui.demo.demo_scenarios` at ``t0``) for a fleet: host ``i``
    is named ``names[i]`` and runs scenario ``i % 4`` (a start that gets ready, a restart loop, a
    slow one, one that hangs in graph capture)."""
    base = demo_scenarios(t0)
    return [dataclasses.replace(base[i % len(base)], host=name) for i, name in enumerate(names)]


async def advance_demo(app: UpwatchApp, clock, pilot, seconds: float, *, host: str | None = None,
                       keys: tuple[str, ...] = (), step_s: float = 5.0, toasts: bool = False) -> None:
    """Drive a demo app on a :class:`~probes.clock.ManualClock` to a fixed picture: move the clock
    ``seconds`` on (in ``step_s`` steps, so every probe runs), take the snapshots, open ``host``'s
    detail screen when given, press ``keys``. Used by the snapshot tests and the screenshot script,
    so both draw the same thing every time: the notifications' toasts, which depend on when the
    repaint timer happened to take its snapshots, are cleared unless ``toasts`` is True.
    """
    left = seconds
    while left > 0:
        await clock.advance(min(step_s, left))
        left -= step_s
    app.tick()
    app.flush()
    await pilot.pause()
    if host is not None:
        app.open_detail(host)
        await pilot.pause()
    if keys:
        await pilot.press(*keys)
    app.flush()
    # The toast that gathers a burst waits a real second on a timer: put it up now, so a slow run
    # does not show it after the clear below (or miss it with toasts=True). A toast is a message to
    # the app: let it arrive before the clear.
    app.notifier.toast_held()
    await pilot.pause()
    if not toasts:
        app.clear_notifications()
    await pilot.pause()
