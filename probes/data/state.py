"""What flows from the fold to views: one frozen :class:`HostState` per host (the events it is
folded from are :mod:`probes.data.events`).

Everything here is a frozen dataclass, but :class:`LogEntry`, a named tuple (one is made for every
journal line: a third of a frozen dataclass's cost to make). A field a source cannot give is ``None``, never ``0``
("not available" is explicit). Times are seconds since the Unix epoch taken at the source (the
journal's ``__REALTIME_TIMESTAMP``, the sample's time), so a replay and a live run compute the
same durations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from probes.data.events import GpuApps, GpuOrphan, GpuReading, Health, ProbeFailure, UnitState

from probes.data.download import DownloadProgress
from probes.data.reading import ErrorLine, FailedStart, Progress

#: Readiness ladder, lowest first (see docs/architecture.md, "Shared vocabulary"). ``unknown`` is "no health data yet".
RUNGS = ("inactive", "port_closed", "http_unhealthy", "healthy", "serving")

#: Verdict levels, least severe first.
LEVELS = ("ok", "info", "warning", "error")


# --- events: what probes emit -------------------------------------------------------------------

class LogEntry(NamedTuple):
    """One journal entry of the unit, as the log pane shows it (a named tuple: made for every
    journal line, at a third of a frozen dataclass's cost; read by attribute like the others).

    Attributes:
        seq: 1-based position in this host's stream (also the reader's line number, so a
            decisive error's ``line`` is the ``seq`` of its entry).
        time: the entry's time (epoch seconds), or None when unknown.
        text: the message as the host wrote it: may hold ANSI colours, ``\\r`` frames and any
            character; views must render it as plain text (never markup).
        systemd: written by systemd about the unit (PID 1), not by the server.
        cursor: the journal cursor of the entry, or None.
    """

    seq: int
    time: float | None
    text: str
    systemd: bool = False
    cursor: str | None = None


#: The probes whose knowledge a :class:`HostState` states (:attr:`HostState.knowledge`).
KNOWN_PROBES = ("unit", "journal", "gpu", "health")


@dataclass(frozen=True, slots=True)
class Knowledge:
    """What one probe has told upwatch about the host: the basis of every verdict.

    Attributes:
        probe: ``unit``, ``journal``, ``gpu`` or ``health``.
        status: ``read`` (it delivered, and is not failing now), ``failing`` (its last try failed;
            whatever it read before is old) or ``never`` (neither data nor a failure yet).
        since: ``read``: when it last delivered (epoch seconds; for the journal, its newest
            entry's time, or when the follow opened on an empty journal); ``failing``: when it
            began failing; ``never``: None.
        why: ``failing``: the failure's message (host text), else "".
        reason: ``failing``: the :class:`ProbeFailure` reason id ("" when not known), else "".
    """

    probe: str
    status: str
    since: float | None = None
    why: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One sentence that says what is wrong, with a level from :data:`LEVELS`, the rule's id
    (``stale``, ``ssh``, ``cannot_see``, ``not_found``, ``restart_loop``, ``failed``, ``unit_failed``,
    ``gpu_orphans``, ``stalled``, ``stale_health``, ``not_serving``, ``no_gpu_memory``,
    ``previous_failed``, ``slower``, ``unhealthy``, ``waiting``: a probe has not answered yet; "" when not given) and the evidence, one short line each."""

    level: str
    sentence: str
    kind: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """A phase of the current start: when it began (epoch seconds or None) and how long it lasted
    (``duration_s`` None while it is the current phase or when a time is missing)."""

    phase: str
    began: float | None
    duration_s: float | None
    text: str = ""


@dataclass(frozen=True, slots=True)
class Typical:
    """How long earlier comparable starts took (same host, unit, model and engine-argument hash),
    from the start history (``probes/store/history.py``). Also an event: the watcher applies it to the
    model, which shows it in :attr:`HostState.typical` while the start's identity matches.

    Attributes:
        host, unit: the host's name and unit. model, args_hash: the identity compared on (None:
            the engine printed none; compared as such).
        n: how many ready starts the medians are taken over (the last ones, at most 20).
        total_s: median seconds from a start's first line to ready, or None.
        phases: ``(phase id, median seconds, starts that had the phase)`` in phase order.
    """

    host: str
    unit: str
    model: str | None
    args_hash: str | None
    n: int
    total_s: float | None
    phases: tuple[tuple[str, float, int], ...] = ()

    def phase_s(self, phase: str) -> float | None:
        """The median seconds of ``phase`` in the starts that had it, or None."""
        for p, med, _ in self.phases:
            if p == phase:
                return med
        return None


@dataclass(frozen=True, slots=True)
class HostState:
    """Everything known about one host, frozen. Views render it; they never change it.

    Attributes:
        host: the host's name as configured. unit: the systemd unit watched.
        engine: engine id or ``unknown``.
        state: the start's state: ``waiting`` (no line yet), ``loading``, ``ready``, ``failed``,
            ``stopped``.
        phase: the current phase id (see docs/architecture.md), or the phase a failed start died in.
        phases: the current start's phases in order, with begin times and durations.
        progress: the current bar (``done``/``total``), or None.
        start_began: when the current start began (epoch seconds), or None.
        phase_began: when the current phase began (epoch seconds), or None.
        readiness: a rung of :data:`RUNGS`, or ``unknown`` before any data.
        health: the last HTTP probe, or None.
        unit_state: the last ``systemctl show``, or None.
        restart_counter: ``NRestarts`` or the journal's ``restart counter is at N``, or None.
        restart_loop: two or more starts failed with no ready between them.
        starts: starts seen in the journal.
        error: the decisive error line (its ``line`` is a :attr:`LogEntry.seq`), or None.
        failed_at: when the decisive error line was written (epoch seconds), or None.
        suspect: while the current start has not failed, the line that looks most like a failure
            of it (no proof yet that the process ended: a live card shows it as a warning), or None.
        cause: the failed start's cause id, or None. hint: one line to act on, or "".
        gpus: the last GPU sample, or None before any.
        gpu_apps: the processes holding GPU memory at the last look (every few seconds), or None
            before any look.
        gpu_history: per GPU (index order), recent samples as ``(mem_fraction, util_pct)`` pairs,
            oldest first; either value may be None.
        last_line: the last meaningful line the server wrote (host text), or "".
        last_log_at: when the last log entry arrived (epoch seconds), or None.
        log_count: log entries received so far (the newest entry's ``seq``).
        failures: probes currently failing, as ``{probe: ProbeFailure}`` sorted by probe.
        stale_since: when the host stopped answering (all its data is old), or None.
        reconnect_attempt: failed connection attempts in a row while stale (0 when none yet).
        failed_starts: the restart loop's failed starts since the last ready (oldest first).
        gave_up: the journal says systemd stopped restarting the unit (``Start request repeated too
            quickly``), as the unit's ``failed`` state also does.
        restarts_seen: automatic restarts seen while watching, from ``NRestarts`` deltas (a counter
            that went down, after a manual restart, adds its new value instead of subtracting).
        gpu_changed_at: when the GPUs' total used memory last moved by 256 MiB or more, or None.
        health_stale: ``/health`` is OK but was answered by an earlier process (``MainPID`` or
            ``InvocationID`` changed since it turned OK, and the new start has not logged ready).
        gpu_orphans: processes holding GPU memory outside the unit's cgroup; None before a look.
        typical: how long earlier comparable starts took (medians), or None without history.
        verdict: what is wrong, in one sentence, or None when nothing is.
        updated: the time of the newest data in this snapshot.
        health_early_since: since when ``/health`` has answered OK while the log says the server
            (SGLang, vLLM: they bind their port only after loading) has not bound its port yet, or
            None: the answer comes from something else (an older server that outlived its unit);
            readiness stays ``port_closed`` meanwhile.
        model: the model the current start serves (hub id or path), from the engine's own lines,
            or None. args_hash: 12 hex digits of the engine's argument dump, or None (see
            :mod:`probes.logs.identity`).
        port: the TCP port the current start says it serves on, or None; health looks go there
            when the host's configuration names no port or health URL.
        download: the current start's download into the hub cache (bytes, expected total, rate,
            ETA; :mod:`probes.sources.download`), while the start is in ``download`` or in a silent
            ``weights`` and the folder grows; None otherwise.
        knowledge: per probe of :data:`KNOWN_PROBES`, in that order, what it has told
            (:class:`Knowledge`: read, failing since when and why, or never answered).
    """

    host: str
    unit: str
    engine: str = "unknown"
    state: str = "waiting"
    phase: str = "starting"
    phases: tuple[PhaseSpan, ...] = ()
    progress: Progress | None = None
    start_began: float | None = None
    phase_began: float | None = None
    readiness: str = "unknown"
    health: Health | None = None
    unit_state: UnitState | None = None
    restart_counter: int | None = None
    restart_loop: bool = False
    starts: int = 0
    error: ErrorLine | None = None
    failed_at: float | None = None
    suspect: ErrorLine | None = None
    cause: str | None = None
    hint: str = ""
    gpus: GpuReading | None = None
    gpu_apps: GpuApps | None = None
    gpu_history: tuple[tuple[tuple[float | None, int | None], ...], ...] = ()
    last_line: str = ""
    last_log_at: float | None = None
    log_count: int = 0
    failures: tuple[ProbeFailure, ...] = field(default=())
    stale_since: float | None = None
    reconnect_attempt: int = 0
    failed_starts: tuple[FailedStart, ...] = ()
    gave_up: bool = False
    restarts_seen: int = 0
    gpu_changed_at: float | None = None
    health_stale: bool = False
    gpu_orphans: tuple[GpuOrphan, ...] | None = None
    typical: Typical | None = None
    verdict: Verdict | None = None
    updated: float | None = None
    model: str | None = None
    args_hash: str | None = None
    port: int | None = None
    health_early_since: float | None = None
    download: DownloadProgress | None = None
    knowledge: tuple[Knowledge, ...] = ()

    def known(self, probe: str) -> Knowledge:
        """What ``probe`` (one of :data:`KNOWN_PROBES`) has told; ``never`` when not listed."""
        for k in self.knowledge:
            if k.probe == probe:
                return k
        return Knowledge(probe, "never")

    def failure(self, probe: str) -> ProbeFailure | None:
        """The current failure of ``probe`` (``journal``, ``unit``, ``gpu``, ``health``), or None."""
        for f in self.failures:
            if f.probe == probe:
                return f
        return None
