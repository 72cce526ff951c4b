"""The lines of a block that may matter, found by one compiled scan over the whole block.

:func:`~probes.logs.quiet.quiet_ascii` answers for one line at a time, in Python: a few substring
tests, a split into words, :meth:`~probes.logs.engines.base.Matcher.may_match`. A
:class:`BlockScan` answers for a block of lines at once, at C speed: the block is joined, lowered
(and, for the words, translated as :func:`~probes.logs.engines.base.words_of` splits), and two
Aho-Corasick automata (``ahocorasick_rs``: Rust's ``aho-corasick`` as a DFA, about 2 ns a
byte), built once per matcher, find every place where a line may hold something that matters. Only the lines with a hit cost Python; the rest are the
reader's quiet lines, taken as runs (:meth:`~probes.logs.quiet.QuietLines.feed_lines`).

What a hit is, for a line (each a superset of what the per-line test looks for: a line with a
hit is read the long way, with the same result, so a false hit costs only time; a miss would be
a wrong reading):

* the substrings :func:`~probes.logs.quiet.quiet_ascii` tests ("Error", "{", "| ", "://", ...),
  and every literal text a key's rows require (:meth:`Matcher.may_match`'s index), in lower case
  on the lowered block;
* as whole words (white space or punctuation on both sides, in the translated block): the cue
  words (``traceback``, ``model``, ...) and the keys whose rows require no literal;
* what the per-line path leaves to the long way: a control character (tab, ``\\r``, escape codes),
  a line that is not ASCII, an empty line, a line longer than
  :data:`~probes.logs.engines.base.SCAN_CHARS`; and a line that begins with a digit (a ``grep
  -n`` number, perhaps), which the reader then looks at itself.

Without ``ahocorasick_rs`` installed, :data:`AVAILABLE` is False and the reader takes every line
the per-line way.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from itertools import accumulate, compress
from probes.hosttext import ASCII_UNPRINTABLE
from probes.logs.engines.base import SCAN_CHARS, WORD_BYTES, Matcher

try:
    import ahocorasick_rs
except ImportError:  # the per-line path stays (probes.logs.quiet)
    #: Whether the block scan can run (``ahocorasick_rs`` is installed).
    AVAILABLE = False
else:
    AVAILABLE = True

#: quiet_ascii's substrings (quiet.py: READER_CUES that are not words, _SLASH_CUES, _DOT_CUES).
_CUE_TEXTS = ("Error", "Exception", "{", "| ", "$", "@",
              "/s]", "/s,", "s/it", "it/s", "B/s", "://", "[pod/", "...", ".service")
#: What the per-line path reads the long way: control characters but the newline (a line that
#: is not ASCII, or is empty, is found by its own test, :meth:`BlockScan.may_matter`).
_CONTROLS = tuple(bytes([c]) for c in ASCII_UNPRINTABLE)
#: A line that begins with a digit (a ``grep -n`` number, perhaps; or a date the reader's number
#: check lets through: :meth:`~probes.logs.quiet.QuietLines.feed_lines` looks at these itself).
_DIGIT_STARTS = tuple(b"\n" + d.encode() for d in "0123456789")
#: What separates lines in the block of words: a space on each side of the newline, so that every
#: word, the first and last of a line too, has a space on each side (" word ").
_WORD_GAP = b" \n "


def _lowered(text: str) -> bytes:
    """``text`` as UTF-8 bytes in lower case (ASCII letters only), as the lowered block holds it
    (``bytes.lower`` keeps every offset)."""
    return text.encode("utf-8", "surrogateescape").lower()


class BlockScan:
    """One matcher's block scan: which lines of a block may matter to a steady reader.

    Build it with :func:`scan_for` (cached per matcher). ``cue_words`` are the reader's own cue
    words (:data:`probes.logs.quiet._CUE_WORDS`, lower-case bytes).

    Raises:
        RuntimeError: when ``ahocorasick_rs`` is not installed (:data:`AVAILABLE` is False).
    """

    __slots__ = ("_texts", "_digits", "_words")

    def __init__(self, matcher: Matcher, cue_words: frozenset[bytes]) -> None:
        texts: set[bytes] = {_lowered(t) for t in _CUE_TEXTS}
        texts.update(_CONTROLS)
        words = set(cue_words)
        for key in matcher.keys:
            need = matcher.required(key)
            if need is None:
                words.add(key)
            else:
                # A literal with a newline is in no line: no line holds it.
                texts.update(low for lit in need if b"\n" not in (low := _lowered(lit)))
        patterns = sorted(texts) + list(_DIGIT_STARTS)
        self._texts = _automaton(patterns)
        self._digits = len(patterns) - len(_DIGIT_STARTS)  # the digit starts' first index
        self._words = _automaton(sorted(b" " + w + b" " for w in words))

    def may_matter(self, lines: list[bytes], start: int, stop: int) -> tuple[list[int], set[int]]:
        """Which lines of ``lines[start:stop]`` (physical lines as bytes, without their newline)
        may matter: their indices in ``lines``, ascending, and the set of those among them that
        only begin with a digit. Every other line there is one that
        :meth:`~probes.logs.quiet.QuietLines._quiet_line` keeps as quiet with this scan's matcher
        steady; a line that only begins with a digit is one it keeps but for its number check.

        No match spans two lines (no pattern holds a newline but at its start), so the automata
        report matches that do not overlap, at least one in each line that has any."""
        part = lines[start:stop] if start or stop < len(lines) else lines
        lens = list(map(len, part))
        joined = b"\n" + b"\n".join(part) + b"\n"
        # ends[i]: the offset in ``joined`` of the newline before line i (ends[0] == 0); a match
        # that begins at offset s is in line bisect_right(ends, s) - 1 (one that begins with the
        # newline is about the line after it).
        ends = list(accumulate(map((1).__add__, lens), initial=0))
        found = self._texts.find_matches_as_indexes(joined.lower())
        first_digit = self._digits
        hard = {bisect_right(ends, s) - 1 for i, s, _ in found if i < first_digit}
        digits = {bisect_right(ends, s) - 1 for i, s, _ in found if i >= first_digit}
        # The words: in " \n "-joined lines (each line 3 bytes further on than in ``joined``).
        gaps = list(accumulate(map((3).__add__, lens), initial=0))
        words = joined.replace(b"\n", _WORD_GAP).translate(WORD_BYTES)
        hard.update(bisect_right(gaps, s) - 1 for _, s, _ in self._words.find_matches_as_indexes(words))
        hard.update(compress(range(len(part)), map((SCAN_CHARS).__lt__, lens)))  # too long to look at
        hard.update(compress(range(len(part)), map(operator.not_, lens)))  # empty
        if not joined.isascii():
            hard.update(compress(range(len(part)), map(operator.not_, map(bytes.isascii, part))))
        out = {start + k for k in hard}
        only_digit = {start + k for k in digits} - out
        out.update(only_digit)
        return sorted(out), only_digit


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
