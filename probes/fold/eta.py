"""ETA and "slower than usual": pure rules over a loading :class:`~probes.data.state.HostState`, its
:attr:`~probes.data.state.HostState.typical` durations (medians of earlier comparable ready starts, from
``probes/store/history.py``) and an injected ``now``.

* the current phase: seconds in it so far, and its median;
* the whole start: seconds since its first line, and the median to ready;
* the ETA to ready: the medians of the phases still to come, plus what is left of the current one
  (its median minus the time in it, never below 0; the median times the part not done yet when the
  phase shows ``done/total`` progress); none while the start looks hung (the verdict ``stalled``:
  a bar that stopped would otherwise promise the same "ready in ~2m" until the stall is told);
* slower: the current phase, or the whole start, has run past :func:`slower_after` its median:
  more than the median plus a margin of :data:`SLOWER_MARGIN` of it, and at least
  :data:`SLOWER_MIN_S` seconds (a 2-second phase that takes 5 is not news); only while loading, and
  only with at least one earlier start. Once slower, there is no ETA: the medians no longer say when
  it will be ready.

Every duration here is ``now`` minus a stamp of the state (``phase_began``, ``start_began``), the
same stamps and the same ``now`` the card and the verdict use, so the words cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from probes.data.vocab import PHASE_INDEX
from probes.data.state import HostState, Typical

#: A phase (or the whole start) is slower than usual past its median plus this part of it ...
SLOWER_MARGIN = 0.5
#: ... and at least this many seconds past its median.
SLOWER_MIN_S = 30.0
#: The margin as a factor of the median (1.5: "more than 1.5 times the median", for medians of 60 s and more).
SLOWER_FACTOR = 1.0 + SLOWER_MARGIN

#: Phase ids in words, for sentences ("graph capture 1:12 of ~1:40").
PHASE_WORDS = {"starting": "starting", "download": "download", "weights": "weight load", "init": "init",
               "graph_capture": "graph capture", "warmup": "warm-up", "ready": "ready"}


@dataclass(frozen=True, slots=True)
class Eta:
    """Where a loading start stands against earlier comparable starts (all seconds).

    Attributes:
        phase: the current phase id.
        phase_elapsed_s: seconds in the current phase so far, or None when its beginning is unknown.
        phase_typical_s: the phase's median, or None when the earlier starts never had it.
        elapsed_s: seconds since the start's first line, or None.
        total_typical_s: the median seconds to ready, or None.
        remaining_s: the ETA to ready (seconds from ``now``), or None when nothing is known.
        slower_phase: the phase has run longer than :func:`slower_after` its median.
        slower_start: the start has run longer than :func:`slower_after` the median total.
        n: how many earlier ready starts the medians are taken over.
    """

    phase: str
    phase_elapsed_s: float | None
    phase_typical_s: float | None
    elapsed_s: float | None
    total_typical_s: float | None
    remaining_s: float | None
    slower_phase: bool
    slower_start: bool
    n: int

    @property
    def slower(self) -> bool:
        """Slower than usual, in the current phase or as a whole."""
        return self.slower_phase or self.slower_start


def slower_after(typical_s: float) -> float:
    """Seconds after which a phase (or start) whose median is ``typical_s`` seconds is slower than
    usual (strictly more than this): ``typical_s + max(SLOWER_MARGIN * typical_s, SLOWER_MIN_S)``."""
    return typical_s + max(SLOWER_MARGIN * typical_s, SLOWER_MIN_S)


def _usual(t: Typical, phase: str) -> bool:
    """The phase came in most earlier starts (a download that happens once stays out of the ETA)."""
    return any(p == phase and 2 * count > t.n for p, _, count in t.phases)


def eta_for(state: HostState, now: float) -> Eta | None:
    """The :class:`Eta` of ``state`` at ``now`` (epoch seconds), or None when the start is not
    loading or there is no history to compare with (``state.typical`` None or empty)."""
    t = state.typical
    if state.state != "loading" or t is None or t.n < 1:
        return None
    phase = state.phase
    # A stamp newer than ``now`` (a line that arrived after the screen's clock last moved) is 0 s old.
    ph_el = max(0.0, now - state.phase_began) if state.phase_began is not None else None
    el = max(0.0, now - state.start_began) if state.start_began is not None else None
    ph_typ = t.phase_s(phase)
    here = PHASE_INDEX.get(phase, -1)
    later = [med for p, med, _ in t.phases
             if PHASE_INDEX.get(p, -1) > here and p != "ready" and _usual(t, p)]
    remaining: float | None = None
    if ph_typ is not None:
        p = state.progress
        if p is not None and p.phase == phase and p.total:
            left = ph_typ * (1.0 - p.fraction)
        else:
            left = max(0.0, ph_typ - (ph_el or 0.0))
        remaining = left + sum(later)
    elif t.total_s is not None and el is not None:
        remaining = max(0.0, t.total_s - el)  # a phase the earlier starts never had: the total says it
    elif later:
        remaining = sum(later)
    if state.verdict is not None and state.verdict.kind == "stalled":
        remaining = None  # the start looks hung: no medians say when it will be ready
    slower_phase = ph_typ is not None and ph_el is not None and ph_typ > 0 and ph_el > slower_after(ph_typ)
    slower_start = (t.total_s is not None and el is not None and t.total_s > 0
                    and el > slower_after(t.total_s))
    return Eta(phase, ph_el, ph_typ, el, t.total_s, remaining, slower_phase, slower_start, t.n)


def clock_span(seconds: float | None) -> str:
    """Seconds as a stopwatch reads: ``0:42``, ``1:12``, ``12:05``, ``1:02:03``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(max(0.0, seconds))  # truncated, as the cards' durations are
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def about(seconds: float) -> str:
    """A rough span for an ETA: ``<1m``, ``~2m`` (whole minutes, rounded), ``~1h05m``."""
    if seconds < 60:
        return "<1m"
    m = int(seconds / 60 + 0.5)
    if m < 60:
        return f"~{m}m"
    return f"~{m // 60}h{m % 60:02d}m"


