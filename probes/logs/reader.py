"""The startup reader: how far has this server's start come, and if it broke, why?

:class:`StartupReader` takes a log one line at a time (plain text as the server printed it, or
journal records) and after any line can say what it knows so far as a frozen :class:`Reading`,
using nothing it has not read yet. Reading a whole file and reading it cut after line *k* give the
same answer at line *k*: there is no look-ahead and no end-of-file step.

What it tracks, per server start (a start is one process lifetime):

* the phase (canonical ids in :data:`~probes.data.vocab.PHASES`), with the line and time each
  phase began. Phases only move forward, except ``download``, which may come before or inside
  ``starting`` and returns to it. With tensor/data-parallel ranks a phase is the host's once every
  rank seen has reached it (unless the main process, which prints the bars and the HTTP lines, is
  already further).
* progress inside a phase: the last ``n/N`` of a tqdm bar (shards, CUDA graph batches, hub files);
  with ranked bars, the slowest rank's.
* the decisive failure line: the most decisive line by cause (see
  :data:`~probes.data.vocab.CAUSE_STRENGTH`), the first among equals, a truncated copy superseded
  by its complete copy; warnings (ignored imports, deprecations) never count.
* starts and restarts: systemd's ``Started``/``Main process exited``/``Scheduled restart job`` lines,
  journal invocation ids, and banners printed once per launch.
"""

from __future__ import annotations

import copy
import re

from probes.data.reading import Reading
from probes.data.vocab import PHASE_INDEX
from probes.logs.apply import UNIT_MSG_RE, ApplyLines
from probes.logs.classify import UNIT_WEIGHT, Classifier, Hits, unit_engine
from probes.logs.context import (CTX_OF_LEVEL, CTX_PLAIN, FRAME_RE, THREAD_EXC, Ctx, LineContext,
                                 level_class)
from probes.logs.jsonlog import JsonRecord, decode_record
from probes.logs.lifecycle import StartHistory
from probes.logs.logline import DATE_OR_CLOCK_RE, MAX_LINE_CHARS, Line, Stamp, frames, parse
from probes.logs.quiet import QuietLines
from probes.logs.settle import Quiet
from probes.logs.services import Services
from probes.logs.timeline import Timeline

#: The furthest phase a traceback frame can name (frame rules stop there).
_LAST_FRAME_PHASE = PHASE_INDEX["graph_capture"]
#: Identifiers of the host's own lines: they end starts and explain failures, but never begin a start.
_HOST_IDENTS = frozenset({"systemd", "kernel"})
# "user@host:~$ vllm serve ...", "(venv) root@gpu:/app# ", "$ journalctl -u x": a shell prompt.
_PROMPT_RE = re.compile(r"(?:\(\S+\) )?(?:\[?[\w.-]+@[\w.-]+[: ][^$#]*\]?[$#]|\$)(?: |$)")
# The shell's own lines around a pasted log: the echo of Ctrl-C (^C, which says nothing by itself: a
# server in the foreground prints its own KeyboardInterrupt or shutdown lines), a background job's
# number and PID ("[1] 2613", bash's job control), nohup's notice (coreutils nohup.c).
_SHELL_RE = re.compile(r"\^[CZ\\]$|\[\d{1,3}\] \d{1,9}$|nohup: (?:ignoring input|appending output|redirecting stderr)")
# `journalctl -o cat`: systemd's own lines with no identifier, naming the unit (Debian's "name - Description").
_BARE_SYSTEMD_RE = re.compile(r"(?:Started|Starting|Stopped|Stopping|Failed to start) [\w@.:\\-]+\.service\b")
_LEADING_NUMBER_RE = re.compile(r"(\d{1,9})[:-](?:\S| )")
# What a person writes where they left lines out of a pasted log.
_ELISION_RE = re.compile(r"\s*(?:\.{3}|…|\[\.{3}\]|\(\.{3}\)|<snip>|\[snip\]|\.{3} ?\(.{0,60}\))\s*$", re.I)
#: A hard-wrapped JSON record is rejoined over at most this many physical lines / characters.
_JSON_MAX_LINES, _JSON_MAX_CHARS = 200, 64 * 1024


