"""Turn one raw log line into clean logical lines with their prefixes parsed.

A physical line of a server log, as an operator has it, may carry:

* tqdm frames separated by ``\\r`` (``sglang-ok-05-cr``): each frame is a logical line;
* ANSI colour codes (vLLM 0.6-0.11 colour the process prefix even without a TTY);
* a progress bar glued to the next log line (``... 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] ...``);
* wrapper prefixes added by whatever collected the log: ``grep -n`` numbers, a log viewer's
  ``  | `` gutter, docker compose ``name  | ``, syslog ``Nov 29 16:27:20 host ident[pid]: ``,
  ``journalctl -o short-iso``, a container runtime's RFC 3339 timestamp;
* the engine's own prefix: SGLang ``[2025-03-08 12:29:11 TP3] ``, vLLM ``INFO 02-12 19:33:39 [x.py:1] ``
  (V1) / ``INFO 05-04 14:43:16 x.py:151] `` (V0), a worker ``(VllmWorkerProcess pid=67) ``, torch
  ``[rank1]: ``, glog ``W0904 14:28:17.324000 964632 file.py:2425] ``, Python logging
  ``2025-05-02 16:14:33,560 - INFO - ``, TRT-LLM ``[12/20/2025-04:20:04] [TRT-LLM] [I] ``, TGI
  ``2024-06-17T13:18:04.047265Z  INFO ``, Ollama ``time=2024-... level=INFO source=... msg=``.

This module never raises on any input text; everything it cannot recognise stays in the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.hosttext import clean_chars, strip_escapes

#: Longest logical line kept, in characters. journald itself splits at 48 KiB (``LineMax``);
#: anything longer is cut and marked, so a 20 MB line costs no more than this.
MAX_LINE_CHARS = 64 * 1024

# A tqdm bar ends with "n/N [elapsed<eta, rate]"; text glued after its "]" is the next line.
_GLUED_BAR_RE = re.compile(
    r"((?<![\d.])\d{1,15}(?:\.\d{1,6})?[kMGT]?i?B?/\d{1,15}(?:\.\d{1,6})?[kMGT]?i?B? \[[^\[\]]{0,200}\])(?=\S)")

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

# Wrapper prefixes, outermost first. Each is anchored and tried once, in order.
_GREP_N_RE = re.compile(r"\d+[:-](?=[A-Z][a-z]{2} [ \d]\d \d\d:|\d{4}-\d\d-\d\d[T ]|\[|\(|"
                        r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d |time=\d{4}-)")
_NUMBER_RE = re.compile(r"\d+[:-]")
#: A line that begins with a date or a clock ("2025-01-01 ...", "12-31 23:59:58", "11:00:01 ..."): its
#: first number is a year, a month or an hour, not a grep -n line number (at the new year, or on the
#: hour, such numbers grow from one line to the next as grep -n's do). grep -n's own "15:10:59:58 ..."
#: (line 15 of a log that begins with a clock) is no clock: a clock's seconds are followed by no ":".
#: (The reader's grep -n check, ``StartupReader._note_number``; the block scan's, on bytes.)
DATE_OR_CLOCK_RE = re.compile(r"(?:\d{4}-\d\d-\d\d|\d\d-\d\d[ T]\d\d:\d\d:\d\d|\d\d:\d\d:\d\d)(?![:\d])")

def date_shaped(s: str) -> bool:
    """Whether ``s`` begins in the shape of a ``YYYY-MM-DD`` date (a digit second, ``-`` fifth and
    eighth): the cheap first look before :data:`DATE_OR_CLOCK_RE`. :func:`parse` takes such a
    line's first number for a date, not a ``grep -n`` line number (only a ``grep -n`` context
    line numbered 1000-9999 whose text begins ``NN-`` looks the same; the date is by far the more
    common). :func:`date_shaped_bytes` is the same test on bytes."""
    return s[1:2].isdigit() and s[4:5] == "-" and s[7:8] == "-"


def date_shaped_bytes(b: bytes) -> bool:
    """:func:`date_shaped` on a line's bytes (or its block-scan template: digits made ``0``)."""
    return b[1:2].isdigit() and b[4:5] == b"-" and b[7:8] == b"-"


