"""The log pane: a host's journal as a capped, filterable, searchable list of lines.

A Line-API :class:`ScrollView` (like toolong, or Textual's own ``Log``): only the lines on screen
are rendered, each once into a cached :class:`Strip`. The app appends batches (5-10 a second);
each :meth:`LogPane.append` costs one refresh however many entries it carries, and the pane keeps
at most ``max_lines`` entries (the oldest go first).

Each line reads ``HH:MM:SS text``: the entry's time in UTC (blank when unknown) and the host's
text through :func:`widgets.text.host_text` (colours kept, escapes gone, never markup). Lines
systemd wrote about the unit are styled apart.

Keys: ``f`` toggles follow (stay on the newest line), ``n`` / ``N`` move the highlighted cursor
to the next / previous line matching the search term (:meth:`LogPane.search`). Scrolling up stops
following; ``End`` follows again.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.content import Content
from textual.events import MouseScrollUp, Resize
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from probes.data.state import LogEntry
from widgets.fmt import hms
from widgets.text import host_text

__all__ = ["LogPane"]

_PREFIX_W = 9  # "HH:MM:SS "


class _Row:
    """One kept entry: its Text (made once), its plain text lower-cased for matching, and ``n``, a
    number that grows with every entry appended (the pane's own order, whatever the seqs are)."""

    __slots__ = ("entry", "text", "lower", "width", "n")

    def __init__(self, entry: LogEntry, n: int) -> None:
        self.entry = entry
        self.text = host_text(entry.text)
        self.lower = self.text.plain.lower()
        self.width = self.text.cell_len
        self.n = n


def _n(row: _Row) -> int:
    return row.n


class LogPane(ScrollView, can_focus=True):
    """A host's log lines (see module docstring).

    Args:
        max_lines: most entries kept (default 5000); older ones are dropped.
        follow: start following the newest line.

    Component classes: ``log-pane--time`` (the HH:MM:SS prefix), ``log-pane--systemd`` (a line
    systemd wrote), ``log-pane--cursor`` (the highlighted line), ``log-pane--match`` (search
    matches within lines).
    """

    BINDINGS: ClassVar = [
        Binding("f", "toggle_follow", "Follow"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("N", "prev_match", "Previous match", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-pane--time", "log-pane--systemd", "log-pane--cursor", "log-pane--match",
    }

    DEFAULT_CSS = """
    LogPane {
        height: 1fr;
        width: 1fr;
        overflow: auto;
        background: $surface;
        color: $foreground;
        &:focus { background-tint: $foreground 4%; }
        & > .log-pane--time { color: $foreground-muted; }
        & > .log-pane--systemd { color: $text-secondary; text-style: italic; }
        & > .log-pane--cursor { background: $primary-muted; }
        & > .log-pane--match { background: $warning-muted; color: $text-warning; text-style: bold; }
    }
    """

    follow: reactive[bool] = reactive(True, init=False)
    """Keep the newest line in view as lines arrive."""

    def __init__(self, *, max_lines: int = 5000, follow: bool = True, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._max_lines = max(1, max_lines)
        self._rows: list[_Row] = []
        self._view: list[_Row] | None = None  # None: no filter, the view is every row
        self._filter: str | None = None
        self._term: str | None = None
        self._term_re: re.Pattern[str] | None = None
        self._cursor: _Row | None = None
        self._next_n = 0
        self._width = 0
        self._strips: LRUCache[tuple[int, bool, str | None], Strip] = LRUCache(2048)
        self.set_reactive(LogPane.follow, follow)

    # --- what the pane holds -----------------------------------------------------------------------

    @property
    def max_lines(self) -> int:
        """Most entries kept; setting it drops the oldest beyond it."""
        return self._max_lines

    @max_lines.setter
    def max_lines(self, value: int) -> None:
        self._max_lines = max(1, value)
        if self._trim():
            self._resize()

    @property
    def entries(self) -> list[LogEntry]:
        """Every entry kept, oldest first (filtered out or not)."""
        return [r.entry for r in self._rows]

    @property
    def shown(self) -> list[LogEntry]:
        """The entries shown (those matching the filter), oldest first."""
        return [r.entry for r in self._shown()]

    @property
    def line_count(self) -> int:
        """Lines shown."""
        return len(self._shown())

    @property
    def filter(self) -> str | None:
        """The filter pattern, or None."""
        return self._filter

    @property
    def search_term(self) -> str | None:
        """The search term, or None."""
        return self._term

    @property
    def cursor_seq(self) -> int | None:
        """The ``seq`` of the highlighted line, or None."""
        return None if self._cursor is None else self._cursor.entry.seq

    @property
    def cursor_line(self) -> int | None:
        """The highlighted line's index among the lines shown, or None (not shown, or none)."""
        if self._cursor is None:
            return None
        return self._index(self._cursor)

    def _shown(self) -> list[_Row]:
        return self._rows if self._view is None else self._view

    def _index(self, row: _Row) -> int | None:
        shown = self._shown()
        i = bisect.bisect_left(shown, row.n, key=_n)
        return i if i < len(shown) and shown[i] is row else None

    # --- writing -----------------------------------------------------------------------------------

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Add a batch of entries (one refresh for the whole batch); drops the oldest beyond
        ``max_lines`` and scrolls to the end when following."""
        if not entries:
            return
        if len(entries) > self._max_lines:
            entries = entries[-self._max_lines:]
        new = []
        for e in entries:
            row = _Row(e, self._next_n)
            self._next_n += 1
            new.append(row)
            if row.width > self._width:
                self._width = row.width
        self._rows.extend(new)
        if self._view is not None:
            f = self._filter or ""
            self._view.extend(r for r in new if f in r.lower)
        removed = self._trim()
        self._resize()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif removed:
            # The lines above went away: keep the lines the operator is reading where they are.
            self.scroll_to(y=max(0, self.scroll_y - removed), animate=False, immediate=True)
        self.refresh()

    def clear(self) -> None:
        """Drop every entry."""
        self._rows.clear()
        if self._view is not None:
            self._view.clear()
        self._cursor = None
        self._width = 0
        self._strips.clear()
        self._resize()
        self.refresh()

    def _trim(self) -> int:
        """Drop the oldest rows beyond max_lines; return how many shown lines went."""
        excess = len(self._rows) - self._max_lines
        if excess <= 0:
            return 0
        del self._rows[:excess]
        oldest = self._rows[0].n
        if self._cursor is not None and self._cursor.n < oldest:
            self._cursor = None
        if self._view is None:
            return excess
        cut = bisect.bisect_left(self._view, oldest, key=_n)
        del self._view[:cut]
        return cut

    def _resize(self) -> None:
        self.virtual_size = Size(_PREFIX_W + self._width, len(self._shown()))
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        parts = ["follow" if self.follow else "paused"]
        if self._filter and self._term and self._term.lower() == self._filter:
            # The detail screen's one box sets both (the filter lower-cased): one thing, one label.
            parts.append(f"filter “{self._term}”")
        else:
            if self._filter:
                parts.append(f"filter “{self._filter}”")
            if self._term:
                parts.append(f"search “{self._term}”")
        parts.append(f"{len(self._shown())}/{len(self._rows)} lines")
        self.border_subtitle = Content(" · ".join(parts))

    # --- filter, search, cursor ----------------------------------------------------------------------

    def set_filter(self, pattern: str | None) -> None:
        """Show only lines containing ``pattern`` (case-insensitive); None or "" shows all."""
        pattern = (pattern or "").lower() or None
        if pattern == self._filter:
            return
        self._filter = pattern
        self._view = None if pattern is None else [r for r in self._rows if pattern in r.lower]
        self._resize()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif self._cursor is not None and self._index(self._cursor) is not None:
            self._scroll_to_cursor()
        else:
            self.scroll_to(y=min(self.scroll_y, self.max_scroll_y), animate=False, immediate=True)
        self.refresh()

    def search(self, term: str | None) -> int:
        """Set the search term (case-insensitive; None or "" clears it) and highlight it.

        Returns:
            How many shown lines match. Use :meth:`next_match` to go to one.
        """
        term = term or None
        self._term = term
        self._term_re = None if term is None else re.compile(re.escape(term), re.IGNORECASE)
        self._update_subtitle()
        self.refresh()
        if term is None:
            return 0
        low = term.lower()
        return sum(1 for r in self._shown() if low in r.lower)

    def next_match(self) -> bool:
        """Move the cursor to the next shown line matching the search term (wrapping around) and
        scroll to it; stops following. Returns False when no line matches."""
        return self._move_match(+1)

    def prev_match(self) -> bool:
        """Like :meth:`next_match`, backwards."""
        return self._move_match(-1)

    def _move_match(self, step: int) -> bool:
        if not self._term:
            return False
        low = self._term.lower()
        shown = self._shown()
        n = len(shown)
        if not n:
            return False
        start = self._index(self._cursor) if self._cursor is not None else None
        if start is None:
            # No cursor (or it is filtered out): begin from the top (or bottom) of the screen.
            top = int(self.scroll_y)
            start = top - 1 if step > 0 else min(n, top + max(1, self.size.height))
        for k in range(1, n + 1):
            i = (start + step * k) % n
            if low in shown[i].lower:
                self._set_cursor(shown[i])
                return True
        return False

    def jump_to_seq(self, seq: int) -> bool:
        """Highlight the entry with ``seq`` (e.g. a decisive error line) and scroll to it; stops
        following. A filter that hides it is cleared. Returns False when the entry is not kept."""
        row = next((r for r in reversed(self._rows) if r.entry.seq == seq), None)
        if row is None:
            return False
        if self._index(row) is None:
            self.set_filter(None)
        self._set_cursor(row)
        return True

    def _set_cursor(self, row: _Row) -> None:
        self._cursor = row
        self.follow = False
        self._scroll_to_cursor()
        self.refresh()

    def _scroll_to_cursor(self) -> None:
        i = self.cursor_line
        if i is None:
            return
        h = max(1, self.scrollable_content_region.height or self.size.height)
        if not (self.scroll_y <= i < self.scroll_y + h):
            self.scroll_to(y=max(0, i - h // 2), animate=False, immediate=True)

    # --- follow --------------------------------------------------------------------------------------

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self._update_subtitle()

    def action_toggle_follow(self) -> None:
        """Follow the newest line, or stop."""
        self.follow = not self.follow

    def action_next_match(self) -> None:
        self.next_match()

    def action_prev_match(self) -> None:
        self.prev_match()

    def action_scroll_up(self) -> None:
        self.follow = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.follow = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.follow = False
        super().action_scroll_home()

    def action_scroll_end(self) -> None:
        super().action_scroll_end()
        self.follow = True

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.follow = False

    def on_resize(self, event: Resize) -> None:
        if self.follow:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True, x_axis=False)
        elif self._cursor is not None:
            self.call_after_refresh(self._scroll_to_cursor)

    # --- rendering -----------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"log-pane--{name}", partial=True)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        shown = self._shown()
        i = scroll_y + y
        if i >= len(shown):
            return Strip.blank(width, base)
        row = shown[i]
        is_cursor = row is self._cursor
        strip = self._row_strip(row, is_cursor)
        pad = base + self._style("cursor") if is_cursor else base
        return strip.crop_extend(scroll_x, scroll_x + width, pad)

    def _row_strip(self, row: _Row, is_cursor: bool) -> Strip:
        key = (row.n, is_cursor, self._term)
        strip = self._strips.get(key)
        if strip is not None:
            return strip
        e = row.entry
        line = Text(no_wrap=True, end="")
        line.append(f"{hms(e.time)} " if e.time is not None else " " * _PREFIX_W, self._style("time"))
        body = row.text.copy()
        if e.systemd:
            body.stylize_before(self._style("systemd"))
        if self._term_re is not None and self._term and self._term.lower() in row.lower:
            match = self._style("match")
            for m in self._term_re.finditer(body.plain):
                if m.end() > m.start():
                    body.stylize(match, m.start(), m.end())
        line.append_text(body)
        if is_cursor:
            line.stylize_before(self._style("cursor"))
        line.stylize_before(self.rich_style)
        strip = Strip(line.render(self.app.console), line.cell_len)
        self._strips[key] = strip
        return strip
