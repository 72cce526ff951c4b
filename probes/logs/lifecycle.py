"""The starts of one log: when a new one begins, what systemd says of them, and the Reading.

A new start begins at systemd's ``Started`` line after the server wrote anything or the process
ended, at a second ``Main process exited``, at a new journal invocation id, and (the reader's
calls) at a banner printed once per launch or a server line after the process ended. A closed
start leaves behind how many starts there were, the streak of failed ones since the last that
was ready (a restart loop), and its failure; systemd's ``restart counter is at N`` and its
giving up (the start limit) count too. :meth:`StartHistory.reading` folds all of it with the
current start into a :class:`~probes.data.reading.Reading`.
"""

from __future__ import annotations

import re

from probes.data.reading import ErrorLine, FailedStart, Progress, Reading, Suspect
from probes.data.vocab import PHASE_INDEX, PHASES
from probes.logs.failures import fail, fail_point, to_failed, unrecovered
from probes.logs.logline import Line
from probes.logs.starts import Failure, Life, Start
from probes.logs.timeline import Timeline, resolve

_READY = PHASE_INDEX["ready"]
_STARTING = PHASE_INDEX["starting"]
#: systemd's ``Failed with result '...'`` values, as cause ids.
_RESULT_CAUSE = {
    "exit-code": "exit_code", "signal": "signal", "core-dump": "core_dump", "oom-kill": "host_oom_killed",
    "start-limit-hit": "start_limit", "timeout": "signal", "watchdog": "signal", "resources": "exit_code",
    "protocol": "exit_code",
}
_EXIT_CAUSE = {"exited": "exit_code", "killed": "signal", "dumped": "core_dump"}
#: What systemd's Starting/Started/Stopping/Stopped line names when it is no server's unit (a whole
#: system's journal): a login session, a user manager, a unit of a type that is no service.
_OTHER_UNIT_RE = re.compile(
    r"(?:Session \d+ of [Uu]ser |User Manager for UID |User Runtime Directory |User Slice of )"
    r"|[\w@.\\-]+\.(?:scope|timer|mount|automount|socket|slice|target|path|device|swap)\b")
_UNIT_NAME_RE = re.compile(r"[\w@.\\-]+\.service\b")


def failed_start(start: Start, phase_i: int | None = None) -> FailedStart:
    """A failed start as a reading lists it: its cause, the phase it failed in (``phase_i``, or
    its own fail phase) and when it began."""
    p = start.fail_phase if phase_i is None else phase_i
    phase = PHASES[p] if p >= 0 else "starting"
    first = resolve(start.first) if start.first is not None else None
    return FailedStart(start.error.cause if start.error else None, phase, first[0] if first else None)


