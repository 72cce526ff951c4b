"""What a view shows of a host's verdict: its condition in a word or two (:func:`headline`,
worst first in :data:`HEADLINES`) and the verdict itself, ``waiting`` while a probe has not
answered yet (:func:`shown_verdict`). The rules are :mod:`probes.fold.verdict`'s; pure.
"""

from __future__ import annotations

import re

from probes.data.state import KNOWN_PROBES, HostState, Verdict

#: The kind of the verdict views show in place of "nothing wrong" while a probe has not answered
#: yet (:func:`shown_verdict`; level ``info``): not a rule of :func:`verdict_for`, which judges
#: what was read.
WAITING_KIND = "waiting"


def unanswered(s: HostState) -> tuple[str, ...]:
    """The probes of :data:`~probes.data.state.KNOWN_PROBES` that have neither delivered nor
    failed yet (knowledge ``never``), in that order: () once each has answered."""
    return tuple(p for p in KNOWN_PROBES if s.known(p).status == "never")


def shown_verdict(s: HostState) -> Verdict | None:
    """The verdict a view shows: ``s.verdict``; else, while a probe has not answered yet, the
    ``waiting`` verdict (level ``info``: ``Waiting for the first answer of the journal; nothing is
    judged before it.``), never "nothing wrong" for what was not read; else None (nothing wrong
    seen, every probe answered)."""
    if s.verdict is not None:
        return s.verdict
    waiting = unanswered(s)
    if not waiting:
        return None
    what = " and ".join(f"the {p}" for p in waiting)
    return Verdict("info", kind=WAITING_KIND, sentence=f"Waiting for the first answer of {what}; nothing is judged before it.",
                   evidence=tuple(f"{p}: no answer yet" for p in waiting))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_COMMAND = re.compile(r"`([^`]+)`")


def _command_words(span: str) -> str:
    """A hint's command as a verdict says it: its first two words (`systemctl reset-failed UNIT`
    is said ``systemctl reset-failed``)."""
    return " ".join(span.split()[:2])


def shown_hint(s: HostState) -> str:
    """The hint to show beside the verdict: ``s.hint`` without its sentences that the verdict's
    sentence already says, whole or by their commands (a gave-up restart loop's ``fix it, then
    systemctl reset-failed`` holds the start limit's "`systemctl reset-failed` the unit after the
    fix"); "" when nothing is left. A hint sentence with no command stays unless it is in the
    verdict whole. The JSON keeps the whole hint: it is read without the sentence."""
    hint = s.hint
    v = s.verdict
    if not hint or v is None:
        return hint
    if hint in v.sentence:
        return ""
    said = v.sentence

    def says(part: str) -> bool:
        commands = _COMMAND.findall(part)
        return part in said or bool(commands) and all(_command_words(c) in said for c in commands)

    parts = _SENTENCE_END.split(hint)
    kept = [p for p in parts if not says(p)]
    return hint if len(kept) == len(parts) else " ".join(kept)


#: Readiness rungs of a server that does not answer as ready: with the log's "ready", ``unhealthy``.
UNHEALTHY_RUNGS = frozenset({"port_closed", "http_unhealthy", "inactive"})
#: Headlines in the order an operator must see them (worst first).
HEADLINES = ("failed", "unreachable", "ssh refused", "cannot see", "no such unit", "restart loop", "stalled", "unhealthy",
             "loading", "ready", "stopped", "waiting")


def headline(s: HostState) -> str:
    """A host's condition in one or two words, worse than its start's state when the verdict says
    so: ``failed``, ``unreachable`` (never reached), ``ssh refused`` (reached, but the login or its
    host key is refused: the verdict says how to fix it), ``cannot see``
    (the unit or the journal cannot be read: the verdict says why), ``no such unit``,
    ``restart loop``, ``stalled`` (a loading start gone silent), ``unhealthy`` (the log says ready
    but the health probe finds nothing listening, an HTTP error or the unit inactive), ``loading``,
    ``ready``, ``stopped``, ``waiting``."""
    if s.state == "failed":
        return "failed"
    kind = s.verdict.kind if s.verdict is not None else ""
    if kind == "ssh":
        return "ssh refused"  # the host answered; its key or the login was refused: nothing is known
    if s.stale_since is not None and s.updated is None:
        return "unreachable"  # never got through: nothing is known
    if kind == "cannot_see":
        return "cannot see"
    if kind == "not_found":
        return "no such unit"
    if s.restart_loop or kind == "restart_loop":
        return "restart loop"
    if kind == "stalled":
        return "stalled"
    if s.state == "ready" and s.readiness in UNHEALTHY_RUNGS:
        # "ready" is the log's word; the server does not answer as ready (whichever verdict is
        # shown: GPU memory held outside the unit comes before "unhealthy")
        return "unhealthy"
    return s.state if s.state in HEADLINES else "waiting"


__all__ = ["WAITING_KIND", "UNHEALTHY_RUNGS", "HEADLINES", "unanswered", "shown_verdict", "shown_hint", "headline"]
