"""A Markdown report of one host, to paste into a chat, an issue or a pull request.

:func:`markdown_report` builds it from a :class:`~probes.data.state.HostState` and the log entries
the caller has (a watcher's, or a saved log's): the host, unit and engine; the state and phase with
the phase timeline (start, duration); the verdict with its evidence; the decisive line with the
log lines before it in a fenced block; the unit's state (``NRestarts``, last exit); the GPUs;
readiness; what upwatch could not read (:attr:`HostState.knowledge`: nothing is reported as fine
that was not seen); and the upwatch version. The dashboard's ``c`` key, ``upwatch report HOST``,
``upwatch replay LOG --markdown`` and the MCP ``report`` tool all print this one text.

Pure: no I/O, no clock (``now`` and ``made_at`` are given). Every piece of host text goes through
the one sanitiser (:func:`probes.hosttext.one_line`) and is then made inert for Markdown: in prose,
every character Markdown could read as syntax is backslash-escaped (:func:`md_text`); host values
stand in code spans (:func:`md_code`); log lines stand in a fenced block whose fence is longer than
any run of backticks in them (:func:`fence_for`), so a line cannot end the block. Times are UTC, so
a report reads the same wherever it is pasted (a saved text log's, when it gives no zone or no
year, are its own clock, and the report says so once: :class:`LogTimes`); the time it was made is
the real wall clock's (``made_at``), also when the data ran on another clock (the demo's).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from probes.data.events import CONNECTION_KINDS
from probes.data.state import HostState, LogEntry
from probes.fold.headline import shown_hint
from probes.data.durations import fmt_span
from probes.fold.verdict import cause_words
from probes.hosttext import one_line
from probes.logs.engines import ENGINES
from tui import __version__
from widgets.fmt import PHASE_LABELS, RUNG_WORDS
from widgets.host_rows import condition

#: How many log lines before the decisive line the report shows.
CONTEXT_LINES = 10
#: The longest context line (one before the decisive line) shown in the fenced block, in characters:
#: a longer one ends with ``…`` and the report names it under the block. The decisive line itself is
#: always shown whole.
LINE_CHARS = 500
#: The longest piece of host text shown in prose, in characters.
TEXT_CHARS = 300

# Characters Markdown (CommonMark and GitHub's extensions) reads as syntax inside a line: escapes,
# code spans, emphasis, links and images, HTML and autolinks, entities, table cells, strikethrough,
# math and mentions. Each is backslash-escaped in prose (CommonMark allows that for every ASCII
# punctuation character). The ones that act only at the start of a line (``#``, ``-``, ``+``,
# ``1.``, ``>``) never begin one: every line of the report begins with the report's own text.
_MD_SPECIAL_RE = re.compile(r"([\\`*_\[\]<>&|~$@])")
_BACKTICKS_RE = re.compile(r"`+")

#: Conditions in which the state is not seen now (:func:`widgets.host_rows.condition`): the report
#: says so first, as the card does, not the last known state alone.
_NOT_SEEN = ("unreachable", "ssh refused", "cannot see", "stale")

_PROBE_WORDS = {"unit": "unit state (systemctl show)", "journal": "journal (the unit's log)",
                "gpu": "GPUs (nvidia-smi)", "health": "health (HTTP /health)"}


def md_text(text: object, *, max_chars: int = TEXT_CHARS) -> str:
    """Host text (or a sentence holding some) as inert Markdown prose: sanitised to one line, then
    every character Markdown could read as syntax backslash-escaped (links, emphasis, HTML, code
    spans, headings, tables, autolinks all stay text). Never raises."""
    return _MD_SPECIAL_RE.sub(r"\\\1", one_line(text, max_chars=max_chars))


def md_code(text: object, *, max_chars: int = TEXT_CHARS) -> str:
    """Host text as an inline code span: sanitised to one line, delimited by a run of backticks
    longer than any inside it (padded with a space when it begins or ends with one), so nothing in
    it is read as Markdown; ``|`` is escaped so the span may also stand in a table cell."""
    s = one_line(text, max_chars=max_chars) or " "
    ticks = "`" * (_longest_backticks(s) + 1)
    pad = " " if s[0] == "`" or s[-1] == "`" or (s[0] == " " and s[-1] == " " and s.strip()) else ""
    return f"{ticks}{pad}{s.replace('|', chr(92) + '|')}{pad}{ticks}"


def fence_for(lines: Sequence[str]) -> str:
    """The backtick fence for a code block holding ``lines``: three backticks, or one more than the
    longest run of backticks in them (CommonMark: a fence closes only with at least as many)."""
    return "`" * max(3, max((_longest_backticks(line) for line in lines), default=0) + 1)


def _longest_backticks(text: str) -> int:
    return max((len(m.group()) for m in _BACKTICKS_RE.finditer(text)), default=0)


def utc(t: float | None) -> str:
    """Epoch seconds as ``2025-11-24 16:00:05 UTC``; ``?`` when unknown."""
    if t is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t)) if t is not None else "--:--:--"


@dataclass(frozen=True, slots=True)
class LogTimes:
    """How the report writes the times of the log (the phases' starts, the fenced lines' times).

    A watcher's times are real instants (the journal's ``__REALTIME_TIMESTAMP``), written in UTC. A
    saved text log's are what its line prefixes say, which may give no time zone (SGLang's
    ``[2025-05-02 16:13:35]``: the host's local time) or no year (vLLM's ``INFO 11-05 03:21:41``):
    then the seconds are the log's own clock face read as if it were UTC (so the digits come back as
    written), with a stand-in year when the log gives none, and the report says so once.

    Attributes:
        zone: the times are real instants (UTC); False: the log's own clock, zone unknown.
        year: the dates have their year; False: month and day only are shown.
    """

    zone: bool = True
    year: bool = True

    def stamp(self, t: float) -> str:
        """``2025-05-02 16:13:35``, or ``Nov 05 03:21:41`` without the year (UTC digits of ``t``)."""
        return time.strftime("%Y-%m-%d %H:%M:%S" if self.year else "%b %d %H:%M:%S", time.gmtime(t))

    def clock(self, t: float) -> str:
        """``03:21:41``."""
        return time.strftime("%H:%M:%S", time.gmtime(t))

    @property
    def column(self) -> str:
        """What the times are, for a column heading: ``UTC``, ``the log's clock``."""
        return "UTC" if self.zone else "the log's clock"

    def note(self) -> str:
        """The sentence said once when the times are not plain UTC dates, else ""."""
        missing = [w for w, known in (("no time zone (they are the host's local time, which may not be UTC)",
                                       self.zone), ("no year", self.year)) if not known]
        if not missing:
            return ""
        what = "Times are as the log wrote them: it gives " if not self.zone else "The log gives "
        return what + " and ".join(missing) + "."


