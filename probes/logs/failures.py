"""Failure lines: which lines are suspects, which prove the start failed, and the decisive one.

A failure has two stages: a line that matches a failure rule (or a traceback, or an exception
line) is a *suspect*; the start is *failed* only on evidence that the process ended or cannot go
on (a traceback's final exception line or an ERROR-level traceback, the engine's own death
lines, a signal or exit status, systemd's exit lines). The decisive line is the most decisive
suspect by :meth:`~probes.logs.starts.Failure.beats`. Where it failed is the furthest of the
phase reached and the phases its suspects name (:func:`fail_point`).
"""

from __future__ import annotations

import dataclasses
import re

from probes.data.vocab import PHASE_INDEX, PHASES
from probes.logs.classify import Hits
from probes.logs.context import Trace
from probes.logs.engines import hint_for
from probes.logs.engines.common import EXCEPTION_RE, GO_ERROR_RE
from probes.logs.logline import Line
from probes.logs.starts import Failure, Life, Start
from probes.logs.timeline import Mark, Timeline

_DOWNLOAD, _WARMUP = PHASE_INDEX["download"], PHASE_INDEX["warmup"]
_MAX_SUSPECTS = 64
#: A failure line that says it will be tried again ("retrying 1 of 2", "Retrying in 5 s",
#: "retry 2/5"): the process goes on, so the line is a suspect that ends nothing by itself.
_RETRY_RE = re.compile(r"\b[Rr]etrying (?:\d+ of \d+|in \d|\(\d+/\d+\))|\b[Rr]etry \d+/\d+")
_NO_LINE_HINT = ("A traceback began and its exception line has not arrived (or the excerpt ends before "
                 "it): the frames above say where it failed.")


def judge(start: Start, ln: Line, hits: Hits | None, top: bool, low: bool, high: bool, trace: Trace | None,
          engine: str | None, timeline: Timeline) -> None:
    """Whether a line the server wrote looks like a failure, and whether it proves one (``top``,
    ``low``, ``high``, ``trace``: its place, see :meth:`~probes.logs.context.LineContext.place`;
    ``engine`` for the hint's wording)."""
    msg = ln.msg
    trace_thread = trace is not None and trace.thread
    if "etry" in msg and _RETRY_RE.search(msg) is not None:
        low = True  # (vLLM's "Error retrieving safetensors: ..., retrying 1 of 2", logged at ERROR)
        high = False
    if (trace is not None and trace.first is ln and trace.header and start.life is not Life.READY
            and (hits is None or hits.fail is None)):
        # A traceback begins (also one printed inside an exception's message, as Ray's
        # "RuntimeError: Traceback (most recent call last):" wraps the real one): its exception
        # line is yet to come (or beyond an excerpt's end).
        # Under an error-level message it is the process's end, unless a thread's or one request's.
        fail(start, "unknown", 0, ln, _NO_LINE_HINT, engine, timeline, terminal=high and not trace_thread, low=low,
             trace=trace)
        return
    if hits is not None and hits.fail is not None and hits.fail.cause is not None:
        rule, cause = hits.fail, hits.fail.cause
        hint = rule.hint
        if hint is None:
            hint = hint_for(engine, cause)
        if "{" in hint and hits.fail_m is not None:
            hint = fill_hint(hint, hits.fail_m)
        # A rule that says the process ended is a fact whatever level it is logged at (Ollama's
        # app logs "server crash ... respawning" as a warning); anything else logged low is not.
        terminal = (rule.terminal and not trace_thread) or (
            (cause == "engine_died" or (top and not trace_thread)) and not low)
        fail(start, cause, rule.strength, ln, hint, engine, timeline, terminal=terminal,
             low=low and not rule.terminal, trace=trace)
    elif ("Error" in msg or "Exception" in msg) and (EXCEPTION_RE.match(msg) or GO_ERROR_RE.match(msg)):
        # An exception with no named cause; Go's and Rust's "Error: ..." is the process's last word.
        terminal = (top and not trace_thread) or GO_ERROR_RE.match(msg) is not None
        fail(start, "unknown", 3, ln, None, engine, timeline, terminal=terminal and not low, low=low, trace=trace)


