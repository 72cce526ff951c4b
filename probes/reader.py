"""The startup reader: how far has this server's start come, and if it broke, why?

:class:`StartupReader` takes a log one line at a time (plain text as the server printed it, or
journal records) and after any line can say what it knows so far as a frozen :class:`Reading`,
using nothing it has not read yet. Reading a whole file and reading it cut after line *k* give the
same answer at line *k*: there is no look-ahead and no end-of-file step.

What it tracks, per server start (a start is one process lifetime):

* the phase (canonical ids in :data:`~probes.engines.base.PHASES`), with the line and time each
  phase began. Phases only move forward, except ``download``, which may come before or inside
  ``starting`` and returns to it. With tensor/data-parallel ranks a phase is the host's once every
  rank seen has reached it (unless the main process, which prints the bars and the HTTP lines, is
  already further).
* progress inside a phase: the last ``n/N`` of a tqdm bar (shards, CUDA graph batches, hub files);
  with ranked bars, the slowest rank's.
* the decisive failure line: the most decisive line by cause (see
  :data:`~probes.engines.base.CAUSE_STRENGTH`), the first among equals, a truncated copy superseded
  by its complete copy; warnings (ignored imports, deprecations) never count.
* starts and restarts: systemd's ``Started``/``Main process exited``/``Scheduled restart job`` lines,
  journal invocation ids, and banners printed once per launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from probes.engines import ENGINES, IDENTS, PHASE_INDEX, PHASES, bars_for, hint_for, matcher_for
from probes.engines.common import EXCEPTION_RE, GO_ERROR_RE
from probes.logline import MAX_LINE_CHARS, Line, Stamp, frames, parse
from probes.identity import identify, listen_port

_STARTING, _DOWNLOAD, _WARMUP, _READY = (PHASE_INDEX[p] for p in ("starting", "download", "warmup", "ready"))

# "12/345 [", "3.2G/9.9G [" : a tqdm counter with its bracketed timing.
_BAR_RE = re.compile(r"(?<![\d.])(\d{1,15}(?:\.\d{1,6})?)([kMGT]?)(?:i?B)?/(\d{1,15}(?:\.\d{1,6})?)([kMGT]?)(?:i?B)? \[")
#: Identifiers of the host's own lines: they end starts and explain failures, but never begin a start.
_HOST_IDENTS = frozenset({"systemd", "kernel"})
# "user@host:~$ vllm serve ...", "(venv) root@gpu:/app# ", "$ journalctl -u x": a shell prompt.
_PROMPT_RE = re.compile(r"(?:\(\S+\) )?(?:\[?[\w.-]+@[\w.-]+[: ][^$#]*\]?[$#]|\$)(?: |$)")
# `journalctl -o cat`: systemd's own lines with no identifier, naming the unit (Debian's "name - Description").
_BARE_SYSTEMD_RE = re.compile(r"(?:Started|Starting|Stopped|Stopping|Failed to start) [\w@.:\\-]+\.service\b")
# "ollama.service: Failed with result ...": systemd's own wording even where no identifier shows it.
_UNIT_MSG_RE = re.compile(r"[\w@.:\\-]+\.(?:service|scope|socket|mount|target): ")
_LEADING_NUMBER_RE = re.compile(r"(\d{1,9})[:-]\S")
_FRAME_RE = re.compile(r'\s*>? ?File "[^"]*", line \d+')
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


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """Where a phase began.

    Attributes:
        phase: canonical phase id.
        line: 1-based input line number of the first line attributable to the phase.
        time: ISO 8601 local time of that line (``2025-03-08T12:29:04``; ``Z``/offset when known),
            or None when the line had no timestamp. A date without a year takes the year of the
            nearest full date in the log; with none, the year is left out (``--02-12T19:33:39``).
        text: the line as shown to an operator.
        duration_s: seconds until the next phase began (or until the last timestamped line, for the
            current phase); None when either end has no time.
    """

    phase: str
    line: int
    time: str | None
    text: str
    duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """Progress inside a phase: ``done`` of ``total`` (shards, batches, files; bytes for downloads)."""

    phase: str
    done: float
    total: float

    @property
    def fraction(self) -> float:
        """``done / total`` in [0, 1] (0 when total is 0)."""
        return min(1.0, self.done / self.total) if self.total else 0.0


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """The decisive failure line of a start: its line number, text, cause id and hint."""

    line: int
    text: str
    cause: str
    hint: str


@dataclass(frozen=True, slots=True)
class FailedStart:
    """One failed start of a restart loop: its cause id (or None), the phase it died in, and when
    it began (ISO text as in :class:`PhaseMark`, or None)."""

    cause: str | None
    phase: str
    began: str | None


@dataclass(frozen=True, slots=True)
class Reading:
    """What the reader knows after some number of lines. Describes the last start in the log.

    Attributes:
        engine: engine id (``sglang``, ``vllm``, ``tgi``, ``llamacpp``, ``trtllm``, ``ollama``) or
            ``unknown``.
        state: ``loading``, ``ready``, ``failed`` or ``stopped`` (stopped on purpose).
        phase: where the last start is; for a failed start, the phase in which it failed.
        phases: where each phase of the last start began, in order of first appearance.
        progress: the last bar's ``n/N`` in the last start, or None.
        error: the decisive line of the last start, or of the latest failed start when the last
            start has not failed (yet), or None.
        cause: the last start's cause id when it failed, else None.
        hint: one line an operator can act on ("" when nothing failed).
        starts: server starts with any visible evidence in the log.
        restart_loop: two or more starts failed with no ready between them.
        restart_counter: the last ``restart counter is at N`` systemd logged, or None.
        gave_up: systemd hit the unit's start limit and stopped restarting it.
        lines: physical input lines read.
        bad_lines: journal records that could not be read (truncated or invalid JSON).
        last_line: the last non-empty line the server wrote (not systemd), or "".
        began: the time of the last start's first line (its systemd ``Started`` line, or its first
            own line), ISO text as in :class:`PhaseMark`, or None.
        failed_starts: the failed starts since the last ready (the restart loop's iterations,
            oldest first; the last start included when it failed).
        model: the model the last start serves (a hub id or a path), or None (see
            :mod:`probes.identity`).
        args_hash: 12 hex digits identifying the last start's engine arguments, or None.
        port: the TCP port the last start says it serves on (its arguments, or the line that
            says it listens), or None (see :func:`probes.identity.listen_port`).
    """

    engine: str
    state: str
    phase: str
    phases: tuple[PhaseMark, ...]
    progress: Progress | None
    error: ErrorLine | None
    cause: str | None
    hint: str
    starts: int
    restart_loop: bool
    restart_counter: int | None = None
    gave_up: bool = False
    lines: int = 0
    bad_lines: int = 0
    last_line: str = ""
    began: str | None = None
    failed_starts: tuple[FailedStart, ...] = ()
    model: str | None = None
    args_hash: str | None = None
    port: int | None = None

    @property
    def phases_seen(self) -> list[str]:
        """Phase ids of the last start, in order of their first line."""
        return [m.phase for m in self.phases]

    def to_json(self) -> dict:
        """The reading as ``upwatch replay --json`` prints it (exactly these keys)."""
        prog = None
        if self.progress is not None:
            prog = {"phase": self.progress.phase, "done": _num(self.progress.done),
                    "total": _num(self.progress.total)}
        return {
            "engine": self.engine,
            "state": self.state,
            "phase": self.phase,
            "phases_seen": self.phases_seen,
            "phases": [{"phase": m.phase, "line": m.line, "time": m.time, "text": m.text} for m in self.phases],
            "progress": prog,
            "error": None if self.error is None else {"line": self.error.line, "text": self.error.text},
            "cause": self.cause,
            "hint": self.hint,
            "starts": self.starts,
            "restart_loop": self.restart_loop,
        }


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


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
    line: int
    text: str
    msg: str
    cause: str
    strength: int
    hint: str


@dataclass(slots=True)
class _Start:
    main: int = -1                      # phase index of the main process
    ranks: dict[str, int] = field(default_factory=dict)
    marks: dict[str, _Mark] = field(default_factory=dict)
    first: _Mark | None = None          # the start's first line (fallback "starting" mark)
    ready: bool = False
    provisional: bool = False
    pre_ready: int = -1
    failed: bool = False
    fail_phase: int = -1
    error: _Failure | None = None
    pending: _Failure | None = None     # an exception while serving, not (yet) fatal
    completed: int = -1                 # the phase a "... took N s" line said was done
    done_ranks: dict[int, set[str]] = field(default_factory=dict)
    bars: dict[str | None, tuple[str, float, float]] = field(default_factory=dict)
    last_bar_phase: str | None = None
    output: bool = False                # the server itself wrote a line in this start
    evidence: bool = False              # any line (server, or systemd's Started/exit) in this start
    banner: bool = False
    ended: bool = False
    stopping: bool = False
    stopped: bool = False
    invocation: str | None = None
    model: str | None = None            # what the start serves (probes/identity.py)
    args_hash: str | None = None
    port: int | None = None             # the port the start says it serves on

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
        return slowest if slowest > self.main else self.main


class StartupReader:
    """Incremental reader of one unit's (or one file's) log.

    Feed lines with :meth:`feed` (text) or :meth:`feed_bytes`; journal records go through
    :func:`probes.journal.feed_record`. :meth:`reading` may be called after any line and costs
    O(phases). Never raises on any input text.

    Args:
        engine: the engine id when known (``--engine``); detected from the log when None.

    Raises:
        ValueError: for an engine id that is not known.
    """

    def __init__(self, engine: str | None = None) -> None:
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        self._engine = engine
        self._committed = engine is not None
        self._matcher = matcher_for(engine, self._committed)
        self._bars = bars_for(engine)
        self.lines = 0
        self.bad_lines = 0
        self._start = _Start()
        self._starts = 0                 # closed starts that had evidence
        self._streak = 0                 # failed starts since the last ready, closed starts only
        self._streak_starts: list[FailedStart] = []  # ... and what each died of
        self._last_failure: _Failure | None = None
        self._restart_counter: int | None = None
        self._gave_up = False
        self._benign = False
        self._year_prev: tuple[int, int, int] | None = None
        self._await_next: list[_Mark] = []
        # The last timestamped line and the full date before it: the end of the current phase.
        self._last_stamp: tuple[int, Stamp, tuple[int, int, int] | None] | None = None
        self._last_line = ""
        self._after_frame = False
        self._ever_ready = False
        self._numbered = False
        self._number: int | None = None  # the leading number of the line before, if it had one

    @property
    def engine(self) -> str | None:
        """The engine id once the log named it for sure (or it was forced), else None."""
        return self._engine if self._committed else None

    # --- feeding ---------------------------------------------------------------------------------

    def feed_bytes(self, raw: bytes, lineno: int | None = None) -> None:
        """Feed one physical line as bytes (invalid UTF-8 is replaced, never fatal)."""
        text = raw.decode("utf-8", "replace")
        if text.isprintable() and "/s]" not in text and "s/it]" not in text and len(text) <= MAX_LINE_CHARS:
            # The common case: one plain line, no escape codes, \r frames, control characters or bars.
            self.lines = lineno = self.lines + 1 if lineno is None else lineno
            if text:
                if not self._numbered and text[0].isdigit():
                    self._note_number(text)
                self._line(parse(lineno, text, numbered=self._numbered), False)
            return
        self.feed(text, lineno)

    def feed(self, text: str, lineno: int | None = None, *, stamp: Stamp | None = None,
             ident: str | None = None, systemd: bool = False, invocation: str | None = None) -> None:
        """Feed one physical line (without its newline).

        Args:
            text: the line; may hold ``\\r`` frames, escape codes and glued bars.
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
        for frame in frames(text):
            self._line(parse(lineno, frame, stamp=stamp, ident=ident, numbered=self._numbered), systemd)

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
        msg = ln.msg
        if ln.numbered:
            self._numbered = True  # grep -n output: every later line has a number to strip
        st = ln.stamp
        if st is not None:
            if st.year is not None:
                self._year_prev = (ln.lineno, st.year, st.month)
                if self._await_next:
                    for mk in self._await_next:
                        mk.next = self._year_prev
                    self._await_next.clear()
            self._last_stamp = (ln.lineno, st, self._year_prev)
        if self._benign and (ln.prefixed or msg.startswith("Traceback (most recent call last)")):
            self._benign = False
        # The line after a traceback's `File "...", line N` is source code, not an error message.
        code = self._after_frame and msg[:1].isspace()
        self._after_frame = msg.find('File "', 0, 80) >= 0 and _FRAME_RE.match(msg) is not None
        if msg.startswith("░░"):
            return  # `journalctl -x` catalog text explaining the line above
        if not self._committed:
            self._detect_from_line(ln)
        hits = self._matcher.match(msg)
        if not self._committed and hits:
            for rule, _ in hits:
                if rule.detect:
                    self._detect(rule.detect, not rule.weak)
            if self._committed:
                hits = self._matcher.match(msg)
        ident = ln.ident
        is_systemd = systemd or (ident is not None and ident in _HOST_IDENTS) or (
            msg[:1] == "k" and msg.startswith("kernel: ")) or (
            ".service" in msg and (_UNIT_MSG_RE.match(msg) is not None or "systemd[" in msg
                                   or (ident is None and _BARE_SYSTEMD_RE.match(msg) is not None)))
        if not is_systemd and ("$" in msg or "#" in msg) and _PROMPT_RE.match(msg):
            return  # a shell prompt pasted with the log: read for the engine's name only
        start = self._start
        if is_systemd:
            for rule, m in hits:
                if rule.lifecycle:
                    self._lifecycle(rule.lifecycle, m, ln)
                    break
                if rule.cause == "host_oom_killed":
                    self._fail(self._start, rule.cause, rule.strength, ln, None)
                    break
            return
        if not msg or msg.isspace():
            return
        if start.ended and start.invocation is None:
            start = self._new_start()
        banner = ends = False
        phase_rule = ready_rule = fail_rule = fail_m = progress_m = None
        for rule, m in hits:
            if rule.progress:
                progress_m = m
            if rule.ends:
                ends = True
            if rule.banner:
                banner = True
            if rule.benign:
                self._benign = True
            if rule.phase is not None and phase_rule is None:
                phase_rule = rule
            if rule.ready and ready_rule is None:
                ready_rule = rule
            if rule.cause is not None and fail_rule is None:
                fail_rule, fail_m = rule, m
        if banner:
            if start.banner or start.failed or start.host_phase() > _STARTING:
                start = self._new_start()
            start.banner = True
        if not start.evidence:
            start.evidence = True
            start.first = self._mark("starting", ln)
        start.output = True
        if ("port" in msg or "://" in msg) and (port := listen_port(msg)) is not None:
            start.port = port
        if start.args_hash is None and "model" in msg:
            ident = identify(msg)
            if ident is not None and (ident.args_hash is not None or start.model is None):
                start.model = ident.model or start.model
                start.args_hash = ident.args_hash
        if '"GET /' not in ln.msg or _PROBE_ACCESS_RE.search(ln.msg) is None:
            self._last_line = ln.text
        if phase_rule is not None:
            self._advance(start, ln.rank, phase_rule.phase, ln)
            if phase_rule.completes and not start.failed:
                p = PHASE_INDEX[phase_rule.phase]
                if ln.rank is None:
                    start.completed = p
                else:  # with ranks, done once every rank seen has said so
                    done = start.done_ranks.setdefault(p, set())
                    done.add(ln.rank)
                    if done.issuperset(start.ranks):
                        start.completed = p
        if "/s]" in msg or "s/it]" in msg:
            self._bar(start, ln)
        elif progress_m is not None:
            self._count(start, ln, phase_rule.phase if phase_rule else None, progress_m)
        if ready_rule is not None:
            self._ready(start, ready_rule, ln)
        if ends and not start.failed:
            start.stopped = True  # the server says it shut down (Ctrl-C, SIGTERM): stopped, not failed
        if self._benign or code:
            return
        if fail_rule is not None:
            hint = fail_rule.hint
            if hint is None:
                hint = hint_for(self._engine, fail_rule.cause)
            if "{" in hint:
                hint = _fill(hint, fail_m)
            self._fail(start, fail_rule.cause, fail_rule.strength, ln, hint)
        elif ("Error" in msg or "Exception" in msg) and (EXCEPTION_RE.match(msg) or GO_ERROR_RE.match(msg)):
            self._fail(start, "unknown", 3, ln, None)

    def _detect_from_line(self, ln: Line) -> None:
        if ln.ident is not None and ln.ident in IDENTS:
            self._detect(IDENTS[ln.ident], True)
        elif ln.flavor is not None and ln.flavor in _FLAVOR_ENGINE:
            name, strong = _FLAVOR_ENGINE[ln.flavor]
            if ln.flavor == "sglang" and ln.rank:
                strong = True
            self._detect(name, strong)
        if ln.proc is not None and not self._committed and ln.proc.startswith(_VLLM_PROCS):
            self._detect("vllm", True)

    def _detect(self, name: str, strong: bool) -> None:
        if self._committed:
            return
        if strong:
            self._engine, self._committed = name, True
        elif self._engine is None:
            self._engine = name
        else:
            return
        self._matcher = matcher_for(self._engine, self._committed)
        self._bars = bars_for(self._engine)

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
        if old.evidence:
            self._starts += 1
            if old.ready:
                self._streak = 1 if old.failed else 0  # a crash after serving starts a new count
                self._streak_starts = [self._failed_start(old)] if old.failed else []
            elif old.failed:
                self._streak += 1
                self._streak_starts.append(self._failed_start(old))
        if old.error is not None:
            self._last_failure = old.error
        self._await_next.clear()  # only the current start's marks are ever shown
        self._start = _Start()
        return self._start

    @staticmethod
    def _failed_start(start: _Start) -> FailedStart:
        phase = PHASES[start.fail_phase] if start.fail_phase >= 0 else "starting"
        first = _resolve(start.first) if start.first is not None else None
        return FailedStart(start.error.cause if start.error else None, phase, first[0] if first else None)

    def _advance(self, start: _Start, rank: str | None, phase: str, ln: Line) -> None:
        if start.failed:
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
        if rank is None:
            start.main = p
        else:
            start.ranks[rank] = p
        if phase not in start.marks:
            start.marks[phase] = self._mark(phase, ln)

    def _bar(self, start: _Start, ln: Line) -> None:
        msg = ln.msg
        # The label is what comes before the bar itself ("Loading safetensors checkpoint shards:
        # 50% Completed ", "config.json: 100%"); short, so only the start of the line is looked at.
        label = msg[:200].split("|", 1)[0]
        phase = None
        for bar in self._bars:
            if bar.rx.search(label):
                phase = bar.phase
                break
        if phase is not None:
            self._advance(start, ln.rank, phase, ln)
        c = _BAR_RE.search(msg, 0, 4096)
        if c is None:
            return
        if phase is None:
            # An unlabelled bar belongs to the furthest phase any process has reached.
            furthest = max([start.main, *start.ranks.values()])
            if furthest < 0:
                return
            phase = PHASES[furthest]
        done = float(c.group(1)) * _UNIT[c.group(2)]
        total = float(c.group(3)) * _UNIT[c.group(4)]
        start.bars[ln.rank] = (phase, done, total)
        start.last_bar_phase = phase

    def _count(self, start: _Start, ln: Line, phase: str | None, m: re.Match[str]) -> None:
        if phase is None:
            furthest = max([start.main, *start.ranks.values()])
            if furthest < 0:
                return
            phase = PHASES[furthest]
        start.bars[ln.rank] = (phase, float(m.group("done")), float(m.group("total")))
        start.last_bar_phase = phase

    def _ready(self, start: _Start, rule, ln: Line) -> None:
        if rule.confirm and start.ready:
            start.provisional = False
            return
        if start.failed:
            # The server came up after all: what looked fatal was not.
            start.failed, start.error, start.fail_phase = False, None, -1
        self._ever_ready = True
        if not start.ready:
            start.pre_ready = start.host_phase()
            start.ready = True
            start.main = _READY
            start.marks.setdefault("ready", self._mark("ready", ln))
        start.provisional = rule.provisional and not rule.confirm

    def _fail(self, start: _Start, cause: str, strength: int, ln: Line, hint: str | None) -> None:
        if hint is None:
            hint = hint_for(self._engine, cause)
        if not start.evidence:
            # A failure seen only from outside (systemd's result, the kernel's OOM kill) is still a start.
            start.evidence = True
            start.first = self._mark("starting", ln)
        msg = ln.msg.strip()
        if start.ready and not start.failed:
            if start.provisional and cause == "port_in_use":
                # vLLM printed "Application startup complete." and then could not bind: never ready.
                start.ready = start.provisional = False
                start.main = start.pre_ready
                start.marks.pop("ready", None)
            elif cause == "unknown":
                # An exception while serving (one bad request) does not end the start; keep it in
                # case the engine dies of it next, when it is the root cause.
                if start.pending is None or strength > start.pending.strength:
                    start.pending = _Failure(ln.lineno, ln.text, msg, cause, strength, hint)
                return
            elif start.pending is not None and start.error is None:
                start.error = start.pending
        cur = start.error
        if (cur is None or strength > cur.strength
                or (strength == cur.strength and cause == cur.cause and len(msg) > len(cur.msg)
                    and msg.startswith(cur.msg))):
            start.error = _Failure(ln.lineno, ln.text, msg, cause, strength, hint)
        if not start.failed:
            start.failed = True
            start.fail_phase = start.host_phase()
            if start.completed == start.fail_phase and _DOWNLOAD < start.fail_phase < _WARMUP:
                # "Loading model weights took 10 GB", then an OOM: it failed in what comes next.
                start.fail_phase += 1
                nxt = PHASES[start.fail_phase]
                start.marks.setdefault(nxt, self._mark(nxt, ln))

    def _lifecycle(self, kind: str, m: re.Match[str], ln: Line) -> None:
        start = self._start
        if kind == "started":
            if start.output or start.ended:
                start = self._new_start()
            if not start.evidence:
                start.evidence = True
                start.first = self._mark("starting", ln)
            return
        if kind == "exited":
            start.evidence = True
            start.ended = True
            code, status = m.group("code"), m.group("status")
            if code == "exited" and status == "0":
                return
            if code == "killed" and start.stopping:
                start.stopped = True
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
            start.stopping = True
        elif kind in ("stopped", "deactivated"):
            if start.evidence:
                start.ended = True
                if start.stopping and not start.failed:
                    start.stopped = True

    # --- reading -------------------------------------------------------------------------------------

    def reading(self) -> Reading:
        """What is known so far about the last start (pure: does not change the reader)."""
        start = self._start
        starts = self._starts + (1 if start.evidence else 0)
        cur = start  # the last start; an empty one after an end reads as the fresh start it is
        streak = self._streak
        if cur.ready:
            streak = 1 if cur.failed else 0
        elif cur.failed:
            streak += 1
            # Only this start is in the log, but "restart counter is at N" says systemd restarted it
            # before: the earlier failures happened where the log does not reach.
            if self._starts == 0 and (self._restart_counter or 0) >= 2 and not self._ever_ready:
                streak = max(streak, 2)
        if cur.failed:
            state = "failed"
            phase_i = cur.fail_phase
        elif cur.stopped:
            state = "stopped"
            phase_i = cur.host_phase()
        elif cur.ready:
            state, phase_i = "ready", _READY
        else:
            state = "loading"
            phase_i = cur.host_phase()
        marks = sorted(cur.marks.values(), key=lambda mk: mk.line)
        if not marks:
            first = cur.first
            marks = [first] if first is not None else []
            phase_i = _STARTING
        phase = PHASES[phase_i] if phase_i >= 0 else "starting"
        if state == "loading" and phase_i < 0:
            phase = "starting"
        phases = self._phase_marks(marks)
        progress = None
        if cur.last_bar_phase is not None:
            same = [b for b in cur.bars.values() if b[0] == cur.last_bar_phase]
            ph, done, total = min(same, key=lambda b: (b[1] / b[2]) if b[2] else 0.0)
            progress = Progress(ph, done, total)
        err = cur.error if cur.error is not None else self._last_failure
        error = None if err is None else ErrorLine(err.line, err.text, err.cause, err.hint)
        return Reading(
            engine=self._engine or "unknown",
            state=state,
            phase=phase,
            phases=phases,
            progress=progress,
            error=error,
            cause=cur.error.cause if cur.failed and cur.error else None,
            hint=self._hint(cur),
            starts=starts,
            restart_loop=streak >= 2,
            restart_counter=self._restart_counter,
            gave_up=self._gave_up,
            lines=self.lines,
            bad_lines=self.bad_lines,
            last_line=self._last_line,
            began=_resolve(cur.first)[0] if cur.first is not None and _resolve(cur.first) else None,
            failed_starts=tuple(([] if cur.ready else self._streak_starts)
                                + ([self._failed_start(cur)] if cur.failed else [])),
            model=cur.model,
            args_hash=cur.args_hash,
            port=cur.port,
        )

    def _hint(self, cur: _Start) -> str:
        if not (cur.failed and cur.error):
            return ""
        if self._gave_up and cur.error.cause != "start_limit":
            return f"{cur.error.hint} systemd has stopped restarting it (start limit): " \
                   f"`systemctl reset-failed` the unit after the fix."
        return cur.error.hint

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
        text = f"--{st.month:02d}-{st.day:02d}T{st.hms}{st.tz}"
        try:
            dt = datetime(2000, st.month, st.day, *map(int, st.hms.split(":")))
        except ValueError:
            dt = None
        return text, dt
    text = f"{year:04d}-{st.month:02d}-{st.day:02d}T{st.hms}{st.tz}"
    try:
        dt = datetime(year, st.month, st.day, *map(int, st.hms.split(":")))
    except ValueError:
        dt = None
    return text, dt