def typical_words(state: HostState, now: float) -> str:
    """The loading start against its history in a few words, for a progress line:
    ``graph capture 1:12 of ~1:40 · ready in ~2m``; ``graph capture 2:40 of ~1:40 · slower than
    usual`` when it is (no ETA then: the medians no longer tell); ``6:10 of ~5:00 · slower than
    usual`` when the phase has no median; "" when there is nothing to compare with (not loading, no
    history)."""
    e = eta_for(state, now)
    if e is None:
        return ""
    parts: list[str] = []
    if e.phase_typical_s is not None and e.phase_elapsed_s is not None:
        parts.append(f"{PHASE_WORDS.get(e.phase, e.phase)} {clock_span(e.phase_elapsed_s)} of "
                     f"~{clock_span(e.phase_typical_s)}")
    elif e.total_typical_s is not None and e.elapsed_s is not None:
        parts.append(f"{clock_span(e.elapsed_s)} of ~{clock_span(e.total_typical_s)}")
    if e.slower:
        parts.append("slower than usual")
    elif e.remaining_s is not None:
        parts.append(f"ready in {about(e.remaining_s)}")
    return " · ".join(parts)


def slower_sentence(state: HostState, now: float) -> tuple[str, tuple[str, ...]] | None:
    """The "slower than usual" verdict's sentence and evidence for ``state`` at ``now``, or None
    when the start is not slower than usual (:func:`slower_after` its medians).

    The sentence names the phase when the phase is slow (``Slower than usual: graph capture 2:40,
    usually ~1:40 (median of 6 starts).``), else the whole start."""
    e = eta_for(state, now)
    if e is None or not e.slower:
        return None
    n = f"median of {e.n} start{'s' if e.n != 1 else ''}"
    if e.slower_phase:
        what = (f"{PHASE_WORDS.get(e.phase, e.phase)} {clock_span(e.phase_elapsed_s)}, "
                f"usually ~{clock_span(e.phase_typical_s)}")
    else:
        what = f"this start {clock_span(e.elapsed_s)} so far, usually ready in ~{clock_span(e.total_typical_s)}"
    evidence = []
    if e.phase_typical_s is not None and e.phase_elapsed_s is not None:
        evidence.append(f"{PHASE_WORDS.get(e.phase, e.phase)}: {clock_span(e.phase_elapsed_s)} so far, "
                        f"median {clock_span(e.phase_typical_s)}")
    if e.total_typical_s is not None and e.elapsed_s is not None:
        evidence.append(f"whole start: {clock_span(e.elapsed_s)} so far, median {clock_span(e.total_typical_s)} to ready")
    t = state.typical
    assert t is not None
    ident = t.model or "no model name"
    if t.args_hash:
        ident += f", engine arguments {t.args_hash[:12]}"
    evidence.append(f"compared with the last {e.n} ready start{'s' if e.n != 1 else ''} of {state.unit} ({ident})")
    return f"Slower than usual: {what} ({n}).", tuple(evidence)