_KUBECTL_RE = re.compile(r"\[pod/([^\]\s]+)\] ")
_GUTTER_RE = re.compile(r"\s+\| ")
#: A docker compose prefix (``name  | ``): group 1 is the service (the quiet path and the benchmarks
#: read it too).
COMPOSE_RE = re.compile(r"([A-Za-z0-9][\w.-]*)\s+\| ")
# A level alone before the message: Python logging's default format, as a wrapper script prints the
# engine's output through it ("INFO:tgi-server:        + ...": level, logger name, message), and
# the level with padding and no name, as uvicorn ("INFO:     Started server process [7]", its
# default formatter pads the level to 8 characters) and pip ("WARNING: ...", "ERROR: ...") print it.
_PYWRAP_RE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:[\w.-]+: *| +)")
_PYWRAP_LEVELS = ("DEBUG:", "INFO:", "WARNING:", "ERROR:", "CRITICAL:")
# `> ` as people quote a pasted log in an issue or a Markdown file (nested quotes too).
_QUOTE_RE = re.compile(r"(?:> ?)+")
_NESTED = (1, 2, 3)  # at most three wrappers, one inside the other
_SYSLOG_RE = re.compile(
    r"([A-Z][a-z]{2}) ([ \d]\d) (\d\d:\d\d:\d\d)(?:\.\d+)? (?:([^\s\[\]:]+) )?([^\s\[:]+)(?:\[(\d+)\])?: ?")
# journalctl -o short-iso: host and identifier, or (a journal without _HOSTNAME, a copy that left it
# out) the identifier with its PID alone ("2026-02-18T10:52:39+02:00 systemd[1]: Stopping ...").
_ISO_RE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?"
    r"(?: (?![A-Z]{4,} )(?:([^\s\[\]:]+) ([^\s\[:]+)(?:\[(\d+)\])?|([^\s\[:]+)\[(\d+)\]): | )")
_RANK_RE = re.compile(r"\[rank(\d+)\]:? ?")
# A process prefix: vLLM's "(EngineCore_DP0 pid=12)", "(VllmWorker rank=1 pid=3)", Ray's forwarding of
# a worker's output "(pid=2613)", "(ServeReplica:default:LLMServer pid=2613, ip=10.0.0.2)"; Ray's in
# front of vLLM's gives two ("(APIServer pid=1) (DPEngineCoreActor pid=7, ip=...) ...").
_PROC_RE = re.compile(
    r"\((?:([A-Za-z][\w:.-]*(?: (?:TP|rank=)?\d+)?) )?pid=(\d+)(?:, ip=[^)]*)?\)(?: |$)")
# Engine prefixes (the innermost). Groups: time parts, ranks, level.
# SGLang's: a level word right after it ("[2025-05-02 16:14:33] WARNING ..."), as some builds log, is read
# by a look-ahead: it stays in the message.
_SGLANG_RE = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d:\d\d:\d\d)((?: [A-Z]{2,4}\d+)*)\] "
                        r"(?:(?=(DEBUG|INFO|WARNING|ERROR|CRITICAL):? ))?")
