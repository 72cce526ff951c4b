"""What a regular expression's own text says of every line it matches, without running it.

The :class:`~probes.logs.engines.base.Matcher`'s index is built from these: a pattern's top-level
branches (:func:`split_alternation`), the literal text every match begins with
(:func:`literal_head`), texts one of which every match holds (:func:`required_literals`), and its
literal words (:func:`literal_words`, where a rule's keys are looked for).
"""

from __future__ import annotations

import re
from functools import cache

_ESCAPE_CLASS_RE = re.compile(r"\\[dDwWsSbBAZ]")
_ESCAPED_PUNCT_RE = re.compile(r"\\(.)")
_CHARCLASS_RE = re.compile(r"\[(?:\\.|[^\]\\])*\]")
_GROUP_OPEN_RE = re.compile(r"\(\?(?:P<\w+>|[:=!]|<[=!])?")


#: Characters that end a pattern's literal head (regex syntax).
_SYNTAX = frozenset("\\.^$*+?{}[]|()")


def literal_head(pattern: str, flags: int = 0, shortest: int = 4) -> str | None:
    """The literal text a pattern begins with (after a leading ``^``, ``\\b``, ``\\s*`` or
    ``\\s+``), which every match holds: ``"CUDA out of memory"`` for ``CUDA out of memory``,
    ``"Start"`` for ``^Start(?:ed|ing) ``; None when it is shorter than ``shortest`` characters,
    the pattern has a top-level ``|`` or flags (a case-insensitive match holds no fixed text). A
    line without it cannot match: the matcher skips the search (a substring test costs a fraction
    of a regex call)."""
    if flags or len(split_alternation(pattern)) > 1:
        return None
    i = 1 if pattern.startswith("^") else 0
    while pattern.startswith(_ZERO_OR_SPACE, i):
        i += 2 if pattern.startswith("\\b", i) else 3
    chars: list[str] = []
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and pattern[i + 1:i + 2].isascii() and pattern[i + 1:i + 2] and not pattern[i + 1].isalnum():
            lit, step = pattern[i + 1], 2  # escaped punctuation ("\\.", "\\(") is itself
        elif ch in _SYNTAX:
            break
        else:
            lit, step = ch, 1
        if pattern[i + step:i + step + 1] in ("*", "?", "{"):
            break  # a quantifier that allows none (or may) follows: the character may be absent
        chars.append(lit)
        i += step
    head = "".join(chars)
    return head if len(head) >= max(shortest, 1) else None


@cache
def required_literals(pattern: str, flags: int = 0, shortest: int = 3) -> tuple[str, ...] | None:
    """Texts one of which every match of ``pattern`` holds: for each top-level branch, its longest
    run of literal characters outside any group (each one there must match, in a row), or None when
    a branch has none of ``shortest`` characters or more, or the pattern has flags (a
    case-insensitive match holds no fixed text). A line that holds none of them cannot match."""
    if (flags | re.compile(pattern).flags) & ~re.UNICODE:
        return None  # flags given, or inline ones ("(?i)...")
    out = []
    for branch in split_alternation(pattern):
        best, run, depth, i, n = "", "", 0, 0, len(branch)
        while i < n:
            ch = branch[i]
            lit: str | None = None
            step = 1
            if ch == "\\":
                nxt = branch[i + 1:i + 2]
                step = 2
                if nxt and nxt.isascii() and not nxt.isalnum() and depth == 0:
                    lit = nxt  # escaped punctuation is itself
            elif ch == "[":
                m = _CHARCLASS_RE.match(branch, i)
                step = len(m.group(0)) if m else 1
            elif ch == "{":
                close = branch.find("}", i)
                step = close - i + 1 if close > i else 1  # a quantifier's bounds are no text
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif depth == 0 and ch not in _SYNTAX:
                lit = ch
            quant = branch[i + step:i + step + 1]
            if lit is not None and quant not in ("*", "?", "{"):
                run += lit
                if quant != "+":
                    i += step
                    continue
                step += 1  # "a+": the "a" is there, what follows need not be next to it
            if len(run) > len(best):
                best = run
            run = ""
            i += step
        if len(run) > len(best):
            best = run
        if len(best) < shortest:
            return None
        out.append(best)
    return tuple(out)


#: What may come before a pattern's literal head: a word boundary, spaces (none or some).
_ZERO_OR_SPACE = ("\\b", "\\s*", "\\s+")


def split_alternation(pattern: str) -> list[str]:
    """Split a regex at its top-level ``|`` (not inside groups or character classes)."""
    if "|" not in pattern:
        return [pattern]
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts


def literal_text(pattern: str) -> str:
    """A pattern with its regex syntax blanked: classes and group openers become NUL, escaped
    punctuation a space; what is left of letters and digits are its literal words."""
    s = _CHARCLASS_RE.sub("\x00", pattern)
    s = _ESCAPE_CLASS_RE.sub("\x00", s)
    s = _ESCAPED_PUNCT_RE.sub(" ", s)
    return _GROUP_OPEN_RE.sub("\x00", s)


def literal_words(pattern: str) -> set[str]:
    """The literal words of a pattern (:func:`literal_text`), in lower case."""
    return {w.lower() for w in re.findall(r"[A-Za-z0-9_]+", literal_text(pattern))}
