"""The quiet lines a reader keeps, and what reading them one by one would have left.

:class:`Quiet` holds the lines :mod:`probes.logs.quiet` found quiet since the last line that
mattered (one by one, or as :class:`QuietRun` slices of a block); :meth:`Quiet.settle` answers,
before the next line that matters or a reading, what reading them one by one would have left: the
last line, the last one shown, the timestamps the timeline must see. Only the few lines it needs
are parsed.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator

from probes.logs.logline import Line, Stamp, parse

#: Every timestamp a prefix gives has a clock time; every one with a year holds one of these.
_CLOCK_RE = re.compile(r"\d\d:\d\d:\d\d")
_YEAR_RE = re.compile(r"\d{4}-\d\d-\d\d|\d\d/\d\d/\d{4}-")
#: What every match of each holds, beginning with a literal character: ``re`` skips to that
#: character at C speed, where a pattern that begins with ``\d`` is tried at every position (the
#: year's alternation costs 7-8 us on a 200-byte line, these 0.4-1.7 us). A line they find is then
#: read exactly (parsed, or searched with the pattern itself); one they do not find has no stamp.
_CLOCK_HINT_RE = re.compile(r":\d\d:\d\d")
_YEAR_HINT_RE = re.compile(r"-\d\d-\d\d|/\d\d/\d{4}-")
#: The hints in a run's bytes (ASCII: the same matches).
_CLOCK_HINT_BYTES, _YEAR_HINT_BYTES = re.compile(_CLOCK_HINT_RE.pattern.encode()), re.compile(_YEAR_HINT_RE.pattern.encode())
#: A uvicorn access line for a probe's request (health checks, metrics, model list): every probe
#: writes one into the unit's journal (Uvicorn's access log, as in
#: tests/fixtures/logs-extra/sglang-ok-06-dockerdesktop.log), so it is never "the last meaningful line".
_PROBE_ACCESS_RE = re.compile(r'"GET /(?:health|health_generate|ping|metrics|version|load|v1/models|'
                              r'get_model_info|model_info|get_server_info|server_info)\b[^"]*HTTP/[\d.]+"')

#: Quiet lines with runs among them settled one by one (:func:`_settle_lines`) up to this many;
#: more are searched run by run.
_SMALL_SETTLE = 64
#: A quiet line as it came: (line number, text, stamp and identifier given with it).
QuietLine = tuple[int, str, "Stamp | None", "str | None"]


def is_probe_access(msg: str) -> bool:
    """Whether a message is the access log line of a probe's request (never the last line shown)."""
    return '"GET /' in msg and _PROBE_ACCESS_RE.search(msg) is not None


class QuietRun:
    """Quiet lines ``raws[start:stop]`` of a block, numbered from ``lineno`` (no stamp, no
    identifier: plain text read by :meth:`~probes.logs.quiet.QuietLines.feed_lines`); kept as the
    block's slice, no Python per line."""

    __slots__ = ("lineno", "raws", "start", "stop")

    def __init__(self, lineno: int, raws: list[bytes], start: int, stop: int) -> None:
        self.lineno, self.raws, self.start, self.stop = lineno, raws, start, stop


