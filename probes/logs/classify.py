"""What the engine tables say of a line (the reader's stage 3), and which engine wrote the log.

:class:`Classifier` holds the engine as far as the log has named it, with that engine's tables
(rules, traceback frames, bar labels). Each line's rule hits come back as one :class:`Hits`; the
evidence a line carries (its syslog identifier, prefix style, process name, detection rules)
counts towards an engine as a score, so stronger evidence can still change a guess until the
engine is settled (see :meth:`Classifier.evidence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.data.vocab import PHASE_INDEX
from probes.logs.engines import EMBEDS, ENGINES, IDENTS, Rule, bars_for, frame_matcher_for, matcher_for
from probes.logs.logline import Line
from probes.logs.starts import Start

_STARTING = PHASE_INDEX["starting"]
#: The source line under a traceback's last frame that raises an exception with its message
#: written out (``raise ValueError("No available memory for the cache blocks. "``): an excerpt cut
#: before the exception line still shows what was raised.
RAISE_RE = re.compile(r"\s*raise [A-Za-z_][\w.]*\(\s*[rbf]?[\"']")
#: A raised message counts only for a named root cause (the strength of one).
_RAISED_STRENGTH = 4
#: Prefix styles that hint at an engine: (engine, strong).
_FLAVOR_ENGINE = {"sglang": ("sglang", False), "vllm": ("vllm", False), "trtllm": ("trtllm", True),
                  "tgi": ("tgi", False), "logfmt": ("ollama", False)}
_VLLM_PROCS = ("APIServer", "EngineCore", "VllmWorker", "Worker_", "RayWorkerWrapper")
#: How much each kind of evidence counts towards an engine (each source counts once per log).
STRONG, WEAK, UNIT_WEIGHT = 10, 1, 5
#: An engine is settled once it has this much evidence (two strong sources), or half of it once
#: the start is past ``starting``; until then stronger evidence may still change it.
_SETTLED = 20
#: Engines that another runs inside it (llama.cpp in Ollama): their lines may yet turn out to be
#: the outer engine's, so evidence is still counted once they are settled.
_EMBEDDED = frozenset(EMBEDS.values())
#: Unit-name words that name an engine (``ollama-gpu1.service``, ``vllm-qwen.service``).
_UNIT_WORDS = (("ollama", "ollama"), ("sglang", "sglang"), ("vllm", "vllm"), ("text-generation", "tgi"),
               ("tgi", "tgi"), ("trtllm", "trtllm"), ("tensorrt", "trtllm"), ("llama-server", "llamacpp"),
               ("llamacpp", "llamacpp"), ("llama-cpp", "llamacpp"), ("llama.cpp", "llamacpp"))


def unit_engine(unit: str) -> str | None:
    """The engine a unit's name names (``ollama-gpu1.service`` → ``ollama``), or None."""
    low = unit.lower()
    for word, name in _UNIT_WORDS:
        if word in low:
            return name
    return None


@dataclass(slots=True)
class Hits:
    """What the rules say of one line: the first rule of each kind that matched (a phase, ready,
    failure with its match, traceback frame, banner, systemd lifecycle wording), the progress
    counter's match, and whether any rule says the server ended on purpose, the line begins a
    harmless warning (``benign``) or reports nothing wrong (``harmless``)."""

    phase: Rule | None = None
    ready: Rule | None = None
    fail: Rule | None = None
    fail_m: re.Match[str] | None = None
    progress_m: re.Match[str] | None = None
    frame: Rule | None = None
    banner: Rule | None = None
    ends: bool = False
    benign: bool = False
    harmless: bool = False
    lifecycle: tuple[str, re.Match[str]] | None = None