_VLLM_RE = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:(\d{4})-)?(\d\d)-(\d\d) (\d\d:\d\d:\d\d)(?:[.,]\d+)? \[?[\w./-]+:\d+\] ?")
_GLOG_RE = re.compile(r"([IWEF])(\d\d)(\d\d) (\d\d:\d\d:\d\d)\.\d+\s+\d+ \S+:\d+\] ")
_PYLOG_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d:\d\d:\d\d),\d+ - (\w+) - ")
_TRT_RE = re.compile(r"\[(\d\d)/(\d\d)/(\d{4})-(\d\d:\d\d:\d\d)\] (?:\[TRT(?:-LLM)?\] (?:\[RANK (\d+)\] )?\[(\w)\] )?")
# TensorRT-LLM's C++ logger: "[TensorRT-LLM][ERROR] ...", with MPI ranks "[TensorRT-LLM][RANK 3][INFO] ...".
_TRT_CPP_RE = re.compile(r"\[TensorRT-LLM\](?:\[RANK (\d+)\])?\[(TRACE|DEBUG|VERBOSE|INFO|WARNING|ERROR|FATAL|INTERNAL_ERROR)\] ?")
# torch c10d's own prefix after "[rank10]:": "[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] "
# (the month is not zero-padded: E130 is 30 January), with or without the thread id
# ("[W1203 10:00:00.123456 4711 socket.cpp:752] "); torch <= 2.1 wrote no date ("[W socket.cpp:426] ").
_C10D_RE = re.compile(r"\[([IWEF])(?:(\d{1,2})(\d\d) (\d\d:\d\d:\d\d)\.\d+(?: \d+)?)? [\w./-]+:\d+\] ?")
# llama.cpp's common log (common/log.cpp, --log-prefix --log-timestamps, on in its server images):
# the time since start as minutes.seconds.ms.us, then the level letter ("0.04.391.228 I srv  ...").
_LLAMA_RE = re.compile(r"\d{1,6}\.\d\d\.\d{3}\.\d{3} ([IWED]) ")
_LOGFMT_RE = re.compile(r"time=(\d{4})-(\d\d)-(\d\d)T(\d\d:\d\d:\d\d)\S* level=(\w+) ")
# TGI (Rust tracing): "  INFO text_generation_launcher: ...", "WARN shard-manager: ...",
# "INFO text_generation_router::server: ..."; the level is followed by a target and a colon (a vLLM
# line after a container runtime's time, "INFO 07-28 10:00:00 [x.py:1] ...", is not TGI's).
_TGI_LEVEL_RE = re.compile(
    r" *(TRACE|DEBUG|INFO|WARN|ERROR) (?=[\w-]+(?:::[\w-]+)*(?:\{[^}]{0,300}\})?(?::[\w-]+(?:\{[^}]{0,300}\})?)*: )")

#: Process-prefix names that are parallel workers (tensor/pipeline ranks) of a vLLM engine.
_WORKER_PROCS = ("VllmWorkerProcess", "VllmWorker", "Worker", "RayWorkerWrapper")
_DP_INDEX_RE = re.compile(r"DP[_-]?(\d+)|^EngineCore_(\d+)$")


@dataclass(slots=True)
class Stamp:
    """A timestamp read from a line.

    ``year`` is None when the line's format has no year (vLLM, glog, syslog); the reader fills it
    from the nearest full date in the same log. ``hms`` is ``"HH:MM:SS"``; ``tz`` is ``"Z"``,
    ``"+02:00"`` or ``""`` (local time of the host, unknown offset).
    """

    year: int | None
    month: int
    day: int
    hms: str
    tz: str = ""


@dataclass(slots=True)
class Line:
    """One logical line: what the reader matches against.

    Attributes:
        lineno: 1-based number of the physical input line (a ``\\r`` frame keeps its line's number).
        text: the line as shown to an operator: escape codes and control characters removed,
            wrappers kept.
        msg: ``text`` without any recognised prefix: what patterns look at.
        stamp: the outermost timestamp found, or None.
        rank: a parallel worker's id, or None for the server's main process: SGLang's ``"TP3"`` or
            ``"DP0 TP0"``, torch's ``"rank1"``, or a vLLM process as ``"DP0/core"`` (an engine
            core), ``"DP0/Worker_TP1"``, ``"DP1/pid67"`` (see :func:`_vllm_rank`).
        proc: the process prefix name (``APIServer``, ``EngineCore_DP0``), or None.
        ident: the syslog identifier (``systemd``, ``python3``, ``env``) when a syslog, journal or
            short-iso prefix named one.
        level: the engine's log level word when its prefix had one (``INFO``, ``ERROR``, ``W``).
        prefixed: True when an engine prefix started this line, i.e. it begins a new log message;
            False for continuation lines (traceback frames, multi-line messages).
        flavor: which engine-style prefix matched: ``sglang``, ``vllm``, ``glog``, ``pylog``,
            ``trtllm``, ``logfmt``, ``tgi``, ``llamacpp``, ``bare`` (a level word alone: uvicorn, pip), or None.
        numbered: a ``grep -n`` line number was stripped from the front.
        service: the service or container a multi-service wrapper named (``docker compose logs``
            ``name  | ``, ``kubectl logs --prefix`` ``[pod/NAME/CONTAINER]``), or None.
        wrap_end: where the wrappers end in ``text``: ``text[wrap_end:]`` is what the program
            itself wrote (its own prefix included).
        service_depth: how many service prefixes were stripped (a compose log inside ``kubectl
            logs --prefix`` has two; ``service`` is the innermost).
    """

    lineno: int
    text: str
    msg: str
    stamp: Stamp | None = None
    rank: str | None = None
    proc: str | None = None
    ident: str | None = None
    level: str | None = None
    prefixed: bool = False
    flavor: str | None = None
    numbered: bool = False
    service: str | None = None
    wrap_end: int = 0
    service_depth: int = 0


