"""Lines that cannot matter, found by a few substring tests per line, and the bookkeeping they still need.

Most lines of a serving log (access log lines, metrics, decode batches) change nothing the reader
knows but its line count, the last line, the last timestamp and the line before the next one.
A line may matter only if a rule can match it (:meth:`~probes.logs.engines.base.Matcher.may_match`:
its key words, and the literal texts each key's rows require, from the matcher's own index) or it
holds one of the reader's own cues (:func:`has_cue`: a traceback, a bar, a port, a prompt, a JSON
record, a service prefix, systemd's words, an elision ...). Any other line, read while the reader
is *steady* (``StartupReader._steady_matcher``), skips parsing and the rules: it is kept
as it came in :class:`~probes.logs.settle.Quiet`, and :meth:`~probes.logs.settle.Quiet.settle`
does, before the next line that matters or a reading, what reading those lines one by one would
have done, parsing only the few it needs (the last one, the last timestamped one, the last one
with a full date).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import islice
from typing import Any
from probes.logs import blockscan
from probes.logs.classify import Classifier
from probes.logs.context import LineContext
from probes.logs.engines.base import SCAN_CHARS, Matcher, words_of
from probes.logs.lifecycle import StartHistory
from probes.hosttext import strip_escapes
from probes.logs.logline import COMPOSE_RE, MAX_LINE_CHARS, Line, Stamp, date_shaped, date_shaped_bytes
from probes.logs.services import Services
from probes.logs.settle import Quiet, QuietRun
from probes.logs.starts import Life
from probes.logs.timeline import Timeline

#: What the reader itself looks for in a line beyond the rules (case-sensitive, anywhere in it):
#: a traceback and its frames ("Error"/"Exception" also start a failure's judgement), an argument
#: dump or a line naming the model or the port (what :func:`~probes.logs.identity.identify` and
#: :func:`~probes.logs.identity.listen_port` read: each holds one of these or a URL), a shell prompt ("$", "user@host"), ``journalctl -x`` catalog
#: text, an elision ("…"), systemd's lines and the kernel's (syslog's ``kernel:``, as
#: :func:`~probes.logs.logline.parse` finds the identifier; not the word "kernel" alone, which a
#: serving vLLM's Triton JIT warnings hold), a JSON record, a service or gutter
#: prefix (``name  | ``). With a "/": a tqdm bar (its rate), a URL, ``[pod/...]``; with a ".": an
#: elision ("..."), a unit name. :func:`has_cue` also finds "<snip>" and "[snip]" in any case.
READER_CUES = ("Error", "Exception", "Traceback", 'File "', "args", "model ", "model_id", "model=", "model '",
               "trtllm-serve", "$", "@", "{", "| ", "░", "…",
               "systemd", "kernel:", "kernel[")
_SLASH_CUES = ("/s]", "/s,", "s/it", "it/s", "B/s", "://", "[pod/")
_DOT_CUES = ("...", ".service")
#: Quiet lines kept before they are settled anyway (bounds the memory they hold).
MAX_QUIET = 4096
#: Lines :meth:`QuietLines.feed_lines` scans at once: at first, and at most.
_FIRST_WINDOW, _LAST_WINDOW = 64, 4096



def has_cue(text: str) -> bool:
    """Whether ``text`` holds any of :data:`READER_CUES` (a few substring tests, no regex: ``re``
    tries an alternation's branches one by one at every position, ten times slower)."""
    for cue in READER_CUES:
        if cue in text:
            return True
    if "/" in text:
        for cue in _SLASH_CUES:
            if cue in text:
                return True
    if "." in text:
        for cue in _DOT_CUES:
            if cue in text:
                return True
    tail = text.rstrip()
    return tail[-1:] in ("]", ">") and tail[-5:-1].lower() == "snip"  # an elision: "[snip]", "<SNIP>"


#: :data:`READER_CUES` as the words (:func:`~probes.logs.engines.base.words_of`, lower case) they
#: hold: a line that holds a cue holds one of these words, "Error" or "Exception", or one of the
#: characters and texts (``kernel:``, ``...``) :func:`quiet_ascii` tests.
_CUE_WORDS = frozenset({b"traceback", b"file", b"args", b"server_args", b"model", b"model_id", b"trtllm",
                        b"systemd", b"snip"})


def quiet_ascii(text: str, matcher: Matcher) -> bool:
    """Whether an ASCII line holds none of the reader's cues (:func:`has_cue`) and no rule of
    ``matcher`` may match it (:meth:`Matcher.may_match`): the same answer, from one split into
    words (the cues that are words) and a few substring tests (a substring test costs about as
    much as splitting a short line into words does; one per cue would cost three times more)."""
    if "Error" in text or "Exception" in text or "{" in text or "| " in text or "$" in text or "@" in text:
        return False
    if "kernel" in text and ("kernel:" in text or "kernel[" in text):
        return False
    if "/" in text and ("/s" in text or "/it" in text or "//" in text or "[pod/" in text):
        for cue in _SLASH_CUES:
            if cue in text:
                return False
    if "." in text and ("..." in text or ".service" in text):
        return False
    words = words_of(text.encode())
    return _CUE_WORDS.isdisjoint(words) and not matcher.may_match(text, words)


class QuietLines:
    """The reader's quiet path (:class:`~probes.logs.reader.StartupReader` is one): which lines are
    quiet, kept in ``_quiet``, and settled before the next line that may matter
    (``_matters``, which the reader calls first for every such line) or a reading."""

    # The reader's own state, which the quiet path reads and the settling writes.
    lines: int
    _cl: Classifier
    _cx: LineContext
    _history: StartHistory
    _timeline: Timeline
    _quiet: Quiet
    _services: Services[Any] | None
    _json: list[tuple[Line, bool]]
    _is_sub: bool
    _numbered: bool
    _last_line: str
    #: While the reader is steady, the matcher of its engine (None: not steady).
    _steady: Matcher | None
    #: ``_steady`` is to be worked out again: a line that may matter came since.
    _unsteady: bool
    #: Lines still to be read without a look for quiet ones, and how many to skip after the next
    #: miss: after a line that was not quiet, the look is skipped for 1, 2, 4, then 8 lines while
    #: they keep not being quiet (a start's lines mostly matter, a serving log's mostly do not;
    #: a line not looked at is read the long way, with the same result).
    _skip: int
    _backoff: int
    #: Lines :meth:`feed_lines` scans at once next (it doubles with each scan, up to
    #: :data:`_LAST_WINDOW`, and starts again from :data:`_FIRST_WINDOW` for another matcher).
    _window: int = _FIRST_WINDOW
    #: Lines the last scan kept quiet, of the lines it scanned: when it kept fewer than half, the
    #: next :data:`_FIRST_WINDOW`, then twice as many ... (at most :data:`_LAST_WINDOW`) lines are
    #: fed the one-line way before a scan again (a start's lines mostly matter: the scan would
    #: cost more than it saves).
    _scan_kept: int = 0
    _scan_cost: int = 0
    _scan_defer: int = 0
    _scan_backoff: int = 0

    def _note_number(self, text: str) -> bool:
        raise NotImplementedError  # the reader's: grep -n numbers (True once the log is numbered)

    def feed_bytes(self, raw: bytes, lineno: int | None = None) -> None:
        raise NotImplementedError  # the reader's: one physical line

    def feed_lines(self, lines: list[bytes]) -> None:
        """Feed physical lines (bytes, each without its newline, numbered on from the last line),
        with the same result as :meth:`~probes.logs.reader.StartupReader.feed_bytes` on each in
        turn. While the reader is steady, one scan over a window of lines
        (:class:`~probes.logs.blockscan.BlockScan`, when ``ahocorasick_rs`` is installed) finds
        those that may matter: each is fed the one-line way, and the lines between are kept as
        one :class:`~probes.logs.settle.QuietRun` each, no Python per line. After a line that mattered, lines are fed
        the one-line way until one is quiet (the reader is steady again); with the same matcher,
        the scan's answer for the lines after it is still good (a line is scanned once per
        matcher). ``lines`` is kept, not copied, until its quiet lines are settled: the caller
        must not change it after."""
        feed = self.feed_bytes
        if not blockscan.AVAILABLE:
            for raw in lines:
                feed(raw)
            return
        i, n = 0, len(lines)
        window = self._window
        scanned_for: Matcher | None = None  # the matcher of the last scan, which ends at line scanned_to
        scanned_to = 0
        hits: list[int] = []
        only_digit: set[int] = set()
        while i < n:
            matcher = None if self._unsteady else self._steady
            if matcher is None:
                # Not steady, or not known to be since a line mattered: the one-line way, whose
                # look (with its backoff, _skip) finds the reader steady again at a quiet line.
                feed(lines[i])
                i += 1
                continue
            if matcher is not scanned_for or i >= scanned_to:
                if self._scan_defer:  # the last scans kept too few lines quiet to pay for themselves
                    stop = min(n, i + self._scan_defer)
                    for raw in islice(lines, i, stop):
                        feed(raw)
                    self._scan_defer -= stop - i
                    i = stop
                    continue
                if self._scan_cost:  # the last scan's lines are all read: judge it
                    if 2 * self._scan_kept < self._scan_cost:
                        self._scan_defer = self._scan_backoff = min(self._scan_backoff * 2, _LAST_WINDOW) or _FIRST_WINDOW
                        self._scan_kept = self._scan_cost = 0
                        window = _FIRST_WINDOW  # then a small scan to try again
                        continue
                    self._scan_backoff = 0  # it paid: the next deferral is short again
                if scanned_for is not None and matcher is not scanned_for:
                    window = _FIRST_WINDOW  # another engine's matcher: it may not last
                scanned_to = min(n, i + window)
                hits, only_digit = blockscan.scan_for(matcher, _CUE_WORDS).may_matter(lines, i, scanned_to)
                self._scan_kept, self._scan_cost = 0, scanned_to - i
                scanned_for = matcher
                window = min(window * 2, _LAST_WINDOW)
            for h in islice(hits, bisect_left(hits, i), None):  # the scan's hits from line i on
                if h in only_digit and self._quiet_number(lines[h], h - i):
                    continue  # quiet after all: one more line of the run
                if h > i:
                    self._quiet_run(lines, i, h)
                self._skip = 1  # the scan has looked: the long way, without the one-line look
                feed(lines[h])
                i = h + 1
                if self._unsteady:
                    break  # it mattered: on the one-line way until a line is quiet again
            else:
                if scanned_to > i:
                    self._quiet_run(lines, i, scanned_to)
                i = scanned_to
        self._window = window

    def _quiet_number(self, raw: bytes, ahead: int) -> bool:
        """:meth:`_quiet_line`'s number check for a line that begins with a digit and is
        otherwise quiet (:meth:`feed_lines`; ``ahead``: the quiet lines before it not yet counted
        in ``lines``). True: the line is quiet. False: it is to be read the long way; when the
        check has found the log numbered, the next feed skips the quiet look, as the one-line way
        goes on after it (as :meth:`feed_lines` feeds every line that may matter)."""
        if self._numbered:
            return True
        if not date_shaped_bytes(raw):
            return False  # a grep -n number, perhaps: parse() decides
        lines = self.lines
        self.lines = lines + ahead + 1  # as the one-line way counts it (the check reads it)
        numbered = self._note_number(raw.decode("ascii"))
        self.lines = lines
        return not numbered

    def _quiet_run(self, lines: list[bytes], start: int, stop: int) -> None:
        """Keep ``lines[start:stop]``, quiet (:meth:`feed_lines`), as one run."""
        self._quiet.add_run(QuietRun(self.lines + 1, lines, start, stop))
        self.lines += stop - start
        self._scan_kept += stop - start
        self._skip = self._backoff = 0
        if self._quiet.count >= MAX_QUIET:
            self._settle()

    def _quiet_text(self, text: str, lineno: int | None, stamp: Stamp | None, ident: str | None,
                    invocation: str | None) -> bool:
        """:meth:`~probes.logs.reader.StartupReader.feed`'s look (True: the line was quiet and
        is counted). A coloured line (uvicorn's access log in the journal) is its text without the
        colours, what frames() makes of it, unless that begins with a digit the colour hid from the
        grep -n check."""
        if len(text) > MAX_LINE_CHARS or (invocation and invocation != self._history.current.invocation):
            return False  # a line to cut, or a new start
        shown = strip_escapes(text)  # the text itself when it holds no escape code
        n = self.lines + 1 if lineno is None else lineno
        if shown and shown.isprintable() and (shown is text or not shown[0].isdigit()) \
                and self._quiet_line(n, shown, stamp, ident):
            self.lines = n
            return True
        return False

    def _quiet_line(self, lineno: int, text: str, stamp: Stamp | None, ident: str | None) -> bool:
        """Keep a line that cannot matter for :meth:`_settle` (True), or False: it may matter."""
        if self._unsteady:
            self._steady = self._steady_matcher()
            self._unsteady = False
        matcher = self._steady
        if matcher is None or len(text) > SCAN_CHARS or not (
                quiet_ascii(text, matcher) if text.isascii() else not (has_cue(text) or matcher.may_match(text))):
            self._skip = self._backoff = min(self._backoff * 2, 8) or 1
            return False
        self._backoff = 0
        if text[0].isdigit() and not self._numbered:
            if not date_shaped(text):
                return False  # a grep -n number, perhaps: parse() decides
            if self._note_number(text):
                return False  # this line shows the log is grep -n output
        self._keep_quiet(lineno, text, stamp, ident)
        return True

    def _keep_quiet(self, lineno: int, text: str, stamp: Stamp | None, ident: str | None) -> None:
        """Keep one quiet line for :meth:`_settle` (settled at once past :data:`MAX_QUIET`)."""
        quiet = self._quiet
        quiet.lines.append((lineno, text, stamp, ident))
        quiet.count += 1
        if quiet.count >= MAX_QUIET:
            self._settle()

    def _service_quiet(self, lineno: int, text: str, stamp: Stamp | None, ident: str | None) -> bool:
        """The quiet look for a line of a log of services (:mod:`probes.logs.services`): a line
        that begins with a compose prefix (``name  | ``) of a known service whose reader is steady,
        and whose rest is quiet to that reader, is kept in that reader's quiet lines, whole, as
        the long way would route it there (True); False: the long way. Only a lower-case name at
        the very start and no nested service prefix (the rest holds no "| ", a cue), so that
        :func:`~probes.logs.logline.parse` of the line would give that service at depth 1."""
        services = self._services
        if services is None or services.depth != 1 or self._json or not text[:1].islower() \
                or " | " not in text[:64] or len(text) > MAX_LINE_CHARS:
            return False
        m = COMPOSE_RE.match(text)  # as parse() reads it (the name begins lower-case: above)
        if m is None:
            return False
        name = m.group(1)
        sub = services.subs.get(name)
        if not isinstance(sub, QuietLines):
            return False
        rest = text[m.end():]
        if sub._unsteady:
            sub._steady = sub._steady_matcher()
            sub._unsteady = False
        matcher = sub._steady
        if matcher is None or not rest or len(rest) > SCAN_CHARS or not (
                quiet_ascii(rest, matcher) if rest.isascii() else not (has_cue(rest) or matcher.may_match(rest))) \
                or (rest[0].isdigit() and not date_shaped(rest)):
            return False
        # What the long way does for a line routed to a service (StartupReader._line), and what
        # reading it would leave there, kept for the service's settle.
        services.last = name
        sub.lines = lineno
        sub._numbered = self._numbered
        sub._keep_quiet(lineno, text, stamp, ident)
        return True

    def _steady_matcher(self) -> Matcher | None:
        """The current matcher while the reader is steady, else None. Steady: a line no rule
        may match and with no cue changes nothing but the line count, the timeline, the line before and
        the last line (no engine evidence counted, no traceback, warning or JSON record open, no
        services, a start that has output and no suspect a served request clears)."""
        cl, cx, start = self._cl, self._cx, self._history.current
        if (cl.watching or self._services is not None or self._json
                or cx.tb is not None or cx.benign or cx.after_frame or start.life is Life.EMPTY or not start.output
                or (start.ended and start.invocation is None) or (start.suspects and start.served and not start.failed)):
            return None
        return cl.matcher

    def _matters(self) -> None:
        """A line that may matter comes: settle the quiet lines before it; work out steady anew after it."""
        if self._quiet.lines:
            self._settle()
        self._unsteady = True

    def _settle(self) -> None:
        """What reading the quiet lines one by one would have done (:meth:`~probes.logs.settle.Quiet.settle`)."""
        last, shown, seen = self._quiet.settle(self._numbered, bool(self._timeline.waiting))
        for lineno, stamp in seen:
            self._timeline.saw(lineno, stamp)
        self._cx.prev_line = last if last.prefixed else None
        self._cx.thread_exc = False
        if shown is not None:
            self._last_line = shown.text

