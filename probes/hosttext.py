"""The one sanitiser for host-derived text: what a host wrote, made safe to show an operator.

Everything upwatch shows that a host (or a config file) wrote goes through this module: log lines
(:func:`probes.logs.logline.frames`), unit properties, GPU and process names, the output of an action's
command, error messages, host and unit names from the configuration. It is used by the reader,
every widget (through :func:`widgets.text.host_text`), every toast (``UpwatchApp.notify``), every
modal and every text output (``status``, ``wait``, ``replay``, ``history``, notices).

Source of truth:

* ECMA-48 (5th edition, 1991) §5.3 and §5.4 for the escape and control sequences: CSI
  (``ESC [`` or 8-bit ``0x9B``, parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one final
  byte 0x40-0x7E), the control strings OSC (``ESC ]``/``0x9D``), DCS (``ESC P``/``0x90``), SOS
  (``ESC X``/``0x98``), PM (``ESC ^``/``0x9E``) and APC (``ESC _``/``0x9F``), ended by ST
  (``ESC \\``/``0x9C``) or, as xterm also accepts for OSC, BEL; nF escape sequences (``ESC`` then
  intermediates 0x20-0x2F then a final 0x30-0x7E: ``ESC ( B``) and the two-byte Fp/Fe/Fs ones
  (``ESC 7``, ``ESC c``). SGR is the CSI whose final byte is ``m`` (§8.3.117).
* Unicode (UAX #9, the bidirectional algorithm, and the General_Category property as Python's
  :mod:`unicodedata` has it) for the characters a terminal applies or hides: the bidi embeddings,
  overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F/U+061C, the
  zero-width U+200B-U+200D, U+2060 and U+FEFF; all are category Cf, and every Cf is dropped.

The rules, one set for every caller:

* every escape sequence is removed whole, in its 7-bit and its 8-bit (C1) form; only SGR (colour)
  may be kept, and only where the caller asks (:func:`strip_escapes` ``keep_sgr``), rewritten in
  its 7-bit form with nothing but digits, ``;`` and ``:`` in it;
* a control string (OSC, DCS, SOS, PM, APC) is removed with its payload when it is terminated; one
  that another control character cuts, or that runs to the end of the text, loses only its opener,
  and its payload stays visible as text (an operator sees every character a host sent, and a host
  cannot hide the rest of a line behind an opener);
* a CSI that the text ends inside (``"abc\\x1b[31"``) is removed whole; a lone ESC anywhere too;
* then every remaining character is checked (:func:`clean_chars`): tabs become four spaces; line
  breaks (LF, VT, FF, FS/GS/RS, NEL, U+2028, U+2029) and other spaces become a space; the rest of
  C0, DEL and C1 and every format character (Cf: bidi controls, zero-width characters, soft hyphen,
  BOM) are dropped; unassigned, private-use and lone surrogate code points become U+FFFD, so that
  something stays visible.

The result holds no character of category Cc (but the ESC of a kept SGR), Cf, Cs, Zl or Zp. Every
function runs in time linear in its input (each character is looked at a bounded number of times:
the payload a control string may hold contains no opener), and never raises.
"""

from __future__ import annotations

import json
import re
import unicodedata

__all__ = ["RAW_LIMIT", "clean_chars", "json_text", "lines", "one_line", "strip_escapes", "unsafe_char"]

#: Longest input :func:`one_line` looks at, in characters; the rest is never scanned.
RAW_LIMIT = 64 * 1024
#: The ASCII bytes ``str.isprintable`` refuses but the newline that ends a line: the C0 controls
#: (tab, ``\r`` and ESC among them) and DEL. A line with one is read the long way by the reader's
#: block scan (:mod:`probes.logs.blockscan`).
ASCII_UNPRINTABLE = bytes([*range(10), *range(11, 32), 127])
TAB = "    "