def fail(start: Start, cause: str, strength: int, ln: Line, hint: str | None, engine: str | None,
         timeline: Timeline, *, terminal: bool = True, low: bool = False, trace: Trace | None = None) -> None:
    """A failure line: a suspect, and when ``terminal`` the proof that the start failed.

    Args:
        cause: a cause id (:data:`~probes.data.vocab.CAUSES`); strength: how decisive it is.
        hint: what to do about it; None for the engine's (``engine``) or the default hint.
        low: it is logged at a low level (never decisive over an error-level line).
        trace: the traceback it belongs to, whose frames may name a later phase.
    """
    if hint is None:
        hint = hint_for(engine, cause)
    if start.life is Life.EMPTY:
        # A failure seen only from outside (systemd's result, the kernel's OOM kill) is still a start.
        start.life = Life.LOADING
        start.first = timeline.mark("starting", ln)
    f = Failure(ln.lineno, ln.text, ln.msg.strip(), cause, strength, hint, low,
                thread=trace is not None and trace.thread)
    if start.ready:
        if start.life is Life.PROVISIONAL and cause == "port_in_use" and not low:
            # vLLM printed "Application startup complete." and then could not bind: never ready
            # (Uvicorn's error; a warning that one address would not bind is not that).
            start.life = Life.LOADING
            start.served = False
            start.main = start.pre_ready
            start.marks.pop("ready", None)
            terminal = True
        elif cause == "unknown":
            # An exception while serving (one bad request) does not end the start; keep it in
            # case the engine dies of it next, when it is the root cause.
            if start.pending is None or strength > start.pending.strength:
                start.pending = f
            return
        elif start.pending is not None and start.error is None:
            start.error = start.pending
    p = start.host_phase()
    f.at = timeline.mark("", ln)
    if trace is not None and trace.phase > p:
        f.phase, f.mark = trace.phase, trace.mark
    else:
        f.phase = p
    if start.failed:
        if f.beats(start.error):
            start.error = f
        return
    if start.life is Life.STOPPED:
        # Stopped on purpose (SIGTERM, Ctrl-C, systemctl stop): what fails after it is the stop's
        # consequence (a child "crashed with exit code -15", the interpreter's shutdown warnings).
        return
    if len(start.suspects) < _MAX_SUSPECTS:
        start.suspects.append(f)
    if f.beats(start.error):
        start.error = f
    if terminal:
        to_failed(start)


def fail_point(start: Start) -> tuple[int, Mark | None]:
    """Where a start failed: the furthest of the phase it reached and the phases its suspects
    name (frames, exception text), and the line that begins that phase if none did yet."""
    p, mk = start.host_phase(), None
    first = None
    for s in start.suspects:
        if first is None and not s.low:
            first = s
        if s.phase > p:
            p, mk = s.phase, s.mark
    if mk is None and start.completed == p and _DOWNLOAD < p < _WARMUP:
        # "Loading model weights took 10 GB", then an OOM: it failed in what comes next.
        p += 1
        at = (first or (start.suspects[0] if start.suspects else None))
        if at is not None and at.at is not None:
            mk = dataclasses.replace(at.at, phase=PHASES[p])
    return p, mk


def to_failed(start: Start) -> None:
    """The start failed, where :func:`fail_point` says."""
    p, mk = fail_point(start)
    start.life = Life.FAILED
    start.fail_phase = p
    if mk is not None:
        start.marks.setdefault(PHASES[p], mk)


def unrecovered(start: Start) -> bool:
    """The start has a suspect logged as an error (not as a warning, not a thread's death)
    that nothing recovered."""
    return any(not s.low and not s.thread for s in start.suspects)


def fill_hint(hint: str, m: re.Match[str]) -> str:
    """Fill ``{name}`` fields of a hint from a match's named groups (``{port}`` reads "port N")."""
    groups = m.groupdict()
    port = groups.get("port") or groups.get("port2")
    if port == "29500":
        return ("Port 29500 is torch.distributed's rendezvous port (MASTER_PORT): another multi-GPU "
                "job holds it; stop it or set MASTER_PORT to a free port.")
    hint = hint.replace("{port}", f"port {port}" if port else "the port")
    for name, value in groups.items():
        hint = hint.replace("{" + name + "}", value if value is not None else "?")
    return hint
