"""Verdicts: pure rules over a :class:`~probes.state.HostState` and the clock → one sentence.

The first rule that matches wins; rules are ordered by what an operator must know first
(no data, no unit, a loop, a failure, a stall, a lie). ``judge`` returns the state with its
``verdict`` set (None when nothing is wrong).
"""

from __future__ import annotations

import dataclasses
import time as _time

from probes.engines.base import PHASES
from probes.state import HostState, Verdict

#: Shown labels of the phase ids.
PHASE_LABELS = {"starting": "Starting", "download": "Download", "weights": "Weight load",
                "init": "Init", "graph_capture": "CUDA graph capture", "warmup": "Warm-up",
                "ready": "Ready"}

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
}

#: Seconds without a new log line after which a loading start counts as stalled, per phase.
#: Weight loading and downloads print bars often; graph capture prints a bar per batch; init can
#: be a long silent JIT build.
STALL_AFTER_S = {"starting": 300.0, "download": 300.0, "weights": 300.0, "init": 600.0,
                 "graph_capture": 180.0, "warmup": 300.0}


def fmt_span(seconds: float) -> str:
    """A span of time, short: ``42s``, ``1m15s``, ``1h02m``, ``2d03h`` (negative reads ``0s``)."""
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def _clock(t: float) -> str:
    return _time.strftime("%H:%M:%S", _time.gmtime(t))


def cause_words(cause: str | None) -> str:
    """A cause id in words (``cuda_oom`` → ``CUDA out of memory``)."""
    if cause is None:
        return "an unknown cause"
    return CAUSE_WORDS.get(cause, cause.replace("_", " "))


def reconnect_words(s: HostState) -> str:
    """``reconnecting (attempt 3), last data 12:03:01`` for a stale host (local clock time), or
    ``connecting (attempt 3), no data yet`` for one that never answered."""
    if s.updated is None:  # never got through
        return f"connecting (attempt {s.reconnect_attempt}), no data yet" if s.reconnect_attempt else "connecting, no data yet"
    head = f"reconnecting (attempt {s.reconnect_attempt})" if s.reconnect_attempt else "connection lost, reconnecting"
    return f"{head}, last data {_clock(s.updated)}"


def _stale(s: HostState) -> Verdict:
    conn = [f for f in s.failures if f.kind != "command"]
    login = next((f for f in conn if f.kind in ("host_key", "auth")), None)
    if login is not None:
        # Retrying will not help: the operator must act (the message says how).
        return Verdict("error", kind="ssh", sentence=f"SSH login failed: {login.message}")
    f = conn[0] if conn else None
    why = f" ({f.message})" if f is not None and f.message else ""
    words = reconnect_words(s)
    tail = "; showing the last known state." if s.updated is not None else "."
    return Verdict("warning", kind="stale", sentence=f"{words[0].upper()}{words[1:]}{why}{tail}")


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
    return Verdict("error", kind="unit_failed",
                   sentence=f"Unit {s.unit} failed (result {u.result or 'unknown'}{how}); the log says nothing of it.")


def verdict_for(s: HostState, now: float) -> Verdict | None:
    """The verdict for ``s`` at ``now`` (epoch seconds), or None when nothing is wrong."""
    if s.stale_since is not None:
        return _stale(s)
    u = s.unit_state
    if u is not None and u.load_state == "not-found":
        return Verdict("error", kind="not_found", sentence=f"Unit {s.unit} does not exist on this host.")
    cause = s.cause or (s.error.cause if s.error is not None else None)
    gave_up = u is not None and u.active_state == "failed"
    if s.restart_loop:
        failed = s.starts if s.state == "failed" else max(s.starts - 1, 2)
        n = f"; restart counter at {s.restart_counter}" if s.restart_counter is not None else ""
        if gave_up:
            end = "; systemd gave up"
        elif s.state == "loading":
            end = "; starting again"
        else:
            end = ""
        return Verdict("error", kind="restart_loop", sentence=f"Restart loop: {failed} starts failed, the last with "
                                f"{cause_words(cause)}{n}{end}.")
    if s.state == "failed" and s.error is None and u is not None and u.active_state == "failed":
        return _unit_failed(s)
    if s.state == "failed":
        where = PHASE_LABELS.get(s.phase, s.phase)
        return Verdict("error", kind="failed", sentence=f"Start failed in {where}: {cause_words(cause)}.")
    if s.state == "loading" and s.last_log_at is not None:
        quiet = now - s.last_log_at
        limit = STALL_AFTER_S.get(s.phase)
        if limit is not None and quiet >= limit:
            where = PHASE_LABELS.get(s.phase, s.phase)
            prog = ""
            if s.progress is not None and s.progress.phase == s.phase:
                prog = f" at {s.progress.done:g}/{s.progress.total:g}"
            return Verdict("warning", kind="stalled", sentence=f"No log line for {fmt_span(quiet)} in {where}{prog}: "
                                      f"the start looks hung.")
    if s.state == "loading" and s.error is not None and s.starts >= 2:
        n = f", restart counter at {s.restart_counter}" if s.restart_counter is not None else ""
        return Verdict("warning", kind="previous_failed", sentence=f"The previous start failed with {cause_words(s.error.cause)}; "
                                  f"this is start {s.starts}{n}.")
    if s.state == "ready" and s.readiness in ("port_closed", "http_unhealthy", "inactive"):
        h = s.health.detail if s.health is not None and s.readiness != "inactive" else s.readiness
        return Verdict("warning", kind="unhealthy", sentence=f"The log says ready but the server is not healthy ({h}).")
    if u is not None and u.active_state == "failed" and s.state not in ("failed",):
        return _unit_failed(s)
    return None


#: Headlines in the order an operator must see them (worst first).
HEADLINES = ("failed", "unreachable", "restart loop", "stalled", "loading", "ready", "stopped", "waiting")


def headline(s: HostState) -> str:
    """A host's condition in one or two words, worse than its start's state when the verdict says
    so: ``failed``, ``unreachable`` (never reached, or the SSH login is refused), ``restart loop``,
    ``stalled`` (a loading start gone silent), ``loading``, ``ready``, ``stopped``, ``waiting``."""
    if s.state == "failed":
        return "failed"
    kind = s.verdict.kind if s.verdict is not None else ""
    if kind == "ssh" or (s.stale_since is not None and s.updated is None):
        return "unreachable"  # never got through, or the login is refused: nothing is known
    if s.restart_loop or kind == "restart_loop":
        return "restart loop"
    if kind == "stalled":
        return "stalled"
    return s.state if s.state in HEADLINES else "waiting"


def judge(s: HostState, now: float) -> HostState:
    """``s`` with its ``verdict`` set for ``now`` (the same object when the verdict is unchanged)."""
    v = verdict_for(s, now)
    if v == s.verdict:
        return s
    return dataclasses.replace(s, verdict=v)


__all__ = ["PHASES", "PHASE_LABELS", "CAUSE_WORDS", "STALL_AFTER_S", "HEADLINES", "fmt_span",
           "cause_words", "headline", "verdict_for", "judge"]
