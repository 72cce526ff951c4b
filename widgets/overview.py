"""The overview: every host's card in a grid that fills the screen (as many columns as fit cards
at least 60 cells wide), and scrolls when the cards need more rows than the screen has."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.widget import AwaitMount
from textual.layout import Layout
from textual.layouts.grid import GridLayout

from probes.data.state import HostState
from widgets.host_card import HostCard

__all__ = ["CardGrid", "CARD_ROWS", "grid_columns", "cards_on_screen"]

#: Cards :meth:`CardGrid.catch_up` mounts at a time, after its first ones (one refresh between).
MOUNT_BATCH = 32
#: Rows a card takes at its smallest: a one-line verdict, its border included (widgets/host_card.py).
CARD_ROWS = 9


def grid_columns(cards: int, width: int, min_card_width: int = 60) -> int:
    """How many columns ``width`` cells hold: cards at least ``min_card_width`` wide, at most one
    column per card, at least one."""
    return max(1, min(cards or 1, width // max(1, min_card_width)))


def cards_on_screen(cards: int, width: int, height: int, min_card_width: int = 60) -> int:
    """How many of ``cards`` cards, each at its smallest (:data:`CARD_ROWS`), a grid of ``width``
    x ``height`` cells shows without scrolling (at 160x46: 2 columns of 5 rows, 10; at 80x22: 2),
    at least one. Known before any card is made: the overview's ``auto`` view asks it."""
    columns = grid_columns(cards, width, min_card_width)
    return max(1, min(cards, columns * (height // CARD_ROWS)))


class CardGrid(ScrollableContainer, can_focus=False):
    """Host cards in a grid that fills the screen and scrolls vertically when it must.

    Columns: as many as fit cards at least ``min_card_width`` cells wide, and no more than there
    are cards (60: two columns from 120 cells, three from 180); the class ``-one-column`` is set
    when there is one. Rows: each as tall as its tallest card needs (a card never cuts its
    verdict); when all rows fit the screen, the free rows are shared out so the grid fills it
    (equal rows where they can be), else the grid scrolls. Decided before every layout, so a
    resize, a new card or a verdict that needs another row all lay it out again. Cards keep the
    order in which their hosts first arrived. Arrow keys move the focus between cards.

    Only what is on screen is drawn: after every layout and scroll the grid marks each card on or
    off screen (:meth:`check_on_screen`); a card off screen keeps the states it is given and
    draws the latest when it is scrolled back into view, and the clock (:meth:`set_now`) moves
    only the cards on screen.

    Args:
        min_card_width: the narrowest a card may be laid out, in cells (border included).
    """

    BINDINGS: ClassVar = [
        Binding("up", "move(-1, 0)", "Up", show=False),
        Binding("down", "move(1, 0)", "Down", show=False),
        Binding("left", "move(0, -1)", "Left", show=False),
        Binding("right", "move(0, 1)", "Right", show=False),
    ]

    DEFAULT_CSS = """
    CardGrid {
        layout: grid;
        grid-size: 1;
        grid-rows: auto;
        grid-gutter: 0;
        height: 1fr;
        width: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
    }
    """

    def __init__(self, *, min_card_width: int = 60, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.min_card_width = min_card_width
        self._cards: dict[str, HostCard] = {}
        self._pending: list[HostCard] = []  # made, mounted after the next refresh (:meth:`catch_up`)
        self._now = 0.0

    @property
    def columns(self) -> int:
        """How many columns the grid lays out now."""
        return max(1, self.styles.grid_size_columns)

    @property
    def cards(self) -> dict[str, HostCard]:
        """The cards by host name (a copy), in display order."""
        return dict(self._cards)

    def card(self, host: str) -> HostCard | None:
        """The card of ``host``, or None."""
        return self._cards.get(host)

    def on_mount(self) -> None:
        # After every layout and every scroll (a resize, a card that grew, a focus move that
        # scrolled): which cards are on screen now.
        self.screen.screen_layout_refresh_signal.subscribe(self, lambda _screen: self.check_on_screen())

    def update_host(self, state: HostState) -> HostCard:
        """Show ``state`` on its host's card, creating the card on first sight. A card off screen
        keeps it and shows it when it is scrolled into view (:meth:`check_on_screen`).

        Returns:
            The host's card.
        """
        card = self._cards.get(state.host)
        if card is None:
            card = HostCard(state, self._now)
            self._cards[state.host] = card
            if self._pending:  # after the cards still to be mounted: the order is the arrival's
                card.set_on_screen(False)
                self._pending.append(card)
            else:
                self.mount(card)
                self.refresh(layout=True)  # the columns may change with the number of cards
        else:
            card.state = state
        return card

    def catch_up(self, states: Iterable[HostState], mount_now: int) -> None:
        """Show each of ``states`` on its host's card, making the cards missing (the grid was
        hidden: 128 hosts in rows have none). Of the cards made, those among the first
        ``mount_now`` of ``states`` are mounted at once, in one batch; the others after the next
        refresh, so the first picture waits for a screenful of cards, not for all (128 composed
        at once: the body stayed blank ~3 s). A card not mounted yet keeps the states it is given."""
        now_cards: list[HostCard] = []
        for i, state in enumerate(states):
            card = self._cards.get(state.host)
            if card is not None:
                card.state = state
                continue
            card = HostCard(state, self._now)
            self._cards[state.host] = card
            if i < mount_now and not self._pending:
                now_cards.append(card)
            else:
                card.set_on_screen(False)  # until it is laid out (check_on_screen)
                self._pending.append(card)
        if now_cards:
            mounted = self.mount_all(now_cards)  # in the DOM now (the screen may focus one), composed later
            self.refresh(layout=True)
            if self._pending:
                self.call_later(self._mount_pending_after, mounted)
        elif self._pending:
            self.call_after_refresh(self._mount_pending)

    async def _mount_pending_after(self, mounted: AwaitMount) -> None:
        """Once the first cards are composed, the others after the picture that shows them."""
        await mounted
        self.call_after_refresh(self._mount_pending)

    def _mount_pending(self) -> None:
        """Mount :data:`MOUNT_BATCH` of the cards still to be mounted, the next batch after the
        next refresh: the screen answers keys in between."""
        batch, self._pending = self._pending[:MOUNT_BATCH], self._pending[MOUNT_BATCH:]
        if not self.is_attached:
            return
        if batch:
            self.mount_all(batch)
            self.refresh(layout=True)
        if self._pending:
            self.call_after_refresh(self._mount_pending)

    @property
    def mounting(self) -> int:
        """Cards made but not mounted yet (:meth:`catch_up`)."""
        return len(self._pending)

    def check_on_screen(self) -> None:
        """Mark each card on screen when any part of it is in the grid's view, else off
        (:attr:`HostCard.on_screen`): one off screen costs nothing (no restyle, redraw or
        measure) until it is back, when it shows its latest state and the grid's clock. A card
        not laid out yet stays as it is. Called after every layout and scroll of the screen."""
        if not self.is_attached:
            return
        for card in self._cards.values():
            if not card.region:
                continue  # not laid out yet (just mounted): it draws its first state itself
            on = self.can_view_partial(card)
            if on and not card.on_screen:
                card.now = self._now
            card.set_on_screen(on)

    def hosts_on_screen(self) -> set[str]:
        """The hosts whose cards are on screen (:attr:`HostCard.on_screen`; a card just made,
        not laid out yet, counts as on)."""
        return {host for host, card in self._cards.items() if card.on_screen}

    def remove_host(self, host: str) -> None:
        """Remove a host's card, if it has one."""
        card = self._cards.pop(host, None)
        if card is not None:
            card.remove()

    def set_now(self, now: float) -> None:
        """Set the clock of the cards on screen (the app's shared 1 Hz tick); a card off screen
        gets it when it is back on."""
        self._now = now
        for card in self._cards.values():
            if card.on_screen:
                card.now = now

    def columns_for(self, width: int) -> int:
        """How many columns ``width`` cells hold (:func:`grid_columns` for the cards it has)."""
        return grid_columns(len(self._cards), width, self.min_card_width)

    def pre_layout(self, layout: Layout) -> None:
        """Before each layout: the columns for the width, and the rows (see the class docstring)."""
        if not isinstance(layout, GridLayout):
            return
        layout.stretch_height = True  # a card fills its row, so cards side by side line up
        width, height = self.outer_size
        if width <= 0:
            return
        columns = self.columns_for(width)
        self.styles.grid_size_columns = columns
        self.set_class(columns == 1, "-one-column")
        self.styles.grid_rows = self._rows(columns, width, height)

    def _rows(self, columns: int, width: int, height: int) -> str:
        """``grid-rows`` for ``columns``: the rows' heights when all fit ``height``, else "auto"."""
        cards = [c for c in self._cards.values() if c.display]
        if not cards or height <= 0:
            return "auto"
        viewport = self.app.size
        col_w = width // columns  # the grid shares the width out, the first columns taking the rest
        needs: list[int] = []
        for i in range(0, len(cards), columns):
            row = 0
            for card in cards[i:i + columns]:
                gw, gh = card.styles.gutter.totals
                row = max(row, card.get_content_height(self.outer_size, viewport, col_w - gw) + gh)
            needs.append(row)
            if sum(needs) > height:
                # More than the screen holds (known without measuring the rest): each row as
                # tall as it needs, and scroll.
                return "auto"
        even, rest = divmod(height, len(needs))
        if max(needs) <= even:
            return " ".join(str(even + (1 if k < rest else 0)) for k in range(len(needs)))
        free, rest = divmod(height - sum(needs), len(needs))
        return " ".join(str(n + free + (1 if k < rest else 0)) for k, n in enumerate(needs))

    def action_move(self, rows: int, cols: int) -> None:
        """Focus the card ``rows`` rows and ``cols`` columns away from the focused one (the first
        card when none is), scrolled into view; a move that would leave the grid does nothing
        (no wrap). The focus moves at once (:meth:`~textual.screen.Screen.set_focus`, not the
        deferred ``Widget.focus``), so the next key, however fast it follows, moves on from the
        new card."""
        cards = list(self._cards.values())
        if not cards:
            return
        screen = self.screen
        focused = screen.focused
        if not isinstance(focused, HostCard) or focused not in self._cards.values():
            target = cards[0]
        else:
            i = cards.index(focused)
            j = i + rows * self.columns + cols
            if not 0 <= j < len(cards):
                return
            target = cards[j]
        screen.set_focus(target, scroll_visible=False)
        target.scroll_visible(animate=False)
