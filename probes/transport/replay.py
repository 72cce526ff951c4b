"""A host that replays a recorded scenario: :class:`ReplayRunner` answers the commands upwatch sends
(``journalctl``, ``systemctl show``, ``nvidia-smi``, HTTP probes) from a :class:`Scenario`, on an
injected :class:`~probes.clock.Clock`. The demo and the tests use it; nothing here touches a network.

Scenario time is ``clock.now() - start`` seconds. Every timeline in a scenario is keyed by an offset
in seconds from the scenario's start, so the same scenario plays at any wall time and any speed.

What each emulated command prints, and where that shape comes from (paths relative to
``shared/``; FORMATS = ``reference/FORMATS.md``):

* ``journalctl -o json``: one compact JSON object per line, all values strings except ``MESSAGE``
  (a list of byte values when the text holds a control character other than TAB/LF or invalid
  UTF-8) and any value of ``len(name) + 1 + size >= 4096`` bytes, which is ``null`` unless ``-a``
  is given (systemd v240+ ``logs-show.c``, FORMATS 2.1; observed on systemd 252 in
  ``fixtures/formats/journal/*.jsonl``). ``-n``/``-f``/``--after-cursor`` as FORMATS 2.3.
  Cursors look like the real ``s=…;i=…;b=…;m=…;t=…;x=…`` (FORMATS 2.1) and are opaque.
* ``systemctl show UNIT -p A,B``: ``Name=value`` lines in systemd's D-Bus property order, not the
  ``-p`` order; empty values printed as ``Name=``; timestamps ``Sat 2025-03-08 12:28:58 UTC``;
  ``MemoryCurrent=[not set]`` or bytes; exit 0 even for a unit that does not exist
  (``LoadState=not-found``). Order and values from the real systemd 252 output in
  ``fixtures/formats/systemctl-show/*.txt`` and ``src/core/dbus-service.c``/``dbus-unit.c``.
* ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits [-l S | -lms MS]``: one line per GPU,
  fields joined by ``", "``, in the order asked for, power with two decimals, ``[N/A]`` for a
  value the board does not give; in loop mode every GPU once per interval, no separator line
  (``fixtures/formats/nvidia-smi/query-gpu.h100x8-sglang-tp8.loop.csv``, FORMATS 1.1 and 1.4).
* HTTP (through :meth:`ReplayRunner.http_transport`): connection refused until the server binds,
  then ``GET /health`` with the scenario's status and an empty body; ``GET /v1/models`` and
  ``POST /v1/completions`` in the OpenAI shapes SGLang and vLLM return (FORMATS 3.1-3.3).
* ``systemctl start|stop|restart|kill UNIT`` (the demo's actions) change the simulated host as
  systemd would: ``stop`` ends the start where it is (nothing more of the recording happens; the
  unit is ``inactive``/``dead``, the GPUs free, the port closed; systemd's "Stopping ...",
  "Deactivated successfully.", "Stopped ..." lines); ``start`` (of a unit that is not running) and
  ``restart`` play the recording again from its beginning, with new invocation ids and PIDs and
  ``NRestarts`` counted from 0 (a start by hand flushes systemd's counter); ``kill`` (SIGKILL) ends
  the main process ("Main process exited, code=killed, status=9/KILL", "Failed with result
  'signal'."), then as its ``Restart=`` says: ``no``/``on-success``: ``failed``; otherwise
  ``activating``/``auto-restart`` for ``RestartUSec``, "Scheduled restart job, restart counter is at
  N.", and the recording again with ``NRestarts`` N. A ``start`` or ``restart`` past
  ``StartLimitBurst`` starts within ``StartLimitIntervalUSec`` is refused as systemd refuses it
  (exit 1, "Job for UNIT failed because start of the service was attempted too often." and
  its hint lines, systemd 252 ``src/shared/bus-wait-for-jobs.c``) until
  ``systemctl reset-failed UNIT`` (which also clears a failed state and ``NRestarts``); the automatic
  restart after a kill is not limited. The lines' wording is systemd 252's, as in the recorded
  ``vllm-restart-loop`` scenario (``tui/scenarios/``).

Outages: during ``Scenario.outages`` every call raises ``ProbeError("unreachable")`` and a stream
that is open when one begins ends with ``ProbeError("closed")``, as an SSH connection that drops.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import math
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from probes.clock import Clock
from probes.transport.runner import Completed, ProbeError

if TYPE_CHECKING:
    # Imported where used, not at module load: httpx's ``__init__`` imports its CLI, which loads
    # ``rich`` when it is installed, and no probes module may load rich on import.
    import httpx

# --- the scenario -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalEntry:
    """One journal record of a scenario.

    Attributes:
        offset_s: when the record is written, seconds after the scenario's start.
        fields: the record exactly as ``journalctl -o json -a`` prints it (all values strings except
            ``MESSAGE``, which is a string or a list of byte values), including ``__CURSOR``,
            ``__REALTIME_TIMESTAMP`` (µs since the epoch = scenario start + offset) and
            ``__MONOTONIC_TIMESTAMP``. Build them with :func:`stamp_journal`.
    """

    offset_s: float
    fields: Mapping[str, Any]

    @property
    def cursor(self) -> str:
        """The record's ``__CURSOR``."""
        return str(self.fields["__CURSOR"])


@dataclass(frozen=True)
class Gpu:
    """One GPU of a scenario host: what does not change over the scenario.

    Attributes:
        index: nvidia-smi's index. uuid: ``GPU-…``. name: product name (``NVIDIA H100 80GB HBM3``).
        memory_total_mib: MiB, or None for a board that reports ``[N/A]`` (GB10 unified memory).
        power_limit_w: watts, or None (``[N/A]``).
        idle_power_w, load_power_w: power draw at 0 % and 100 % utilization; the draw follows
            utilization linearly between them.
        idle_temp_c, load_temp_c: temperature (°C) at 0 % and 100 % utilization, likewise.
    """

    index: int
    uuid: str
    name: str
    memory_total_mib: int | None
    power_limit_w: float | None
    idle_power_w: float
    load_power_w: float
    idle_temp_c: int
    load_temp_c: int


@dataclass(frozen=True)
class GpuFrame:
    """GPU keyframe: per-GPU ``memory.used`` (MiB) and ``utilization.gpu`` (%) at ``offset_s``.

    Values between keyframes are interpolated linearly; before the first keyframe the first holds,
    after the last the last. A None is ``[N/A]`` (and is not interpolated).
    """

    offset_s: float
    memory_used_mib: tuple[int | None, ...]
    utilization_pct: tuple[int | None, ...]


@dataclass(frozen=True)
class UnitFrame:
    """From ``offset_s`` on, the unit's ``systemctl show`` properties named in ``props`` have these
    values; the others keep their earlier values (see :data:`UNIT_DEFAULTS` for the first ones).

    Value types: ``str`` as printed; ``int``; ``None`` for an empty value. For ``…Timestamp``
    properties a number is an offset in seconds from the scenario's start (printed as a date), for
    ``…TimestampMonotonic`` likewise (printed as µs of the host's CLOCK_MONOTONIC, ``0`` for None).
    ``MemoryCurrent``: bytes, or None for ``[not set]``.
    """

    offset_s: float
    props: Mapping[str, Any]


@dataclass(frozen=True)
class HealthFrame:
    """From ``offset_s`` on, the server's port answers so: ``"refused"`` (nothing listens) or the
    HTTP status ``GET /health`` returns (``503`` warming up, ``200`` healthy)."""

    offset_s: float
    status: str | int


