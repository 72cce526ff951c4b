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
import dataclasses
import enum
import re
from dataclasses import dataclass, field
from datetime import datetime

from probes.logs.engines import (EMBEDS, ENGINES, IDENTS, Rule, bars_for, frame_matcher_for, hint_for,
                                 matcher_for)
from probes.data.vocab import PHASE_INDEX, PHASES
from probes.logs.engines.common import EXCEPTION_RE, GO_ERROR_RE
from probes.data.reading import ErrorLine, FailedStart, PhaseMark, Progress, Reading, Suspect
from probes.logs.jsonlog import JsonRecord, decode_record
from probes.logs.logline import MAX_LINE_CHARS, Line, Stamp, frames, parse
from probes.logs.identity import identify, listen_port

_STARTING, _DOWNLOAD, _WARMUP, _READY = (PHASE_INDEX[p] for p in ("starting", "download", "warmup", "ready"))
#: The furthest phase a traceback frame can name (frame rules stop there).
_LAST_FRAME_PHASE = PHASE_INDEX["graph_capture"]

# "12/345 [", "3.2G/9.9G [" : a tqdm counter with its bracketed timing.
# The first digit comes before the look-behind (the same test: no digit or dot before the number) so
# that `re` skips ahead to digits instead of trying the look-behind at every position.
_BAR_RE = re.compile(r"(\d(?<![\d.]\d)\d{0,14}(?:\.\d{1,6})?)([kMGT]?)(?:i?B)?/(\d{1,15}(?:\.\d{1,6})?)([kMGT]?)(?:i?B)? \[")
#: Identifiers of the host's own lines: they end starts and explain failures, but never begin a start.
_HOST_IDENTS = frozenset({"systemd", "kernel"})
# "user@host:~$ vllm serve ...", "(venv) root@gpu:/app# ", "$ journalctl -u x": a shell prompt.
_PROMPT_RE = re.compile(r"(?:\(\S+\) )?(?:\[?[\w.-]+@[\w.-]+[: ][^$#]*\]?[$#]|\$)(?: |$)")
# `journalctl -o cat`: systemd's own lines with no identifier, naming the unit (Debian's "name - Description").
_BARE_SYSTEMD_RE = re.compile(r"(?:Started|Starting|Stopped|Stopping|Failed to start) [\w@.:\\-]+\.service\b")
# "ollama.service: Failed with result ...": systemd's own wording even where no identifier shows it.
_UNIT_MSG_RE = re.compile(r"[\w@.:\\-]+\.(?:service|scope|socket|mount|target): ")
_LEADING_NUMBER_RE = re.compile(r"(\d{1,9})[:-](?:\S| )")
_FRAME_RE = re.compile(r'\s*>? ?File "[^"]*", line \d+')
_PERCENT_RE = re.compile(r"%(?<=\d%)")  # a digit and "%"; begins with the literal, a fast scan in `re`
# A request answered (Uvicorn's access line, llama-server's request log): the server is serving.
_SERVED_RE = re.compile(r'"(?:GET|POST) /\S* HTTP/[\d.]+" 2\d\d\b|request: (?:GET|POST) /\S+ \S+ 2\d\d\b|'
                        r'all slots are idle')