#: A watcher's times: real instants, in UTC.
UTC_TIMES = LogTimes()


def context_entries(s: HostState, entries: Sequence[LogEntry], before: int = CONTEXT_LINES) -> list[LogEntry]:
    """The entries the report shows around the decisive line: the ``before`` entries before it and
    the line itself (by :attr:`LogEntry.seq`), oldest first; [] when there is no decisive line or
    none of those entries is given."""
    line = _decisive(s)
    if line is None:
        return []
    seq = line[0]
    return [e for e in entries if seq - before <= e.seq <= seq]


def _decisive(s: HostState) -> tuple[int, str, str] | None:
    """``(seq, text, what)`` of the line the report centres on: the decisive error line, else the
    suspect (a line that looks like a failure, no proof yet), else None."""
    if s.error is not None:
        return s.error.line, s.error.text, "decisive line"
    if s.suspect is not None:
        return s.suspect.line, s.suspect.text, "suspect line (looks like a failure; the start has not ended)"
    return None


def markdown_report(s: HostState, entries: Sequence[LogEntry], *, now: float, made_at: float,
                    source: str = "", times: LogTimes = UTC_TIMES, version: str = __version__) -> str:
    """The report of one host in Markdown (GitHub-flavoured), ending with a newline.

    Args:
        s: the host's snapshot (its verdict as judged at ``now``).
        entries: log entries the caller has (any range; those of :func:`context_entries` are shown).
        now: epoch seconds on the host's clock (the watcher's clock: the demo's is sped up; a saved
            log's last time): the "so far" of the current phase's duration.
        made_at: epoch seconds, the real wall-clock time the report is made (shown under the
            title, whatever clock the data ran on).
        source: where the data came from, shown under the title before the time it was made
            (``copied from the upwatch dashboard``, ``saved log FILE``).
        times: what the times of the phases and of the log lines are (:class:`LogTimes`; a saved
            text log's may be its own clock, with no zone or year).
        version: the upwatch version shown at the end.

    Returns:
        The Markdown text. Only sanitised host text is in it, and none of it can act as Markdown.
    """
    out: list[str] = [f"## upwatch report: {md_text(s.host)}", ""]
    made = f"made {utc(made_at)}"
    out += [f"_{md_text(source) + '; ' if source else ''}{md_text(made)}_", ""]
    out += _summary(s)
    out += _timeline(s, now, times)
    out += _decisive_block(s, entries, times)
    out += _unseen(s)
    out += ["", f"upwatch {md_text(version)}"]
    return "\n".join(out) + "\n"


