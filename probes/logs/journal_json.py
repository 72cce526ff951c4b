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

Size: a record is one line, read whole up to :data:`probes.data.cutline.LINE_CAP` (16 MiB of JSON: a
plain-text ``MESSAGE`` of up to about 16 MiB, a byte-array one of up to about 4 MiB). A longer line
reaches :func:`parse_record` as a :class:`~probes.data.cutline.CutLine` (its first 15 MiB and last 1 MiB):
the fields before and after the cut are read as usual, so the cursor and the time are kept, and the
value the cut fell in is kept up to the cut; when that is ``MESSAGE`` the text ends with
:data:`CUT_MARK`. No record is lost to its size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple
from datetime import datetime, timedelta, timezone

from probes.logs.logline import Stamp
from probes.data.cutline import LINE_CAP, CutLine

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# The microsecond range a datetime can hold (years 1 to 9999).
_MIN_US = int((datetime(1, 1, 1, tzinfo=timezone.utc) - _EPOCH).total_seconds()) * 1_000_000
_MAX_US = int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc) - _EPOCH).total_seconds()) * 1_000_000

#: Shown in place of a ``MESSAGE`` that journalctl printed as ``null`` (4096 bytes or more without ``-a``).
TOO_LONG = "[message of 4096 bytes or more: journalctl -a shows it]"

#: The journal fields :func:`parse_record` reads, for ``journalctl --output-fields=`` (systemd 236+):
#: every field the reader uses and nothing else (the captured systemd 252 records of a real start,
#: ``tests/fixtures/journal/captured-systemd252.jsonl``, average 29 fields and 1,129 bytes; these
#: 11 fields and 580). ``__CURSOR``, ``__REALTIME_TIMESTAMP``,
#: ``__MONOTONIC_TIMESTAMP`` and ``_BOOT_ID`` come whatever is asked. A test checks that
#: :func:`parse_record` reads no field outside this list.
READ_FIELDS: tuple[str, ...] = (
    "MESSAGE", "_PID", "SYSLOG_IDENTIFIER", "_TRANSPORT", "UNIT", "USER_UNIT", "INVOCATION_ID",
    "USER_INVOCATION_ID", "_SYSTEMD_UNIT", "_SYSTEMD_USER_UNIT", "_SYSTEMD_INVOCATION_ID")

#: Ends a ``MESSAGE`` cut because its record was longer than :data:`probes.data.cutline.LINE_CAP`.
CUT_MARK = "[... cut: the journal record was {size} bytes, upwatch reads {cap} MiB of it]"


