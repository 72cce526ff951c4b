"""The host card: one host at a glance, from a frozen :class:`HostState`; as tall as what it says
(9 rows with its border for a card with a one-line verdict), stretched by the grid to fill
the screen.

::

    ╭─ gpu-a1 ──────────────────────────────────────────────────────────────────────╮
    │ LOADING  sglang.service · sglang · port closed · restarts 2                    │
    │ ✓ Start    ✓ Dl       ✓ Weights  ▸ Init     Graph      Warm       Ready       │
    │ shards 14/14 · in Init 1m12s of ~1m40s · ready in ~2m · since start 4m03s      │
    │ 0 ━━━━━─  71G  99% 1 ━━━━━─  71G  98% 2 ━━━━━─  71G  97% 3 ━━━━━─  71G  96%  │
    │ 4 ━━━━━─  71G  99% 5 ━━━━━─  71G  98% 6 ━━━━━─  71G  97% 7 ━━━━━─  71G  96%  │
    │ › Capture cuda graph begin. This can take up to several minutes.               │
    │ Init has taken 4m, longer than usual.                                          │
    ╰────────────────────────────────────────────────────────────────────────────────╯

The verdict and hint are never cut: their line wraps to as many rows as they need (so do the
first line and the progress line); only the log line is cut with "…" (the detail screen has the whole log). The class
``-compact`` (the detail screen of a short terminal) hides the GPU strip and the log line, so the
verdict keeps its room.

``state`` is a reactive holding the frozen snapshot: assigning an equal snapshot does nothing, a
different one repaints only the lines whose words changed. ``now`` is a reactive set by the app
from one shared 1 Hz timer; the ticking durations are computed from it and never stored in the
state. A card its grid marks off screen (:meth:`HostCard.set_on_screen`) keeps both and does
nothing with them until it is on screen again.

What the text lines say is made by :mod:`widgets.card_lines` (pure functions of the state, the
clock and the card's colours); this module is the widget: its lines, when each is redrawn, its
classes and its input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.events import Click
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from probes.data.state import HostState
from probes.fold.verdict import reconnect_words
from widgets import card_lines
from widgets.gpu_strip import GpuStrip
from widgets.phase_bar import PhaseBar
from widgets.text import plain

__all__ = ["HostCard", "STATE_CLASSES"]

#: The card's CSS classes for a start's state (exactly one is set) and the orthogonal ones.
STATE_CLASSES = {"waiting": "-waiting", "loading": "-loading", "ready": "-ready", "failed": "-failed",
                 "stopped": "-stopped"}
_LEVEL_CLASSES = ("-ok", "-info", "-warning", "-error")
#: The card's classes that its state sets and clears.
_STATE_DECIDES = {*STATE_CLASSES.values(), "-warning", "-stale"}


def _state_classes(s: HostState, classes: set[str]) -> set[str]:
    """``classes`` with those the state decides (:data:`_STATE_DECIDES`) as ``s`` says; the others
    (``-compact``, set by the card's owner) kept."""
    want = {STATE_CLASSES.get(s.state, "-waiting")} | (classes - _STATE_DECIDES)
    if (s.verdict is not None and s.verdict.level == "warning") or (s.restart_loop and s.state != "failed"):
        want.add("-warning")
    if s.stale_since is not None:
        want.add("-stale")
    return want


class _Line(Widget):
    """A line of the card, its text made from the card's state on each :meth:`redraw` (the card
    redraws a line when what it shows changed, and every line after a theme change, so the new
    theme's colours are taken). One row cut with "…", or (``wraps``) as many rows as its text
    needs at the card's width (the card's CSS gives such a line ``height: auto``)."""

    DEFAULT_CSS = """
    _Line { height: 1; width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, make: Callable[[], Text], *, wraps: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self._make = make
        self._text: Text | None = None
        self.wraps = wraps

    def render(self) -> Text:
        if self._text is None:
            self._text = self._make()
        return self._text

    def redraw(self) -> None:
        """Make the text anew and repaint; a wrapping line whose text now needs another number of
        rows asks for a new layout (only then: a ticking clock that keeps its rows costs a repaint,
        not a reflow). A text no wider than the line is one row, known without measuring it. A
        one-row line makes its text when it is painted (not at all while scrolled out of view)."""
        self.refresh()  # also drops the cached height, so a measure below sees the new text
        if not self.wraps or not self.display:
            self._text = None
            return
        self._text = self._make()
        width = self.content_size.width
        if width <= 0:
            self.refresh(layout=True)
            return
        rows = 1 if self._text.cell_len <= width else self.get_content_height(self.size, self.app.size, width)
        if rows != self.size.height:
            self.refresh(layout=True)

    @property
    def text(self) -> Text:
        """What the line shows now (plain text is ``.text.plain``)."""
        return self.render()


#: Children a composed card has (header, phases, times, GPUs, log, verdict); fewer while it is
#: being composed or torn down, when the card must not touch them.
_LINES = 6


class HostCard(Widget, can_focus=True):
    """One host's card (see module docstring).

    Args:
        state: the host's snapshot. now: the app's clock (epoch seconds), 0 when not known yet.

    CSS classes on the card: one of ``-waiting``, ``-loading``, ``-ready``, ``-failed``,
    ``-stopped`` (the start's state); ``-warning`` (a warning verdict or a restart loop);
    ``-stale`` (the host stopped answering, or never answered); ``-compact`` (set by the owner:
    no GPU strip and no log line). Messages: :class:`HostCard.Selected` on Enter or a
    click.
    """

    BINDINGS: ClassVar = [Binding("enter", "select", "Details")]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "host-card--muted", "host-card--busy", "host-card--ok", "host-card--warn", "host-card--error",
        "host-card--stale",
    }

    DEFAULT_CSS = """
    HostCard {
        height: auto;
        width: 1fr;
        padding: 0 1;
        border: round $foreground-disabled;
        border-title-color: $foreground;
        border-title-style: bold;
        border-subtitle-color: $text-warning;
        border-subtitle-style: bold;
        &.-loading { border: round $primary; }
        &.-ready { border: round $success; }
        &.-warning { border: round $warning; }
        &.-failed { border: round $error; }
        &.-stopped { border: round $foreground-muted; }
        &.-stale { border: dashed $foreground-muted; }
        &:focus {
            border: heavy $foreground;
            border-title-style: bold reverse;
            background-tint: $foreground 5%;
        }
        &.-loading:focus { border: heavy $primary; }
        &.-ready:focus { border: heavy $success; }
        &.-stopped:focus { border: heavy $foreground-muted; }
        &.-warning:focus { border: heavy $warning; }
        &.-failed:focus { border: heavy $error; }
        &.-stale:focus { border: heavy $foreground-muted; }
        & > #hc-log { color: $foreground-muted; }
        & > #hc-header, & > #hc-times, & > #hc-verdict { height: auto; text-wrap: wrap; }
        &.-compact > #hc-gpus, &.-compact > #hc-log { display: none; }
        & > #hc-verdict.-info { color: $text-accent; }
        & > #hc-verdict.-warning { color: $text-warning; }
        & > #hc-verdict.-error { color: $text-error; text-style: bold; }
        & > #hc-verdict.-ok { color: $text-success; }
        & > .host-card--muted { color: $foreground-muted; }
        & > .host-card--busy { color: $text-primary; }
        & > .host-card--ok { color: $text-success; }
        & > .host-card--warn { color: $text-warning; }
        & > .host-card--error { color: $text-error; }
        & > .host-card--stale { background: $warning-muted; color: $text-warning; text-style: bold; }
    }
    """

    class Selected(Message):
        """The operator chose this host (Enter or a click on its card).

        Attributes:
            host: the host's name. card: the card that posted it (None when made elsewhere).
        """

        def __init__(self, host: str, card: HostCard | None = None) -> None:
            super().__init__()
            self.host = host
            self.card = card

        @property
        def control(self) -> HostCard | None:
            return self.card

    state: reactive[HostState] = reactive(HostState(host="", unit=""), init=False, layout=False, repaint=False)
    now: reactive[float] = reactive(0.0, init=False, layout=False, repaint=False)

    def __init__(self, state: HostState, now: float = 0.0, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        # Born with the classes its state decides: the first _apply (at mount) then has none to
        # set, and a set_classes there restyled every new card's subtree (128 cards: 1.8 s).
        super().__init__(name=name, id=id, classes=" ".join(_state_classes(state, set((classes or "").split()))))
        self._shown: HostState | None = None  # the state the lines and classes show (None: redraw all)
        self._now_shown: float | None = None  # the ``now`` the ticking durations were drawn at
        self._subtitle_words: str | None = None  # the border's subtitle now
        self._on_screen = True
        self.set_reactive(HostCard.state, state)
        self.set_reactive(HostCard.now, now)

    # --- composition and updates ---------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield _Line(lambda: self.header_text(self.state, self.now), wraps=True, id="hc-header")
        yield PhaseBar(id="hc-phases")
        yield _Line(lambda: self.times_text(self.state, self.now), wraps=True, id="hc-times")
        yield GpuStrip(id="hc-gpus")
        yield _Line(lambda: self.log_text(self.state), id="hc-log")
        yield _Line(lambda: self.verdict_text(self.state), wraps=True, id="hc-verdict")

    def on_mount(self) -> None:
        self._apply(self.state)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh_lines())

    @property
    def on_screen(self) -> bool:
        """Whether the card shows what it is given. A card its owner marked off screen (scrolled
        out of the grid's view) keeps every ``state`` and ``now`` it is given but restyles,
        redraws and measures nothing; marked on screen again, it shows the latest of both."""
        return self._on_screen

    def set_on_screen(self, on_screen: bool) -> None:
        """Mark the card on or off screen (see :attr:`on_screen`); on screen again, it catches up
        at once: one restyle and redraw for all that changed while it was off."""
        if on_screen == self._on_screen:
            return
        self._on_screen = on_screen
        if on_screen and self._composed():
            if self.state is not self._shown:
                self._apply(self.state)
            if self.now != self._now_shown:
                self._draw_now()

    def _composed(self) -> bool:
        return self.is_mounted and len(self.children) == _LINES

    def watch_state(self, state: HostState) -> None:
        if self._on_screen and self._composed():
            self._apply(state)

    def watch_now(self, now: float) -> None:
        if self._on_screen and self._composed():
            self._draw_now()

    def _draw_now(self) -> None:
        """Redraw what ticks with ``now``: the times line, and the header of a stale card."""
        self._now_shown = self.now
        lines = {ln.id: ln for ln in self.query_children(_Line)}
        lines["hc-times"].redraw()
        if self.state.stale_since is not None:
            lines["hc-header"].redraw()

    def _apply(self, s: HostState) -> None:
        """Show ``s``: only what changed since the last state is restyled or redrawn (under a log
        flood the last line changes ten times a second; the rest of the card rarely does)."""
        old = self._shown
        self._shown = s
        if old is None or s.host != old.host:
            self.border_title = Content(plain(s.host, max_chars=120) or "?")
        if old is None or (s.stale_since, s.reconnect_attempt, s.updated) != (old.stale_since, old.reconnect_attempt, old.updated):
            # A host never reached has no last known state to call stale: its first word says
            # UNREACHABLE and its verdict how the connecting goes; the border would only repeat it.
            words = f"STALE · {reconnect_words(s)}" if s.stale_since is not None and s.updated is not None else None
            if old is None or words != self._subtitle_words:  # setting it repaints the card, even to the same
                self._subtitle_words = words
                self.border_subtitle = Content(words) if words is not None else None
        want = _state_classes(s, set(self.classes))
        if want != set(self.classes):
            # One restyle for the whole change, not one per class.
            self.set_classes(want)
        if old is None or (s.phase, s.state, s.progress, s.phases, s.download) != (
                old.phase, old.state, old.progress, old.phases, old.download):
            self.query_one(PhaseBar).update_state(s)
        if old is None or (s.gpus, s.failures, s.stale_since) != (old.gpus, old.failures, old.stale_since):
            self.query_one(GpuStrip).update_state(s)
        lines = {ln.id: ln for ln in self.query_children(_Line)}
        if old is None or card_lines.header_key(s) != card_lines.header_key(old):
            lines["hc-header"].redraw()
        if old is None or card_lines.times_key(s) != card_lines.times_key(old):
            lines["hc-times"].redraw()
        if old is None or (s.last_line, s.error, s.state) != (old.last_line, old.error, old.state):
            lines["hc-log"].redraw()
        if old is None or (s.verdict, s.hint, s.state) != (old.verdict, old.hint, old.state):
            verdict = lines["hc-verdict"]
            level = f"-{s.verdict.level}" if s.verdict is not None else ""
            for name in _LEVEL_CLASSES:
                verdict.set_class(name == level, name)
            # Shown whole, however many rows it needs: a display change reflows the card, and so
            # does a sentence that needs another number of rows ("for 3m34s" ticking does not).
            verdict.display = bool(s.verdict is not None or (s.state == "failed" and s.hint))
            verdict.redraw()

    def refresh_lines(self) -> None:
        """Redraw every line (after a theme change: colours are taken when a line is drawn); a card
        off screen does it when it is back on."""
        if not self._on_screen:
            self._shown = None  # everything is drawn anew when the card is on screen again
            return
        for line in self.query_children(_Line):
            line.redraw()

    # --- the lines, as Text (public so a test or a headless view can read them) --------------------

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"host-card--{name}", partial=True)

    def header_text(self, s: HostState, now: float = 0.0) -> Text:
        """Line 1 in this card's colours (:func:`widgets.card_lines.header_text`)."""
        return card_lines.header_text(s, now, self._style)

    def times_text(self, s: HostState, now: float = 0.0) -> Text:
        """Line 3 (:func:`widgets.card_lines.times_text`)."""
        return card_lines.times_text(s, now)

    def log_text(self, s: HostState) -> Text:
        """Line 6 in this card's colours (:func:`widgets.card_lines.log_text`)."""
        return card_lines.log_text(s, self._style)

    def verdict_text(self, s: HostState) -> Text:
        """Lines 7 on in this card's colours (:func:`widgets.card_lines.verdict_text`)."""
        return card_lines.verdict_text(s, self._style)

    # --- input ---------------------------------------------------------------------------------

    def action_select(self) -> None:
        """Post :class:`HostCard.Selected` for this card's host."""
        self.post_message(self.Selected(self.state.host, self))

    def on_click(self, event: Click) -> None:
        event.stop()
        self.focus()
        self.action_select()