@dataclass(frozen=True)
class Scenario:
    """One simulated host: its unit, its journal, and how its unit, GPUs and port change over time.

    Attributes:
        host: host name (``gpu-node-1``). unit: systemd unit (``sglang.service``).
        engine: engine id (``sglang``, ``vllm``, ``trtllm`` ...). port: the server's HTTP port.
        model: the served model name (``/v1/models`` ``id``). max_model_len: its context length.
        start: epoch seconds of the scenario's offset 0 (the journal's timestamps are computed from
            it; :meth:`rebased` moves it).
        gpus: the host's GPUs, in index order.
        journal: records in write order (offsets never decrease); see :class:`JournalEntry`.
        unit_timeline: :class:`UnitFrame` keyframes in offset order.
        gpu_timeline: :class:`GpuFrame` keyframes in offset order (one value per GPU each).
        health: :class:`HealthFrame` keyframes in offset order; before the first, ``refused``.
        outages: ``(start_s, end_s)`` offsets during which the host cannot be reached.
        boot_id: 32 hex digits, the ``b=`` of cursors. seqnum_id: 32 hex, the ``s=`` of cursors.
        monotonic_start_us: the host's CLOCK_MONOTONIC (µs since boot) at offset 0.
        timezone: the zone abbreviation ``systemctl show`` prints (the scenario clock is UTC).
        notes: one line on what the scenario shows (for people, not parsed).
    """

    host: str
    unit: str
    engine: str
    port: int
    model: str
    start: float
    gpus: tuple[Gpu, ...]
    journal: tuple[JournalEntry, ...]
    unit_timeline: tuple[UnitFrame, ...]
    gpu_timeline: tuple[GpuFrame, ...]
    health: tuple[HealthFrame, ...]
    outages: tuple[tuple[float, float], ...] = ()
    max_model_len: int = 32768
    boot_id: str = "b0000000000000000000000000000001"
    seqnum_id: str = "5e9e0000000000000000000000000001"
    monotonic_start_us: int = 17_266_158_233
    timezone: str = "UTC"
    notes: str = ""

    def rebased(self, start: float) -> Scenario:
        """The same scenario with offset 0 at ``start``: journal timestamps and cursors recomputed."""
        if start == self.start:
            return self
        journal = stamp_journal(((e.offset_s, e.fields) for e in self.journal), start,
                                seqnum_id=self.seqnum_id, monotonic_start_us=self.monotonic_start_us)
        return replace(self, start=start, journal=journal)

    def unit_props(self, offset_s: float) -> dict[str, Any]:
        """The unit's properties (typed as in :class:`UnitFrame`) at ``offset_s``."""
        props = dict(UNIT_DEFAULTS)
        props["Id"] = self.unit
        for frame in self.unit_timeline:
            if frame.offset_s > offset_s + _EPS:
                break
            props.update(frame.props)
        return props

    def health_at(self, offset_s: float) -> str | int:
        """``"refused"`` or the ``/health`` status at ``offset_s``."""
        status: str | int = "refused"
        for frame in self.health:
            if frame.offset_s > offset_s + _EPS:
                break
            status = frame.status
        return status

    def gpu_at(self, offset_s: float) -> list[tuple[int | None, int | None]]:
        """Per GPU ``(memory.used MiB, utilization.gpu %)`` at ``offset_s``, interpolated."""
        frames = self.gpu_timeline
        if not frames:
            return [(0, 0) for _ in self.gpus]
        offsets = [f.offset_s for f in frames]
        i = bisect.bisect_right(offsets, offset_s)
        if i == 0:
            return list(zip(frames[0].memory_used_mib, frames[0].utilization_pct))
        if i == len(frames):
            return list(zip(frames[-1].memory_used_mib, frames[-1].utilization_pct))
        a, b = frames[i - 1], frames[i]
        span = b.offset_s - a.offset_s
        w = 0.0 if span <= 0 else (offset_s - a.offset_s) / span
        return [(_lerp(ma, mb, w), _lerp(ua, ub, w)) for ma, mb, ua, ub in
                zip(a.memory_used_mib, b.memory_used_mib, a.utilization_pct, b.utilization_pct)]

    @property
    def duration_s(self) -> float:
        """The offset of the last thing that happens (journal record or keyframe)."""
        ends = [0.0]
        ends += [e.offset_s for e in self.journal[-1:]]
        ends += [f.offset_s for f in self.unit_timeline[-1:]]
        ends += [f.offset_s for f in self.gpu_timeline[-1:]]
        ends += [f.offset_s for f in self.health[-1:]]
        return max(ends)


_EPS = 1e-6


def _lerp(a: int | None, b: int | None, w: float) -> int | None:
    if a is None or b is None:
        return a if w < 1 else b
    return int(round(a + (b - a) * w))


#: A loaded service that never ran, as real systemd 252 shows it
#: (``fixtures/formats/systemctl-show/inactive-dead-never-started.txt``), plus the extra properties
#: :data:`PROPERTY_ORDER` knows, at their systemd defaults. Typed as in :class:`UnitFrame`.
UNIT_DEFAULTS: Mapping[str, Any] = {
    "Type": "simple",
    "Restart": "on-failure",
    "RestartUSec": "100ms",
    "TimeoutStartUSec": "1min 30s",
    "TimeoutStopUSec": "1min 30s",
    "MainPID": 0,
    "ControlPID": 0,
    "StatusText": None,
    "Result": "success",
    "NRestarts": 0,
    "ExecMainStartTimestamp": None,
    "ExecMainStartTimestampMonotonic": None,
    "ExecMainExitTimestamp": None,
    "ExecMainExitTimestampMonotonic": None,
    "ExecMainPID": 0,
    "ExecMainCode": 0,
    "ExecMainStatus": 0,
    "Slice": "system.slice",
    "ControlGroup": None,
    "MemoryCurrent": None,
    "Id": "",
    "Description": None,
    "LoadState": "loaded",
    "ActiveState": "inactive",
    "SubState": "dead",
    "FragmentPath": None,
    "UnitFileState": "enabled",
    "StateChangeTimestamp": None,
    "StateChangeTimestampMonotonic": None,
    "InactiveExitTimestamp": None,
    "InactiveExitTimestampMonotonic": None,
    "ActiveEnterTimestamp": None,
    "ActiveEnterTimestampMonotonic": None,
    "ActiveExitTimestamp": None,
    "ActiveExitTimestampMonotonic": None,
    "InactiveEnterTimestamp": None,
    "InactiveEnterTimestampMonotonic": None,
    "StartLimitIntervalUSec": "10s",
    "StartLimitBurst": 5,
    "InvocationID": None,
}

#: The order ``systemctl show`` prints these properties in: the Service interface's D-Bus vtable,
#: its cgroup part, then the Unit interface (systemd 252 ``src/core/dbus-service.c``,
#: ``dbus-cgroup.c``, ``dbus-unit.c``). The 20 properties of the real files in
#: ``fixtures/formats/systemctl-show/`` come out in exactly this relative order.
PROPERTY_ORDER: tuple[str, ...] = tuple(UNIT_DEFAULTS)

#: What a unit that does not exist shows (``fixtures/formats/systemctl-show/not-found.txt``).
_NOT_FOUND = {"Restart": "no", "LoadState": "not-found", "UnitFileState": None, "Slice": None}