class Record(NamedTuple):
    """One journal entry, reduced to what upwatch reads (immutable; a named tuple, not a frozen
    dataclass: made for every journal line, and a frozen dataclass of eight fields costs about
    three times as much to make, 13k instructions against 4k on CPython 3.11).

    Attributes:
        texts: ``MESSAGE`` decoded, one text per occurrence of the field (byte arrays as UTF-8 with
            replacement; :data:`TOO_LONG` for ``null``).
        cursor: ``__CURSOR``, the bookmark to resume after (opaque).
        realtime_us: ``__REALTIME_TIMESTAMP`` in microseconds since the epoch, or None.
        pid: ``_PID`` or None; ident: ``SYSLOG_IDENTIFIER`` or None.
        unit: the unit the entry is about: ``UNIT``/``USER_UNIT`` for systemd's own entries, else
            ``_SYSTEMD_UNIT``/``_SYSTEMD_USER_UNIT``.
        invocation: ``_SYSTEMD_INVOCATION_ID`` or ``INVOCATION_ID``, or None.
        systemd: the entry was written by systemd about a unit (PID 1, or the user manager).
    """

    texts: tuple[str, ...]
    cursor: str | None
    realtime_us: int | None
    pid: str | None
    ident: str | None
    unit: str | None
    invocation: str | None
    systemd: bool

    @property
    def text(self) -> str:
        """All of ``MESSAGE`` as one text (occurrences joined by newlines)."""
        return "\n".join(self.texts)

    @property
    def stamp(self) -> Stamp | None:
        """The entry's time as a :class:`~probes.logs.logline.Stamp` in UTC (None outside years 1-9999)."""
        if self.realtime_us is None or not _MIN_US <= self.realtime_us < _MAX_US:
            return None
        return _stamp_of_second(self.realtime_us // 1_000_000)


@lru_cache(maxsize=64)
def _stamp_of_second(second: int) -> Stamp:
    """The UTC :class:`Stamp` of an epoch second (cached: a flood of lines shares few seconds)."""
    dt = _EPOCH + timedelta(seconds=second)
    return Stamp(dt.year, dt.month, dt.day, dt.strftime("%H:%M:%S"), "Z")


class RecordError(ValueError):
    """A line that is not a journal JSON record (truncated, not JSON, not an object)."""


def field_texts(value: object) -> tuple[str, ...]:
    """Decode one journal JSON field value into its texts (one per occurrence of the field).

    Shapes (systemd ``logs-show.c``, v240+): a string; ``null`` (a value of 4096 bytes or more
    without ``-a``: :data:`TOO_LONG`); a list of byte values (0-255); or, for a field that occurs
    more than once, a list of those.

    Raises:
        RecordError: for any other shape (numbers, objects, lists nested deeper, bytes over 255).
    """
    if isinstance(value, str):
        return (value,)
    if value is None:
        return (TOO_LONG,)
    if isinstance(value, list):
        if value and type(value[0]) is int:
            try:  # one C call checks every item is an int in 0..255
                return (bytes(value).decode("utf-8", "replace"),)
            except (TypeError, ValueError):
                if all(type(b) is int for b in value):
                    raise RecordError("a journal byte array holds a value over 255") from None
                raise RecordError("a journal field list holds something that is not text") from None
        if not value:
            return ("",)
        out = []
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif item is None:
                out.append(TOO_LONG)
            elif isinstance(item, list) and all(type(b) is int for b in item):
                out.append(_bytes_text(item))
            else:
                raise RecordError("a journal field list holds something that is not text")
        return tuple(out)
    raise RecordError(f"unexpected journal field value of type {type(value).__name__}")


def field_text(value: object) -> str | None:
    """One journal field value as a single text: occurrences joined by newlines, None for ``null``.

    Raises:
        RecordError: as :func:`field_texts`.
    """
    if value is None:
        return None
    return "\n".join(field_texts(value))


def _bytes_text(values: list[int]) -> str:
    if not all(0 <= b <= 255 for b in values):
        raise RecordError("a journal byte array holds a value over 255")
    return bytes(values).decode("utf-8", "replace")


def _first(value: object) -> str | None:
    """The first occurrence of a metadata field as text (None when absent or null)."""
    if type(value) is str:  # the common case, by far
        return value
    if isinstance(value, list) and value and not all(type(b) is int for b in value):
        value = value[0]
    if value is None:
        return None
    return field_texts(value)[0]


_loads: Callable[[str | bytes], object]
try:  # orjson parses a journal record 3-4x faster; its errors subclass json.JSONDecodeError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib is the fallback
    _loads = json.loads


def parse_record(line: str | bytes) -> Record:
    """Parse one line of ``journalctl -o json`` output.

    Raises:
        RecordError: when the line is not a complete JSON object (a record cut mid-entry, a
            ``-- cursor:`` line, garbage).
    """
    if isinstance(line, CutLine):
        return _record(_cut_object(line))
    try:
        obj = _loads(line)
    except json.JSONDecodeError as exc:
        raise RecordError(f"not a JSON record: {exc.msg}") from None
    except UnicodeDecodeError:
        raise RecordError("not a JSON record: not UTF-8") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise RecordError(f"not a JSON record: {exc}") from None
    except RecursionError:
        raise RecordError("not a JSON record: nested too deeply") from None
    if not isinstance(obj, dict):
        raise RecordError("not a JSON object")
    return _record(obj)


def _record(obj: dict[str, object]) -> Record:
    """A :class:`Record` from a parsed journal JSON object. Raises RecordError (bad field shapes)."""
    get = obj.get
    message = get("MESSAGE")
    texts = (message,) if type(message) is str else field_texts(message)
    # Each metadata field is a plain string in all but odd records: _first only for the others.
    rt = get("__REALTIME_TIMESTAMP")
    if type(rt) is not str:
        rt = _first(rt)
    try:
        realtime_us = int(rt) if rt is not None else None
    except ValueError:
        realtime_us = None
    if realtime_us is not None and not _MIN_US <= realtime_us < _MAX_US:
        realtime_us = None  # years 1-9999 only: 10**400 µs would overflow every float made of it
    pid = get("_PID")
    if type(pid) is not str:
        pid = _first(pid)
    ident = get("SYSLOG_IDENTIFIER")
    if type(ident) is not str:
        ident = _first(ident)
    transport = get("_TRANSPORT")
    if type(transport) is not str:
        transport = _first(transport)
    systemd = (pid == "1" or (ident == "systemd" and transport == "journal")) and \
        bool(get("UNIT") or get("USER_UNIT"))
    if systemd:
        unit = _first(get("UNIT")) or _first(get("USER_UNIT"))
        invocation = _first(get("INVOCATION_ID")) or _first(get("USER_INVOCATION_ID"))
    else:
        # A user unit's processes also sit in user@UID.service: the user unit is the one meant.
        user_unit = get("_SYSTEMD_USER_UNIT")
        if type(user_unit) is str and user_unit:
            unit = user_unit
        else:  # (no _first call for the plain strings and absent fields of nearly every record)
            unit = _first(user_unit) if user_unit is not None else None
            if not unit:
                system_unit = get("_SYSTEMD_UNIT")
                unit = system_unit if type(system_unit) is str else _first(system_unit)
        inv = get("_SYSTEMD_INVOCATION_ID")
        invocation = inv if type(inv) is str else _first(inv)
    cursor = get("__CURSOR")
    if type(cursor) is not str:
        cursor = _first(cursor)
    return Record(texts, cursor, realtime_us, pid, ident, unit, invocation, systemd)


_DECODER = json.JSONDecoder()
_STRING_END = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)


