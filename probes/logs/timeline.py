"""When each phase of a start began, and for how long it ran: marks, the years of year-less dates.

Many prefixes print a date without its year (vLLM's ``INFO 02-12 19:33:39``, syslog's ``Nov 29
16:27:20``, glog's ``W0904 14:28:17``). A line that began a phase is kept as a :class:`Mark` with
the nearest full date before it, and (filled in when it comes) the nearest after it; the mark's
year is the nearer one's, across a New Year if the month went back. :class:`Timeline` follows the
dates of a log as it is read and makes the marks; :meth:`Timeline.phase_marks` turns marks into
the :class:`~probes.data.reading.PhaseMark` values of a reading, with their durations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from probes.data.reading import PhaseMark
from probes.logs.logline import Line, Stamp

#: A line with a full date: (line number, year, month).
DatedLine = tuple[int, int, int]


@dataclass(slots=True)
class Mark:
    """A line that began a phase (``phase``; ``""`` for a failure's own line): its number, text and
    stamp, with the nearest full date before it (``prev``) and after it (``next``, once read)."""

    phase: str
    line: int
    text: str
    stamp: Stamp | None
    prev: DatedLine | None
    next: DatedLine | None = None


class Timeline:
    """The dates of one log as it is read: the last full date, the marks still waiting for the next
    one, and the last timestamped line (where the current phase has got to)."""

    __slots__ = ("year_prev", "waiting", "last_stamp")

    def __init__(self) -> None:
        self.year_prev: DatedLine | None = None
        self.waiting: list[Mark] = []  # marks on year-less lines, for the next full date
        self.last_stamp: tuple[int, Stamp, DatedLine | None] | None = None

    def saw(self, lineno: int, stamp: Stamp) -> None:
        """A line with a time: a full date gives the year to the marks waiting for one."""
        if stamp.year is not None:
            self.year_prev = (lineno, stamp.year, stamp.month)
            if self.waiting:
                for mk in self.waiting:
                    mk.next = self.year_prev
                self.waiting.clear()
        self.last_stamp = (lineno, stamp, self.year_prev)

    def mark(self, phase: str, ln: Line) -> Mark:
        """A mark for ``ln`` beginning ``phase`` (``""``: no phase, a failure's line)."""
        mk = Mark(phase, ln.lineno, ln.text, ln.stamp, self.year_prev)
        if ln.stamp is not None and ln.stamp.year is None:
            self.waiting.append(mk)
        return mk

    def forget_waiting(self) -> None:
        """A new start: only the current start's marks are ever shown, so only they need a year."""
        self.waiting.clear()

    def phase_marks(self, marks: list[Mark], end_mark: Mark | None = None) -> tuple[PhaseMark, ...]:
        """The marks (in line order) as phase marks: each one's time, and its duration in seconds
        up to the next mark, the last one's up to ``end_mark`` (the line where the start ended,
        when it did) or else the last timestamped line (None without times)."""
        times = [resolve(mk) for mk in marks]
        end = None
        if end_mark is not None:
            end = resolve(end_mark)
        elif self.last_stamp is not None:
            lineno, stamp, prev = self.last_stamp
            end = resolve(Mark("", lineno, "", stamp, prev))
        out = []
        for i, mk in enumerate(marks):
            t = times[i]
            nxt = times[i + 1] if i + 1 < len(times) else end
            dur = None
            if t is not None and nxt is not None and t[1] is not None and nxt[1] is not None:
                dur = (nxt[1] - t[1]).total_seconds()
                if dur < 0 and mk.stamp is not None and mk.stamp.year is None:
                    dur = (_next_year(nxt[1]) - t[1]).total_seconds()  # year-less dates across New Year
                dur = max(0.0, dur)
            out.append(PhaseMark("starting" if not mk.phase else mk.phase, mk.line,
                                 None if t is None else t[0], mk.text, dur))
        return tuple(out)


def resolve(mk: Mark) -> tuple[str, datetime | None] | None:
    """A mark's time as (ISO text, naive datetime or None for a date that does not exist), or None
    for a line with no time. A year-less date with no full date near it reads ``--MM-DDT...``."""
    st = mk.stamp
    if st is None:
        return None
    year = st.year
    if year is None:
        prev, nxt = mk.prev, mk.next
        if prev is not None and (nxt is None or mk.line - prev[0] <= nxt[0] - mk.line):
            # The year of the nearest full date, across a new year if the month went back.
            year = prev[1] + (1 if st.month < prev[2] - 6 else 0)
        elif nxt is not None:
            year = nxt[1] - (1 if st.month > nxt[2] + 6 else 0)
    if year is None:
        return f"--{st.month:02d}-{st.day:02d}T{st.hms}{st.tz}", _datetime(2000, st)
    return f"{year:04d}-{st.month:02d}-{st.day:02d}T{st.hms}{st.tz}", _datetime(year, st)


def _next_year(dt: datetime) -> datetime:
    """The same day and time a year later (28 February for 29 February)."""
    try:
        return dt.replace(year=dt.year + 1)
    except ValueError:
        return dt.replace(year=dt.year + 1, day=28)


def _datetime(year: int, st: Stamp) -> datetime | None:
    """The stamp as a naive datetime in ``year``, or None for a date that does not exist."""
    h, m, s = (int(x) for x in st.hms.split(":"))
    try:
        return datetime(year, st.month, st.day, h, m, s)
    except ValueError:
        return None