def _summary(s: HostState) -> list[str]:
    engine = ENGINES[s.engine].label if s.engine in ENGINES else "unknown (not named by the log yet)"
    phase = PHASE_LABELS.get(s.phase, s.phase)
    rows = [f"- **Host:** {md_code(s.host)}", f"- **Unit:** {md_code(s.unit)}", f"- **Engine:** {md_text(engine)}"]
    if s.model:
        rows.append(f"- **Model:** {md_code(s.model)}")
    state = s.state if s.state == "waiting" else f"{s.state}, phase {phase}"
    p = s.progress
    if p is not None and p.total and p.phase == s.phase and s.state == "loading":
        state += f" {p.done:g}/{p.total:g} ({p.fraction:.0%})"
    seen = condition(s)  # what the card and the row say first: a host upwatch cannot read is that
    if seen in _NOT_SEEN:
        state = seen if s.state == "waiting" else f"{seen}; the last known state: {state}"
    rows.append(f"- **State:** {md_text(state)}")
    rows += _verdict(s)
    if s.cause:
        rows.append(f"- **Cause:** {md_text(cause_words(s.cause))} ({md_code(s.cause)})")
    if hint := shown_hint(s):  # what the verdict above does not say already
        rows.append(f"- **Hint:** {md_text(hint)}")
    rows.append(f"- **Readiness:** {md_text(_readiness(s))}")
    rows.append(f"- **Unit state:** {_unit_words(s)}")
    rows += _gpus(s)
    return rows


def _verdict(s: HostState) -> list[str]:
    v = s.verdict
    if v is not None:
        rows = [f"- **Verdict ({md_text(v.level)}{', ' + md_text(v.kind) if v.kind else ''}):** {md_text(v.sentence)}"]
        rows += [f"  - {md_text(e)}" for e in v.evidence]
        return rows
    if s.state == "failed":
        return ["- **Verdict (error):** the start failed (the decisive line is below)."]
    unseen = [k.probe for k in s.knowledge if k.status != "read"]
    if unseen:
        return [f"- **Verdict (ok):** nothing wrong seen in what was read; not read: "
                f"{md_text(', '.join(unseen))} (below)"]
    return ["- **Verdict (ok):** nothing wrong seen."]


