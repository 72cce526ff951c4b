"""``systemctl`` as a replayed host answers it: ``show`` (properties in systemd's order, its value
formats), ``is-active``/``is-failed``, and the demo's actions (``start``, ``stop``, ``restart``,
``kill``, ``reset-failed``), which change the simulated host as systemd would.

* ``systemctl show UNIT -p A,B``: ``Name=value`` lines in systemd's D-Bus property order
  (:data:`PROPERTY_ORDER`), not the ``-p`` order; empty values printed as ``Name=``; timestamps
  ``Sat 2025-03-08 12:28:58 UTC``; ``MemoryCurrent=[not set]`` or bytes; exit 0 even for a unit that
  does not exist (``LoadState=not-found``). Order and values from the real systemd 252 output in
  ``tests/fixtures/systemctl-show/*.txt`` and ``src/core/dbus-service.c``/``dbus-unit.c``.
* ``systemctl start|stop|restart|kill UNIT`` (the demo's actions): ``stop`` ends the start where it
  is (nothing more of the recording happens; the unit is ``inactive``/``dead``, the GPUs free, the
  port closed; systemd's "Stopping ...", "Deactivated successfully.", "Stopped ..." lines);
  ``start`` (of a unit that is not running) and ``restart`` play the recording again from its
  beginning, with new invocation ids and PIDs and ``NRestarts`` counted from 0 (a start by hand
  flushes systemd's counter); ``kill`` (SIGKILL) ends the main process ("Main process exited,
  code=killed, status=9/KILL", "Failed with result 'signal'."), then as its ``Restart=`` says:
  ``no``/``on-success``: ``failed``; otherwise ``activating``/``auto-restart`` for ``RestartUSec``,
  "Scheduled restart job, restart counter is at N.", and the recording again with ``NRestarts`` N.
  A ``start`` or ``restart`` past ``StartLimitBurst`` starts within ``StartLimitIntervalUSec`` is
  refused as systemd refuses it (exit 1, "Job for UNIT failed because start of the service was
  attempted too often." and its hint lines, systemd 252 ``src/shared/bus-wait-for-jobs.c``) until
  ``systemctl reset-failed UNIT`` (which also clears a failed state and ``NRestarts``); the
  automatic restart after a kill is not limited. The lines' wording is systemd 252's, as in the
  recorded ``vllm-restart-loop`` scenario (``tui/scenarios/``).

Accepted: ``systemctl show [UNIT…] [-p A,B]… [--property=A,B] [--value] [--no-pager]``,
``systemctl is-active UNIT``, ``systemctl is-failed UNIT``, ``systemctl start|stop|restart|reset-failed
UNIT``, ``systemctl kill [-s SIGKILL] UNIT``; an action on another unit: exit 5, "Unit X not loaded."
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from probes.transport.replay.command_line import UsageError, unit_name
from probes.transport.replay.host import SimulatedHost
from probes.transport.replay.scenario import EPS_S, UNIT_DEFAULTS
from probes.transport.runner import Completed

#: The order ``systemctl show`` prints the properties of
#: :data:`~probes.transport.replay.scenario.UNIT_DEFAULTS` in: the Service interface's D-Bus vtable,
#: its cgroup part, then the Unit interface (systemd 252 ``src/core/dbus-service.c``,
#: ``dbus-cgroup.c``, ``dbus-unit.c``). The 20 properties of the real files in
#: ``tests/fixtures/systemctl-show/`` come out in exactly this relative order.
PROPERTY_ORDER: tuple[str, ...] = tuple(UNIT_DEFAULTS)

#: What a unit that does not exist shows (``tests/fixtures/systemctl-show/not-found.txt``).
_NOT_FOUND = {"Restart": "no", "LoadState": "not-found", "UnitFileState": None, "Slice": None}

_SPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def systemd_span_s(text: str) -> float:
    """A time span as ``systemctl show`` prints it (``100ms``, ``10s``, ``1min 30s``; systemd's
    ``format_timespan``) in seconds; ``infinity`` and anything unreadable: 0."""
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(us|ms|min|s|h|d)\b", text):
        total += float(num) * _SPAN_UNITS[unit]
    return total


def run_systemctl(host: SimulatedHost, argv: tuple[str, ...], args: tuple[str, ...]) -> Completed:
    """``systemctl ARGS`` on ``host`` (``argv``: the whole command, for the result): the forms of
    the module docstring, with systemctl's exit statuses and messages; another verb: exit 1."""
    verb = next((a for a in args if not a.startswith("-")), None)
    rest = list(args)
    if verb is not None:
        rest.remove(verb)
    if verb == "show":
        try:
            units, props, value_only = _parse_show(rest)
        except UsageError as exc:
            return Completed(argv, 1, b"", f"{exc}\n".encode())
        blocks = [_show_one(host, u, props, value_only) for u in (units or [host.scenario.unit])]
        return Completed(argv, 0, "\n".join(blocks).encode())
    if verb in ("is-active", "is-failed"):
        units = [unit_name(a) for a in rest if not a.startswith("-")] or [host.scenario.unit]
        states = [str(_unit_at(host, u)["ActiveState"]) for u in units]
        want = ("active", "reloading") if verb == "is-active" else ("failed",)
        ok = any(s in want for s in states)
        return Completed(argv, 0 if ok else (3 if verb == "is-active" else 1),
                         "".join(s + "\n" for s in states).encode())
    if verb in ("start", "stop", "restart", "kill", "reset-failed"):
        return _act(host, argv, verb, rest)
    if verb == "reload":
        return Completed(argv, 1, b"",
                         f"upwatch replay: {host.name} is a recorded scenario; "
                         f"`systemctl {verb}` is not replayed\n".encode())
    return Completed(argv, 1, b"", f"Unknown command verb {verb}.\n".encode())


