"""Verdicts: pure rules over a :class:`~probes.data.state.HostState` and the clock → one sentence.

The first rule that matches wins; rules are ordered by what an operator must know first
(no data: the host out of reach, or its unit or journal that cannot be read; no unit, a loop, a
failure, a stall, a lie). A host state is only as good as what was read: nothing says "fine"
while the unit or the journal probe is failing. ``judge`` returns the state with its
``verdict`` set (None when nothing is wrong).
"""

from __future__ import annotations

import dataclasses
import time as _time
from collections.abc import Mapping

from probes.data.events import CONNECTION_KINDS, GpuOrphan, ProbeFailure
from probes.data.state import HostState, Verdict
from probes.data.durations import fmt_span
from probes.data.vocab import PHASES
from probes.fold.access import LASTING
from probes.fold.eta import slower_sentence
from probes.fold.headline import UNHEALTHY_RUNGS
from probes.hosttext import one_line

#: Shown labels of the phase ids.
PHASE_LABELS = {"starting": "Starting", "download": "Download", "weights": "Weight load",
                "init": "Init", "graph_capture": "CUDA graph capture", "warmup": "Warm-up",
                "ready": "Ready"}

#: Every rule's id (:attr:`Verdict.kind`), worst first as :func:`verdict_for` tries them: a fixed
#: list, so views may key on it (the exporter's ``kind`` label; tests/test_exporter_metrics.py
#: checks that each ``Verdict(kind=...)`` in this module is listed). Views also show
#: :data:`probes.fold.headline.WAITING_KIND`, which is no rule of :func:`verdict_for`.
VERDICT_KINDS = ("stale", "ssh", "cannot_see", "not_found", "restart_loop", "unit_failed", "failed",
                 "gpu_orphans", "suspect", "stalled", "stale_health", "foreign_health", "not_serving",
                 "no_gpu_memory", "previous_failed", "slower", "unhealthy")

#: Cause ids in words, for sentences.
CAUSE_WORDS = {
    "cuda_oom": "CUDA out of memory", "host_oom_killed": "host out of memory (OOM killer)",
    "nccl": "NCCL failure", "port_in_use": "port already in use",
    "missing_python_h": "missing Python headers for a JIT build", "shared_library": "missing shared library",
    "model_not_found": "model not found", "hub_download": "Hub download failed",
    "tokenizer": "tokenizer failed", "unsupported_model": "unsupported model",
    "insufficient_free_memory": "GPU memory held by another process", "exit_code": "exit with error status",
    "signal": "killed by a signal", "core_dump": "native crash (core dump)",
    "start_limit": "start limit hit", "engine_died": "engine process died", "unknown": "an error",
    "gpu_arch": "no kernels for this GPU architecture", "bad_config": "invalid arguments or configuration",
    "dist_timeout": "ranks could not meet (rendezvous/handshake)", "disk_full": "disk full",
}

#: Seconds without a new log line (and without a GPU memory change or growth of the download,
#: :attr:`HostState.download`) after which a loading start counts as stalled, per phase: 120 s
#: everywhere by default; hosts override it per phase
#: (``stall_after_s`` in hosts.toml). Any log line counts as progress, so the long JIT builds and
#: the graph capture's per-batch bars keep a start from looking hung.
STALL_AFTER_S = {"starting": 120.0, "download": 120.0, "weights": 120.0, "init": 120.0,
                 "graph_capture": 120.0, "warmup": 120.0}


def _clock(t: float) -> str:
    return _time.strftime("%H:%M:%S", _time.gmtime(t))


def cause_words(cause: str | None) -> str:
    """A cause id in words (``cuda_oom`` → ``CUDA out of memory``)."""
    if cause is None:
        return "an unknown cause"
    return CAUSE_WORDS.get(cause, cause.replace("_", " "))


def failed_words(phase: str, cause: str | None) -> str:
    """The sentence for a start that failed in ``phase`` (a phase id): ``Start failed in Graph
    capture: CUDA out of memory.``, or, for a server that was ready, ``Crashed while serving
    (ready): killed by a signal.`` (it did not fail to start)."""
    if phase == "ready":
        return f"Crashed while serving (ready): {cause_words(cause)}."
    return f"Start failed in {PHASE_LABELS.get(phase, phase)}: {cause_words(cause)}."