def _readiness(s: HostState) -> str:
    words = RUNG_WORDS.get(s.readiness, s.readiness)
    h = s.health
    text = f"{s.readiness} ({words})" if words != s.readiness else s.readiness
    if h is not None and (h.status is not None or h.detail):
        # the status, not the detail's latency: the report of one state reads the same every time
        text += f", last look {_clock(h.time)}: " + (f"HTTP {h.status}" if h.status is not None else h.detail)
    if s.health_stale:
        text += "; /health was answered by an earlier process"
    return text


def _unit_words(s: HostState) -> str:
    u = s.unit_state
    k = s.known("unit")
    if u is None:
        return f"not read ({md_text(_status_words(k.status, k.why))})"
    parts = [f"{u.active_state}/{u.sub_state}"]
    if u.load_state != "loaded":
        parts.append(f"LoadState {u.load_state}")
    if u.result:
        parts.append(f"result {u.result}")
    parts.append(f"NRestarts {u.n_restarts if u.n_restarts is not None else '?'}")
    parts.append(f"last exit: {_exit_words(u.exec_main_code, u.exec_main_status)}")
    if u.main_pid:
        parts.append(f"MainPID {u.main_pid}")
    if u.started_at is not None:
        parts.append(f"started {utc(u.started_at)}")
    text = md_text(", ".join(parts), max_chars=1000)
    if k.status == "failing":
        text += f" (read {_clock(u.time)}; failing since {_clock(k.since)})"
    return text


def _exit_words(code: int | None, status: int | None) -> str:
    """systemd's ``ExecMainCode``/``ExecMainStatus`` in words: ``exited, status 1``, ``killed by
    signal 9``, ``none yet``."""
    if code is None or code == 0:
        return "none yet" if not status else f"status {status}"
    how = {1: "exited, status", 2: "killed by signal", 3: "dumped core, signal"}.get(code, f"code {code}, status")
    return f"{how} {status if status is not None else '?'}"


def _gpus(s: HostState) -> list[str]:
    k = s.known("gpu")
    if s.gpus is None or not s.gpus.gpus:
        why = _status_words(k.status, k.why) if k.status != "read" else "no GPU listed"
        return [f"- **GPUs:** none read ({md_text(why)})"]
    head = "- **GPUs:**" + (f" (last read {_clock(s.gpus.time)}; failing since "
                            f"{_clock(k.since)})" if k.status == "failing" else "")
    rows = [head]
    for g in s.gpus.gpus:
        used = "?" if g.mem_used_mib is None else str(g.mem_used_mib)
        total = "?" if g.mem_total_mib is None else str(g.mem_total_mib)
        util = "?" if g.util_pct is None else f"{g.util_pct}%"
        name = f" {md_code(g.name)}" if g.name else ""
        rows.append(f"  - GPU {g.index}{name}: {used}/{total} MiB, util {util}")
    return rows


def _timeline(s: HostState, now: float, times: LogTimes) -> list[str]:
    out = ["", "### Phase timeline", ""]
    if not s.phases:
        return out + ["No phase of a start was read from the log."]
    if times.note():
        out += [times.note(), ""]
    out += [f"| Phase | Start ({times.column}) | Duration |" if any(sp.began is not None for sp in s.phases)
            else "| Phase | Start | Duration |", "|---|---|---|"]
    last = len(s.phases) - 1
    untimed: list[str] = []
    for i, sp in enumerate(s.phases):
        label = PHASE_LABELS.get(sp.phase, sp.phase)
        if sp.began is None:
            untimed.append(label)
        if sp.duration_s is not None:
            dur = fmt_span(sp.duration_s)
        elif i == last and sp.phase != "ready" and s.state == "loading" and sp.began is not None:
            dur = f"{fmt_span(now - sp.began)} so far"
        else:
            dur = ""  # the start's end, or a time missing at either end (said under the table)
        began = times.stamp(sp.began) if sp.began is not None else ""
        out.append(f"| {label} | {began} | {dur} |")
    if len(untimed) == len(s.phases):
        out += ["", "No phase has a start time or a duration: the log's lines carry no times."]
    elif untimed:
        out += ["", f"No start time for {_words_list(untimed)}: the log line that began "
                    f"{'it' if len(untimed) == 1 else 'each'} carries none (a duration needs the times at both ends)."]
    return out


