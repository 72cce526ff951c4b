"""Which rule, and which of the engine's own messages, is behind a reading.

A rule *claims* a message of the engines' vocabulary (:mod:`probes.logs.engines.vocabulary`) when it
matches one of the message's sample lines and says what the message means (a rule of the same
phase for ``phase:``, a ready rule for ``ready``, a rule of the same cause for ``error:``, ...).
tests/test_engine_messages.py holds the rule tables to this; :func:`explain` uses it to say, for
``upwatch replay --json``, what read a reading's state, phase and decisive line.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from probes.data.reading import Reading
from probes.logs.engines import ENGINES, bars_for, common, matcher_for
from probes.logs.engines.base import Rule
from probes.logs.engines.common import EXCEPTION_RE
from probes.logs.engines.patterns import split_alternation
from probes.logs.engines.vocabulary import Message, all_messages
from probes.logs.logline import frames, parse

_STOP_EVENTS = ("stopping", "stopped", "deactivated")
#: A message that names a rule's meaning outright comes before one that only may (a suspect).
_KIND_ORDER = ("error", "ready", "phase", "banner", "shutdown", "identity", "suspect")


def _kind_rank(m: Message) -> int:
    return _KIND_ORDER.index(m.kind) if m.kind in _KIND_ORDER else len(_KIND_ORDER)


@cache
def _sample_msgs(m: Message) -> tuple[str, ...]:
    """The messages of a message's samples (:func:`sample_msg`), parsed once."""
    return tuple(sample_msg(s) for s in m.samples)


def sample_msg(sample: str) -> str:
    """The message of a sample line as the reader's rules see it: escape codes and wrappers and the
    engine's prefix removed (the last logical line of it, as :func:`~probes.logs.logline.frames`
    splits ``\\r`` frames)."""
    parts = frames(sample)
    return parse(1, parts[-1]).msg if parts else ""


def _rules_for(table: str) -> list[tuple[str | None, Any]]:
    """(engine, matcher) pairs a table's samples are read with: the engine's own matcher, or for
    the runtimes' table every engine's (a runtime line means the same under each)."""
    if table in ENGINES:
        return [(table, matcher_for(table))]
    return [(name, matcher_for(name)) for name in ENGINES]


def agrees(rule: Rule, msg: Message) -> bool:
    """Whether a rule says what the message means (not whether it matches: :func:`claimed_by`)."""
    kind, arg = msg.kind, msg.arg
    if kind == "phase":
        return rule.phase == arg and not rule.frame
    if kind == "banner":
        return rule.banner
    if kind == "ready":
        return rule.ready
    if kind == "shutdown":
        return rule.ends or rule.lifecycle in _STOP_EVENTS
    if kind == "error":
        return rule.cause == arg or (rule.lifecycle is not None and rule.cause is None and arg in (
            "exit_code", "signal", "core_dump", "start_limit", "host_oom_killed"))
    if kind == "suspect":
        return rule.cause is not None or rule.lifecycle is not None
    if kind == "harmless":
        return rule.harmless or rule.benign
    if kind == "identity":
        return rule.detect == msg.table
    return False


def claimed_by(msg: Message) -> tuple[Rule, str | None] | None:
    """The first rule (and its engine) that matches a sample of this message and agrees with its
    meaning, or None (``progress:`` and ``harmless`` messages: :func:`bar_claims`, :func:`harmless_ok`)."""
    for sample in msg.samples:
        text = sample_msg(sample)
        for engine, matcher in _rules_for(msg.table):
            for rule, _m in matcher.match(text):
                if agrees(rule, msg):
                    return rule, engine
    return None


def bar_claims(msg: Message) -> bool:
    """A ``progress:<phase>`` message: one of its samples is a bar the engine's bar labels place in
    that phase."""
    for sample in msg.samples:
        text = sample_msg(sample)
        for engine in ([msg.table] if msg.table in ENGINES else list(ENGINES)):
            for bar in bars_for(engine):
                if bar.phase == msg.arg and bar.rx.search(text):
                    return True
    return False


def harmless_ok(msg: Message) -> bool:
    """A ``harmless`` message: no failure rule names a cause for any of its samples, unless a
    harmless or benign rule claims the line too."""
    for sample in msg.samples:
        text = sample_msg(sample)
        for _engine, matcher in _rules_for(msg.table):
            rules = [r for r, _ in matcher.match(text)]
            if any(r.cause is not None for r in rules) and not any(r.harmless or r.benign for r in rules):
                return False
    return True


def understood(msg: Message) -> bool:
    """Whether the rule tables read this message as it means (the test of every sample)."""
    if msg.kind == "progress":
        return bar_claims(msg)
    if msg.kind == "harmless":
        return harmless_ok(msg)
    if msg.kind == "suspect" and claimed_by(msg) is None:
        # An exception line ("XError: ...") is a suspect without a rule (failures.judge).
        return any(EXCEPTION_RE.match(sample_msg(s)) is not None for s in msg.samples)
    return claimed_by(msg) is not None