class StartupReader(QuietLines, ApplyLines):
    """Incremental reader of one unit's (or one file's) log.

    Feed lines with :meth:`feed` (text) or :meth:`feed_bytes`; a journal record
    (:func:`probes.logs.journal_json.parse_record`) is its texts fed with its stamp, identifier and
    invocation id. :meth:`reading` may be called after any line and costs O(phases). Never
    raises on any input text.

    Each line goes through four stages:

    1. decode (:meth:`feed`, :func:`probes.logs.logline.frames`, :func:`probes.logs.logline.parse`,
       :func:`probes.logs.jsonlog.decode_record`): JSON records rejoined and unpacked, ``\\r``
       frames split, escape codes dropped, wrapper and engine prefixes parsed into a
       :class:`~probes.logs.logline.Line`; a line of one service of several goes to that
       service's reader (:mod:`probes.logs.services`);
    2. context (:class:`~probes.logs.context.LineContext`): the line's place in a message: its
       log level (a traceback takes the level of the message that introduced it), traceback
       frame or exception line, source code under a frame, a warning's continuation;
    3. classify (:class:`~probes.logs.classify.Classifier`): the engine tables' hits, as one
       :class:`~probes.logs.classify.Hits`, and the engine evidence they carry (scores, not a
       first lock);
    4. apply (:meth:`~probes.logs.apply.ApplyLines._apply`): the hits change the current start's
       :class:`~probes.logs.starts.Life`, phase and progress (:mod:`probes.logs.phases`) and
       suspects (:mod:`probes.logs.failures`); systemd's lines and new starts are
       :class:`~probes.logs.lifecycle.StartHistory`'s.

    A line that cannot matter (:mod:`probes.logs.quiet`) skips the four stages; its bookkeeping
    is done before the next line that may matter or a reading, with the same result.

    A failure has two stages: a line that matches a failure rule is a *suspect*; the start is
    *failed* only on evidence that the process ended or cannot go on (a traceback's final
    exception line or an ERROR-level traceback, the engine's own death lines, a signal or exit
    status, systemd's exit lines), or when the log ends after an unrecovered suspect
    (``reading(ended=True)``). A suspect is recovered when the start moves on to a later phase.

    Args:
        engine: the engine id when known (``--engine``); detected from the log when None.
        unit: the unit the log is about, when known: its name counts as evidence of the engine.

    Raises:
        ValueError: for an engine id that is not known.
    """

    def __init__(self, engine: str | None = None, unit: str | None = None) -> None:
        self._cl = Classifier(engine)
        self.lines = 0
        self.bad_lines = 0
        self._timeline = Timeline()
        self._history = StartHistory(self._timeline)
        self._history.unit = unit
        self._cx = LineContext()
        self._last_line = ""
        self._numbered = False
        self._number: int | None = None  # the leading number of the line before, if it had one
        self._unit = unit
        # A log of several services (docker compose, kubectl --prefix): one reader per service,
        # from the first line with a service prefix on.
        self._services: Services[StartupReader] | None = None
        self._is_sub = False
        self._json: list[tuple[Line, bool]] = []  # pieces of a JSON record not yet complete
        self._quiet = Quiet()  # lines that cannot matter, not yet settled (QuietLines)
        self._steady = None
        self._unsteady = True
        self._skip = self._backoff = 0
        if unit and not self._cl.forced:
            name = unit_engine(unit)
            if name is not None:
                self._cl.evidence(name, UNIT_WEIGHT, "unit", self._history.current)

    @property
    def engine(self) -> str | None:
        """The engine id once the log named it for sure (or it was forced), else None."""
        if self._services is not None:
            chosen = self._services.chosen()
            return chosen[1].engine if chosen is not None else None
        return self._cl.engine if self._cl.committed else None

    @property
    def engine_evidence(self) -> int:
        """The most evidence any one engine has in the lines read so far (0: they name none)."""
        return max(self._cl.scores.values(), default=0)

    # --- stage 1: decode -------------------------------------------------------------------------

    def feed_bytes(self, raw: bytes, lineno: int | None = None) -> None:
        """Feed one physical line as bytes (invalid UTF-8 is replaced, never fatal)."""
        text = raw.decode("utf-8", "replace")
        if text.isprintable() and len(text) <= MAX_LINE_CHARS and (
                "/" not in text or ("/s]" not in text and "/s," not in text and "s/it" not in text)
                or ("it/s" not in text and "s/it" not in text and "B/s" not in text)):
            # The common case: one plain line, no escape codes, \r frames, control characters or bars (the
            # last test is frames()' own for a bar glued to a line: a vLLM stats line's "tokens/s," is none).
            self.lines = lineno = self.lines + 1 if lineno is None else lineno
            if self._services is not None and text and self._service_quiet(lineno, text, None, None):
                return
            if self._skip:
                self._skip -= 1
            elif text and self._quiet_line(lineno, text, None, None):
                return
            if self._quiet.lines:
                self._settle()  # self._matters(), without the call
            self._unsteady = True
            if text:
                if not self._numbered and text[0].isdigit():
                    self._note_number(text)
                ln = parse(lineno, text, numbered=self._numbered)
                if ln.service is None and self._services is None and not self._json and not ln.numbered \
                        and ("{" not in text or not text.startswith("{", ln.wrap_end)):
                    self._plain(ln, False)  # the common case: no service to route to, no JSON record
                else:
                    self._line(ln, False)
            return
        self.feed(text, lineno)

    def feed(self, text: str, lineno: int | None = None, *, stamp: Stamp | None = None,
             ident: str | None = None, systemd: bool = False, invocation: str | None = None) -> None:
        """Feed one physical line (without its newline).

        Args:
            text: the line; may hold ``\\r`` frames, escape codes, glued bars, or a JSON log record
                (``{"timestamp": ..., "level": ..., "message": ...}``, TGI's ``--json-output``),
                also one a terminal hard-wrapped over several lines (rejoined).
            lineno: its 1-based number in the input (default: one more than the last).
            stamp: its time when known from outside the text (a journal record's realtime stamp).
            ident: its syslog identifier when known from outside the text.
            systemd: the line was written by systemd about the unit (journal ``_PID=1`` or the
                user manager), so its lifecycle wording counts.
            invocation: the journal's ``_SYSTEMD_INVOCATION_ID``/``INVOCATION_ID``; a new one is a
                new start.
        """
        if self._services is not None and not systemd and text and (ident is None or ident not in _HOST_IDENTS) \
                and text.isprintable() and (not invocation or invocation == self._history.current.invocation):
            n = self.lines + 1 if lineno is None else lineno
            if self._service_quiet(n, text, stamp, ident):
                self.lines = n
                return
        if self._skip:
            self._skip -= 1
        elif not systemd and text and (ident is None or ident not in _HOST_IDENTS) \
                and self._quiet_text(text, lineno, stamp, ident, invocation):
            return
        self._matters()
        self.lines = lineno = self.lines + 1 if lineno is None else lineno
        if invocation:
            self._history.note_invocation(invocation)
        if not self._numbered and text[:1].isdigit():
            self._note_number(text)
        if text and text.isprintable() and len(text) <= MAX_LINE_CHARS and (
                "it/s" not in text and "s/it" not in text and "B/s" not in text):
            # One plain line (frames() would give it back as it is): no frames to split.
            self._line(parse(lineno, text, stamp=stamp, ident=ident, numbered=self._numbered), systemd)
            return
        service = None
        for i, frame in enumerate(frames(text)):
            ln = parse(lineno, frame, stamp=stamp, ident=ident, numbered=self._numbered)
            if i == 0:
                service = ln.service
            elif ln.service is None and service is not None:
                ln.service = service  # a \r frame of a service's line is that service's
            self._line(ln, systemd)

    def _record(self, ln: Line, systemd: bool) -> bool:
        """Read a JSON log record (after any wrapper prefix), or the next piece of one a terminal
        hard-wrapped over several lines; False when the line is plain text. Pieces that never make
        a record are read as text once that is clear (a new record begins, or the limits)."""
        body = ln.text[ln.wrap_end:]
        if self._json and body[:2] == '{"':
            self._flush_json()  # a new record begins: what was gathered was not one
        if not self._json:
            if body[:2] != '{"':
                return False
            rec = decode_record(body)
            if rec is not None:
                self._feed_record(rec, ln, systemd)
                return True
            if body.rstrip().endswith("}"):
                return False  # a whole line that is not a record: plain text
            self._json = [(ln, systemd)]
            return True
        self._json.append((ln, systemd))
        joined = "".join(p.text[p.wrap_end:] for p, _ in self._json)
        rec = decode_record(joined)
        if rec is not None:
            first = self._json[0]
            self._json = []
            self._feed_record(rec, first[0], first[1])
            return True
        if len(self._json) >= _JSON_MAX_LINES or len(joined) >= _JSON_MAX_CHARS:
            self._flush_json()
        return True

    def _flush_json(self) -> None:
        """Read the pieces of a JSON record that never completed as the plain lines they are."""
        pieces, self._json = self._json, []
        for ln, systemd in pieces:
            self._plain(ln, systemd)
        if self._services is not None:
            for sub in self._services.subs.values():
                sub._flush_json()

    def _feed_record(self, rec: JsonRecord, at: Line, systemd: bool) -> None:
        """The lines of a record's message, as if the engine had printed them with its prefix."""
        # A shipper's "INFO" on every record says nothing of the message (stderr tracebacks
        # included); a record that says it is an error is one.
        level = rec.level if rec.level is not None and level_class(rec.level) > 0 else None
        stamp = at.stamp or rec.stamp
        for k, text in enumerate(rec.text.split("\n")):
            for frame in frames(text):
                ln = parse(at.lineno, frame, stamp=stamp, ident=at.ident)
                ln.service = ln.service or at.service
                if k == 0:
                    ln.prefixed = True  # the record's first line begins its message
                    if ln.level is None:
                        ln.level = level
                self._plain(ln, systemd)

    def _note_number(self, text: str) -> bool:
        """The first line numbered 1, or two lines with growing ``N:``/``N-`` numbers: ``grep -n``.
        A line that begins with a date or a clock is no evidence either way: its number is left out,
        as a line's that begins with no digit. Returns whether the log is now known to be numbered."""
        if DATE_OR_CLOCK_RE.match(text) is not None:
            return self._numbered
        m = _LEADING_NUMBER_RE.match(text)
        if m is None:
            self._number = None
            return self._numbered
        n = int(m.group(1))
        if (self._number is not None and n > self._number) or (n == 1 and self.lines == 1):
            self._numbered = True
        self._number = n
        return self._numbered

    def note_bad_line(self, lineno: int | None = None) -> None:
        """Count an input line that could not be read at all (e.g. a truncated journal record)."""
        self.lines = self.lines + 1 if lineno is None else lineno
        self.bad_lines += 1

    # --- the fold ----------------------------------------------------------------------------------

    def _line(self, ln: Line, systemd: bool) -> None:
        """One logical line: to its service's reader, as (a piece of) a JSON record, or as text."""
        if ln.numbered:
            self._numbered = True  # grep -n output: every later line has a number to strip
        if (ln.service is not None or self._services is not None) and not self._is_sub:
            services = self._services
            if services is None:
                services = self._services = Services(self._service_reader)
            sub = services.route(ln)
            if sub is not None:
                if sub._quiet.lines:
                    sub._settle()  # its quiet lines (_service_quiet) before this one
                sub._unsteady = True
                sub.lines = ln.lineno
                sub._numbered = self._numbered
                sub._line(ln, systemd)
            return
        if (self._json or ln.text.startswith("{", ln.wrap_end)) and self._record(ln, systemd):
            return
        self._plain(ln, systemd)

    def _service_reader(self) -> StartupReader:
        """A reader for one service's lines: the engine forced on this one, if any, but with the
        engine evidence still counted (the service's lines must name an engine to be chosen)."""
        sub = StartupReader(self._cl.engine if self._cl.forced else None, self._unit)
        sub._is_sub = True
        sub._cl.watching = True  # with --engine too, the service's lines must name an engine
        return sub

    def _plain(self, ln: Line, systemd: bool) -> None:
        """Stages 2 to 4 for one logical line."""
        msg = ln.msg
        # Every elision holds ".", "…" or the "p" of "snip": most short lines need no regex call.
        if len(msg) < 24 and ("." in msg or "…" in msg or "p" in msg or "P" in msg) and _ELISION_RE.match(msg):
            return  # "...", "[...]": where whoever pasted the log left lines out
        st = ln.stamp
        if st is not None:  # the year of the nearest full date, and the last timestamped line
            self._timeline.saw(ln.lineno, st)
        if "░" in msg and msg.startswith("░░"):
            return  # `journalctl -x` catalog text explaining the line above
        cx = self._cx
        tb = cx.tb
        cl = self._cl
        if tb is not None and not cx.benign and msg[:1] == " " and "Traceback" not in msg:
            # An indented line in a traceback (a frame, the source under one, a caret line):
            # LineContext.place's answer, and the frame index's (Classifier.classify), without the calls.
            code = cx.after_frame
            frame = cx.after_frame = msg.find('File "', 0, 80) >= 0 and FRAME_RE.match(msg) is not None
            cx.prev_line = ln if ln.prefixed else None
            cx.thread_exc = False
            ctx: Ctx = (frame, code, False, tb.low, tb.high, tb)
            if (frame or code) and not cl.watching:
                hits = None
                if tb.phase < _LAST_FRAME_PHASE:
                    for rule, _ in cl.frames.match(msg):
                        hits = Hits(frame=rule)
                        break
                if code:
                    hits = cl.raised(msg, hits)
            else:
                hits = cl.classify(ln, frame or code, tb.phase < _LAST_FRAME_PHASE, self._history.current)
        elif (tb is None and not cx.benign and not cx.after_frame and "Traceback" not in msg
                and msg.find('File "', 0, 80) < 0):
            # The common case, at the cost of a look: a line that is no part of a traceback
            # (LineContext.place's answer for it, without the call).
            cx.thread_exc = "Exception" in msg and msg.startswith(THREAD_EXC)
            if ln.prefixed:
                cx.prev_line = ln
                ctx = CTX_OF_LEVEL.get(ln.level, CTX_PLAIN)
            else:
                cx.prev_line = None
                ctx = CTX_PLAIN
            if not cl.watching:
                found = cl.matcher.match(msg)  # the common case of stage 3, without the call
                hits = cl.hits(found, False, False, msg) if found else None
            else:
                hits = cl.classify(ln, False, False, self._history.current)
        else:
            ctx = cx.place(ln)
            tr = ctx[5]
            hits = cl.classify(ln, ctx[0] or ctx[1], tr is not None and tr.phase < _LAST_FRAME_PHASE,
                               self._history.current)
        is_systemd = systemd or (ln.ident is not None and ln.ident in _HOST_IDENTS) or (
            msg[:1] == "k" and msg.startswith("kernel: ")) or (
            ".service" in msg and (UNIT_MSG_RE.match(msg) is not None or "systemd[" in msg
                                   or (ln.ident is None and _BARE_SYSTEMD_RE.match(msg) is not None)))
        if not is_systemd and ("$" in msg or "#" in msg) and (pm := _PROMPT_RE.match(msg)) is not None:
            # A shell prompt pasted with the log: read for the engine's name only, unless the
            # program's first line is glued to it ("root@gpu:/w# I0521 10:03:57.685707 107 x.cc:1] ...").
            rest = msg[pm.end():]
            if rest and rest[0] != " " and (glued := parse(ln.lineno, rest, stamp=ln.stamp)).prefixed:
                self._plain(glued, systemd)
            return
        if is_systemd:
            self._apply_host(hits, ln)
            return
        if not msg or msg.isspace() or (msg[0] in "^[n" and _SHELL_RE.match(msg) is not None):
            return
        self._apply(ln, hits, ctx)

    # --- reading -------------------------------------------------------------------------------------

    def reading(self, ended: bool = False) -> Reading:
        """What is known so far about the last start (pure: does not change the reader).

        Args:
            ended: the log has ended (a saved file read to its end) or the process is known to be
                gone (systemd says the unit is not running): a loading start whose last error-level
                suspect nothing recovered has then failed. Live, a suspect is only a suspect.
        """
        if self._quiet.lines:
            self._settle()  # not a change of what it knows: only the quiet lines' bookkeeping done
        if ended and self._json:
            clone = copy.deepcopy(self)  # a record still being rejoined: read its pieces as text
            clone._flush_json()
            return clone.reading(ended=True)
        if self._services is not None:
            r = self._services.reading(self.lines, self.bad_lines, ended)
            if r is not None:
                return r
        return self._history.reading(self._cl.engine, self.lines, self.bad_lines, self._last_line, ended)
