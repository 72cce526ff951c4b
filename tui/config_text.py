"""The configuration file's text: TOML read with every failure named, and where each key is written.

:func:`parse_toml` is :func:`tomllib.loads` with each of its failures (and the two it raises
without a position: an integer too long for ``int()``, nesting too deep) as one
:class:`ConfigError` line naming the file and, where it can, the line. :class:`KeyLines` says on
which line a key or table is written (:func:`tui.toml_lines.scan`), for messages and for ``upwatch
config``'s provenance. The checks against the schema are :mod:`tui.config_check`'s; the entry point
is :func:`tui.config.load_config`.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Mapping
from typing import Any

from probes.hosttext import one_line
from tui.toml_lines import scan


class ConfigError(Exception):
    """The configuration cannot be used. The message is one line meant for the operator: it names
    the file and line (or the quick form argument) and the key, e.g.
    ``~/.config/upwatch/hosts.toml line 7: host "gpu-node-2": key "unti" is not known (did you
    mean "unit"?)``. Config text quoted in it goes through the one sanitiser
    (:func:`probes.hosttext.one_line`), so a hostile value cannot reach the terminal as escapes."""

    def __init__(self, message: object) -> None:
        super().__init__(one_line(message))


#: Where a key is: ("top", 0), ("settings", 0), ("defaults", 0) or ("host", index of the [[host]] table).
Section = tuple[str, int]


class KeyLines:
    """The lines of keys and tables in the file (:func:`tui.toml_lines.scan`), as messages and
    provenance name them: a key's line only where it can be placed surely, else none."""

    def __init__(self, text: str, shown: str, doc: Mapping[str, Any] | None = None) -> None:
        self.shown = shown
        self.found = scan(text, {} if doc is None else doc)

    def line_of(self, section: Section | None, key: str | None) -> int | None:
        """The line of ``key`` in ``section``, or of the section's header when ``key`` is None;
        None when it cannot be placed surely (not written, written in several places, or the
        scan is unsure). A top-level key is placed at its first line: what it is is fixed there."""
        if self.found is None or section is None:
            return None
        kind, index = section
        path: tuple[str | int, ...] = () if kind == "top" else (kind, index) if kind == "host" else (kind,)
        if key is None:
            return self.found.header_of(path)
        return self.found.first_line_of(path, key) if kind == "top" else self.found.line_of(path, key)

    def where(self, section: Section | None, key: str | None) -> str:
        """``"FILE line N: "`` for ``key`` in ``section`` (``"FILE: "`` when the line is unknown)."""
        line = self.line_of(section, key)
        return f"{self.shown} line {line}: " if line else f"{self.shown}: "

    def source(self, section: Section, key: str) -> str:
        """``"FILE:LINE"`` (or ``"FILE"``) for provenance."""
        line = self.line_of(section, key)
        return f"{self.shown}:{line}" if line else self.shown


#: A run that may be an integer too long for ``int()``: a digit, then 999 or more digits, letters
#: (hex, ``0x``/``0o``/``0b``) or underscores, not inside a bare word.
_LONG_NUMBER = re.compile(r"(?<![A-Za-z0-9_])[+-]?[0-9][0-9A-Za-z_]{999,}")


def parse_toml(text: str, shown: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, every failure a :class:`ConfigError` naming ``shown``.

    tomllib (Python 3.11) raises its ``TOMLDecodeError`` (with line and column) for text that is
    not TOML, but a plain ``ValueError`` without a position for an integer of more digits than
    ``int()`` reads (``sys.get_int_max_str_digits()``, 4300; hex too), and ``RecursionError`` for
    arrays or inline tables nested some hundreds deep. Both are named here, the integer with its
    line (found by :func:`_long_integer_line`).

    Raises:
        ConfigError: the text cannot be read as TOML.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: not valid TOML: arrays or inline tables nested too deeply") from None
    except ValueError:  # int() past sys.get_int_max_str_digits() digits
        found = _long_integer_line(text)
        limit = sys.get_int_max_str_digits()
        if found is None:
            raise ConfigError(f"{shown}: not valid TOML: an integer has more than {limit} digits") from None
        line, digits = found
        raise ConfigError(f"{shown} line {line}: not valid TOML: an integer of {digits} digits "
                          f"(at most {limit})") from None


def _too_long_integer(text: str) -> bool:
    """Whether tomllib fails on ``text`` because an integer is too long (its plain ValueError)."""
    try:
        tomllib.loads(text)
    except RecursionError:
        return False
    except ValueError as exc:
        return not isinstance(exc, tomllib.TOMLDecodeError)
    return False


def _long_integer_line(text: str) -> tuple[int, int] | None:
    """The line (1-based) and digit count of the integer that tomllib could not read, or None.

    Each long run of :data:`_LONG_NUMBER` is tried alone, the others replaced by ``0``: the first
    that still fails is the integer value (a run inside a string or a comment never fails)."""
    runs = list(_LONG_NUMBER.finditer(text))
    for run in runs:
        trial, end = [], 0
        for other in runs:
            trial.append(text[end:other.start()])
            trial.append(other.group() if other is run else "0")
            end = other.end()
        trial.append(text[end:])
        if _too_long_integer("".join(trial)):
            digits = sum(c.isalnum() for c in run.group().removeprefix("+").removeprefix("-"))
            if run.group().lstrip("+-")[1:2] in ("x", "o", "b"):
                digits -= 2
            return text.count("\n", 0, run.start()) + 1, digits
    return None
