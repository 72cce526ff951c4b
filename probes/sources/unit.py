"""The unit probe: ``systemctl show`` output turned into a :class:`~probes.data.events.UnitState`.

Format of ``systemctl show UNIT -p A,B,C --no-pager``, systemd 252 (``src/shared/bus-print-properties.c``,
``src/systemctl/systemctl-show.c``; real captures in ``tests/fixtures/systemctl-show``):

* ``Name=value`` lines in **D-Bus property order** (Service properties, then Unit), not ``-p`` order,
  so the text is read into a dict first.
* Properties named in ``-p`` are printed even when empty; unset timestamps are empty and their
  ``…Monotonic`` twin is ``0``. A property the running systemd does not know (``NRestarts`` before
  v235) is silently left out.
* A unit that does not exist prints ``LoadState=not-found``, ``ActiveState=inactive`` and defaults,
  with **exit status 0**; it is parsed faithfully, never treated as an error.
* ``MemoryCurrent`` is a byte count or ``[not set]`` (accounting off, or no process left).
* ``MainPID`` is ``0`` when there is no main process.
* Timestamps read ``Tue 2024-03-05 14:03:11 UTC``: English weekday, local time of the **remote**
  host, then its zone abbreviation (``UTC``, ``CET``, ``+07``, …). See :func:`parse_timestamp`.

Values are host text: they are kept as plain strings (``[bold]`` stays ``[bold]``) and never
interpreted as markup here or anywhere.

A number no systemd prints (``NRestarts=-1``, a 309-digit ``MainPID``, ``MemoryCurrent=lots``, a
``@``-timestamp of 400 digits) is not a crash and not a silent None: :func:`read_show` gives the
state with that value None and an :class:`~probes.data.events.Unparsable` naming the property.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from probes.data.events import UnitState, Unparsable
from probes.fold import access
from probes.hosttext import one_line
from probes.sources.context import SourceContext
from probes.transport.runner import ProbeError

#: The properties upwatch asks for, in the order of the fixtures' ``-p`` list.
SHOW_PROPERTIES: tuple[str, ...] = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "MainPID",
    "ExecMainStartTimestamp",
    "ExecMainStartTimestampMonotonic",
    "ExecMainCode",
    "ExecMainStatus",
    "ActiveEnterTimestamp",
    "InactiveExitTimestamp",
    "StateChangeTimestamp",
    "Restart",
    "RestartUSec",
    "StartLimitBurst",
    "StartLimitIntervalUSec",
    "MemoryCurrent",
    "ControlGroup",
    "InvocationID",
)

#: Zone abbreviations that name exactly one UTC offset (seconds) in tzdata. Built by walking every
#: zone of tzdata 2024+ in January and July of 2020-2026 and keeping the abbreviations that map to
#: one offset only. ``CST`` (US -6, Cuba -5, China +8), ``CDT`` (US -5, Cuba -4), ``IST`` (India
#: +5:30, Ireland +1, Israel +2) and ``PST`` (US -8, Philippines +8) are ambiguous and therefore
#: absent: a wrong offset would be hours off, ``None`` is honest. Zones without an abbreviation are
#: printed numerically by tzdata (``+07``, ``-0330``) and need no table.
ZONE_OFFSETS_S: dict[str, int] = {
    name: int(hours * 3600)
    for name, hours in {
        "UTC": 0, "GMT": 0,
        "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2, "MET": 1, "MEST": 2,
        "EET": 2, "EEST": 3, "MSK": 3, "WAT": 1, "CAT": 2, "SAST": 2, "EAT": 3, "IDT": 3,
        "PKT": 5, "WIB": 7, "WITA": 8, "WIT": 9, "HKT": 8, "AWST": 8, "JST": 9, "KST": 9,
        "ACST": 9.5, "ACDT": 10.5, "AEST": 10, "AEDT": 11, "ChST": 10, "NZST": 12, "NZDT": 13,
        "NST": -3.5, "NDT": -2.5, "AST": -4, "ADT": -3, "EST": -5, "EDT": -4,
        "MST": -7, "MDT": -6, "PDT": -7, "AKST": -9, "AKDT": -8, "HST": -10, "HDT": -9,
        "SST": -11,
    }.items()
}

_TIMESTAMP_RE = re.compile(
    r"(?:[A-Za-z]{3} )?"                                   # weekday (systemd: English, hard-coded)
    r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})"     # local date and time of the host
    r"(?:\.(\d{1,6}))?"                                    # --timestamp=us: microseconds
    r"(?: (\S+))?",                                        # zone abbreviation or numeric offset
    re.ASCII,
)
_UNIX_RE = re.compile(r"@(\d+)(?:\.(\d{1,6}))?", re.ASCII)  # --timestamp=unix (v251+)
_NUMERIC_ZONE_RE = re.compile(r"([+-])(\d{2})(?::?(\d{2}))?", re.ASCII)
_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_INT_RE = re.compile(r"-?\d+", re.ASCII)
#: ``(uint64_t) -1``: what systemd before v239 printed for an unset ``MemoryCurrent``.
_UINT64_MAX = 2**64 - 1
#: The range of each integer property read (inclusive): systemd's own types (``NRestarts``
#: unsigned, ``MainPID`` a pid up to ``PID_MAX_LIMIT``, ``ExecMainCode`` a ``CLD_*`` code,
#: ``ExecMainStatus`` an exit status or signal number, monotonic µs and bytes uint64).
INT_RANGES: dict[str, tuple[int, int]] = {
    "NRestarts": (0, 2**32 - 1),
    "MainPID": (0, 2**22),
    "ExecMainCode": (0, 255),
    "ExecMainStatus": (0, 2**31 - 1),
    "ExecMainStartTimestampMonotonic": (0, _UINT64_MAX),
    "MemoryCurrent": (0, _UINT64_MAX),
}
#: Timestamp properties read.
TIMESTAMP_PROPERTIES = ("ExecMainStartTimestamp", "ActiveEnterTimestamp", "InactiveExitTimestamp")


@dataclass(frozen=True, slots=True)
class ShowRead:
    """A ``systemctl show`` output read: the unit's state (a value that could not be read is None
    in it) and those values, in :data:`SHOW_PROPERTIES` order."""

    state: UnitState
    bad: tuple[Unparsable, ...] = ()


def show_argv(unit: str) -> list[str]:
    """The command that reads ``unit``'s state (run without a shell; the unit is one argv item).

    Args:
        unit: the unit name, e.g. ``sglang.service``.

    Returns:
        ``["systemctl", "show", unit, "-p", "Id,LoadState,…", "--no-pager"]``.
    """
    return ["systemctl", "show", unit, "-p", ",".join(SHOW_PROPERTIES), "--no-pager"]


def access_problem(stdout: bytes, stderr: bytes, returncode: int | None, *,
                   sudo: bool) -> tuple[str, str] | None:
    """``(reason id, one line with the fix)`` when a ``systemctl``/``journalctl`` command's output
    says the host cannot be read (:func:`probes.fold.access.classify`), else None."""
    text = (stderr + b"\n" + stdout).decode("utf-8", "replace")
    reason = access.classify(text, returncode, sudo=sudo)
    if reason is None:
        return None
    return reason, access.reason_words(reason, access.first_line(stderr.decode("utf-8", "replace"))
                                       or access.first_line(text))


class UnitSource:
    """The unit probe's loop: ``systemctl show`` (``--user`` for a user unit, behind ``sudo -n``
    when configured) every ``unit_interval_s``; each answer becomes the unit's
    :class:`~probes.data.events.UnitState`, a failure the ``unit`` cell's (with backoff). Sets
    ``signals.unit_seen`` after the first answer or failure.

    Args:
        context: the host's :class:`~probes.sources.context.SourceContext`.
    """

    def __init__(self, context: SourceContext) -> None:
        self.context = context

    def argv(self) -> list[str]:
        """The command run each look, e.g. ``["sudo", "-n", "systemctl", "show", UNIT, "-p", ...]``."""
        ctx = self.context
        argv = show_argv(ctx.spec.unit)
        if ctx.spec.user_unit:
            argv.insert(1, "--user")
        return ctx.privileged(argv)

    async def run(self) -> None:
        """Look until cancelled. A ``systemctl show`` whose output is not properties fails with the
        access reason its words give (kind ``permission`` for sudo's), else its first stderr line."""
        ctx = self.context
        delay = ctx.cadence.retry_s
        argv = self.argv()
        while True:
            try:
                done = await ctx.runner.run(argv, timeout=30.0)
            except ProbeError as exc:
                ctx.fail("unit", exc.kind, exc.message)
                ctx.signals.unit_seen.set()
                delay = await ctx.retry(delay, exc.kind)
                continue
            try:
                read = read_show(done.stdout.decode("utf-8", "replace"), ctx.clock.now())
            except ValueError as exc:
                err = done.stderr.decode("utf-8", "replace").strip()
                found = access_problem(done.stdout, done.stderr, done.returncode, sudo=ctx.spec.sudo)
                reason, words = found if found is not None else ("", err.splitlines()[0][:200] if err else str(exc))
                ctx.fail("unit", "permission" if reason.startswith("sudo_") else "command",
                         f"systemctl show: {words}", reason)
                ctx.signals.unit_seen.set()
                delay = await ctx.retry(delay)
                continue
            ctx.emit(read.state)
            ctx.delivered("unit", read.bad)
            ctx.signals.unit_seen.set()
            delay = ctx.cadence.retry_s
            await ctx.clock.sleep(ctx.cadence.unit_interval_s)


def parse_properties(text: str) -> dict[str, str]:
    """Read ``Name=value`` lines into a dict, order-free.

    Only the first unit's block is read (systemctl separates units with an empty line). Lines
    without ``=`` or whose name is not a property name are skipped; a repeated name keeps its last
    value. Values are kept verbatim (no stripping beyond the line end).

    Args:
        text: stdout of ``systemctl show`` (format of systemd 252).

    Returns:
        Property name → value (an empty string for an empty value).
    """
    props: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if props:
                break  # the next unit's block
            continue
        name, sep, value = line.partition("=")
        if not sep or not _NAME_RE.fullmatch(name):
            continue
        props[name] = value
    return props


def parse_timestamp(value: str) -> float | None:
    """Turn a ``systemctl show`` timestamp into epoch seconds.

    Forms read (systemd 252 ``format_timestamp``; ``--timestamp=`` styles from v247/v251):
    ``Tue 2024-03-05 14:03:11 UTC`` (the default), ``Sat 2021-12-11 14:25:57.177848 UTC`` (``us``,
    ``us+utc``) and ``@1700000000`` (``unix``).

    The zone is the **remote host's** local zone abbreviation (``%Z``):

    * ``UTC``/``GMT`` and numeric zones (``+07``, ``-0330``, ``+05:30``) are exact;
    * other names are looked up in :data:`ZONE_OFFSETS_S`, which holds only abbreviations that mean
      one offset in tzdata; an ambiguous or unknown name (``CST``, ``IST``, ``PST``, ``XYZT``) gives
      ``None`` rather than a time that may be hours off. Hosts in such zones read correctly when
      systemctl runs with ``TZ=UTC`` or ``--timestamp=unix`` (v251+).
    * a timestamp without a zone gives ``None`` (its zone is unknown).

    Args:
        value: the property's value.

    Returns:
        Seconds since the Unix epoch, or None when the value is empty, unset or cannot be read.
        Never raises.
    """
    value = value.strip()
    if not value or value in ("n/a", "[not set]"):
        return None
    unix = _UNIX_RE.fullmatch(value)
    if unix:
        if len(unix.group(1)) > 12:  # past year 33658; int() raises past 4300 digits
            return None
        return int(unix.group(1)) + _fraction(unix.group(2))
    m = _TIMESTAMP_RE.fullmatch(value)
    if not m or m.group(8) is None:
        return None
    offset_s = _zone_offset_s(m.group(8))
    if offset_s is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
        local = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError:  # 2024-02-30, 25:00:00, …
        return None
    return (local - timedelta(seconds=offset_s)).timestamp() + _fraction(m.group(7))


def parse_show(text: str, time: float) -> UnitState:
    """The unit's state of :func:`read_show` (a value that could not be read is None in it).

    Raises:
        ValueError: as :func:`read_show`.
    """
    return read_show(text, time).state


def read_show(text: str, time: float) -> ShowRead:
    """Parse one unit's ``systemctl show`` output (the :func:`show_argv` command).

    Args:
        text: stdout of ``systemctl show`` (format of systemd 252; see the module docstring).
        time: when the command was run (epoch seconds; the injected clock's "now").

    Returns:
        The unit's state and the values that could not be read. Empty or ``[not set]`` values
        become None, ``MainPID=0`` becomes None, a missing property takes the :class:`UnitState`
        default. A unit that does not exist is returned as systemd reports it (``load_state ==
        "not-found"``). An integer property outside :data:`INT_RANGES` or not a number, and a
        timestamp in none of the forms of :func:`parse_timestamp`, is None and named in ``bad``
        (a timestamp whose zone is ambiguous, ``CST``, is None and not named: it is a timestamp).

    Raises:
        ValueError: the text is not ``systemctl show`` output (no ``Id`` or no ``ActiveState``).
    """
    props = parse_properties(text)
    missing = [name for name in ("Id", "ActiveState") if not props.get(name)]
    if missing:
        first = next((line for line in text.splitlines() if line.strip()), "")
        shown = repr(first[:80]) if first else "empty output"
        raise ValueError(f"not systemctl show output: no {' and no '.join(missing)} ({shown})")
    bad: list[Unparsable] = []
    ints = {name: _checked_int(props.get(name), name, bad) for name in INT_RANGES}
    for name in TIMESTAMP_PROPERTIES:
        _check_timestamp(props.get(name, ""), name, bad)
    main_pid = ints["MainPID"]
    memory = props.get("MemoryCurrent")
    state = UnitState(
        time=time,
        unit=props["Id"],
        load_state=props.get("LoadState", ""),
        active_state=props["ActiveState"],
        sub_state=props.get("SubState", ""),
        result=props.get("Result", ""),
        n_restarts=ints["NRestarts"],
        main_pid=main_pid if main_pid else None,
        started_at=parse_timestamp(props.get("ExecMainStartTimestamp", "")),
        active_since=parse_timestamp(props.get("ActiveEnterTimestamp", "")),
        memory_bytes=None if ints["MemoryCurrent"] is None else _bytes(memory),
        exec_main_code=ints["ExecMainCode"],
        exec_main_status=ints["ExecMainStatus"],
        inactive_exit_at=parse_timestamp(props.get("InactiveExitTimestamp", "")),
        started_monotonic_us=ints["ExecMainStartTimestampMonotonic"] or None,
        invocation_id=props.get("InvocationID") or None,
        control_group=props.get("ControlGroup") or None,
    )
    return ShowRead(state, tuple(bad))


# --- helpers ----------------------------------------------------------------------------------------


def _int(value: str | None) -> int | None:
    """An integer property, or None when absent, empty, not a number (``[not set]``) or longer
    than 21 characters (``int()`` raises past 4300 digits)."""
    if value is None or len(value.strip()) > 21 or not _INT_RE.fullmatch(value.strip()):
        return None
    return int(value)


#: Values that mean "no number" in an integer property: unset, ``[not set]``, ``infinity``
#: (``MemoryCurrent`` of some versions).
_NO_NUMBER = frozenset({"", "[not set]", "infinity", "n/a"})


def _checked_int(value: str | None, name: str, bad: list[Unparsable]) -> int | None:
    """An integer property in :data:`INT_RANGES`; None when absent or "no number"
    (:data:`_NO_NUMBER`); None and an :class:`Unparsable` in ``bad`` for anything else."""
    if value is None or value.strip() in _NO_NUMBER:
        return None
    cell = value.strip()
    lo, hi = INT_RANGES[name]
    why = None
    if not _INT_RE.fullmatch(cell):
        why = "not an integer"
    elif len(cell) > 21:
        why = f"{len(cell.lstrip('-'))} digits"
    elif not lo <= int(cell) <= hi:
        why = f"out of range {lo}..{hi}"
    if why is not None:
        bad.append(Unparsable(name, _cut(cell), why))
        return None
    return int(cell)


def _check_timestamp(value: str, name: str, bad: list[Unparsable]) -> None:
    """Name a timestamp property in ``bad`` when it is in none of :func:`parse_timestamp`'s forms."""
    cell = value.strip()
    if not cell or cell in ("n/a", "[not set]"):
        return
    unix = _UNIX_RE.fullmatch(cell)
    if unix is not None:
        if len(unix.group(1)) > 12:
            bad.append(Unparsable(name, _cut(cell), f"{len(unix.group(1))} digits"))
        return
    if _TIMESTAMP_RE.fullmatch(cell) is None:
        bad.append(Unparsable(name, _cut(cell), "not a timestamp"))


def _cut(cell: str, limit: int = 40) -> str:
    """A value as shown in a message: one safe line (the one sanitiser), cut to ``limit`` characters."""
    return one_line(cell, max_chars=limit)


def _bytes(value: str | None) -> int | None:
    """``MemoryCurrent``: bytes, None for ``[not set]``, ``infinity`` or ``(uint64) -1``."""
    n = _int(value)
    return None if n is None or n < 0 or n >= _UINT64_MAX else n


def _fraction(digits: str | None) -> float:
    """``177848`` after the decimal point → 0.177848 (microseconds at most)."""
    return int(digits.ljust(6, "0")) / 1_000_000 if digits else 0.0


def _zone_offset_s(zone: str) -> int | None:
    """Seconds east of UTC for a zone printed by ``%Z``, or None when unknown or ambiguous."""
    m = _NUMERIC_ZONE_RE.fullmatch(zone)
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 14 or minutes > 59:
            return None
        sign = -1 if m.group(1) == "-" else 1
        return sign * (hours * 3600 + minutes * 60)
    return ZONE_OFFSETS_S.get(zone)