def _cut_object(line: CutLine) -> dict[str, object]:
    """The fields of a record cut in the middle (see the module docstring), as a JSON object.

    The head is read pair by pair until the value the cut fell in; that value is kept up to the
    cut (a string, or a byte array), ``MESSAGE`` with :data:`CUT_MARK` after it. The tail is read
    from the end of that value: it began inside a value of the same shape (a string ends at the
    first unescaped quote, a byte array at the first ``]``). When the tail cannot be read so, its
    fields are left out (the head holds ``__CURSOR`` and ``__REALTIME_TIMESTAMP``: journalctl
    prints them first).

    Raises:
        RecordError: the head is not the start of a JSON object.
    """
    head = bytes(line).decode("utf-8", "replace")
    obj: dict[str, object] = {}
    i = _skip(head, 0)
    if not head.startswith("{", i):
        raise RecordError("not a JSON record: a cut line that does not start with '{'")
    i += 1
    while True:
        i = _skip(head, i)
        try:
            key, i = json.decoder.scanstring(head, i + 1) if head.startswith('"', i) else (None, i)  # type: ignore[attr-defined]
        except json.JSONDecodeError:
            key = None
        if key is None:
            raise RecordError("not a JSON record: a cut line whose head is not a JSON object")
        i = _skip(head, i)
        if not head.startswith(":", i):
            raise RecordError("not a JSON record: a cut line whose head is not a JSON object")
        i = _skip(head, i + 1)
        if head.startswith("[", i) and head.find("]", i) < 0:
            break  # a byte array the cut fell in (decoding it first only to fail is slow)
        try:
            value, i = _DECODER.raw_decode(head, i)
        except (json.JSONDecodeError, RecursionError, ValueError):
            break  # the cut is in this value
        obj[key] = value
        i = _skip(head, i)
        if head.startswith(",", i):
            i += 1
    partial = head[i:]
    kept = _partial_value(partial)
    if key == "MESSAGE":
        mark = CUT_MARK.format(size=line.size, cap=LINE_CAP // (1024 * 1024))
        obj[key] = (kept + " " if kept else "") + mark
    elif kept is not None:
        obj[key] = kept
    obj.update(_tail_object(line.tail.decode("utf-8", "replace"), partial[:1]))
    return obj


def _skip(text: str, i: int) -> int:
    """The index of the first non-whitespace character at or after ``i``."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _partial_value(partial: str) -> str | None:
    """What can be read of a value cut short: a string's text, a byte array's bytes as text
    (UTF-8 with replacement); None for another shape."""
    if partial.startswith('"'):
        for trim in range(8):  # a cut inside an escape (``\\u00e``) leaves up to 6 characters
            try:
                return json.decoder.scanstring(partial[:len(partial) - trim] + '"', 1)[0]  # type: ignore[attr-defined, no-any-return]
            except json.JSONDecodeError:
                continue
        return None
    if partial.startswith("[") and partial[1:2].strip().isdigit():
        try:  # the last item may be cut: up to the last comma
            values = _loads(partial[:max(partial.rfind(","), 1)] + "]")
            if not isinstance(values, list):  # text from "[" parses to a list or raises
                return None
            return bytes(values).decode("utf-8", "replace")
        except (ValueError, TypeError):  # not a list of 0..255 (JSONDecodeError is a ValueError)
            return None
    return None


def _tail_object(tail: str, shape: str) -> dict[str, object]:
    """The fields after the cut value, read from the line's kept end (see :func:`_cut_object`);
    ``{}`` when they cannot be read."""
    if shape == '"':
        # Start where no escape can be open: six characters without a backslash before it.
        p = 0
        run = 0
        while p < len(tail) and run < 6:
            run = 0 if tail[p] == "\\" else run + 1
            p += 1
        m = _STRING_END.match(tail, p)
        end = m.end() if m else -1
    elif shape == "[":
        end = tail.find("]") + 1 or -1
    else:
        return {}
    if end < 0:
        return {}
    rest = tail[_skip(tail, end):]
    if rest.startswith("}"):
        return {}
    if not rest.startswith(","):
        return {}
    try:
        obj = _loads("{" + rest[1:])
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return {}
    return obj if isinstance(obj, dict) else {}


def is_journal_json(first_line: str | bytes) -> bool:
    """True when a log's first non-empty line looks like ``journalctl -o json`` output."""
    s = first_line.lstrip()
    if isinstance(s, bytes):
        return s.startswith(b"{") and (b'"__CURSOR"' in s or b'"MESSAGE"' in s or b'"__REALTIME_TIMESTAMP"' in s)
    return s.startswith("{") and ('"__CURSOR"' in s or '"MESSAGE"' in s or '"__REALTIME_TIMESTAMP"' in s)
