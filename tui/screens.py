"""The overview screen (the grid of host cards, or one row per host) and the footer every screen
shows; a host's detail screen is :mod:`tui.detail_screen`, the help :mod:`tui.help_screen`.

Screens render snapshots the app hands them (``update_host``, ``set_now``); they do no I/O.
"""

from __future__ import annotations


from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Label
from textual.widgets._footer import FooterKey

from probes.data.state import HostState
from probes.fold.headline import HEADLINES
from tui.actions import ACTION_BINDINGS, READ_ONLY_FOOTER
from widgets.host_card import HostCard
from widgets.host_rows import condition
from widgets.host_table import HostTable
from widgets.overview import CardGrid, cards_on_screen

def summary(states) -> str:
    """``4 hosts: 1 failed · 1 stale · 1 stalled · 1 ready``: the header's answer to "up?", worst
    first, so a narrow terminal cuts the good news, not the bad. Each host counts once: a stale
    host as ``stale`` (its state is only the last known one), a host never reached as
    ``unreachable`` (:func:`widgets.host_rows.condition`)."""
    counts: dict[str, int] = {}
    for s in states:
        key = condition(s)
        counts[key] = counts.get(key, 0) + 1
    return summary_of(counts)


def summary_of(counts: dict[str, int]) -> str:
    """:func:`summary` from the number of hosts in each :func:`~widgets.host_rows.condition` (the
    overview keeps them, so a state that changes no host's condition costs no count)."""
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
    #: Narrower than this (columns), the keys are drawn compact (less space between them), so the
    #: footer of the detail screen still ends with ``? Help`` at 80 columns.
    COMPACT_BELOW = 120
    #: Narrower than this, the keys' words are the short ones of :data:`SHORT` and the theme key
    #: (also in the command palette) is left out, so the overview's footer over the rows still ends
    #: with ``? Help`` at 80 columns (it was cut at ``q Qu``).
    SHORT_BELOW = 100
    SHORT = {"Details": "Open", "Copy report": "Copy"}
    LEFT_OUT_SHORT = ("toggle_dark",)

    _short = False  # the words composed are the short ones

    async def on_resize(self) -> None:
        self.compact = self.size.width < self.COMPACT_BELOW
        if self._short != (self.size.width < self.SHORT_BELOW):
            await self.recompose()

    def compose(self) -> ComposeResult:
        # The app's width: the footer's own is 0 before its first layout.
        self._short = short = self.app.size.width < self.SHORT_BELOW
        for widget in super().compose():
            if short and isinstance(widget, FooterKey):
                if widget.action in self.LEFT_OUT_SHORT:
                    continue
                words = widget.description
                widget.description = self.SHORT.get(words, words.removeprefix("View: "))
            yield widget
        if getattr(getattr(self.app, "actions", None), "read_only", False):
            yield Label(READ_ONLY_FOOTER, classes="mode", markup=False)


