"""Where the Markdown report (:mod:`tui.report`) gets its data: a watcher (the dashboard's ``c``,
the MCP ``report`` tool), one look at a host (``upwatch report HOST``), or a saved log (``upwatch
replay LOG --markdown``).

``upwatch report`` exits as ``upwatch status`` does: 0 the host answered and its unit and journal
were read, 4 it could not be reached, gave no answer, or its unit or journal cannot be read (one
line on stderr says why; the report is printed all the same, saying what could not be read).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
import time
from dataclasses import replace
from collections.abc import Callable, Iterator
from typing import IO

from probes.data.reading import Reading
from probes.data.state import HostState, Knowledge, LogEntry, PhaseSpan
from probes.fold.snapshot import iso_to_epoch
from probes.fold.verdict import verdict_for
from probes.hosttext import one_line
from probes.logs.journal_json import RecordError, is_journal_json, parse_record
from probes.logs.logline import parse as parse_line
from probes.logs.timeline import Mark, resolve
from probes.sources.nvml import NvmlSource
from probes.sources.logfile import LogReadError, as_utf8, iter_lines
from probes.spec import HostSpec
from probes.transport.runner import Runner
from probes.watch.watcher import HostWatcher
from tui.config import Config
from tui.replay import found_start
from tui.report import CONTEXT_LINES, UTC_TIMES, LogTimes, markdown_report
from tui.look import look_once
from tui.status import EXIT_OK, EXIT_UNREACHABLE, not_seen, quiet_stdout


def watcher_report(w: HostWatcher, now: float, source: str = "", made_at: float | None = None) -> str:
    """The Markdown report of a watched host, judged at ``now`` (epoch seconds on the watcher's
    clock), with the log entries the watcher still keeps around its decisive line; stamped with
    ``made_at`` (epoch seconds; default: the real wall clock now)."""
    s = w.state(now)
    return markdown_report(s, context_of(w, s), now=now, made_at=time.time() if made_at is None else made_at,
                           source=source)


def context_of(w: HostWatcher, s: HostState) -> list[LogEntry]:
    """The watcher's kept entries from :data:`~tui.report.CONTEXT_LINES` before the decisive (or
    suspect) line up to it; [] without one."""
    line = s.error or s.suspect
    if line is None:
        return []
    return [e for e in w.entries_after(max(0, line.line - CONTEXT_LINES - 1)) if e.seq <= line.line]


def run_report(config: Config, *, timeout_s: float, out: IO[str], err: IO[str] | None = None,
               runner_factory: Callable[[HostSpec], Runner] | None = None,
               gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None) -> int:
    """``upwatch report HOST``: one look at the one host of ``config`` (as ``upwatch status``:
    :func:`tui.look.look_once`), then its Markdown report on ``out``. Returns 0, or 4 (with one
    line on ``err``, default stderr, saying why) when :func:`tui.status.not_seen` finds the host
    unreached or its unit or journal unread."""
    err = err or sys.stderr
    def take(w: HostWatcher, answered: bool) -> tuple[HostSpec, HostState, str, bool]:
        now = w.clock.now()
        return w.spec, w.state(now), watcher_report(w, now, f"one look by upwatch report over {w.spec.target}"), answered

    results = asyncio.run(look_once(config, timeout_s, take, runner_factory=runner_factory,
                                    gpu_source_factory=gpu_source_factory))
    code = EXIT_OK
    try:
        for *_, text, _answered in results:
            out.write(text)
        out.flush()
    except BrokenPipeError:
        quiet_stdout()
    for spec, s, _text, answered in results:
        why = not_seen(s, answered, timeout_s)
        if why is not None:
            print(f"upwatch report: {one_line(spec.name)}: {one_line(why)} (exit 4)", file=err)
            code = EXIT_UNREACHABLE
    err.flush()
    return code


# --- a saved log --------------------------------------------------------------------------------

def replay_report(path: str, reading: Reading, *, name: str, unit: str | None, now: float | None = None) -> str:
    """``upwatch replay LOG --markdown``: the report of a saved log that has been read into
    ``reading`` (:func:`probes.sources.logfile.read_path`), with the lines before its decisive line
    read again from ``path`` (a regular file; see :func:`spooled`), each with the time its prefix
    gives (as the reader reads it). The times are UTC when the log says so (a journal, a ``Z`` or
    an offset on every time); else they are the log's own clock, and the report says so.

    Args:
        path: the log file. reading: what the reader made of it. name: how to name the log (its
            path as given). unit: the unit its entries were kept for (journal input), or None.
        now: the report's "so far" time, on the log's clock (default: the log's last phase time,
            else the wall clock).
    """
    found = found_start(reading)
    line = reading.error or reading.suspect
    around = list(_lines_around(path, line.line)) if line is not None else []
    phase_times = [m.time for m in reading.phases if m.time is not None] if found else []
    times = log_times(phase_times or [t for _, t in around if t is not None])
    s = reading_state(reading, name=name, unit=unit, times=times)
    entries = [e if t is None else e._replace(time=log_epoch(t, times)) for e, t in around]
    if now is None:
        began = [sp.began for sp in s.phases if sp.began is not None]
        now = max(began) if began else time.time()
    what = "" if found else " (no server start found in it: is it the right file?)"
    return markdown_report(s, entries, now=now, made_at=time.time(), times=times,
                           source=f"saved log {name}{what}, read by upwatch replay")


# The end of a time that names its zone: ``Z``, ``+02:00``, ``-0500``.
_ZONE_RE = re.compile(r"(Z|[+-]\d\d:?\d\d)$")
#: The year a date without one is read in (a leap year, as the reader's: 29 February exists).
STAND_IN_YEAR = 2000


def log_times(texts: list[str]) -> LogTimes:
    """What a saved log's times are, from the reader's ISO texts of them
    (:attr:`~probes.data.reading.PhaseMark.time`: ``2025-05-02T16:13:35``, ``--11-05T03:21:41``,
    ``2024-06-17T13:18:04Z``): UTC only when every one names its zone; a year when none lacks one.
    No times at all: UTC (nothing is shown in them)."""
    return LogTimes(zone=all(_ZONE_RE.search(t) for t in texts), year=not any(t.startswith("--") for t in texts))


def log_epoch(text: str, times: LogTimes) -> float | None:
    """A time the reader read from a log (its ISO text) as the report's seconds: the instant when
    ``times.zone``; else the clock face as if it were UTC, its zone (when one line gave it) left
    out; :data:`STAND_IN_YEAR` for a date with no year. None for a date that does not exist."""
    if text.startswith("--"):
        text = f"{STAND_IN_YEAR}{text[1:]}"  # --11-05T03:21:41 -> 2000-11-05T03:21:41
    return iso_to_epoch(text if times.zone else _ZONE_RE.sub("", text))


def reading_state(reading: Reading, *, name: str, unit: str | None, times: LogTimes = UTC_TIMES) -> HostState:
    """A saved log's :class:`~probes.data.reading.Reading` as the :class:`HostState` a report is
    made of: what the log says (engine, state, phases, decisive line, restarts), with only the
    journal read: the unit's state, GPUs and health were never looked at (their knowledge says
    ``never``, so the report says so). Phase times are read as ``times`` says (:func:`log_epoch`).
    The verdict is judged at the log's last phase time."""
    found = found_start(reading)  # else the reader's "a start not yet begun": none, in a log that ended
    spans = [PhaseSpan(m.phase, None if m.time is None else log_epoch(m.time, times), m.duration_s, m.text)
             for m in reading.phases] if found else []
    last = next((sp.began for sp in reversed(spans) if sp.began is not None), None)
    s = HostState(
        host=name, unit=unit or "(a saved log)", engine=reading.engine,
        state=reading.state if found else "waiting", phase=reading.phase, phases=tuple(spans),
        progress=reading.progress, start_began=spans[0].began if spans else None,
        phase_began=next((sp.began for sp in spans if sp.phase == reading.phase), None),
        restart_counter=reading.restart_counter, restart_loop=reading.restart_loop, starts=reading.starts,
        error=reading.error, suspect=reading.suspect, cause=reading.cause, hint=reading.hint,
        failed_at=(log_epoch(reading.error.time, times)
                   if reading.error is not None and reading.error.time is not None else None),
        last_line=reading.last_line, log_count=reading.lines, failed_starts=reading.failed_starts,
        gave_up=reading.gave_up, model=reading.model, args_hash=reading.args_hash, port=reading.port,
        knowledge=(Knowledge("unit", "never"), Knowledge("journal", "read", last),
                   Knowledge("gpu", "never"), Knowledge("health", "never")),
    )
    return replace(s, verdict=verdict_for(s, last if last is not None else 0.0))