class StartHistory:
    """The current start (``current``) and what the closed ones left: ``closed`` (how many had
    evidence), ``streak`` (failed in a row since the last ready one) and their ``streak_starts``,
    ``last_failure``, systemd's ``restart_counter`` and whether it ``gave_up``, and whether any
    start was ever ready. ``timeline`` makes the marks."""

    __slots__ = ("timeline", "current", "closed", "streak", "streak_starts", "last_failure",
                 "restart_counter", "gave_up", "ever_ready", "unit")

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.current = Start()
        self.closed = 0                 # closed starts that had evidence
        self.streak = 0                 # failed starts since the last ready, closed starts only
        self.streak_starts: list[FailedStart] = []  # ... and what each died of
        self.last_failure: Failure | None = None
        self.restart_counter: int | None = None
        self.gave_up = False
        self.ever_ready = False
        #: The unit the log is about, when known: systemd's lines naming another unit are not its.
        self.unit: str | None = None

    def other_unit(self, m: re.Match[str]) -> bool:
        """Whether a Starting/Started/Stopping/Stopped line names another unit than the log's: a
        session, a user manager, a timer or socket (:data:`_OTHER_UNIT_RE`), or a service other
        than :attr:`unit` when that is known."""
        what = m.groupdict().get("what")
        if not what:
            return False
        if _OTHER_UNIT_RE.match(what):
            return True
        named = _UNIT_NAME_RE.match(what)
        return self.unit is not None and named is not None and named.group(0) != self.unit

    def note_invocation(self, invocation: str) -> None:
        """A journal record's invocation id: a new one is a new start (the first one seen is the
        current start's, unless that start has already ended)."""
        start = self.current
        if start.invocation is None:
            if start.evidence and start.ended:
                self.new_start()
            self.current.invocation = invocation
        elif invocation != start.invocation:
            self.new_start()
            self.current.invocation = invocation

    def new_start(self) -> Start:
        """Close the current start and begin a new one (returned)."""
        old = self.current
        if self.gave_up and old.evidence:
            # A start after systemd gave up was asked for by hand (reset-failed, start): the loop
            # before it is history, and "gave up" is no longer true.
            self.gave_up = False
            self.streak = 0
            self.streak_starts = []
        if not old.failed and not old.ready and unrecovered(old):
            to_failed(old)  # a new process began: the old one did not survive its suspect
        if old.evidence:
            self.closed += 1
            if old.served:
                self.streak = 1 if old.failed else 0  # a crash after serving starts a new count
                self.streak_starts = [failed_start(old)] if old.failed else []
            elif old.failed:
                self.streak += 1
                self.streak_starts.append(failed_start(old))
        if old.failed and old.error is not None:
            self.last_failure = old.error
        self.timeline.forget_waiting()  # only the current start's marks are ever shown
        self.current = Start()
        return self.current

    def systemd(self, kind: str, m: re.Match[str], ln: Line, engine: str | None) -> None:
        """A line systemd wrote about the unit, of a lifecycle rule's ``kind`` (``started``,
        ``exited``, ``result``, ``restart``, ``job_failed``, ``gave_up``, ``stopping``,
        ``stopped``, ``deactivated``) with the rule's match ``m`` (``engine``: for hints). The first
        timestamped line that ends a start is its :attr:`~probes.logs.starts.Start.end`."""
        self._lifecycle(kind, m, ln, engine)
        cur = self.current
        if cur.ended and cur.end is None and ln.stamp is not None:
            cur.end = self.timeline.mark("", ln)

    def _lifecycle(self, kind: str, m: re.Match[str], ln: Line, engine: str | None) -> None:
        """:meth:`systemd`'s change of the starts for one line."""
        start = self.current
        timeline = self.timeline
        if kind in ("started", "stopping", "stopped") and self.other_unit(m):
            return  # a whole system's journal: another unit's line
        if kind == "started":
            starting = m.group(0).startswith("Starting")
            if not starting and start.job_pending and not start.ended:
                # "Starting X..." began this start; "Started X." says its start job is done, which
                # ExecStartPost= or Type=notify delay until the server is up: the same start.
                start.job_pending = False
                return
            if start.output or start.ended:
                start = self.new_start()
            if start.life is Life.EMPTY:
                start.life = Life.LOADING
                start.first = timeline.mark("starting", ln)
                start.launched = True
            start.job_pending = starting
            return
        if kind == "exited":
            main = m.group(0)[:1] in "Mm"
            if main and start.exited:
                # A second "Main process exited" with no "Started" between (a grep of the journal):
                # another start ended.
                start = self.new_start()
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
            fail(start, _EXIT_CAUSE.get(code, "exit_code"), 1, ln, None, engine, timeline)
        elif kind == "result":
            start.ended = True
            result = m.groupdict().get("result") or "exit-code"
            cause = _RESULT_CAUSE.get(result)
            if cause is not None and not (start.stopping and cause == "signal"):
                fail(start, cause, 1 if cause != "host_oom_killed" else 4, ln, None, engine, timeline)
        elif kind == "restart":
            start.ended = True
            n = m.groupdict().get("n")
            if n is not None:
                self.restart_counter = int(n)
        elif kind == "job_failed":
            if start.evidence:
                start.ended = True
                fail(start, "exit_code", 1, ln, None, engine, timeline)
        elif kind == "gave_up":
            self.gave_up = True
            if start.evidence:
                fail(start, "start_limit", 1, ln, None, engine, timeline)
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

    def reading(self, engine: str | None, lines: int, bad_lines: int, last_line: str, ended: bool) -> Reading:
        """What is known so far about the current start (pure: changes nothing).

        Args:
            engine: the engine id, None while unknown; lines / bad_lines: input lines read, and
                those that could not be; last_line: the last meaningful line.
            ended: the log has ended or the process is known to be gone: a loading start whose
                last error-level suspect nothing recovered has then failed.
        """
        cur = self.current
        starts = self.closed + (1 if cur.evidence else 0)
        failed, fail_phase, fail_mark = cur.failed, cur.fail_phase, None
        if not failed and ended and cur.life is not Life.STOPPED and unrecovered(cur):
            failed = True
            fail_phase, fail_mark = fail_point(cur)
        streak = self.streak
        if cur.served:
            streak = 1 if failed else 0
        elif failed:
            streak += 1
            # Only this start is in the log, but "restart counter is at N" says systemd restarted it
            # before: the earlier failures happened where the log does not reach.
            if self.closed == 0 and (self.restart_counter or 0) >= 2 and not self.ever_ready:
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
        first = cur.first
        if cur.launched and first is not None and marks and first.line < marks[0].line:
            # The process began at systemd's "Started": its imports (10-30 s for vLLM) come before
            # its first line and are Starting, which the engine's banner after them would begin
            # (TensorRT-LLM's download before its banner: Starting, Download, Starting again).
            if marks[0].phase == "starting":
                marks[0] = first
            else:
                marks.insert(0, first)
        if not marks:
            marks = [first] if first is not None else []
            phase_i = _STARTING
        phase = PHASES[phase_i] if phase_i >= 0 else "starting"
        # A start systemd saw end: its last phase ran to that line, not to the log's last one.
        end = cur.end if cur.ended and cur.end is not None and (not marks or cur.end.line >= marks[-1].line) else None
        phases = self.timeline.phase_marks(marks, end)
        progress = None
        if cur.last_bar_phase is not None:
            same = [b for b in cur.bars.values() if b[0] == cur.last_bar_phase]
            ph, done, total = min(same, key=lambda b: (b[1] / b[2]) if b[2] else 0.0)
            progress = Progress(ph, done, total)
        err = cur.error if failed and cur.error is not None else self.last_failure
        error = None
        if err is not None:
            at = resolve(err.at) if err.at is not None else None
            error = ErrorLine(err.line, err.text, err.cause, err.hint, at[0] if at is not None else None)
        suspect = None
        if not failed and cur.error is not None and cur.suspects:
            s = cur.error
            suspect = ErrorLine(s.line, s.text, s.cause, s.hint)
        hint = ""
        if failed and cur.error is not None:
            hint = cur.error.hint
            if self.gave_up and cur.error.cause != "start_limit":
                hint = f"{hint} systemd has stopped restarting it (start limit): " \
                       f"`systemctl reset-failed` the unit after the fix."
        failed_now = [failed_start(cur, fail_phase)] if failed else []
        began = resolve(cur.first) if cur.first is not None else None
        return Reading(
            engine=engine or "unknown",
            state=state,
            phase=phase,
            phases=phases,
            progress=progress,
            error=error,
            cause=cur.error.cause if failed and cur.error else None,
            hint=hint,
            starts=starts,
            restart_loop=streak >= 2,
            restart_counter=self.restart_counter,
            gave_up=self.gave_up,
            lines=lines,
            bad_lines=bad_lines,
            last_line=last_line,
            began=began[0] if began else None,
            failed_starts=tuple(([] if cur.served else self.streak_starts) + failed_now),
            model=cur.model,
            args_hash=cur.args_hash,
            port=cur.port,
            suspect=suspect,
            suspects=tuple(Suspect(s.line, s.text, s.cause, s.low) for s in cur.suspects),
        )
