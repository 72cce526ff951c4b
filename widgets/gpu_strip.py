"""The GPU strip: each GPU's memory bar and utilisation, up to 8 GPUs in two lines of ~76 cells.

::

    0 ━━━━━─  71G  99% 1 ━━━━━─  71G  98% 2 ━━━━━─  71G  97% 3 ┄┄┄┄┄┄  n/a  n/a
    4 ━━━━━─  71G  99% 5 ✗ reset          6 ━━━━━─  71G  97% 7 ━━━━━─  71G  95%

A value a board cannot give (``None``) reads ``n/a``, never ``0``. A GPU with a ``note``
(``[GPU requires reset]``) shows a short word in the error colour. With no sample yet the strip
reads ``GPU: waiting``; when the GPU probe fails it reads ``GPU: n/a since HH:MM:SS — message``
and keeps the last sample below it, dimmed.

Three cell formats, the widest that fits the GPUs into the strip's lines is used:
``wide`` (``0 ━━━━━━─    71/80G  99%``), ``compact`` (``0 ━━━━━─  71G  99%``) and ``tiny``
(``0▆ 99%``, memory as one block character).
"""

from __future__ import annotations

import math
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from probes.data.events import CONNECTION_KINDS
from probes.data.events import GpuReading, GpuSample, ProbeFailure
from probes.data.state import HostState
from widgets.fmt import gib, hms, level_block
from widgets.text import host_text, plain

__all__ = ["GpuStrip", "note_word"]

_BOLD = Style(bold=True)
_ITALIC = Style(italic=True)


def note_word(note: str) -> str:
    """A GPU's problem note (``[GPU requires reset]``) as one short word."""
    n = plain(note, max_chars=200).lower()
    for key, word in (("reset", "reset"), ("lost", "lost"), ("fallen", "lost"), ("xid", "xid"),
                      ("unknown", "error"), ("not supported", "n/a"), ("insufficient", "perm")):
        if key in n:
            return word
    return "error"


def _util(u: int | None) -> str:
    return "n/a" if u is None else f"{max(0, min(999, u))}%"


