"""``upwatch wait``'s rules, pure: when a wait ends and with which exit status (:func:`outcome`,
:data:`EXIT_CODES`), and the lines it prints (:func:`describe`, :func:`progress_line`,
:func:`tty_line`, :func:`timeout_reason`, :func:`end_sentence`); the loop that applies them to a
watcher is :mod:`tui.wait` (``settle``), for the CLI and the MCP ``wait_ready`` tool.
"""

from __future__ import annotations

import time

from probes.data.events import ProbeFailure
from probes.data.state import HostState
from probes.fold.verdict import blind_failures, cannot_see_lasting, systemd_gave_up
from probes.hosttext import one_line
from tui.status import state_text
from widgets.fmt import RUNG_WORDS

EXIT_READY, EXIT_FAILED, EXIT_LOOP, EXIT_TIMEOUT, EXIT_UNREACHABLE = 0, 1, 2, 3, 4
EXIT_CODES = {EXIT_READY: "ready", EXIT_FAILED: "the start failed", EXIT_LOOP: "restart loop",
              EXIT_TIMEOUT: "timeout", EXIT_UNREACHABLE: "unreachable, not allowed or cannot see"}

#: Seconds the unit or journal may fail to be read for a reason not known to last
#: (:data:`probes.fold.access.LASTING`) before ``wait`` gives up on it (exit 4).
BLIND_GIVE_UP_S = 60.0


def outcome(s: HostState, since: float, until: str, unit_after: float = 0.0, now: float | None = None) -> int | None:
    """The exit status ``s`` decides, or None to keep waiting.

    Args:
        s: the host's snapshot.
        since: epoch seconds; a start must have begun at or after it (``ExecMainStartTimestamp``
            has whole seconds: one second of slack). 0: the current process counts, whenever it began.
        until: ``ready`` or ``serving``.
        unit_after: the unit's state counts only from a ``systemctl show`` taken at or after this
            time (the local clock; after ``--restart`` returned): an earlier look still shows the
            process before the restart.
        now: epoch seconds (the clock's); with it, a unit or journal that has failed to be read
            for :data:`BLIND_GIVE_UP_S` for an unknown reason also ends the wait (4).
    """
    if s.stale_since is not None and (s.updated is None or any(f.kind in ("auth", "host_key") for f in s.failures)):
        return EXIT_UNREACHABLE
    if cannot_see_lasting(s):
        return EXIT_UNREACHABLE  # sudo missing or refusing, no systemd, no journal access: waiting cures none
    if now is not None and any(now - f.time >= BLIND_GIVE_UP_S for f in blind_failures(s)):
        return EXIT_UNREACHABLE
    u = s.unit_state
    if u is None or u.time < unit_after:
        return None
    if u.load_state == "not-found":
        return EXIT_FAILED
    new = u.started_at is not None and u.started_at >= since - 1.0
    if s.restart_loop and (new or u.active_state == "failed"):
        # systemd restarting it again and again, or given up on it (start limit); a unit failed
        # that systemd does not restart (Restart=no, started by hand again) is a failed start
        return EXIT_FAILED if u.active_state == "failed" and not systemd_gave_up(s) else EXIT_LOOP
    if u.active_state == "failed" or (
            s.state == "failed" and new and not u.running and u.sub_state != "auto-restart"
            and u.active_state == "inactive"):
        return EXIT_FAILED  # and systemd will not start it again (else: a loop may be forming)
    if not new or s.state != "ready" or s.health_stale:
        return None
    want = ("serving",) if until == "serving" else ("healthy", "serving")
    return EXIT_READY if s.readiness in want else None


def decisive_line_known(s: HostState) -> bool:
    """The log has caught up with a failure systemd reported: the start's error line is in, or
    the log shows the failed start at all (the journal can lag ``systemctl show`` by seconds)."""
    u = s.unit_state
    began = u.started_at if u is not None else None
    return s.error is not None and (began is None or s.failed_at is None or s.failed_at >= began - 1.0)


def describe(s: HostState, *, old: bool = False) -> str:
    """One line for a log or pipe: state, phase, progress step, readiness rung (the phase only
    once the log was read: :func:`tui.status.state_text`). It changes only when one of those does
    (no ticking clock), so a script sees one line per change. ``old``: the unit's process began
    before the restart (``--restart``): said at the end, so the line is not taken for the new one."""
    line = f"{s.host}: {state_text(s)} · {RUNG_WORDS.get(s.readiness, s.readiness)}"
    return line + " (the process from before the restart)" if old else line


def progress_line(s: HostState, since: float) -> str:
    """The line ``wait`` prints per change in a pipe or log, and the MCP ``wait_ready`` tool's
    progress message: :func:`describe`, saying when the process is the one from before the
    restart (:func:`is_old`); host text sanitised."""
    return one_line(describe(s, old=is_old(s, since)))