def stamp_journal(records: Iterable[tuple[float, Mapping[str, Any]]], start: float, *,
                  seqnum_id: str, monotonic_start_us: int) -> tuple[JournalEntry, ...]:
    """Give records their place in a journal: realtime/monotonic timestamps and cursors.

    Args:
        records: ``(offset_s, fields)`` pairs; fields in ``journalctl -o json -a`` form (any
            ``__CURSOR``/``__REALTIME_TIMESTAMP``/``__MONOTONIC_TIMESTAMP``/``_SOURCE_REALTIME_TIMESTAMP``
            in them is replaced; key order is kept, missing keys are added first).
        start: epoch seconds of offset 0.
        seqnum_id: 32 hex digits, the journal file's sequence-number id (``s=`` of the cursor).
        monotonic_start_us: CLOCK_MONOTONIC in µs at offset 0.

    Returns:
        The entries sorted by offset (stable), numbered from 1 in that order.
    """
    ordered = sorted(records, key=lambda r: r[0])
    out: list[JournalEntry] = []
    for seq, (offset, fields) in enumerate(ordered, 1):
        realtime = int(round((start + offset) * 1_000_000))
        mono = monotonic_start_us + int(round(offset * 1_000_000))
        boot = str(fields.get("_BOOT_ID") or "b0000000000000000000000000000001")
        msg = fields.get("MESSAGE")
        digest = hashlib.blake2b(f"{seqnum_id}|{seq}|{realtime}|{msg!r}".encode(), digest_size=8).hexdigest()
        cursor = f"s={seqnum_id};i={seq:x};b={boot};m={mono:x};t={realtime:x};x={digest}"
        stamped = {"__CURSOR": cursor, "__REALTIME_TIMESTAMP": str(realtime), "__MONOTONIC_TIMESTAMP": str(mono)}
        new: dict[str, Any] = {k: v for k, v in stamped.items() if k not in fields}
        for k, v in fields.items():
            if k in stamped:
                new[k] = stamped[k]
            elif k == "_SOURCE_REALTIME_TIMESTAMP":
                new[k] = str(realtime - 61)  # journald receives a native entry ~60 µs after it is sent
            else:
                new[k] = v
        out.append(JournalEntry(float(offset), new))
    return tuple(out)


