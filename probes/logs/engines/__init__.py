"""Engine tables: one module per server family, and the registry the reader uses.

``ENGINES`` maps an engine id to its :class:`~probes.logs.engines.base.Engine`. ``matcher_for(name)``
gives the compiled :class:`~probes.logs.engines.base.Matcher` for an engine's rules plus the common ones
(``None``: the rules used while the engine is not yet known, which also hold every engine's
detection rules).
"""

from __future__ import annotations

import re
from functools import cache

from probes.logs.engines import common, llamacpp, ollama, sglang, tgi, trtllm, vllm
from probes.data.vocab import CAUSE_STRENGTH, CAUSES, DEFAULT_HINTS, PHASE_INDEX, PHASES
from probes.logs.engines.base import BarLabel, Engine, Matcher, Rule

ENGINES: dict[str, Engine] = {
    e.name: e for e in (sglang.ENGINE, vllm.ENGINE, tgi.ENGINE, llamacpp.ENGINE, trtllm.ENGINE, ollama.ENGINE)
}

#: Syslog identifiers that name an engine (journal ``SYSLOG_IDENTIFIER``, syslog ``ident[pid]:``).
IDENTS: dict[str, str] = {ident: e.name for e in ENGINES.values() for ident in e.idents}

__all__ = ["ENGINES", "IDENTS", "PHASES", "PHASE_INDEX", "CAUSES", "CAUSE_STRENGTH", "DEFAULT_HINTS",
           "Engine", "Rule", "BarLabel", "Matcher", "matcher_for", "frame_matcher_for", "bars_for", "hint_for",
           "EMBEDS"]


def _detect_only(rule: Rule) -> bool:
    """A rule whose only effect is naming the engine: useless once the engine is known."""
    return bool(rule.detect) and not (rule.phase or rule.ready or rule.cause or rule.banner or rule.benign
                                      or rule.harmless or rule.lifecycle or rule.progress or rule.ends)


def _ordered(rules: list[Rule]) -> list[Rule]:
    """Failure rules first, in table order (shared rules, then the engine's): for a line several
    failure rules match, the first one names its cause. The shared table lists a consequence
    ("NCCL ... remote process exited") before the general rule it would otherwise fall under."""
    return sorted(rules, key=lambda r: r.cause is None)


@cache
def matcher_for(name: str | None, committed: bool = True) -> Matcher:
    """The matcher for an engine id.

    Args:
        name: the engine id, or ``None`` while no line has named the engine.
        committed: False while the engine is only guessed from weak evidence: the matcher then also
            holds every other engine's detection rules, so a strong line can still name the engine.

    Raises:
        KeyError: for an engine id not in :data:`ENGINES`.
    """
    committed = committed and name is not None
    rules = [r for r in common.RULES if not r.frame and not (committed and _detect_only(r))]
    if name is not None:
        rules += [r for r in ENGINES[name].rules if not r.frame and not (committed and _detect_only(r))]
    if name is None or not committed:
        rules += [r for e in ENGINES.values() if e.name != name for r in e.rules if r.detect and not r.frame]
    else:
        # An engine that embeds this one (Ollama runs llama.cpp) can still be recognised.
        rules += [r for e in ENGINES.values() if EMBEDS.get(e.name) == name for r in e.rules
                  if r.detect and not r.frame]
    return Matcher(_ordered(rules))


#: Engines that run another inside them: Ollama's runner is llama.cpp, whose lines it passes on.
EMBEDS: dict[str, str] = {"ollama": "llamacpp"}


class FrameIndex:
    """Finds the frame rule for a traceback frame (``File "...", line N, in FUNC``) or the source
    line under one (``x = self.model_runner.capture_model()``), by name: the function a frame is
    in, the files and folders of its path, the calls in a source line. Dictionary look-ups, not
    patterns, since every line of a traceback is looked at.

    ``match(msg)`` returns ``[(rule, None)]`` for the first rule that names the line, else ``[]``.
    """

    __slots__ = ("functions", "files", "calls")

    def __init__(self, rules: list[Rule]) -> None:
        self.functions: dict[str, Rule] = {}
        files: list[tuple[str, Rule]] = []
        for r in rules:
            for f in r.keys:
                self.functions.setdefault(f, r)
            files += [(f"/{f}.py\"", r) for f in r.files] + [(f"/{f}/", r) for f in r.files]
        self.files = tuple(files)
        names = "|".join(sorted(self.functions, key=len, reverse=True))
        self.calls = re.compile(rf"\.({names})\(") if names else None

    def match(self, msg: str) -> list[tuple[Rule, None]]:
        head, sep, fn = msg.rpartition(", in ")
        if sep:  # a frame: its function, then its path
            rule = self.functions.get(fn.strip())
            if rule is None:
                rule = next((r for needle, r in self.files if needle in head), None)
            return [(rule, None)] if rule is not None else []
        m = self.calls.search(msg) if self.calls is not None and "(" in msg else None
        return [(self.functions[m.group(1)], None)] if m is not None else []


@cache
def frame_matcher_for(name: str | None) -> FrameIndex:
    """The frame index for an engine (rules with ``frame``): the functions and files that place a
    failure in a phase, the engine's own first."""
    rules = [r for r in ENGINES[name].rules if r.frame] if name is not None else []
    return FrameIndex(rules + [r for r in common.RULES if r.frame])


@cache
def bars_for(name: str | None) -> tuple[BarLabel, ...]:
    """Bar labels for an engine id (its own first, then the common ones)."""
    own = ENGINES[name].bars if name is not None else ()
    return own + common.BARS


def hint_for(engine: str | None, cause: str) -> str:
    """The hint for a cause: the engine's own wording if it has one, else the default."""
    if engine in ENGINES:
        hint = ENGINES[engine].hints.get(cause)
        if hint:
            return hint
    return DEFAULT_HINTS[cause]