def reconnect_words(s: HostState) -> str:
    """``reconnecting (attempt 3), last data 12:03:01`` for a stale host (local clock time), or
    ``connecting (attempt 3), no data yet`` for one that never answered."""
    if s.updated is None:  # never got through
        return f"connecting (attempt {s.reconnect_attempt}), no data yet" if s.reconnect_attempt else "connecting, no data yet"
    head = f"reconnecting (attempt {s.reconnect_attempt})" if s.reconnect_attempt else "connection lost, reconnecting"
    return f"{head}, last data {_clock(s.updated)}"


def _stale(s: HostState) -> Verdict:
    conn = [f for f in s.failures if f.kind in CONNECTION_KINDS]
    login = next((f for f in conn if f.kind in ("host_key", "auth")), None)
    if login is not None:
        # Retrying will not help: the operator must act (the message says how).
        return Verdict("error", kind="ssh", sentence=f"SSH login failed: {login.message}")
    f = conn[0] if conn else None
    why = f" ({f.message})" if f is not None and f.message else ""
    words = reconnect_words(s)
    tail = "; showing the last known state." if s.updated is not None else "."
    return Verdict("warning", kind="stale", sentence=f"{words[0].upper()}{words[1:]}{why}{tail}")


#: The probes without which a host state says nothing (a GPU or health failure only degrades its cell).
SIGHT_PROBES = ("unit", "journal")
#: Failure kinds of a probe that read its data but found a value it cannot parse: the data was
#: seen (the bad value degrades its own cell), so it is not "cannot see".
_READ_BUT_BAD = frozenset({"unparsable"})


def blind_failures(s: HostState) -> tuple[ProbeFailure, ...]:
    """The failures of the unit and journal probes that are not the connection's (the command ran
    on the host and could not read): what the ``cannot_see`` rule speaks of, unit first."""
    return tuple(f for p in SIGHT_PROBES if (f := s.failure(p)) is not None
                 and f.kind not in CONNECTION_KINDS and f.kind not in _READ_BUT_BAD)


def cannot_see_lasting(s: HostState) -> bool:
    """Whether upwatch cannot read the unit or the journal for a reason that waiting does not cure
    (:data:`probes.fold.access.LASTING`: sudo missing or refusing, no systemd, no journal access)."""
    return any(f.reason in LASTING or f.kind == "permission" for f in blind_failures(s))


def _cannot_see(s: HostState) -> Verdict | None:
    """``Cannot read the unit: sudo is not installed on the host (...): install sudo there, ...``:
    what could not be read, why, and the fix; None when the unit and journal probes are not failing
    on the host."""
    fails = blind_failures(s)
    if not fails:
        return None
    what = " or ".join(f"the {f.probe}" for f in fails)
    words: list[str] = []
    said: set[str] = set()
    for f in fails:
        key = f.reason or f.message
        if key in said:
            continue  # the unit and the journal refused for the same reason: said once
        said.add(key)
        # A failure with a reason reads "<probe's prefix>: <what (tool's line): fix>" (probes/watch/watcher.py).
        words.append(f.message.partition(": ")[2] or f.message if f.reason else f.message)
    evidence = tuple(f"{f.probe}: failing since {_clock(f.time)}: {one_line(f.message, max_chars=200)}" for f in fails)
    sentence = f"Cannot read {what}: {'; '.join(words).rstrip('.')}."
    return Verdict("warning", kind="cannot_see", sentence=sentence, evidence=evidence)


def _unit_failed(s: HostState) -> Verdict:
    """systemd says the unit failed and the log has no decisive line: say how the process ended
    (``ExecMainCode``: 1 exited, 2 killed, 3 dumped core; systemd 252 ``sigchld_code``)."""
    u = s.unit_state
    assert u is not None
    how = ""
    if u.exec_main_code == 1 and u.exec_main_status:
        how = f", the main process exited with status {u.exec_main_status}"
    elif u.exec_main_code in (2, 3) and u.exec_main_status:
        how = f", the main process was killed by signal {u.exec_main_status}" + (
            " (core dumped)" if u.exec_main_code == 3 else "")
    # Only a log that came in can say nothing: before its first line (a slow host, a backlog on its
    # way) the sentence says that instead, not that the log was read and was silent.
    log = "the log says nothing of it" if s.log_count > 0 else "no line of its log has come in yet"
    return Verdict("error", kind="unit_failed",
                   sentence=f"Unit {s.unit} failed (result {u.result or 'unknown'}{how}); {log}.")


