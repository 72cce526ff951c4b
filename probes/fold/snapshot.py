"""What :class:`~probes.fold.model.HostModel` builds: its frozen :class:`~probes.data.state.HostState`
from what the fold keeps (the model's memory, :class:`Folded`), its verdict not judged yet
(:meth:`HostModel.state <probes.fold.model.HostModel.state>` judges it at ``now``).

The model folds events in (:mod:`probes.fold.model`); this module reads what it folded: the
reader's reading and its phase spans (made once per line read), when the start and its phase
began, what the unit and the health answers say of readiness, a download's progress, the failed
starts that count, and what each probe is known to say. Two things it keeps in the model's memory
as it builds (when /health first answered early, and the process a health answer is of once the
new start is ready); nothing else of the model is written here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Protocol

from probes.data.download import DownloadSample
from probes.data.events import CONNECTION_KINDS, GpuApps, GpuOrphans, Health, ProbeFailure, UnitState
from probes.data.reading import Reading
from probes.data.state import KNOWN_PROBES, HostState, Knowledge, LogEntry, PhaseSpan, Typical
from probes.fold.download import progress_from, wanted
from probes.fold.gpu_fold import GpuFold
from probes.logs.reader import StartupReader

__all__ = ["Folded", "build", "log_phases", "iso_to_epoch", "BINDS_AFTER_LOADING"]

#: Engines that bind their HTTP port only after loading (weights, KV cache, CUDA graphs): a health
#: answer while their log is still before warm-up comes from something else (SGLang's
#: ``srt/entrypoints/http_server.py`` and vLLM's ``vllm/entrypoints/openai/api_server.py`` listen
#: only once the engine is built).
BINDS_AFTER_LOADING = frozenset({"sglang", "vllm"})
_BOUND_PHASES = frozenset({"warmup", "ready"})


def iso_to_epoch(text: str | None) -> float | None:
    """``2025-03-08T12:29:04Z`` / ``...+02:00`` / naive (read as UTC) → epoch seconds, or None."""
    if not text or text.startswith("--"):
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


class Folded(Protocol):
    """What a snapshot is built from: the memory of :class:`~probes.fold.model.HostModel` (its
    attributes, the private ones included: this module is the other half of the model, apart so
    the fold's hot path and the snapshot's build are each short). Written here: ``_reading`` (the
    reading's memo), ``_health_ok_proc`` and ``_health_early_since``."""

    host: str
    unit: str
    seq: int
    reader: StartupReader
    log: deque[LogEntry]
    _unit: UnitState | None
    _health: Health | None
    _gpu: GpuFold
    _gpu_apps: GpuApps | None
    _gpu_orphans: GpuOrphans | None
    _restarts_seen: int
    _health_ok_proc: tuple[int | None, str | None] | str | None
    _manual_start_at: float | None
    _health_early_since: float | None
    _download: deque[DownloadSample]
    _failures: dict[str, ProbeFailure]
    _read: dict[str, float | None]
    _last_log_at: float | None
    _newest: float | None
    _reading: tuple[int, bool, Reading, tuple[PhaseSpan, ...]] | None
    _typical: Typical | None


def build(m: Folded) -> HostState:
    """The host's snapshot from the model's memory, its verdict not judged (None)."""
    unit = m._unit
    # systemd says the process is gone: a suspect nothing recovered was the end of the start.
    gone = unit is not None and not unit.running and unit.load_state != "not-found"
    r, spans = log_phases(m, gone)
    start_began = spans[0].began if spans else None
    # The start began with its first line (a systemd "Started" line comes before the server's
    # own lines, and the reader's first phase mark can be later than it).
    first = iso_to_epoch(r.began)
    began0 = spans[0].began if spans else None
    if first is not None and began0 is not None and first < began0:
        if spans[0].phase != "starting":
            spans.insert(0, PhaseSpan("starting", first, began0 - first, ""))
        else:
            # The reader names "starting" after the server's own first line, which can come
            # seconds after systemd's "Started": the phase began with the start, and does not
            # move (an "in Starting 15s" that fell back to 0s when the server's line came).
            s0 = spans[0]
            dur = s0.duration_s + (began0 - first) if s0.duration_s is not None else None
            spans[0] = PhaseSpan("starting", first, dur, s0.text)
        start_began = first
    if unit is not None and unit.started_at is not None and unit.running:
        if start_began is None or unit.started_at > start_began:
            start_began = unit.started_at
    phase_began = None
    for s in spans:
        if s.phase == r.phase:
            phase_began = s.began
    counter = unit.n_restarts if unit is not None and unit.n_restarts is not None else r.restart_counter
    stale = None
    conn = [f.time for f in m._failures.values() if f.kind in CONNECTION_KINDS]
    attempt = 0
    if conn:
        stale = min(conn)
        attempt = max(f.attempt for f in m._failures.values() if f.kind in CONNECTION_KINDS)
    state = "waiting" if m.seq == 0 and r.starts == 0 else r.state
    if unit is not None and state != "failed" and not unit.running and unit.sub_state != "auto-restart":
        # systemd's word beats a log that says ready or loading: the process is gone.
        if unit.active_state == "failed":
            state = "failed"
        elif unit.active_state == "inactive" and (state != "waiting" or unit.load_state == "not-found"):
            state = "stopped"
    health_stale = False
    proc = m._health_ok_proc
    if isinstance(proc, tuple) and unit is not None and unit.running:
        pid, inv = proc
        changed = (pid is not None and unit.main_pid is not None and pid != unit.main_pid) or (
            inv is not None and unit.invocation_id is not None and inv != unit.invocation_id)
        if changed:
            ready_at = next((sp.began for sp in spans if sp.phase == "ready"), None)
            # The start that is ready must be this process's: it began with the unit's start
            # (the old start's ready line may be less than a second before a quick restart,
            # while the journal has not yet delivered the new start's first line).
            began = iso_to_epoch(r.began)
            new_ready = (r.state == "ready" and ready_at is not None and unit.started_at is not None
                         and ready_at >= unit.started_at - 1.0
                         and (began is None or began >= unit.started_at - 1.0))
            if new_ready:
                m._health_ok_proc = (unit.main_pid, unit.invocation_id)  # the new one is up
            else:
                health_stale = True
    readiness = _readiness(unit, m._health)
    download = None
    if m._download and wanted(state, r.phase, r.progress.phase if r.progress is not None else None, r.model):
        # Only this start's looks (a restart begins a new download, or none).
        download = progress_from([d for d in m._download if start_began is None or d.time >= start_began])
    health = m._health
    early = (readiness in ("healthy", "serving") and r.engine in BINDS_AFTER_LOADING and r.state == "loading"
             and r.phase not in _BOUND_PHASES and health is not None
             and (start_began is None or health.time >= start_began))
    if early and health is not None:  # early holds only with an answer; mypy cannot see that through a bool
        if m._health_early_since is None:
            m._health_early_since = health.time
    else:
        m._health_early_since = None
    if (health_stale or early) and readiness in ("healthy", "serving"):
        readiness = "port_closed"  # the answer came from an earlier process
    failed_starts, restart_loop = r.failed_starts, r.restart_loop
    cut = m._manual_start_at
    if cut is not None and failed_starts:
        kept = tuple(f for f in failed_starts
                     if (b := iso_to_epoch(f.began)) is None or b >= cut - 1.0)
        if len(kept) != len(failed_starts):
            failed_starts, restart_loop = kept, len(kept) >= 2
    return HostState(
        host=m.host, unit=m.unit, engine=r.engine, state=state, phase=r.phase,
        phases=tuple(spans), progress=r.progress, start_began=start_began, phase_began=phase_began,
        readiness=readiness, health=m._health, unit_state=unit,
        restart_counter=counter, restart_loop=restart_loop, starts=r.starts, error=r.error,
        failed_at=_time_of(m.log, r.error.line) if r.error is not None else None, suspect=r.suspect,
        cause=r.cause, hint=r.hint, gpus=m._gpu.last, gpu_apps=m._gpu_apps,
        gpu_history=m._gpu.history(), last_line=r.last_line,
        last_log_at=m._last_log_at, log_count=m.seq,
        failures=tuple(m._failures[k] for k in sorted(m._failures)), stale_since=stale,
        reconnect_attempt=attempt, failed_starts=failed_starts, gave_up=r.gave_up, restarts_seen=m._restarts_seen,
        model=r.model, args_hash=r.args_hash, port=r.port, download=download,
        gpu_changed_at=m._gpu.changed_at, health_stale=health_stale,
        health_early_since=m._health_early_since,
        gpu_orphans=m._gpu_orphans.orphans if m._gpu_orphans is not None else None,
        typical=_typical_for(m._typical, r),
        updated=m._newest, knowledge=_knowledge(m._failures, m._read),
    )


def log_phases(m: Folded, ended: bool) -> tuple[Reading, list[PhaseSpan]]:
    """The reader's reading (``ended`` as :meth:`~probes.logs.reader.StartupReader.reading`) and its phase marks as
    spans (a fresh list), made once per line read: the reader changes only when the model
    feeds it a record (``seq`` moves), and most snapshots follow a GPU, unit or health look."""
    memo = m._reading
    if memo is not None and memo[0] == m.seq and memo[1] is ended:
        return memo[2], list(memo[3])
    r = m.reader.reading(ended=ended)
    marks = r.phases
    last = len(marks) - 1
    spans = tuple(PhaseSpan(m.phase, iso_to_epoch(m.time), m.duration_s if i < last else None, m.text)
                  for i, m in enumerate(marks))
    m._reading = (m.seq, ended, r, spans)
    return r, list(spans)



def _time_of(log: deque[LogEntry], seq: int) -> float | None:
    """The time of log entry ``seq``, when it is still kept."""
    if not log:
        return None
    i = seq - log[0].seq
    return log[i].time if 0 <= i < len(log) else None



def _knowledge(failures: Mapping[str, ProbeFailure], read: Mapping[str, float | None]) -> tuple[Knowledge, ...]:
    """Per probe of :data:`~probes.data.state.KNOWN_PROBES`: failing (since, why), read (when), or never."""
    out = []
    for p in KNOWN_PROBES:
        f = failures.get(p)
        if f is not None:
            out.append(Knowledge(p, "failing", f.time, f.message, f.reason))
        elif p in read:
            out.append(Knowledge(p, "read", read[p]))
        else:
            out.append(Knowledge(p, "never"))
    return tuple(out)



def _typical_for(t: Typical | None, r: Reading) -> Typical | None:
    """The typical durations given, while they are of this start's model and arguments."""
    if t is None or (t.model, t.args_hash) != (r.model, r.args_hash):
        return None
    return t


def _readiness(unit: UnitState | None, health: Health | None) -> str:
    """The readiness rung from the unit's state and the last health probe (docs/architecture.md's ladder)."""
    if unit is not None and not unit.running:
        return "inactive"
    if health is not None:
        return health.rung
    return "unknown"
