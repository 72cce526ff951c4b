"""The overview: every host's card in a scrolling grid, two columns on a wide screen, one below."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.events import Resize

from probes.state import HostState
from widgets.host_card import HostCard

__all__ = ["CardGrid"]


class CardGrid(ScrollableContainer, can_focus=False):
    """Host cards in a grid that scrolls vertically.

    Two columns when the grid is at least ``two_columns_at`` cells wide (160: two 80-cell cards),
    one column below; the class ``-one-column`` is set in the narrow case (decided on every
    resize, so CSS alone lays it out). Cards keep the order in which their hosts first arrived.
    Arrow keys move the focus between cards.

    Args:
        two_columns_at: the narrowest width, in cells, that gets two columns.
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
        grid-size: 2;
        grid-columns: 1fr 1fr;
        grid-rows: 11;
        grid-gutter: 0;
        height: 1fr;
        width: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
        &.-one-column {
            grid-size: 1;
            grid-columns: 1fr;
        }
    }
    """

    def __init__(self, *, two_columns_at: int = 160, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.two_columns_at = two_columns_at
        self._cards: dict[str, HostCard] = {}
        self._now = 0.0

    @property
    def columns(self) -> int:
        """How many columns the grid lays out now."""
        return 1 if self.has_class("-one-column") else 2

    @property
    def cards(self) -> dict[str, HostCard]:
        """The cards by host name (a copy), in display order."""
        return dict(self._cards)

    def card(self, host: str) -> HostCard | None:
        """The card of ``host``, or None."""
        return self._cards.get(host)

    def update_host(self, state: HostState) -> HostCard:
        """Show ``state`` on its host's card, creating the card on first sight.

        Returns:
            The host's card.
        """
        card = self._cards.get(state.host)
        if card is None:
            card = HostCard(state, self._now)
            self._cards[state.host] = card
            self.mount(card)
        else:
            card.state = state
        return card

    def remove_host(self, host: str) -> None:
        """Remove a host's card, if it has one."""
        card = self._cards.pop(host, None)
        if card is not None:
            card.remove()

    def set_now(self, now: float) -> None:
        """Set every card's clock (the app's shared 1 Hz tick)."""
        self._now = now
        for card in self._cards.values():
            card.now = now

    def _layout_columns(self, width: int) -> None:
        self.set_class(width < self.two_columns_at, "-one-column")

    def on_mount(self) -> None:
        self._layout_columns(self.outer_size.width or self.app.size.width)

    def on_resize(self, event: Resize) -> None:
        self._layout_columns(self.outer_size.width)

    def action_move(self, rows: int, cols: int) -> None:
        """Focus the card ``rows`` rows and ``cols`` columns away from the focused one."""
        cards = list(self._cards.values())
        if not cards:
            return
        focused = self.app.focused
        if focused not in cards:
            cards[0].focus()
            return
        i = cards.index(focused)
        j = i + rows * self.columns + cols
        if 0 <= j < len(cards):
            cards[j].focus()
            cards[j].scroll_visible(animate=False)