#: Seconds a unit may be active with its port closed (or health failing) before that is a
#: verdict, when the log shows no start in progress; and seconds a running process may show no GPU
#: memory once it is past download.
NOT_SERVING_AFTER_S = 600.0
NO_GPU_MEMORY_AFTER_S = 300.0
#: A GPU "holds no memory" below this many MiB (the driver's own context is a few hundred).
NO_GPU_MEMORY_MIB = 1024
#: Seconds /health must answer OK while the log is before warm-up before ``foreign_health`` is said
#: (the journal can lag the health probe by a few seconds).
FOREIGN_HEALTH_AFTER_S = 30.0
#: Engine ids as their projects write them.
ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "tgi": "TGI", "trtllm": "TRT-LLM", "llamacpp": "llama.cpp",
                "ollama": "Ollama"}


def _orphan_words(orphans: tuple[GpuOrphan, ...]) -> tuple[str, list[str]]:
    total = sum(o.mem_mib or 0 for o in orphans)
    pids = ", ".join(str(o.pid) for o in orphans[:4]) + (", ..." if len(orphans) > 4 else "")
    evidence = [f"PID {o.pid} {one_line(o.command, max_chars=80)}: {o.mem_mib if o.mem_mib is not None else '?'} MiB"
                + (f" on GPU {o.gpu_index}" if o.gpu_index is not None else "") for o in orphans]
    n = len(orphans)
    return f"{n} process{'es' if n != 1 else ''} hold{'s' if n == 1 else ''} {total} MiB (PID {pids})", evidence


def systemd_gave_up(s: HostState) -> bool:
    """systemd stopped restarting the unit because it hit its start limit: ``ActiveState=failed``
    after automatic restarts (``NRestarts`` above 0; a manual start resets it), or with the
    journal's ``Start request repeated too quickly`` or ``Result=start-limit-hit`` (which a crash
    loop does not set: the last crash's result stays, systemd ``src/core/service.c``;
    tests/fixtures/systemctl-show/failed-start-limit-hit.txt). Without the unit probe,
    the journal's line while the start is failed. A unit started by hand that failed again
    (``Restart=no``) is failed, not "gave up"."""
    u = s.unit_state
    if u is not None:
        return u.active_state == "failed" and (bool(u.n_restarts) or s.gave_up or u.result == "start-limit-hit")
    return s.gave_up and s.state == "failed"


def _restart_loop(s: HostState, now: float, gave_up: bool) -> Verdict:
    fs = s.failed_starts
    n = max(len(fs), 2)
    causes = [f.cause for f in fs]
    span = ""
    began = [b for f in fs if (b := _iso_epoch(f.began)) is not None]
    # One figure however long the screen stays: from the first failed start's beginning to the
    # last failure (its decisive line; else the beginning of the start after it).
    # It grew with the clock while a new start loaded ("2 failed in 2m45s", then "3 in 1m54s").
    end = s.failed_at if s.failed_at is not None else s.start_began
    if end is None and len(began) >= 2:
        end = began[-1]
    if began and end is not None and end >= began[0] and (len(began) >= 2 or s.state != "failed"):
        span = f" in {fmt_span(end - began[0])}"
    if causes and len(set(causes)) == 1 and causes[0] is not None:
        last = fs[-1]
        where = f" during {PHASE_LABELS.get(last.phase, last.phase).lower()}" if last.phase not in ("starting",) else ""
        what = f"each {cause_words(causes[0])}{where}"
    else:
        last_cause = next((c for c in reversed(causes) if c), s.cause or (s.error.cause if s.error else None))
        what = f"the last with {cause_words(last_cause)}"
    u = s.unit_state
    if gave_up:
        outcome = "; systemd gave up (start limit): fix it, then systemctl reset-failed"
    elif u is not None and u.active_state == "failed":
        outcome = "; the unit is failed and systemd is not restarting it"
    elif s.state == "loading":
        outcome = "; starting again"
    else:
        outcome = ""
    # The time is when that start began (not when it failed: "OOM in Init at 03:21:02" read as the
    # failure's time, which came 50 s later), so it is said before the failure.
    evidence = [f"start {i + 1}" + (f" (began {f.began[11:19]})" if f.began and len(f.began) >= 19 else "")
                + f": {cause_words(f.cause)} in {PHASE_LABELS.get(f.phase, f.phase)}" for i, f in enumerate(fs)]
    if s.restart_counter is not None:
        evidence.append(f"restart counter (NRestarts) {s.restart_counter}")
    if s.restarts_seen:
        evidence.append(f"{s.restarts_seen} automatic restart{'s' if s.restarts_seen != 1 else ''} seen while watching")
    return Verdict("error", kind="restart_loop", sentence=f"Restart loop: {n} starts failed{span}, {what}{outcome}.",
                   evidence=tuple(evidence))