def _lines_around(path: str, seq: int) -> Iterator[tuple[LogEntry, str | None]]:
    """The physical lines ``seq - CONTEXT_LINES`` .. ``seq`` of a saved log, numbered as the reader
    numbers them (a journal's line is one record: its message and time), each with the time its
    text's prefix gives as the reader writes it (``--11-05T03:21:41``; None for a journal record,
    whose entry has its time, and for a line with none)."""
    first = seq - CONTEXT_LINES
    try:
        with open(path, "rb") as f:
            if f.read(len(JOURNAL_MAGIC)) == JOURNAL_MAGIC:
                return  # a binary journal file: read through journalctl; its lines are not kept
            f.seek(0)
            journal: bool | None = None
            for lineno, raw in enumerate(iter_lines(as_utf8(f)), 1):  # UTF-16 as the reader read it
                if journal is None and raw.strip():
                    journal = is_journal_json(raw)
                if lineno < first:
                    continue
                if lineno > seq:
                    return
                yield _entry(lineno, raw, bool(journal))
    except OSError:
        return  # read once already; if it went since, the report says the lines are not kept


def _entry(lineno: int, raw: bytes, journal: bool) -> tuple[LogEntry, str | None]:
    if journal and raw.strip() and not raw.startswith(b"-- "):
        try:
            rec = parse_record(raw)
        except RecordError:
            pass
        else:
            t = rec.realtime_us / 1e6 if rec.realtime_us is not None else None
            return LogEntry(lineno, t, rec.text, rec.systemd), None
    text = raw.decode("utf-8", "replace")  # the report sanitises it
    stamp = parse_line(lineno, one_line(text)).stamp  # the prefix of the line as shown (its last frame)
    resolved = resolve(Mark("", lineno, "", stamp, None)) if stamp is not None else None
    return LogEntry(lineno, None, text), resolved[0] if resolved is not None else None


