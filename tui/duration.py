"""The one parser of durations on the command line (``--timeout`` of ``status`` and ``wait``).

``15``, ``15s``, ``1.5m``, ``30m``, ``1h``, ``1h30m`` (plain numbers are seconds); ``0`` only where
the option lets it mean "look once" (``wait --timeout 0``).
"""

from __future__ import annotations

import re

_PART_RE = re.compile(r"(\d+(?:\.\d+)?)([smh]?)")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
#: The longest duration accepted: past it a number is a typo (and ``9999...h`` would be infinite).
MAX_DURATION_S = 7 * 24 * 3600.0


def parse_duration(text: str, *, allow_zero: bool = False) -> float:
    """``"90"``, ``"90s"``, ``"30m"``, ``"1h"``, ``"1h30m"``, ``"1.5m"`` -> seconds (a float).

    Args:
        text: the option's value; case and surrounding blanks do not matter.
        allow_zero: accept ``0`` (``0s``, ``0m``...) and return 0.0.

    Raises:
        ValueError: not a duration (empty, a negative number, an unknown unit, ``nan``), 0 when
            ``allow_zero`` is false, or more than :data:`MAX_DURATION_S`. ``str()`` is one line for
            the operator.
    """
    clean = text.strip().lower()
    total, pos = 0.0, 0
    for m in _PART_RE.finditer(clean):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(clean) or not clean:
        raise ValueError(f"not a duration: {text!r} (e.g. 15s, 5m, 1h, or seconds)")
    if total == 0 and not allow_zero:
        raise ValueError(f"must be more than 0: {text!r}")
    if not total <= MAX_DURATION_S:  # also inf, from a 400-digit number
        raise ValueError(f"more than {MAX_DURATION_S / 86400:g} days: {text!r}")
    return total
