"""widgets.text: untrusted host text becomes one safe line of Text (DESIGN.md: never markup, no escapes)."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text

from widgets.text import MAX_CHARS, host_text, plain


def _assert_clean(s: str) -> None:
    for ch in s:
        assert unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"), repr(ch)


def test_markup_lookalikes_stay_the_characters_they_are() -> None:
    for s in ("[bold]", "[/]", "[/usr/bin/python3]", "[red]x[/red] [link=http://x]y[/link]", "\\[bold]"):
        t = host_text(s)
        assert t.plain == s
        assert t.spans == []


def test_ansi_colours_are_kept_as_styles_not_characters() -> None:
    t = host_text("\x1b[31mred\x1b[0m plain \x1b[1;38;5;208mbold\x1b[m")
    assert t.plain == "red plain bold"
    assert "\x1b" not in t.plain
    styles = {t.plain[s.start:s.end]: s.style for s in t.spans}
    assert styles["red"].color is not None and styles["red"].color.number == 1
    assert styles["bold"].bold


def test_other_escape_sequences_are_dropped_whole() -> None:
    assert plain("\x1b]0;title\x07after") == "after"           # OSC title, BEL-terminated
    assert plain("\x1b]0;title\x1b\\after") == "after"         # OSC title, ST-terminated
    assert plain("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\") == "link"  # hyperlink
    assert plain("x\x1b[2J\x1b[H\x1b[?25ly") == "xy"           # clear screen, home, hide cursor
    assert plain("\x1b(Bok\x1b7\x1b8") == "ok"                  # charset, save/restore cursor
    assert plain("\x1bPq#0;2;0;0;0\x1b\\after") == "after"     # DCS (sixel)


def test_a_lone_escape_anywhere_is_dropped() -> None:
    assert plain("\x1b") == ""
    assert plain("abc\x1b") == "abc"
    assert plain("a\x1b\x00b") == "ab"


def test_c1_controls_and_8bit_csi_are_dropped() -> None:
    assert plain("\x9b31m") == ""
    assert plain("x\x9b31my") == "xy"
    assert plain("a\x85b\x9dc") == "a bc"  # NEL is a line break: one line, a space


def test_only_the_last_carriage_return_frame_is_kept() -> None:
    assert plain("a\rb") == "b"
    assert plain(" 10%|█         |\r 50%|█████     |\r100%|██████████|") == "100%|██████████|"
    assert plain("done\r") == "done"               # a trailing \r shows the last frame with text
    assert plain("abc\r\x1b[K") == "abc"           # ... also when the last frame only clears


def test_bidi_overrides_and_invisible_format_characters_are_dropped() -> None:
    assert plain("abc\u202edcba") == "abcdcba"
    assert plain("\u2066x\u2069\u200b\u200e\ufeffy") == "xy"


def test_lone_surrogates_become_replacement_characters() -> None:
    s = plain("bad \ud800 and \udcff byte")
    assert s == "bad \ufffd and \ufffd byte"
    s.encode("utf-8")  # must not raise


def test_tabs_become_spaces_and_line_breaks_make_one_line() -> None:
    assert plain("a\tb") == "a    b"
    assert plain("l1\nl2\r\nl3\u2028l4") == "l1 l2 l3 l4"


def test_concealed_and_blinking_text_is_shown_plainly() -> None:
    t = host_text("\x1b[8;5msecret\x1b[0m")
    assert t.plain == "secret"
    for span in t.spans:
        assert not span.style.conceal and not span.style.blink


def test_long_lines_are_kept_up_to_the_cap_and_marked_beyond() -> None:
    t = host_text("x" * 5000)
    assert t.plain == "x" * 5000 and t.no_wrap
    long = host_text("y" * (MAX_CHARS * 3))
    assert len(long.plain) == MAX_CHARS and long.plain.endswith("…")
    assert len(plain("\x1b[31m" + "z" * 100, max_chars=10)) == 10


def test_anything_not_a_string_is_shown_as_its_str() -> None:
    assert plain(42) == "42"
    assert isinstance(host_text(None), Text)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=80)
       | st.lists(st.sampled_from(["\x1b", "[", "]", "31m", "\x07", "\r", "\n", "\t", "\x9b", ";", "0", "a",
                                   "\u202e", "\ud800", "/", "bold", "\\", "P", "8", "m"]), max_size=30).map("".join))
def test_any_text_renders_as_one_clean_line(s: str) -> None:
    t = host_text(s)
    _assert_clean(t.plain)
    assert "\n" not in t.plain and "\r" not in t.plain and "\x1b" not in t.plain
    assert t.no_wrap
    t.plain.encode("utf-8")