class GpuStrip(Widget):
    """Per GPU a memory bar (used/total: the used part in ``gpu-strip--bar`` colour, the rest in
    ``gpu-strip--free``) and utilisation, in ``max_lines`` lines (default 2).

    Args:
        max_lines: lines the strip may use (its CSS height should match).

    Component classes: ``gpu-strip--bar`` (the used part of a memory bar), ``gpu-strip--hot``
    (the same, 95 % full or more), ``gpu-strip--free`` (the rest), ``gpu-strip--muted`` (GPU
    index, ``n/a``, waiting), ``gpu-strip--error`` (a GPU's note, the probe's failure). The last
    sample is dimmed while the probe fails or the host is stale.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpu-strip--bar", "gpu-strip--hot", "gpu-strip--free", "gpu-strip--muted", "gpu-strip--error",
    }

    DEFAULT_CSS = """
    GpuStrip {
        height: 2;
        width: 1fr;
        & > .gpu-strip--bar { color: $text-primary; }
        & > .gpu-strip--hot { color: $text-warning; }
        & > .gpu-strip--free { color: $foreground-disabled; }
        & > .gpu-strip--muted { color: $foreground-muted; }
        & > .gpu-strip--error { color: $text-error; }
    }
    """

    def __init__(self, reading: GpuReading | None = None, failure: ProbeFailure | None = None, *,
                 max_lines: int = 2, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.max_lines = max(1, max_lines)
        self._view: tuple[GpuReading | None, ProbeFailure | None, bool] = (reading, failure, False)

    def show(self, reading: GpuReading | None, failure: ProbeFailure | None = None, old: bool = False) -> None:
        """Show a GPU reading and the GPU probe's failure, if any; ``old`` dims the sample (stale
        host). Repaints only when something changed."""
        view = (reading, failure, old)
        if view != self._view:
            self._view = view
            self.refresh()

    def update_state(self, state: HostState) -> None:
        """Show a host's GPUs. A lost connection is the card's to say (its verdict), not the
        GPU line's: the last sample is only dimmed."""
        failure = state.failure("gpu")
        if failure is not None and failure.kind in CONNECTION_KINDS and failure.kind != "timeout":
            failure = None  # (a timeout may be nvidia-smi's own slowness: say it here)
        self.show(state.gpus, failure, state.stale_since is not None)

    def render(self) -> Text:
        reading, failure, old = self._view
        return self.render_text(self.size.width or 76, reading, failure, old)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"gpu-strip--{name}", partial=True)

    # --- rendering ---------------------------------------------------------------------------------

    def render_text(self, width: int, reading: GpuReading | None, failure: ProbeFailure | None = None,
                    old: bool = False) -> Text:
        """The strip as Text: at most ``max_lines`` lines, each at most ``width`` cells."""
        width = max(8, width)
        lines: list[Text] = []
        if failure is not None:
            head = Text(f"GPU: n/a since {hms(failure.time)} — ", style=self._style("error"), end="")
            head.append_text(host_text(failure.message, max_chars=400))
            head.truncate(width, overflow="ellipsis")
            lines.append(head)
            old = True
        budget = self.max_lines - len(lines)
        if reading is None or not reading.gpus:
            if failure is None and old:
                lines.append(Text("GPU: no data", style=self._style("muted") + _ITALIC, end=""))
            elif failure is None:
                lines.append(Text("GPU: waiting for the first sample" if width >= 40 else "GPU: waiting",
                                  style=self._style("muted") + _ITALIC, end=""))
            elif budget > 0 and reading is not None:
                lines.append(Text("no GPU in the last sample", style=self._style("muted"), end=""))
        elif budget > 0:
            lines.extend(self._cells(reading.gpus, width, budget, old))
        out = Text("\n", no_wrap=True, overflow="crop", end="").join(lines[: self.max_lines])
        out.no_wrap = True
        return out

    def _cells(self, gpus: tuple[GpuSample, ...], width: int, lines: int, old: bool) -> list[Text]:
        n = len(gpus)
        for fmt, cell_w in (("wide", 24), ("compact", 18), ("tiny", 8)):  # noqa: B007 - fmt is read after the loop
            per_line = max(1, (width + 1) // (cell_w + 1))
            if math.ceil(n / per_line) <= lines:
                break
        per_line = max(1, min(per_line, math.ceil(n / lines))) if fmt != "tiny" else per_line
        shown = gpus[: per_line * lines]
        rows = []
        for r in range(0, len(shown), per_line):
            row = Text(no_wrap=True, end="")
            for i, g in enumerate(shown[r:r + per_line]):
                if i:
                    row.append(" ")
                row.append_text(self._cell(g, fmt, cell_w))
            rows.append(row)
        hidden = n - len(shown)
        if hidden > 0 and rows:
            more = f" +{hidden}"
            rows[-1].truncate(max(0, width - len(more)))
            rows[-1].append(more, self._style("muted"))
        if old:
            dim = Style(dim=True)  # keeps the bars readable: used and free stay apart
            for row in rows:
                row.stylize(dim)
        for row in rows:
            row.truncate(width)
        return rows

    def _cell(self, g: GpuSample, fmt: str, cell_w: int) -> Text:
        label, value, na = self._style("muted"), Style(), self._style("muted") + _ITALIC
        idx = str(g.index)
        t = Text(no_wrap=True, end="")
        t.append(idx, label)
        if g.note:
            word = note_word(g.note)
            t.append((" " if fmt != "tiny" else "") + f"✗ {word}", self._style("error") + _BOLD)
            t.append(" " * max(0, cell_w - t.cell_len))
            t.truncate(cell_w)
            return t
        frac = g.mem_fraction
        hot = frac is not None and frac >= 0.95
        if fmt == "tiny":
            t.append(level_block(frac) if frac is not None else "?",
                     self._style("hot" if hot else "bar") if frac is not None else na)
            u = _util(g.util_pct)
            t.append(f"{u:>5}", na if g.util_pct is None else value)
        else:
            bar_w = (7 if fmt == "wide" else 6) - (len(idx) - 1)  # GPU 10+: a shorter bar
            t.append(" ")
            if frac is None:
                t.append("┄" * bar_w, na)
            else:
                used = round(frac * bar_w)
                if frac > 0 and used == 0:
                    used = 1  # some memory in use is never drawn as none
                t.append("━" * used, self._style("hot" if hot else "bar"))
                t.append("─" * (bar_w - used), self._style("free"))
            t.append(" ")
            if fmt == "wide":
                if g.mem_used_mib is None:
                    mem = "n/a"
                elif g.mem_total_mib is None:
                    mem = f"{gib(g.mem_used_mib)}/n/a"
                else:
                    mem = f"{gib(g.mem_used_mib)[:-1]}/{gib(g.mem_total_mib)}"
                t.append(f"{mem:>9}", na if g.mem_used_mib is None else value)
            else:
                t.append(f"{gib(g.mem_used_mib):>4}", na if g.mem_used_mib is None else value)
            t.append(f"{_util(g.util_pct):>5}", na if g.util_pct is None else value)
        idx_pad = max(0, cell_w - t.cell_len)
        t.append(" " * idx_pad)
        t.truncate(cell_w)
        return t