# docker compose names a service's containers SERVICE-1, SERVICE-2: the service is the name without it.
_COMPOSE_INDEX_RE = re.compile(r"-\d{1,4}$")
# What a person writes where they left lines out of a pasted log.
_ELISION_RE = re.compile(r"\s*(?:\.{3}|…|\[\.{3}\]|\(\.{3}\)|<snip>|\[snip\]|\.{3} ?\(.{0,60}\))\s*$", re.I)
_UNIT = {"": 1, "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4}

#: systemd's ``Failed with result '...'`` values, as cause ids.
_RESULT_CAUSE = {
    "exit-code": "exit_code", "signal": "signal", "core-dump": "core_dump", "oom-kill": "host_oom_killed",
    "start-limit-hit": "start_limit", "timeout": "signal", "watchdog": "signal", "resources": "exit_code",
    "protocol": "exit_code",
}
_EXIT_CAUSE = {"exited": "exit_code", "killed": "signal", "dumped": "core_dump"}

#: Prefix styles that hint at an engine: (engine, strong).
_FLAVOR_ENGINE = {"sglang": ("sglang", False), "vllm": ("vllm", False), "trtllm": ("trtllm", True),
                  "tgi": ("tgi", False), "logfmt": ("ollama", False)}
#: A uvicorn access line for a probe's request (health checks, metrics, model list): every probe
#: writes one into the unit's journal (FORMATS.md 3.1), so it is never "the last meaningful line".
_PROBE_ACCESS_RE = re.compile(r'"GET /(?:health|health_generate|ping|metrics|version|load|v1/models|'
                              r'get_model_info|model_info|get_server_info|server_info)\b[^"]*HTTP/[\d.]+"')
_VLLM_PROCS = ("APIServer", "EngineCore", "VllmWorker", "Worker_", "RayWorkerWrapper")


class Life(enum.Enum):
    """Where one start is in its lifecycle (a start is one process lifetime of the unit).

    ``EMPTY`` (nothing seen yet) → ``LOADING`` → ``READY`` (or ``PROVISIONAL``: vLLM's
    ``Application startup complete.`` before the bind, which a bind error takes back), and from any
    of them ``FAILED`` (on evidence that the process ended or cannot go on) or ``STOPPED`` (ended on
    purpose). A ``READY`` start may still fail (a crash while serving); a ``FAILED`` one becomes
    ``READY`` again only if the server says ready after all.
    """

    EMPTY = "empty"
    LOADING = "loading"
    PROVISIONAL = "provisional"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


_EMPTY, _LOADING = Life.EMPTY, Life.LOADING


@dataclass(slots=True)
class _Mark:
    phase: str
    line: int
    text: str
    stamp: Stamp | None
    prev: tuple[int, int, int] | None  # (line, year, month) of the nearest full date before
    next: tuple[int, int, int] | None = None


@dataclass(slots=True)
class _Failure:
    """A line that looks like a failure (a suspect), or that proves one."""

    line: int
    text: str
    msg: str
    cause: str
    strength: int
    hint: str
    low: bool = False       # logged at DEBUG/INFO/WARNING: never terminal, never ends a log by itself
    phase: int = -1         # the phase the failure happened in, as far as known when it was seen
    mark: _Mark | None = None  # the line that named that phase (a frame, the exception text)
    at: _Mark | None = None    # where the line itself is
    thread: bool = False       # a thread died of it (the process may well go on)

    def beats(self, cur: _Failure | None) -> bool:
        """Whether this line is more decisive than ``cur``: a line logged as an error beats one
        logged at a lower level, then the stronger cause; between equals the first, except that a
        complete copy of a truncated line replaces it."""
        if cur is None:
            return True
        if self.low != cur.low:
            return cur.low
        return self.strength > cur.strength or (
            self.strength == cur.strength and self.cause == cur.cause and len(self.msg) > len(cur.msg)
            and self.msg.startswith(cur.msg))


@dataclass(slots=True)
class _Trace:
    """The Python traceback being read: its level, and the furthest phase its frames name."""

    line: int
    low: bool                # the traceback belongs to a DEBUG/INFO/WARNING message
    high: bool               # ... to an ERROR/CRITICAL message
    phase: int = -1
    mark: _Mark | None = None
    benign: bool = False     # it follows a warning that says the error is harmless
    header: bool = True      # its "Traceback (most recent call last):" line was seen
    first: Line | None = None  # the line that began it (its header)
    loose: int = 0           # unprefixed lines in it that are neither frames nor its exception
    thread: bool = False     # a thread died of it ("Exception in thread ..."), not the process


@dataclass(slots=True)
class _Start:
    life: Life = Life.EMPTY
    main: int = -1                      # phase index of the main process
    ranks: dict[str, int] = field(default_factory=dict)
    marks: dict[str, _Mark] = field(default_factory=dict)
    first: _Mark | None = None          # the start's first line (fallback "starting" mark)
    served: bool = False                # it was ready at some point (a crash after it starts a new count)
    pre_ready: int = -1
    fail_phase: int = -1
    error: _Failure | None = None       # the decisive line among the unrecovered suspects
    suspects: list[_Failure] = field(default_factory=list)
    pending: _Failure | None = None     # an exception while serving, not (yet) fatal
    completed: int = -1                 # the phase a "... took N s" line said was done
    done_ranks: dict[int, set[str]] = field(default_factory=dict)
    bars: dict[str | None, tuple[str, float, float]] = field(default_factory=dict)
    last_bar_phase: str | None = None
    output: bool = False                # the server itself wrote a line in this start
    banners: set[str] = field(default_factory=set)  # the banner rules (patterns) seen in this start
    ended: bool = False                 # systemd says the process is gone
    exited: bool = False                # ... with a "Main process exited" line
    stopping: bool = False              # systemd is stopping it on purpose
    invocation: str | None = None
    model: str | None = None            # what the start serves (probes/logs/identity.py)
    args_hash: str | None = None
    port: int | None = None             # the port the start says it serves on

    @property
    def evidence(self) -> bool:
        return self.life is not Life.EMPTY

    @property
    def failed(self) -> bool:
        return self.life is Life.FAILED

    @property
    def ready(self) -> bool:
        return self.life is Life.READY or self.life is Life.PROVISIONAL

    def host_phase(self) -> int:
        """The host's phase: the main process's, or the slowest rank's when that is further.

        Ranks are flat (SGLang's TPn, torch's rankN: every one must be done) or grouped per vLLM
        data-parallel engine ("DP1/core", "DP1/Worker_TP0"): an engine is as far as its core or
        its slowest worker, whichever is further, and the host as far as its slowest engine.
        """
        ranks = self.ranks
        if not ranks:
            return self.main
        slowest = None
        engines: dict[str, list[int]] = {}
        for key, p in ranks.items():
            group, sep, member = key.partition("/")
            if not sep:
                slowest = p if slowest is None or p < slowest else slowest
                continue
            core_worker = engines.setdefault(group, [-1, 99])
            if member == "core":
                core_worker[0] = max(core_worker[0], p)
            else:
                core_worker[1] = min(core_worker[1], p)
        for core, worker in engines.values():
            p = max(core, worker if worker != 99 else -1)
            slowest = p if slowest is None or p < slowest else slowest
        assert slowest is not None
        return slowest if slowest > self.main else self.main

    def furthest(self) -> int:
        """The furthest phase any process of the start has reached."""
        return max([self.main, *self.ranks.values()])


@dataclass(slots=True)
class _Hits:
    """What the rules say of one line (the classify stage's answer)."""

    phase: Rule | None = None
    ready: Rule | None = None
    fail: Rule | None = None
    fail_m: re.Match[str] | None = None
    progress_m: re.Match[str] | None = None
    frame: Rule | None = None
    banner: Rule | None = None
    ends: bool = False
    benign: bool = False
    lifecycle: tuple[str, re.Match[str]] | None = None



#: A line's place in its message (see ``StartupReader._context``): (frame, code, top, low, high, trace).
_Ctx = tuple[bool, bool, bool, bool, bool, "_Trace | None"]
_CTX_PLAIN: _Ctx = (False, False, False, False, False, None)
_CTX_LOW: _Ctx = (False, False, False, True, False, None)
_CTX_HIGH: _Ctx = (False, False, False, False, True, None)
_CTX_BY_LEVEL: dict[int, _Ctx] = {0: _CTX_PLAIN, -1: _CTX_LOW, 1: _CTX_HIGH}


#: Log levels as engines print them, by what they allow: a line logged at a low level is never
#: terminal by itself; one logged at a high level makes its traceback terminal.
_LOW_LEVELS = frozenset({"TRACE", "DEBUG", "VERBOSE", "INFO", "NOTICE", "WARN", "WARNING", "D", "I", "W", "V"})
_HIGH_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "INTERNAL_ERROR", "ERR", "CRIT", "E", "F"})
_LEVEL_CLASS = {**{lv: -1 for lv in _LOW_LEVELS}, **{lv: 1 for lv in _HIGH_LEVELS}}
#: The context of a line that begins a message at this level and is no part of a traceback.
_CTX_OF_LEVEL = {lv: _CTX_BY_LEVEL[c] for lv, c in _LEVEL_CLASS.items()}
_TRACEBACK = "Traceback (most recent call last)"
#: Levels of a message that a traceback printed right under it belongs to (``logger.warning(...,
#: exc_info=True)``, ``logger.exception``); an INFO line before a traceback is a coincidence.
_INTRODUCES = frozenset({"WARN", "WARNING", "W", *_HIGH_LEVELS})
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
#: Python's words for an exception that ended a thread (threading.excepthook) or that nothing could
#: raise (a destructor): the process goes on.
_THREAD_EXC = ("Exception in thread ", "Exception ignored in")
#: How much each kind of evidence counts towards an engine (each source counts once per log).
_STRONG, _WEAK, _UNIT_WEIGHT = 10, 1, 5
#: An engine is settled once it has this much evidence (two strong sources), or half of it once
#: the start is past ``starting``; until then stronger evidence may still change it.
_SETTLED = 20
#: An engine that runs another inside it wins over what it embeds (Ollama runs llama.cpp).
_EMBEDS = EMBEDS
#: Unit-name words that name an engine (``ollama-gpu1.service``, ``vllm-qwen.service``).
_UNIT_WORDS = (("ollama", "ollama"), ("sglang", "sglang"), ("vllm", "vllm"), ("text-generation", "tgi"),
               ("tgi", "tgi"), ("trtllm", "trtllm"), ("tensorrt", "trtllm"), ("llama-server", "llamacpp"),
               ("llamacpp", "llamacpp"), ("llama-cpp", "llamacpp"), ("llama.cpp", "llamacpp"))