def decode(raw: bytes) -> str:
    """Decode a raw line as UTF-8, replacing invalid bytes with U+FFFD (never raises)."""
    return raw.decode("utf-8", "replace")


def frames(text: str) -> list[str]:
    """Split one physical line into its logical lines.

    ``\\r`` separates tqdm frames; escape codes and other control characters are removed by the one
    sanitiser (:mod:`probes.hosttext`: :func:`~probes.hosttext.strip_escapes` on the whole line,
    :func:`~probes.hosttext.clean_chars` on each frame);
    a progress bar glued to the following log line is split from it. Empty frames are dropped.
    Lines longer than :data:`MAX_LINE_CHARS` are cut and end with ``" …[cut N chars]"``.
    """
    if len(text) > MAX_LINE_CHARS:
        cut = len(text) - MAX_LINE_CHARS
        cr = text.find("\r", len(text) - MAX_LINE_CHARS // 2)
        if "\r" in text[:MAX_LINE_CHARS // 2] and cr >= 0:
            # tqdm frames: keep the first ones and the last ones (the current progress)
            text = text[:MAX_LINE_CHARS // 2] + text[cr:]
        else:
            text = f"{text[:MAX_LINE_CHARS]} …[cut {cut} chars]"
    text = strip_escapes(text)
    if "\n" in text:
        text = text.replace("\n", "\r")  # several journal lines in one MESSAGE: each is a line
    parts = text.split("\r") if "\r" in text else [text]
    out: list[str] = []
    for part in parts:
        if not part:
            continue
        if not part.isprintable():
            part = clean_chars(part)
            if not part:
                continue
        if "it/s" in part or "s/it" in part or "B/s" in part:
            pieces = _GLUED_BAR_RE.split(part)
            if len(pieces) > 1:
                # split() keeps the bar as its own element: re-join each bar with the text before it.
                buf = ""
                for i, piece in enumerate(pieces):
                    buf += piece
                    if i % 2 == 1:
                        out.append(buf)
                        buf = ""
                if buf:
                    out.append(buf)
                continue
        out.append(part)
    return out


def _vllm_rank(proc: str, pid: str) -> str:
    """A vLLM process as ``"DPn/member"``: its data-parallel engine and its place in it, ``core``
    for the engine core, else the worker's own name ("Worker_TP1", "VllmWorker rank=1") or, when
    it has none, its PID ("VllmWorkerProcess pid=67")."""
    d = _DP_INDEX_RE.search(proc)
    dp = (d.group(1) or d.group(2)) if d else "0"
    if proc.startswith("EngineCore"):
        return f"DP{dp}/core"
    return f"DP{dp}/{proc if proc[-1].isdigit() else 'pid' + pid}"


def parse(lineno: int, text: str, *, stamp: Stamp | None = None, ident: str | None = None,
          numbered: bool = False) -> Line:
    """Parse the prefixes of one logical line.

    Args:
        lineno: the physical line number (1-based).
        text: a logical line from :func:`frames`.
        stamp: a timestamp already known from outside the text (a journal entry's
            ``__REALTIME_TIMESTAMP``); it wins over any timestamp in the text.
        ident: a syslog identifier already known (journal ``SYSLOG_IDENTIFIER``).
        numbered: the log is ``grep -n`` output (an earlier line showed it): strip a leading
            ``N:``/``N-`` from every line, traceback lines included.

    Returns:
        The :class:`Line`; unrecognised text is left in ``msg`` untouched.
    """
    s = text
    if not s:
        return Line(lineno, text, text, stamp, None, None, ident)
    rank = proc = level = flavor = service = wrap_level = None
    prefixed = grep_n = bare = False
    depth = 0
    c = s[0]
    if (c == " " and "| " not in s) or (c.islower() and c != "t" and " | " not in s[:64]) or (
            not c.isalnum() and c not in "[(> "):
        # No wrapper or prefix begins so (an indented traceback line, a program's own text): the
        # answer of the steps below, without them.
        return Line(lineno, text, text, stamp, None, None, ident)
    if c == ">":
        m = _QUOTE_RE.match(s)  # a log quoted in Markdown, as pasted into an issue
        if m:
            s = s[m.end():]
            if not s:
                return Line(lineno, text, s, stamp, None, None, ident)
            c = s[0]
    # --- wrappers, outermost first (each gated by a cheap look at the first characters) --------
    if c.isdigit():
        if numbered:
            m = _NUMBER_RE.match(s)
        elif date_shaped(s):
            m = None  # a date: no grep -n number in front
        else:
            m = _GREP_N_RE.match(s)
        if m:
            s = s[m.end():]
            c = s[:1]
            grep_n = True
    elif c == " " and "| " in s:  # a gutter holds "| " (a traceback's indented lines do not)
        m = _GUTTER_RE.match(s)
        if m:
            s = s[m.end():]
            c = s[:1]
    if c == "[" and s.startswith("[pod/"):
        m = _KUBECTL_RE.match(s)  # kubectl logs --prefix
        if m:
            service = m.group(1)
            depth = 1
            s = s[m.end():]
            c = s[:1]  # ... --timestamps: the time is read with the wrappers below
    for _ in _NESTED:  # nested wrappers: `docker logs -t` of a compose service, a time before a time
        if not (c.isalnum() or c == ">"):
            break  # "[", "(", " ": no wrapper of these begins so
        before = s
        if c == ">":
            m = _QUOTE_RE.match(s)  # a quoted log inside a wrapper
            if m and m.end() < len(s):
                s = s[m.end():]
                c = s[:1]
        if c.isupper() and s.startswith(_PYWRAP_LEVELS):
            m = _PYWRAP_RE.match(s)
            if m and m.end() < len(s):
                wrap_level = m.group(1)  # the message's level, unless a prefix inside names its own
                bare = s[len(wrap_level) + 1] == " "  # no logger name: uvicorn's, pip's
                s = s[m.end():]
                c = s[:1]
        if c.isalpha() and " | " in s[:64]:
            m = COMPOSE_RE.match(s)
            if m:
                service = m.group(1)  # the innermost service prefix names the service
                depth += 1
                s = s[m.end():]
                c = s[:1]
        if c.isupper() and s[3:4] == " " and s[:3] in _MONTHS:
            m = _SYSLOG_RE.match(s)
            if m:
                if stamp is None:
                    stamp = Stamp(None, _MONTHS[m.group(1)], int(m.group(2)), m.group(3))
                ident = m.group(5)
                s = s[m.end():]
                c = s[:1]
        if c.isdigit() and s[4:5] == "-" and not _PYLOG_RE.match(s):
            m = _ISO_RE.match(s)
            if m:
                if stamp is None:
                    stamp = Stamp(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5) or "")
                if m.group(7) or m.group(9):
                    ident = m.group(7) or m.group(9)
                s = s[m.end():]
                c = s[:1]
                lm = _TGI_LEVEL_RE.match(s) if s[:1] == " " or s[:1].isupper() else None
                if lm:
                    level = lm.group(1)
                    prefixed = True
                    flavor = "tgi"
                    s = s[lm.end():]
                    c = s[:1]
                    break
        if s is before or not s:
            break
    wrap_end = 0 if s is text else len(text) - len(s)
    # --- process / rank prefixes -----------------------------------------------------------
    if c == "[" and s.startswith("[rank"):
        m = _RANK_RE.match(s)
        if m:
            rank = "rank" + m.group(1)
            s = s[m.end():]  # torch c10d's own "[E130 18:11:34.707542570 File.cpp:143] " may follow
            c = s[:1]
    for _ in (1, 2):  # Ray's prefix, then the engine's own process prefix
        if c != "(":
            break
        m = _PROC_RE.match(s)
        if m is None:
            break
        proc = name = m.group(1) or f"pid{m.group(2)}"  # the innermost names the process
        if name.startswith(_WORKER_PROCS) or name.startswith("EngineCore"):
            rank = _vllm_rank(name, m.group(2))
        s = s[m.end():]
        c = s[:1]
    # --- the engine's own prefix -------------------------------------------------------------
    m = None
    if c == "[":
        m = _SGLANG_RE.match(s)
        if m:
            year, month, day, hms, ranks, level = m.groups()
            if stamp is None:
                stamp = Stamp(int(year), int(month), int(day), hms)
            if ranks:
                rank = ranks.strip()
            flavor = "sglang"
        elif s.startswith("[TensorRT-LLM]"):
            m = _TRT_CPP_RE.match(s)
            if m:
                if m.group(1) is not None:
                    rank = "rank" + m.group(1)
                level = m.group(2)
                flavor = "trtllm"
        elif s[1:2] in "IWEF":
            m = _C10D_RE.match(s)
            if m:
                if stamp is None and m.group(2) is not None:
                    stamp = Stamp(None, int(m.group(2)), int(m.group(3)), m.group(4))
                level = m.group(1)
                flavor = "glog"
        else:
            m = _TRT_RE.match(s)
            if m:
                if stamp is None:
                    stamp = Stamp(int(m.group(3)), int(m.group(1)), int(m.group(2)), m.group(4))
                if m.group(5) is not None:
                    rank = "rank" + m.group(5)
                level = m.group(6)
                flavor = "trtllm"
                rest = s[m.end():]
                if rest.startswith("[TensorRT-LLM]"):  # the C++ logger after the Python one's time
                    m2 = _TRT_CPP_RE.match(rest)
                    if m2:
                        s = rest
                        m = m2
                        if m2.group(1) is not None:
                            rank = "rank" + m2.group(1)
                        level = m2.group(2)
    elif c.isupper():
        if s[1:2].isupper():
            m = _VLLM_RE.match(s)
            if m:
                level, year, month, day, hms = m.groups()
                if stamp is None:  # NIM prints the year too
                    stamp = Stamp(int(year) if year else None, int(month), int(day), hms)
                flavor = "vllm"
        elif c in "IWEF" and s[1:2].isdigit():
            m = _GLOG_RE.match(s)
            if m:
                if stamp is None:
                    stamp = Stamp(None, int(m.group(2)), int(m.group(3)), m.group(4))
                level = m.group(1)
                flavor = "glog"
    elif c.isdigit():
        if s[4:5] == "-":
            m = _PYLOG_RE.match(s)
            if m:
                if stamp is None:
                    stamp = Stamp(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4))
                level = m.group(5)
                flavor = "pylog"
        elif "." in s[:7]:
            m = _LLAMA_RE.match(s)
            if m:
                level = m.group(1)
                flavor = "llamacpp"
    elif c == "t" and s.startswith("time="):
        m = _LOGFMT_RE.match(s)
        if m:
            if stamp is None:
                stamp = Stamp(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4))
            level = m.group(5)
            flavor = "logfmt"
    if m:
        s = s[m.end():]
        prefixed = True
    elif proc is not None:
        prefixed = bool(s) and not s[0].isspace()
    elif wrap_level is not None:
        level, prefixed = wrap_level, True
        if bare:
            flavor = "bare"  # a level word alone (uvicorn, pip): no logger whose exc_info a traceback is
    return Line(lineno, text, s, stamp, rank, proc, ident, level, prefixed, flavor, grep_n, service, wrap_end,
                depth)
