"""The Textual app: thin. It owns the watchers and the repaint timer; screens do the rest.

Data flow: each :class:`~probes.watch.watcher.HostWatcher` marks its host dirty when its model changes
(cheap, any rate). A real-time timer (``Config.repaint_hz``, at most 10 Hz, on the detail screen;
``Config.overview_hz``, 2 Hz, on the overview) takes one snapshot per dirty host shown (the rows
or cards on screen, the detail screen's host) and hands it to the screens, so state updates
coalesce per host while log entries are never dropped (screens pull them by sequence number).
Hosts off screen are taken at the tick (below): their snapshots feed only the header's counts
and the notifications, which so follow every host within a clock second, at half the cost.

One clock for the screen: :attr:`UpwatchApp.now` moves only on the tick (once a clock second,
at most 10 times a real second: the demo's sped-up clock ticks more often), and every snapshot is
judged at it, so a card's times ("in Graph capture 1m12s", "since start"), its ETA and "slower than
usual", and its verdict ("No log line for 1m10s") are all ``now`` minus the state's own stamps at
the same ``now`` and cannot contradict each other. A tick marks every host for judging again at
the new ``now``; the flush that follows (stepwise, a few milliseconds of hosts per event-loop
turn, all in one Textual batch, so the screen is composed once at its end) takes every host that
changed (a stall off screen is judged, counted and told at the tick) and hands each card its state and that
``now`` together, then the new ``now`` to every screen. Only the cards on screen draw any of it
(:class:`~widgets.overview.CardGrid`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerState

from probes.store.audit import AuditLog
from probes.clock import Clock, WallClock
from probes.sources.nvml import NvmlSource
from probes.store.history import History
from probes.hosttext import lines, one_line
from probes.transport.runner import Runner
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from tui.actions import ActionController
from tui.config import Config
from tui.notify import SMALL_COLUMNS, SMALL_ROWS, SMALL_TOAST_S, Notifier, small_screen
from tui.detail_screen import DetailScreen
from tui.help_screen import HelpScreen
from tui.screens import OverviewScreen

RunnerFactory = Callable[[HostSpec], Runner]
#: Seconds of flush work between two turns of the event loop (the probes read in between).
FLUSH_SLICE_S = 0.004


def _name(watcher: HostWatcher) -> str:
    return watcher.name


class UpwatchApp(App[None]):
    """The dashboard. Build it with :func:`make_app`."""

    TITLE = "upwatch"
    # A small terminal's screens get -short or -narrow (Textual's breakpoints): their toasts lose
    # their blank rows (4 rows, not 6, for a two-line toast at 80x24).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (SMALL_COLUMNS, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SMALL_ROWS, "-tall")]
    CSS = "Screen.-short Toast, Screen.-narrow Toast { padding: 0 1; }"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("t", "toggle_dark", "Theme"),
    ]

    def __init__(self, config: Config, runner_factory: RunnerFactory, clock: Clock | None = None,
                 *, start_watchers: bool = True,
                 gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
                 read_only: bool | None = None, audit: AuditLog | None | str = "default",
                 history: History | None | str = "default", demo: bool = False) -> None:
        super().__init__()
        self.config = config
        #: The hosts are the demo's simulated ones, on the demo's clock (the report says so).
        self.demo = demo
        self.clock = clock or WallClock()
        self.title = one_line(config.title)
        #: The screen's one "now" (epoch seconds): every snapshot is judged at it (see the module doc).
        self.now: float = self.clock.now()
        self._now_shown: float | None = None  # the ``now`` the screens were last given
        self.watchers: dict[str, HostWatcher] = {}
        # The watchers whose model changed since their last snapshot was taken: each marks itself
        # (``set.add`` as the callback: no Python frame per journal line). One set, never rebound.
        self._dirty: set[HostWatcher] = set()
        self.history: History | None = History() if history == "default" else history  # type: ignore[assignment]
        for spec in config.hosts:
            self.watchers[spec.name] = HostWatcher(
                spec, runner_factory(spec), self.clock, self._dirty.add,
                unit_interval_s=config.unit_interval_s, health_interval_s=config.health_interval_s,
                gpu_interval_s=config.gpu_interval_s,
                gpu_source=gpu_source_factory(spec) if gpu_source_factory is not None else None,
                history=self.history)
        self._dirty.update(self.watchers.values())
        self._tick_due = True  # the next flush takes every host that changed (not only those shown)
        self._pushed: dict[str, object] = {}
        self._last_flush = 0.0
        self._flushing = False  # a stepwise flush is under way
        self._flush_again = False  # ... and another was asked for meanwhile
        self._start_watchers = start_watchers
        self.repaints = 0
        #: Tells what is news (ready, failed, restart loop, stalled) on each host's channels.
        self.notifier = Notifier(self, config.hosts, since=self.clock.now(), now=self.clock.now)
        self.actions = ActionController(
            self, AuditLog() if audit == "default" else audit,  # type: ignore[arg-type]
            read_only=config.read_only if read_only is None else read_only)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast of the app: its message and title go through the one sanitiser
        (:func:`probes.hosttext.lines`), so host text in it (a command's output, a host or unit name,
        an error) reaches the terminal without escape codes, bidi controls or zero-width characters;
        never parsed as markup. Arguments as :meth:`textual.app.App.notify` (``markup`` is ignored).

        On a small terminal (:func:`tui.notify.small_screen`, 80x24) a toast replaces the one shown
        and stays at most :data:`~tui.notify.SMALL_TOAST_S` seconds: stacked toasts hid the rows."""
        if small_screen(self.size):
            timeout = min(SMALL_TOAST_S, self.NOTIFICATION_TIMEOUT if timeout is None else timeout)
            self.clear_notifications()
        super().notify(lines(message), title=lines(title), severity=severity, timeout=timeout, markup=False)

    # --- lifecycle -------------------------------------------------------------------------------

    def get_default_screen(self) -> OverviewScreen:
        return OverviewScreen(list(self.watchers))

    def on_mount(self) -> None:
        if self.history is not None and self.history.problem:
            self.notify(self.history.problem, title="start history", severity="warning", markup=False)
        if self._start_watchers:
            for w in self.watchers.values():
                self.run_worker(w.run(), name=f"watch {w.name}", group="watchers", exit_on_error=False)
        self.set_interval(1.0 / min(10.0, max(0.5, self.config.repaint_hz)), self._timed_flush, name="repaint")
        self.set_interval(self.tick_s, self.tick, name="clock")

    @property
    def tick_s(self) -> float:
        """Real seconds between ticks: one clock second (the demo's clock runs ``speed`` times
        faster), at most 10 ticks a second."""
        speed = getattr(self.clock, "speed", 1.0)
        return 1.0 / min(10.0, max(1.0, float(speed)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One handler for every worker error: a watcher that dies is reported, the app lives on."""
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            self.notify(f"{event.worker.name}: {type(err).__name__}: {err}", title="probe stopped",
                        severity="error", markup=False)

    # --- data ------------------------------------------------------------------------------------

    async def _timed_flush(self) -> None:
        """The repaint timer: the detail screen at ``repaint_hz``, the overview at ``overview_hz``.

        Between ticks it takes only the hosts shown (:meth:`_shown_hosts`); the rest wait for the
        tick's flush. Hosts are handed over in slices of at most :data:`FLUSH_SLICE_S` of work, one
        event-loop turn each, so a flush of 32 changed cards never holds the loop for the whole
        batch (probes keep reading while the cards restyle)."""
        if self._exit or not self.screen_stack:
            return  # the app is going: its timers still fire, its screens are gone
        if isinstance(self.screen_stack[-1], OverviewScreen):
            now = time.monotonic()
            if now - self._last_flush < 1.0 / max(0.1, self.config.overview_hz) - 0.005:
                return
            self._last_flush = now
        await self._flush_stepwise()

    async def _flush_stepwise(self) -> None:
        """:meth:`flush`, one host per event-loop turn, in one batch: the screen is composed once
        when the last host is handed over, not once for every few hosts in between (a frame of
        the overview costs about the same for one changed card as for eight). One at a time: a
        flush asked for while one runs (the tick's, during the repaint timer's) is one more pass
        at its end, and only one (what is marked dirty after that waits for the next timer), so
        batches never chain into one that holds the screen for good."""
        if self._flushing:
            self._flush_again = True
            return
        self._flushing = True
        try:
            with self.batch_update():
                for _pass in range(2):
                    self._flush_again = False
                    clock = time.perf_counter
                    began = clock()
                    for _ in self._flush_steps(everything=False):
                        if clock() - began >= FLUSH_SLICE_S:
                            await asyncio.sleep(0)
                            if self._exit:
                                return
                            began = clock()
                    if not self._flush_again:
                        break
        finally:
            self._flushing = False
        if self.screen_stack:
            self.screen.check_idle()  # the batch is over: the screen composes what changed

    def flush(self) -> None:
        """Take one snapshot per dirty host and give it to the screens, all at once (tests and
        the screenshot script call this; the timer uses the stepwise form)."""
        for _ in self._flush_steps(everything=True):
            pass

    def _shown_hosts(self) -> set[str]:
        """The hosts the top screen shows (:meth:`OverviewScreen.shown_hosts`,
        :meth:`DetailScreen.shown_hosts`); none for another screen (the help)."""
        top = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(top, (OverviewScreen, DetailScreen)) and top.is_mounted:
            return top.shown_hosts()
        return set()

    def _flush_steps(self, everything: bool) -> Iterator[None]:
        """Hand the screens a snapshot of each changed host, one step (``yield``) per host handed.
        Which: every changed host when ``everything`` or on the first flush after a tick, else
        only the changed hosts shown (those off screen are taken at the next tick, so the header
        counts and the notifications follow every host within a tick)."""
        if self._exit:
            return
        dirty = self._dirty
        if not dirty:
            self._show_now()
            return
        if everything or self._tick_due:
            self._tick_due = False
            taken = set(dirty)
            dirty.clear()
        else:
            shown = self._shown_hosts()
            taken = {w for w in dirty if w.name in shown}
            if not taken:
                self._show_now()
                return
            dirty.difference_update(taken)
        self.repaints += 1
        for watcher in sorted(taken, key=_name):
            name = watcher.name
            state = watcher.state(self.now)
            if self._pushed.get(name) is state:
                continue  # nothing new (the model caches its snapshot until it changes)
            self._pushed[name] = state
            self.notifier.observe(state)  # returns at once: slow sends are queued to workers
            for screen in self.screen_stack:
                if isinstance(screen, (OverviewScreen, DetailScreen)) and screen.is_mounted:
                    screen.update_host(state)
            yield
        self._show_now()

    def _show_now(self) -> None:
        """Give the screens :attr:`now` once it moved (the cards of every host flushed since have
        their state judged at it)."""
        if self._now_shown == self.now or self._exit:
            return
        self._now_shown = now = self.now
        for screen in self.screen_stack:
            if isinstance(screen, (OverviewScreen, DetailScreen)) and screen.is_mounted:
                screen.set_now(now)

    def tick(self) -> None:
        """The shared clock: :attr:`now` moves and every host is marked to be judged again at it;
        a stepwise flush right after hands the screens the new states, then the new ``now`` (cards
        redraw their durations). Tests call :meth:`flush` after it to have it all at once."""
        if self._exit:
            return  # timers fire until the app has gone; the screens are being torn down
        self.now = self.clock.now()
        self._dirty.update(self.watchers.values())
        self._tick_due = True
        # This flush counts as the overview's next one: the repaint timer's comes a full
        # ``overview_hz`` period after it, not a moment later (two frames a second, not three).
        self._last_flush = time.monotonic()
        self.call_later(self._flush_stepwise)

    # --- actions ---------------------------------------------------------------------------------

    def open_detail(self, host: str) -> None:
        """Open the detail screen of ``host``."""
        self._pushed.clear()  # the new screen needs every host's state once
        self._dirty.update(self.watchers.values())
        self.push_screen(DetailScreen(self.watchers[host]))

    def request_action(self, host: str, action: str) -> None:
        """An action key for ``host`` (see :mod:`tui.actions`): confirm, run, notify."""
        self.actions.request(host, action)

    def copy_report(self, host: str) -> str:
        """``c``: copy the Markdown report of ``host`` (:func:`tui.host_report.watcher_report`,
        judged at :attr:`now`) to the clipboard through the terminal (OSC 52) and say so in a toast.
        Returns the text copied."""
        from tui.host_report import watcher_report
        from tui.report import utc

        if self.demo:
            source = ("copied from the upwatch demo: simulated hosts, not real ones; its times are the demo's "
                      f"own clock, which read {utc(self.now)}")
        else:
            source = "copied from the upwatch dashboard"
        text = watcher_report(self.watchers[host], self.now, source=source)
        self.copy_to_clipboard(text)
        n = text.count("\n")
        self.notify(f"Copied the report of {host} to the clipboard (Markdown, {n} lines; through the "
                    "terminal, OSC 52: `upwatch report HOST` prints it where that does not work)",
                    title="report copied", markup=False)
        return text

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.notifier.status_lines(), read_only=self.actions.read_only, web=self.is_web))

    def action_toggle_dark(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"


def make_app(config: Config, runner_factory: RunnerFactory, clock: Clock | None = None,
             *, start_watchers: bool = True,
             gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
             read_only: bool | None = None, audit: AuditLog | None | str = "default",
             history: History | None | str = "default", demo: bool = False) -> UpwatchApp:
    """Build the dashboard for the CLI, the tests and the screenshot script alike.

    Args:
        config: the hosts to watch.
        runner_factory: makes the :class:`~probes.transport.runner.Runner` for a host (SSH, local, replay).
        clock: the clock (default: wall time); the demo passes a sped-up one, tests a manual one.
        start_watchers: False leaves the probes stopped (tests that drive watchers themselves).
        gpu_source_factory: a local GPU source per host (NVML for ``ssh = "local"``), or None.
        read_only: refuse every action (restart, stop, kill ...); None: ``config.read_only``.
        audit: the actions' audit log: ``"default"`` (``audit.jsonl`` in the user data folder,
            ``$UPWATCH_DATA_DIR`` overrides), an :class:`~probes.store.audit.AuditLog`, or None (none).
        history: the start history (durations, ETA): ``"default"`` (``history.sqlite3`` in the
            user data folder), a :class:`~probes.store.history.History`, or None (none: the demo).
        demo: the hosts are the demo's simulated ones (:mod:`tui.demo_app`): the reports ``c``
            copies say so, and that their times are the demo's clock.
    """
    return UpwatchApp(config, runner_factory, clock, start_watchers=start_watchers,
                      gpu_source_factory=gpu_source_factory, read_only=read_only, audit=audit,
                      history=history, demo=demo)