#: A hard-wrapped JSON record is rejoined over at most this many physical lines / characters.
_JSON_MAX_LINES, _JSON_MAX_CHARS = 200, 64 * 1024
_MAX_SUSPECTS = 64
#: A harmless warning's message runs on for at most this many unprefixed lines (a list of likely
#: causes, a path): past them, in a log with no prefixes, failures count again.
_BENIGN_LINES = 24
#: A traceback is over after this many unprefixed lines that are neither frames nor an exception
#: (a multi-line exception message, a chained exception's text, a C++ backtrace after it).
_TB_LOOSE = 8
_MAX_SERVICES = 16
#: How bad a reading's state is, to choose among several engine services.
_STATE_WORSE = {"failed": 4, "loading": 3, "stopped": 2, "ready": 1}
_EMBEDDED = frozenset(_EMBEDS.values())
_NO_LINE_HINT = ("A traceback began and its exception line has not arrived (or the excerpt ends before "
                 "it): the frames above say where it failed.")


def _level_class(level: str | None) -> int:
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


def _unit_engine(unit: str) -> str | None:
    """The engine a unit's name names (``ollama-gpu1.service`` → ``ollama``), or None."""
    low = unit.lower()
    for word, name in _UNIT_WORDS:
        if word in low:
            return name
    return None


