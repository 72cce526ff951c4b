"""Screens: the overview grid of host cards and help (a host's detail screen is
:mod:`tui.detail_screen`).

Screens render snapshots the app hands them (``update_host``, ``set_now``); they do no I/O.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Header, Label, Static

from probes.data.state import HostState
from probes.fold.verdict import HEADLINES, headline
from tui.actions import ACTION_BINDINGS, READ_ONLY_FOOTER
from widgets.host_card import HostCard
from widgets.overview import CardGrid

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


def summary(states) -> str:
    """``4 hosts: 1 failed · 1 stale · 1 stalled · 1 ready``: the header's answer to "up?", worst
    first, so a narrow terminal cuts the good news, not the bad. Each host counts once: a stale
    host as ``stale`` (its state is only the last known one), a host never reached as
    ``unreachable``."""
    states = list(states)
    counts: dict[str, int] = {}
    stale = 0
    for s in states:
        h = headline(s)
        if s.stale_since is not None and h not in ("unreachable", "ssh refused"):
            stale += 1  # its state is only the last known one: counted as stale, nothing else
            continue
        counts[h] = counts.get(h, 0) + 1
    parts = [f"{counts[k]} {k}" for k in HEADLINES if counts.get(k)]
    if stale:
        parts.insert(1 if counts.get("failed") else 0, f"{stale} stale")
    n = len(states)
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

    # Arrow keys move between cards in the grid's own layout (CardGrid's bindings).
    BINDINGS = [
        Binding("enter", "open", "Details"),
        Binding("c", "copy_report", "Copy report", show=False),
        *ACTION_BINDINGS,
    ]

    def __init__(self, hosts: list[str]) -> None:
        super().__init__()
        self.hosts = hosts
        self._states: dict[str, HostState] = {}
        self._ready = False  # set once composed: the app's timers may call in before that

    def compose(self) -> ComposeResult:
        yield Header()
        yield CardGrid(id="grid")
        yield ModeFooter()

    @property
    def grid(self) -> CardGrid:
        return self.query_one(CardGrid)

    def update_host(self, state: HostState) -> None:
        if not self._ready or not self.query(CardGrid):
            return
        # The state was judged at the app's one "now": the card gets both at once (tui/app.py).
        self.grid.update_host(state).now = self.app.now  # type: ignore[attr-defined]
        self._states[state.host] = state
        self.sub_title = summary(self._states.values())

    def set_now(self, now: float) -> None:
        if self._ready and self.query(CardGrid):
            self.grid.set_now(now)

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
