"""``upwatch --demo``: the real dashboard on four simulated hosts (see ``tui/demo.py``)."""

from __future__ import annotations

from probes.clock import Clock, ScaledClock
from probes.history import History
from probes.replay import ReplayRunner
from probes.watch import HostSpec
from tui.app import UpwatchApp, make_app
from tui.config import Config
from tui.demo import demo_scenarios


def make_demo_app(speed: float = 10.0, clock: Clock | None = None, start: float | None = None,
                  read_only: bool = False, history: History | None = None) -> UpwatchApp:
    """The demo app: the scenarios of :func:`tui.demo.demo_scenarios`, each behind a
    :class:`~probes.replay.ReplayRunner`, on a clock running ``speed`` times faster than real.

    Args:
        speed: clock seconds per real second (ignored when ``clock`` is given).
        clock: an explicit clock (tests pass a :class:`~probes.clock.ManualClock`).
        start: the scenarios' start time, epoch seconds (default: the clock's now).
        read_only: the actions are off. (They are on otherwise, against the simulated hosts, and
            not written to the audit log.)
        history: a start history to show typical durations from and write to (tests, the
            screenshot script); None (the default) keeps the demo's starts out of any history.
    """
    clock = clock or ScaledClock(speed)
    t0 = clock.now() if start is None else start
    scenarios = {s.host: s for s in demo_scenarios(t0)}
    config = Config(hosts=tuple(HostSpec(s.host, s.unit, s.port, s.engine) for s in scenarios.values()),
                    title="upwatch demo")
    return make_app(config, lambda spec: ReplayRunner(scenarios[spec.name], clock, start=t0), clock,
                    read_only=read_only, audit=None, history=history)


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
    if not toasts:
        app.clear_notifications()
    await pilot.pause()
