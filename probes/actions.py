"""Operator actions on a host's unit: what command each one runs, running it, and the audit log.

No UI here (the confirmation, the keys and the notifications are ``tui.actions``). The pieces:

* :func:`plan` builds an :class:`ActionPlan`: the exact argv for a host (``sudo -n`` in front when
  the host is configured so, ``systemctl --user`` for a user unit) and the command line the
  operator is shown (every word ``shlex.quote``-d). A unit name systemd would refuse, or a PID that
  is not a plain process (0, 1, negative), is refused with :class:`ActionRefused` before anything runs.
* :func:`execute` runs a plan through the host's :class:`~probes.runner.Runner` (the argv goes as a
  list; the SSH runner quotes it) and writes one audit line.
* :class:`AuditLog`: JSON lines in ``platformdirs.user_data_dir("upwatch")/audit.jsonl``
  (``$UPWATCH_DATA_DIR`` overrides the folder). Cancelled and refused actions are written too.
* :func:`orphan_pids`: the processes :kbd:`K` offers to kill; :class:`GpuReleaseWait`: the pure
  logic of the safe restart's "wait until the GPUs are free".

Actions: ``restart``, ``stop``, ``start``, ``kill`` (``systemctl kill -s SIGKILL UNIT``: every
process of the unit) and ``kill_pids`` (``kill -s KILL -- PID ...``). The safe restart is a
sequence of these (stop, wait, maybe kill_pids, start), driven by the UI.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.hosttext import json_text, one_line
from probes.runner import ProbeError
from probes.unitname import normalize_unit

if TYPE_CHECKING:
    from probes.clock import Clock
    from probes.runner import Runner
    from probes.state import GpuProcess, HostState
    from probes.watch import HostSpec

#: The environment variable that overrides the folder of the audit log.
DATA_DIR_ENV = "UPWATCH_DATA_DIR"
#: The audit log's file name inside the data folder.
AUDIT_FILE = "audit.jsonl"
#: At most this many characters of a command's output go into an audit line (the end is kept).
OUTPUT_MAX_CHARS = 4000
#: Seconds a single action's command may take (systemctl waits for a stop job to finish).
ACTION_TIMEOUT_S = 120.0

#: The actions, with the verb the UI shows for each.
ACTIONS = {
    "restart": "restart",
    "stop": "stop",
    "start": "start",
    "kill": "kill the unit's processes (SIGKILL)",
    "kill_pids": "kill the processes holding GPU memory (SIGKILL)",
}
_SYSTEMCTL = {"restart": ["restart"], "stop": ["stop"], "start": ["start"],
              "kill": ["kill", "-s", "SIGKILL"]}


#: How systemctl's hint lines after a failed job begin (systemd 252 ``src/shared/bus-wait-for-jobs.c``).
_SYSTEMCTL_HINTS = ('See "systemctl status', "To force a start use", 'followed by "systemctl start')


class ActionRefused(ValueError):
    """The action cannot be planned: an unknown action, a bad unit name, bad PIDs (the message
    says which, for an operator)."""


@dataclass(frozen=True, slots=True)
class ActionPlan:
    """One command, ready to run on one host.

    Attributes:
        host: the host's name (its card).
        target: where it runs: the SSH target, or ``"local"``.
        unit: the unit, as systemd names it (checked).
        action: one of :data:`ACTIONS`.
        argv: the exact argv handed to the runner.
        pids: for ``kill_pids``, the PIDs (also in ``argv``).
    """

    host: str
    target: str
    unit: str
    action: str
    argv: tuple[str, ...]
    pids: tuple[int, ...] = ()

    @property
    def command(self) -> str:
        """The argv as one shell line, every word quoted (``sudo -n systemctl restart sglang.service``)."""
        return shlex.join(self.argv)

    @property
    def shown(self) -> str:
        """Where and what: ``ssh gpu-node-1: sudo -n systemctl restart sglang.service`` (``local:``
        for this machine). Host text: show it as plain text, never markup."""
        where = "local" if self.target == "local" else f"ssh {self.target}"
        return f"{where}: {self.command}"


@dataclass(frozen=True, slots=True)
class ActionResult:
    """How a plan ended.

    Attributes:
        plan: what ran.
        outcome: ``ok`` (exit 0), ``failed`` (another exit status), ``error`` (it could not run:
            the host unreachable, a timeout; ``exit_status`` is None).
        exit_status: the command's exit status, or None.
        output: stdout then stderr, decoded (bad bytes replaced), at most :data:`OUTPUT_MAX_CHARS`.
        duration_s: how long it took (real seconds).
    """

    plan: ActionPlan
    outcome: str
    exit_status: int | None
    output: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def summary(self) -> str:
        """One line for a notification: ``gpu-node-1: restart sglang.service: done`` / ``... exit 5: <output>``
        (the output's last line, before systemctl's hint lines such as ``See "systemctl status ..."``:
        a job error says what failed first, then how to look and how to force a start)."""
        head = f"{self.plan.host}: {self.plan.action} {self.plan.unit}"
        if self.ok:
            return f"{head}: done"
        lines = self.output.strip().splitlines()
        while len(lines) > 1 and one_line(lines[-1]).startswith(_SYSTEMCTL_HINTS):
            lines.pop()  # systemctl's "See ..." hints after the reason
        tail = one_line(lines[-1], max_chars=200) if lines else ""  # host text: cleaned, then cut
        status = f"exit {self.exit_status}" if self.exit_status is not None else "could not run"
        return f"{head}: {status}" + (f": {tail}" if tail else "")


def _privileged(spec: HostSpec, argv: list[str]) -> list[str]:
    """``sudo -n`` in front when the host is configured so (system units only), as the watcher does."""
    if spec.sudo and not spec.user_unit:
        return ["sudo", "-n", *argv]
    return argv


def check_unit(unit: str) -> str:
    """``unit`` if systemd would accept it as a full unit name (with its suffix), else raise.

    Raises:
        ActionRefused: not a valid unit name (:func:`probes.unitname.normalize_unit`'s rules), or a
            name without its suffix (an action names exactly the unit the card shows).
    """
    try:
        normal = normalize_unit(unit)
    except ValueError as exc:
        raise ActionRefused(str(exc)) from None
    if normal != unit:
        raise ActionRefused(f"{unit!r} is not a full unit name (did you mean {normal!r}?)")
    return unit


def _check_pids(pids: Iterable[int]) -> tuple[int, ...]:
    out: list[int] = []
    for pid in pids:
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
            raise ActionRefused(f"{pid!r} is not a PID that may be killed (a number above 1)")
        if pid not in out:
            out.append(pid)
    if not out:
        raise ActionRefused("no process to kill")
    return tuple(out)


def plan(spec: HostSpec, action: str, pids: Iterable[int] = ()) -> ActionPlan:
    """The command that carries out ``action`` on ``spec``'s unit.

    Args:
        spec: the host (its ``unit``, ``sudo``, ``user_unit``, ``ssh``).
        action: one of :data:`ACTIONS`.
        pids: for ``kill_pids`` only: the processes to SIGKILL.

    Returns:
        the plan: ``systemctl [--user] VERB UNIT`` (``sudo -n`` first when ``spec.sudo`` and not a
        user unit), or ``kill -s KILL -- PID ...`` for ``kill_pids``.

    Raises:
        ActionRefused: an unknown action, a bad unit name, or bad/no PIDs for ``kill_pids``.
    """
    if action not in ACTIONS:
        raise ActionRefused(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
    unit = check_unit(spec.unit)
    if action == "kill_pids":
        checked = _check_pids(pids)
        argv = _privileged(spec, ["kill", "-s", "KILL", "--", *map(str, checked)])
        return ActionPlan(spec.name, spec.target, unit, action, tuple(argv), checked)
    systemctl = ["systemctl", "--user"] if spec.user_unit else ["systemctl"]
    argv = _privileged(spec, [*systemctl, *_SYSTEMCTL[action], unit])
    return ActionPlan(spec.name, spec.target, unit, action, tuple(argv))


def truncate(text: str) -> str:
    """``text`` if at most :data:`OUTPUT_MAX_CHARS` long, else its end with ``[N characters cut] `` before it."""
    if len(text) <= OUTPUT_MAX_CHARS or (text.startswith("[") and " characters cut] " in text[:40]):
        return text
    cut = len(text) - OUTPUT_MAX_CHARS
    return f"[{cut} characters cut] " + text[-OUTPUT_MAX_CHARS:]


def _output(stdout: bytes, stderr: bytes) -> str:
    return truncate((stdout + (b"\n" if stdout and stderr and not stdout.endswith(b"\n") else b"") + stderr
                     ).decode("utf-8", "replace"))


async def execute(plan: ActionPlan, runner: Runner, audit: AuditLog | None,
                  timeout_s: float = ACTION_TIMEOUT_S) -> ActionResult:
    """Run ``plan`` through ``runner`` and write its audit line. Never raises for the host's sake:
    a transport failure is an ``error`` result.

    Args:
        plan: from :func:`plan`.
        runner: the host's runner (the watcher's: the same connection).
        audit: where to write the line (None: nowhere, e.g. a dry test).
        timeout_s: the command's time limit (real seconds).
    """
    t0 = time.monotonic()
    try:
        done = await runner.run(list(plan.argv), timeout=timeout_s)
    except ProbeError as exc:
        result = ActionResult(plan, "error", None, truncate(exc.message), time.monotonic() - t0)
    else:
        result = ActionResult(plan, "ok" if done.returncode == 0 else "failed", done.returncode,
                              _output(done.stdout, done.stderr), time.monotonic() - t0)
    if audit is not None:
        audit.record(plan, result.outcome, exit_status=result.exit_status, output=result.output,
                     duration_s=result.duration_s)
    return result


# --- the audit log ----------------------------------------------------------------------------------


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$UPWATCH_DATA_DIR``, else ``platformdirs.user_data_dir("upwatch")`` (``~/.local/share/upwatch``)."""
    env = os.environ if env is None else env
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("upwatch"))


