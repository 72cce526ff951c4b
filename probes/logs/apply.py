"""The startup reader's stage 4 (:class:`~probes.logs.reader.StartupReader`): what a line, placed in
its message and classified, says of the current start.

A line the server wrote moves the start's :class:`~probes.logs.starts.Life`, its phase and progress
(:mod:`probes.logs.phases`), its port, model and suspects (:mod:`probes.logs.failures`); a line
systemd or the kernel wrote about the unit is :class:`~probes.logs.lifecycle.StartHistory`'s.
"""

from __future__ import annotations

import re

from probes.data.vocab import PHASE_INDEX
from probes.logs.classify import UNIT_WEIGHT, Classifier, Hits, unit_engine
from probes.logs.context import BENIGN_LINES, Ctx, LineContext
from probes.logs.failures import fail, judge
from probes.logs.identity import identify, listen_port
from probes.logs.lifecycle import StartHistory
from probes.logs.logline import Line
from probes.logs.phases import advance, bar, count, frame_phase, phase_line, ready
from probes.logs.settle import is_probe_access
from probes.logs.starts import Life
from probes.logs.timeline import Timeline

_STARTING = PHASE_INDEX["starting"]
_EMPTY, _LOADING = Life.EMPTY, Life.LOADING
# "ollama.service: Failed with result ...": systemd's own wording even where no identifier shows it.
UNIT_MSG_RE = re.compile(r"[\w@.:\\-]+\.(?:service|scope|socket|mount|target): ")
# A request answered (Uvicorn's access line, llama-server's request log): the server is serving.
_SERVED_RE = re.compile(r'"(?:GET|POST) /\S* HTTP/[\d.]+" 2\d\d\b|request: (?:GET|POST) /\S+ \S+ 2\d\d\b|'
                        r'all slots are idle')


class ApplyLines:
    """The reader's stage 4 (:class:`~probes.logs.reader.StartupReader` is one): the reader's own
    state, which it reads and writes."""

    _cl: Classifier
    _cx: LineContext
    _history: StartHistory
    _timeline: Timeline
    _last_line: str

    def _apply_host(self, hits: Hits | None, ln: Line) -> None:
        """A line systemd or the kernel wrote about the unit: lifecycle, or a kernel OOM kill."""
        cl = self._cl
        if not cl.committed:
            m = UNIT_MSG_RE.match(ln.msg)
            name = unit_engine(m.group(0)) if m is not None else None
            if name is None and hits is not None and hits.lifecycle is not None:
                what = hits.lifecycle[1].groupdict().get("what")
                name = unit_engine(what) if what else None
            if name is not None:
                cl.evidence(name, UNIT_WEIGHT, "unit", self._history.current)
        if hits is None:
            return
        if hits.lifecycle is not None:
            self._history.systemd(hits.lifecycle[0], hits.lifecycle[1], ln, cl.engine)
        elif hits.fail is not None and hits.fail.cause == "host_oom_killed":
            fail(self._history.current, "host_oom_killed", hits.fail.strength, ln, None, cl.engine, self._timeline)

    def _apply(self, ln: Line, hits: Hits | None, ctx: Ctx) -> None:
        """A line the server wrote: what it says of the start (``ctx`` from
        :meth:`~probes.logs.context.LineContext.place`)."""
        frame, code, top, low, high, trace = ctx
        msg = ln.msg
        history = self._history
        timeline = self._timeline
        start = history.current
        if hits is not None and hits.harmless:
            # A request log echoing a client's text: none of its words are the server's own (a
            # prompt holding a banner or a progress bar began a start, a phase, a bar).
            if not start.ended and start.life is not _EMPTY:
                start.output = True
                self._last_line = ln.text
            return
        if start.ended and start.invocation is None:
            start = history.new_start()
        if hits is not None and hits.banner is not None:
            key = hits.banner.pattern
            if key in start.banners or start.failed or start.host_phase() > _STARTING:
                start = history.new_start()
            start.banners.add(key)
        if start.life is _EMPTY:
            start.life = _LOADING
            start.first = timeline.mark("starting", ln)
        start.output = True
        if ("port" in msg or "://" in msg) and (port := listen_port(msg)) is not None:
            start.port = port
        if start.args_hash is None and "model" in msg:
            ident = identify(msg)
            if ident is not None and (ident.args_hash is not None or start.model is None):
                start.model = ident.model or start.model
                start.args_hash = ident.args_hash
        if '"GET /' not in msg or not is_probe_access(msg):  # most lines: without the call
            self._last_line = ln.text
        phase_rule = hits.phase if hits is not None else None
        if msg[0] == "." and phase_rule is None and msg.startswith("......") and not msg.strip(". "):
            advance(start, ln.rank, self._cl.dots(), ln, timeline)
        if hits is not None and hits.frame is not None and trace is not None:
            frame_phase(start, trace, hits.frame.phase, ln, timeline)
        if phase_rule is not None and phase_rule.phase is not None:
            phase_line(start, phase_rule, phase_rule.phase, ln, timeline, high)
        if ("/s" in msg and ("/s]" in msg or "/s," in msg)) or "s/it" in msg:
            bar(start, ln, self._cl.bars, timeline)
        elif hits is not None and hits.progress_m is not None:
            count(start, ln, phase_rule.phase if phase_rule else None, hits.progress_m)
        if start.suspects and start.served and not start.failed and _SERVED_RE.search(msg) is not None:
            # It answered a request after the suspect: what looked fatal was one failed request.
            start.suspects.clear()
            start.error = None
        cx = self._cx
        if hits is not None:
            if hits.ready is not None and ready(start, hits.ready, ln, timeline):
                history.ever_ready = True
            if hits.ends and not start.failed:
                start.life = Life.STOPPED  # the server says it shut down (Ctrl-C, SIGTERM): not failed
            if hits.benign:
                cx.benign = BENIGN_LINES
        if cx.benign or code or frame or (trace is not None and trace.benign) or (hits is not None and hits.harmless):
            if code and hits is not None and hits.fail is not None and not cx.benign and not start.ready and (
                    trace is not None and not trace.benign):
                # (Not once ready: a request's traceback cut at its raise is that request's error.)
                # The source line raises an exception whose message names the cause: what the
                # exception line will say (or would have, past an excerpt's end). Logged as low
                # as it is, so that any line logged as an error (the exception line) beats it.
                rule = hits.fail
                fail(start, rule.cause or "unknown", rule.strength, ln, rule.hint, self._cl.engine, timeline,
                     terminal=trace.high and not trace.thread, low=True, trace=trace)
            return
        if trace is not None or (hits is not None and hits.fail is not None) or "Error" in msg or "Exception" in msg:
            judge(start, ln, hits, top, low, high, trace, self._cl.engine, timeline)