def is_old(s: HostState, since: float) -> bool:
    """With ``--restart`` (``since`` > 0): the unit's current process began before ``since`` (the
    restart has not shown a new start yet)."""
    u = s.unit_state
    return since > 0 and u is not None and (u.started_at is None or u.started_at < since - 1.0)


def timeout_reason(s: HostState, since: float, until: str) -> str:
    """Why the wait timed out, in one line: the verdict when there is one, else what was missing
    (no new start after the restart, no generation answered, the phase the start is in, the unit's
    state)."""
    from widgets.fmt import PHASE_LABELS

    u = s.unit_state
    if s.verdict is not None:
        return s.verdict.sentence
    if u is None:
        return "the unit's state was never read"
    if is_old(s, since):
        began = time.strftime("%H:%M:%S", time.localtime(u.started_at)) if u.started_at is not None else "never"
        return (f"no start after the restart was seen: the unit's process (MainPID {u.main_pid or '-'}) began "
                f"{began}, before the restart; systemd says {u.active_state}/{u.sub_state}")
    if until == "serving" and s.state == "ready" and s.readiness != "serving":
        return (f"the log says ready and /health answers, but no generation has been answered"
                f" ({RUNG_WORDS.get(s.readiness, s.readiness)})")
    if s.state == "loading":
        prog = ""
        if s.progress is not None and s.progress.total and s.progress.phase == s.phase:
            prog = f" at {s.progress.done:g}/{s.progress.total:g}"
        return f"the start is still in {PHASE_LABELS.get(s.phase, s.phase)}{prog}"
    if s.state == "ready":
        return f"the log says ready, but /health is not OK from this process ({RUNG_WORDS.get(s.readiness, s.readiness)})"
    return (f"the log shows no start in progress (state {s.state}); systemd says the unit is "
            f"{u.active_state}/{u.sub_state}")


def blind_reason(s: HostState, blind: tuple[ProbeFailure, ...]) -> str:
    """Why the unit or journal (``blind``: :func:`probes.fold.verdict.blind_failures`) cannot be
    read: the ``cannot_see`` verdict's sentence when it is the one shown, else each failure's
    message."""
    if s.verdict is not None and s.verdict.kind == "cannot_see":
        return s.verdict.sentence
    return "; ".join(f"the {f.probe}: {f.message}" for f in blind)


def tty_line(s: HostState, now: float, width: int = 100) -> str:
    """The line redrawn in place on a terminal: phase, a progress bar, time in the phase and in
    the start (with the typical durations and ETA when history knows them), readiness.

    Args:
        s: the snapshot. now: epoch seconds (the injected clock). width: the terminal's columns;
            the line is cut to ``width - 1`` characters.
    """
    from widgets.fmt import PHASE_LABELS, RUNG_WORDS, duration

    label = PHASE_LABELS.get(s.phase, s.phase)
    parts = [f"{s.host} {label}"]
    p = s.progress
    if p is not None and p.total and p.phase == s.phase and s.state == "loading":
        cells = 20
        full = round(cells * min(max(p.fraction, 0.0), 1.0))
        parts[0] += f" [{'#' * full}{'.' * (cells - full)}] {p.done:g}/{p.total:g}"
    if s.state == "loading":
        extra = _extra_words(s, now)
        if extra:
            parts.append(extra)
        else:
            if s.phase_began is not None:
                parts.append(f"{duration(now - s.phase_began)} in {label.lower()}")
            if s.start_began is not None:
                parts.append(f"{duration(now - s.start_began)} since start")
    parts.append(RUNG_WORDS.get(s.readiness, s.readiness))
    line = " · ".join(parts)
    return line if len(line) < width else line[:max(width - 2, 10)] + "…"


def _extra_words(s: HostState, now: float) -> str:
    """Download progress and the history's typical durations and ETA ("" when neither is known)."""
    from probes.fold.download import download_words
    from probes.fold.eta import typical_words

    words = [download_words(s) if s.download is not None else "", typical_words(s, now)]
    return " · ".join(w for w in words if w)


def end_sentence(s: HostState, code: int) -> str:
    """The one line ``upwatch wait`` ends with for ``code`` (host text sanitised): ``HOST: ready
    (RUNG)``, else the verdict, else the code's meaning with the state."""
    if code == EXIT_READY:
        return f"{s.host}: ready ({s.readiness})"
    if s.verdict is not None:
        return f"{s.host}: {one_line(s.verdict.sentence)}"
    return f"{s.host}: {EXIT_CODES[code]} ({one_line(state_text(s))})"
