"""The phase bar: a start's seven phases in one line, the current one lit with its progress.

::

    ✓ Start    ✓ Dl      ✓ Weights  ▌ Init ▐   Graph      Warm       Ready

Past phases are ticked and dim, a phase a start went past without entering (no download) is
marked ``–``, the current phase is lit and filled from the left as far as its :class:`Progress`
has come, future phases are faint. A failed start shows the phase it died in as ``✗`` in the
error colour; a stopped one marks it ``■``; a ready start lights ``Ready`` in the success colour.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from probes.data.vocab import PHASES
from probes.data.reading import Progress
from probes.data.state import HostState
from widgets.fmt import PHASE_SHORT

__all__ = ["PhaseBar", "progress_label", "phase_cells", "current_progress", "PHASE_ICONS"]

#: Three-letter labels for narrow bars.
_TINY = {"starting": "Sta", "download": "Dl", "weights": "Wgt", "init": "Ini",
         "graph_capture": "Gra", "warmup": "Wrm", "ready": "Rdy"}
#: What a progress bar counts, per phase.
_UNIT_WORD = {"weights": "shards", "graph_capture": "batches", "download": ""}
#: The mark of a phase as :func:`phase_cells` says it is shown.
PHASE_ICONS = {"done": "✓", "skipped": "–", "current": "▸", "ready": "●", "failed": "✗", "stopped": "■",
         "future": " "}
#: Widest a segment grows on a wide screen, in cells.
_MAX_SEGMENT = 16


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _bytes(done: float, total: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if total >= size:
            return f"{done / size:.1f}/{total / size:.1f} {unit}"
    return f"{_num(done)}/{_num(total)} B"


def progress_label(progress: Progress | None) -> str:
    """A progress bar's counter in words: ``shards 14/14``, ``batches 3/13``, ``1.2/3.4 GB``.

    Downloads count bytes (decimal units, as the reader reads ``3.4G``); other phases count
    items. Returns "" for None.
    """
    if progress is None:
        return ""
    if progress.phase == "download":
        return _bytes(progress.done, progress.total)
    word = _UNIT_WORD.get(progress.phase, "")
    counter = f"{_num(progress.done)}/{_num(progress.total)}"
    return f"{word} {counter}" if word else counter


def phase_cells(phase: str, status: str, visited: frozenset[str] | None = None) -> list[tuple[str, str]]:
    """Each phase id with how the bar shows it: ``done``, ``skipped``, ``current``, ``ready``,
    ``failed``, ``stopped`` or ``future``.

    Args:
        phase: the current phase id (for a failed start, the phase it died in).
        status: the start's state (``waiting``, ``loading``, ``ready``, ``failed``, ``stopped``).
        visited: phases the start has entered (from :attr:`HostState.phases`), or None when not
            known (then every phase before the current one counts as done).
    """
    cur = PHASES.index(phase) if phase in PHASES else 0
    if status == "ready":
        cur = len(PHASES) - 1
    out = []
    for i, p in enumerate(PHASES):
        if i == cur:
            if status == "waiting":
                kind = "future"
            elif status in ("ready", "failed", "stopped"):
                kind = status
            else:
                kind = "ready" if p == "ready" else "current"
        elif i < cur or (p == "download" and visited is not None and p in visited):
            kind = "done" if visited is None or not visited or p in visited else "skipped"
        else:
            kind = "future"
        out.append((p, kind))
    return out


def current_progress(state: HostState) -> Progress | None:
    """The progress a bar draws inside the current phase: the state's own bar, or, when it has
    none for this phase, a download with a known total (vLLM's silent fetch inside Weight load);
    None when neither. (The bar fills only when the returned progress is the current phase's.)"""
    progress = state.progress
    d = state.download
    if d is not None and d.expected_bytes and (progress is None or progress.phase != state.phase):
        return Progress(state.phase, d.bytes, d.expected_bytes)
    return progress


class PhaseBar(Widget):
    """One line: the seven phases of a start (see module docstring).

    Args:
        phase: the current phase id. status: the start's state (see :func:`phase_cells`).
        progress: the current bar, drawn inside the current phase when it is that phase's.

    Component classes (colours only; the app's theme decides them): ``phase-bar--done``,
    ``phase-bar--current``, ``phase-bar--fill``, ``phase-bar--ready``, ``phase-bar--failed``,
    ``phase-bar--stopped``, ``phase-bar--future`` (also a skipped phase).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "phase-bar--done", "phase-bar--current", "phase-bar--fill", "phase-bar--ready",
        "phase-bar--failed", "phase-bar--stopped", "phase-bar--future",
    }

    DEFAULT_CSS = """
    PhaseBar {
        height: 1;
        width: 1fr;
        & > .phase-bar--done { color: $foreground-muted; }
        & > .phase-bar--future { color: $foreground-disabled; }
        & > .phase-bar--current { background: $primary-muted; color: $text-primary; text-style: bold; }
        & > .phase-bar--fill { background: $primary; color: $background; text-style: bold; }
        & > .phase-bar--ready { background: $success-muted; color: $text-success; text-style: bold; }
        & > .phase-bar--failed { background: $error-muted; color: $text-error; text-style: bold; }
        & > .phase-bar--stopped { background: $warning-muted; color: $text-warning; text-style: bold; }
    }
    """

    def __init__(self, phase: str = "starting", status: str = "waiting", progress: Progress | None = None,
                 visited: frozenset[str] | None = None, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._view: tuple[str, str, Progress | None, frozenset[str] | None] = (phase, status, progress, visited)

    def show(self, phase: str, status: str, progress: Progress | None = None,
             visited: frozenset[str] | None = None) -> None:
        """Show a phase, a start state and a progress; repaints only when something changed."""
        view = (phase, status, progress, visited)
        if view != self._view:
            self._view = view
            self.refresh()

    def update_state(self, state: HostState) -> None:
        """Show a host's current start (its progress as :func:`current_progress` says)."""
        visited = frozenset(s.phase for s in state.phases) if state.phases else None
        self.show(state.phase, state.state, current_progress(state), visited)

    def render(self) -> Text:
        phase, status, progress, visited = self._view
        return self.render_text(self.size.width or 76, phase, status, progress, visited)

    def _style(self, kind: str) -> Style:
        return self.get_component_rich_style(f"phase-bar--{kind}", partial=True)

    def render_text(self, width: int, phase: str, status: str, progress: Progress | None = None,
                    visited: frozenset[str] | None = None) -> Text:
        """The bar as one line of Text at most ``width`` cells wide."""
        cells = phase_cells(phase, status, visited)
        n = len(cells)
        width = max(1, width)
        sep = " " if width >= 2 * n - 1 else ""
        seg = min(_MAX_SEGMENT, (width - (n - 1) * len(sep)) // n)
        if seg >= 2 + max(len(v) for v in PHASE_SHORT.values()):
            labels = PHASE_SHORT
        elif seg >= 5:
            labels = _TINY
        else:
            labels = None
        seg = max(1, seg)
        out = Text(no_wrap=True, overflow="crop", end="")
        for i, (p, kind) in enumerate(cells):
            if i:
                out.append(sep)
            if labels is None:
                body = PHASE_ICONS[kind] if kind != "future" else "·"
            else:
                body = f"{PHASE_ICONS[kind]} {labels[p]}"
            body = body[:seg].ljust(seg)
            style = self._style("future" if kind == "skipped" else kind)
            if kind == "current" and progress is not None and progress.phase == p:
                filled = round(progress.fraction * seg)
                out.append(body[:filled], self._style("fill"))
                out.append(body[filled:], style)
            else:
                out.append(body, style)
        out.truncate(width)
        return out