def _unit_at(host: SimulatedHost, unit: str) -> dict[str, Any]:
    """``unit``'s properties now (typed as in ``UnitFrame``): the scenario's unit's, else a unit
    that does not exist."""
    if unit == host.scenario.unit:
        return host.unit_props(host.now_s())
    props = dict(UNIT_DEFAULTS)
    props.update(_NOT_FOUND)
    props["Id"] = unit
    return props


def _show_one(host: SimulatedHost, unit: str, wanted: list[str] | None, value_only: bool) -> str:
    """``systemctl show`` of one unit: the ``wanted`` properties (all when None) in
    :data:`PROPERTY_ORDER`, one line each."""
    props = _unit_at(host, unit)
    names = [p for p in PROPERTY_ORDER if wanted is None or p in wanted]
    lines = []
    for name in names:
        value = _format_prop(host, name, props.get(name))
        lines.append(value if value_only else f"{name}={value}")
    return "".join(line + "\n" for line in lines)


def _format_prop(host: SimulatedHost, name: str, value: Any) -> str:
    """Property ``name``'s ``value`` (typed as in ``UnitFrame``) as ``systemctl show`` prints it."""
    if name.endswith("TimestampMonotonic"):
        if value is None:
            return "0"
        return str(host.scenario.monotonic_start_us + int(round(float(value) * 1_000_000)))
    if name.endswith("Timestamp"):
        if value is None:
            return ""
        return systemd_time(host.start + float(value), host.scenario.timezone)
    if name == "MemoryCurrent":
        return "[not set]" if value is None else str(int(value))
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# --- the actions ----------------------------------------------------------------------------------