def _iso_epoch(text: str | None) -> float | None:
    if not text:
        return None
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def stall_limit(phase: str, stall_after: Mapping[str, float] | None = None) -> float | None:
    """Seconds of silence after which a loading start in ``phase`` counts as stalled: the host's
    setting for the phase, else its ``"*"`` setting, else :data:`STALL_AFTER_S`."""
    if stall_after:
        if phase in stall_after:
            return stall_after[phase]
        if "*" in stall_after:
            return stall_after["*"]
    return STALL_AFTER_S.get(phase)


def verdict_for(s: HostState, now: float, stall_after: Mapping[str, float] | None = None) -> Verdict | None:
    """The verdict for ``s`` at ``now`` (epoch seconds), or None when nothing is wrong.

    Args:
        s: the host's state. now: the injected clock's now.
        stall_after: per-phase silence limits in seconds (``"*"`` for every phase), over
            :data:`STALL_AFTER_S`.
    """
    if s.stale_since is not None:
        return _stale(s)
    blind = _cannot_see(s)
    if blind is not None:
        return blind
    u = s.unit_state
    if u is not None and u.load_state == "not-found":
        return Verdict("error", kind="not_found",
                       sentence=f"Unit {s.unit} does not exist on this host: check its name "
                                f"(systemctl list-unit-files there lists the units).")
    cause = s.cause or (s.error.cause if s.error is not None else None)
    gave_up = systemd_gave_up(s)
    orphans = tuple(s.gpu_orphans or ())
    if s.restart_loop:
        v = _restart_loop(s, now, gave_up)
        if orphans and cause in ("cuda_oom", "insufficient_free_memory"):
            words, oev = _orphan_words(orphans)
            v = dataclasses.replace(v, sentence=v.sentence[:-1] + f"; {words}.", evidence=v.evidence + tuple(oev))
        return v
    if s.state == "failed" and s.error is None and u is not None and u.active_state == "failed":
        return _unit_failed(s)
    if s.state == "failed":
        ev: list[str] = [f"decisive line: {one_line(s.error.text, max_chars=160)}"] if s.error is not None else []
        sentence = failed_words(s.phase, cause)
        if orphans and cause in ("cuda_oom", "insufficient_free_memory"):
            words, oev = _orphan_words(orphans)
            sentence = sentence[:-1] + f"; {words}."
            ev += oev
        return Verdict("error", kind="failed", sentence=sentence, evidence=tuple(ev))
    if orphans:
        words, ev = _orphan_words(orphans)
        return Verdict("warning", kind="gpu_orphans", sentence=f"GPU memory held outside the unit: {words}.",
                       evidence=tuple(ev))
    if s.state == "loading" and s.suspect is not None:
        # A line that looks like a failure, with no proof yet that the process ended: said as a
        # possibility, with the line, never as the start's fate.
        sus = s.suspect
        return Verdict("warning", kind="suspect",
                       sentence=f"Possible failure: {cause_words(sus.cause)} logged; the process has not ended (yet).",
                       evidence=(f"suspect line: {one_line(sus.text, max_chars=160)}",))
    if s.state == "loading" and s.last_log_at is not None:
        grew_at = s.download.grew_at if s.download is not None else None  # a silent download that grows
        last = max(t for t in (s.last_log_at, s.gpu_changed_at, grew_at) if t is not None)
        quiet = now - last
        limit = stall_limit(s.phase, stall_after)
        if limit is not None and quiet >= limit:
            where = PHASE_LABELS.get(s.phase, s.phase)
            prog = ""
            if s.progress is not None and s.progress.phase == s.phase:
                prog = f" at {s.progress.done:g}/{s.progress.total:g}"
            silent = f"No log line for {fmt_span(now - s.last_log_at)}"
            if s.gpu_changed_at is not None and s.gpu_changed_at > s.last_log_at:
                silent += f" and no GPU memory change for {fmt_span(quiet)}"
            if grew_at is not None:
                silent += f", the download has not grown for {fmt_span(now - grew_at)},"
            evidence: tuple[str, ...] = (f"last log line at {_clock(s.last_log_at)}",
                                         f"GPU memory last moved at {_clock(s.gpu_changed_at)}" if s.gpu_changed_at
                                         else "GPU memory has not moved", f"limit for {where}: {fmt_span(limit)}")
            if grew_at is not None:
                evidence += (f"the download last grew at {_clock(grew_at)}",)
            return Verdict("warning", kind="stalled", sentence=f"{silent} in {where}{prog}: the start looks hung.",
                           evidence=evidence)
    if s.health_stale and u is not None:
        return Verdict("warning", kind="stale_health",
                       sentence=f"/health answers, but from an earlier process: MainPID is now {u.main_pid} and "
                                f"the new start has not logged ready; not ready yet.",
                       evidence=(f"MainPID {u.main_pid}", f"InvocationID {u.invocation_id or '?'}"))
    if (s.health_early_since is not None and now - s.health_early_since >= FOREIGN_HEALTH_AFTER_S
            and s.health is not None):
        name = ENGINE_NAMES.get(s.engine, s.engine)
        return Verdict("warning", kind="foreign_health",
                       sentence=f"/health answers OK, but the log is still in {PHASE_LABELS.get(s.phase, s.phase)} and "
                                f"{name} binds its port only after loading: something else answers there.",
                       evidence=(f"/health OK since {_clock(s.health_early_since)}",
                                 f"health: {s.health.detail or s.health.rung}",
                                 "an older server that outlived its unit? see who listens: ss -ltnp"))
    up_s = now - u.started_at if u is not None and u.running and u.started_at is not None else None
    if (up_s is not None and up_s >= NOT_SERVING_AFTER_S and s.state in ("waiting", "stopped")
            and s.readiness in ("port_closed", "http_unhealthy")):
        h = s.health.detail if s.health is not None else s.readiness
        return Verdict("warning", kind="not_serving",
                       sentence=f"Unit active for {fmt_span(up_s)} but not serving ({h}), and the log shows no start in progress.")
    if (up_s is not None and up_s >= NO_GPU_MEMORY_AFTER_S and s.state == "loading"
            and s.phase not in ("starting", "download") and s.download is None and s.gpus is not None and s.gpus.gpus
            and all(g.mem_used_mib is not None and g.mem_used_mib < NO_GPU_MEMORY_MIB for g in s.gpus.gpus)):
        return Verdict("warning", kind="no_gpu_memory",
                       sentence=f"The process is up {fmt_span(up_s)}, in {PHASE_LABELS.get(s.phase, s.phase)}, but no GPU "
                                f"holds memory: is it on the GPUs you think (CUDA_VISIBLE_DEVICES)?")
    if s.state == "loading" and s.error is not None and s.starts >= 2:
        n = f", restart counter at {s.restart_counter}" if s.restart_counter is not None else ""
        return Verdict("warning", kind="previous_failed", sentence=f"The previous start failed: {cause_words(s.error.cause)}; "
                                  f"this is start {s.starts}{n}.")
    if s.typical is not None and s.state == "loading":
        slow = slower_sentence(s, now)
        if slow is not None:
            return Verdict("warning", kind="slower", sentence=slow[0], evidence=slow[1])
    if s.state == "ready" and s.readiness in UNHEALTHY_RUNGS:
        h = s.health.detail if s.health is not None and s.readiness != "inactive" else s.readiness
        ready_line = next((sp.text for sp in reversed(s.phases) if sp.phase == "ready" and sp.text), None)
        ev = [f"readiness: {s.readiness}" + (f" ({one_line(h, max_chars=120)})" if h != s.readiness else "")]
        if ready_line:
            ev.append(f"ready line: {one_line(ready_line, max_chars=160)}")
        return Verdict("warning", kind="unhealthy", sentence=f"The log says ready but the server is not healthy ({h}).",
                       evidence=tuple(ev))
    if u is not None and u.active_state == "failed" and s.state not in ("failed",):
        return _unit_failed(s)
    return None


def judge(s: HostState, now: float, stall_after: Mapping[str, float] | None = None) -> HostState:
    """``s`` with its ``verdict`` set for ``now`` (the same object when the verdict is unchanged)."""
    v = verdict_for(s, now, stall_after)
    if v == s.verdict:
        return s
    return dataclasses.replace(s, verdict=v)


__all__ = ["PHASES", "PHASE_LABELS", "VERDICT_KINDS", "CAUSE_WORDS", "STALL_AFTER_S", "SIGHT_PROBES",
           "cause_words", "verdict_for", "judge", "blind_failures", "cannot_see_lasting"]
