"""Journal records: ``journalctl -o json`` lines turned into what the reader takes.

Format of ``journalctl -o json`` (systemd ``docs/JOURNAL_EXPORT_FORMATS.md``; behaviour checked on
systemd 252 in ``tests/fixtures/journal``): one JSON object per line, all values strings, except

* ``MESSAGE`` (any field) is an **array of byte values** when the text holds control characters
  (ESC from colours, CR from tqdm bars) or invalid UTF-8, and ``null`` when it is 4096 bytes or more
  and ``-a`` was not given;
* a field that occurs more than once in an entry is a **list** of the above.

``journalctl --show-cursor`` appends a non-JSON last line ``-- cursor: s=...``; ``-- No entries --``
and ``-- Boot ... --`` lines may appear in other modes. Key order is not stable: parse, never compare
bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from probes.logline import Stamp

#: Shown in place of a ``MESSAGE`` that journalctl printed as ``null`` (4096 bytes or more without ``-a``).
TOO_LONG = "[message of 4096 bytes or more: journalctl -a shows it]"


@dataclass(frozen=True, slots=True)
class Record:
    """One journal entry, reduced to what upwatch reads.

    Attributes:
        text: ``MESSAGE`` decoded (byte arrays as UTF-8 with replacement; several values joined by
            newlines; :data:`TOO_LONG` for ``null``).
        cursor: ``__CURSOR``, the bookmark to resume after (opaque).
        realtime_us: ``__REALTIME_TIMESTAMP`` in microseconds since the epoch, or None.
        pid: ``_PID`` or None; ident: ``SYSLOG_IDENTIFIER`` or None.
        unit: the unit the entry is about: ``UNIT``/``USER_UNIT`` for systemd's own entries, else
            ``_SYSTEMD_UNIT``/``_SYSTEMD_USER_UNIT``.
        invocation: ``_SYSTEMD_INVOCATION_ID`` or ``INVOCATION_ID``, or None.
        systemd: the entry was written by systemd about a unit (PID 1, or the user manager).
    """

    text: str
    cursor: str | None
    realtime_us: int | None
    pid: str | None
    ident: str | None
    unit: str | None
    invocation: str | None
    systemd: bool

    @property
    def stamp(self) -> Stamp | None:
        """The entry's time as a :class:`~probes.logline.Stamp` in UTC."""
        if self.realtime_us is None:
            return None
        dt = datetime.fromtimestamp(self.realtime_us / 1e6, tz=timezone.utc)
        return Stamp(dt.year, dt.month, dt.day, dt.strftime("%H:%M:%S"), "Z")


class RecordError(ValueError):
    """A line that is not a journal JSON record (truncated, not JSON, not an object)."""


def field_text(value: object) -> str | None:
    """Decode one journal JSON field value: str, None, list of byte values, or list of those.

    Returns:
        The text, or None for ``null``.

    Raises:
        RecordError: for a value of none of these shapes.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(b, int) and 0 <= b <= 255 for b in value):
            return bytes(value).decode("utf-8", "replace")
        parts = [field_text(v) for v in value]
        return "\n".join(TOO_LONG if p is None else p for p in parts)
    raise RecordError(f"unexpected journal field value of type {type(value).__name__}")


def _first(value: object) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None or isinstance(value, str):
        return value
    return field_text(value)


def parse_record(line: str | bytes) -> Record:
    """Parse one line of ``journalctl -o json`` output.

    Raises:
        RecordError: when the line is not a complete JSON object (a record cut mid-entry, a
            ``-- cursor:`` line, garbage).
    """
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(f"not a JSON record: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    if not isinstance(obj, dict):
        raise RecordError("not a JSON object")
    text = field_text(obj.get("MESSAGE"))
    if text is None:
        text = TOO_LONG
    rt = _first(obj.get("__REALTIME_TIMESTAMP"))
    try:
        realtime_us = int(rt) if rt is not None else None
    except ValueError:
        realtime_us = None
    pid = _first(obj.get("_PID"))
    ident = _first(obj.get("SYSLOG_IDENTIFIER"))
    transport = _first(obj.get("_TRANSPORT"))
    systemd = (pid == "1" or (ident == "systemd" and transport == "journal")) and \
        bool(obj.get("UNIT") or obj.get("USER_UNIT"))
    if systemd:
        unit = _first(obj.get("UNIT")) or _first(obj.get("USER_UNIT"))
        invocation = _first(obj.get("INVOCATION_ID")) or _first(obj.get("USER_INVOCATION_ID"))
    else:
        unit = _first(obj.get("_SYSTEMD_UNIT")) or _first(obj.get("_SYSTEMD_USER_UNIT"))
        invocation = _first(obj.get("_SYSTEMD_INVOCATION_ID"))
    return Record(text, _first(obj.get("__CURSOR")), realtime_us, pid, ident, unit, invocation, systemd)


def is_journal_json(first_line: str | bytes) -> bool:
    """True when a log's first non-empty line looks like ``journalctl -o json`` output."""
    s = first_line.lstrip()
    if isinstance(s, bytes):
        return s.startswith(b"{") and (b'"__CURSOR"' in s or b'"MESSAGE"' in s or b'"__REALTIME_TIMESTAMP"' in s)
    return s.startswith("{") and ('"__CURSOR"' in s or '"MESSAGE"' in s or '"__REALTIME_TIMESTAMP"' in s)