class StartupReader:
    """Incremental reader of one unit's (or one file's) log.

    Feed lines with :meth:`feed` (text) or :meth:`feed_bytes`; journal records go through
    :func:`probes.logs.journal.feed_record`. :meth:`reading` may be called after any line and costs
    O(phases). Never raises on any input text.

    Each line goes through four stages, each a method of its own:

    1. decode (:meth:`feed`, :func:`probes.logs.logline.frames`, :func:`probes.logs.logline.parse`): JSON
       records rejoined and unpacked, ``\\r`` frames split, escape codes dropped, wrapper and engine
       prefixes parsed into a :class:`~probes.logs.logline.Line`;
    2. context (:meth:`_context`): the line's place in a message: its log level (a traceback
       takes the level of the message that introduced it), traceback frame or exception line,
       source code under a frame, a warning's continuation;
    3. classify (:meth:`_classify`): the engine tables' hits, as one :class:`_Hits`, and the
       engine evidence they carry (scores, not a first lock: see :meth:`_evidence`);
    4. apply (:meth:`_apply`, :meth:`_lifecycle`): the hits change the start's :class:`Life`,
       phase, progress and suspects.

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
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        self._engine = engine
        self._forced = self._committed = engine is not None
        self._matcher = matcher_for(engine, self._committed)
        self._watching = not self._committed  # engine evidence is still counted
        self._frames = frame_matcher_for(engine)
        self._bars = bars_for(engine)
        self._scores: dict[str, int] = {}
        self._sources: set[tuple[str, str]] = set()
        self.lines = 0
        self.bad_lines = 0
        self._start = _Start()
        self._starts = 0                 # closed starts that had evidence
        self._streak = 0                 # failed starts since the last ready, closed starts only
        self._streak_starts: list[FailedStart] = []  # ... and what each died of
        self._last_failure: _Failure | None = None
        self._restart_counter: int | None = None
        self._gave_up = False
        self._benign = 0  # lines left of a harmless warning's message (its continuation)
        self._year_prev: tuple[int, int, int] | None = None
        self._await_next: list[_Mark] = []
        # The last timestamped line and the full date before it: the end of the current phase.
        self._last_stamp: tuple[int, Stamp, tuple[int, int, int] | None] | None = None
        self._last_line = ""
        self._after_frame = False
        self._prev_line: Line | None = None  # the line before, when it began a message (had a prefix)
        self._tb: _Trace | None = None
        self._thread_exc = False  # the line before said a thread died of the traceback that follows
        self._ever_ready = False
        self._numbered = False
        self._number: int | None = None  # the leading number of the line before, if it had one
        self._unit = unit
        # A log of several services (docker compose, kubectl --prefix): one reader per service.
        self._subs: dict[str, StartupReader] = {}
        self._last_service: str | None = None
        self._service_depth = 0
        self._is_sub = False
        self._json: list[tuple[Line, bool]] = []  # pieces of a JSON record not yet complete
        if unit and not self._forced:
            name = _unit_engine(unit)
            if name is not None:
                self._evidence(name, _UNIT_WEIGHT, "unit")

    @property
    def engine(self) -> str | None:
        """The engine id once the log named it for sure (or it was forced), else None."""
        if self._subs:
            chosen = self._engine_service()
            return chosen[1].engine if chosen is not None else None
        return self._engine if self._committed else None

    # --- stage 1: decode -------------------------------------------------------------------------

    def feed_bytes(self, raw: bytes, lineno: int | None = None) -> None:
        """Feed one physical line as bytes (invalid UTF-8 is replaced, never fatal)."""
        text = raw.decode("utf-8", "replace")
        if text.isprintable() and len(text) <= MAX_LINE_CHARS and (
                "/" not in text or ("/s]" not in text and "/s," not in text and "s/it" not in text)
                or ("it/s" not in text and "s/it" not in text and "B/s" not in text)):
            # The common case: one plain line, no escape codes, \r frames, control characters or bars
            # (the last test is frames()' own for a bar glued to a line: a vLLM stats line's
            # "tokens/s," is none).
            self.lines = lineno = self.lines + 1 if lineno is None else lineno
            if text:
                if not self._numbered and text[0].isdigit():
                    self._note_number(text)
                ln = parse(lineno, text, numbered=self._numbered)
                if ln.service is None and self._last_service is None and not self._json and not ln.numbered \
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
        self.lines = lineno = self.lines + 1 if lineno is None else lineno
        if invocation:
            start = self._start
            if start.invocation is None:
                if start.evidence and start.ended:
                    self._new_start()
                self._start.invocation = invocation
            elif invocation != start.invocation:
                self._new_start()
                self._start.invocation = invocation
        if not self._numbered and text[:1].isdigit():
            self._note_number(text)
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
        for sub in self._subs.values():
            sub._flush_json()

    def _feed_record(self, rec: JsonRecord, at: Line, systemd: bool) -> None:
        """The lines of a record's message, as if the engine had printed them with its prefix."""
        # A shipper's "INFO" on every record says nothing of the message (stderr tracebacks
        # included); a record that says it is an error is one.
        level = rec.level if rec.level is not None and _level_class(rec.level) > 0 else None
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

    def _note_number(self, text: str) -> None:
        """The first line numbered 1, or two lines with growing ``N:``/``N-`` numbers: ``grep -n``."""
        m = _LEADING_NUMBER_RE.match(text)
        if m is None:
            self._number = None
            return
        n = int(m.group(1))
        if (self._number is not None and n > self._number) or (n == 1 and self.lines == 1):
            self._numbered = True
        self._number = n

    def note_bad_line(self, lineno: int | None = None) -> None:
        """Count an input line that could not be read at all (e.g. a truncated journal record)."""
        self.lines = self.lines + 1 if lineno is None else lineno
        self.bad_lines += 1

    # --- the fold ----------------------------------------------------------------------------------

    def _line(self, ln: Line, systemd: bool) -> None:
        if ln.numbered:
            self._numbered = True  # grep -n output: every later line has a number to strip
        if (ln.service is not None or self._last_service is not None) and not self._is_sub:
            if ln.service_depth < self._service_depth and self._last_service is not None:
                ln.service = None  # only an outer wrapper's prefix: as unprefixed inside it
            self._service_depth = max(self._service_depth, ln.service_depth)
            if ln.service is None:
                ln.service = self._last_service  # an unprefixed line (a bar's frame) continues the last service's
            self._last_service = ln.service
            self._to_service(ln, systemd)
            return
        if (self._json or ln.text.startswith("{", ln.wrap_end)) and self._record(ln, systemd):
            return
        self._plain(ln, systemd)

    def _plain(self, ln: Line, systemd: bool) -> None:
        """Stages 2 to 4 for one logical line."""
        msg = ln.msg
        # Every elision holds ".", "…" or the "p" of "snip": most short lines need no regex call.
        if len(msg) < 24 and ("." in msg or "…" in msg or "p" in msg or "P" in msg) and _ELISION_RE.match(msg):
            return  # "...", "[...]": where whoever pasted the log left lines out
        st = ln.stamp
        if st is not None:  # the year of the nearest full date, and the last timestamped line
            if st.year is not None:
                self._year_prev = (ln.lineno, st.year, st.month)
                if self._await_next:
                    for mk in self._await_next:
                        mk.next = self._year_prev
                    self._await_next.clear()
            self._last_stamp = (ln.lineno, st, self._year_prev)
        if "░" in msg and msg.startswith("░░"):
            return  # `journalctl -x` catalog text explaining the line above
        if (self._tb is None and not self._benign and not self._after_frame and "Traceback" not in msg
                and msg.find('File "', 0, 80) < 0):
            # The common case, at the cost of a look: a line that is no part of a traceback.
            self._thread_exc = "Exception" in msg and msg.startswith(_THREAD_EXC)
            if ln.prefixed:
                self._prev_line = ln
                ctx = _CTX_OF_LEVEL.get(ln.level, _CTX_PLAIN)
            else:
                self._prev_line = None
                ctx = _CTX_PLAIN
            plain = True
        else:
            ctx = self._context(ln)
            plain = False
        if plain and not self._watching:
            found = self._matcher.match(msg)  # the common case of stage 3, without the call
            hits = self._hits(found, False, False, msg) if found else None
        else:
            tr = ctx[5]
            hits = self._classify(ln, ctx[0] or ctx[1], tr is not None and tr.phase < _LAST_FRAME_PHASE)
        is_systemd = systemd or (ln.ident is not None and ln.ident in _HOST_IDENTS) or (
            msg[:1] == "k" and msg.startswith("kernel: ")) or (
            ".service" in msg and (_UNIT_MSG_RE.match(msg) is not None or "systemd[" in msg
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
        if not msg or msg.isspace():
            return
        self._apply(ln, hits, ctx)

    # --- stage 2: context ----------------------------------------------------------------------

    def _context(self, ln: Line) -> _Ctx:
        """The line's place in its message: (frame, code, top, low, high, trace).

        frame: a traceback's ``File "...", line N`` line; code: the source line under a frame;
        top: a traceback's final exception line (not indented, after the header); low / high: the
        line belongs to a message logged at a low (DEBUG/INFO/WARNING) or high (ERROR/CRITICAL)
        level: its own prefix's, or for the lines of a traceback, the level of the message that
        introduced it (Python logging's ``exc_info`` prints the traceback under the message);
        trace: the traceback the line belongs to, or None.
        """
        msg = ln.msg
        benign = bool(self._benign)
        if benign:
            # A new message, or a traceback, or enough lines: the warning's message is over.
            self._benign = 0 if ln.prefixed or msg.startswith(_TRACEBACK) else self._benign - 1
        # The line after a traceback's `File "...", line N` is source code, not an error message.
        code = self._after_frame and msg[:1].isspace()
        frame = msg.find('File "', 0, 80) >= 0 and _FRAME_RE.match(msg) is not None
        self._after_frame = frame
        own = _level_class(ln.level) if ln.prefixed else 0
        prev, self._prev_line = self._prev_line, (ln if ln.prefixed else None)
        tb = self._tb
        thread, self._thread_exc = self._thread_exc, msg.startswith(_THREAD_EXC)
        if "Traceback" in msg and _TRACEBACK in msg[:200]:
            # A traceback begins: its level is its own line's, or that of the warning or error
            # message right before it from the same process (Python logging's `exc_info`).
            lvl = own
            if ln.level is None and prev is not None and prev.proc == ln.proc and (
                    prev.level is not None and prev.level.upper() in _INTRODUCES):
                lvl = _level_class(prev.level)
            tb = self._tb = _Trace(ln.lineno, lvl < 0, lvl > 0, benign=benign, first=ln,
                                   thread=thread or msg.startswith(_THREAD_EXC))
            return frame, code, False, tb.low, tb.high, tb
        if tb is None:
            if frame:
                # An excerpt begun inside a traceback: its frames still say where it failed.
                tb = self._tb = _Trace(ln.lineno, own < 0, own > 0, benign=benign, header=False)
                return frame, code, False, tb.low, tb.high, tb
            return frame, code, False, own < 0, own > 0, None
        if frame or code or not msg or msg[0].isspace() or msg.startswith(_CHAINED):
            return frame, code, False, tb.low, tb.high, tb
        if ("Error" in msg or "Exception" in msg or "Exit" in msg or "Interrupt" in msg) \
                and EXCEPTION_RE.match(msg):
            self._tb = None  # the exception line ends the traceback
            return frame, code, True, tb.low, tb.high, tb
        if ln.prefixed:
            self._tb = None  # a new message: the traceback is over (its exception line not seen)
            return frame, code, False, own < 0, own > 0, None
        tb.loose += 1
        if tb.loose > _TB_LOOSE:
            # Lines that are neither frames nor an exception (a program that prints no prefix):
            # the traceback ended without its exception line, or this was never one.
            self._tb = None
            return frame, code, False, own < 0, own > 0, None
        return frame, code, False, tb.low, tb.high, tb

    # --- stage 3: classify ---------------------------------------------------------------------

    def _classify(self, ln: Line, frame: bool, frames: bool = True) -> _Hits | None:
        """The engine tables' hits on this line (None when no rule matches), after counting the
        engine evidence the line carries. On a traceback frame (or the source line under one)
        only frame rules (the phase a function belongs to, looked up when ``frames``) and
        detection rules count: a frame is code, not a message."""
        msg = ln.msg
        watching = self._watching
        if frame and not watching:
            # A frame or the source line under one: only the frame index can say anything of it.
            if frames:
                for rule, _ in self._frames.match(msg):
                    return _Hits(frame=rule)
            return None
        if watching:
            self._detect_from_line(ln)
        hits = self._matcher.match(msg)
        if not hits:
            if frame and frames:
                for rule, _ in self._frames.match(msg):
                    return _Hits(frame=rule)
            return None
        if watching:
            engine = self._engine
            for rule, _ in hits:
                if rule.detect:
                    self._evidence(rule.detect, _WEAK if rule.weak else _STRONG, rule.pattern)
            if self._engine != engine:
                hits = self._matcher.match(msg)
        return self._hits(hits, frame, frames, msg)

    def _hits(self, hits: list[tuple[Rule, re.Match[str]]], frame: bool, frames: bool, msg: str) -> _Hits:
        """What the rules that matched say of the line, as one :class:`_Hits`."""
        out = _Hits()
        if frame and frames:
            for rule, _ in self._frames.match(msg):
                out.frame = rule
                break
        for rule, m in hits:
            if frame:
                continue
            if rule.lifecycle:
                if out.lifecycle is None:
                    out.lifecycle = (rule.lifecycle, m)
                continue
            if rule.progress:
                out.progress_m = m
            if rule.ends:
                out.ends = True
            if rule.banner and out.banner is None:
                out.banner = rule
            if rule.benign:
                out.benign = True
            if rule.phase is not None and out.phase is None:
                out.phase = rule
            if rule.ready and out.ready is None:
                out.ready = rule
            if rule.cause is not None and out.fail is None:
                out.fail, out.fail_m = rule, m
        return out

    def _detect_from_line(self, ln: Line) -> None:
        if ln.ident is not None and ln.ident in IDENTS:
            self._evidence(IDENTS[ln.ident], _STRONG, "ident")
        elif ln.flavor is not None and ln.flavor in _FLAVOR_ENGINE:
            name, strong = _FLAVOR_ENGINE[ln.flavor]
            if ln.flavor == "sglang" and ln.rank:
                strong = True
            self._evidence(name, _STRONG if strong else _WEAK, "flavor:" + ln.flavor + ("+" if strong else ""))
        if ln.proc is not None and ln.proc.startswith(_VLLM_PROCS):
            self._evidence("vllm", _STRONG, "proc")

    def _evidence(self, name: str, weight: int, source: str) -> None:
        """Count one piece of evidence that ``name`` wrote the log; each source counts once.

        The engine is the one with the most evidence, revisable until it is settled (see
        :data:`_SETTLED`); an engine that embeds another (Ollama over llama.cpp) wins over it
        whenever it has strong evidence of its own, settled or not.
        """
        key = (name, source)
        if key in self._sources:
            return
        self._sources.add(key)
        scores = self._scores
        scores[name] = scores.get(name, 0) + weight
        if self._forced:
            return  # counted (a service's lines name an engine), but the engine is the one given
        cur = self._engine
        best = max(scores, key=lambda n: (scores[n], n == cur))
        for outer, inner in _EMBEDS.items():
            if best == inner and scores.get(outer, 0) >= _STRONG:
                best = outer
        if self._committed and not (best in _EMBEDS and _EMBEDS[best] == cur):
            return  # settled: only the engine that embeds it can still take over
        changed = best != cur
        if changed:
            self._engine = best
        if not self._committed and (scores[best] >= _SETTLED or (
                scores[best] >= _STRONG and self._start.furthest() > _STARTING) or best in _EMBEDS):
            self._committed = changed = True
        if changed:
            self._matcher = matcher_for(self._engine, self._committed)
            self._watching = not self._committed or self._engine in _EMBEDDED
            self._frames = frame_matcher_for(self._engine)
            self._bars = bars_for(self._engine)

    def _to_service(self, ln: Line, systemd: bool) -> None:
        """A line of one service of several (``docker compose logs``, ``kubectl logs --prefix``):
        each service has a reader of its own, and the reading is that of the engine's service
        (see :meth:`_engine_service`)."""
        sub = self._subs.get(ln.service)  # type: ignore[arg-type]
        if sub is None:
            if len(self._subs) >= _MAX_SERVICES:
                return
            sub = StartupReader(self._engine if self._forced else None, self._unit)
            sub._is_sub = True
            sub._watching = True  # with --engine too, the service's lines must name an engine
            self._subs[ln.service] = sub  # type: ignore[index]
        sub.lines = ln.lineno
        sub._numbered = self._numbered
        sub._line(ln, systemd)

    def _engine_services(self) -> list[tuple[str, StartupReader]]:
        """The services whose lines name an engine, most evidence first (a web UI, a gateway or
        a database names none)."""
        named = [(name, sub) for name, sub in self._subs.items() if sub._scores]
        return sorted(named, key=lambda item: -max(item[1]._scores.values()))

    def _engine_service(self, ended: bool = False) -> tuple[str, StartupReader, int] | None:
        """The service whose reading is the log's, and how many services name an engine: of
        those, the one in the worst state (a failed engine beside a ready one is what the
        operator must see), then the one with the most evidence; None when no service names one."""
        named = self._engine_services()
        if not named:
            if len(self._subs) == 1:  # one service: its lines are the log's, whatever they name
                name, sub = next(iter(self._subs.items()))
                return name, sub, 0
            return None
        if len(named) == 1:
            return named[0][0], named[0][1], 1
        worst = max(named, key=lambda item: _STATE_WORSE.get(item[1].reading(ended).state, 0))
        return worst[0], worst[1], len(named)

    # --- stage 4: apply ------------------------------------------------------------------------

    def _apply_host(self, hits: _Hits | None, ln: Line) -> None:
        """A line systemd or the kernel wrote about the unit: lifecycle, or a kernel OOM kill."""
        if not self._committed:
            m = _UNIT_MSG_RE.match(ln.msg)
            name = _unit_engine(m.group(0)) if m is not None else None
            if name is None and hits is not None and hits.lifecycle is not None:
                what = hits.lifecycle[1].groupdict().get("what")
                name = _unit_engine(what) if what else None
            if name is not None:
                self._evidence(name, _UNIT_WEIGHT, "unit")
        if hits is None:
            return
        if hits.lifecycle is not None:
            self._lifecycle(hits.lifecycle[0], hits.lifecycle[1], ln)
        elif hits.fail is not None and hits.fail.cause == "host_oom_killed":
            self._fail(self._start, "host_oom_killed", hits.fail.strength, ln, None)

    def _dots(self) -> str:
        """The phase of llama.cpp's tensor-loading dots (also before anything named the engine)."""
        return (ENGINES[self._engine].dots if self._engine in ENGINES else None) or "weights"

    def _apply(self, ln: Line, hits: _Hits | None, ctx: _Ctx) -> None:
        """A line the server wrote: what it says of the start (``ctx`` from :meth:`_context`)."""
        frame, code, top, low, high, trace = ctx
        msg = ln.msg
        start = self._start
        if start.ended and start.invocation is None:
            start = self._new_start()
        if hits is not None and hits.banner is not None:
            key = hits.banner.pattern
            if key in start.banners or start.failed or start.host_phase() > _STARTING:
                start = self._new_start()
            start.banners.add(key)
        if start.life is _EMPTY:
            start.life = _LOADING
            start.first = self._mark("starting", ln)
        start.output = True
        if ("port" in msg or "://" in msg) and (port := listen_port(msg)) is not None:
            start.port = port
        if start.args_hash is None and "model" in msg:
            ident = identify(msg)
            if ident is not None and (ident.args_hash is not None or start.model is None):
                start.model = ident.model or start.model
                start.args_hash = ident.args_hash
        if '"GET /' not in msg or _PROBE_ACCESS_RE.search(msg) is None:
            self._last_line = ln.text
        phase_rule = hits.phase if hits is not None else None
        if msg[0] == "." and phase_rule is None and msg.startswith("......") and not msg.strip(". "):
            self._advance(start, ln.rank, self._dots(), ln)
        if hits is not None and hits.frame is not None and trace is not None:
            self._frame_phase(start, trace, hits.frame.phase, ln)
        if phase_rule is not None and phase_rule.phase is not None:
            self._advance(start, ln.rank, phase_rule.phase, ln, recover=not high)
            p = PHASE_INDEX[phase_rule.phase]
            if phase_rule.completes and not start.failed:
                if ln.rank is None:
                    start.completed = p
                else:  # with ranks, done once every rank seen has said so
                    done = start.done_ranks.setdefault(p, set())
                    done.add(ln.rank)
                    if done.issuperset(start.ranks):
                        start.completed = p
            elif start.completed == p and not start.failed:
                start.completed = -1  # more of the phase (a draft model's capture after the target's)
        if ("/s" in msg and ("/s]" in msg or "/s," in msg)) or "s/it" in msg:
            self._bar(start, ln)
        elif hits is not None and hits.progress_m is not None:
            self._count(start, ln, phase_rule.phase if phase_rule else None, hits.progress_m)
        if start.suspects and start.served and not start.failed and _SERVED_RE.search(msg) is not None:
            # It answered a request after the suspect: what looked fatal was one failed request.
            start.suspects.clear()
            start.error = None
        if hits is not None:
            if hits.ready is not None:
                self._ready(start, hits.ready, ln)
            if hits.ends and not start.failed:
                start.life = Life.STOPPED  # the server says it shut down (Ctrl-C, SIGTERM): not failed
            if hits.benign:
                self._benign = _BENIGN_LINES
        if self._benign or code or frame or (trace is not None and trace.benign):
            return
        if trace is not None or (hits is not None and hits.fail is not None) or "Error" in msg or "Exception" in msg:
            self._suspect(start, ln, hits, top, low, high, trace)

    def _suspect(self, start: _Start, ln: Line, hits: _Hits | None, top: bool, low: bool, high: bool,
                 trace: _Trace | None) -> None:
        """Whether the line looks like a failure, and whether it proves one."""
        msg = ln.msg
        trace_thread = trace is not None and trace.thread
        if (trace is not None and trace.first is ln and trace.header and start.life is not Life.READY
                and (hits is None or hits.fail is None)):
            # A traceback begins (also one printed inside an exception's message, as Ray's
            # "RuntimeError: Traceback (most recent call last):" wraps the real one): its exception
            # line is yet to come (or beyond an excerpt's end).
            self._fail(start, "unknown", 0, ln, _NO_LINE_HINT, terminal=high, low=low, trace=trace)
            return
        if hits is not None and hits.fail is not None and hits.fail.cause is not None:
            rule, cause = hits.fail, hits.fail.cause
            hint = rule.hint
            if hint is None:
                hint = hint_for(self._engine, cause)
            if "{" in hint and hits.fail_m is not None:
                hint = _fill(hint, hits.fail_m)
            # A rule that says the process ended is a fact whatever level it is logged at (Ollama's
            # app logs "server crash ... respawning" as a warning); anything else logged low is not.
            terminal = (rule.terminal and not trace_thread) or (
                (cause == "engine_died" or (top and not trace_thread)) and not low)
            self._fail(start, cause, rule.strength, ln, hint, terminal=terminal, low=low and not rule.terminal,
                       trace=trace)
        elif ("Error" in msg or "Exception" in msg) and (EXCEPTION_RE.match(msg) or GO_ERROR_RE.match(msg)):
            # An exception with no named cause; Go's and Rust's "Error: ..." is the process's last word.
            terminal = (top and not trace_thread) or GO_ERROR_RE.match(msg) is not None
            self._fail(start, "unknown", 3, ln, None, terminal=terminal and not low, low=low, trace=trace)

    def _frame_phase(self, start: _Start, trace: _Trace, phase: str | None, ln: Line) -> None:
        """A traceback frame names the phase its function belongs to: the failure happened there
        if that is further than the phase the log had reached."""
        if phase is None:
            return
        p = PHASE_INDEX[phase]
        if p > trace.phase:
            trace.phase = p
            trace.mark = self._mark(phase, ln)
        if start.failed and p > start.fail_phase:
            start.fail_phase = p
            start.marks.setdefault(phase, self._mark(phase, ln))

    # --- the start's lifecycle -------------------------------------------------------------------

    def _mark(self, phase: str, ln: Line) -> _Mark:
        mk = _Mark(phase, ln.lineno, ln.text, ln.stamp, self._year_prev)
        if ln.stamp is not None and ln.stamp.year is None:
            self._await_next.append(mk)
        return mk

    def _new_start(self) -> _Start:
        old = self._start
        if self._gave_up and old.evidence:
            # A start after systemd gave up was asked for by hand (reset-failed, start): the loop
            # before it is history, and "gave up" is no longer true.
            self._gave_up = False
            self._streak = 0
            self._streak_starts = []
        if not old.failed and not old.ready and self._unrecovered(old):
            self._to_failed(old)  # a new process began: the old one did not survive its suspect
        if old.evidence:
            self._starts += 1
            if old.served:
                self._streak = 1 if old.failed else 0  # a crash after serving starts a new count
                self._streak_starts = [self._failed_start(old)] if old.failed else []
            elif old.failed:
                self._streak += 1
                self._streak_starts.append(self._failed_start(old))
        if old.failed and old.error is not None:
            self._last_failure = old.error
        self._await_next.clear()  # only the current start's marks are ever shown
        self._start = _Start()
        return self._start

    @staticmethod
    def _unrecovered(start: _Start) -> bool:
        """The start has a suspect logged as an error (not as a warning, not a thread's death)
        that nothing recovered."""
        return any(not s.low and not s.thread for s in start.suspects)

    @staticmethod
    def _failed_start(start: _Start, phase_i: int | None = None) -> FailedStart:
        p = start.fail_phase if phase_i is None else phase_i
        phase = PHASES[p] if p >= 0 else "starting"
        first = _resolve(start.first) if start.first is not None else None
        return FailedStart(start.error.cause if start.error else None, phase, first[0] if first else None)

    def _advance(self, start: _Start, rank: str | None, phase: str, ln: Line, recover: bool = True) -> None:
        """Move a process of the start to ``phase`` if that is forward; a move of the host's phase
        recovers the start's suspects (unless the line saying so is itself an error line). After
        the start failed, an error line that names a later phase (another process reporting the
        failure: TGI's router "warmup{...}: Server error") says where it failed."""
        if start.failed:
            p = PHASE_INDEX[phase]
            if not recover and p > start.fail_phase and not start.ended:
                start.fail_phase = p
                start.marks.setdefault(phase, self._mark(phase, ln))
            return
        p = PHASE_INDEX[phase]
        cur = start.main if rank is None else start.ranks.get(rank, -1)
        if p == _DOWNLOAD:
            ok = cur <= _DOWNLOAD
        elif p == _STARTING:
            ok = cur < 0 or cur == _DOWNLOAD
        else:
            ok = p > cur
        if not ok:
            return
        before = start.host_phase() if start.suspects else 0
        if rank is None:
            start.main = p
        else:
            start.ranks[rank] = p
        if phase not in start.marks:
            start.marks[phase] = self._mark(phase, ln)
        if recover and start.suspects and start.host_phase() > before and not start.served:
            # The start went on to a later phase: what looked like a failure was not one.
            start.suspects.clear()
            start.error = None

    def _bar(self, start: _Start, ln: Line) -> None:
        msg = ln.msg
        c = _BAR_RE.search(msg, 0, 4096) if " [" in msg else None  # "n/N [" holds " ["
        if c is None and _PERCENT_RE.search(msg, 0, 300) is None:
            return  # a rate in a message ("12 it/s"), not a bar
        # The label is what comes before the bar itself ("Loading safetensors checkpoint shards:
        # 50% Completed ", "config.json: 100%"); short, so only the start of the line is looked at.
        label = msg[:200].split("|", 1)[0]
        low = label.lower() if label.isascii() else None
        phase = None
        for bar in self._bars:
            if bar.search(label, low):
                phase = bar.phase
                break
        if phase is not None:
            if start.failed:
                # Bars that stderr flushes with the traceback: the failure happened in their phase.
                p = PHASE_INDEX[phase]
                if p > start.fail_phase and c is not None:
                    start.fail_phase = p
                    start.marks.setdefault(phase, self._mark(phase, ln))
            else:
                self._advance(start, ln.rank, phase, ln)
        if c is None:
            return
        if phase is None:
            # An unlabelled bar belongs to the furthest phase any process has reached.
            furthest = start.furthest()
            if furthest < 0:
                return
            phase = PHASES[furthest]
        done = float(c.group(1)) * _UNIT[c.group(2)]
        total = float(c.group(3)) * _UNIT[c.group(4)]
        start.bars[ln.rank] = (phase, done, total)
        start.last_bar_phase = phase

    def _count(self, start: _Start, ln: Line, phase: str | None, m: re.Match[str]) -> None:
        if phase is None:
            furthest = start.furthest()
            if furthest < 0:
                return
            phase = PHASES[furthest]
        start.bars[ln.rank] = (phase, float(m.group("done")), float(m.group("total")))
        start.last_bar_phase = phase

    def _ready(self, start: _Start, rule: Rule, ln: Line) -> None:
        if rule.confirm and start.ready:
            start.life = Life.READY
            return
        if start.life is Life.STOPPED:
            return
        if start.failed:
            # The server came up after all: what looked fatal was not.
            start.life, start.error, start.fail_phase = Life.LOADING, None, -1
        start.suspects.clear()
        if not start.served:
            start.error = None
        self._ever_ready = True
        if not start.ready:
            start.pre_ready = start.host_phase()
            start.main = _READY
            start.marks.setdefault("ready", self._mark("ready", ln))
        start.served = True
        start.life = Life.PROVISIONAL if rule.provisional and not rule.confirm else Life.READY

    def _fail(self, start: _Start, cause: str, strength: int, ln: Line, hint: str | None, *,
              terminal: bool = True, low: bool = False, trace: _Trace | None = None) -> None:
        """A failure line: a suspect, and when ``terminal`` the proof that the start failed."""
        if hint is None:
            hint = hint_for(self._engine, cause)
        if start.life is Life.EMPTY:
            # A failure seen only from outside (systemd's result, the kernel's OOM kill) is still a start.
            start.life = Life.LOADING
            start.first = self._mark("starting", ln)
        f = _Failure(ln.lineno, ln.text, ln.msg.strip(), cause, strength, hint, low,
                     thread=trace is not None and trace.thread)
        if start.ready:
            if start.life is Life.PROVISIONAL and cause == "port_in_use":
                # vLLM printed "Application startup complete." and then could not bind: never ready.
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
        f.at = self._mark("", ln)
        if trace is not None and trace.phase > p:
            f.phase, f.mark = trace.phase, trace.mark
        else:
            f.phase = p
        if start.failed:
            if f.beats(start.error):
                start.error = f
            return
        if len(start.suspects) < _MAX_SUSPECTS:
            start.suspects.append(f)
        if f.beats(start.error):
            start.error = f
        if terminal:
            self._to_failed(start)

    def _fail_point(self, start: _Start) -> tuple[int, _Mark | None]:
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

    def _to_failed(self, start: _Start) -> None:
        p, mk = self._fail_point(start)
        start.life = Life.FAILED
        start.fail_phase = p
        if mk is not None:
            start.marks.setdefault(PHASES[p], mk)

    def _lifecycle(self, kind: str, m: re.Match[str], ln: Line) -> None:
        start = self._start
        if kind == "started":
            if start.output or start.ended:
                start = self._new_start()
            if start.life is Life.EMPTY:
                start.life = Life.LOADING
                start.first = self._mark("starting", ln)
            return
        if kind == "exited":
            main = m.group(0)[:1] in "Mm"
            if main and start.exited:
                # A second "Main process exited" with no "Started" between (a grep of the journal):
                # another start ended.
                start = self._new_start()
            if start.life is Life.EMPTY:
                start.life = Life.LOADING
            start.ended = True
            start.exited = start.exited or main
            code, status = m.group("code"), m.group("status")
            if code == "exited" and status == "0":
                return
            if code == "killed" and start.stopping:
                if not start.failed:
                    start.life = Life.STOPPED
                return
            self._fail(start, _EXIT_CAUSE.get(code, "exit_code"), 1, ln, None)
        elif kind == "result":
            start.ended = True
            result = m.groupdict().get("result") or "exit-code"
            cause = _RESULT_CAUSE.get(result)
            if cause is not None and not (start.stopping and cause == "signal"):
                self._fail(start, cause, 1 if cause != "host_oom_killed" else 4, ln, None)
        elif kind == "restart":
            start.ended = True
            n = m.groupdict().get("n")
            if n is not None:
                self._restart_counter = int(n)
        elif kind == "job_failed":
            if start.evidence:
                start.ended = True
                self._fail(start, "exit_code", 1, ln, None)
        elif kind == "gave_up":
            self._gave_up = True
            if start.evidence:
                self._fail(start, "start_limit", 1, ln, None)
        elif kind == "stopping":
            if start.life is Life.EMPTY:
                start.life = Life.LOADING  # a start seen only as it is stopped is still a start
            start.stopping = True
        elif kind in ("stopped", "deactivated"):
            if start.life is Life.EMPTY and start.stopping:
                start.life = Life.LOADING
            if start.evidence:
                start.ended = True
                if start.stopping and not start.failed:
                    start.life = Life.STOPPED

    # --- reading -------------------------------------------------------------------------------------

    def reading(self, ended: bool = False) -> Reading:
        """What is known so far about the last start (pure: does not change the reader).

        Args:
            ended: the log has ended (a saved file read to its end) or the process is known to be
                gone (systemd says the unit is not running): a loading start whose last error-level
                suspect nothing recovered has then failed. Live, a suspect is only a suspect.
        """
        if ended and self._json:
            clone = copy.deepcopy(self)  # a record still being rejoined: read its pieces as text
            clone._flush_json()
            return clone.reading(ended=True)
        chosen = self._engine_service(ended) if self._subs else None
        if chosen is not None:
            name, sub, engines = chosen
            r = sub.reading(ended)
            return dataclasses.replace(r, lines=self.lines, bad_lines=self.bad_lines,
                                       service=_COMPOSE_INDEX_RE.sub("", name) if len(self._subs) > 1 else None,
                                       engine_services=engines)
        cur = self._start
        starts = self._starts + (1 if cur.evidence else 0)
        failed, fail_phase, fail_mark = cur.failed, cur.fail_phase, None
        if not failed and ended and cur.life is not Life.STOPPED and self._unrecovered(cur):
            failed = True
            fail_phase, fail_mark = self._fail_point(cur)
        streak = self._streak
        if cur.served:
            streak = 1 if failed else 0
        elif failed:
            streak += 1
            # Only this start is in the log, but "restart counter is at N" says systemd restarted it
            # before: the earlier failures happened where the log does not reach.
            if self._starts == 0 and (self._restart_counter or 0) >= 2 and not self._ever_ready:
                streak = max(streak, 2)
        if failed:
            state, phase_i = "failed", fail_phase
        elif cur.life is Life.STOPPED:
            state, phase_i = "stopped", cur.host_phase()
        elif cur.ready:
            state, phase_i = "ready", _READY
        else:
            state, phase_i = "loading", cur.host_phase()
        marks = list(cur.marks.values())
        if fail_mark is not None and fail_mark.phase not in cur.marks:
            marks.append(fail_mark)
        marks.sort(key=lambda mk: mk.line)
        if not marks:
            first = cur.first
            marks = [first] if first is not None else []
            phase_i = _STARTING
        phase = PHASES[phase_i] if phase_i >= 0 else "starting"
        phases = self._phase_marks(marks)
        progress = None
        if cur.last_bar_phase is not None:
            same = [b for b in cur.bars.values() if b[0] == cur.last_bar_phase]
            ph, done, total = min(same, key=lambda b: (b[1] / b[2]) if b[2] else 0.0)
            progress = Progress(ph, done, total)
        err = cur.error if failed and cur.error is not None else self._last_failure
        error = None if err is None else ErrorLine(err.line, err.text, err.cause, err.hint)
        suspect = None
        if not failed and cur.error is not None and cur.suspects:
            s = cur.error
            suspect = ErrorLine(s.line, s.text, s.cause, s.hint)
        hint = ""
        if failed and cur.error is not None:
            hint = cur.error.hint
            if self._gave_up and cur.error.cause != "start_limit":
                hint = f"{hint} systemd has stopped restarting it (start limit): " \
                       f"`systemctl reset-failed` the unit after the fix."
        failed_now = [self._failed_start(cur, fail_phase)] if failed else []
        began = _resolve(cur.first) if cur.first is not None else None
        return Reading(
            engine=self._engine or "unknown",
            state=state,
            phase=phase,
            phases=phases,
            progress=progress,
            error=error,
            cause=cur.error.cause if failed and cur.error else None,
            hint=hint,
            starts=starts,
            restart_loop=streak >= 2,
            restart_counter=self._restart_counter,
            gave_up=self._gave_up,
            lines=self.lines,
            bad_lines=self.bad_lines,
            last_line=self._last_line,
            began=began[0] if began else None,
            failed_starts=tuple(([] if cur.served else self._streak_starts) + failed_now),
            model=cur.model,
            args_hash=cur.args_hash,
            port=cur.port,
            suspect=suspect,
            suspects=tuple(Suspect(s.line, s.text, s.cause, s.low) for s in cur.suspects),
        )

    def _phase_marks(self, marks: list[_Mark]) -> tuple[PhaseMark, ...]:
        times = [_resolve(mk) for mk in marks]
        end = None
        if self._last_stamp is not None:
            lineno, stamp, prev = self._last_stamp
            end = _resolve(_Mark("", lineno, "", stamp, prev))
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


def _next_year(dt: datetime) -> datetime:
    """The same day and time a year later (28 February for 29 February)."""
    try:
        return dt.replace(year=dt.year + 1)
    except ValueError:
        return dt.replace(year=dt.year + 1, day=28)


def _fill(hint: str, m: re.Match[str]) -> str:
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


def _resolve(mk: _Mark) -> tuple[str, datetime | None] | None:
    """A mark's time as (ISO text, datetime or None)."""
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


def _datetime(year: int, st: Stamp) -> datetime | None:
    """The stamp as a naive datetime in ``year``, or None for a date that does not exist."""
    h, m, s = (int(x) for x in st.hms.split(":"))
    try:
        return datetime(year, st.month, st.day, h, m, s)
    except ValueError:
        return None
