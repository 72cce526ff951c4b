"""``upwatch wait HOST[/UNIT] [--restart] [--until ready|serving] [--timeout 30m]``: block until the
unit's current process is ready, for scripts.

Ready means all of: the current process (with ``--restart``: a start that began after the
restart, by the unit's ``ExecMainStartTimestamp``), the engine's ready line in the log, and
``/health`` OK answered by that process (not an earlier one: see the ``stale_health`` verdict). ``--until
serving`` also needs a one-token generation answered.

Exit status (:data:`tui.wait_rules.EXIT_CODES`): 0 ready, 1 the start failed (the decisive line and hint are
printed), 2 restart loop, 3 timeout, 4 unreachable, not allowed or cannot see (SSH; sudo missing
or refusing; no systemd; no journal access). Every exit but 0 says why on stderr (the verdict,
the decisive line and hint, or what was still missing at the timeout).
On a terminal one line is redrawn in place; otherwise one line is printed per change of phase,
progress step or readiness rung (stdout).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from probes.clock import WallClock
from probes.store.history import History
from probes.hosttext import one_line
from probes.data.events import CONNECTION_KINDS
from probes.transport.runner import ProbeError, Runner
from probes.data.state import HostState
from probes.fold.verdict import blind_failures, cannot_see_lasting
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from tui.config import Config
from tui.look import Answered
from tui.status import quiet_stdout
from tui.wait_rules import (EXIT_FAILED, EXIT_LOOP, EXIT_READY, EXIT_TIMEOUT,
                             EXIT_UNREACHABLE, blind_reason, decisive_line_known, end_sentence, is_old, outcome,
                             progress_line, timeout_reason, tty_line)

#: Seconds to wait for the journal's decisive line after systemd reported the failure.
LOG_GRACE_S = 10.0
#: At most this many seconds to read the journal's backlog before anything is shown or restarted.
BACKLOG_WAIT_S = 15.0

#: What sudo and polkit say when the SSH user may not restart the unit (exit 4, "not allowed").
_NOT_ALLOWED_RE = re.compile(r"a password is required|is not in the sudoers|not allowed to execute|"
                             r"Interactive authentication required|Access denied|Permission denied")

async def wait(spec: HostSpec, runner: Runner, *, restart: bool, until: str, timeout_s: float,
               out: IO[str], tty: bool, config: Config | None = None, history: History | None = None,
               err: IO[str] | None = None) -> int:
    """Watch ``spec`` until :func:`outcome` decides, or ``timeout_s`` real seconds pass. With a
    ``history``, the start is recorded when it ends and its typical durations are shown. Progress
    lines go to ``out``; the reason of every exit but 0 goes to ``err`` (default stderr). With
    ``restart``, a host whose unit or journal cannot be read is not restarted (exit 4)."""
    import sys

    err = err or sys.stderr
    began = time.monotonic()  # --timeout counts from here: connecting and the backlog are in it
    clock = WallClock()
    changed = asyncio.Event()
    w = HostWatcher(spec, runner, clock, lambda _w: changed.set(), history=history,
                    **({"unit_interval_s": config.unit_interval_s, "health_interval_s": config.health_interval_s}
                       if config is not None else {}))
    since = 0.0  # without --restart the current process counts, whenever it started
    if restart and (config.read_only if config is not None else False):
        err.write(f"{spec.name}: --restart refused: read-only (read_only = true in the configuration)\n")
        return EXIT_UNREACHABLE
    width = shutil.get_terminal_size((100, 24)).columns
    answered = Answered()
    restart_failed = False
    w.start()
    last = ""
    try:
        # Read the journal's backlog first (bounded): the lines shown from then on are live ones,
        # and with --restart every line of the new start comes after it.
        await read_backlog(w, changed, timeout_s, answered)
        unit_after = 0.0
        if restart and cannot_see_lasting(w.state()):
            restart = False  # restarting what cannot be seen: never; the loop below says why (exit 4)
        if restart:
            from probes.store.audit import AuditLog
            from probes.ops.actions import execute, plan

            since = clock.now()
            result = await execute(plan(spec, "restart"), runner, AuditLog(), actor="wait")
            if result.outcome != "ok":
                err.write(f"{spec.name}: restart failed: {one_line(result.output.strip()[-300:]) or result.outcome}\n")
                if result.outcome == "error" or _NOT_ALLOWED_RE.search(result.output) is not None:
                    return EXIT_UNREACHABLE
                # systemd refused or the start failed at once: say why from the unit and the log
                # (e.g. the start limit, with its fix) as for any failed start
                since = 0.0
                restart_failed = True
            unit_after = clock.now()

        def show(s: HostState, code: int | None) -> None:
            nonlocal last
            old = is_old(s, since)
            # download words are host text: through the one sanitiser
            text = (one_line(tty_line(s, clock.now(), width - 22 if old else width) + (" (before the restart)" if old else ""))
                    if tty else progress_line(s, since))
            if code is None and not answered(w):
                # the journal's backlog is still coming: its first lines are history
                text = f"{spec.name}: connecting…" if tty else last
            if text != last:
                out.write(("\r\x1b[2K" + text) if tty else text + "\n")
                out.flush()
                last = text

        end = await settle(w, changed, since=since, until=until, unit_after=unit_after, timeout_s=timeout_s,
                           restart_failed=restart_failed, on_state=show, started=began)
        if tty:
            out.write("\n")
        out.flush()
        if end.code == EXIT_TIMEOUT:
            err.write(f"{spec.name}: {one_line(end.sentence)}\n")
            err.flush()
            return EXIT_TIMEOUT
        _final(end.state, end.code, out, err, end.sentence)
        if history is not None:
            await w.sync_history()  # this start's durations, for the next ETA
        return end.code
    except ProbeError as exc:
        err.write(f"{spec.name}: {one_line(exc.message)}\n")
        return EXIT_UNREACHABLE if exc.kind in CONNECTION_KINDS else EXIT_FAILED
    finally:
        await w.stop()



#: A word per exit status, for a machine (the MCP ``wait_ready`` tool's ``outcome``).
OUTCOMES = {EXIT_READY: "ready", EXIT_FAILED: "failed", EXIT_LOOP: "restart_loop", EXIT_TIMEOUT: "timeout",
            EXIT_UNREACHABLE: "unreachable"}


@dataclass(frozen=True)
class WaitEnd:
    """How a wait ended (:func:`settle`).

    Attributes:
        code: the exit status (:data:`tui.wait_rules.EXIT_CODES`). state: the host's last snapshot.
        sentence: one line saying why, as ``upwatch wait`` says it: ``gpu-node-1: ready (healthy)``,
            the verdict, or ``not ready after 30 s: <what was missing>`` (host text sanitised).
    """

    code: int
    state: HostState
    sentence: str


async def read_backlog(w: HostWatcher, changed: asyncio.Event, timeout_s: float,
                       answered: Callable[[HostWatcher], bool]) -> None:
    """Wait (at most :data:`BACKLOG_WAIT_S`, or ``timeout_s`` when shorter and not 0) until ``w``
    has ``answered`` (:class:`tui.look.Answered`: once, and its journal backlog is read), or its unit or journal cannot be read for
    a reason that lasts. (Timeout 0, "look once": the look is the first full answer, so the
    backlog gets its bound.)"""
    backlog_end = time.monotonic() + (min(timeout_s, BACKLOG_WAIT_S) if timeout_s > 0 else BACKLOG_WAIT_S)
    while not answered(w) and time.monotonic() < backlog_end and not cannot_see_lasting(w.state()):
        changed.clear()
        try:
            await asyncio.wait_for(changed.wait(), 0.25)
        except TimeoutError:
            pass


async def settle(w: HostWatcher, changed: asyncio.Event, *, since: float, until: str, timeout_s: float,
                 unit_after: float = 0.0, restart_failed: bool = False,
                 on_state: Callable[[HostState, int | None], None] | None = None,
                 started: float | None = None) -> WaitEnd:
    """Watch a started watcher until :func:`outcome` decides or ``timeout_s`` real seconds pass:
    ``upwatch wait``'s loop, also the MCP ``wait_ready`` tool's.

    Args:
        w: the host's running watcher. changed: an event set when its model changes (cleared here).
        since, until, unit_after: as :func:`outcome`.
        timeout_s: real seconds; then the outcome is :data:`EXIT_TIMEOUT` with :func:`timeout_reason`,
            or :data:`EXIT_UNREACHABLE` ("cannot see after N s: ...", :func:`blind_reason`) while
            the unit or journal is failing to be read (even for less than :data:`BLIND_GIVE_UP_S`).
        restart_failed: the restart before the wait failed: a unit that is not starting either is
            a failed start.
        on_state: called with each snapshot looked at and the code it decided (None: waiting on),
            e.g. to print a progress line; it must be cheap.
        started: when the wait began (``time.monotonic()``; default: now): the timeout counts
            from then, and the sentences say ``timeout_s`` as asked, not the time left.

    Returns:
        The :class:`WaitEnd`. A failure or restart loop systemd reported first is held for up to
        :data:`LOG_GRACE_S` for the journal to deliver the line that says why.
    """
    deadline = (time.monotonic() if started is None else started) + timeout_s
    grace_until: float | None = None
    clock = w.clock
    while True:
        s = w.state()
        code = outcome(s, since, until, unit_after, clock.now())
        if restart_failed and code is None and s.unit_state is not None and s.unit_state.time >= unit_after:
            code = EXIT_FAILED  # the restart failed and the unit is not starting either
        not_found = s.unit_state is not None and s.unit_state.load_state == "not-found"
        held: int | None = None
        if code in (EXIT_FAILED, EXIT_LOOP) and not not_found and not decisive_line_known(s):
            # systemd said it first; give the journal a few seconds to deliver the line that says why
            grace_until = grace_until or time.monotonic() + LOG_GRACE_S
            if time.monotonic() < grace_until:
                held, code = code, None
        if on_state is not None:
            on_state(s, code)
        if code is not None:
            return WaitEnd(code, s, end_sentence(s, code))
        left = deadline - time.monotonic()
        if left <= 0:
            if held is not None:
                # The time is up while only the line that says why was awaited: the start failed
                # all the same (systemd said so); a timeout's 3 would read as "still starting".
                return WaitEnd(held, s, end_sentence(s, held))
            if s.stale_since is not None:
                # the link dropped after the host had answered: what it says now is not known
                why = s.verdict.sentence if s.verdict is not None else "the connection is lost"
                return WaitEnd(EXIT_UNREACHABLE, s, f"{s.host}: unreachable at the timeout ({timeout_s:g} s): "
                                                    f"{one_line(why)}")
            hf = s.failure("health")
            if s.state == "ready" and hf is not None:
                # the log says ready and health could not be asked: "not ready" would be a guess
                return WaitEnd(EXIT_UNREACHABLE, s, f"{s.host}: cannot check health after {timeout_s:g} s: "
                                                    f"{one_line(hf.message)}")
            blind = blind_failures(s)
            if blind:
                # what decides readiness was not read: "not ready" (3) would be a guess
                return WaitEnd(EXIT_UNREACHABLE, s, f"{s.host}: cannot see after {timeout_s:g} s: "
                                                    f"{one_line(blind_reason(s, blind))}")
            return WaitEnd(EXIT_TIMEOUT, s,
                           f"not ready after {timeout_s:g} s: {one_line(timeout_reason(s, since, until))}")
        changed.clear()
        try:
            await asyncio.wait_for(changed.wait(), min(left, 0.5 if grace_until else 1.0))
        except TimeoutError:
            pass


def _final(s: HostState, code: int, out: IO[str], err: IO[str], sentence: str | None = None) -> None:
    """The outcome: ``ready (...)`` on ``out``; for every other code the reason on ``err`` (the
    wait's ``sentence``, default :func:`end_sentence`: the verdict, else the code's meaning with
    the state; then the decisive line and hint)."""
    sentence = sentence or end_sentence(s, code)
    if code == EXIT_READY:
        out.write(sentence + "\n")
        return
    err.write(sentence + "\n")
    if code in (EXIT_FAILED, EXIT_LOOP) and s.error is not None:
        err.write(f"  decisive line: {one_line(s.error.text)}\n")
        if s.hint:
            err.write(f"  hint: {one_line(s.hint)}\n")
    err.flush()


def run_wait(spec: HostSpec, *, restart: bool, until: str, timeout_s: float, out: IO[str], tty: bool,
             config: Config | None = None,
             runner_factory: Callable[[HostSpec], Runner] | None = None,
             history: History | None | str = "default", err: IO[str] | None = None) -> int:
    """Run :func:`wait` with the runner for ``spec`` and return the exit status. ``history``:
    ``"default"`` (the user data folder's start history), a :class:`~probes.store.history.History`, or
    None. ``err``: where the reason of a non-zero exit goes (default stderr)."""
    if runner_factory is None:
        from tui.live import runner_for as runner_factory
    hist = History() if history == "default" else history
    if isinstance(hist, History) and hist.problem:
        import sys

        print(f"upwatch wait: {hist.problem}", file=sys.stderr)
    try:
        return asyncio.run(wait(spec, runner_factory(spec), restart=restart, until=until, timeout_s=timeout_s,
                                out=_PipeSafe(out), tty=tty, config=config, history=hist, err=err))  # type: ignore[arg-type]
    finally:
        if isinstance(hist, History):
            hist.close()


class _PipeSafe:
    """``out`` that goes quiet when its reader leaves (``upwatch wait | head -1``): the wait goes
    on and its exit status still tells; stdout is pointed at /dev/null so the exit flush is silent."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                self._out.write(text)
            except BrokenPipeError:
                self._gone_now()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._out.flush()
            except BrokenPipeError:
                self._gone_now()

    def _gone_now(self) -> None:
        self._gone = True
        import sys

        if self._out is sys.stdout:
            quiet_stdout()
