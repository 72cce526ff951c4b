"""What a rule's regular expression says as text, without running it: its key word, the literal
text it begins with, the literal texts every match holds, its top-level branches.

The matcher (:mod:`probes.logs.engines.base`) picks the rules to try for a line from these, and
the quiet path (:mod:`probes.logs.quiet`, :mod:`probes.logs.blockscan`) the lines no rule can
match. Each reads the pattern's text (the pattern itself is never compiled here); the literal
texts err only on the side of "may match": a line without them cannot match, a line with them may.
"""

from __future__ import annotations

import re
from functools import cache

_ESCAPE_CLASS_RE = re.compile(r"\\[dDwWsSbBAZ]")
_ESCAPED_PUNCT_RE = re.compile(r"\\(.)")
_CHARCLASS_RE = re.compile(r"\[(?:\\.|[^\]\\])*\]")
_GROUP_OPEN_RE = re.compile(r"\(\?(?:P<\w+>|[:=!]|<[=!])?")
#: The groups whose inside must match as written: capturing, named, non-capturing.
_PLAIN_GROUP_RE = re.compile(r"\((?!\?)|\(\?:|\(\?P<\w+>")
_WORD_RE = re.compile(r"(?<![\w\x00])[A-Za-z][A-Za-z0-9_]{2,}(?![\w\x00?*+{])")


def derive_keys(pattern: str) -> tuple[str, ...]:
    """Pick the key word of a pattern without alternation: its longest plain literal word.

    Raises:
        ValueError: when the pattern has no plain word of 3+ letters (give ``keys=`` explicitly).
    """
    found = _WORD_RE.findall(_literal_text(pattern).replace(")", "\x00)"))
    if not found:
        raise ValueError(f"no key word in pattern {pattern!r}: give keys=")
    return (max(found, key=len).lower(),)


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
    run of literal characters outside any group (each one there must match, in a row), or the
    texts of a group that must match (``(?:A|B)...``, not followed by ``?``, ``*`` or ``{``: one
    of each inner branch's texts), whichever's shortest text is the longest; None when a branch
    has neither of ``shortest`` characters or more, or the pattern has flags (a case-insensitive match holds no fixed text:
    see :func:`required_lower`). A line that holds none of them cannot match."""
    inline = _INLINE_FLAGS_RE.match(pattern)
    if flags & ~re.UNICODE or (inline is not None and set(inline.group()) - set("(?)u")):
        return None  # flags given, or inline ones ("(?i)...": read, not compiled)
    out: list[str] = []
    for branch in split_alternation(pattern):
        best, run, depth, i, n = "", "", 0, 0, len(branch)
        groups: list[tuple[str, ...]] = []  # the texts of each group that must match
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
                if depth == 0 and (inner := _group_literals(branch, i, shortest)) is not None:
                    groups.append(inner)
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
        if len(best) >= shortest:
            groups.append((best,))
        if not groups:
            return None
        # The most telling: the longest shortest text (a line holds a short one by chance), then
        # the fewest texts.
        chosen: tuple[str, ...] = max(groups, key=_telling)
        out += chosen
    return tuple(out)


def _telling(texts: tuple[str, ...]) -> tuple[int, int]:
    """How telling a set of needed texts is: its shortest text's length, then fewer texts first."""
    return min(len(t) for t in texts), -len(texts)


def _group_literals(branch: str, i: int, shortest: int) -> tuple[str, ...] | None:
    """The texts one of which the group that opens at ``branch[i]`` holds in every match
    (:func:`required_literals` of its inside), or None: a look-around, a group that may be
    absent (``?``, ``*``, ``{`` after it), or no such texts."""
    m = _PLAIN_GROUP_RE.match(branch, i)
    if m is None:
        return None  # a look-around, scoped flags "(?i:", a back-reference "(?P=": no claim
    depth, j, n = 0, i, len(branch)
    while j < n:
        c = branch[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            cls = _CHARCLASS_RE.match(branch, j)
            j += len(cls.group(0)) if cls else 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                break
        j += 1
    else:
        return None  # unbalanced: no claim
    if branch[j + 1:j + 2] in ("?", "*", "{"):
        return None
    return required_literals(branch[m.end():j], 0, shortest)


def required_lower(pattern: str, flags: int = 0, shortest: int = 3) -> tuple[str, ...] | None:
    """For a case-insensitive pattern (``flags`` ``re.IGNORECASE``, with ``re.UNICODE`` or not):
    texts in lower case one of which the lower-case copy of every ASCII line it matches holds
    (:func:`required_literals` of the pattern read case-sensitively, lowered), or None (other
    flags, no such texts, or a text that is not ASCII: ``re.IGNORECASE`` matches "ſ" to "s" and
    "K" (Kelvin) to "k", which lowering does not). Only an ASCII line may be judged by them; any
    other line may match."""
    if flags & ~re.UNICODE != re.IGNORECASE:
        return None
    found = required_literals(pattern, 0, shortest)
    if found is None or not all(t.isascii() for t in found):
        return None
    return tuple(dict.fromkeys(t.lower() for t in found))


#: Global inline flags ("(?i)", "(?s)(?m)"): Python allows them only at the start of a pattern.
_INLINE_FLAGS_RE = re.compile(r"(?:\(\?[aiLmsux]+\))+")

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


def _literal_text(pattern: str) -> str:
    """A pattern with its regex syntax blanked: classes and group openers become NUL, escaped
    punctuation a space; what is left of letters and digits are its literal words."""
    s = _CHARCLASS_RE.sub("\x00", pattern)
    s = _ESCAPE_CLASS_RE.sub("\x00", s)
    s = _ESCAPED_PUNCT_RE.sub(" ", s)
    return _GROUP_OPEN_RE.sub("\x00", s)


def literal_words(pattern: str) -> set[str]:
    """The literal words of a pattern (letters, digits, ``_``), in lower case."""
    return {w.lower() for w in re.findall(r"[A-Za-z0-9_]+", _literal_text(pattern))}
