"""tui.toml_lines: the line of a hosts.toml key, found by a TOML-aware scan (tomllib gives none), or
no line at all when it cannot be placed surely; and load_config's messages built on it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tui.config import ConfigError, load_config
from tui.toml_lines import KeyLines, scan


def error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(str(path), (), {}, default_path=tmp_path / "none.toml")
    return str(exc.value).removeprefix(f"{path}")


def lines(text: str) -> KeyLines:
    found = scan(text, tomllib.loads(text))
    assert found is not None
    return found


def test_a_multi_line_string_before_a_bad_port_names_line_6(tmp_path: Path) -> None:
    # Measured before: the regex finder read the string's second line as the key and said line 3.
    text = '[[host]]\nname = """\\\nport = 1"""\nssh = "local"\nunit = "x"\nport = 70000\n'
    assert error(tmp_path, text) == ' line 6: host "port = 1": key "port" must be 1..65535, not 70000'


@pytest.mark.parametrize("text, key, line", [
    # a multi-line basic string holding an escaped quote and a line that looks like a header
    ('[[host]]\nname = """a \\""" b\n[[host]]\nport = 2"""\nunit = "x"\nport = 9\n', "port", 6),
    # a multi-line literal string ending in extra quotes ('''a''''' is a'')
    ("[[host]]\nname = '''a\nport = 1'''''\nport = 9\n", "port", 4),
    # an array over lines with comments and a string holding "port ="
    ('[[host]]\nnotify = [\n  "bell",  # port = 1\n  "port = 2",\n]\nport = 9\n', "port", 6),
    # a comment holding "port ="
    ("[[host]]\n# port = 1\n  # port = 2\nport = 9  # port = 3\n", "port", 4),
    # quoted keys, basic (with an escape) and literal
    ('[[host]]\n"po\\u0072t" = 9\n\'unit\' = "x"\n', "port", 2),
    ('[[host]]\n"po\\u0072t" = 9\n\'unit\' = "x"\n', "unit", 3),
    # an inline table with a nested array and a multi-line string inside
    ('[[host]]\nstall_after_s = { init = 1, x = [1,\n2], y = """\nport = 1""" }\nport = 9\n', "port", 5),
    ('[[host]]\nstall_after_s = { init = 1, x = [1,\n2], y = """\nport = 1""" }\nport = 9\n', "stall_after_s", 2),
    # a datetime with a space, then the key
    ("[[host]]\nwhen = 1979-05-27 07:32:00Z\nport = 9\n", "port", 3),
    # CRLF line ends, and a bare \u2028 inside a string is no line end in TOML
    ('[[host]]\r\nname = "a\u2028b"\r\nport = 9\r\n', "port", 3),
])
def test_the_line_of_a_key_in_the_first_host(text: str, key: str, line: int) -> None:
    assert lines(text).line_of(("host", 0), key) == line


def test_arrays_of_tables_count_their_headers() -> None:
    text = ('[settings]\nread_only = true\n\n[[host]]\nname = "a"\n\n[[ "host" ]]  # a comment\nname = "b"\n'
            '[host.stall_after_s]\ninit = 5\n[[host]]\nname = "c"\n')
    found = lines(text)
    assert [found.header_of(("host", i)) for i in range(3)] == [4, 7, 11]
    assert [found.line_of(("host", i), "name") for i in range(3)] == [5, 8, 12]
    assert found.line_of(("host", 1), "stall_after_s") == 9
    assert found.line_of(("settings",), "read_only") == 2
    assert found.first_line_of((), "host") == 4 and found.first_line_of((), "settings") == 1


def test_inline_arrays_of_tables_are_placed_too() -> None:
    text = 'host = [\n  { name = "a", unit = "x" },\n\n  { name = "b", notify = [\n"bell"], unit = "y" },\n]\n'
    found = lines(text)
    assert found.line_of(("host", 1), "unit") == 5 and found.header_of(("host", 1)) == 4


def test_a_key_spread_over_several_lines_has_no_line() -> None:
    # Which of the dotted lines holds the bad phase is not known: no line rather than a guess.
    text = '[[host]]\nstall_after_s.init = 5\nstall_after_s."*" = 7\nport = 9\n'
    found = lines(text)
    assert found.line_of(("host", 0), "stall_after_s") is None
    assert found.line_of(("host", 0), "port") == 4
    assert found.first_line_of(("host", 0), "stall_after_s") == 2