class Quiet:
    """The quiet lines read since the last line that mattered, waiting to be :meth:`settle`-d:
    ``lines`` in the order read, each one :data:`QuietLine` or a :class:`QuietRun` of many;
    ``count`` lines in all, ``runs`` of them runs."""

    __slots__ = ("lines", "count", "runs")

    def __init__(self) -> None:
        self.lines: list[QuietLine | QuietRun] = []
        self.count = self.runs = 0

    def add_run(self, run: QuietRun) -> None:
        """Keep a run of quiet lines (not empty)."""
        self.lines.append(run)
        self.count += run.stop - run.start
        self.runs += 1

    def _spans(self) -> tuple[int, list[tuple[int, QuietLine | QuietRun]], Callable[[int], QuietLine]]:
        """How many lines are kept; each entry of ``lines`` with the index of its first line; and
        the ``k``-th line (0-based) as a :data:`QuietLine`."""
        entries = self.lines
        spans: list[tuple[int, QuietLine | QuietRun]] = []
        if not self.runs:
            return len(entries), list(enumerate(entries)), entries.__getitem__  # type: ignore[return-value]
        firsts: list[int] = []
        n = 0
        for e in entries:
            firsts.append(n)
            spans.append((n, e))
            n += e.stop - e.start if isinstance(e, QuietRun) else 1

        def item(k: int) -> QuietLine:
            j = bisect_right(firsts, k) - 1
            e = entries[j]
            if not isinstance(e, QuietRun):
                return e
            off = k - firsts[j]
            return e.lineno + off, e.raws[e.start + off].decode("utf-8", "replace"), None, None
        return n, spans, item

    def settle(self, numbered: bool, waiting: bool) -> tuple[Line, Line | None, list[tuple[int, Stamp]]]:
        """Empty the list (which must not be empty); returns what reading its lines one by one
        would have left: the last line parsed (``numbered`` as the reader parses), the last one
        whose message would become the reader's last line (not blank, not a probe's access line;
        None when there is none), and the ``(line, stamp)`` the timeline must see, in order: the
        first line with a full date (only when marks are ``waiting`` for one), the last one with a
        full date, the last timestamped one (duplicates dropped). In a :class:`QuietRun`, only
        the lines a date or a time is found in (one regex search over the run) are parsed for it."""
        if not self.runs:
            lines = self.lines
            self.lines, self.count = [], 0
            # The same answer, without the runs' machinery (no run: every entry is a QuietLine).
            return _settle_lines(lines, numbered, waiting)  # type: ignore[arg-type]
        if self.count <= _SMALL_SETTLE:
            # A few lines: each run's lines as the QuietLines they stand for (a run is ASCII, so
            # its lines' str searches find what the bytes searches over the run would).
            flat: list[QuietLine] = []
            for e in self.lines:
                if isinstance(e, QuietRun):
                    flat += [(no, raw.decode("utf-8", "replace"), None, None)
                             for no, raw in enumerate(e.raws[e.start:e.stop], e.lineno)]
                else:
                    flat.append(e)
            self.lines, self.count, self.runs = [], 0, 0
            return _settle_lines(flat, numbered, waiting)
        n, spans, item = self._spans()
        self.lines, self.count, self.runs = [], 0, 0
        cache: dict[int, Line] = {}

        def at(k: int) -> Line:
            ln = cache.get(k)
            if ln is None:
                lineno, text, stamp, ident = item(k)
                ln = cache[k] = parse(lineno, text, stamp=stamp, ident=ident, numbered=numbered)
            return ln

        def stamped(k: int, year: bool) -> Stamp | None:
            _, text, given, _ = item(k)
            if given is None and (_YEAR_RE if year else _CLOCK_RE).search(text) is None:
                return None  # no prefix can give this line a time (with a year)
            st = at(k).stamp
            return st if st is not None and (not year or st.year is not None) else None

        def found(year: bool, backward: bool) -> Iterator[tuple[int, Stamp]]:
            rx = _YEAR_HINT_BYTES if year else _CLOCK_HINT_BYTES  # stamped() reads each line found exactly
            for first, e in reversed(spans) if backward else spans:
                if not isinstance(e, QuietRun):
                    if (st := stamped(first, year)) is not None:
                        yield first, st
                    continue
                raws = e.raws[e.start:e.stop]
                for off in _lines_found(rx, raws[::-1] if backward else raws):
                    k = first + (len(raws) - 1 - off if backward else off)
                    if (st := stamped(k, year)) is not None:
                        yield k, st

        last = at(n - 1)
        shown = None
        for k in range(n - 1, -1, -1):
            ln = at(k)
            if ln.msg and not ln.msg.isspace() and not is_probe_access(ln.msg):
                shown = ln
                break
        seen: list[tuple[int, Stamp]] = []
        last_year = next(found(True, True), None)
        if last_year is not None:
            first_year = next(found(True, False)) if waiting else last_year
            seen += [first_year] if first_year[0] == last_year[0] else [first_year, last_year]
        last_time = next(found(False, True), None)
        if last_time is not None and (not seen or seen[-1][0] != last_time[0]):
            seen.append(last_time)
        return last, shown, [(item(k)[0], st) for k, st in seen]