# What a control string's payload may hold: anything but a control character (C0, DEL, C1), so a
# payload never holds another opener or a terminator and the scan stays linear.
_PAYLOAD = r"[^\x00-\x1f\x7f-\x9f]*"
_ESC_RE = re.compile(
    r"(?:\x1b\[|\x9b)(?P<sgr>[0-9;:]{0,64})m"                       # SGR: kept when asked
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*(?:[@-~]|\Z)"                    # any other CSI; cut by the end: whole
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])" + _PAYLOAD + r"(?:\x07|\x1b\\|\x9c)"  # a control string
    r"|\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]"                         # an opener whose string was cut
    r"|\x1b[ -/]*[0-~]?"                                            # nF, Fp/Fe/Fs, or a lone ESC
)
# Any character that may begin an escape sequence: ESC and the C1 block.
_OPENER_RE = re.compile(r"[\x1b\x80-\x9f]")
_BREAKS = "\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAKS_RE = re.compile(r"\r\n|[\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# Controls dropped outright (C0 but TAB, ESC and the line breaks; DEL; C1 but NEL).
_CTRL_RE = re.compile(r"[\x00-\x08\x0d\x0e-\x1a\x1f\x7f-\x84\x86-\x9f]")


def strip_escapes(text: str, *, keep_sgr: bool = False) -> str:
    """Remove every ECMA-48 escape sequence (7-bit and 8-bit forms) from ``text``.

    Args:
        text: host text, any characters.
        keep_sgr: keep SGR (colour) sequences, each rewritten as ``ESC [ params m``.

    Returns:
        The text without escape sequences: with ``keep_sgr``, every ESC left begins an SGR
        sequence; without it, no ESC is left. Other control characters are left for
        :func:`clean_chars`. Never raises.
    """
    if "\x1b" not in text and (text.isascii() or not _OPENER_RE.search(text)):
        return text
    if keep_sgr:
        return _ESC_RE.sub(lambda m: "" if m.group("sgr") is None else f"\x1b[{m.group('sgr')}m", text)
    return _ESC_RE.sub("", text)


def clean_chars(text: str, *, keep_esc: bool = False) -> str:
    """Make every character of ``text`` one a terminal shows as itself (see the module's rules).

    Args:
        text: text whose escape sequences :func:`strip_escapes` already removed.
        keep_esc: keep ESC characters (those of SGR sequences ``strip_escapes`` kept).

    Returns:
        The text with tabs as four spaces, line breaks and other spaces as one space, other
        controls and format characters dropped, unassigned / private-use / surrogate code points as
        U+FFFD. Never raises.
    """
    if text.isprintable():
        return text
    if "\t" in text:
        text = text.replace("\t", TAB)
    text = _CTRL_RE.sub("", text)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (keep_esc and ch == "\x1b"):
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if ch in _BREAKS or cat in ("Zs", "Zl", "Zp"):
            out.append(" ")
        elif cat in ("Cc", "Cf"):
            continue  # controls, bidi controls, zero-width and other format characters
        else:  # Cn (unassigned), Co (private use), Cs (a lone surrogate): show that something was there
            out.append("\ufffd")
    return "".join(out)


def _last_frame(line: str) -> str:
    """The last ``\\r`` frame that shows something (a tqdm bar's newest state), else the last one."""
    frames = line.split("\r")
    for frame in reversed(frames):
        if strip_escapes(frame).strip():
            return frame
    return frames[-1]


def one_line(text: object, *, max_chars: int | None = None, keep_sgr: bool = False) -> str:
    """Host text as one safe line: what every widget, toast and text output shows.

    Args:
        text: the text as the host wrote it (anything not a str is converted with ``str``).
        max_chars: longest result in characters; longer text is cut and ends with ``…``. Ignored
            with ``keep_sgr`` (the caller cuts the visible text: :func:`widgets.text.host_text`).
        keep_sgr: keep SGR (colour) sequences in 7-bit form (for a renderer that reads them).

    Returns:
        One line: line breaks as spaces, each ``\\r`` line reduced to its last frame with text,
        escapes removed (SGR kept if asked), characters cleaned by :func:`clean_chars`. Input past
        :data:`RAW_LIMIT` characters is not looked at (the end of a tqdm line, else the start).
        Never raises.
    """
    s = text if isinstance(text, str) else str(text)
    if not s.isprintable():
        if len(s) > RAW_LIMIT:
            s = s[-RAW_LIMIT:] if "\r" in s[-RAW_LIMIT:] else s[:RAW_LIMIT]
        parts = []
        for line in _BREAKS_RE.split(s):
            if "\r" in line:
                line = _last_frame(line)
            line = clean_chars(strip_escapes(line, keep_sgr=keep_sgr), keep_esc=keep_sgr)
            if line:
                parts.append(line)
        s = " ".join(parts)
    if max_chars is not None and not keep_sgr and len(s) > max_chars:
        s = s[: max(0, max_chars - 1)] + "…"
    return s


def lines(text: object, *, max_chars: int | None = None) -> str:
    """Text of several lines (a toast, a modal's body), each line made safe by :func:`one_line`.

    Args:
        text: the text; ``\\n`` (and ``\\r\\n``) separate its lines, which are kept.
        max_chars: longest line, as in :func:`one_line`.

    Returns:
        The lines joined by ``\\n``, no other control or format character. Never raises.
    """
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s if max_chars is None or len(s) <= max_chars else one_line(s, max_chars=max_chars)
    return "\n".join(one_line(line, max_chars=max_chars) for line in s.replace("\r\n", "\n").split("\n"))


def unsafe_char(text: str) -> tuple[int, str] | None:
    """The first character the sanitiser would drop or replace, for input that must be refused, not
    cleaned (a space character other than U+0020, which it shows as a plain space, is allowed).

    Args:
        text: a value to check (a configured host, unit or engine name).

    Returns:
        ``(index, "U+202E")`` for the first control (C0, DEL, C1), format (Cf: bidi controls,
        zero-width characters), line/paragraph separator, surrogate, private-use or unassigned
        character; None when every character is shown as itself or as a plain space.
    """
    if text.isprintable():
        return None
    for i, ch in enumerate(text):
        if not ch.isprintable() and unicodedata.category(ch) != "Zs":
            return i, f"U+{ord(ch):04X}"
    return None


# Candidates for escaping in JSON text: anything outside printable ASCII and the newline of indent.
_JSON_CANDIDATE_RE = re.compile(r"[^\x20-\x7e\n]")


def _json_escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch.isprintable() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
        return ch
    c = ord(ch)
    if c > 0xFFFF:  # JSON (RFC 8259 §7) writes a character outside the BMP as a surrogate pair
        c -= 0x10000
        return f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"
    return f"\\u{c:04x}"


def json_text(obj: object, *, indent: int | None = None, separators: tuple[str, str] | None = None) -> str:
    """``json.dumps(obj, ensure_ascii=False)`` that a terminal shows as it is: DEL, C1 controls,
    format characters (bidi controls, zero-width), lone surrogates and U+2028/U+2029 written as
    ``\\uXXXX`` escapes.

    The JSON means exactly the same data (RFC 8259 §7: any character may be escaped); only what a
    terminal would act on is escaped, the rest of the text stays readable.

    Args:
        obj: what :func:`json.dumps` accepts.
        indent, separators: as for :func:`json.dumps`.

    Raises:
        TypeError, ValueError: as :func:`json.dumps` (an object it cannot serialise).
    """
    text = json.dumps(obj, ensure_ascii=False, indent=indent, separators=separators)
    return text if text.isascii() else _JSON_CANDIDATE_RE.sub(_json_escape, text)