def test_dotted_keys_at_the_top_place_their_inner_keys() -> None:
    text = 'settings.read_only = 1\n[[host]]\nunit = "x"\n'
    found = lines(text)
    assert found.line_of(("settings",), "read_only") == 1 and found.header_of(("settings",)) is None


def test_a_dotted_or_spread_key_in_a_message(tmp_path: Path) -> None:
    text = '[[host]]\nname = "a"\nunit = "x"\nstall_after_s.init = 5\nstall_after_s.graph = 7\n'
    assert error(tmp_path, text).startswith(': host "a": key "stall_after_s" "graph" is not a phase id')
    text = 'settings.read_only = 1\n'
    assert error(tmp_path, text) == ' line 1: [settings]: key "read_only" must be true or false, not an integer'


def test_a_scan_that_disagrees_with_tomllib_gives_no_lines() -> None:
    # The scan is checked against tomllib's own reading: keys it did not see mean no lines at all.
    assert scan('a = 1\n', {"a": 1, "b": 2}) is None
    assert scan('a = 1\n', {}) is None


# --- generated documents: the writer knows each key's line -----------------------------------------

_TRICKY = ["port = 1", "[[host]]", "# not a comment", "x = {", "]", "'", '\\"', "a\\\\"]


def _value(rng, depth: int = 0) -> str:
    """A random TOML value, some over several lines, holding text that looks like keys and headers."""
    pick = rng.randrange(9 if depth < 2 else 6)
    word = rng.choice(_TRICKY)
    if pick == 0:
        return rng.choice(["7", "0x1f", "-1_0", "1_000", "3.5e2", "inf", "true", "1979-05-27 07:32:00Z", "07:32:00"])
    if pick == 1:
        return '"' + word.replace("'", "q") + '"'
    if pick == 2:
        return "'" + word.replace("'", "q").replace("\\", "/") + "'"
    if pick == 3:
        return '"""\\\n  ' + word + '\n' + word + '""' + '"""'
    if pick == 4:
        return "'''\n" + word.replace("'", "q") + "\n'''''"
    if pick == 5:
        return '""'
    if pick == 6:
        items = [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return "[\n  " + (",  # " + word + "\n  ").join(items) + ("," if items else "") + "\n]"
    if pick == 7:
        return "{ " + ", ".join(f"i{n} = {_value(rng, depth + 1)}" for n in range(rng.randrange(3))) + " }"
    return "[" + ", ".join("{ j = " + _value(rng, depth + 1) + " }" for _ in range(rng.randrange(1, 3))) + "]"


def _document(rng) -> tuple[str, dict]:
    """A random document and, for each (table path, key) written once, the line it is on."""
    out: list[str] = []
    expected: dict = {}
    hosts = 0

    def line() -> int:
        return "".join(out).count("\n") + 1

    def table(path: tuple) -> None:
        for n in range(rng.randrange(1, 5)):
            key = rng.choice([f"k{n}", f'"k{n}"', f"'k{n}'", f'"k\\u003{n}"'])
            if rng.random() < 0.2:
                key += f".d{n}"  # dotted: the first part is written once here
            expected[(path, f"k{n}")] = line()
            out.append(f"{key} = {_value(rng)}" + rng.choice(["", "  # k9 = 1"]) + "\n" + rng.choice(["", "\n"]))

    table(())
    for t in range(rng.randrange(1, 4)):
        if rng.random() < 0.5:
            expected[((), f"t{t}")] = line()
            out.append(f"[t{t}]\n")
            table((f"t{t}",))
        else:
            out.append(rng.choice(["[[host]]\n", '[[ "host" ]]\n']))
            table(("host", hosts))
            hosts += 1
    return "".join(out), expected


@pytest.mark.parametrize("seed", range(200))
def test_generated_documents_name_the_line_each_key_was_written_on(seed: int) -> None:
    import random

    text, expected = _document(random.Random(seed))
    found = lines(text)  # tomllib reads it, and the scan agrees with tomllib's keys
    assert {k: found.line_of(*k) for k in expected} == expected, text
