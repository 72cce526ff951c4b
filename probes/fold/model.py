"""HostModel: the pure fold of one host's events into a frozen :class:`~probes.data.state.HostState`.

No I/O and no clock of its own: every event carries its source time, and :meth:`HostModel.state`
takes ``now`` for the verdict. The watcher (``probes/watch/watcher.py``) feeds it; views render what it
returns. The snapshot is built from what the model keeps by :mod:`probes.fold.snapshot`.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping

from probes.data.download import DownloadSample
from probes.fold.gpu_fold import GpuFold
from probes.fold.snapshot import BINDS_AFTER_LOADING, build, log_phases
from probes.logs.journal_json import Record
from probes.data.reading import Reading
from probes.logs.reader import StartupReader
from probes.data.events import (CONNECTION_KINDS, NO_CONTACT_KINDS, GpuApps, GpuOrphans, GpuReading, Health,
                                ProbeFailure, ProbeOk, UnitState)
from probes.data.state import HostState, LogEntry, PhaseSpan, Typical, Verdict
from probes.fold.verdict import verdict_for

__all__ = ["HostModel", "LOG_KEEP", "ENTRY_CHARS", "ENTRY_TAIL", "LOG_CHARS", "DOWNLOAD_KEEP", "BINDS_AFTER_LOADING"]

#: How many log entries a host keeps for the log pane (oldest dropped first).
LOG_KEEP = 5000
#: The most characters of one entry kept for the log pane (a longer one keeps its head and its
#: last :data:`ENTRY_TAIL` characters around a visible cut mark), and of all kept entries together:
#: a host can make upwatch hold at most this much of its text (a str takes 1 to 4 bytes a character).
ENTRY_CHARS = 4 * 1024 * 1024
ENTRY_TAIL = 256
LOG_CHARS = 32 * 1024 * 1024
#: Looks at the download folder kept (an hour at one every 5 s).
DOWNLOAD_KEEP = 720


class HostModel:
    """One host's state, folded from events.

    Args:
        host: the host's configured name. unit: the systemd unit watched.
        engine: force an engine id (``sglang``, ``vllm``, ...); None detects it from the log.
        log_keep: log entries kept (oldest dropped first).

    Events accepted by :meth:`apply`: a journal :class:`~probes.logs.journal_json.Record`, a
    :class:`~probes.data.events.UnitState`, a :class:`~probes.data.events.GpuReading`, a
    :class:`~probes.data.events.Health`, a :class:`~probes.data.events.ProbeFailure`, a
    :class:`~probes.data.events.ProbeOk`, a :class:`~probes.data.state.Typical` (shown while the start's
    model and engine-argument hash match it), a :class:`~probes.data.download.DownloadSample`; anything
    else raises ``TypeError``.
    """

    def __init__(self, host: str, unit: str, engine: str | None = None, log_keep: int = LOG_KEEP,
                 stall_after: Mapping[str, float] | None = None) -> None:
        self.host = host
        self.unit = unit
        self.reader = StartupReader(engine)
        self.log: deque[LogEntry] = deque(maxlen=log_keep)
        self._log_chars = 0  # characters of text in ``log``
        self.seq = 0
        self.version = 0
        self._unit: UnitState | None = None
        self._health: Health | None = None
        self._gpu = GpuFold()
        self._gpu_apps: GpuApps | None = None
        self._gpu_orphans: GpuOrphans | None = None
        self._last_nrestarts: int | None = None
        self._restarts_seen = 0
        #: (MainPID, InvocationID) of the process that was running when /health turned OK;
        #: "pending" while the unit is not known yet; None while health is not OK.
        self._health_ok_proc: tuple[int | None, str | None] | str | None = None
        self.stall_after = dict(stall_after or {})
        #: a lower bound of when the unit was last started by hand (NRestarts went down), or None
        self._manual_start_at: float | None = None
        #: when /health first answered OK while the log said the server had not bound its port yet
        self._health_early_since: float | None = None
        self._download: deque[DownloadSample] = deque(maxlen=DOWNLOAD_KEEP)
        self._failures: dict[str, ProbeFailure] = {}
        #: per probe, when it last delivered (epoch seconds): the "read" of its knowledge
        self._read: dict[str, float | None] = {}
        self._last_log_at: float | None = None
        self._newest: float | None = None
        #: the last reading of the reader and its spans, with the ``seq`` and ``ended`` it was made at
        self._reading: tuple[int, bool, Reading, tuple[PhaseSpan, ...]] | None = None
        self._cached: tuple[int, HostState] | None = None
        self._judged: tuple[HostState, Verdict | None, HostState] | None = None
        self._typical: Typical | None = None

    # --- events -------------------------------------------------------------------------------

    def apply(self, event: object) -> None:
        """Fold one event in (see the class docstring for the kinds)."""
        self.version += 1
        if isinstance(event, Record):
            self._record(event)
        elif isinstance(event, UnitState):
            prev = self._last_nrestarts
            n = event.n_restarts
            if n is not None:
                if prev is not None and n > prev:
                    self._restarts_seen += n - prev
                elif prev is not None and n < prev:
                    self._restarts_seen += n  # reset by a manual restart: the new count is new
                    # A start by hand (systemd flushes NRestarts then) begins a new count: failed
                    # starts that began before the last look at the higher counter are history.
                    self._manual_start_at = self._unit.time if self._unit is not None else event.time
                self._last_nrestarts = n
            self._unit = event
            self._read["unit"] = event.time
            if self._health_ok_proc == "pending" and event.running:
                self._health_ok_proc = (event.main_pid, event.invocation_id)
            self._seen(event.time)
        elif isinstance(event, GpuOrphans):
            self._gpu_orphans = event
            self._seen(event.time)
        elif isinstance(event, GpuReading):
            self._gpu.apply(event)
            self._read["gpu"] = event.time
            self._seen(event.time)
        elif isinstance(event, GpuApps):
            self._gpu_apps = event
            self._seen(event.time)
        elif isinstance(event, DownloadSample):
            if self._download and self._download[-1].path != event.path:
                self._download.clear()  # another model or cache: another download
            self._download.append(event)
            self._seen(event.time)
        elif isinstance(event, Health):
            if event.rung == "port_closed" and self.unreachable():
                # With the host out of reach, a refused tunnel says nothing about the server:
                # keep the last known rung (the card is stale anyway).
                return
            ok = event.rung in ("healthy", "serving")
            was_ok = self._health is not None and self._health.rung in ("healthy", "serving")
            if ok and not was_ok:
                u = self._unit
                self._health_ok_proc = (u.main_pid, u.invocation_id) if u is not None and u.running else "pending"
            elif not ok:
                self._health_ok_proc = None
            self._health = event
            self._read["health"] = event.time
            self._seen(event.time)
        elif isinstance(event, ProbeFailure):
            if event.kind not in CONNECTION_KINDS and event.kind not in NO_CONTACT_KINDS:
                # The command ran on the host and failed there: the connection works, so
                # connection failures of the other probes are over. (A probe that asked nothing,
                # NO_CONTACT_KINDS, says nothing of the connection.)
                self._clear_connection_failures()
            known = self._failures.get(event.probe)
            if known is None:
                self._failures[event.probe] = event
            else:
                # Keep when it began; take the latest reason and attempt count.
                self._failures[event.probe] = dataclasses.replace(event, time=known.time)
        elif isinstance(event, Typical):
            self._typical = event
        elif isinstance(event, ProbeOk):
            self._failures.pop(event.probe, None)
            self._read.setdefault(event.probe, event.time)  # e.g. a journal follow open on no entries
            # One probe got through, so the connection is back: connection failures of the others
            # are over too (a quiet journal stream has nothing to say that it reconnected; if it
            # did not, it fails again on its own).
            self._clear_connection_failures()
        else:
            raise TypeError(f"not an event: {type(event).__name__}")

    def _clear_connection_failures(self) -> None:
        for probe in [p for p, f in self._failures.items() if f.kind in CONNECTION_KINDS]:
            del self._failures[probe]

    def apply_all(self, events: Iterable[object]) -> None:
        """Fold several events in, in order."""
        for e in events:
            self.apply(e)

    def bad_record(self, raw: bytes | str, time: float | None) -> None:
        """A journal line that is not a record: counted, and kept visibly in the log (never lost)."""
        self.version += 1
        self.seq += 1
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        self.reader.note_bad_line(self.seq)
        self._keep(LogEntry(self.seq, time, f"[unreadable journal record] {text[:500]}"))

    def _seen(self, t: float) -> None:
        if self._newest is None or t > self._newest:
            self._newest = t

    def _keep(self, entry: LogEntry) -> None:
        """Keep an entry for the log pane, within :data:`LOG_KEEP` entries and :data:`LOG_CHARS`
        characters in all (the oldest go first): what a host sends never fills the operator's memory."""
        log = self.log
        if len(log) == log.maxlen:
            self._log_chars -= len(log[0].text)  # the one append drops
        log.append(entry)
        self._log_chars += len(entry.text)
        while self._log_chars > LOG_CHARS and len(log) > 1:
            self._log_chars -= len(log.popleft().text)

    def _record(self, rec: Record) -> None:
        # Run for every journal line: locals over repeated attribute reads.
        self.seq = seq = self.seq + 1
        rt = rec.realtime_us
        t = rt / 1e6 if rt is not None else None
        texts = rec.texts
        text = texts[0] if len(texts) == 1 else rec.text
        if len(text) > ENTRY_CHARS:
            # The reader reads the message whole (up to the runner's cap); the pane keeps this much.
            head = ENTRY_CHARS - ENTRY_TAIL
            text = f"{text[:head]} …[cut {len(text) - ENTRY_CHARS} chars]… {text[-ENTRY_TAIL:]}"
        systemd = rec.systemd
        self._keep(LogEntry(seq, t, text, systemd, rec.cursor))
        if t is not None:
            self._last_log_at = t
            if self._newest is None or t > self._newest:
                self._newest = t
            self._read["journal"] = t
        elif "journal" not in self._read:
            self._read["journal"] = None  # an entry with no time (still read)
        stamp = rec.stamp
        feed = self.reader.feed
        for text in texts:
            feed(text, seq, stamp=stamp, ident=rec.ident, systemd=systemd, invocation=rec.invocation)

    # --- reading --------------------------------------------------------------------------------

    def unreachable(self) -> bool:
        """Whether some probe lost the connection to the host (and it has not come back)."""
        # Asked for every journal line (SourceContext.ok): no failure at all is the common case.
        return bool(self._failures) and any(f.kind in CONNECTION_KINDS for f in self._failures.values())

    def last_unit(self) -> UnitState | None:
        """The last ``systemctl show`` read, or None."""
        return self._unit

    def last_gpus(self) -> GpuReading | None:
        """The last GPU reading, or None."""
        return self._gpu.last

    def last_gpu_apps(self) -> GpuApps | None:
        """The last list of processes holding GPU memory, or None."""
        return self._gpu_apps

    def last_health(self) -> Health | None:
        """The last health answer, or None."""
        return self._health

    def failure(self, probe: str) -> ProbeFailure | None:
        """``probe``'s current failure, or None."""
        return self._failures.get(probe)

    def download_samples(self) -> tuple[DownloadSample, ...]:
        """The download folder's samples kept (oldest first; at most :data:`DOWNLOAD_KEEP`)."""
        return tuple(self._download)

    def log_reading(self) -> Reading:
        """What the log says so far (:meth:`StartupReader.reading`; made once per line read)."""
        return log_phases(self, False)[0]

    def log_engine(self) -> str | None:
        """The engine the log names, or the one configured; None while unknown."""
        return self.reader.engine

    def has_read(self, probe: str) -> bool:
        """Whether ``probe`` has delivered at least once (cheap)."""
        return probe in self._read

    def failing(self, probe: str) -> bool:
        """Whether ``probe`` (``journal``, ``unit``, ``gpu``, ``health``) is failing now (cheap)."""
        return probe in self._failures

    def entries_after(self, seq: int) -> list[LogEntry]:
        """Log entries with ``seq`` greater than the one given, oldest first (those still kept)."""
        log = self.log
        if not log or log[-1].seq <= seq:
            return []
        first = log[0].seq
        start = max(0, seq - first + 1)
        return [log[i] for i in range(start, len(log))]

    def state(self, now: float) -> HostState:
        """The current snapshot, with its verdict judged at ``now`` (epoch seconds)."""
        base = self.facts()
        v = verdict_for(base, now, self.stall_after)
        judged = self._judged
        if judged is not None and judged[0] is base and judged[1] == v:
            return judged[2]  # the same object as last time: consumers can skip it with `is`
        out = base if v == base.verdict else dataclasses.replace(base, verdict=v)
        self._judged = (base, v, out)
        return out

    def facts(self) -> HostState:
        """The current snapshot as built, its verdict not judged at any time (the verdict field
        is stale): for what does not depend on the clock (state, phases, identity, counts), such
        as the start history, which looked every second per host and judged a verdict each time."""
        cached = self._cached
        if cached is None or cached[0] != self.version:
            cached = self._cached = (self.version, build(self))
        return cached[1]
