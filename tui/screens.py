"""Screens: the overview grid of host cards, a host's detail screen, and help.

Screens render snapshots the app hands them (``update_host``, ``set_now``); they do no I/O except
asking a watcher for log entries they have not shown yet.
"""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import Reactive
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Header, Input, Label, Static

from probes.data.state import HostState
from probes.fold.verdict import HEADLINES, headline
from probes.watch.watcher import HostWatcher
from tui.actions import ACTION_BINDINGS, READ_ONLY_FOOTER
from widgets.detail import GpuHistory, PhaseTimeline, UnitPanel
from widgets.host_card import HostCard
from widgets.log_pane import LogPane
from widgets.overview import CardGrid
from widgets.text import plain

HELP = """\
upwatch: is the server up yet?

Overview
  arrows / tab     move between host cards
  enter / click    open the host's detail screen
  c                copy a Markdown report of the host (also on the
                   detail screen; OSC 52: `upwatch report HOST` prints it)
  ?                this help
  t                light / dark theme
  q, ctrl+c        quit

Actions (focused card, or the detail screen; each asks first,
showing the exact command; escape or n cancels; off with --read-only)
  r                restart the unit
  s                stop the unit
  S                start the unit
  k                SIGKILL every process of the unit
  K                SIGKILL processes holding GPU memory outside the unit
  R                safe restart: stop, wait for free GPUs, start

Detail screen
  /                filter the log (enter keeps it, escape clears it)
  n / N            next / previous line matching the filter
  e                jump to the decisive error line
  f                follow the tail on / off
  left / right     scroll long lines sideways (e and / go back left)
  escape           back to the overview

Card: host · unit · engine · readiness · restarts, the phase bar
(current phase lit, progress inside), time in phase and since start,
GPU memory and utilisation, the last log line, and what is wrong.
Readiness: not running → port closed → HTTP unhealthy → healthy → serving.
The card's first word is the worst that is true: FAILED, UNREACHABLE
(never reached), SSH REFUSED (host key or login refused), CANNOT SEE
(the unit or journal cannot be read), NO SUCH UNIT, RESTART LOOP,
STALLED (no log line for minutes while loading), LOADING, READY, STOPPED.
STALE: the host stopped answering; the card keeps the last known state.
"""


def counted_as(state: HostState) -> str:
    """What a host counts as in the header (:func:`summary`): its headline (``failed``,
    ``loading`` ...), or ``stale`` when it stopped answering (its state is only the last known
    one), except a host never reached (``unreachable``, ``ssh refused``)."""
    h = headline(state)
    if state.stale_since is not None and h not in ("unreachable", "ssh refused"):
        return "stale"
    return h


def summary(states) -> str:
    """``4 hosts: 1 failed · 1 stale · 1 stalled · 1 ready``: the header's answer to "up?", worst
    first, so a narrow terminal cuts the good news, not the bad. Each host counts once
    (:func:`counted_as`)."""
    counts: dict[str, int] = {}
    for s in states:
        key = counted_as(s)
        counts[key] = counts.get(key, 0) + 1
    return summary_of(counts)


def summary_of(counts: dict[str, int]) -> str:
    """:func:`summary` from the number of hosts counted as each :func:`counted_as` word."""
    parts = [f"{counts[k]} {k}" for k in HEADLINES if counts.get(k)]
    stale = counts.get("stale", 0)
    if stale:
        parts.insert(1 if counts.get("failed") else 0, f"{stale} stale")
    n = sum(counts.values())
    return f"{n} host{'s' if n != 1 else ''}: " + " · ".join(parts) if parts else ""


class ModeFooter(Footer):
    """The key footer, ending in :data:`~tui.actions.READ_ONLY_FOOTER` when the app's actions are
    off (``--read-only``, ``read_only = true``, every ``upwatch serve`` browser)."""

    DEFAULT_CSS = "ModeFooter > .mode { width: auto; margin: 0 1; color: $text-warning; }"

    def compose(self) -> ComposeResult:
        yield from super().compose()
        if getattr(getattr(self.app, "actions", None), "read_only", False):
            yield Label(READ_ONLY_FOOTER, classes="mode", markup=False)