def iso_time(epoch_s: float) -> str:
    """``2025-05-02T16:15:37.123+02:00``: local time with its UTC offset."""
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).astimezone().isoformat(timespec="milliseconds")


@dataclass
class AuditLog:
    """Append-only JSON lines, one per action (done, failed, cancelled or refused).

    Each line: ``time`` (ISO 8601 with offset), ``user`` (who ran upwatch), ``host``, ``target``,
    ``unit``, ``action``, ``command`` (the shown command line), ``outcome`` (``ok``, ``failed``,
    ``error``, ``cancelled``, ``refused``), ``exit_status`` (int or null), ``output`` (stdout then
    stderr, at most :data:`OUTPUT_MAX_CHARS`, the end kept), ``duration_s``, and ``pids`` for
    ``kill_pids``.

    Args:
        path: the file (default: ``audit.jsonl`` in :func:`default_data_dir`).
        now: wall time for the ``time`` field (tests pass a fixed one).
    """

    path: Path = field(default_factory=lambda: default_data_dir() / AUDIT_FILE)
    now: Callable[[], float] = time.time

    def record(self, plan: ActionPlan, outcome: str, *, exit_status: int | None = None,
               output: str = "", duration_s: float | None = None) -> dict[str, object]:
        """Append one line for ``plan``; returns the record written. A log that cannot be written
        raises :class:`OSError` (the UI says so: an action must not go unrecorded silently)."""
        try:
            user = getpass.getuser()
        except Exception:  # no user name for this uid (containers)
            user = str(os.getuid())
        rec: dict[str, object] = {"time": iso_time(self.now()), "user": user, "host": plan.host, "target": plan.target,
                                  "unit": plan.unit, "action": plan.action, "command": plan.shown, "outcome": outcome,
                                  "exit_status": exit_status, "output": truncate(output),
                                  "duration_s": None if duration_s is None else round(duration_s, 3)}
        if plan.pids:
            rec["pids"] = list(plan.pids)
        self.write(rec)
        return rec

    def refused(self, spec: HostSpec, action: str, reason: str) -> dict[str, object]:
        """Append a line for an action that was refused before it could be planned."""
        rec: dict[str, object] = {"time": iso_time(self.now()), "host": spec.name, "target": spec.target,
                                  "unit": spec.unit, "action": action, "command": None, "outcome": "refused",
                                  "exit_status": None, "output": truncate(reason), "duration_s": None}
        self.write(rec)
        return rec

    def write(self, rec: Mapping[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = (json_text(rec) + "\n").encode("utf-8", "replace")  # `cat audit.jsonl` shows no escape
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)  # one write per line: lines of two upwatch instances never interleave
        finally:
            os.close(fd)

    def lines(self) -> list[dict[str, Any]]:
        """Every record in the file, oldest first ([] when there is none yet)."""
        if not self.path.exists():
            return []
        return [json.loads(ln) for ln in self.path.read_text(encoding="utf-8").splitlines() if ln.strip()]


# --- what K kills, and the safe restart's wait ---------------------------------------------------------


def orphan_pids(state: HostState) -> list[tuple[int, str, int | None]]:
    """Processes holding GPU memory outside the unit: ``(pid, command, mem MiB)``, one per PID
    (memory summed over its GPUs), from the GPU-memory verdict's list (``state.gpu_orphans``:
    compute processes whose PIDs are not in the unit's cgroup, read recursively, so the engine's
    own workers such as ``sglang::scheduler_TP1`` never appear). Empty when the cgroup could not
    be read: nothing is offered for killing on a guess.
    """
    found: dict[int, tuple[str, int | None]] = {}
    for o in state.gpu_orphans or ():
        if o.pid <= 1:
            continue
        name, mem = found.get(o.pid, (o.command, 0))
        found[o.pid] = (name, None if mem is None or o.mem_mib is None else mem + o.mem_mib)
    return [(pid, name, mem) for pid, (name, mem) in found.items()]


@dataclass(frozen=True, slots=True)
class ReleaseStatus:
    """Where the wait for free GPUs stands.

    Attributes:
        state: ``waiting``, ``released`` or ``timed_out``.
        waited_s: clock seconds since the wait began.
        holders: the processes still holding memory on the unit's GPUs (latest sample after the stop).
        used_mib: GPU index → memory used (MiB, None unknown) on the unit's GPUs, latest sample.
        fresh: whether a GPU sample taken after the stop has been seen at all.
    """

    state: str
    waited_s: float
    holders: tuple[GpuProcess, ...] = ()
    used_mib: tuple[tuple[int, int | None], ...] = ()
    fresh: bool = False

    def describe(self) -> str:
        """One or more lines for the operator (host text: plain, never markup)."""
        if self.state == "released":
            return f"GPU memory released after {self.waited_s:.0f} s"
        if not self.fresh:
            head = f"no GPU sample since the stop yet ({self.waited_s:.0f} s)"
        elif self.holders:
            head = f"still held after {self.waited_s:.0f} s by:"
        else:
            used = ", ".join(f"GPU {i}: {m if m is not None else '?'} MiB" for i, m in self.used_mib)
            head = f"memory still in use after {self.waited_s:.0f} s ({used})"
        lines = [head]
        for p in self.holders:
            mem = f"{p.mem_mib} MiB" if p.mem_mib is not None else "? MiB"
            gpu = f"GPU {p.gpu_index}" if p.gpu_index is not None else p.gpu_uuid
            lines.append(f"  pid {p.pid} {p.name} ({mem} on {gpu})")
        return "\n".join(lines)


class GpuReleaseWait:
    """The safe restart's wait, as pure logic over snapshots: feed it states, it says where it stands.

    The unit's GPUs are those that held a compute process when the unit was stopped (all the host's
    GPUs when that is unknown). They count as released when a GPU sample taken after the stop shows
    no process on them; when the host cannot list processes (no ``gpu_apps``), when each of them
    uses at most ``idle_mib``.

    Args:
        before: the host's state just before the stop.
        stopped_at: clock time the stop command returned; only samples from then on count.
        timeout_s: how long to wait (clock seconds) before :meth:`observe` says ``timed_out``.
        idle_mib: memory a GPU may use and still count as free (driver/context overhead).
    """

    def __init__(self, before: HostState, stopped_at: float, timeout_s: float = 120.0,
                 idle_mib: int = 1024) -> None:
        self.stopped_at = stopped_at
        self.timeout_s = timeout_s
        self.idle_mib = idle_mib
        uuids: set[str] = set()
        if before.gpu_apps is not None:
            uuids = {p.gpu_uuid for p in before.gpu_apps.apps}
        if not uuids and before.gpus is not None:
            uuids = {g.uuid for g in before.gpus.gpus}
        self.gpus: frozenset[str] = frozenset(uuids)  # empty: every GPU of the host

    def _mine(self, uuid: str) -> bool:
        return not self.gpus or uuid in self.gpus

    def observe(self, state: HostState, now: float) -> ReleaseStatus:
        """Where the wait stands given the latest ``state`` at clock time ``now``."""
        waited = max(0.0, now - self.stopped_at)
        apps = state.gpu_apps if state.gpu_apps is not None and state.gpu_apps.time >= self.stopped_at else None
        gpus = state.gpus if state.gpus is not None and state.gpus.time >= self.stopped_at else None
        used = tuple((g.index, g.mem_used_mib) for g in gpus.gpus if self._mine(g.uuid)) if gpus else ()
        holders: tuple[GpuProcess, ...] = ()
        if apps is not None:
            holders = tuple(p for p in apps.apps if self._mine(p.gpu_uuid))
            released = not holders
        elif gpus is not None and state.gpu_apps is None:
            released = all(m is not None and m <= self.idle_mib for _, m in used)
        else:
            released = False
        fresh = apps is not None or gpus is not None
        if released:
            return ReleaseStatus("released", waited, (), used, fresh)
        timed_out = waited >= self.timeout_s
        return ReleaseStatus("timed_out" if timed_out else "waiting", waited, holders, used, fresh)


async def wait_for_release(wait: GpuReleaseWait, snapshot: Callable[[], HostState], clock: Clock,
                           poll_s: float = 1.0,
                           on_status: Callable[[ReleaseStatus], None] | None = None) -> ReleaseStatus:
    """Poll ``snapshot()`` every ``poll_s`` clock seconds until the GPUs are released or the wait
    times out; ``on_status`` hears every status (for a progress line). Returns the last status."""
    while True:
        status = wait.observe(snapshot(), clock.now())
        if on_status is not None:
            on_status(status)
        if status.state != "waiting":
            return status
        await clock.sleep(poll_s)


def pids_of(holders: Sequence[GpuProcess]) -> list[int]:
    """The distinct PIDs of ``holders``, in order."""
    return list(dict.fromkeys(p.pid for p in holders if p.pid > 1))