def journal_value(text: str | bytes) -> str | list[int]:
    """A field value as ``journalctl -o json`` writes it: the string when it is valid UTF-8 with no
    control character but TAB and LF (and no DEL or U+0080-U+009F), else the list of its bytes
    (systemd ``utf8_is_printable_newline``; FORMATS 2.1)."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)
    for ch in s:
        o = ord(ch)
        if (o < 32 and ch not in "\t\n") or 0x7F <= o <= 0x9F:
            return list(raw)
    return s


@dataclass(frozen=True)
class _Segment:
    """A stretch of the simulated host's life, from ``begin`` (offset from the runner's start) to
    the next segment's: the recording playing with its offset 0 at ``shift`` (``epoch`` 0: as
    given; 1, 2 ...: replays begun by actions, ``restarts_base`` added to its ``NRestarts``), or,
    with ``shift`` None, the unit down with fixed ``props``."""

    begin: float
    shift: float | None
    epoch: int
    props: Mapping[str, Any] | None = None
    restarts_base: int = 0


_SPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _systemd_span_s(text: str) -> float:
    """A time span as ``systemctl show`` prints it (``100ms``, ``10s``, ``1min 30s``; systemd's
    ``format_timespan``) in seconds; ``infinity`` and anything unreadable: 0."""
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(us|ms|min|s|h|d)\b", text):
        total += float(num) * _SPAN_UNITS[unit]
    return total


# --- the runner ---------------------------------------------------------------------------------


class ReplayRunner:
    """A :class:`~probes.transport.runner.Runner` whose host is a :class:`Scenario`.

    Args:
        scenario: the host to play.
        clock: the clock; scenario time is ``clock.now() - start`` and every wait is
            ``clock.sleep`` (a :class:`~probes.clock.ManualClock` makes tests exact).
        start: epoch seconds of scenario offset 0 (default: ``clock.now()`` now). The scenario is
            rebased to it, so its journal timestamps agree with the clock.

    Accepted commands (``sudo``/``sudo -n`` in front is ignored):

    * ``journalctl [-u UNIT]… [-o json|cat] [-a] [-f] [-n N|-n all] [--after-cursor=C | --cursor=C
      | --since=@EPOCH] [--output-fields=A,B] [--show-cursor] [--no-pager] [-q] [-b] [--merge]``
      (a cursor or ``--since`` decides where the output starts; ``-n`` applies only without them;
      with ``-f`` and no ``-n`` the backlog is 10 records, without ``-f`` everything)
    * ``systemctl show [UNIT…] [-p A,B]… [--property=A,B] [--value] [--no-pager]``,
      ``systemctl is-active UNIT``, ``systemctl is-failed UNIT``
    * ``systemctl start|stop|restart|reset-failed UNIT``, ``systemctl kill [-s SIGKILL] UNIT``: they
      change the simulated host (see the module docstring); another unit: exit 5, "Unit X not loaded."
    * ``nvidia-smi --query-gpu=F,… --format=csv[,noheader][,nounits] [-i IDS] [-l [S] | -lms MS]``

    ``stream`` takes the journalctl and nvidia-smi forms (``-f``/``-l`` keep the stream open);
    ``run`` takes every form without ``-f``/``-l``. Any other command: ``run`` answers like a shell
    that cannot find it (exit 127), ``stream`` raises ``ProbeError("command")``.
    """

    def __init__(self, scenario: Scenario, clock: Clock, *, start: float | None = None) -> None:
        self.clock = clock
        self.start = clock.now() if start is None else float(start)
        self.scenario = scenario.rebased(self.start)
        self.host = scenario.host
        self._closed = False
        self._close_event = asyncio.Event()
        self._forwards: dict[int, int] = {}
        self._next_port = 41_000 + (int(hashlib.blake2b(self.host.encode(), digest_size=2).hexdigest(), 16) % 1000) * 10
        #: What the host does, in order: the recording as given, then what each action made of it.
        self._segments: list[_Segment] = [_Segment(begin=-math.inf, shift=0.0, epoch=0)]
        self._epochs = 0
        self._limit_reset_at = -math.inf  # the last ``systemctl reset-failed`` (scenario offset)
        #: The whole journal, past and scheduled: the recording, cut and extended by the actions.
        self._journal: tuple[JournalEntry, ...] = self.scenario.journal
        self._cursor_index = {e.cursor: i for i, e in enumerate(self._journal)}
        self._changed = asyncio.Event()  # set (and replaced) when an action changes what is scheduled

    # --- time ---------------------------------------------------------------------------------

    def now_s(self) -> float:
        """Scenario time: seconds since offset 0."""
        return self.clock.now() - self.start

    def _outage(self, t: float) -> tuple[float, float] | None:
        for a, b in self.scenario.outages:
            if a <= t + _EPS and t < b - _EPS:
                return (a, b)
        return None

    def _next_outage(self, t: float) -> float:
        later = [a for a, _ in self.scenario.outages if a > t + _EPS]
        return min(later) if later else math.inf

    def _check(self, what: str) -> None:
        if self._closed:
            raise ProbeError("closed", f"{self.host}: connection closed")
        t = self.now_s()
        if self._outage(t) is not None:
            raise ProbeError("unreachable", f"{self.host}: connect failed: [Errno 113] No route to host ({what})")

    async def _sleep(self, seconds: float) -> None:
        """Sleep on the clock, waking early when the runner is closed."""
        if self._closed:
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        closer = asyncio.ensure_future(self._close_event.wait())
        changed = asyncio.ensure_future(self._changed.wait())  # an action rescheduled what comes
        try:
            await asyncio.wait({sleeper, closer, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, closer, changed):
                if not task.done():
                    task.cancel()

    async def _wait_until(self, offset_s: float) -> None:
        """Sleep until scenario time ``offset_s`` or the next outage, whichever comes first
        (at most an hour at a time; sooner when an action changes what is scheduled)."""
        t = self.now_s()
        until = min(offset_s, self._next_outage(t))
        await self._sleep(min(3600.0, max(0.0, until - t)))

    def _check_open(self, name: str) -> bool:
        """For an open stream: False when the runner was closed (end quietly); raises when an
        outage began (the connection dropped)."""
        if self._closed:
            return False
        if self._outage(self.now_s()) is not None:
            raise ProbeError("closed", f"{self.host}: connection lost while {name} was running")
        return True

    # --- Runner protocol ------------------------------------------------------------------------

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        """Run a command to completion (see the class docstring for the forms).

        Raises:
            ProbeError: ``unreachable`` during an outage, ``closed`` after :meth:`close`,
                ``command`` for a follow/loop form that would never end.
        """
        argv = tuple(argv)
        self._check(argv[0] if argv else "")
        cmd = _strip_sudo(argv)
        if not cmd:
            return Completed(argv, 0, b"")
        name = cmd[0].rsplit("/", 1)[-1]
        if name == "journalctl":
            try:
                opts = _parse_journalctl(cmd[1:])
            except _UsageError as exc:
                return Completed(argv, 1, b"", f"{exc}\n".encode())
            if opts.follow:
                raise ProbeError("command", "journalctl -f never ends: use stream()")
            try:
                lines = self._journal_backlog(opts)
            except _UsageError as exc:
                return Completed(argv, 1, b"", f"{exc}\n".encode())
            out = [self._render(e, opts) for e in lines]
            if opts.show_cursor and lines:
                out.append(f"-- cursor: {lines[-1].cursor}".encode())
            return Completed(argv, 0, b"".join(line + b"\n" for line in out))
        if name == "systemctl":
            return self._systemctl(argv, cmd[1:])
        if name == "nvidia-smi":
            try:
                q = _parse_nvidia_smi(cmd[1:])
            except _UsageError as exc:
                return Completed(argv, exc.code, f"{exc}\n".encode())
            if q.interval_s is not None:
                raise ProbeError("command", "nvidia-smi -l never ends: use stream()")
            if not self.scenario.gpus:
                return Completed(argv, 6, b"No devices were found\n")  # nvidia-smi/error.no-devices.txt
            return Completed(argv, 0, b"".join(line + b"\n" for line in self._gpu_lines(q, header=True)))
        return Completed(argv, 127, b"", f"sh: 1: {cmd[0]}: not found".encode())

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Yield the output lines (bytes, no newline) of ``journalctl …`` or ``nvidia-smi …`` as they
        come on the scenario clock.

        Raises (on the first ``__anext__``):
            ProbeError: ``unreachable`` during an outage; ``closed`` when an outage begins while the
                stream is open; ``command`` for an unknown command or bad options.
        """
        return self._stream(tuple(argv))

    async def _stream(self, argv: tuple[str, ...]) -> AsyncIterator[bytes]:
        self._check(argv[0] if argv else "")
        cmd = _strip_sudo(argv)
        name = cmd[0].rsplit("/", 1)[-1] if cmd else ""
        if name == "journalctl":
            try:
                opts = _parse_journalctl(cmd[1:])
                entries = self._journal_backlog(opts, all_after=True)
            except _UsageError as exc:
                raise ProbeError("command", f"journalctl exited 1: {exc}") from None
            first = self._cursor_index[entries[0].cursor] if entries else len(self._journal)
            async for line in self._journal_follow(opts, first):
                yield line
            return
        if name == "nvidia-smi":
            try:
                q = _parse_nvidia_smi(cmd[1:])
            except _UsageError as exc:
                raise ProbeError("command", f"nvidia-smi exited {exc.code}: {exc}") from None
            async for line in self._gpu_follow(q):
                yield line
            return
        raise ProbeError("command", f"sh: 1: {cmd[0] if cmd else ''}: not found (exit 127)")

    async def forward(self, remote_port: int) -> int:
        """A fake local port standing for the host's ``remote_port`` (only meaningful with
        :meth:`http_transport`).

        Raises:
            ProbeError: ``unreachable`` during an outage, ``closed`` after :meth:`close`.
        """
        self._check(f"forward {remote_port}")
        for local, remote in self._forwards.items():
            if remote == remote_port:
                return local
        local = self._next_port + len(self._forwards)
        self._forwards[local] = remote_port
        return local

    def http_transport(self) -> httpx.MockTransport:
        """An ``httpx`` transport answering from the scenario's health timeline.

        A request to a port :meth:`forward` returned (or to the server's own port) gets:

        * nothing listening (``refused``), during an outage, or another port: ``httpx.ConnectError``
          ``[Errno 111] Connection refused``;
        * ``GET /health``: the timeline's status, empty body (SGLang's 503 while starting, 200 once
          up; vLLM's 200);
        * ``GET /v1/models``: 200 with ``{"object":"list","data":[{...,"owned_by":"sglang"|"vllm"}]}``;
        * ``POST /v1/completions``: when ``/health`` is 200, a one-token OpenAI completion; else the
          ``/health`` status with an empty body;
        * anything else: 404 ``{"detail":"Not Found"}`` (FastAPI's).
        """
        import httpx

        return httpx.MockTransport(self._handle)

    async def close(self) -> None:
        """End every open stream (they stop without error); later calls raise ``closed``."""
        self._closed = True
        self._close_event.set()

    # --- journalctl -----------------------------------------------------------------------------

    def _journal_backlog(self, opts: _JournalOpts, all_after: bool = False) -> list[JournalEntry]:
        """The entries of this query from the first one to show: up to now, or (``all_after``) up
        to the end of the scenario, for a follower to pace."""
        t = self.now_s()
        entries = [e for e in self._journal if _matches(e.fields, opts.units)]
        if opts.after_cursor is not None or opts.cursor is not None:
            c = opts.after_cursor if opts.after_cursor is not None else opts.cursor
            first = self._seek_cursor(entries, c, inclusive=opts.cursor is not None)
            entries = entries[first:]
        elif opts.since is not None:
            since_us = int(opts.since * 1_000_000)
            entries = [e for e in entries if int(e.fields["__REALTIME_TIMESTAMP"]) >= since_us]
        else:
            n = opts.lines
            if n is None and opts.follow and not opts.lines_set:
                n = 10
            if n is not None:
                past = [e for e in entries if e.offset_s <= t + _EPS]
                keep = past[len(past) - n:] if n > 0 else []
                entries = keep + entries[len(past):]
        if all_after:
            return entries
        return [e for e in entries if e.offset_s <= t + _EPS]

    def _seek_cursor(self, entries: list[JournalEntry], cursor: str, inclusive: bool) -> int:
        parts = dict(p.split("=", 1) for p in cursor.split(";") if "=" in p)
        if "s" not in parts or "i" not in parts or not re.fullmatch(r"[0-9a-fA-F]+", parts["i"]):
            raise _UsageError("Failed to seek to cursor: Invalid argument")
        if parts["s"] == self.scenario.seqnum_id:
            seq = int(parts["i"], 16)
            key = [int(e.cursor.split(";i=", 1)[1].split(";", 1)[0], 16) for e in entries]
            return bisect.bisect_left(key, seq) if inclusive else bisect.bisect_right(key, seq)
        # Another journal file: journalctl seeks to the nearest realtime position, silently.
        t_us = int(parts.get("t", "0"), 16) if re.fullmatch(r"[0-9a-fA-F]+", parts.get("t", "")) else 0
        for i, e in enumerate(entries):
            rt = int(e.fields["__REALTIME_TIMESTAMP"])
            if rt > t_us or (inclusive and rt == t_us):
                return i
        return len(entries)

    async def _journal_follow(self, opts: _JournalOpts, first: int) -> AsyncIterator[bytes]:
        """The entries of ``self._journal`` from index ``first`` that match ``opts``, each when its
        time comes. An action only ever changes what lies in the future, so the index stays valid
        when the journal is replaced."""
        i = first
        last: JournalEntry | None = None
        while True:
            if not self._check_open("journalctl"):
                return
            t = self.now_s()
            journal = self._journal
            if i < len(journal) and journal[i].offset_s <= t + _EPS:
                e = journal[i]
                i += 1
                if _matches(e.fields, opts.units):
                    last = e
                    yield self._render(e, opts)
                continue
            if not opts.follow:
                if opts.show_cursor and last is not None:
                    yield f"-- cursor: {last.cursor}".encode()
                return
            await self._wait_until(journal[i].offset_s if i < len(journal) else math.inf)

    def _render(self, entry: JournalEntry, opts: _JournalOpts) -> bytes:
        fields = entry.fields
        if opts.output == "cat":
            msg = fields.get("MESSAGE")
            if isinstance(msg, list):
                return bytes(msg)
            return b"" if msg is None else str(msg).encode()
        out: dict[str, Any] = {}
        for k, v in fields.items():
            if opts.output_fields is not None and k not in opts.output_fields and k not in _ALWAYS_FIELDS:
                continue
            if not opts.show_all and v is not None:
                size = len(v) if isinstance(v, list) else len(str(v).encode())
                if len(k) + 1 + size >= 4096:
                    v = None
            out[k] = v
        return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()

    # --- systemctl ------------------------------------------------------------------------------

    def _systemctl(self, argv: tuple[str, ...], args: tuple[str, ...]) -> Completed:
        verb = next((a for a in args if not a.startswith("-")), None)
        rest = list(args)
        if verb is not None:
            rest.remove(verb)
        if verb == "show":
            try:
                units, props, value_only = _parse_show(rest)
            except _UsageError as exc:
                return Completed(argv, 1, b"", f"{exc}\n".encode())
            blocks = [self._show_one(u, props, value_only) for u in (units or [self.scenario.unit])]
            return Completed(argv, 0, "\n".join(blocks).encode())
        if verb in ("is-active", "is-failed"):
            units = [_unit_name(a) for a in rest if not a.startswith("-")] or [self.scenario.unit]
            states = [str(self._unit_at(u)["ActiveState"]) for u in units]
            want = ("active", "reloading") if verb == "is-active" else ("failed",)
            ok = any(s in want for s in states)
            return Completed(argv, 0 if ok else (3 if verb == "is-active" else 1),
                             "".join(s + "\n" for s in states).encode())
        if verb in ("start", "stop", "restart", "kill", "reset-failed"):
            return self._act(argv, verb, rest)
        if verb == "reload":
            return Completed(argv, 1, b"",
                             f"upwatch replay: {self.host} is a recorded scenario; "
                             f"`systemctl {verb}` is not replayed\n".encode())
        return Completed(argv, 1, b"", f"Unknown command verb {verb}.\n".encode())

    def _unit_at(self, unit: str) -> dict[str, Any]:
        if unit == self.scenario.unit:
            return self.unit_props(self.now_s())
        props = dict(UNIT_DEFAULTS)
        props.update(_NOT_FOUND)
        props["Id"] = unit
        return props

    def _show_one(self, unit: str, wanted: list[str] | None, value_only: bool) -> str:
        props = self._unit_at(unit)
        names = [p for p in PROPERTY_ORDER if wanted is None or p in wanted]
        lines = []
        for name in names:
            value = self._format_prop(name, props.get(name))
            lines.append(value if value_only else f"{name}={value}")
        return "".join(line + "\n" for line in lines)

    def _format_prop(self, name: str, value: Any) -> str:
        if name.endswith("TimestampMonotonic"):
            if value is None:
                return "0"
            return str(self.scenario.monotonic_start_us + int(round(float(value) * 1_000_000)))
        if name.endswith("Timestamp"):
            if value is None:
                return ""
            return _systemd_time(self.start + float(value), self.scenario.timezone)
        if name == "MemoryCurrent":
            return "[not set]" if value is None else str(int(value))
        if value is None:
            return ""
        if isinstance(value, bool):
            return "yes" if value else "no"
        return str(value)

    # --- the simulated host: what the actions change ---------------------------------------------

    def _segment_at(self, t: float) -> _Segment:
        seg = self._segments[0]
        for s in self._segments:
            if s.begin > t + _EPS:
                break
            seg = s
        return seg

    def unit_props(self, offset_s: float) -> dict[str, Any]:
        """The unit's properties (typed as in :class:`UnitFrame`, timestamps as offsets from this
        runner's start) at ``offset_s``: the recording's, as the actions since have made them."""
        seg = self._segment_at(offset_s)
        if seg.shift is None:
            return dict(seg.props or {})
        props = self.scenario.unit_props(offset_s - seg.shift)
        if seg.epoch:
            for k, v in props.items():
                if k.endswith(("Timestamp", "TimestampMonotonic")) and isinstance(v, (int, float)):
                    props[k] = v + seg.shift
            for k in ("MainPID", "ExecMainPID"):
                props[k] = self._pid(props[k], seg.epoch)
            if props.get("InvocationID"):
                props["InvocationID"] = self._invocation(str(props["InvocationID"]), seg.epoch)
            props["NRestarts"] = int(props.get("NRestarts") or 0) + seg.restarts_base
        return props

    def gpu_at(self, offset_s: float) -> list[tuple[int | None, int | None]]:
        """Per GPU ``(memory.used MiB, utilization.gpu %)`` at ``offset_s``: the recording's while it
        plays, 0 and 0 while the unit is down."""
        seg = self._segment_at(offset_s)
        if seg.shift is None:
            return [(0, 0) for _ in self.scenario.gpus]
        return self.scenario.gpu_at(offset_s - seg.shift)

    def health_at(self, offset_s: float) -> str | int:
        """``"refused"`` or the ``/health`` status at ``offset_s`` (refused while the unit is down)."""
        seg = self._segment_at(offset_s)
        if seg.shift is None:
            return "refused"
        return self.scenario.health_at(offset_s - seg.shift)

    @staticmethod
    def _pid(pid: Any, epoch: int) -> Any:
        return pid + 100_000 * epoch if isinstance(pid, int) and pid > 0 and epoch else pid

    def _invocation(self, inv: str, epoch: int) -> str:
        if not epoch:
            return inv
        return hashlib.blake2b(f"{self.host}|{epoch}|{inv}".encode(), digest_size=16).hexdigest()

    def _act(self, argv: tuple[str, ...], verb: str, rest: list[str]) -> Completed:
        """``systemctl start|stop|restart|kill [-s SIG] UNIT`` on the simulated host (module doc)."""
        units = [_unit_name(a) for a in rest if not a.startswith("-") and a not in ("SIGKILL", "KILL", "9")]
        if not units:
            return Completed(argv, 1, b"", b"Too few arguments.\n")
        unit = units[0]
        if unit != self.scenario.unit:
            word = {"kill": "kill unit"}.get(verb, verb)
            return Completed(argv, 5, b"", f"Failed to {word} {unit}: Unit {unit} not loaded.\n".encode())
        t = self.now_s()
        props = self.unit_props(t)
        running = props.get("ActiveState") in ("active", "activating", "reloading") \
            and props.get("SubState") != "auto-restart"
        pending = props.get("SubState") == "auto-restart"
        lines: list[tuple[float, str]] = []
        if verb == "reset-failed":
            self._limit_reset_at = t  # systemd resets the start rate limit ...
            if props.get("ActiveState") == "failed":  # ... and a failed unit's state, result and counter
                cleared = dict(props)
                cleared.update({"ActiveState": "inactive", "SubState": "dead", "Result": "success", "NRestarts": 0})
                self._cut(t)
                self._segments.append(_Segment(begin=t, shift=None, epoch=self._segment_at(t).epoch, props=cleared))
            return Completed(argv, 0, b"")
        if verb in ("start", "restart") and not running and self._start_limited(t, props):
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
                self._down(t, props, "failed", "failed", result="signal", code=2, status=9)
            else:
                wait = _systemd_span_s(str(props.get("RestartUSec") or "100ms"))
                self._down(t, props, "activating", "auto-restart", result="signal", code=2, status=9)
                n = int(props.get("NRestarts") or 0) + 1
                lines += [(t + wait, f"{unit}: Scheduled restart job, restart counter is at {n}."),
                          (t + wait + 0.0003, f"Stopped {self._described(unit, props)}.")]
                self._play(t + wait + 0.008, restarts_base=n)
        elif verb == "stop":
            if not running and not pending:
                return Completed(argv, 0, b"")  # already stopped (a failed unit stays failed)
            if running:
                lines.append((t, f"Stopping {self._described(unit, props)}..."))
            lines += [(t + 0.2, f"{unit}: Deactivated successfully."),
                      (t + 0.2002, f"Stopped {self._described(unit, props)}.")]
            self._down(t, props, "inactive", "dead", result="success", code=2, status=15)
        elif verb == "start" and running:
            return Completed(argv, 0, b"")  # it runs already: systemctl has nothing to do
        else:  # restart, or start of a unit that is not running
            if running:
                lines += [(t, f"Stopping {self._described(unit, props)}..."),
                          (t + 0.2, f"{unit}: Deactivated successfully."),
                          (t + 0.2002, f"Stopped {self._described(unit, props)}.")]
                self._down(t, props, "inactive", "dead", result="success", code=2, status=15)
                self._play(t + 0.25, restarts_base=0)
            else:
                self._play(t + 0.01, restarts_base=0)
        self._reschedule(t, lines, props)
        return Completed(argv, 0, b"")

    def _start_limited(self, t: float, props: Mapping[str, Any]) -> bool:
        """Whether a start now would pass ``StartLimitBurst`` starts within ``StartLimitIntervalUSec``
        (counted from the journal's "Started ..." lines of PID 1, since the last ``reset-failed``)."""
        burst = int(props.get("StartLimitBurst") or 0)
        interval = _systemd_span_s(str(props.get("StartLimitIntervalUSec") or "0"))
        if burst <= 0 or interval <= 0:
            return False
        since = max(t - interval, self._limit_reset_at)
        started = sum(1 for e in self._journal
                      if since < e.offset_s <= t + _EPS and e.fields.get("_PID") == "1"
                      and e.fields.get("UNIT") == self.scenario.unit
                      and str(e.fields.get("MESSAGE", "")).startswith("Started "))
        return started >= burst

    def _described(self, unit: str, props: Mapping[str, Any]) -> str:
        desc = props.get("Description")
        return f"{unit} - {desc}" if desc else unit

    def _down(self, t: float, props: Mapping[str, Any], active: str, sub: str, *, result: str, code: int,
              status: int) -> None:
        """From ``t`` the unit's process is gone: properties fixed as systemd leaves them."""
        down = dict(props)
        down.update({"ActiveState": active, "SubState": sub, "MainPID": 0, "ControlPID": 0, "Result": result,
                     "ExecMainExitTimestamp": t, "ExecMainExitTimestampMonotonic": t,
                     "ExecMainCode": code, "ExecMainStatus": status, "StateChangeTimestamp": t,
                     "StateChangeTimestampMonotonic": t, "ActiveExitTimestamp": t,
                     "ActiveExitTimestampMonotonic": t, "ControlGroup": None, "MemoryCurrent": None})
        if active != "activating":
            down.update({"InactiveEnterTimestamp": t, "InactiveEnterTimestampMonotonic": t})
        self._cut(t)
        self._segments.append(_Segment(begin=t, shift=None, epoch=self._segment_at(t).epoch, props=down))

    def _play(self, t: float, restarts_base: int) -> None:
        """From ``t`` the recording plays again from its beginning, as a new invocation."""
        self._cut(t)
        self._epochs += 1
        self._segments.append(_Segment(begin=t, shift=t, epoch=self._epochs, restarts_base=restarts_base))

    def _cut(self, t: float) -> None:
        """Nothing scheduled after ``t`` happens any more."""
        self._segments = [s for s in self._segments if s.begin <= t + _EPS]

    def _reschedule(self, t: float, lines: list[tuple[float, str]], props: Mapping[str, Any]) -> None:
        """The journal: what already happened (up to ``t``), ``lines`` from systemd, then the
        recording's journal for each replay begun since; followers are woken."""
        kept = [(e.offset_s, e.fields) for e in self._journal if e.offset_s <= t + _EPS]
        inv = props.get("InvocationID")
        new: list[tuple[float, Mapping[str, Any]]] = [(at, self._systemd_fields(text, inv)) for at, text in lines]
        for seg in self._segments:
            if seg.shift is None or not seg.epoch or seg.begin < t - _EPS:
                continue  # only the replays this action began: what began earlier is cut at ``t``
            for e in self.scenario.journal:
                fields = dict(e.fields)
                for k in ("_SYSTEMD_INVOCATION_ID", "INVOCATION_ID"):
                    if fields.get(k):
                        fields[k] = self._invocation(str(fields[k]), seg.epoch)
                if fields.get("_PID") and fields["_PID"] != "1" and str(fields["_PID"]).isdigit():
                    fields["_PID"] = str(self._pid(int(fields["_PID"]), seg.epoch))
                new.append((e.offset_s + seg.shift, fields))
        self._journal = stamp_journal([*kept, *sorted(new, key=lambda r: r[0])], self.start,
                                      seqnum_id=self.scenario.seqnum_id,
                                      monotonic_start_us=self.scenario.monotonic_start_us)
        self._cursor_index = {e.cursor: i for i, e in enumerate(self._journal)}
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _systemd_fields(self, text: str, invocation: Any) -> dict[str, Any]:
        """A message of PID 1 about the unit, with the fields of the recording's own (its first
        ``Started ...`` line) or systemd's usual ones."""
        template = next((e.fields for e in self.scenario.journal if e.fields.get("_PID") == "1"
                         and e.fields.get("UNIT") == self.scenario.unit), None)
        keep = ("_BOOT_ID", "_MACHINE_ID", "_HOSTNAME", "_UID", "_GID", "_COMM", "_EXE", "_CMDLINE",
                "_CAP_EFFECTIVE", "_SYSTEMD_CGROUP", "_SYSTEMD_SLICE", "_RUNTIME_SCOPE", "TID")
        fields: dict[str, Any] = {k: template[k] for k in keep if template is not None and k in template}
        fields.update({"_TRANSPORT": "journal", "_PID": "1", "_SYSTEMD_UNIT": "init.scope", "PRIORITY": "6",
                       "SYSLOG_FACILITY": "3", "SYSLOG_IDENTIFIER": "systemd", "UNIT": self.scenario.unit,
                       "MESSAGE": text})
        if invocation:
            fields["INVOCATION_ID"] = str(invocation)
        return fields

    # --- nvidia-smi -----------------------------------------------------------------------------

    def _gpu_lines(self, q: _GpuQuery, header: bool) -> list[bytes]:
        t = self.now_s()
        values = self.gpu_at(t)
        out = []
        if header and not q.noheader:
            out.append(", ".join(_header(f, q.nounits) for f in q.fields).encode())
        for gpu, (mem, util) in zip(self.scenario.gpus, values):
            if q.ids is not None and str(gpu.index) not in q.ids and gpu.uuid not in q.ids:
                continue
            cells = [_gpu_cell(f, gpu, mem, util, len(self.scenario.gpus), q.nounits) for f in q.fields]
            out.append(", ".join(cells).encode())
        return out

    async def _gpu_follow(self, q: _GpuQuery) -> AsyncIterator[bytes]:
        first = True
        while True:
            if not self._check_open("nvidia-smi"):
                return
            for line in self._gpu_lines(q, header=first):
                yield line
            first = False
            if q.interval_s is None:
                return
            await self._wait_until(self.now_s() + q.interval_s)
            # An outage that began during the wait ends the stream at the top of the loop; a wait cut
            # short by one would otherwise sample early.

    # --- HTTP -------------------------------------------------------------------------------------

    def _handle(self, request: httpx.Request) -> httpx.Response:
        import httpx

        t = self.now_s()
        port = request.url.port
        remote = self._forwards.get(port, port) if port is not None else self.scenario.port
        status = self.health_at(t)
        if self._closed or self._outage(t) is not None or remote != self.scenario.port or status == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        code = int(status)
        path = request.url.path
        method = request.method
        if path == "/health":
            if method not in ("GET", "HEAD"):
                return _json_response(405, {"detail": "Method Not Allowed"})
            return httpx.Response(code, content=b"")
        if path == "/v1/models":
            if method != "GET":
                return _json_response(405, {"detail": "Method Not Allowed"})
            return _json_response(200, self._models_body())
        if path == "/v1/completions":
            if method != "POST":
                return _json_response(405, {"detail": "Method Not Allowed"})
            if code != 200:
                return httpx.Response(code, content=b"")
            return _json_response(200, self._completion_body(request))
        return _json_response(404, {"detail": "Not Found"})

    def _owner(self) -> str:
        return {"sglang": "sglang", "vllm": "vllm", "trtllm": "tensorrt_llm"}.get(self.scenario.engine,
                                                                                  self.scenario.engine)

    def _models_body(self) -> dict[str, Any]:
        s = self.scenario
        card: dict[str, Any] = {"id": s.model, "object": "model", "created": int(self.clock.now()),
                                "owned_by": self._owner(), "root": s.model, "parent": None,
                                "max_model_len": s.max_model_len}
        if s.engine == "vllm":
            card["permission"] = [{
                "id": "modelperm-" + hashlib.blake2b(s.host.encode(), digest_size=16).hexdigest(),
                "object": "model_permission", "created": int(self.clock.now()), "allow_create_engine": False,
                "allow_sampling": True, "allow_logprobs": True, "allow_search_indices": False,
                "allow_view": True, "allow_fine_tuning": False, "organization": "*", "group": None,
                "is_blocking": False}]
        return {"object": "list", "data": [card]}

    def _completion_body(self, request: httpx.Request) -> dict[str, Any]:
        try:
            body = json.loads(request.content or b"{}")
        except ValueError:
            body = {}
        prompt = body.get("prompt", "") if isinstance(body, dict) else ""
        n_prompt = max(1, len(str(prompt).split()))
        rid = hashlib.blake2b(f"{self.host}{self.clock.now()}".encode(), digest_size=16).hexdigest()
        choice: dict[str, Any] = {"index": 0, "text": " Paris" if "France" in str(prompt) else " the",
                                  "logprobs": None, "finish_reason": "length"}
        usage: dict[str, Any] = {"prompt_tokens": n_prompt, "total_tokens": n_prompt + 1, "completion_tokens": 1,
                                 "prompt_tokens_details": None}
        out: dict[str, Any] = {"id": rid if self.scenario.engine == "sglang" else f"cmpl-{rid}",
                               "object": "text_completion", "created": int(self.clock.now()),
                               "model": self.scenario.model, "choices": [choice], "usage": usage}
        if self.scenario.engine == "sglang":
            choice["matched_stop"] = None
        else:
            choice["stop_reason"] = None
            choice["prompt_logprobs"] = None
            out["service_tier"] = None
            out["system_fingerprint"] = None
        return out


