"""The lines of a block that may matter, found by one compiled scan over the whole block.

:func:`~probes.logs.quiet.quiet_ascii` answers for one line at a time, in Python: a few substring
tests, a split into words, :meth:`~probes.logs.engines.base.Matcher.may_match`. A
:class:`BlockScan` answers for a block of lines at once, at C speed. Each line is read as its
*template*: the line with every ASCII digit made ``0`` (one ``bytes.translate`` of the block). A
serving log's lines are a few templates over and over (a health probe's access line differs from
the next one only in its time and port), and the scan judges each template once, then keeps its
class (:data:`QUIET`, :data:`MATTERS`, :data:`NUMBER`; at most :data:`MAX_TEMPLATES`): a block of
known templates costs a split and a dictionary look-up a line, no Python per line. New templates
are joined, lowered (and, for the words, translated as :func:`~probes.logs.engines.base.words_of`
splits), and two Aho-Corasick automata (``ahocorasick_rs``: Rust's ``aho-corasick`` as a DFA, about
2 ns a byte), built once per matcher, find every place where one may hold something that matters.
Only the lines with a hit cost Python; the rest are the reader's quiet lines, taken as runs
(:meth:`~probes.logs.quiet.QuietLines.feed_lines`).

What a hit is, for a template (each a superset of what the per-line test looks for: a line with
a hit is read the long way, with the same result, so a false hit costs only time; a miss would be
a wrong reading):

* the substrings :func:`~probes.logs.quiet.quiet_ascii` tests ("Error", "{", "| ", "://", ...),
  and every literal text a key's rows require (:meth:`Matcher.may_match`'s index), in lower case
  on the lowered block;
* as whole words (white space or punctuation on both sides, in the translated block): the cue
  words (``traceback``, ``model``, ...) and the keys whose rows require no literal;
* what the per-line path leaves to the long way: a control character (tab, ``\\r``, escape codes),
  a line that is not ASCII, an empty line, a line longer than
  :data:`~probes.logs.engines.base.SCAN_CHARS`; and a line that begins with a digit (a ``grep
  -n`` number, perhaps) but not with a date (:data:`~probes.logs.logline.DATE_OR_CLOCK_RE`, which
  the reader's number check passes over), which the reader then looks at itself.

The patterns are made templates too (their digits ``0``): a line that holds a pattern has a
template that holds the pattern's template (the same byte for byte, digits aside), so the scan of
templates finds all that the scan of the lines would, and more only where digits differ.

Without ``ahocorasick_rs`` installed, :data:`AVAILABLE` is False and the reader takes every line
the per-line way.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate, compress, repeat
from probes.hosttext import ASCII_UNPRINTABLE
from probes.logs.engines.base import SCAN_CHARS, WORD_BYTES, Matcher
from probes.logs.logline import DATE_OR_CLOCK_RE, date_shaped_bytes

try:
    import ahocorasick_rs
except ImportError:  # the per-line path stays (probes.logs.quiet)
    #: Whether the block scan can run (``ahocorasick_rs`` is installed).
    AVAILABLE = False
else:
    AVAILABLE = True

#: quiet_ascii's substrings (quiet.py: READER_CUES that are not words, _SLASH_CUES, _DOT_CUES).
_CUE_TEXTS = ("Error", "Exception", "{", "| ", "$", "@", "kernel:", "kernel[",
              "/s]", "/s,", "s/it", "it/s", "B/s", "://", "[pod/", "...", ".service")
#: What the per-line path reads the long way: control characters but the newline (a line that
#: is not ASCII, or is empty, is found by its own test, :meth:`BlockScan._classify`).
_CONTROLS = tuple(bytes([c]) for c in ASCII_UNPRINTABLE)
#: What separates lines in the block of words: a space on each side of the newline, so that every
#: word, the first and last of a line too, has a space on each side (" word ").
_WORD_GAP = b" \n "
#: A line's template: every ASCII digit ``0``, every other byte itself (a map byte for byte, so
#: a template has its line's length, its line's words and its line's digits where they were).
_TEMPLATE = bytes.maketrans(b"123456789", b"000000000")
#: A template's class: the line is quiet; it may matter (it is read the long way); it is quiet but
#: for the reader's number check (it begins with a digit and not with a date).
QUIET, MATTERS, NUMBER = 0, 1, 2
#: Templates a scan keeps the class of (each at most SCAN_CHARS bytes); past this many they are
#: forgotten and judged anew (bounds the memory: a log whose lines are all different keeps none).
MAX_TEMPLATES = 4096
#: :data:`~probes.logs.logline.DATE_OR_CLOCK_RE` on bytes (on ASCII text, the same matches).
_DATE_OR_CLOCK_BYTES = re.compile(DATE_OR_CLOCK_RE.pattern.encode())


def _template(text: str) -> bytes:
    """The template of ``text`` as a pattern of the lowered block: UTF-8 bytes in lower case (ASCII
    letters only), every digit ``0`` (both maps keep every offset)."""
    return text.encode("utf-8", "surrogateescape").lower().translate(_TEMPLATE)


def _date_led(template: bytes) -> bool:
    """Whether a line (or its template) begins with a date the reader's number check passes
    over, whether or not the log is numbered (:meth:`~probes.logs.quiet.QuietLines._quiet_number`:
    a ``YYYY-MM-DD`` shape, then :data:`~probes.logs.logline.DATE_OR_CLOCK_RE`)."""
    return date_shaped_bytes(template) and _DATE_OR_CLOCK_BYTES.match(template) is not None


class BlockScan:
    """One matcher's block scan: which lines of a block may matter to a steady reader.

    Build it with :func:`scan_for` (cached per matcher). ``cue_words`` are the reader's own cue
    words (:data:`probes.logs.quiet._CUE_WORDS`, lower-case bytes).

    Raises:
        RuntimeError: when ``ahocorasick_rs`` is not installed (:data:`AVAILABLE` is False).
    """

    __slots__ = ("_texts", "_words", "_classes")

    def __init__(self, matcher: Matcher, cue_words: frozenset[bytes]) -> None:
        texts: set[bytes] = {_template(t) for t in _CUE_TEXTS}
        texts.update(_CONTROLS)
        words = {w.translate(_TEMPLATE) for w in cue_words}
        for key in matcher.keys:
            need = matcher.required(key)
            if need is None:
                words.add(key.translate(_TEMPLATE))
            else:
                # A literal with a newline is in no line: no line holds it.
                texts.update(low for lit in need if b"\n" not in (low := _template(lit)))
        self._texts = _automaton(sorted(texts))
        self._words = _automaton(sorted(b" " + w + b" " for w in words))
        #: template -> its class, for the templates judged so far (at most MAX_TEMPLATES).
        self._classes: dict[bytes, int] = {}

    def may_matter(self, lines: list[bytes], start: int, stop: int) -> tuple[list[int], set[int]]:
        """Which lines of ``lines[start:stop]`` (physical lines as bytes, without their newline)
        may matter: their indices in ``lines``, ascending, and the set of those among them that
        are quiet but for the number check (they begin with a digit, not with a date). Every other
        line there is one that :meth:`~probes.logs.quiet.QuietLines._quiet_line` keeps as quiet
        with this scan's matcher steady, its number check included."""
        part = lines[start:stop] if start or stop < len(lines) else lines
        templates = b"\n".join(part).translate(_TEMPLATE).split(b"\n")
        classes = self._classes
        seen = set(templates)
        new = seen.difference(classes)
        if new:
            judged = self._classify(new)
            if len(classes) + len(judged) > MAX_TEMPLATES:
                classes.clear()
            classes.update(judged)
        # A template too long to be kept is not there: it may matter.
        if not any(map(classes.get, seen, repeat(MATTERS))):
            return [], set()  # every line is quiet (a serving log's windows): no look a line
        got = list(map(classes.get, templates, repeat(MATTERS)))
        hits = list(compress(range(start, stop), got))
        numbers = set(compress(range(start, stop), map(NUMBER.__eq__, got))) if NUMBER in got else set()
        return hits, numbers

    def _classify(self, templates: set[bytes]) -> dict[bytes, int]:
        """The class of each of ``templates`` not longer than SCAN_CHARS (a longer line may matter:
        it is not judged, nor kept). No match spans two templates (no pattern holds a newline),
        so the automata report matches that do not overlap, at least one in each template that
        has any."""
        todo = [t for t in templates if len(t) <= SCAN_CHARS]
        lens = list(map(len, todo))
        joined = b"\n" + b"\n".join(todo) + b"\n"
        # ends[i]: the offset in ``joined`` of the newline before template i (ends[0] == 0); a
        # match that begins at offset s is in template bisect_right(ends, s) - 1.
        ends = list(accumulate(map((1).__add__, lens), initial=0))
        hard = {bisect_right(ends, s) - 1 for _, s, _ in self._texts.find_matches_as_indexes(joined.lower())}
        # The words: in " \n "-joined templates (each one 3 bytes further on than in ``joined``).
        gaps = list(accumulate(map((3).__add__, lens), initial=0))
        words = joined.replace(b"\n", _WORD_GAP).translate(WORD_BYTES)
        hard.update(bisect_right(gaps, s) - 1 for _, s, _ in self._words.find_matches_as_indexes(words))
        out = dict.fromkeys(todo, QUIET)
        for k in hard:
            out[todo[k]] = MATTERS
        for t in todo:
            if not t or not t.isascii():
                out[t] = MATTERS  # empty, or not ASCII: the long way
            elif t[0] == 48 and out[t] == QUIET and not _date_led(t):  # 48: "0", every digit's template
                out[t] = NUMBER
        return out


def _automaton(patterns: list[bytes]) -> ahocorasick_rs.BytesAhoCorasick:
    """An Aho-Corasick automaton (a DFA) that finds ``patterns``; a match's first item is its
    pattern's index in ``patterns``.

    Raises:
        RuntimeError: when ``ahocorasick_rs`` is not installed.
    """
    if not AVAILABLE:
        raise RuntimeError("the block scan needs ahocorasick_rs")
    return ahocorasick_rs.BytesAhoCorasick(patterns, implementation=ahocorasick_rs.Implementation.DFA)


_SCANS: dict[int, tuple[Matcher, BlockScan]] = {}


def scan_for(matcher: Matcher, cue_words: frozenset[bytes]) -> BlockScan:
    """The block scan of ``matcher`` (built on first use, then kept while the process lives:
    matchers are few, one per engine and commitment, :func:`~probes.logs.engines.matcher_for`).

    Raises:
        RuntimeError: when ``ahocorasick_rs`` is not installed.
    """
    got = _SCANS.get(id(matcher))
    if got is None or got[0] is not matcher:
        got = _SCANS[id(matcher)] = (matcher, BlockScan(matcher, cue_words))
    return got[1]