def _act(host: SimulatedHost, argv: tuple[str, ...], verb: str, rest: list[str]) -> Completed:
    """``systemctl start|stop|restart|kill [-s SIG]|reset-failed UNIT`` on ``host`` (the module
    docstring): the host changed from now on, and systemctl's exit status and messages."""
    units = [unit_name(a) for a in rest if not a.startswith("-") and a not in ("SIGKILL", "KILL", "9")]
    if not units:
        return Completed(argv, 1, b"", b"Too few arguments.\n")
    unit = units[0]
    if unit != host.scenario.unit:
        word = {"kill": "kill unit"}.get(verb, verb)
        return Completed(argv, 5, b"", f"Failed to {word} {unit}: Unit {unit} not loaded.\n".encode())
    t = host.now_s()
    props = host.unit_props(t)
    running = props.get("ActiveState") in ("active", "activating", "reloading") \
        and props.get("SubState") != "auto-restart"
    pending = props.get("SubState") == "auto-restart"
    lines: list[tuple[float, str]] = []
    if verb == "reset-failed":
        host.limit_reset_at = t  # systemd resets the start rate limit ...
        if props.get("ActiveState") == "failed":  # ... and a failed unit's state, result and counter
            cleared = dict(props)
            cleared.update({"ActiveState": "inactive", "SubState": "dead", "Result": "success", "NRestarts": 0})
            host.hold(t, cleared)
        return Completed(argv, 0, b"")
    if verb in ("start", "restart") and not running and _start_limited(host, t, props):
        return Completed(argv, 1, b"", (
            f"Job for {unit} failed because start of the service was attempted too often.\n"
            f"See \"systemctl status {unit}\" and \"journalctl -xeu {unit}\" for details.\n"
            f"To force a start use \"systemctl reset-failed {unit}\"\n"
            f"followed by \"systemctl start {unit}\" again.\n").encode())
    if verb == "kill":
        if not running or not props.get("MainPID"):
            return Completed(argv, 1, b"", f"Failed to kill unit {unit}: No matching processes to kill\n".encode())
        lines += [(t, f"{unit}: Main process exited, code=killed, status=9/KILL"),
                  (t + 0.0002, f"{unit}: Failed with result 'signal'.")]
        restart = str(props.get("Restart") or "no")
        if restart in ("no", "on-success", "on-watchdog"):
            host.down(t, props, "failed", "failed", result="signal", code=2, status=9)
        else:
            wait = systemd_span_s(str(props.get("RestartUSec") or "100ms"))
            host.down(t, props, "activating", "auto-restart", result="signal", code=2, status=9)
            n = int(props.get("NRestarts") or 0) + 1
            lines += [(t + wait, f"{unit}: Scheduled restart job, restart counter is at {n}."),
                      (t + wait + 0.0003, f"Stopped {_described(unit, props)}.")]
            host.play(t + wait + 0.008, restarts_base=n)
    elif verb == "stop":
        if not running and not pending:
            return Completed(argv, 0, b"")  # already stopped (a failed unit stays failed)
        if running:
            lines.append((t, f"Stopping {_described(unit, props)}..."))
        lines += [(t + 0.2, f"{unit}: Deactivated successfully."),
                  (t + 0.2002, f"Stopped {_described(unit, props)}.")]
        host.down(t, props, "inactive", "dead", result="success", code=2, status=15)
    elif verb == "start" and running:
        return Completed(argv, 0, b"")  # it runs already: systemctl has nothing to do
    else:  # restart, or start of a unit that is not running
        if running:
            lines += [(t, f"Stopping {_described(unit, props)}..."),
                      (t + 0.2, f"{unit}: Deactivated successfully."),
                      (t + 0.2002, f"Stopped {_described(unit, props)}.")]
            host.down(t, props, "inactive", "dead", result="success", code=2, status=15)
            host.play(t + 0.25, restarts_base=0)
        else:
            host.play(t + 0.01, restarts_base=0)
    host.reschedule(t, lines, props)
    return Completed(argv, 0, b"")


def _start_limited(host: SimulatedHost, t: float, props: Mapping[str, Any]) -> bool:
    """Whether a start now would pass ``StartLimitBurst`` starts within ``StartLimitIntervalUSec``
    (counted from the journal's "Started ..." lines of PID 1, since the last ``reset-failed``)."""
    burst = int(props.get("StartLimitBurst") or 0)
    interval = systemd_span_s(str(props.get("StartLimitIntervalUSec") or "0"))
    if burst <= 0 or interval <= 0:
        return False
    since = max(t - interval, host.limit_reset_at)
    started = sum(1 for e in host.journal
                  if since < e.offset_s <= t + EPS_S and e.fields.get("_PID") == "1"
                  and e.fields.get("UNIT") == host.scenario.unit
                  and str(e.fields.get("MESSAGE", "")).startswith("Started "))
    return started >= burst


def _described(unit: str, props: Mapping[str, Any]) -> str:
    """How systemd names the unit in its messages: ``UNIT - Description``, or the unit alone."""
    desc = props.get("Description")
    return f"{unit} - {desc}" if desc else unit


def _parse_show(args: list[str]) -> tuple[list[str], list[str] | None, bool]:
    """``systemctl show``'s arguments as ``(units, properties or None for all, --value)``.

    Raises:
        UsageError: an option systemctl refuses.
    """
    units: list[str] = []
    props: list[str] | None = None
    value_only = False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-p", "--property"):
            if i + 1 >= len(args):
                raise UsageError(f"systemctl: option '{a}' requires an argument")
            i += 1
            props = (props or []) + [p for p in args[i].split(",") if p]
        elif a.startswith("--property="):
            props = (props or []) + [p for p in a.split("=", 1)[1].split(",") if p]
        elif a.startswith("-p") and len(a) > 2:
            props = (props or []) + [p for p in a[2:].split(",") if p]
        elif a in ("--value", "-P"):
            value_only = True
        elif a in ("--no-pager", "--all", "-a", "--system", "-q", "--quiet"):
            pass
        elif a.startswith("-"):
            raise UsageError(f"systemctl: unrecognized option '{a}'")
        else:
            units.append(unit_name(a))
        i += 1
    return units, props, value_only


def systemd_time(epoch: float, zone: str) -> str:
    """``Sat 2025-03-08 12:28:58 UTC``: English weekday, seconds, the host's zone (here UTC)."""
    tm = time.gmtime(int(epoch))
    return time.strftime("%a %Y-%m-%d %H:%M:%S ", tm) + zone