def _json_response(status: int, body: Any) -> httpx.Response:
    import httpx

    return httpx.Response(status, content=json.dumps(body, separators=(",", ":")).encode(),
                          headers={"content-type": "application/json"})


# --- command-line parsing -----------------------------------------------------------------------


class _UsageError(Exception):
    """The emulated command refuses its arguments; ``str()`` is its stderr line."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


_ALWAYS_FIELDS = frozenset({"__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID"})


@dataclass
class _JournalOpts:
    units: list[str] = field(default_factory=list)
    output: str = "short"
    follow: bool = False
    lines: int | None = None
    lines_set: bool = False
    after_cursor: str | None = None
    cursor: str | None = None
    since: float | None = None
    show_all: bool = False
    show_cursor: bool = False
    output_fields: frozenset[str] | None = None


def _strip_sudo(argv: tuple[str, ...]) -> tuple[str, ...]:
    if argv and argv[0].rsplit("/", 1)[-1] == "sudo":
        argv = argv[1:]
        while argv and argv[0].startswith("-"):
            argv = argv[1:]
    return argv


def _unit_name(name: str) -> str:
    """``journalctl -u``/``systemctl`` name mangling: a name without a type is a service."""
    return name if "." in name or "*" in name else name + ".service"


def _matches(fields: Mapping[str, Any], units: list[str]) -> bool:
    """``journalctl -u``: the unit's own output, PID 1's messages about it, and privileged daemons'
    messages about it (FORMATS 2.3; coredump matches are not modelled)."""
    if not units:
        return True
    for u in units:
        if fields.get("_SYSTEMD_UNIT") == u:
            return True
        if fields.get("_PID") == "1" and fields.get("UNIT") == u:
            return True
        if fields.get("OBJECT_SYSTEMD_UNIT") == u and fields.get("_UID") == "0":
            return True
    return False


def _parse_journalctl(args: Sequence[str]) -> _JournalOpts:
    opts = _JournalOpts()
    args = list(args)
    i = 0

    def value(name: str) -> str:
        nonlocal i
        if i + 1 >= len(args):
            raise _UsageError(f"journalctl: option '{name}' requires an argument")
        i += 1
        return args[i]

    def set_lines(v: str) -> None:
        opts.lines_set = True
        if v == "all":
            opts.lines = None
        elif v.lstrip("+").isdigit():
            opts.lines = int(v.lstrip("+"))
        else:
            raise _UsageError(f'Failed to parse lines \'{v}\'')

    while i < len(args):
        a = args[i]
        if a in ("-u", "--unit"):
            opts.units.append(_unit_name(value(a)))
        elif a.startswith("--unit="):
            opts.units.append(_unit_name(a.split("=", 1)[1]))
        elif a.startswith("-u") and not a.startswith("--"):
            opts.units.append(_unit_name(a[2:]))
        elif a in ("-o", "--output"):
            opts.output = value(a)
        elif a.startswith("--output="):
            opts.output = a.split("=", 1)[1]
        elif a.startswith("-o") and not a.startswith("--"):
            opts.output = a[2:]
        elif a in ("-n", "--lines"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and (nxt == "all" or nxt.lstrip("+").isdigit()):
                set_lines(value(a))
            else:
                opts.lines_set, opts.lines = True, 10
        elif a.startswith("--lines="):
            set_lines(a.split("=", 1)[1])
        elif a.startswith("-n") and not a.startswith("--"):
            set_lines(a[2:])
        elif a == "--no-tail":
            opts.lines_set, opts.lines = True, None
        elif a in ("-f", "--follow"):
            opts.follow = True
        elif a in ("-a", "--all"):
            opts.show_all = True
        elif a == "--after-cursor":
            opts.after_cursor = value(a)
        elif a.startswith("--after-cursor="):
            opts.after_cursor = a.split("=", 1)[1]
        elif a in ("-c", "--cursor"):
            opts.cursor = value(a)
        elif a.startswith("--cursor="):
            opts.cursor = a.split("=", 1)[1]
        elif a in ("-S", "--since") or a.startswith("--since="):
            v = value(a) if "=" not in a else a.split("=", 1)[1]
            if not v.startswith("@"):
                raise _UsageError(f"upwatch replay: only --since=@EPOCH is replayed, not {v!r}")
            try:
                opts.since = float(v[1:])
            except ValueError:
                raise _UsageError(f'Failed to parse timestamp: {v}') from None
        elif a.startswith("--output-fields="):
            opts.output_fields = frozenset(f for f in a.split("=", 1)[1].split(",") if f)
        elif a == "--output-fields":
            opts.output_fields = frozenset(f for f in value(a).split(",") if f)
        elif a == "--show-cursor":
            opts.show_cursor = True
        elif a in ("--no-pager", "-q", "--quiet", "-b", "--boot", "--merge", "-m", "--no-hostname", "--utc"):
            pass
        elif a.startswith("-") and not a.startswith("--") and len(a) > 2 and set(a[1:]) <= set("faqbm"):
            for ch in a[1:]:
                if ch == "f":
                    opts.follow = True
                elif ch == "a":
                    opts.show_all = True
        elif a.startswith("--"):
            raise _UsageError(f"journalctl: unrecognized option '{a}'")
        elif a.startswith("-"):
            raise _UsageError(f"journalctl: invalid option -- '{a[1:2]}'")
        else:
            raise _UsageError(f"upwatch replay: journal matches such as {a!r} are not replayed")
        i += 1
    if sum(x is not None for x in (opts.since, opts.cursor, opts.after_cursor)) > 1:
        raise _UsageError("Please specify only one of --since=, --cursor=, and --after-cursor=.")
    if opts.output not in ("json", "cat"):
        raise _UsageError(f"upwatch replay: journalctl -o {opts.output} is not replayed (use json or cat)")
    return opts


def _parse_show(args: list[str]) -> tuple[list[str], list[str] | None, bool]:
    units: list[str] = []
    props: list[str] | None = None
    value_only = False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-p", "--property"):
            if i + 1 >= len(args):
                raise _UsageError(f"systemctl: option '{a}' requires an argument")
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
            raise _UsageError(f"systemctl: unrecognized option '{a}'")
        else:
            units.append(_unit_name(a))
        i += 1
    return units, props, value_only


def _systemd_time(epoch: float, zone: str) -> str:
    """``Sat 2025-03-08 12:28:58 UTC``: English weekday, seconds, the host's zone (here UTC)."""
    tm = time.gmtime(int(epoch))
    return time.strftime("%a %Y-%m-%d %H:%M:%S ", tm) + zone


