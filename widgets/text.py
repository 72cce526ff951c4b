"""Untrusted host text → :class:`rich.text.Text`, safely.

Everything a host writes (log lines, unit names, error messages) reaches a widget through
:func:`host_text`. It is never parsed as markup (``[bold]`` and ``[/usr/bin/python3]`` stay the
characters they are), and nothing but colour reaches the terminal. The cleaning is
:func:`probes.hosttext.one_line` (the one sanitiser; its docstring has the rules and their sources)
with SGR kept; this module only turns the kept SGR into styles, switches blink and conceal off (an
operator must see every character) and cuts the visible text at ``max_chars`` with an ellipsis.
"""

from __future__ import annotations

from rich.ansi import AnsiDecoder
from rich.style import Style
from rich.text import Text

from probes.hosttext import one_line

__all__ = ["MAX_CHARS", "host_text", "plain"]

#: Longest visible text kept, in characters.
MAX_CHARS = 8192
_NO_BLINK = Style(blink=False, blink2=False, conceal=False)


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
        clean = one_line(s, keep_sgr=True)
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