def _settle_lines(lines: list[QuietLine], numbered: bool, waiting: bool
                  ) -> tuple[Line, Line | None, list[tuple[int, Stamp]]]:
    """:meth:`Quiet.settle` of ``lines`` (not empty) when it holds no :class:`QuietRun`: the same
    answer from plain loops over them (a settle is mostly of one to a few lines)."""
    n = len(lines)
    parsed: list[Line | None] = [None] * n
    last_no, last_text, last_given, last_ident = lines[-1]
    last = parsed[-1] = parse(last_no, last_text, stamp=last_given, ident=last_ident, numbered=numbered)
    shown = None
    # The last line whose message would become the reader's last line; then the stamps to see.
    for k in range(n - 1, -1, -1):
        ln = parsed[k]
        if ln is None:
            lineno, text, given, ident = lines[k]
            ln = parsed[k] = parse(lineno, text, stamp=given, ident=ident, numbered=numbered)
        msg = ln.msg
        if msg and not msg.isspace() and not is_probe_access(msg):
            shown = ln
            break
    seen: list[tuple[int, Stamp]] = []
    last_year = last_time = -1
    year_st = time_st = None
    for k in range(n - 1, -1, -1):
        lineno, text, given, ident = lines[k]
        if given is None and (_CLOCK_HINT_RE if time_st is None else _YEAR_HINT_RE).search(text) is None:
            # No time, then no year either (every stamp read from a text has a clock time); once
            # the last time is found, only a line with a year can be the last full date: a log
            # whose prefixes have no year (vLLM's "INFO 03-08 12:00:00") is not parsed line by line.
            continue
        ln = parsed[k]
        if ln is None:
            ln = parsed[k] = parse(lineno, text, stamp=given, ident=ident, numbered=numbered)
        st = ln.stamp
        if st is None:
            continue
        if time_st is None:
            last_time, time_st = k, st
        if st.year is not None and (given is not None or _YEAR_RE.search(text) is not None):
            last_year, year_st = k, st
            break
    if year_st is not None:
        if waiting:  # the first line with a full date too, when it is another
            for k in range(last_year):
                lineno, text, given, ident = lines[k]
                if given is None and (_YEAR_HINT_RE.search(text) is None or _YEAR_RE.search(text) is None):
                    continue
                ln = parsed[k]
                if ln is None:
                    ln = parsed[k] = parse(lineno, text, stamp=given, ident=ident, numbered=numbered)
                if ln.stamp is not None and ln.stamp.year is not None:
                    seen.append((lineno, ln.stamp))
                    break
        seen.append((lines[last_year][0], year_st))
    if time_st is not None and last_time != last_year:
        seen.append((lines[last_time][0], time_st))
    return last, shown, seen


def _lines_found(rx: re.Pattern[bytes], raws: list[bytes]) -> Iterator[int]:
    """The indices of the lines of ``raws`` that ``rx`` (which matches no newline) finds, in
    order: one search over the lines joined."""
    blob = b"\n".join(raws)
    pos = line = 0
    while (m := rx.search(blob, pos)) is not None:
        line += blob.count(b"\n", pos, m.start())
        yield line
        nl = blob.find(b"\n", m.end())
        if nl < 0:
            return
        pos, line = nl + 1, line + 1
