"""Untrusted host text → :class:`rich.text.Text`, safely.

Everything a host writes (log lines, unit names, error messages) reaches a widget through
:func:`host_text`. It is never parsed as markup (``[bold]`` and ``[/usr/bin/python3]`` stay the
characters they are), and nothing but colour reaches the terminal:

* SGR sequences (``ESC [ ... m``: colours, bold) are kept, as :meth:`Text.from_ansi` reads them;
  blink and conceal are switched off (an operator must see every character);
* every other escape sequence is dropped whole: CSI cursor moves, OSC titles and links, DCS/APC
  strings, charset selections, the 8-bit C1 forms (``\\x9b31m``), and a lone ESC anywhere;
* a ``\\r`` keeps only the last non-empty frame (a tqdm bar shows its newest state);
* line breaks (``\\n``, ``\\u2028`` ...) become a space: the result is always one line;
* tabs become spaces; C0/C1 controls, bidi overrides and other format characters (Cf) are
  dropped; lone surrogates and unassigned code points become ``\\ufffd``;
* the visible text is cut at ``max_chars`` with an ellipsis.
"""

from __future__ import annotations

import re
import unicodedata

from rich.ansi import AnsiDecoder
from rich.style import Style
from rich.text import Text

__all__ = ["host_text", "plain", "MAX_CHARS"]

#: Longest visible text kept, in characters.
MAX_CHARS = 8192
#: Raw input looked at, in characters (escape codes included); the rest is never scanned.
_RAW_LIMIT = 64 * 1024
_TAB = "    "

# One escape sequence (7-bit or 8-bit form). SGR is group "sgr"; everything else is dropped.
_ESC_RE = re.compile(
    r"\x1b\[(?P<sgr>[0-9;:]{0,64})m"                    # SGR: kept
    r"|\x1b\[[0-?]*[ -/]*[@-~]"                          # other CSI
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"      # OSC, terminated
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)"            # DCS, SOS, PM, APC strings, terminated
    r"|\x1b[\]PX^_]"                                     # an unterminated string command's opener
    r"|\x1b[ -/]+[0-~]?"                                 # nF (charset selection: ESC ( B)
    r"|\x1b[0-~]?"                                       # Fp/Fe/Fs, or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]?"                           # 8-bit CSI
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)"  # 8-bit string commands
)
# Characters that never survive: C0 but ESC (only kept SGR sequences still hold one), DEL, C1.
_CTRL_RE = re.compile(r"[\x00-\x08\x0a-\x1a\x1c-\x1f\x7f-\x9f]")
_NEEDS_ESC_PASS_RE = re.compile(r"[\x1b\x90\x98\x9b\x9d-\x9f]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_BREAKS_RE = re.compile(r"\r\n|[\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_NO_BLINK = Style(blink=False, blink2=False, conceal=False)


def _clean_chars(s: str) -> str:
    """Drop control and format characters, replace unassigned ones (s has no escapes left)."""
    s = _CTRL_RE.sub("", s)
    if s.isprintable():
        return s
    out = []
    for ch in s:
        if ch.isprintable() or ch == "\x1b":
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Zl", "Zp"):
            continue  # controls, bidi overrides, zero-width and other format characters
        if cat == "Zs":
            out.append(" ")
        else:  # Cn (unassigned), Co (private use), Cs: show that something was there
            out.append("\ufffd")
    return "".join(out)


def _frame(line: str) -> str:
    """The last ``\\r`` frame of a line that shows something (escape codes removed but SGR)."""
    if "\r" not in line:
        return line
    frames = line.split("\r")
    for frame in reversed(frames):
        if _ESC_RE.sub("", frame).strip():
            return frame
    return frames[-1]


def _sanitise(s: str) -> str:
    """The text with SGR sequences as the only escapes, one line, no other control character."""
    if len(s) > _RAW_LIMIT:
        # A tqdm line: the newest frame is at the end. Anything else: its beginning.
        s = s[-_RAW_LIMIT:] if "\r" in s[-_RAW_LIMIT:] else s[:_RAW_LIMIT]
    s = _SURROGATE_RE.sub("\ufffd", s)
    if "\t" in s:
        s = s.replace("\t", _TAB)
    lines = _BREAKS_RE.split(s)
    parts = []
    for line in lines:
        line = _frame(line)
        if _NEEDS_ESC_PASS_RE.search(line):
            line = _ESC_RE.sub(lambda m: f"\x1b[{m.group('sgr')}m" if m.group("sgr") is not None else "", line)
        parts.append(_clean_chars(line))
    return " ".join(p for p in parts if p)


def host_text(s: object, *, max_chars: int = MAX_CHARS, style: str | Style = "") -> Text:
    """Untrusted host text as one line of :class:`Text` that keeps its ANSI colours and nothing else.

    Args:
        s: the text as the host wrote it (anything not a str is converted with ``str``).
        max_chars: longest visible text kept; longer text ends with ``…``.
        style: a base style for the whole text (under the text's own colours).

    Returns:
        A single-line Text with no markup parsed and no control character in its ``plain``.
    """
    if not isinstance(s, str):
        s = str(s)
    if s.isprintable() and "\x1b" not in s:
        text = Text(s, style=style, end="")  # the fast path: no escape, nothing to clean
    else:
        clean = _sanitise(s)
        if "\x1b" in clean:
            text = AnsiDecoder().decode_line(clean)
            text.end = ""
            # An operator must see every character: no hiding, no blinking.
            text.spans[:] = [type(sp)(sp.start, sp.end, sp.style + _NO_BLINK)
                             if isinstance(sp.style, Style) and (sp.style.conceal or sp.style.blink or sp.style.blink2)
                             else sp for sp in text.spans]
            if style:
                text.stylize_before(style)
        else:
            text = Text(clean, style=style, end="")
    if len(text.plain) > max_chars:
        text.truncate(max(1, max_chars - 1))
        text.append("…")
    text.no_wrap = True
    return text


def plain(s: object, *, max_chars: int = MAX_CHARS) -> str:
    """Untrusted host text as a plain one-line string (what :func:`host_text` shows, no colours)."""
    return host_text(s, max_chars=max_chars).plain
