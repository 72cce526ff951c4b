"""Operator actions on a host's unit: what command each one runs, running it, and the audit log.

No UI here (the confirmation, the keys and the notifications are ``tui.actions``). The pieces:

* :func:`plan` builds an :class:`ActionPlan`: the exact argv for a host (``sudo -n`` in front when
  the host is configured so, ``systemctl --user`` for a user unit) and the command line the
  operator is shown (every word ``shlex.quote``-d). A unit name systemd would refuse, or a PID that
  is not a plain process (0, 1, negative), is refused with :class:`ActionRefused` before anything runs.
* :func:`execute` runs a plan through the host's :class:`~probes.transport.runner.Runner` (the argv goes as a
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

import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from probes.hosttext import one_line
from probes.store.audit import AuditLog, truncate
from probes.transport.runner import ProbeError
from probes.spec import normalize_unit

if TYPE_CHECKING:
    from probes.transport.runner import Runner
    from probes.spec import HostSpec

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
        output: stdout then stderr, decoded (bad bytes replaced), at most :data:`probes.store.audit.OUTPUT_MAX_CHARS`.
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
        ActionRefused: not a valid unit name (:func:`probes.spec.normalize_unit`'s rules), or a
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


def _output(stdout: bytes, stderr: bytes) -> str:
    return truncate((stdout + (b"\n" if stdout and stderr and not stdout.endswith(b"\n") else b"") + stderr
                     ).decode("utf-8", "replace"))


async def execute(plan: ActionPlan, runner: Runner, audit: AuditLog | None,
                  timeout_s: float = ACTION_TIMEOUT_S, *, actor: str = "tui") -> ActionResult:
    """Run ``plan`` through ``runner`` and write its audit line. Never raises for the host's sake:
    a transport failure is an ``error`` result.

    Args:
        plan: from :func:`plan`.
        runner: the host's runner (the watcher's: the same connection).
        audit: where to write the line (None: nowhere, e.g. a dry test).
        timeout_s: the command's time limit (real seconds).
        actor: who acts, for the audit line (:data:`probes.store.audit.ACTORS`).
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
                     duration_s=result.duration_s, actor=actor)
    return result


