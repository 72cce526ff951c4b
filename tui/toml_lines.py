"""Where each key of a TOML document is written: tomllib gives values, not lines.

:func:`scan` walks the text as TOML 1.0 reads it (https://toml.io/en/v1.0.0): comments, table
headers and arrays of tables, dotted and quoted keys, the four kinds of strings (multi-line ones
included), arrays over several lines and inline tables. It is meant for text :mod:`tomllib` has
already accepted, and it is checked against tomllib's own reading: when the keys it saw are not
exactly the keys tomllib read, it gives no lines at all. A message then names no line, which is
better than a wrong one.

Tables are named by paths of keys and array indices, as the parsed document nests them: ``()`` is
the document, ``("settings",)`` the ``[settings]`` table, ``("host", 1)`` the second ``[[host]]``
table (or the second inline table of ``host = [...]``).
"""

from __future__ import annotations

import bisect
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int, ...]

_SKIP = re.compile(r"(?:[ \t]+|#[^\n]*)*")  # a comment's end is the \n (a CRLF's \r is in it)
_SKIP_LINES = re.compile(r"(?:[ \t]+|#[^\n]*|\r?\n)*")
_ONE_LINE_STRING = {'"': re.compile(r'"(?:[^"\\\n]|\\.)*"'), "'": re.compile(r"'[^'\n]*'")}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: An integer, float, boolean, or date/time (the space of ``1979-05-27 07:32:00`` handled apart).
_SCALAR = re.compile(r"[A-Za-z0-9_+\-.:]+")
_DATE_THEN_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:")


@dataclass(frozen=True, slots=True)
class KeyLines:
    """The lines (1-based, counted by ``\\n`` as TOML does) where keys and tables are written.

    Attributes:
        keys: (table path, key) → every line where that key of that table is written: one for
            ``key = value``, several when dotted keys or sub-table headers build it piece by piece
            (``stall_after_s.init = 5`` and ``stall_after_s."*" = 7``).
        headers: table path → the line of its header (``[settings]``, ``[[host]]``) or of the
            ``{`` of an inline table.
    """

    keys: Mapping[tuple[Path, str], tuple[int, ...]]
    headers: Mapping[Path, int]

    def line_of(self, table: Path, key: str) -> int | None:
        """The line of ``key`` in ``table`` when it is written in exactly one place, else None
        (not written, or spread over lines: which of them a message is about is not known)."""
        found = self.keys.get((table, key), ())
        return found[0] if len(found) == 1 else None

    def first_line_of(self, table: Path, key: str) -> int | None:
        """The first line where ``key`` of ``table`` is written (what it is, a table or a value, is
        fixed there), or None."""
        found = self.keys.get((table, key), ())
        return found[0] if found else None

    def header_of(self, table: Path) -> int | None:
        """The line of the header (or inline ``{``) of ``table``, or None (a table made only by
        dotted keys has none)."""
        return self.headers.get(table)


def scan(text: str, doc: Mapping[str, Any]) -> KeyLines | None:
    """Find the lines of the keys of ``text``, a TOML document ``tomllib.loads`` read as ``doc``.

    Returns:
        the lines, or None when the scan did not see exactly the keys of ``doc`` (then no line can
        be trusted).
    """
    scanner = _Scanner(text)
    try:
        scanner.document()
    except _Unsure:
        return None
    if set(scanner.keys) != _pairs(doc):
        return None
    return KeyLines({k: tuple(v) for k, v in scanner.keys.items()}, dict(scanner.headers))


class _Unsure(Exception):
    """The text is not what the scanner expects of TOML that tomllib accepted."""


def _pairs(doc: Mapping[str, Any]) -> set[tuple[Path, str]]:
    """Every (table path, key) of a parsed document (iterative: nesting may be deep)."""
    out: set[tuple[Path, str]] = set()
    todo: list[tuple[Path, Any]] = [((), doc)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, dict):
            for key, inner in value.items():
                out.add((path, key))
                todo.append((path + (key,), inner))
        elif isinstance(value, list):
            todo.extend((path + (i,), inner) for i, inner in enumerate(value))
    return out