@cache
def _claims() -> dict[int, Message]:
    """id(rule) -> the first message it claims (engines' tables first, then the runtimes')."""
    out: dict[int, Message] = {}
    rules = list(common.RULES) + [r for e in ENGINES.values() for r in e.rules]
    # The runtimes' table first: a shared rule (CUDA's out of memory) stands for the runtime's
    # message, not for an engine's message that quotes it.
    for msg in sorted(all_messages(), key=lambda m: (_kind_rank(m), m.table != "runtime")):
        if msg.kind in ("progress", "harmless"):
            continue
        texts = _sample_msgs(msg)
        for rule in rules:
            if id(rule) not in out and agrees(rule, msg) and any(rule.rx.search(t) for t in texts):
                out[id(rule)] = msg
    return out


def message_for(rule: Rule) -> Message | None:
    """The engine message a rule stands for (the first it claims), or None."""
    return _claims().get(id(rule))


def message_for_line(rule: Rule, msg: str, engine: str | None = None) -> Message | None:
    """The engine message behind one line a rule read: a message the rule claims whose samples
    match the same alternative of the rule's pattern as the line does (a rule of many alternatives
    stands for many messages): the log's engine's own first, then the runtimes'; None when no
    message of the vocabulary is it."""
    alts = [a for a in split_alternation(rule.pattern) if re.search(a, msg, rule.flags)]
    if not alts:
        return None
    alt = re.compile(alts[0], rule.flags)
    words = set(re.findall(r"[A-Za-z_]{3,}", msg))

    def likeness(m: Message) -> float:
        """How much of the line's wording the message's closest sample shares (Jaccard on words)."""
        best = 0.0
        for sample in _sample_msgs(m):
            w = set(re.findall(r"[A-Za-z_]{3,}", sample))
            if w or words:
                best = max(best, len(w & words) / len(w | words))
        return best

    found = [m for m in all_messages() if agrees(rule, m) and any(alt.search(t) for t in _sample_msgs(m))]
    if found:
        return max(found, key=lambda m: (likeness(m), m.table == engine, m.table == "runtime", -_kind_rank(m)))
    return None


def _rule_ref(engine: str | None, text: str, wants: tuple[str, ...]) -> dict[str, Any] | None:
    """What read one line: the first rule of ``engine``'s matcher that matches the line's message
    and does the first of ``wants`` it can (``phase:<id>``, ``ready``, ``error``, ``stopped``),
    with the engine message it stands for on this line."""
    msg = parse(1, text).msg
    hits = matcher_for(engine if engine in ENGINES else None).match(msg)
    for want in wants:
        kind, _, arg = want.partition(":")
        for rule, _m in hits:
            if (kind == "phase" and rule.phase == arg) or (kind == "ready" and rule.ready) or (
                    kind == "error" and (rule.cause is not None or rule.lifecycle is not None)) or (
                    kind == "stopped" and (rule.ends or rule.lifecycle in _STOP_EVENTS)):
                m = message_for_line(rule, msg, engine)
                own = ENGINES[engine].rules if engine in ENGINES else ()
                return {"rule": rule.pattern, "engine": engine if rule in own else "common",
                        "message": None if m is None else m.ref()}
    return None


def explain(reading: Reading) -> dict[str, Any]:
    """For ``upwatch replay --json``: what read the reading's ``state``, ``phase`` and decisive
    ``error`` line, each ``{"line", "text", "rule", "engine", "message"}`` or None.

    ``rule`` is the pattern of the rule that matched the line (None: no rule of a table, the
    reader's own reading of a traceback or an exception line, a bar, or systemd's lines);
    ``message`` is ``{"table", "message", "versions", "where"}`` of the engine message the rule
    stands for (None when no message of the vocabulary is claimed by it).
    """
    engine = reading.engine
    phase_mark = next((m for m in reversed(reading.phases) if m.phase == reading.phase), None)

    def one(line: int | None, text: str | None, *wants: str) -> dict[str, Any] | None:
        if line is None or text is None:
            return None
        ref = _rule_ref(engine, text, wants) or {"rule": None, "engine": None, "message": None}
        return {"line": line, "text": text, **ref}

    error = None if reading.error is None else one(reading.error.line, reading.error.text, "error")
    # A phase's first line is a phase line, the ready line, or (a start failed before any phase
    # line) the failure itself.
    phase = None if phase_mark is None else one(phase_mark.line, phase_mark.text, f"phase:{phase_mark.phase}",
                                                "ready", "error", "stopped")
    if reading.state == "failed":
        state = error
    elif reading.state == "ready":
        ready = next((m for m in reversed(reading.phases) if m.phase == "ready"), None)
        state = None if ready is None else one(ready.line, ready.text, "ready")
    else:
        state = phase
    return {"state": state, "phase": phase, "error": error}
