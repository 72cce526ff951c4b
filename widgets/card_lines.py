"""What the host card's text lines say, as :class:`Text` made from a frozen :class:`HostState`
and the app's ``now`` (epoch seconds, 0 when not known yet): the header (line 1), the times
(line 3), the log line (line 6) and the verdict with its hint (lines 7 on). :mod:`widgets.host_card`
draws them; the phase bar and the GPU strip are widgets of their own.

The makers are pure: the colours come from ``style``, the card's look-up of a look's name
(``muted``, ``busy``, ``ok``, ``warn``, ``error``, ``stale``) to the rich style its theme gives
the component class ``host-card--<name>``. :func:`header_key` and :func:`times_key` hold what the
header and the times line are made from, so the card redraws a line only when its key changed.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from rich.text import Text

from probes.data.state import HostState
from probes.fold.download import download_words
from probes.fold.eta import about, eta_for
from probes.fold.headline import headline, shown_hint
from widgets.fmt import PHASE_LABELS, RUNG_LOOK, RUNG_WORDS, STATE_LOOK, STATE_WORDS, duration
from widgets.phase_bar import progress_label
from widgets.text import host_text, plain

__all__ = ["header_text", "times_text", "log_text", "verdict_text", "header_key", "times_key"]

_BOLD = Style(bold=True)


def header_key(s: HostState) -> tuple[object, ...]:
    """What :func:`header_text` says depends on (its clock aside: a stale card's age ticks)."""
    return (s.state, s.unit, s.engine, s.readiness, s.restart_counter, s.restart_loop, s.stale_since,
            s.verdict.kind if s.verdict is not None else "")


def times_key(s: HostState) -> tuple[object, ...]:
    """What :func:`times_text` says depends on (its clock aside)."""
    return (s.state, s.phase, s.progress, s.phase_began, s.start_began, s.phases, s.starts, s.failed_at, s.typical,
            s.download)


def header_text(s: HostState, now: float, style: Callable[[str], Style]) -> Text:
    """Line 1: [STALE age] state, unit · engine · readiness · restarts (no STALE for a host
    never reached: there is no old state, and its first word is UNREACHABLE); wraps on a
    narrow card.

    Args:
        s: the host's snapshot. now: the app's clock (epoch seconds; 0: no ages). style: the
            card's look-up of a look's name (see module docstring).
    """
    sep = Text(" · ", style=style("muted"), end="")
    t = Text(end="")
    if s.stale_since is not None and s.updated is not None:
        # The border's subtitle says "STALE since HH:MM:SS"; here, how long, in few cells.
        t.append(f"STALE {duration(now - s.stale_since)}" if now else "STALE", style("stale"))
        t.append(" ")
    word = headline(s)
    t.append(STATE_WORDS.get(word, word.upper()),
             style(STATE_LOOK[word]) + _BOLD if word in STATE_LOOK else _BOLD)
    t.append("  ")
    t.append_text(host_text(s.unit, max_chars=60))
    t.append_text(sep)
    t.append_text(host_text(s.engine, max_chars=20, style=style("muted")))
    t.append_text(sep)
    rung = s.readiness if s.readiness in RUNG_WORDS else "unknown"
    look, bold = RUNG_LOOK[rung]
    t.append(RUNG_WORDS[rung], style(look) + _BOLD if bold else style(look))
    if s.restart_counter is not None:
        t.append_text(sep)
        t.append(f"restarts {s.restart_counter}",
                 style("error") if s.restart_loop else style("muted"))
    elif s.restart_loop:
        t.append_text(sep)
        t.append("restart loop", style("error"))
    return t

def times_text(s: HostState, now: float) -> Text:
    """Line 3: progress (a download's bytes, rate and ETA while there is one) and how long
    things took, from ``now`` (wraps on a narrow card rather than cut its end)."""
    t = Text(end="")
    parts: list[str] = []
    label = PHASE_LABELS.get(s.phase, plain(s.phase, max_chars=20))
    if s.state == "loading":
        if s.download is not None:  # measured in the hub cache: bytes, rate, ETA
            parts.append(download_words(s))
        elif s.progress is not None and s.progress.phase == s.phase:
            parts.append(f"{progress_label(s.progress)} ({s.progress.fraction:.0%})")
        e = eta_for(s, now) if now else None
        if now and s.phase_began is not None:
            usual = f" of ~{duration(e.phase_typical_s)}" if e is not None and e.phase_typical_s is not None else ""
            parts.append(f"in {label} {duration(now - s.phase_began)}{usual}")
        else:
            parts.append(f"in {label}")
        if e is not None and e.slower:
            parts.append("slower than usual")
        elif e is not None and e.remaining_s is not None:
            parts.append(f"ready in {about(e.remaining_s)}")
        if now and s.start_began is not None:
            parts.append(f"since start {duration(now - s.start_began)}")
    elif s.state == "ready":
        ready_at = next((p.began for p in s.phases if p.phase == "ready"), s.phase_began)
        if ready_at is not None and s.start_began is not None:
            parts.append(f"ready in {duration(ready_at - s.start_began)}")
        else:
            parts.append("ready")
        if now and ready_at is not None:
            parts.append(f"up {duration(now - ready_at)}")
    elif s.state == "failed":
        end = s.failed_at if s.failed_at is not None else (
            s.last_log_at if s.last_log_at is not None else s.updated)
        if end is not None and s.start_began is not None:
            parts.append(f"failed in {label} after {duration(end - s.start_began)}")
        else:
            parts.append(f"failed in {label}")
        if now and end is not None:
            parts.append(f"{duration(now - end)} ago")
        if s.starts > 1:
            parts.append(f"start {s.starts}")
    elif s.state == "stopped":
        parts.append(f"stopped in {label}")
        if now and s.last_log_at is not None:
            parts.append(f"{duration(now - s.last_log_at)} ago")
    else:
        parts.append("no log line yet")
    t.append(" · ".join(parts))
    return t

def log_text(s: HostState, style: Callable[[str], Style]) -> Text:
    """Line 6: the decisive error line of a failed start, else the last meaningful line."""
    if s.state == "failed" and s.error is not None:
        t = Text("✗ ", style=style("error"), end="")
        t.append_text(host_text(s.error.text, max_chars=400, style=style("error")))
    elif s.last_line:
        t = Text("› ", end="")
        t.append_text(host_text(s.last_line, max_chars=400))
    elif s.state in ("loading", "ready", "failed", "stopped"):
        t = Text("› no log line yet", end="")
    else:
        t = Text("", end="")  # line 3 already says "no log line yet"
    t.no_wrap = True
    t.overflow = "ellipsis"
    return t

def verdict_text(s: HostState, style: Callable[[str], Style]) -> Text:
    """Lines 7 on: the verdict sentence, and a failed start's hint but what the verdict already
    says (:func:`~probes.fold.headline.shown_hint`), whole (the card wraps it to as many rows as
    it needs)."""
    t = Text(end="")
    if s.verdict is not None:
        t.append_text(host_text(s.verdict.sentence, max_chars=600))
    if s.state == "failed" and (shown := shown_hint(s)):
        if t.plain:
            t.append(" ")
        t.append(f"Hint: {plain(shown, max_chars=600)}", style("muted"))
    t.no_wrap = False
    return t
