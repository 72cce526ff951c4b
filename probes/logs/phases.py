"""How far a start has come: its phases, per process, its progress bars, and its ready line.

Phases only move forward (``download`` excepted: it may come before or inside ``starting`` and
return to it); with tensor/data-parallel ranks each rank has its own (see
:meth:`~probes.logs.starts.Start.host_phase`). A move of the host's phase recovers the start's
suspects. Progress is the last ``n/N`` of a tqdm bar or an engine's counter, per rank.
"""

from __future__ import annotations

import re

from probes.data.vocab import PHASE_INDEX, PHASES
from probes.logs.context import Trace
from probes.logs.engines import BarLabel, Rule
from probes.logs.logline import Line
from probes.logs.starts import Life, Start
from probes.logs.timeline import Timeline

_STARTING, _DOWNLOAD, _READY = (PHASE_INDEX[p] for p in ("starting", "download", "ready"))
# "12/345 [", "3.2G/9.9G [" : a tqdm counter with its bracketed timing.
# The first digit comes before the look-behind (the same test: no digit or dot before the number) so
# that `re` skips ahead to digits instead of trying the look-behind at every position.
_BAR_RE = re.compile(r"(\d(?<![\d.]\d)\d{0,14}(?:\.\d{1,6})?)([kMGT]?)(?:i?B)?/(\d{1,15}(?:\.\d{1,6})?)([kMGT]?)(?:i?B)? \[")
_PERCENT_RE = re.compile(r"%(?<=\d%)")  # a digit and "%"; begins with the literal, a fast scan in `re`
_UNIT = {"": 1, "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4}


def advance(start: Start, rank: str | None, phase: str, ln: Line, timeline: Timeline, recover: bool = True) -> None:
    """Move a process of the start (``rank``; None: the main one) to ``phase`` if that is forward;
    a move of the host's phase recovers the start's suspects (unless the line saying so is itself
    an error line: ``recover`` False). After the start failed, an error line that names a later
    phase (another process reporting the failure: TGI's router "warmup{...}: Server error") says
    where it failed."""
    if start.failed:
        p = PHASE_INDEX[phase]
        if not recover and p > start.fail_phase and not start.ended:
            start.fail_phase = p
            start.marks.setdefault(phase, timeline.mark(phase, ln))
        return
    p = PHASE_INDEX[phase]
    cur = start.main if rank is None else start.ranks.get(rank, -1)
    if p == _DOWNLOAD:
        ok = cur <= _DOWNLOAD
    elif p == _STARTING:
        ok = cur < 0 or cur == _DOWNLOAD
    else:
        ok = p > cur
    if not ok:
        return
    before = start.host_phase() if start.suspects else 0
    if rank is None:
        start.main = p
    else:
        start.ranks[rank] = p
    if phase not in start.marks:
        start.marks[phase] = timeline.mark(phase, ln)
    if recover and start.suspects and start.host_phase() > before and not start.served:
        # The start went on to a later phase: what looked like a failure was not one.
        start.suspects.clear()
        start.error = None


def phase_line(start: Start, rule: Rule, phase: str, ln: Line, timeline: Timeline, high: bool) -> None:
    """A line that names ``phase`` (``rule``'s; ``high``: it is logged as an error): the process
    moves there (see :func:`advance`), and a rule that says the phase is done ("... took N s")
    marks it completed, with ranks once every rank seen has said so."""
    advance(start, ln.rank, phase, ln, timeline, recover=not high)
    p = PHASE_INDEX[phase]
    if rule.completes and not start.failed:
        if ln.rank is None:
            start.completed = p
        else:  # with ranks, done once every rank seen has said so
            done = start.done_ranks.setdefault(p, set())
            done.add(ln.rank)
            if done.issuperset(start.ranks):
                start.completed = p
    elif start.completed == p and not start.failed:
        start.completed = -1  # more of the phase (a draft model's capture after the target's)


def frame_phase(start: Start, trace: Trace, phase: str | None, ln: Line, timeline: Timeline) -> None:
    """A traceback frame names the phase its function belongs to: the failure happened there
    if that is further than the phase the log had reached."""
    if phase is None:
        return
    p = PHASE_INDEX[phase]
    if p > trace.phase:
        trace.phase = p
        trace.mark = timeline.mark(phase, ln)
    if start.failed and p > start.fail_phase:
        start.fail_phase = p
        start.marks.setdefault(phase, timeline.mark(phase, ln))


def bar(start: Start, ln: Line, bars: tuple[BarLabel, ...], timeline: Timeline) -> None:
    """A line with a rate (``it/s``, ``s/it``): a tqdm bar's label names its phase (``bars``: the
    engine's labels), and its ``n/N`` is the progress (an unlabelled bar's, of the furthest phase
    any process has reached). A rate in a message without a counter or a percentage is no bar."""
    msg = ln.msg
    c = _BAR_RE.search(msg, 0, 4096) if " [" in msg else None  # "n/N [" holds " ["
    if c is None and _PERCENT_RE.search(msg, 0, 300) is None:
        return  # a rate in a message ("12 it/s"), not a bar
    # The label is what comes before the bar itself ("Loading safetensors checkpoint shards:
    # 50% Completed ", "config.json: 100%"); short, so only the start of the line is looked at.
    label = msg[:200].split("|", 1)[0]
    low = label.lower() if label.isascii() else None
    phase = None
    for b in bars:
        if b.search(label, low):
            phase = b.phase
            break
    if phase is not None:
        if start.failed:
            # Bars that stderr flushes with the traceback: the failure happened in their phase.
            p = PHASE_INDEX[phase]
            if p > start.fail_phase and c is not None:
                start.fail_phase = p
                start.marks.setdefault(phase, timeline.mark(phase, ln))
        else:
            advance(start, ln.rank, phase, ln, timeline)
    if c is None:
        return
    if phase is None:
        # An unlabelled bar belongs to the furthest phase any process has reached.
        furthest = start.furthest()
        if furthest < 0:
            return
        phase = PHASES[furthest]
    done = float(c.group(1)) * _UNIT[c.group(2)]
    total = float(c.group(3)) * _UNIT[c.group(4)]
    start.bars[ln.rank] = (phase, done, total)
    start.last_bar_phase = phase


def count(start: Start, ln: Line, phase: str | None, m: re.Match[str]) -> None:
    """An engine's own progress counter (a rule's ``done``/``total`` groups) in ``phase``, or in
    the furthest phase any process has reached when the rule names none."""
    if phase is None:
        furthest = start.furthest()
        if furthest < 0:
            return
        phase = PHASES[furthest]
    start.bars[ln.rank] = (phase, float(m.group("done")), float(m.group("total")))
    start.last_bar_phase = phase


def ready(start: Start, rule: Rule, ln: Line, timeline: Timeline) -> bool:
    """The server says it is ready (``rule``: provisionally, or confirming it): what looked like a
    failure was not one. False when the start had stopped on purpose (the line changes nothing)."""
    if rule.confirm and start.ready:
        start.life = Life.READY
        return True
    if start.life is Life.STOPPED:
        return False
    if start.failed:
        # The server came up after all: what looked fatal was not.
        start.life, start.error, start.fail_phase = Life.LOADING, None, -1
    start.suspects.clear()
    if not start.served:
        start.error = None
    if not start.ready:
        start.pre_ready = start.host_phase()
        start.main = _READY
        start.marks.setdefault("ready", timeline.mark("ready", ln))
    start.served = True
    start.life = Life.PROVISIONAL if rule.provisional and not rule.confirm else Life.READY
    return True