# --- nvidia-smi ---------------------------------------------------------------------------------


@dataclass
class _GpuQuery:
    fields: list[str]
    noheader: bool
    nounits: bool
    interval_s: float | None
    ids: set[str] | None


#: Field aliases (FORMATS 1.1): the header prints the canonical name.
_ALIASES = {"gpu_uuid": "uuid", "gpu_name": "name", "clocks.sm": "clocks.current.sm"}
_UNITS = {"memory.used": "MiB", "memory.total": "MiB", "memory.free": "MiB", "utilization.gpu": "%",
          "power.draw": "W", "power.limit": "W", "enforced.power.limit": "W", "clocks.current.sm": "MHz"}
_KNOWN = ("index", "uuid", "name", "count", "memory.used", "memory.total", "memory.free", "utilization.gpu",
          "temperature.gpu", "power.draw", "power.limit", "enforced.power.limit", "clocks.current.sm",
          "pci.bus_id", "driver_version")


def _parse_nvidia_smi(args: Sequence[str]) -> _GpuQuery:
    args = list(args)
    fields: list[str] | None = None
    fmt: list[str] | None = None
    interval: float | None = None
    ids: set[str] | None = None
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a.startswith("--query-gpu="):
            fields = [f.strip() for f in a.split("=", 1)[1].split(",") if f.strip()]
        elif a == "--query-gpu" and nxt is not None:
            fields = [f.strip() for f in nxt.split(",") if f.strip()]
            i += 1
        elif a.startswith("--format="):
            fmt = [f.strip() for f in a.split("=", 1)[1].split(",")]
        elif a == "--format" and nxt is not None:
            fmt = [f.strip() for f in nxt.split(",")]
            i += 1
        elif a in ("-lms", "--loop-ms"):
            if nxt is None or not nxt.isdigit():
                raise _UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
            interval = max(1, int(nxt)) / 1000.0
            i += 1
        elif a.startswith("--loop-ms="):
            interval = max(1, int(a.split("=", 1)[1])) / 1000.0
        elif a in ("-l", "--loop"):
            if nxt is not None and nxt.isdigit():
                interval = float(max(1, int(nxt)))
                i += 1
            else:
                interval = 5.0  # "If no argument is specified for the -l form a default interval of 5 seconds"
        elif a.startswith("--loop="):
            interval = float(max(1, int(a.split("=", 1)[1])))
        elif a in ("-i", "--id") and nxt is not None:
            ids = {x.strip() for x in nxt.split(",")}
            i += 1
        elif a.startswith("--id="):
            ids = {x.strip() for x in a.split("=", 1)[1].split(",")}
        elif a.startswith("--query-compute-apps"):
            raise _UsageError("upwatch replay: --query-compute-apps is not replayed", 2)
        else:
            raise _UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
        i += 1
    if fields is None or fmt is None or "csv" not in fmt:
        raise _UsageError("upwatch replay: only nvidia-smi --query-gpu=... --format=csv[,...] is replayed", 2)
    canon = [_ALIASES.get(f, f) for f in fields]
    for f in canon:
        if f not in _KNOWN:
            raise _UsageError(f'Field "{f}" is not a valid field to query.', 2)
    return _GpuQuery(canon, "noheader" in fmt, "nounits" in fmt, interval, ids)