class OverviewScreen(Screen[None]):
    """Every host: a grid of host cards that fills the screen (columns of cards at least 60 wide;
    scrolls when the rows do not fit), or the compact view, one row per host (:class:`HostTable`).

    Which one (``v`` cycles; the footer says): ``auto`` (the default) shows the cards while at
    least half of them, each at its smallest, are on the screen at once
    (:func:`widgets.overview.cards_on_screen`: up to 20 hosts at 160x48, 4 at 80x24), else the
    rows: past that, scrolling cards is no overview; ``cards``; ``compact``. The cards are made
    only when first shown (128 hosts in rows cost no card). The header counts every host.
    """

    DEFAULT_CSS = """
    OverviewScreen #filter { dock: bottom; display: none; }
    OverviewScreen #filter.-open { display: block; }
    """

    #: The header's counts (:func:`summary`). Unlike Screen's own, a new value repaints only the
    #: header (which watches it), not the whole screen.
    sub_title: Reactive[str | None] = Reactive(None, compute=False, repaint=False)

    # Arrow keys move between cards in the grid's own layout (CardGrid's bindings), between rows
    # in the table's (HostTable's).
    BINDINGS = [
        Binding("enter", "open", "Details"),
        Binding("c", "copy_report", "Copy report"),
        # A priority binding: it runs as the key arrives, so letters sent in the same read (a paste,
        # `tmux send-keys "/gpu-01" Enter`, an agent) go to the box it focuses, not to the rows.
        Binding("slash", "filter", "Filter", key_display="/", priority=True),
        Binding("o", "order", "Order"),
        *(Binding("v", f"cycle_view('{label}')", f"View: {label.replace(':', ' (')}{')' if ':' in label else ''}")
          for label in ("auto:cards", "auto:compact", "cards", "compact")),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        *ACTION_BINDINGS,
    ]

    #: The views ``v`` cycles through.
    VIEWS = ("auto", "cards", "compact")

    def __init__(self, hosts: list[str], view: str = "auto") -> None:
        super().__init__()
        if view not in self.VIEWS:
            raise ValueError(f"unknown view {view!r}; one of {', '.join(self.VIEWS)}")
        self.hosts = hosts
        self.view = view
        self._compact = False  # what is shown now: decided from ``view`` and the screen's size
        self._grid_behind = True  # states came in while the grid was not shown
        self._states: dict[str, HostState] = {}
        self._conditions: dict[str, str] = {}  # host -> its condition in the header's counts
        self._counts: dict[str, int] = {}  # ... and how many hosts are in each
        self._summary_due = False
        self._grid = CardGrid(id="grid")  # one lookup each, not a DOM query per host and flush
        self._table = HostTable(id="table")
        self._ready = False  # set once composed: the app's timers may call in before that
        self._grid = CardGrid(id="grid")  # one lookup, not a DOM query per host and flush
        self._summary_due = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield self._grid
        yield self._table
        yield Input(placeholder="filter the hosts by name or state (plain text, case-insensitive)", id="filter")
        yield ModeFooter()

    @property
    def grid(self) -> CardGrid:
        return self._grid

    @property
    def table(self) -> HostTable:
        return self._table

    @property
    def compact(self) -> bool:
        """Whether the rows (not the cards) are shown."""
        return self._compact

    def _shown(self) -> bool:
        """Composed and not being torn down (the app's timers call in before and after); cheap:
        it is asked on every state update, so it must not walk the DOM."""
        return self._ready and self._table.is_attached

    def update_host(self, state: HostState) -> None:
        if not self._shown():
            return
        self._states[state.host] = state
        # The header's counts, of every host's latest state, kept up to date one host at a time
        # and shown once per batch of updates.
        key, old = condition(state), self._conditions.get(state.host)
        if key != old:
            self._conditions[state.host] = key
            if old is not None:
                self._counts[old] -= 1
            self._counts[key] = self._counts.get(key, 0) + 1
            if not self._summary_due:
                self._summary_due = True
                self.call_later(self._show_summary)
        self._table.update_host(state)
        if self._compact:
            self._grid_behind = True  # the grid catches up when it is shown
            return
        # The state was judged at the app's one "now": the card gets both at once (tui/app.py).
        self._grid.update_host(state).now = self.app.now  # type: ignore[attr-defined]

    def shown_hosts(self) -> set[str]:
        """The hosts whose row or card is on screen now (the app takes a new snapshot of these
        between its ticks; of the others at every tick)."""
        if not self._shown():
            return set()
        if self._compact:
            return set(self._table.hosts_in_view())
        return self._grid.hosts_on_screen()

    def _show_summary(self) -> None:
        self._summary_due = False
        self.sub_title = summary_of(self._counts)

    def set_now(self, now: float) -> None:
        if self._shown():
            if self._compact:
                self._table.set_now(now)
            else:
                self._grid.set_now(now)

    def on_mount(self) -> None:
        self._ready = True
        app = self.app
        now = app.now  # type: ignore[attr-defined]  # the screen's one clock (tui/app.py)
        self._compact = self._wants_compact()
        for name in self.hosts:
            self.update_host(app.watchers[name].state(now))  # type: ignore[attr-defined]
        self._show_view()

    # --- the view: cards or rows -----------------------------------------------------------------

    def _wants_compact(self) -> bool:
        if self.view != "auto":
            return self.view == "compact"
        size = self.app.size  # the terminal's: known at mount, before this screen's layout
        n = len(self.hosts)
        return n > 2 * cards_on_screen(n, size.width, size.height - 2)  # less header and footer

    def _show_view(self) -> None:
        """Show the cards or the rows (as :attr:`_compact` says); the focus goes to the same host."""
        grid, table = self.grid, self.table
        focused = self.focused
        card_host = focused.state.host if isinstance(focused, HostCard) else None
        host = card_host or (table.cursor_host if self.focused is table else None)
        if not self._compact and self._grid_behind:
            # The cards of two screens (and of the host to focus, with those before it) at once,
            # the rest after the first picture (widgets.overview.CardGrid.catch_up).
            size = self.app.size
            first = 2 * cards_on_screen(len(self._states), size.width, size.height - 2)
            if host is not None and host in self._states:
                first = max(first, list(self._states).index(host) + 1 + first // 2)
            grid.catch_up(self._states.values(), first)
            self._grid_behind = False
        now = self.app.now  # type: ignore[attr-defined]
        grid.display = not self._compact
        table.display = self._compact
        (table if self._compact else grid).set_now(now)
        if self._compact:
            if card_host is not None:
                table.move_to_host(card_host)
            table.focus()
        else:
            self._close_filter()
            card = grid.card(host) if host is not None else None
            cards = self._cards()
            if card is None and cards:
                card = cards[0]
            if card is not None:
                self.set_focus(card, scroll_visible=False)
                # The grid was not laid out while hidden: scroll once it is (a fresh user switched
                # from the rows on gpu-b05 and saw gpu-a01 to a03, the focus off screen).
                self.call_after_refresh(card.scroll_visible, animate=False)
        self.refresh_bindings()

    def on_resize(self, event) -> None:
        if self._ready and self.view == "auto" and self._wants_compact() != self._compact:
            self._compact = not self._compact
            self._show_view()

    @property
    def _view_label(self) -> str:
        if self.view == "auto":
            return f"auto:{'compact' if self._compact else 'cards'}"
        return self.view

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The ``v`` binding whose words say the view shown; ``/``, ``o`` and escape only over the rows."""
        if action == "cycle_view":
            return parameters[0] == self._view_label
        if action == "filter":  # not while typing in the box: a "/" there is a letter of the filter
            return self._compact and not isinstance(self.focused, Input)
        if action in ("order", "clear_filter"):
            return self._compact
        return True

    def action_cycle_view(self, _shown: str) -> None:
        """``v``: the next of :data:`VIEWS` (auto, cards, compact)."""
        self.set_view(self.VIEWS[(self.VIEWS.index(self.view) + 1) % len(self.VIEWS)])

    def set_view(self, view: str) -> None:
        """Show ``view`` (one of :data:`VIEWS`).

        Raises:
            ValueError: for another view.
        """
        if view not in self.VIEWS:
            raise ValueError(f"unknown view {view!r}; one of {', '.join(self.VIEWS)}")
        self.view = view
        compact = self._wants_compact()
        if compact != self._compact:
            self._compact = compact
            self._show_view()
        self.refresh_bindings()

    def action_order(self) -> None:
        """``o``: sort the rows by the next order (severity, name, arrival); the header says which."""
        self.table.cycle_order()

    # --- the rows' filter --------------------------------------------------------------------------

    def action_filter(self) -> None:
        """``/``: open the filter box; the rows narrow as you type."""
        box = self.query_one("#filter", Input)
        box.add_class("-open")
        self.set_focus(box)  # at once, not after a refresh: the next key goes to the focused widget

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.table.set_filter(event.value.strip())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.remove_class("-open")  # the filter stays; escape clears it
            self.table.focus()

    def action_clear_filter(self) -> None:
        """Escape: clear the filter and close its box."""
        self._close_filter()
        self.table.focus()

    def _close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("-open")
        self.table.set_filter("")

    # --- keys on a host ---------------------------------------------------------------------------

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
        host = self._target_host(quiet=True)
        if host is not None:
            self.app.open_detail(host)  # type: ignore[attr-defined]

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

    def _target_host(self, quiet: bool = False) -> str | None:
        """The host a key acts on: over the rows, the row under the cursor (None and a toast when
        the filter leaves none); over the cards, :meth:`_target_card`'s; ``quiet``: no toast
        over the cards, only the focused card counts (enter)."""
        if self._compact:
            host = self.table.cursor_host
            if host is None:
                self.app.notify("no host row: the filter leaves none (escape clears it)", markup=False)
            return host
        if quiet:
            focused = self.focused
            return focused.state.host if isinstance(focused, HostCard) else None
        card = self._target_card()
        return card.state.host if card is not None else None

    def action_unit_action(self, action: str) -> None:
        """An action key: it acts on the focused card's host, or the host of the row under the cursor."""
        host = self._target_host()
        if host is not None:
            self.app.request_action(host, action)  # type: ignore[attr-defined]

    def action_copy_report(self) -> None:
        """``c``: copy the Markdown report of the focused card's host (the only card's, when one),
        or of the row under the cursor."""
        host = self._target_host()
        if host is not None:
            self.app.copy_report(host)  # type: ignore[attr-defined]

    def on_host_card_selected(self, message: HostCard.Selected) -> None:
        self.app.open_detail(message.host)  # type: ignore[attr-defined]

    def on_host_table_selected(self, message: HostTable.Selected) -> None:
        self.app.open_detail(message.host)  # type: ignore[attr-defined]
