"""A line's place in its message (the reader's stage 2): its log level, and the traceback it is in.

A traceback takes the level of the message that introduced it (Python logging's ``exc_info``
prints it under a warning or an error); its ``File "...", line N`` frames and the source lines
under them are code, not messages; its final exception line says what it died of. A harmless
warning's continuation lines are no failure either. :class:`LineContext` follows this line by
line and answers a :data:`Ctx` for each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.logs.engines.common import EXCEPTION_RE
from probes.logs.logline import Line
from probes.logs.timeline import Mark

#: Log levels as engines print them, by what they allow: a line logged at a low level is never
#: terminal by itself; one logged at a high level makes its traceback terminal.
_LOW_LEVELS = frozenset({"TRACE", "DEBUG", "VERBOSE", "INFO", "NOTICE", "WARN", "WARNING", "D", "I", "W", "V"})
_HIGH_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "INTERNAL_ERROR", "ERR", "CRIT", "E", "F"})
_LEVEL_CLASS = {**{lv: -1 for lv in _LOW_LEVELS}, **{lv: 1 for lv in _HIGH_LEVELS}}
_TRACEBACK = "Traceback (most recent call last)"
#: Levels of a message that a traceback printed right under it belongs to (``logger.warning(...,
#: exc_info=True)``, ``logger.exception``); an INFO line before a traceback is a coincidence.
_INTRODUCES = frozenset({"WARN", "WARNING", "W", *_HIGH_LEVELS})
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
#: Python's words for an exception that ended a thread (threading.excepthook) or that nothing could
#: raise (a destructor), and Uvicorn's for one request's unhandled exception (its level word is
#: read as the line's level, but stays in the message after an engine's own prefix: SGLang's
#: "[2025-05-02 16:15:00] ERROR:    Exception in ASGI application"): the process goes on.
THREAD_EXC = ("Exception in thread ", "Exception ignored in", "Exception in ASGI application",
              "ERROR:    Exception in ASGI application")
#: A traceback's frame line (``  File "x.py", line 12, in f``), as :meth:`LineContext.place` tells it.
FRAME_RE = re.compile(r'\s*>? ?File "[^"]*", line \d+')
#: A harmless warning's message runs on for at most this many unprefixed lines (a list of likely
#: causes, a path): past them, in a log with no prefixes, failures count again.
BENIGN_LINES = 24
#: A traceback is over after this many unprefixed lines that are neither frames nor an exception
#: (a multi-line exception message, a chained exception's text, a C++ backtrace after it).
_TB_LOOSE = 8


@dataclass(slots=True)
class Trace:
    """The Python traceback being read: its level, and the furthest phase its frames name."""

    line: int
    low: bool                # the traceback belongs to a DEBUG/INFO/WARNING message
    high: bool               # ... to an ERROR/CRITICAL message
    phase: int = -1
    mark: Mark | None = None
    benign: bool = False     # it follows a warning that says the error is harmless
    header: bool = True      # its "Traceback (most recent call last):" line was seen
    first: Line | None = None  # the line that began it (its header)
    loose: int = 0           # unprefixed lines in it that are neither frames nor its exception
    thread: bool = False     # a thread died of it ("Exception in thread ..."), not the process


#: A line's place in its message (see :meth:`LineContext.place`): (frame, code, top, low, high, trace).
Ctx = tuple[bool, bool, bool, bool, bool, "Trace | None"]
CTX_PLAIN: Ctx = (False, False, False, False, False, None)
_CTX_LOW: Ctx = (False, False, False, True, False, None)
_CTX_HIGH: Ctx = (False, False, False, False, True, None)
#: The context of a line that begins a message at this level and is no part of a traceback (a
#: level it does not hold, None included: :data:`CTX_PLAIN`).
CTX_OF_LEVEL: dict[str | None, Ctx] = {lv: _CTX_LOW if c < 0 else _CTX_HIGH for lv, c in _LEVEL_CLASS.items()}


def level_class(level: str | None) -> int:
    """-1 for a low level (DEBUG/INFO/WARNING), 1 for a high one (ERROR/CRITICAL), 0 unknown."""
    if level is None:
        return 0
    known = _LEVEL_CLASS.get(level)
    if known is not None:
        return known
    up = level.upper()
    if up in _LOW_LEVELS:
        return -1
    return 1 if up in _HIGH_LEVELS else 0


class LineContext:
    """Follows the messages of a log line by line: the traceback being read (``tb``), whether the
    line before was a frame (``after_frame``), the line before when it began a message
    (``prev_line``), whether it said a thread died (``thread_exc``), and how many lines of a
    harmless warning's message are left (``benign``).

    The reader answers a line that is no part of a traceback itself, as :meth:`place` would (a
    call per line costs): the fields are its to read and write for that.
    """

    __slots__ = ("tb", "after_frame", "prev_line", "thread_exc", "benign")

    def __init__(self) -> None:
        self.tb: Trace | None = None
        self.after_frame = False
        self.prev_line: Line | None = None  # the line before, when it began a message (had a prefix)
        self.thread_exc = False  # the line before said a thread died of the traceback that follows
        self.benign = 0  # lines left of a harmless warning's message (its continuation)

    def place(self, ln: Line) -> Ctx:
        """The line's place in its message: (frame, code, top, low, high, trace).

        frame: a traceback's ``File "...", line N`` line; code: the source line under a frame;
        top: a traceback's final exception line (not indented, after the header); low / high: the
        line belongs to a message logged at a low (DEBUG/INFO/WARNING) or high (ERROR/CRITICAL)
        level: its own prefix's, or for the lines of a traceback, the level of the message that
        introduced it (Python logging's ``exc_info`` prints the traceback under the message);
        trace: the traceback the line belongs to, or None.
        """
        msg = ln.msg
        benign = bool(self.benign)
        if benign:
            # A new message, or a traceback, or enough lines: the warning's message is over.
            self.benign = 0 if ln.prefixed or msg.startswith(_TRACEBACK) else self.benign - 1
        # The line after a traceback's `File "...", line N` is source code, not an error message.
        code = self.after_frame and msg[:1].isspace()
        frame = msg.find('File "', 0, 80) >= 0 and FRAME_RE.match(msg) is not None
        self.after_frame = frame
        own = level_class(ln.level) if ln.prefixed else 0
        prev, self.prev_line = self.prev_line, (ln if ln.prefixed else None)
        tb = self.tb
        thread, self.thread_exc = self.thread_exc, msg.startswith(THREAD_EXC)
        if "Traceback" in msg and _TRACEBACK in msg[:200]:
            # A traceback begins: its level is its own line's, or that of the warning or error
            # message right before it from the same process (Python logging's `exc_info`).
            lvl = own
            if ln.level is None and prev is not None and prev.proc == ln.proc and (
                    prev.level is not None and prev.level.upper() in _INTRODUCES) and not (
                    prev.flavor == "bare" and level_class(prev.level) < 0):
                # (pip's "WARNING: Running pip as root" and then a crash of the next command: a
                # level word alone introduces no traceback as a warning's; uvicorn's ERROR does.)
                lvl = level_class(prev.level)
            tb = self.tb = Trace(ln.lineno, lvl < 0, lvl > 0, benign=benign, first=ln,
                                 thread=thread or msg.startswith(THREAD_EXC))
            return frame, code, False, tb.low, tb.high, tb
        if tb is None:
            if frame:
                # An excerpt begun inside a traceback: its frames still say where it failed.
                tb = self.tb = Trace(ln.lineno, own < 0, own > 0, benign=benign, header=False)
                return frame, code, False, tb.low, tb.high, tb
            return frame, code, False, own < 0, own > 0, None
        if frame or code or not msg or msg[0].isspace() or msg.startswith(_CHAINED):
            return frame, code, False, tb.low, tb.high, tb
        if ("Error" in msg or "Exception" in msg or "Exit" in msg or "Interrupt" in msg) \
                and EXCEPTION_RE.match(msg):
            self.tb = None  # the exception line ends the traceback
            return frame, code, True, tb.low, tb.high, tb
        if ln.prefixed:
            self.tb = None  # a new message: the traceback is over (its exception line not seen)
            return frame, code, False, own < 0, own > 0, None
        tb.loose += 1
        if tb.loose > _TB_LOOSE:
            # Lines that are neither frames nor an exception (a program that prints no prefix):
            # the traceback ended without its exception line, or this was never one.
            self.tb = None
            return frame, code, False, own < 0, own > 0, None
        return frame, code, False, tb.low, tb.high, tb
