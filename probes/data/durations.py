"""A span of time in short words: the one formatter of durations that upwatch shows.

Cards, the compact rows, verdict sentences, notifications, reports, ``upwatch history`` and
``upwatch replay`` all write durations through :func:`fmt_span` (a module of its own, with no
imports, so that ``replay`` does not load the verdicts to print a timeline).
"""

from __future__ import annotations


def fmt_span(seconds: float) -> str:
    """A span of time, short: ``42s``, ``1m15s``, ``1h02m``, ``2d03h`` (negative reads ``0s``).

    Args:
        seconds: the span in seconds (a finite float; fractions are cut, not rounded).
    """
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"
