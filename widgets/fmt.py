"""Small formatters shared by the widgets: clock times, durations, sizes. Pure functions."""

from __future__ import annotations

import math
import time

from probes.data.durations import fmt_span

__all__ = ["hms", "duration", "gib", "level_block", "PHASE_LABELS", "PHASE_SHORT", "RUNG_WORDS", "STATE_WORDS",
           "STATE_LOOK", "RUNG_LOOK", "BLOCKS"]

#: Phase ids (``probes.data.vocab.PHASES``) as operators read them.
PHASE_LABELS: dict[str, str] = {
    "starting": "Starting", "download": "Download", "weights": "Weight load", "init": "Init",
    "graph_capture": "Graph capture", "warmup": "Warm-up", "ready": "Ready",
}
#: Short phase labels for the one-line phase bar.
PHASE_SHORT: dict[str, str] = {
    "starting": "Start", "download": "Dl", "weights": "Weights", "init": "Init",
    "graph_capture": "Graph", "warmup": "Warm", "ready": "Ready",
}
#: Readiness rung ids (``probes.data.state.RUNGS`` and ``unknown``) in words.
RUNG_WORDS: dict[str, str] = {
    "inactive": "not running", "port_closed": "port closed", "http_unhealthy": "HTTP unhealthy",
    "healthy": "healthy", "serving": "serving", "unknown": "no health data",
}
#: A host's condition (:func:`probes.fold.headline.headline`) as its first word on a card or a row.
STATE_WORDS: dict[str, str] = {"waiting": "WAITING", "loading": "LOADING", "ready": "READY", "failed": "FAILED",
                               "stopped": "STOPPED"}
#: The look (a widget's component class suffix: muted, busy, ok, warn, error) of each condition.
STATE_LOOK: dict[str, str] = {
    "waiting": "muted", "loading": "busy", "ready": "ok", "failed": "error", "stopped": "warn", "stalled": "warn",
    "restart loop": "error", "unreachable": "error", "ssh refused": "error", "cannot see": "warn",
    "no such unit": "error", "unhealthy": "warn"}
#: The look of each readiness rung, and whether it is bold.
RUNG_LOOK: dict[str, tuple[str, bool]] = {
    "inactive": ("error", False), "port_closed": ("warn", False), "http_unhealthy": ("warn", False),
    "healthy": ("ok", False), "serving": ("ok", True), "unknown": ("muted", False)}
#: Eight block heights, empty to full.
BLOCKS = "▁▂▃▄▅▆▇█"


def level_block(fraction: float) -> str:
    """A fraction (0..1; outside is clamped) as one of :data:`BLOCKS` (a GPU's memory in one cell)."""
    return BLOCKS[max(0, min(7, int(fraction * 8)))]


def hms(t: float | None) -> str:
    """Epoch seconds as ``HH:MM:SS`` (UTC), or ``--:--:--`` when unknown or not a time."""
    if t is None or not math.isfinite(t):
        return "--:--:--"
    try:
        return time.strftime("%H:%M:%S", time.gmtime(t))
    except (OverflowError, OSError, ValueError):
        return "--:--:--"


def duration(seconds: float | None) -> str:
    """A duration as ``12s``, ``4m03s``, ``2h05m`` or ``3d04h``; ``?`` when unknown.

    Negative durations (a clock behind the data) read as ``0s``.
    """
    if seconds is None or not math.isfinite(seconds):
        return "?"
    return fmt_span(seconds)


def gib(mib: float | None) -> str:
    """MiB as a short GiB figure (``71G``, ``0.5G``), ``n/a`` when unknown."""
    if mib is None:
        return "n/a"
    g = mib / 1024
    if g < 9.95:
        return f"{g:.1f}G"
    return f"{g:.0f}G"
