"""One host as one row of the compact overview: what its cells say (pure, from a
:class:`HostState` and the app's ``now``), the orders rows are sorted in, the filter's match, and
the row and the header row as :class:`Text` of a given width. :mod:`widgets.host_table` draws them.

::

    HOST                 STATE         PHASE             ETA    READINESS      GPU MEM   RESTARTS VERDICT
    gpu-node-2           FAILED        ✗ Init                   not running    ▁▁▁▁▁▁▁▁  3 loop   Restart loop: 3 starts failed…
    gpu-node-4           STALLED       ▸ Graph   ━━━───  ~2m    port closed    ▇▇▇▇▇▇▇▇  0        No log line for 4m10s…
    gpu-node-1           READY         ● Ready                  serving        ▇▇▇▇▇▇▇▇  0        Serving: 12 requests/min.

Every cell is made of host text only through :func:`widgets.text.plain` (the one sanitiser:
no markup parsed, no escape code kept) and cut to its column; the verdict takes the width left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text

from probes.data.state import HostState
from probes.fold.eta import about, eta_for
from probes.fold.headline import headline
from probes.data.vocab import PHASES
from widgets.fmt import PHASE_SHORT, RUNG_LOOK, RUNG_WORDS, STATE_LOOK, STATE_WORDS, duration, level_block
from widgets.phase_bar import PHASE_ICONS, current_progress
from widgets.gpu_strip import note_word
from widgets.text import plain

__all__ = ["RowCells", "ORDERS", "SEVERITY", "condition", "row_cells", "sort_key", "matches", "row_text", "row_pieces", "Piece",
           "header_text", "header_lines", "header_height", "columns_for", "ticks", "PHASE_BAR_CELLS"]

#: The orders the rows can be sorted in (``o`` cycles them): worst first, by host name, or as the
#: hosts first arrived (the config's order).
ORDERS = ("severity", "name", "arrival")
#: Conditions (:func:`condition`) worst first: what is broken or cannot be seen, then what is
#: stuck (restart loop, stalled, stale), then starts under way, then stopped units, then ready ones.
SEVERITY = ("failed", "unreachable", "ssh refused", "cannot see", "no such unit", "restart loop", "stalled",
            "unhealthy", "stale", "loading", "waiting", "stopped", "ready")
#: Readiness rungs worst first (within one condition, a ready host that is unhealthy sorts first).
_RUNG_ORDER = ("inactive", "port_closed", "http_unhealthy", "unknown", "healthy", "serving")
#: Cells of the progress bar inside the phase column.
PHASE_BAR_CELLS = 6
#: GPUs drawn one cell each; more are cut to ``_GPU_CELLS - 2`` and ``+N``.
_GPU_CELLS = 8
#: The columns, in order, with their widths in cells; the verdict takes what is left.
_WIDTHS = {"host": 20, "state": 13, "phase": 2 + 7 + 1 + PHASE_BAR_CELLS, "eta": 6, "rung": 14,
           "gpus": _GPU_CELLS + 1, "restarts": 8}
_TITLES = {"host": "HOST", "state": "STATE", "phase": "PHASE", "eta": "ETA", "rung": "READINESS",
           "gpus": "GPU MEM", "restarts": "RESTARTS", "verdict": "VERDICT"}
#: Narrowest the verdict may get before a column goes (GPUs first, then restarts, then the ETA).
_MIN_VERDICT = 30
_DROP_ORDER = ("gpus", "restarts", "eta")
_BOLD = Style(bold=True)


def condition(s: HostState) -> str:
    """A host's condition in the words of :data:`SEVERITY`: its :func:`headline`, or ``stale``
    when the host stopped answering and its state is only the last known one (a host never
    reached stays ``unreachable``, one whose login is refused ``ssh refused``)."""
    h = headline(s)
    if s.stale_since is not None and h not in ("unreachable", "ssh refused"):
        return "stale"
    return h


@dataclass(frozen=True)
class RowCells:
    """What one host's row says, cell by cell, before it is styled: equal cells draw the same row,
    so the table redraws a row only when these change.

    Attributes:
        host: the host's name (sanitised, at most 120 characters).
        word: the first word (``FAILED``, ``RESTART LOOP``, ``STALE 3m05s``); ``word_look`` its
            look (muted, busy, ok, warn, error, stale).
        phase_icon, phase_label: the current phase's mark (✓ ▸ ● ✗ ■) and short name; ``phase_look``
            how the phase bar would show it (current, ready, failed, stopped, future).
        bar_filled: cells of :data:`PHASE_BAR_CELLS` filled by the current phase's progress, or
            None when the phase has no progress to show.
        eta: ``~2m``, ``<1m``, ``slow`` (slower than the earlier starts), or "".
        rung: the readiness in words; ``rung_look`` / ``rung_bold`` its look.
        gpus: per GPU shown, (one character, look: bar, hot, muted, error); ``gpus_more`` the GPUs
            not shown; ``gpus_note``: a word instead of the GPUs (``waiting``, ``n/a``) or "".
        restarts: systemd's NRestarts (and ``loop``), or "–" when not known; ``restarts_look``.
        verdict: the verdict's sentence (a failed start's hint when there is none), sanitised;
            ``level`` its level (ok, info, warning, error) or "".
    """

    host: str
    word: str
    word_look: str
    phase_icon: str
    phase_label: str
    phase_look: str
    bar_filled: int | None
    eta: str
    rung: str
    rung_look: str
    rung_bold: bool
    gpus: tuple[tuple[str, str], ...]
    gpus_more: int
    gpus_note: str
    restarts: str
    restarts_look: str
    verdict: str
    level: str


def ticks(s: HostState) -> bool:
    """Whether the row of ``s`` may read differently at another ``now`` with the same state (a
    loading start's ETA, a stale host's age): only such rows are looked at on the 1 Hz tick."""
    return s.state == "loading" or s.stale_since is not None


def _phase(s: HostState) -> tuple[str, str, str, int | None]:
    if s.state == "waiting":
        return "·", "—", "future", None  # no start seen: its default phase is not a fact
    label = PHASE_SHORT.get(s.phase) or plain(s.phase, max_chars=7)
    kind = {"ready": "ready", "failed": "failed", "stopped": "stopped", "waiting": "future"}.get(s.state, "current")
    if s.state == "ready":
        label = PHASE_SHORT["ready"]
    if kind == "current" and s.phase == PHASES[-1]:
        kind = "ready"
    filled = None
    progress = current_progress(s)
    if kind == "current" and progress is not None and progress.phase == s.phase:
        filled = max(0, min(PHASE_BAR_CELLS, round(progress.fraction * PHASE_BAR_CELLS)))
    return PHASE_ICONS[kind] if kind != "future" else "·", label, kind, filled


def _gpus(s: HostState) -> tuple[tuple[tuple[str, str], ...], int, str]:
    failure = s.failure("gpu")
    reading = s.gpus
    if reading is None or not reading.gpus:
        if failure is not None:
            return (), 0, "n/a"
        return (), 0, ("no GPU" if reading is not None else "waiting")
    gpus = reading.gpus
    shown = gpus if len(gpus) <= _GPU_CELLS else gpus[:_GPU_CELLS - 2]
    old = s.stale_since is not None
    cells = []
    for g in shown:
        frac = g.mem_fraction
        if g.note:
            cells.append(("✗" if note_word(g.note) != "n/a" else "?", "error"))
        elif frac is None:
            cells.append(("?", "muted"))
        else:
            cells.append((level_block(frac), "muted" if old else ("hot" if frac >= 0.95 else "bar")))
    return tuple(cells), len(gpus) - len(shown), ""


def _restarts(s: HostState) -> tuple[str, str]:
    if s.restart_counter is not None:
        return (f"{s.restart_counter} loop" if s.restart_loop else str(s.restart_counter),
                "error" if s.restart_loop else "muted")
    return ("loop", "error") if s.restart_loop else ("–", "muted")


def _eta(s: HostState, now: float) -> str:
    if s.state != "loading" or not now:
        return ""
    e = eta_for(s, now)
    if e is None or e.remaining_s is None:
        return "slow" if e is not None and e.slower else ""
    return "slow" if e.slower else about(e.remaining_s)


def row_cells(s: HostState, now: float = 0.0) -> RowCells:
    """The cells of ``s``'s row at ``now`` (epoch seconds; 0 when not known: no ETA, no stale age).

    Pure and cheap (no styles, no Text): the table compares the result with the row it drew."""
    cond = condition(s)
    if cond == "stale":
        word, look = (f"STALE {duration(now - s.stale_since)}" if now and s.stale_since is not None
                      else "STALE"), "stale"
    else:
        word, look = STATE_WORDS.get(cond, cond.upper()), STATE_LOOK.get(cond, "muted")
    icon, label, kind, filled = _phase(s)
    rung = s.readiness if s.readiness in RUNG_WORDS else "unknown"
    rung_look, rung_bold = RUNG_LOOK[rung]
    gpus, more, note = _gpus(s)
    restarts, restarts_look = _restarts(s)
    if s.verdict is not None:
        verdict, level = plain(s.verdict.sentence, max_chars=400), s.verdict.level
    elif s.state == "failed" and s.hint:
        verdict, level = "Hint: " + plain(s.hint, max_chars=400), "info"
    else:
        verdict, level = "", ""
    return RowCells(plain(s.host, max_chars=120) or "?", word, look, icon, label, kind, filled, _eta(s, now),
                    RUNG_WORDS[rung], rung_look, rung_bold, gpus, more, note, restarts, restarts_look,
                    verdict, level)


def sort_key(order: str, s: HostState, arrival: int) -> tuple[object, ...]:
    """The key ``s``'s row sorts by in ``order`` (one of :data:`ORDERS`); ``arrival`` is the host's
    index in arrival order. Severity: :data:`SEVERITY`, then the readiness rung (worst first),
    then the name; name: the name, then arrival; arrival: arrival.

    Raises:
        ValueError: for an order not in :data:`ORDERS`.
    """
    if order == "severity":
        cond = condition(s)
        rank = SEVERITY.index(cond) if cond in SEVERITY else len(SEVERITY)
        rung = _RUNG_ORDER.index(s.readiness) if s.readiness in _RUNG_ORDER else _RUNG_ORDER.index("unknown")
        return (rank, rung, s.host, arrival)
    if order == "name":
        return (s.host, arrival)
    if order == "arrival":
        return (arrival,)
    raise ValueError(f"unknown order {order!r}; one of {', '.join(ORDERS)}")


def matches(s: HostState, needle: str) -> bool:
    """Whether the filter ``needle`` (plain text, case-insensitive; "" matches all) is in the host's
    name or its condition (``failed``, ``restart loop``, ``stale`` ... and its headline word)."""
    if not needle:
        return True
    n = needle.casefold()
    return n in s.host.casefold() or n in condition(s) or n in headline(s)


def columns_for(width: int) -> tuple[str, ...]:
    """The columns a row of ``width`` cells shows (the verdict last): all of them while the verdict
    keeps :data:`_MIN_VERDICT` cells, else the GPUs go first, then the restarts, then the ETA."""
    cols = list(_WIDTHS)
    for drop in _DROP_ORDER:
        if width - sum(_WIDTHS[c] + 1 for c in cols) >= _MIN_VERDICT:
            break
        cols.remove(drop)
    return (*cols, "verdict")


def _cell(t: Text, text: str, width: int, style: Style) -> None:
    """Append ``text`` cut (with …) or padded to exactly ``width`` cells, then one space."""
    t.append(_fit(text, width), style)
    t.append(" ")


def _fit(text: str, width: int) -> str:
    """``text`` cut (with …) or padded to exactly ``width`` cells."""
    if cell_len(text) > width:
        text = set_cell_size(text, max(0, width - 1)) + "…"
    return set_cell_size(text, width)


#: A run of a row: its characters and their look (None: the row's own).
Piece = tuple[str, "Style | None"]


def row_pieces(cells: RowCells, width: int, style: Callable[[str], Style]) -> list[Piece]:
    """The row as runs of one look each, the verdict cut with … to the width left (the cells
    before it are not cut: at a width they overflow, :func:`row_text` cuts the row). What
    :func:`row_text` is made of; the table draws these straight to segments (no :class:`Text`
    to lay out for each row drawn).

    Args:
        cells: what the row says (:func:`row_cells`).
        width: the row's width in cells.
        style: the style of a look (``muted``, ``error``, ``level-warning``, ``fill`` ...).
    """
    out: list[Piece] = []
    add = out.append
    for col in columns_for(width):
        w = _WIDTHS.get(col, 0)
        if col == "host":
            add((_fit(cells.host, w), _BOLD))
        elif col == "state":
            add((_fit(cells.word, w), style(cells.word_look) + _BOLD))
        elif col == "phase":
            add((f"{cells.phase_icon} {cells.phase_label:<7} ", style(f"phase-{cells.phase_look}")))
            if cells.bar_filled is None:
                add((" " * (PHASE_BAR_CELLS + 1), None))
            else:
                add(("━" * cells.bar_filled, style("bar")))
                add(("─" * (PHASE_BAR_CELLS - cells.bar_filled), style("free")))
                add((" ", None))
            continue
        elif col == "eta":
            add((_fit(cells.eta, w), style("warn" if cells.eta == "slow" else "muted")))
        elif col == "rung":
            add((_fit(cells.rung, w), style(cells.rung_look) + _BOLD if cells.rung_bold else style(cells.rung_look)))
        elif col == "gpus":
            if cells.gpus_note:
                add((_fit(cells.gpus_note, w), style("error" if cells.gpus_note == "n/a" else "muted")))
            else:
                for char, look in cells.gpus:
                    add((char, style(look)))
                more = f"+{cells.gpus_more}" if cells.gpus_more else ""
                add((more, style("muted")))
                add((" " * max(0, w - len(cells.gpus) - len(more)) + " ", None))
                continue
        elif col == "restarts":
            add((_fit(cells.restarts, w), style(cells.restarts_look)))
        else:
            left = max(0, width - sum(cell_len(text) for text, _ in out))
            verdict = cells.verdict
            if cell_len(verdict) > left:
                verdict = set_cell_size(verdict, max(0, left - 1)) + "…" if left else ""
            add((verdict, style(f"level-{cells.level}") if cells.level else None))
            continue
        add((" ", None))
    return [(text, look) for text, look in out if text]


def row_text(cells: RowCells, width: int, style: Callable[[str], Style]) -> Text:
    """The row as one line of Text exactly ``width`` cells wide (the verdict cut with … to fit):
    :func:`row_pieces`, cut with … or padded to ``width``. Arguments as :func:`row_pieces`."""
    t = Text(no_wrap=True, overflow="ellipsis", end="")
    for text, look in row_pieces(cells, width, style):
        t.append(text, look)
    t.truncate(width, pad=True)
    return t


def _titles(width: int) -> Text:
    """The columns' titles, as :func:`row_text` lays them out at ``width`` (not padded)."""
    t = Text(no_wrap=True, end="")
    for col in columns_for(width):
        if col == "verdict":
            t.append(_TITLES[col])
        else:
            _cell(t, _TITLES[col], _WIDTHS[col], Style())
    return t