def _words_list(words: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _decisive_block(s: HostState, entries: Sequence[LogEntry], times: LogTimes) -> list[str]:
    """The decisive (or suspect) line in a fenced block, whole (sanitised), after the log lines
    before it (each at most :data:`LINE_CHARS`; a sentence under the block names those shortened),
    each with its time when it has one."""
    line = _decisive(s)
    if line is None:
        return ["", "### Decisive line", "", "None: no line of this start looks like a failure."]
    seq, text, what = line
    when = ""
    if s.error is not None and s.failed_at is not None:
        when = f", {times.stamp(s.failed_at)}{' UTC' if times.zone else ''}"
    out = ["", f"### {what[0].upper()}{what[1:]} (log line {seq}{when})", ""]
    shown = context_entries(s, entries)
    if not shown:
        whole = one_line(text)
        fence = fence_for([whole])
        return out + [f"{fence}text", whole, fence, "",
                      "(the lines before it are not at hand: no longer kept, or not read again from a binary journal file)"]
    own = shown[-1] if shown[-1].seq == seq else LogEntry(seq, None, text)
    rows: list[tuple[float | None, str]] = []
    shortened: list[tuple[int, int]] = []  # (log line, its length) of the context lines cut
    for e in shown:
        if e.seq == seq:
            continue
        full = one_line(e.text)
        if len(full) > LINE_CHARS:
            shortened.append((e.seq, len(full)))
        rows.append((e.time, one_line(full, max_chars=LINE_CHARS)))
    rows.append((own.time, one_line(own.text)))
    timed = sum(t is not None for t, _ in rows)
    if timed:
        body = [f"{times.clock(t) if t is not None else '':<8}  {shown_text}" for t, shown_text in rows]
    else:
        body = [shown_text for _, shown_text in rows]
    fence = fence_for(body)
    before = len(rows) - 1
    about = (("times UTC" if times.zone else "times on the log's clock")
             + ("" if timed == len(rows) else "; a line with no time of its own shows none")
             if timed else "the lines carry no times")
    out.append(f"The {before} log line{'' if before == 1 else 's'} before it, then the line ({about}):")
    out.append("")
    out += [f"{fence}text", *body, fence]
    if shortened:
        cut = ", ".join(f"{n} ({length} characters)" for n, length in shortened)
        out += ["", f"Shortened to {LINE_CHARS} characters (ending in …): log line{'' if len(shortened) == 1 else 's'} "
                    f"{cut}. The decisive line is whole."]
    return out


def _status_words(status: str, why: str) -> str:
    if status == "never":
        return "never answered"
    if status == "failing":
        return f"failing: {why}" if why else "failing"
    return "read"


def _unseen(s: HostState) -> list[str]:
    out = ["", "### What upwatch could not read", ""]
    rows = []
    for k in s.knowledge:
        if k.status == "read":
            continue
        what = _PROBE_WORDS.get(k.probe, k.probe)
        if k.status == "never":
            rows.append(f"- {md_text(what)}: never answered")
        else:
            since = f" since {utc(k.since)}" if k.since is not None else ""
            why = f": {md_text(k.why)}" if k.why else ""
            reason = f" ({md_text(k.reason)})" if k.reason else ""
            rows.append(f"- {md_text(what)}: failing{md_text(since)}{why}{reason}")
    if s.stale_since is not None:
        conn = next((f for f in s.failures if f.kind in CONNECTION_KINDS), None)
        why = f": {md_text(conn.message)}" if conn is not None else ""
        rows.insert(0, f"- the host: not answering since {md_text(utc(s.stale_since))}{why}; "
                       "everything above is its last known state")
    if not s.knowledge:
        rows.append("- nothing was read from the host")
    return out + (rows or ["Nothing: the unit, the journal, the GPUs and health were all read."])