def _header(f: str, nounits: bool) -> str:
    unit = _UNITS.get(f)
    return f"{f} [{unit}]" if unit else f


def _gpu_cell(f: str, gpu: Gpu, mem: int | None, util: int | None, count: int, nounits: bool) -> str:
    def unit(v: str, u: str) -> str:
        return v if nounits or v.startswith("[") else f"{v} {u}"

    na = "[N/A]"
    frac = (util or 0) / 100.0
    if f == "index":
        return str(gpu.index)
    if f == "uuid":
        return gpu.uuid
    if f == "name":
        return gpu.name
    if f == "count":
        return str(count)
    if f == "memory.used":
        return unit(na if mem is None or gpu.memory_total_mib is None else str(mem), "MiB")
    if f == "memory.total":
        return unit(na if gpu.memory_total_mib is None else str(gpu.memory_total_mib), "MiB")
    if f == "memory.free":
        if mem is None or gpu.memory_total_mib is None:
            return unit(na, "MiB")
        return unit(str(max(0, gpu.memory_total_mib - mem - 479)), "MiB")  # 479 MiB reserved on H100
    if f == "utilization.gpu":
        return unit(na if util is None else str(util), "%")
    if f == "temperature.gpu":
        return str(int(round(gpu.idle_temp_c + (gpu.load_temp_c - gpu.idle_temp_c) * frac)))
    if f == "power.draw":
        return unit(f"{gpu.idle_power_w + (gpu.load_power_w - gpu.idle_power_w) * frac:.2f}", "W")
    if f in ("power.limit", "enforced.power.limit"):
        return unit(na if gpu.power_limit_w is None else f"{gpu.power_limit_w:.2f}", "W")
    if f == "clocks.current.sm":
        return unit("1980" if util else "345", "MHz")
    if f == "pci.bus_id":
        return f"00000000:{0x18 + 0x10 * gpu.index:02X}:00.0"
    if f == "driver_version":
        return "590.48.01"
    return na


__all__ = ["Scenario", "JournalEntry", "Gpu", "GpuFrame", "UnitFrame", "HealthFrame", "ReplayRunner",
           "stamp_journal", "journal_value", "UNIT_DEFAULTS", "PROPERTY_ORDER"]