class Classifier:
    """The engine of one log and its tables.

    ``engine`` is the best guess (None before any evidence), ``committed`` once it is settled (or
    ``forced``, given by the operator); ``watching`` while evidence is still counted (not settled,
    or an engine another may embed). ``matcher``, ``frames`` and ``bars`` are the current engine's
    tables; the reader reads them directly on its fast path.

    Args:
        engine: the engine id when known (``--engine``); None to detect it from the log.

    Raises:
        ValueError: for an engine id that is not known.
    """

    __slots__ = ("engine", "forced", "committed", "matcher", "watching", "frames", "bars", "scores", "_sources")

    def __init__(self, engine: str | None) -> None:
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        self.engine = engine
        self.forced = self.committed = engine is not None
        self.matcher = matcher_for(engine, self.committed)
        self.watching = not self.committed  # engine evidence is still counted
        self.frames = frame_matcher_for(engine)
        self.bars = bars_for(engine)
        self.scores: dict[str, int] = {}
        self._sources: set[tuple[str, str]] = set()

    def dots(self) -> str:
        """The phase of llama.cpp's tensor-loading dots (also before anything named the engine)."""
        return (ENGINES[self.engine].dots if self.engine in ENGINES else None) or "weights"

    def classify(self, ln: Line, frame: bool, frames: bool, start: Start) -> Hits | None:
        """The engine tables' hits on this line (None when no rule matches), after counting the
        engine evidence the line carries. On a traceback frame (or the source line under one)
        only frame rules (the phase a function belongs to, looked up when ``frames``) and
        detection rules count: a frame is code, not a message. ``start`` is the current start
        (its phase settles the engine sooner)."""
        msg = ln.msg
        watching = self.watching
        if frame and not watching:
            # A frame or the source line under one: only the frame index can say anything of it,
            # and the message of an exception the source line raises.
            out = None
            if frames:
                for rule, _ in self.frames.match(msg):
                    out = Hits(frame=rule)
                    break
            return self.raised(msg, out)
        if watching:
            self._from_line(ln, start)
        hits = self.matcher.match(msg)
        if not hits:
            if frame and frames:
                for rule, _ in self.frames.match(msg):
                    return Hits(frame=rule)
            return None
        if watching:
            engine = self.engine
            for rule, _ in hits:
                if rule.detect:
                    self.evidence(rule.detect, WEAK if rule.weak else STRONG, rule.pattern, start)
            if self.engine != engine:
                hits = self.matcher.match(msg)
        return self.hits(hits, frame, frames, msg)

    def raised(self, msg: str, out: Hits | None) -> Hits | None:
        """``out`` with the named root cause of the message that ``msg``, a traceback's source
        line, raises (``raise ValueError("No available memory ...``) as its ``fail``; ``out``
        itself when the line raises nothing written out or nothing a named cause matches."""
        if "raise " not in msg or RAISE_RE.match(msg) is None:
            return out
        for rule, m in self.matcher.match(msg):
            if rule.cause is not None and rule.strength >= _RAISED_STRENGTH and not rule.frame:
                out = out or Hits()
                out.fail, out.fail_m = rule, m
                break
        return out

    def hits(self, hits: list[tuple[Rule, re.Match[str]]], frame: bool, frames: bool, msg: str) -> Hits:
        """What the rules that matched (``matcher.match(msg)``) say of the line, as one :class:`Hits`."""
        out = Hits()
        if frame and frames:
            for rule, _ in self.frames.match(msg):
                out.frame = rule
                break
        if frame:
            return self.raised(msg, out) or out
        for rule, m in hits:
            if rule.lifecycle:
                if out.lifecycle is None:
                    out.lifecycle = (rule.lifecycle, m)
                continue
            if rule.progress:
                out.progress_m = m
            if rule.ends:
                out.ends = True
            if rule.banner and out.banner is None:
                out.banner = rule
            if rule.benign:
                out.benign = True
            if rule.harmless:
                out.harmless = True
            if rule.phase is not None and out.phase is None:
                out.phase = rule
            if rule.ready and out.ready is None:
                out.ready = rule
            if rule.cause is not None and out.fail is None:
                out.fail, out.fail_m = rule, m
        if out.benign and out.fail is not None and out.fail.terminal:
            # A warning that says the process ended (the resource tracker's "UserWarning: ... leaked
            # semaphore objects to clean up at shutdown") is that end, not a warning to pass over.
            out.benign = False
        return out

    def _from_line(self, ln: Line, start: Start) -> None:
        """The evidence in a line's prefix: its syslog identifier, prefix style, process name."""
        if ln.ident is not None and ln.ident in IDENTS:
            self.evidence(IDENTS[ln.ident], STRONG, "ident", start)
        elif ln.flavor is not None and ln.flavor in _FLAVOR_ENGINE:
            name, strong = _FLAVOR_ENGINE[ln.flavor]
            if ln.flavor == "sglang" and ln.rank:
                strong = True
            self.evidence(name, STRONG if strong else WEAK, "flavor:" + ln.flavor + ("+" if strong else ""), start)
        if ln.proc is not None and ln.proc.startswith(_VLLM_PROCS):
            self.evidence("vllm", STRONG, "proc", start)

    def evidence(self, name: str, weight: int, source: str, start: Start) -> None:
        """Count one piece of evidence that ``name`` wrote the log; each source counts once.

        The engine is the one with the most evidence, revisable until it is settled (see
        :data:`_SETTLED`; ``start`` is the current start: past ``starting``, less evidence
        settles it); an engine that embeds another (Ollama over llama.cpp) wins over it
        whenever it has strong evidence of its own, settled or not.
        """
        key = (name, source)
        if key in self._sources:
            return
        self._sources.add(key)
        scores = self.scores
        scores[name] = scores.get(name, 0) + weight
        if self.forced:
            return  # counted (a service's lines name an engine), but the engine is the one given
        cur = self.engine
        best = max(scores, key=lambda n: (scores[n], n == cur))
        for outer, inner in EMBEDS.items():
            if best == inner and scores.get(outer, 0) >= STRONG:
                best = outer
        if self.committed and not (best in EMBEDS and EMBEDS[best] == cur):
            return  # settled: only the engine that embeds it can still take over
        changed = best != cur
        if changed:
            self.engine = best
        if not self.committed and (scores[best] >= _SETTLED or (
                scores[best] >= STRONG and start.furthest() > _STARTING) or best in EMBEDS):
            self.committed = changed = True
        if changed:
            self.matcher = matcher_for(self.engine, self.committed)
            self.watching = not self.committed or self.engine in _EMBEDDED
            self.frames = frame_matcher_for(self.engine)
            self.bars = bars_for(self.engine)
