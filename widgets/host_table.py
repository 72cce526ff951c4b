"""The compact overview: one row per host (see :mod:`widgets.host_rows` for what a row says),
sortable, filterable, with a cursor; for fleets whose cards do not fit the screen.

It costs what is on screen, not what is watched: a line-API widget (:class:`ScrollView` and
``render_line``), so only the rows in view are ever drawn. A new state for a host redraws its row
only when the row's cells changed and the row is in view (a log line that changes no cell costs a
comparison); a state that moves the host in the sort order or in or out of the filter re-sorts
the rows (a list of at most a few hundred keys) and repaints the view. The 1 Hz tick
(:meth:`HostTable.set_now`) looks only at the rows in view whose cells can tick (ETA, stale age).

Keys: up / down / page up / page down / home / end move the cursor (each press one step, however
fast they come); enter or a click posts :class:`HostTable.Selected` for the row's host.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click, Resize
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from probes.data.state import HostState
from probes.fold.headline import headline
from widgets.host_rows import (ORDERS, RowCells, condition, header_height, header_lines, matches, row_cells, row_pieces, row_text,
                               sort_key, ticks)

__all__ = ["HostTable"]


class HostTable(ScrollView, can_focus=True):
    """One row per host under a header row (titles, the order, ``12 of 128``); see module docstring.

    Attributes (read them; change them through the methods): ``order`` (one of
    :data:`~widgets.host_rows.ORDERS`), ``needle`` (the filter text, "" for none),
    ``rows`` (the hosts shown, in order), ``cursor`` (index into ``rows``).

    Messages: :class:`HostTable.Selected` on enter or a click on a row.
    Component classes: ``host-table--header``, ``host-table--cursor``, and one per look a cell
    takes (``--muted``, ``--busy``, ``--ok``, ``--warn``, ``--error``, ``--stale``, ``--bar``,
    ``--hot``, ``--free``, ``--phase-*``, ``--level-*``).
    """

    BINDINGS: ClassVar = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("enter", "select", "Details"),
    ]

    _LOOKS = ("muted", "busy", "ok", "warn", "error", "stale", "bar", "hot", "free", "phase-current", "phase-ready",
              "phase-failed", "phase-stopped", "phase-future", "level-ok", "level-info", "level-warning",
              "level-error")
    COMPONENT_CLASSES: ClassVar[set[str]] = {"host-table--header", "host-table--cursor",
                                             *(f"host-table--{look}" for look in _LOOKS)}

    DEFAULT_CSS = """
    HostTable {
        height: 1fr;
        width: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        & > .host-table--header { color: $foreground; text-style: bold; background: $panel; }
        & > .host-table--cursor { background: $panel-lighten-2; }
        &:focus > .host-table--cursor { background: $primary-muted; text-style: bold; }
        & > .host-table--muted { color: $foreground-muted; }
        & > .host-table--busy { color: $text-primary; }
        & > .host-table--ok { color: $text-success; }
        & > .host-table--warn { color: $text-warning; }
        & > .host-table--error { color: $text-error; }
        & > .host-table--stale { background: $warning-muted; color: $text-warning; }
        & > .host-table--bar { color: $text-primary; }
        & > .host-table--hot { color: $text-warning; }
        & > .host-table--free { color: $foreground-disabled; }
        & > .host-table--phase-current { color: $text-primary; }
        & > .host-table--phase-ready { color: $text-success; }
        & > .host-table--phase-failed { color: $text-error; }
        & > .host-table--phase-stopped { color: $text-warning; }
        & > .host-table--phase-future { color: $foreground-muted; }
        & > .host-table--level-ok { color: $text-success; }
        & > .host-table--level-info { color: $text-accent; }
        & > .host-table--level-warning { color: $text-warning; }
        & > .host-table--level-error { color: $text-error; text-style: bold; }
    }
    """

    class Selected(Message):
        """The operator chose a host (enter or a click on its row).

        Attributes:
            host: the host's name. table: the table that posted it.
        """

        def __init__(self, host: str, table: HostTable) -> None:
            super().__init__()
            self.host = host
            self.table = table

        @property
        def control(self) -> HostTable:
            return self.table

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._states: dict[str, HostState] = {}  # arrival order
        self._arrival: dict[str, int] = {}
        self._keys: dict[str, tuple[str, str, str]] = {}  # what the order and the filter read of each state
        # ... and what they made of it (kept until it changes, so a re-sort sorts tuples it has)
        self._sort_keys: dict[str, tuple[object, ...]] = {}
        self._matches: dict[str, bool] = {}
        self._drawn: dict[str, tuple[RowCells, int, Strip]] = {}  # host -> (cells, width, strip) last drawn
        # host -> (state, now, its cells): the cells a change was told by are the ones then drawn
        self._cells: dict[str, tuple[HostState, float, RowCells]] = {}
        self.rows: list[str] = []
        self._index: dict[str, int] = {}
        self.order = ORDERS[0]
        self.needle = ""
        self.cursor = 0
        self._cursor_host: str | None = None  # the host the cursor follows once it was moved
        self._now = 0.0
        #: Rows drawn (render_line calls that made a row anew), for tests and the benchmark.
        self.rows_drawn = 0
        self._head = 1  # the header's lines (:meth:`_header_height`)

    # --- data ----------------------------------------------------------------------------------

    @property
    def total(self) -> int:
        """How many hosts the table holds (shown or filtered out)."""
        return len(self._states)

    @property
    def cursor_host(self) -> str | None:
        """The host of the row under the cursor, or None when no row is shown."""
        return self.rows[self.cursor] if self.rows else None

    def state(self, host: str) -> HostState | None:
        """The last state given for ``host``, or None."""
        return self._states.get(host)

    def update_host(self, state: HostState) -> None:
        """Hold ``state`` as its host's (adding the host on first sight) and redraw what it changes."""
        host = state.host
        old = self._states.get(host)
        if old is state:
            return
        self._states[host] = state
        if old is None:
            self._arrival[host] = len(self._arrival)
        key = _order_key(state)
        if old is None or key != self._keys.get(host):
            self._keys[host] = key
            self._sort_keys[host] = sort_key(self.order, state, self._arrival[host])
            self._matches[host] = matches(state, self.needle)
            self._resort()
            return
        i = self._index.get(host)
        if i is not None and self._in_view(i):
            self._redraw_if_changed(host, i)

    def set_now(self, now: float) -> None:
        """The app's clock moved (the 1 Hz tick): redraw the rows in view whose cells it changes."""
        self._now = now
        for i in self._rows_in_view():
            host = self.rows[i]
            if ticks(self._states[host]):
                self._redraw_if_changed(host, i)

    def set_order(self, order: str) -> None:
        """Sort the rows in ``order`` (one of :data:`~widgets.host_rows.ORDERS`).

        Raises:
            ValueError: for another order.
        """
        if order not in ORDERS:
            raise ValueError(f"unknown order {order!r}; one of {', '.join(ORDERS)}")
        self.order = order
        self._sort_keys = {h: sort_key(order, s, self._arrival[h]) for h, s in self._states.items()}
        self._resort()

    def cycle_order(self) -> str:
        """Sort by the next of :data:`~widgets.host_rows.ORDERS`; returns it."""
        self.set_order(ORDERS[(ORDERS.index(self.order) + 1) % len(ORDERS)])
        return self.order

    def set_filter(self, needle: str) -> None:
        """Show only the hosts whose name or condition holds ``needle`` (case-insensitive; "" shows all)."""
        if needle != self.needle:
            self.needle = needle
            self._matches = {h: matches(s, needle) for h, s in self._states.items()}
            self._resort()

    def _resort(self) -> None:
        """Rows anew from the states, the order and the filter; repaints the view. Once the cursor
        was moved (a key, a click, :meth:`move_to_host`) it stays on its host while that is shown,
        wherever the host sorts to (an action key acts on the host the operator chose); until then,
        and when its host is filtered out, it keeps its row number (the first row: the worst host)."""
        follow = self._cursor_host
        is_shown = self._matches
        shown = [h for h in self._states if is_shown[h]]
        shown.sort(key=self._sort_keys.__getitem__)
        self.rows = shown
        self._index = {h: i for i, h in enumerate(shown)}
        if follow is not None and follow in self._index:
            self.cursor = self._index[follow]
        self.cursor = max(0, min(self.cursor, len(shown) - 1))
        self._head = self._header_height()
        self.virtual_size = Size(self.size.width, len(shown) + self._head)
        self._keep_cursor_in_view()
        self.refresh()

    # --- drawing -------------------------------------------------------------------------------

    def _style(self, look: str) -> Style:
        return self.get_component_rich_style(f"host-table--{look}", partial=True)

    @property
    def _page(self) -> int:
        """Rows in view (the header takes its lines; there is no horizontal scrollbar)."""
        return max(1, self.size.height - self._head)

    def _header_height(self) -> int:
        """The header's lines at this width, order, count and filter (1, or 2 where they and the
        titles do not fit side by side); kept in ``_head`` by :meth:`_resort` and :meth:`on_resize`,
        which every change of those passes through."""
        return header_height(self._row_width, self.order, len(self.rows), self.total, self.needle)

    @property
    def _row_width(self) -> int:
        """Cells a row has: the width less the vertical scrollbar when it shows (cheaper than
        ``scrollable_content_region``, asked for every line drawn)."""
        bar = self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar else 0
        return max(0, self.size.width - bar)

    def hosts_in_view(self) -> list[str]:
        """The hosts whose rows are in view now, top to bottom."""
        r = self._rows_in_view()
        return self.rows[r.start:r.stop]

    def _rows_in_view(self) -> range:
        top = round(self.scroll_y)
        return range(top, min(len(self.rows), top + self._page))

    def _in_view(self, i: int) -> bool:
        top = round(self.scroll_y)
        return top <= i < top + self._page

    def _redraw_if_changed(self, host: str, i: int) -> None:
        drawn = self._drawn.get(host)
        if drawn is None or drawn[0] != self._cells_of(host):
            self.refresh_line(i + self._head)

    def _cells_of(self, host: str) -> RowCells:
        """:func:`~widgets.host_rows.row_cells` of ``host``'s state at the table's clock, made
        once per state and clock (a change is told, then drawn, from the same cells)."""
        state, now = self._states[host], self._now
        made = self._cells.get(host)
        if made is not None and made[0] is state and made[1] == now:
            return made[2]
        cells = row_cells(state, now)
        self._cells[host] = (state, now, cells)
        return cells

    def render_line(self, y: int) -> Strip:
        width = self._row_width
        base = self.rich_style
        if y < self._head:
            lines = header_lines(width, self.order, len(self.rows), self.total, self.needle, self._style, self._head)
            return self._strip(lines[y], width, base)
        i = round(self.scroll_y) + y - self._head
        if not 0 <= i < len(self.rows):
            return Strip.blank(width, base)
        host = self.rows[i]
        cells = self._cells_of(host)
        if i == self.cursor:
            self._drawn.pop(host, None)  # drawn under the cursor: the plain row must be drawn anew
            self.rows_drawn += 1
            return self._row_strip(cells, width, base + self._style("cursor"))
        drawn = self._drawn.get(host)
        if drawn is not None and drawn[0] == cells and drawn[1] == width:
            return drawn[2]
        self.rows_drawn += 1
        strip = self._row_strip(cells, width, base)
        self._drawn[host] = (cells, width, strip)
        return strip

    def _row_strip(self, cells: RowCells, width: int, base: Style) -> Strip:
        """A row's line: its :func:`~widgets.host_rows.row_pieces` straight to segments, each in
        ``base`` plus its look (what :func:`~widgets.host_rows.row_text` renders to, without
        laying out a :class:`Text`); a row whose columns overflow ``width`` goes through
        ``row_text``, which cuts it with …"""
        pieces = row_pieces(cells, width, self._style)
        used = sum(cell_len(text) for text, _ in pieces)
        if used > width:
            return self._strip(row_text(cells, width, self._style), width, base)
        segments = [Segment(text, base + look if look is not None else base) for text, look in pieces]
        if used < width:
            segments.append(Segment(" " * (width - used), base))
        return Strip(segments, width)

    def _strip(self, text: Text, width: int, base: Style) -> Strip:
        text.stylize_before(base)
        return Strip(text.render(self.app.console), text.cell_len).crop_extend(0, width, base)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())

    def _restyle(self) -> None:
        self._drawn.clear()  # colours are taken when a row is drawn
        self.refresh()

    def on_resize(self, event: Resize) -> None:
        self._drawn.clear()
        self._head = self._header_height()
        self.virtual_size = Size(event.size.width, len(self.rows) + self._head)
        self._keep_cursor_in_view()

    # --- the cursor ----------------------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        """Put the cursor on row ``row`` (clamped to the rows shown) and scroll it into view."""
        if not self.rows:
            return
        row = max(0, min(row, len(self.rows) - 1))
        if row != self.cursor:
            self.refresh_line(self.cursor + self._head)
            self.cursor = row
            self.refresh_line(row + self._head)
        self._cursor_host = self.rows[row]
        self._keep_cursor_in_view()

    def move_to_host(self, host: str) -> bool:
        """Put the cursor on ``host``'s row; False when it is not shown."""
        i = self._index.get(host)
        if i is None:
            return False
        self.move_cursor(i)
        return True

    def _keep_cursor_in_view(self) -> None:
        top = round(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + self._page:
            self.scroll_to(y=self.cursor - self._page + 1, animate=False)

    def action_cursor(self, step: int) -> None:
        """Move the cursor ``step`` rows (negative: up); it stops at the first and last rows."""
        self.move_cursor(self.cursor + step)

    def action_page(self, pages: int) -> None:
        """Move the cursor ``pages`` pages of rows."""
        self.move_cursor(self.cursor + pages * self._page)

    def action_cursor_to(self, row: int) -> None:
        """Move the cursor to row ``row`` (-1: the last)."""
        self.move_cursor(row if row >= 0 else len(self.rows) - 1)

    def action_select(self) -> None:
        """Post :class:`HostTable.Selected` for the row under the cursor (nothing when no row)."""
        host = self.cursor_host
        if host is not None:
            self.post_message(self.Selected(host, self))

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < self._head:
            return
        i = round(self.scroll_y) + offset.y - self._head
        if 0 <= i < len(self.rows):
            event.stop()
            self.focus()
            self.move_cursor(i)
            self.action_select()


def _order_key(s: HostState) -> tuple[str, str, str]:
    """What of ``s`` the sort orders and the filter read (besides the name, which never changes):
    its condition, its readiness rung and its headline (a stale host's condition stays ``stale``
    while its headline, which the filter also reads, moves)."""
    return (condition(s), s.readiness, headline(s))