def _tail(width: int, order: str, shown: int, total: int, needle: str) -> str:
    """``order: severity · 12 of 128 hosts · filter: fail``; in short where ``width`` leaves it
    under 16 cells of titles (``12 of 128 · filter: fail``)."""
    tail = f"order: {order} · {shown} of {total}" if needle or shown != total else f"order: {order} · {total}"
    tail += f" hosts · filter: {plain(needle, max_chars=40)}" if needle else " hosts"
    if width - len(tail) - 1 < 16:  # narrow: the count and the filter, in short
        tail = f"{shown} of {total}" + (f" · filter: {plain(needle, max_chars=20)}" if needle else "")
    return tail


def header_height(width: int, order: str, shown: int, total: int, needle: str) -> int:
    """Lines :func:`header_lines` takes: 1 while the titles and the order and count fit side by
    side (a space between, one at the end), else 2."""
    return 1 if _titles(width).cell_len + len(_tail(width, order, shown, total, needle)) + 2 <= width else 2


def header_lines(width: int, order: str, shown: int, total: int, needle: str,
                 style: Callable[[str], Style], height: int | None = None) -> list[Text]:
    """The header: the columns' titles with, at the right, the order and the count (``order:
    severity · 12 of 128 hosts · filter: fail``) on one line where both fit (:func:`header_height`),
    else the order and the count on a line of their own above the titles (at 80 columns they were
    drawn over PHASE, READINESS and VERDICT). Each line is exactly ``width`` cells; ``height``
    (1 or 2) says how many lines to make instead of :func:`header_height`."""
    if (height or header_height(width, order, shown, total, needle)) == 1:
        return [header_text(width, order, shown, total, needle, style)]
    tail = _tail(width, order, shown, total, needle)
    top = Text(no_wrap=True, end="")
    top.append(" " * max(0, width - len(tail) - 1))
    top.append(tail + " ", style("muted"))
    top.truncate(width, pad=True)
    top.stylize(style("header"))
    titles = _titles(width)
    titles.truncate(width, pad=True)
    titles.stylize(style("header"))
    return [top, titles]


def header_text(width: int, order: str, shown: int, total: int, needle: str, style: Callable[[str], Style]) -> Text:
    """The header as one row: the columns' titles (as :func:`row_text` lays them out at ``width``)
    and, at the right, the order and the count (``order: severity · 12 of 128 · filter: fail``),
    which win over the titles where both do not fit (:func:`header_lines` gives them two lines)."""
    t = _titles(width)
    tail = _tail(width, order, shown, total, needle)
    # The order, the count and the filter win over the titles: a kept filter must show.
    room = width - len(tail) - 2
    if t.cell_len > room:
        t.truncate(max(0, room))
    t.append(" " * max(1, width - t.cell_len - len(tail) - 1))
    t.append(tail + " ", style("muted"))
    t.truncate(width, pad=True)
    t.stylize(style("header"))
    return t