#: The most bytes of standard input kept for ``replay - --markdown`` (:func:`spooled`).
MAX_SPOOL = 512 * 1024 * 1024
#: The first bytes of a binary journal file.
JOURNAL_MAGIC = b"LPKSHHRH"


def spooled(path: str, read: Callable[[str], Reading]) -> tuple[str, Reading, Callable[[], None]]:
    """Read a log that may be standard input (``-``) so that it can be read twice: standard input
    is copied to a temporary file first (at most :data:`MAX_SPOOL` bytes).

    Returns:
        ``(path to read again, read(that path), cleanup)``; call ``cleanup`` when done.

    Raises:
        LogReadError: standard input is closed, or longer than :data:`MAX_SPOOL` bytes; and
            whatever ``read`` raises.
    """
    if path != "-":
        return path, read(path), lambda: None
    if sys.stdin is None:
        raise LogReadError("standard input is closed: give a PATH, or pipe the log in")
    fd, tmp = tempfile.mkstemp(prefix="upwatch-replay-", suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            src = sys.stdin.buffer
            size = 0
            while block := src.read(1024 * 1024):
                size += len(block)
                if size > MAX_SPOOL:
                    raise LogReadError(f"standard input is over {MAX_SPOOL >> 20} MiB: save it to a file "
                                       "and give its PATH")
                f.write(block)
        return tmp, read(tmp), lambda: os.unlink(tmp)
    except BaseException:
        os.unlink(tmp)
        raise
