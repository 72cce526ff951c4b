"""The operator's actions in the dashboard: keys, confirmation, running, notification.

The logic (commands, checks, running, the audit log, the GPU-release wait) is
:mod:`probes.ops.actions`; this module is the Textual side:

* :class:`ConfirmScreen`: a modal that names the host and shows the exact command line(s);
  Cancel has the focus, escape and ``n`` cancel, only the Confirm button runs anything.
* :class:`SafeRestartScreen`: the safe restart's progress (stop, wait for the GPUs, start), with
  what still holds GPU memory; on timeout it offers to kill those processes.
* :class:`ActionController`: what the screens' keys call (``app.actions.request(host, action)``):
  read-only check, planning, confirmation, a named worker per action, the result as a
  notification (host text never parsed as markup).

Keys (card on the overview, or the detail screen): ``r`` restart, ``s`` stop, ``S`` start,
``k`` SIGKILL the unit's processes, ``K`` SIGKILL the processes holding GPU memory outside the unit,
``R`` safe restart.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from probes import hosttext
from probes.ops.actions import ACTIONS, ActionPlan, ActionRefused, ActionResult, execute, plan
from probes.store.audit import AuditLog
from probes.ops.release import GpuReleaseWait, ReleaseStatus, orphan_pids, pids_of, wait_for_release

if TYPE_CHECKING:
    from probes.watch.watcher import HostWatcher

#: Bindings for a screen that acts on a host (its ``action_unit_action`` gives the host).
ACTION_BINDINGS = [
    Binding("r", "unit_action('restart')", "Restart", show=False),
    Binding("s", "unit_action('stop')", "Stop", show=False),
    Binding("S", "unit_action('start')", "Start", key_display="S", show=False),
    Binding("k", "unit_action('kill')", "Kill", show=False),
    Binding("K", "unit_action('kill_pids')", "Kill GPU orphans", key_display="K", show=False),
    Binding("R", "unit_action('safe_restart')", "Safe restart", key_display="R", show=False),
]

READ_ONLY_MESSAGE = "read-only: actions are off"
#: The footer's note while the actions are off.
READ_ONLY_FOOTER = "read-only: no restart, stop or kill"
SAFE_RESTART_TIMEOUT_S = 120.0


class ConfirmScreen(ModalScreen[bool]):
    """Asks before anything runs. Dismissed with True only by the Confirm button.

    Args:
        title: the question, e.g. ``restart sglang.service on gpu-node-1?`` (plain text).
        lines: what will run, one command line (or step) per line (plain text).
        confirm_label: the Confirm button's label.
    """

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 100; max-width: 95%; height: auto; max-height: 90%;
                               border: thick $error; background: $surface; padding: 1 2; }
    ConfirmScreen #title { text-style: bold; margin-bottom: 1; }
    ConfirmScreen #command { color: $text; background: $boost; padding: 0 1; margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape,n", "cancel", "Cancel")]

    def __init__(self, title: str, lines: list[str], confirm_label: str = "Confirm") -> None:
        super().__init__()
        self.title_text = hosttext.one_line(title)  # host, unit and process names are host text
        self.lines = [hosttext.lines(line) for line in lines]  # an entry may hold several lines
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="title", markup=False)
            yield Static("\n".join(self.lines), id="command", markup=False)
            with Horizontal():
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(self.confirm_label, id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @property
    def command_text(self) -> str:
        """The command lines as shown (tests read this)."""
        return "\n".join(self.lines)

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")


class SafeRestartScreen(ModalScreen[None]):
    """The safe restart in progress: one line per step and the wait's status; Cancel stops the
    sequence (a stopped unit then stays stopped, which the status line says). It closes when the
    sequence ends, however it ends; a notification says how (what failed, when something did)."""

    DEFAULT_CSS = """
    SafeRestartScreen { align: center middle; }
    SafeRestartScreen > Vertical { width: 100; max-width: 95%; height: auto; max-height: 90%;
                                   border: thick $warning; background: $surface; padding: 1 2; }
    SafeRestartScreen #steps { margin-bottom: 1; }
    SafeRestartScreen #wait { color: $text-muted; margin-bottom: 1; }
    SafeRestartScreen Horizontal { height: auto; align-horizontal: right; }
    """
    BINDINGS = [Binding("escape", "abort", "Cancel")]

    def __init__(self, host: str, unit: str) -> None:
        super().__init__()
        self.host = host
        self.unit = unit
        self.steps: list[str] = []
        self.wait_text = ""
        self.worker = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(hosttext.one_line(f"safe restart of {self.unit} on {self.host}"), markup=False)
            yield Static("", id="steps", markup=False)
            yield Static("", id="wait", markup=False)
            with Horizontal():
                yield Button("Cancel", id="abort", variant="primary")

    def on_mount(self) -> None:
        # Steps may come before the screen is mounted (the worker starts with it): show them now.
        self.query_one("#steps", Static).update("\n".join(self.steps))
        self.query_one("#wait", Static).update(self.wait_text)

    def step(self, text: str) -> None:
        self.steps.append(hosttext.one_line(text))
        if self.is_mounted:
            self.query_one("#steps", Static).update("\n".join(self.steps))

    def show_wait(self, status: ReleaseStatus) -> None:
        self.wait_text = hosttext.lines(status.describe())  # process names from nvidia-smi are host text
        if self.is_mounted:
            self.query_one("#wait", Static).update(self.wait_text)

    def close(self) -> None:
        """Dismiss the screen if it is still shown (the sequence ended)."""
        if self.is_attached and self.app.screen is self:
            self.dismiss(None)
        elif self.is_attached:
            self.app.call_later(self.close)  # a confirmation is above it: after that one

    def action_abort(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
        self.dismiss(None)

    @on(Button.Pressed, "#abort")
    def _abort(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_abort()


class ActionController:
    """The dashboard's actions (one per app).

    Args:
        app: the :class:`~tui.app.UpwatchApp` (its ``watchers``, ``clock``, ``notify``, workers).
        audit: the audit log, or None to record nothing (the demo).
        read_only: refuse every action (the keys only say so).
        safe_restart_timeout_s: how long the safe restart waits for the GPUs (clock seconds).
    """

    def __init__(self, app, audit: AuditLog | None, read_only: bool = False,
                 safe_restart_timeout_s: float = SAFE_RESTART_TIMEOUT_S) -> None:
        self.app = app
        self.audit = audit
        self.read_only = read_only
        self.safe_restart_timeout_s = safe_restart_timeout_s
        self.busy: set[str] = set()
        self.results: list[ActionResult] = []

    # --- entry point from the keys -----------------------------------------------------------------

    def request(self, host: str, action: str) -> None:
        """A key was pressed for ``host``: check, plan, confirm, then run (in a worker)."""
        if self.read_only:
            self.app.notify(READ_ONLY_MESSAGE, severity="warning", markup=False)
            return
        watcher: HostWatcher = self.app.watchers[host]
        spec = watcher.spec
        if host in self.busy:
            self.app.notify(f"{host}: an action is still running there", severity="warning", markup=False)
            return
        try:
            if action == "safe_restart":
                plans = [plan(spec, "stop"), plan(spec, "start")]
            elif action == "kill_pids":
                state = watcher.state()
                orphans = orphan_pids(state)  # the same list is shown and killed
                if not orphans:
                    why = (f"no process holds GPU memory outside {spec.unit}" if state.gpu_orphans is not None
                           else f"not known which processes hold GPU memory outside {spec.unit} "
                                "(no GPU process list yet, or the unit's cgroup could not be read)")
                    self.app.notify(f"{host}: {why}", markup=False)
                    return
                plans = [plan(spec, "kill_pids", [pid for pid, _, _ in orphans])]
            else:
                plans = [plan(spec, action)]
        except ActionRefused as exc:
            self._audit_refused(spec, action, str(exc))
            self.app.notify(f"{host}: {action} refused: {exc}", severity="error", markup=False)
            return

        if action == "safe_restart":
            stop, start = plans
            lines = [f"1. {stop.shown}",
                     f"2. wait until its GPUs release their memory (at most {self.safe_restart_timeout_s:g} s;",
                     "   then you may kill what still holds it)",
                     f"3. {start.shown}"]
            title = f"safe restart of {spec.unit} on {host}?"
        elif action == "kill_pids":
            lines = [f"{pid}  {name}  {mem if mem is not None else '?'} MiB" for pid, name, mem in orphans]
            lines = ["processes holding GPU memory outside the unit (pid, command, memory):", *lines, "",
                     plans[0].shown]
            title = f"kill {len(plans[0].pids)} process(es) on {host}?"
        else:
            lines = [plans[0].shown]
            title = f"{ACTIONS[action]} {spec.unit} on {host}?"

        def answered(ok: bool | None) -> None:
            if not ok:
                for p in plans[:1]:
                    self._audit(p, "cancelled")
                return
            self.busy.add(host)
            if action == "safe_restart":
                screen = SafeRestartScreen(host, spec.unit)
                self.app.push_screen(screen)
                screen.worker = self.app.run_worker(self._safe_restart(watcher, screen), name=f"safe restart {host}",
                                                    group="actions", exit_on_error=False)
            else:
                self.app.run_worker(self._run(plans[0]), name=f"{action} {host}", group="actions",
                                    exit_on_error=False)

        self.app.push_screen(ConfirmScreen(title, lines), answered)

    # --- running -----------------------------------------------------------------------------------

    async def _execute(self, p: ActionPlan) -> ActionResult:
        result = await execute(p, self.app.watchers[p.host].runner, None)
        self.results.append(result)
        if self.audit is not None:
            try:
                self.audit.record(p, result.outcome, exit_status=result.exit_status, output=result.output,
                                  duration_s=result.duration_s)
            except OSError as exc:  # the command ran; say that its line is missing
                self.app.notify(f"audit log not written: {exc}", severity="error", markup=False)
        return result

    async def _run(self, p: ActionPlan) -> None:
        try:
            result = await self._execute(p)
            self._tell(result)
        finally:
            self.busy.discard(p.host)

    def _tell(self, result: ActionResult, then: str = "") -> None:
        """The result as a notification; ``then``: a sentence on what it means for the sequence."""
        text = result.summary() + (f"\n{then}" if then else "")
        self.app.notify(text, title="action" if result.ok else "action failed",
                        severity="information" if result.ok else "error", markup=False)

    async def _safe_restart(self, watcher: HostWatcher, screen: SafeRestartScreen) -> None:
        spec, host = watcher.spec, watcher.name
        clock = self.app.clock
        start = plan(spec, "start")
        try:
            before = watcher.state()
            stop = plan(spec, "stop")
            screen.step(f"stopping: {stop.shown}")
            result = await self._execute(stop)
            if not result.ok:
                self._tell(result, f"safe restart stopped: the stop failed, {spec.unit} was not started")
                self._audit(start, "cancelled", "the stop failed")
                return
            wait = GpuReleaseWait(before, clock.now(), timeout_s=self.safe_restart_timeout_s)
            screen.step("waiting for the GPUs to release their memory")
            status = await wait_for_release(wait, watcher.state, clock, on_status=screen.show_wait)
            if status.state == "timed_out":
                pids = pids_of(status.holders)
                if pids:
                    kill = plan(spec, "kill_pids", pids)
                    lines = [status.describe(), "", kill.shown, "", f"then: {start.shown}"]
                    ok = await self.app.push_screen(
                        ConfirmScreen(f"GPU memory on {host} is still held: kill and start?", lines,
                                      confirm_label="Kill, then start"), wait_for_dismiss=True)
                    if not ok:
                        self._audit(kill, "cancelled")
                        self._audit(start, "cancelled", "GPU memory still held; the operator cancelled")
                        screen.step(f"cancelled: {spec.unit} stays stopped")
                        self.app.notify(f"{host}: safe restart cancelled: {spec.unit} stays stopped",
                                        severity="warning", markup=False)
                        return
                    screen.step(f"killing: {kill.shown}")
                    self._tell(await self._execute(kill))
                else:
                    ok = await self.app.push_screen(
                        ConfirmScreen(f"GPU memory on {host} did not show as released: start anyway?",
                                      [status.describe(), "", start.shown], confirm_label="Start anyway"),
                        wait_for_dismiss=True)
                    if not ok:
                        self._audit(start, "cancelled", "GPU memory not released; the operator cancelled")
                        screen.step(f"cancelled: {spec.unit} stays stopped")
                        return
            screen.step(f"starting: {start.shown}")
            result = await self._execute(start)
            self._tell(result, "" if result.ok else f"safe restart: the start failed, {spec.unit} is not running")
        except asyncio.CancelledError:  # Cancel on the progress screen
            self._audit(start, "cancelled", "safe restart cancelled by the operator; the unit stays stopped")
            self.app.notify(f"{host}: safe restart cancelled: {spec.unit} may stay stopped",
                            severity="warning", markup=False)
            raise
        finally:
            # However it ended (done, failed, cancelled, or an error the worker handler names), the
            # progress screen closes: it never stays open with nothing left to do.
            screen.close()
            self.busy.discard(host)

    # --- audit ---------------------------------------------------------------------------------------

    def _audit(self, p: ActionPlan, outcome: str, output: str = "") -> None:
        if self.audit is None:
            return
        try:
            self.audit.record(p, outcome, output=output)
        except OSError as exc:
            self.app.notify(f"audit log not written: {exc}", severity="error", markup=False)

    def _audit_refused(self, spec, action: str, reason: str) -> None:
        if self.audit is None:
            return
        try:
            self.audit.refused(spec, action, reason)
        except OSError as exc:
            self.app.notify(f"audit log not written: {exc}", severity="error", markup=False)
