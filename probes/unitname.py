"""systemd unit names: the one check every piece that names a unit goes through.

Used by the configuration (``tui.config`` re-exports :func:`normalize_unit`) and by the actions
(:mod:`probes.actions`), which refuse to send a command for a unit name systemd would not accept.
"""

from __future__ import annotations

import re

#: systemd's unit type suffixes (systemd.unit(5)).
UNIT_SUFFIXES = ("service", "socket", "device", "mount", "automount", "swap", "target", "path",
                 "timer", "slice", "scope")
_UNIT_CHARS = re.compile(r"[A-Za-z0-9:\-_.\\@]+")
_UNIT_MAX = 255


def normalize_unit(unit: str) -> str:
    """``unit`` with ``.service`` appended when it has no systemd unit suffix (:data:`UNIT_SUFFIXES`).

    Raises:
        ValueError: the result is not a valid systemd unit name (systemd.unit(5): letters, digits
            and ``:-_.\\@``, at most 255 characters, a prefix before the suffix, at most one ``@``,
            not a template like ``x@.service``), or it starts with ``-`` (``journalctl -u`` would
            read it as an option).
    """
    if not unit:
        raise ValueError("the unit name is empty")
    stem, dot, suffix = unit.rpartition(".")
    if not (dot and suffix in UNIT_SUFFIXES):
        unit += ".service"
        stem, _, suffix = unit.rpartition(".")
    bad = "".join(sorted({c for c in unit if not _UNIT_CHARS.fullmatch(c)}))
    if bad:
        raise ValueError(f"{unit!r} is not a systemd unit name: {bad!r} is not allowed "
                         "(letters, digits and :-_.\\@ only)")
    if len(unit) > _UNIT_MAX:
        raise ValueError(f"the unit name is {len(unit)} characters long; systemd allows {_UNIT_MAX}")
    if not stem or stem.startswith("@"):
        raise ValueError(f"{unit!r} is not a systemd unit name: nothing before the suffix")
    if stem.startswith("-"):
        raise ValueError(f"{unit!r}: a unit name starting with '-' is not supported")
    if stem.count("@") > 1:
        raise ValueError(f"{unit!r} is not a systemd unit name: more than one '@'")
    if stem.endswith("@"):
        raise ValueError(f"{unit!r} is a template; name an instance, e.g. {stem}1.{suffix}")
    return unit