@dataclass(slots=True)
class _Open:
    """An array or inline table being read: its path, its closing character, items read so far."""

    path: Path
    close: str
    count: int = 0


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.keys: dict[tuple[Path, str], list[int]] = {}
        self.headers: dict[Path, int] = {}
        self.arrays_of_tables: dict[Path, int] = {}  # path of a [[...]] array → tables so far

    # --- characters ---

    def line(self, pos: int | None = None) -> int:
        return bisect.bisect_left(self.newlines, self.pos if pos is None else pos) + 1

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos:self.pos + n]

    def expect(self, s: str) -> None:
        if not self.text.startswith(s, self.pos):
            raise _Unsure(f"expected {s!r} at {self.pos}")
        self.pos += len(s)

    def skip(self, newlines: bool) -> None:
        """Skip spaces, tabs and comments; and line ends when ``newlines``."""
        m = (_SKIP_LINES if newlines else _SKIP).match(self.text, self.pos)
        assert m is not None  # the patterns match the empty string too
        self.pos = m.end()

    def end_of_line(self) -> None:
        self.skip(newlines=False)
        if self.pos < len(self.text):
            self.expect("\r\n" if self.peek() == "\r" else "\n")

    # --- the document ---

    def document(self) -> None:
        table: Path = ()
        while True:
            self.skip(newlines=True)
            if self.pos >= len(self.text):
                return
            if self.peek() == "[":
                table = self.header()
            else:
                self.key_value(table)
            self.end_of_line()

    def header(self) -> Path:
        line = self.line()
        many = self.peek(2) == "[["
        self.pos += 2 if many else 1
        self.skip(newlines=False)
        parts = self.key()
        self.skip(newlines=False)
        self.expect("]]" if many else "]")
        path: Path = ()
        for i, part in enumerate(parts):
            self.note(path, part, line)
            path += (part,)
            if i == len(parts) - 1 and many:
                n = self.arrays_of_tables.get(path, 0)
                self.arrays_of_tables[path] = n + 1
                path += (n,)
            elif path in self.arrays_of_tables:  # [host.x] is in the last [[host]] table
                path += (self.arrays_of_tables[path] - 1,)
        self.headers.setdefault(path, line)
        return path

    def note(self, table: Path, key: str, line: int) -> None:
        places = self.keys.setdefault((table, key), [])
        if line not in places:  # one line may write a key twice: { s.a = 1, s.b = 2 }
            places.append(line)

    def key_value(self, table: Path) -> None:
        """Read ``key = value`` in ``table``."""
        line = self.line()
        parts = self.key()
        path = table
        for part in parts:
            self.note(path, part, line)
            path += (part,)
        self.skip(newlines=False)
        self.expect("=")
        self.skip(newlines=False)
        self.value(path)

    def key(self) -> list[str]:
        """A dotted key: simple keys joined by ``.`` (spaces allowed around it)."""
        parts = [self.simple_key()]
        while True:
            save = self.pos
            self.skip(newlines=False)
            if self.peek() != ".":
                self.pos = save
                return parts
            self.pos += 1
            self.skip(newlines=False)
            parts.append(self.simple_key())

    def simple_key(self) -> str:
        c = self.peek()
        if c in ('"', "'"):
            start = self.pos
            self.string()
            token = self.text[start:self.pos]
            if "\n" in token:
                raise _Unsure("a key over lines")
            value = tomllib.loads(f"k = {token}")["k"]  # tomllib decodes the escapes
            assert isinstance(value, str)
            return value
        m = _BARE_KEY.match(self.text, self.pos)
        if not m:
            raise _Unsure(f"no key at {self.pos}")
        self.pos = m.end()
        return m.group()

    # --- values ---

    def string(self) -> None:
        """Skip a string of any of the four kinds (TOML 1.0 "String")."""
        text = self.text
        for delim in ('"""', "'''"):
            if text.startswith(delim, self.pos):
                i = self.pos + 3
                while not text.startswith(delim, i):
                    if i >= len(text):
                        raise _Unsure("an unclosed string")
                    i += 2 if delim == '"""' and text[i] == "\\" else 1
                i += 3
                # Up to two quotes of the delimiter may close the content just before it (a""""" is a"").
                for _ in range(2):
                    if text.startswith(delim[0], i):
                        i += 1
                self.pos = i
                return
        m = _ONE_LINE_STRING[self.peek()].match(text, self.pos)
        if not m:
            raise _Unsure("an unclosed string")
        self.pos = m.end()

    def value(self, path: Path) -> None:
        """Skip one value at ``path``, noting the keys of the inline tables in it. Iterative: arrays
        may nest as deep as tomllib allows."""
        stack: list[_Open] = []
        self.open_or_skip(path, stack)
        while stack:
            top = stack[-1]
            in_array = top.close == "]"
            self.skip(newlines=in_array)
            if self.peek() == top.close:
                self.pos += 1
                stack.pop()
                continue
            if top.count:
                self.expect(",")
                self.skip(newlines=in_array)
                if in_array and self.peek() == "]":  # a trailing comma
                    continue
            if in_array:
                inner = top.path + (top.count,)
            else:
                line = self.line()
                inner = top.path
                for part in self.key():
                    self.note(inner, part, line)
                    inner += (part,)
                self.skip(newlines=False)
                self.expect("=")
                self.skip(newlines=False)
            top.count += 1
            self.open_or_skip(inner, stack)

    def open_or_skip(self, path: Path, stack: list[_Open]) -> None:
        c = self.peek()
        if c == "[":
            self.pos += 1
            stack.append(_Open(path, "]"))
        elif c == "{":
            self.headers.setdefault(path, self.line())
            self.pos += 1
            stack.append(_Open(path, "}"))
        elif c in ('"', "'"):
            self.string()
        else:
            m = _SCALAR.match(self.text, self.pos)
            if not m:
                raise _Unsure(f"no value at {self.pos}")
            self.pos = m.end()
            if _DATE_THEN_TIME.match(self.text, m.start()) and m.end() - m.start() == 10:
                m = _SCALAR.match(self.text, self.pos + 1)
                assert m is not None  # the pattern saw digits there
                self.pos = m.end()
