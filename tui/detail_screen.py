"""A host's detail screen: its card, the log pane, the phase timeline, GPU history and the unit's state.

Like every screen it renders snapshots the app hands it (``update_host``, ``set_now``); its only
I/O is asking its watcher for log entries it has not shown yet.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from probes.data.state import HostState
from probes.watch.watcher import HostWatcher
from tui.actions import ACTION_BINDINGS
from tui.screens import ModeFooter
from widgets.detail import GpuHistory, PhaseTimeline, UnitPanel
from widgets.host_card import HostCard
from widgets.log_pane import LogPane
from widgets.text import plain

__all__ = ["DetailScreen"]


class DetailScreen(Screen[None]):
    """One host: its card, the log pane, the phase timeline, GPU history and the unit's state."""

    DEFAULT_CSS = """
    DetailScreen #body { height: 1fr; }
    DetailScreen LogPane { width: 1fr; height: 1fr; border: round $panel-lighten-2; }
    DetailScreen #side { width: 52; max-width: 40%; height: 1fr; }
    DetailScreen #side > * { border: round $panel-lighten-2; height: auto; }
    DetailScreen #filter { dock: bottom; display: none; }
    DetailScreen #filter.-open { display: block; }
    DetailScreen #status { height: 1; color: $text-muted; }
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        # Priority: it runs as the key arrives, so letters sent in the same read (`tmux send-keys
        # "/ready" Enter`, an agent, a paste) go into the box, not to the keys of the screen ("r"
        # asked to restart the unit).
        Binding("slash", "filter", "Filter", key_display="/", priority=True),
        Binding("n", "next_match", "Next match"),
        Binding("N", "prev_match", "Prev match", key_display="N"),
        Binding("e", "error", "Error"),
        Binding("f", "follow", "Follow"),
        Binding("c", "copy_report", "Copy report"),
        *ACTION_BINDINGS,
    ]

    def __init__(self, watcher: HostWatcher) -> None:
        super().__init__()
        self.watcher = watcher
        self.last_seq = 0
        self._ready = False  # set once composed: the app's timers may call in before that

    def compose(self) -> ComposeResult:
        yield Header()
        yield HostCard(self.watcher.state(), id="card")
        with Horizontal(id="body"):
            yield LogPane(id="log")
            with VerticalScroll(id="side"):
                yield PhaseTimeline(id="timeline")
                yield GpuHistory(id="gpus")
                yield UnitPanel(id="unit")
        yield Static("", id="status", markup=False)
        yield Input(placeholder="filter the log (plain text, case-insensitive)", id="filter")
        yield ModeFooter()

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    def on_mount(self) -> None:
        self._ready = True
        self.sub_title = plain(self.watcher.name, max_chars=80)  # host text: no escapes
        self.on_resize(None)
        self.update_host(self.watcher.state(self.app.now))  # type: ignore[attr-defined]
        self.set_now(self.app.now)  # type: ignore[attr-defined]
        self.log_pane.focus()

    def shown_hosts(self) -> set[str]:
        """The one host this screen shows (the app takes a new snapshot of it between its ticks;
        of the others at every tick)."""
        return {self.watcher.name}

    def update_host(self, state: HostState) -> None:
        if state.host != self.watcher.name or not self._ready or not self.query(HostCard):
            return
        now = self.app.now  # type: ignore[attr-defined]  # the one the state was judged at
        try:  # mounting or being torn down: the panels come and go one by one
            card, timeline = self.query_one(HostCard), self.query_one(PhaseTimeline)
            gpus, unit = self.query_one(GpuHistory), self.query_one(UnitPanel)
        except NoMatches:
            return
        card.state = state
        card.now = now
        timeline.update_state(state, now)
        gpus.update_state(state)
        unit.update_state(state, now)
        new = self.watcher.entries_after(self.last_seq)
        if new:
            self.last_seq = new[-1].seq
            self.log_pane.append(new)

    def on_resize(self, event) -> None:
        """The verdict first, then the log: below 30 rows the card is compact (its first line,
        phases, times and the whole verdict; no GPU strip or last line, the panes below have
        them), below 20 rows it goes (the header still names the host). Below 100 columns the
        side panels go, so the log pane has the whole width (beside them it would be under 60)."""
        if self._ready:
            size = self.app.size  # the terminal's: known at mount, before this screen's layout
            card = self.query_one(HostCard)
            card.display = size.height >= 20
            card.set_class(size.height < 30, "-compact")
            self.query_one("#side").display = size.width >= 100

    def set_now(self, now: float) -> None:
        if not self._ready or not self.query(HostCard):
            return  # not composed yet, or being torn down (the app's timers fire until exit)
        self.query_one(HostCard).now = now
        state = self.watcher.state(now)
        self.query_one(PhaseTimeline).update_state(state, now)
        self.query_one(UnitPanel).update_state(state, now)

    def _say(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def action_back(self) -> None:
        """Escape: first the filter goes (its box open, or kept with enter), then the screen."""
        box = self.query_one("#filter", Input)
        kept = box.value
        if box.has_class("-open") or kept:
            box.value = ""
            box.remove_class("-open")
            self.log_pane.set_filter(None)
            self.log_pane.search(None)
            self._say(f"filter “{plain(kept, max_chars=60)}” cleared (escape again goes back)" if kept else "")
            self.log_pane.focus()
            return
        self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``/`` while typing in the filter box is a letter of the filter."""
        return not (action == "filter" and isinstance(self.focused, Input))

    def action_filter(self) -> None:
        """``/``: open the log filter box and focus it at once (the next key goes to the focused widget)."""
        box = self.query_one("#filter", Input)
        box.add_class("-open")
        self.set_focus(box)

    def on_input_changed(self, event: Input.Changed) -> None:
        if not event.value and self.log_pane.filter is None and self.log_pane.search_term is None:
            return  # cleared already (escape, e): keep what the status line says about it
        self.log_pane.set_filter(event.value or None)
        self.log_pane.search(event.value)
        self.log_pane.scroll_to(x=0, animate=False)  # matches start at the left edge
        self._say(f"filter: {event.value}" if event.value else "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("-open")
        self.log_pane.focus()
        self._say(f"filter: {event.value}" if event.value else "")

    def action_next_match(self) -> None:
        if not self.log_pane.search_term:
            self._say("nothing to step through: press / and type what to look for")
            return
        self.log_pane.next_match()

    def action_prev_match(self) -> None:
        if not self.log_pane.search_term:
            self._say("nothing to step through: press / and type what to look for")
            return
        self.log_pane.prev_match()

    def action_error(self) -> None:
        err = self.watcher.state().error
        if err is None:
            self._say("no error line in this start")
            return
        self.log_pane.set_filter(None)
        self.log_pane.search(None)
        self.query_one("#filter", Input).value = ""
        self.log_pane.scroll_to(x=0, animate=False)
        if not self.log_pane.jump_to_seq(err.line):
            self._say("the error line is older than the lines kept")
        else:
            self._say(f"error line {err.line}: {err.cause}")

    def action_unit_action(self, action: str) -> None:
        """An action key: it acts on this screen's host."""
        self.app.request_action(self.watcher.name, action)  # type: ignore[attr-defined]

    def action_copy_report(self) -> None:
        """``c``: copy the Markdown report of this screen's host."""
        self.app.copy_report(self.watcher.name)  # type: ignore[attr-defined]

    def action_follow(self) -> None:
        self.log_pane.follow = not self.log_pane.follow
        self._say("following the tail" if self.log_pane.follow else "follow off")