class OverviewScreen(Screen[None]):
    """A grid of host cards that fills the screen (columns of cards at least 60 wide; scrolls when the rows do not fit)."""

    #: The header's counts (:func:`summary`). Unlike Screen's own, a new value repaints only the
    #: header (which watches it), not the whole screen.
    sub_title: Reactive[str | None] = Reactive(None, compute=False, repaint=False)

    # Arrow keys move between cards in the grid's own layout (CardGrid's bindings).
    BINDINGS = [
        Binding("enter", "open", "Details"),
        Binding("c", "copy_report", "Copy report", show=False),
        *ACTION_BINDINGS,
    ]

    def __init__(self, hosts: list[str]) -> None:
        super().__init__()
        self.hosts = hosts
        self._counted_as: dict[str, str] = {}  # host -> what it counts as in the header
        self._counts: dict[str, int] = {}  # ... and how many hosts count as each
        self._ready = False  # set once composed: the app's timers may call in before that
        self._grid = CardGrid(id="grid")  # one lookup, not a DOM query per host and flush
        self._summary_due = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield self._grid
        yield ModeFooter()

    @property
    def grid(self) -> CardGrid:
        return self._grid

    def _live(self) -> bool:
        """Composed and not being torn down (the app's timers call in before and after)."""
        return self._ready and self._grid.is_attached

    def update_host(self, state: HostState) -> None:
        if not self._live():
            return
        # The state was judged at the app's one "now": the card gets both at once (tui/app.py).
        self._grid.update_host(state).now = self.app.now  # type: ignore[attr-defined]
        # The header's counts, of every host's latest state, kept up to date one host at a time.
        key, old = counted_as(state), self._counted_as.get(state.host)
        if key != old:
            self._counted_as[state.host] = key
            if old is not None:
                self._counts[old] -= 1
            self._counts[key] = self._counts.get(key, 0) + 1
            if not self._summary_due:
                self._summary_due = True
                self.call_later(self._show_summary)

    def _show_summary(self) -> None:
        self._summary_due = False
        self.sub_title = summary_of(self._counts)

    def set_now(self, now: float) -> None:
        if self._live():
            self._grid.set_now(now)

    def on_mount(self) -> None:
        self._ready = True
        app = self.app
        now = app.now  # type: ignore[attr-defined]  # the screen's one clock (tui/app.py)
        for name in self.hosts:
            self.update_host(app.watchers[name].state(now))  # type: ignore[attr-defined]
        self.grid.set_now(now)
        cards = list(self.query(HostCard))
        if cards:
            cards[0].focus()

    def _cards(self) -> list[HostCard]:
        return list(self.query(HostCard))

    def action_move(self, step: int) -> None:
        cards = self._cards()
        if not cards:
            return
        focused = self.focused
        i = cards.index(focused) if focused in cards else -1
        target = cards[(i + step) % len(cards)]
        target.focus()
        target.scroll_visible()

    def action_open(self) -> None:
        focused = self.focused
        if isinstance(focused, HostCard):
            self.app.open_detail(focused.state.host)  # type: ignore[attr-defined]

    def _target_card(self) -> HostCard | None:
        """The card a key acts on: the focused one, else the only one; None (and a toast saying
        to focus one) when neither."""
        focused = self.focused
        if isinstance(focused, HostCard):
            return focused
        cards = self._cards()
        if len(cards) != 1:
            self.app.notify("focus a host card first (arrows or tab)", markup=False)
            return None
        return cards[0]

    def action_unit_action(self, action: str) -> None:
        """An action key: it acts on the focused card's host."""
        card = self._target_card()
        if card is not None:
            self.app.request_action(card.state.host, action)  # type: ignore[attr-defined]

    def action_copy_report(self) -> None:
        """``c``: copy the Markdown report of the focused card's host (the only card's, when one)."""
        card = self._target_card()
        if card is not None:
            self.app.copy_report(card.state.host)  # type: ignore[attr-defined]

    def on_host_card_selected(self, message: HostCard.Selected) -> None:
        self.app.open_detail(message.host)  # type: ignore[attr-defined]


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
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("n", "next_match", "Next match"),
        Binding("N", "prev_match", "Prev match", key_display="N"),
        Binding("e", "error", "Error"),
        Binding("f", "follow", "Follow"),
        Binding("c", "copy_report", "Copy report", show=False),
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
        box = self.query_one("#filter", Input)
        if box.has_class("-open"):
            box.value = ""
            box.remove_class("-open")
            self.log_pane.set_filter(None)
            self._say("")
            self.log_pane.focus()
            return
        self.app.pop_screen()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-open")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
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


class HelpScreen(ModalScreen[None]):
    """The keys, and what the card shows."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 77; height: auto; max-height: 90%; border: thick $accent;
                                  background: $surface; padding: 1 2; scrollbar-size-vertical: 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, notifications: list[str] | None = None) -> None:
        super().__init__()
        self.notifications = list(notifications or ())

    def compose(self) -> ComposeResult:
        with VerticalScroll():  # focused: up/down, page up/down, home/end scroll it
            text = HELP
            if self.notifications:
                text += "\nNotifications not sent (the last failure per target)\n" + "".join(
                    f"  {line}\n" for line in self.notifications)
            yield Static(text, markup=False)

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()
