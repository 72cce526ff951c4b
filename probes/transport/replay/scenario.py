"""What a replayed host is made of: :class:`Scenario` (its unit, GPUs, journal and port, each a
timeline keyed by seconds after the scenario's start) and its parts (:class:`JournalEntry`,
:class:`Gpu`, :class:`GpuFrame`, :class:`UnitFrame`, :class:`HealthFrame`), the unit's first
properties (:data:`UNIT_DEFAULTS`), and the journal's own bookkeeping: :func:`stamp_journal` gives
records their timestamps and cursors, :func:`journal_value` encodes a field as ``journalctl -o json``
does. Pure values: no clock, no I/O.

Journal cursors look like the real ``s=…;i=…;b=…;m=…;t=…;x=…`` (systemd
``docs/JOURNAL_EXPORT_FORMATS.md``; ``tests/fixtures/journal/*.jsonl``) and are opaque.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

#: Seconds two scenario times may differ by and still count as the same moment (float offsets).
EPS_S = 1e-6


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
            if frame.offset_s > offset_s + EPS_S:
                break
            props.update(frame.props)
        return props

    def health_at(self, offset_s: float) -> str | int:
        """``"refused"`` or the ``/health`` status at ``offset_s``."""
        status: str | int = "refused"
        for frame in self.health:
            if frame.offset_s > offset_s + EPS_S:
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


def _lerp(a: int | None, b: int | None, w: float) -> int | None:
    """``a`` to ``b`` at weight ``w`` (0..1), rounded; with a None, the nearer end as it is."""
    if a is None or b is None:
        return a if w < 1 else b
    return int(round(a + (b - a) * w))


#: A loaded service that never ran, as real systemd 252 shows it
#: (``tests/fixtures/systemctl-show/inactive-dead-never-started.txt``), plus the extra properties
#: :data:`~probes.transport.replay.systemctl.PROPERTY_ORDER` knows, at their systemd defaults.
#: Typed as in :class:`UnitFrame`; in the order ``systemctl show`` prints them.
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
    (systemd ``utf8_is_printable_newline``, ``src/shared/logs-show.c``)."""
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
