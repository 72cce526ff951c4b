"""probes.hosttext: the one sanitiser for host text (issue 13: one rule set, used everywhere).

Each class of control sequence (ECMA-48 CSI, OSC, DCS, SOS, PM, APC, nF, Fp/Fe/Fs, in 7-bit and
8-bit form), C0/C1 characters, Unicode bidi and zero-width characters, sequences the text ends
inside, linear time on hostile input, and a check that no other module keeps a sanitiser of its own.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes import hosttext
from probes.hosttext import clean_chars, json_text, lines, one_line, strip_escapes, unsafe_char

ROOT = Path(__file__).resolve().parent.parent

#: The bidi controls of UAX #9 and the zero-width / invisible format characters.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"


def _assert_safe(s: str) -> None:
    """Nothing a terminal acts on or hides: no Cc, Cf, Cs, Zl, Zp character."""
    for ch in s:
        assert unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"), repr(s)


# --- each class of sequence ------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "shown"), [
    ("a\x1b]52;c;UFdORUQ=\x07b", "ab"),                         # OSC 52 (clipboard), BEL-terminated
    ("a\x1b]52;c;UFdORUQ=\x1b\\b", "ab"),                       # OSC 52, ST-terminated
    ("a\x1b]52;c;UFdORUQ=\x9cb", "ab"),                         # OSC 52, 8-bit ST
    ("a\x9d52;c;UFdORUQ=\x07b", "ab"),                          # 8-bit OSC
    ("\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\", "link"),   # OSC 8 hyperlink
    ("\x1b]0;title\x07after", "after"),                         # OSC title
    ("x\x1b[2J\x1b[H\x1b[3;5Hy", "xy"),                         # CSI: clear screen, cursor moves
    ("\x1b[?1049h\x1b[?25lhid\x1b[?25h", "hid"),                # CSI private modes (alt screen, cursor)
    ("a\x1b[6nb", "ab"),                                        # CSI device status report (an answer-back)
    ("x\x9b2Jy", "xy"),                                         # 8-bit CSI
    ("\x9b31mred", "red"),                                      # 8-bit SGR
    ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),                   # DCS (sixel)
    ("\x90+q544e\x9cafter", "after"),                           # 8-bit DCS (XTGETTCAP)
    ("\x1b_Gf=100;AAAA\x1b\\after", "after"),                   # APC (kitty graphics)
    ("\x9f payload\x9cafter", "after"),                         # 8-bit APC
    ("\x1b^privacy\x1b\\after", "after"),                       # PM
    ("\x1bXstring\x1b\\after", "after"),                        # SOS
    ("\x1b(0lqk\x1b(B", "lqk"),                                 # nF: charset selection
    ("\x1b7a\x1b8\x1bcb\x1b=", "ab"),                           # Fp/Fs: save/restore cursor, reset (RIS)
    ("nul\x00 del\x7f bel\x07 bs\x08", "nul del bel bs"),       # C0 and DEL
    ("a\x80b\x8dc\x9ad", "abcd"),                               # C1 that begin no sequence
    ("a\x85b", "a b"),                                          # NEL: a line break, one line
    ("tab\there", "tab    here"),
])
def test_each_class_of_control_sequence_goes_whole(raw: str, shown: str) -> None:
    assert one_line(raw) == shown
    _assert_safe(one_line(raw))


def test_sgr_is_kept_only_when_asked_and_then_in_7_bit_form() -> None:
    assert one_line("\x1b[1;31mred\x1b[0m") == "red"
    assert one_line("\x1b[1;31mred\x1b[0m", keep_sgr=True) == "\x1b[1;31mred\x1b[0m"
    assert one_line("\x9b31mred", keep_sgr=True) == "\x1b[31mred"
    kept = one_line("\x1b]52;c;eA==\x07\x1b[2J\x1b[32mok\x1b[m\x1b", keep_sgr=True)
    assert kept == "\x1b[32mok\x1b[m"  # every ESC left begins an SGR sequence


@pytest.mark.parametrize(("raw", "shown"), [
    ("abc\x1b", "abc"),
    ("abc\x1b[", "abc"),
    ("abc\x1b[31", "abc"),          # a CSI the text ends inside goes whole
    ("abc\x1b[1;2", "abc"),
    ("abc\x9b", "abc"),
    ("abc\x9b12;", "abc"),
    ("abc\x1b(", "abc"),
    ("abc\x1b]", "abc"),
    ("abc\x1b]52;c;UFd", "abc52;c;UFd"),   # an unterminated string: only its opener, the rest shown
    ("abc\x1bP1$r", "abc1$r"),
    ("abc\x9d0;t", "abc0;t"),
    ("a\x1b]0;x\nb", "a0;x b"),            # a string cut by a line break is not a string
])
def test_sequences_the_text_ends_inside(raw: str, shown: str) -> None:
    assert one_line(raw) == shown


def test_bidi_controls_and_zero_width_characters_are_dropped_never_applied() -> None:
    for ch in BIDI + ZERO_WIDTH:
        assert one_line(f"gpu{ch}-a") == "gpu-a", f"U+{ord(ch):04X}"
    assert one_line("user\u202egnp.exe") == "usergnp.exe"


def test_unassigned_private_use_and_surrogates_stay_visible_as_replacement_characters() -> None:
    assert one_line("a\ue000b\U0010fffdc\ud800d") == "a\ufffdb\ufffdc\ufffdd"


def test_line_breaks_and_frames() -> None:
    assert one_line("l1\nl2\r\nl3\u2028l4\x0bl5") == "l1 l2 l3 l4 l5"
    assert one_line(" 10%|█ |\r 50%|███ |\r100%|████|") == "100%|████|"
    assert one_line("abc\r\x1b[K") == "abc"
    assert lines("one\x1b[2J\ntwo\u202e\r\nthree") == "one\ntwo\nthree"


def test_cut_marks_the_end() -> None:
    assert one_line("x" * 50, max_chars=10) == "x" * 9 + "…"
    assert lines("a" * 20 + "\nb", max_chars=5) == "aaaa…\nb"


def test_clean_chars_and_strip_escapes_are_the_two_steps() -> None:
    assert strip_escapes("a\x1b[31mb\x9b1mc\x1b]0;t\x07d") == "abcd"
    assert strip_escapes("a\x00b") == "a\x00b"  # characters are clean_chars' job
    assert clean_chars("a\x00b\tc\u202ed") == "ab    cd"


def test_the_reader_and_the_pane_read_the_same() -> None:
    """Issue 13: ``"\\x9b31mred"`` reached the reader as "31mred" and the pane as "red"."""
    from probes.logs.logline import frames
    from probes.logs.reader import StartupReader
    from widgets.text import plain

    for raw in ("\x9b31mred", "\x1b]52;c;eA==\x07red", "r\u202eed\u200b", "\x90q\x9cred"):
        assert frames(raw) == ["red"], repr(raw)
        assert plain(raw) == "red", repr(raw)
        reader = StartupReader()
        reader.feed_bytes(raw.encode())
        assert reader.reading().last_line == "red", repr(raw)


def test_unsafe_char_names_the_first_character_that_would_change() -> None:
    assert unsafe_char("gpu-node-1") is None
    assert unsafe_char("gpu node") is None
    assert unsafe_char("gpu\u202e1") == (3, "U+202E")
    assert unsafe_char("a\x1b[31m") == (1, "U+001B")
    assert unsafe_char("zw\u200b") == (2, "U+200B")


def test_json_text_escapes_what_a_terminal_acts_on_and_means_the_same() -> None:
    value = {"line": "a\x1b]52;c;eA==\x07 \x9b2J \u202e \u200b \ufeff \U000e0041 \ud800 \u2028 é 日本 [bold]"}
    text = json_text(value, indent=2)
    assert json.loads(text) == value
    _assert_safe(text.replace("\n", ""))
    assert "é 日本 [bold]" in text  # the rest stays readable
    assert json_text({"a": 1}) == '{"a": 1}'


# --- time ----------------------------------------------------------------------------------------

HOSTILE = {
    "8-bit OSC openers": "\x9d" * 100_000,
    "7-bit OSC openers": "\x1b]" * 50_000,
    "CSI openers": "\x1b[" * 50_000,
    "8-bit CSI openers": "\x9b" * 100_000,
    "long CSI parameters": "\x1b[" + "1;" * 50_000,
    "unterminated strings": ("\x1b]" + "a" * 48) * 2_000,
    "lone ESCs": "\x1b" * 100_000,
    "DCS with ESCs": ("\x1bP" + "\x1b" * 8) * 10_000,
    "bidi": "\u202e\u200b" * 50_000,
    "carriage returns": "\r" * 100_000,
    "SGR soup": "\x1b[31m\x1b[" * 15_000,
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_very_long_hostile_input_takes_linear_time(name: str) -> None:
    """100,000 characters in well under a second (a quadratic scan would take minutes)."""
    text = HOSTILE[name]
    t0 = time.process_time()
    one_line(text)
    one_line(text, keep_sgr=True)
    strip_escapes(text)
    clean_chars(text)
    assert time.process_time() - t0 < 1.0
    # ... and the time grows with the length, not its square: four times the input, at most ~4x+.
    small, big = text[: len(text) // 4], text
    t1 = time.process_time()
    for _ in range(4):
        strip_escapes(small)
    t2 = time.process_time()
    strip_escapes(big)
    t3 = time.process_time()
    assert t3 - t2 < 3 * (t2 - t1) + 0.05


# --- any input -------------------------------------------------------------------------------------

_PIECES = ["\x1b", "[", "]", "P", "_", "^", "X", "\\", "31m", "2J", "\x07", "\x9c", "\x9b", "\x9d", "\x90",
           "\r", "\n", "\t", ";", "0", "a", "é", "\u202e", "\u200b", "\ud800", "\x00", "\x85", "8", "m"]


@settings(derandomize=True, max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)
       | st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_any_text_comes_out_safe_one_line_and_stable(s: str) -> None:
    out = one_line(s)
    _assert_safe(out)
    assert one_line(out) == out  # cleaning clean text changes nothing
    kept = one_line(s, keep_sgr=True)
    _assert_safe(strip_escapes(kept))
    assert all(kept.startswith("\x1b[", i) for i, ch in enumerate(kept) if ch == "\x1b")
    for line in lines(s).split("\n"):
        _assert_safe(line)
    if unsafe_char(s) is None:
        spaced = "".join(" " if unicodedata.category(c) == "Zs" else c for c in s.replace("\t", hosttext.TAB))
        assert clean_chars(strip_escapes(s)) == spaced


# --- one sanitiser -----------------------------------------------------------------------------------

#: String constants with control or format characters that are not a sanitiser of their own.
ALLOWED_CONTROL_LITERALS = {
    ("tui/wait.py", "\r\x1b[2K"),                  # upwatch's own escape: return and clear the line
    ("probes/sources/logfile_input.py", "\t\n\r\x1b\x0c\x08\x07"),  # the binary-file test: characters a log may hold
    ("probes/logs/engines/patterns.py", "\x00"),        # a placeholder inside a pattern's literal text
    ("probes/logs/engines/patterns.py", "\x00)"),
    ("probes/sources/logfile.py", b"\x00"),                # NUL padding of a character device
    ("probes/sources/logfile_input.py", b"\x00"),          # NUL padding of a character device
    ("probes/transport/replay/scenario.py", "\t\n"),
    ("probes/sources/logfile_input.py", b"\x1f\x8b"),      # gzip's magic number
    *(("probes/sources/download.py", c) for c in "\a\b\f\v"),  # C escapes systemd writes (a format, decoded)
    ("widgets/text.py", "\x1b"),                    # "did an SGR sequence survive?" (to decode colours)
}
#: Regex or string text that spells a control or format character as an escape (``r"[\x00-\x1f]"``,
#: ``"\\x1b\\["``, ``\\u202e``): a control-character rule of its own.
SPELLED_CONTROL_RE = re.compile(r"\\x(?:0[0-8b-f]|1[0-9a-f]|7f|[89][0-9a-f])|\\u(?:00[89][0-9a-f]|200[b-f]|202[a-e]"
                                r"|206[0-9]|feff)|\\0?33", re.IGNORECASE)
#: Such text that is not a sanitiser: a word pattern that treats a NUL placeholder as a boundary.
ALLOWED_SPELLED = {("probes/logs/engines/patterns.py", r"(?<![\w\x00])[A-Za-z][A-Za-z0-9_]{2,}(?![\w\x00?*+{])")}
#: ``isprintable()`` used as "already clean?" before calling the sanitiser (a fast path), per file.
# The reader's fast paths: feed_bytes' (a plain line skips frames()) and feed's quiet one (quiet.py).
# reader.py: the fast paths of feed_bytes (a file's lines) and feed (a journal's texts).
# (reader.py: feed_bytes' and feed's plain-line fast paths, and feed's gate of a service's quiet path.)
ALLOWED_ISPRINTABLE = {"probes/logs/logline.py": 1, "probes/logs/reader.py": 3, "probes/logs/quiet.py": 1,
                       "widgets/text.py": 1}


def _sources() -> list[Path]:
    return sorted(p for d in ("probes", "tui", "widgets") for p in (ROOT / d).rglob("*.py")
                  if p.name != "hosttext.py" or p.parent.name != "probes")


def _odd(value: str | bytes) -> bool:
    chars = value.decode("latin-1") if isinstance(value, bytes) else value
    return any((unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t\r") for c in chars)


def test_no_other_module_defines_its_own_control_character_rules() -> None:
    """Every escape/control-character rule lives in probes/hosttext.py: no other module holds a
    string with a control or format character, nor spells one as an escape in a regex
    (``r"[\\x00-\\x1f]"``), calls ``unicodedata.category``, or filters with ``isprintable()`` beyond a fast path."""
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        printable = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and _odd(node.value):
                if (rel, node.value) not in ALLOWED_CONTROL_LITERALS:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                    and SPELLED_CONTROL_RE.search(node.value) and (rel, node.value) not in ALLOWED_SPELLED:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Attribute) and node.attr == "isprintable":
                printable += 1
            elif isinstance(node, ast.Attribute) and node.attr == "category" and \
                    isinstance(node.value, ast.Name) and node.value.id == "unicodedata":
                found.append(f"{rel}:{node.lineno}: unicodedata.category")
        if printable > ALLOWED_ISPRINTABLE.get(rel, 0):
            found.append(f"{rel}: isprintable() used {printable} times")
    assert found == []


@pytest.mark.parametrize("module", [
    "probes.logs.logline", "probes.sources.gpu_cells", "probes.sources.health", "probes.fold.notify", "probes.transport.runner", "widgets.text",
    "tui.notify", "tui.config_text", "tui.status", "tui.wait", "tui.history", "tui.actions", "tui.app", "tui.cli",
])
def test_every_former_sanitiser_site_uses_the_one_sanitiser(module: str) -> None:
    mod = importlib.import_module(module)
    used = {name for name, value in vars(mod).items()
            if value is hosttext or getattr(value, "__module__", None) == "probes.hosttext"}
    assert used, f"{module} does not use probes.hosttext"
