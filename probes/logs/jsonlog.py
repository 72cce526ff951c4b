"""JSON log records: a program's structured log lines (``{"level": ..., "message": ...}``) unpacked.

TGI's ``--json-output`` (Rust ``tracing-subscriber``), Python's ``python-json-logger``, Go's slog and
log shippers write one JSON object per line; :func:`decode_record` turns one into the message, level
and time the engine's plain format would have shown. The reader rejoins a record a terminal
hard-wrapped over several lines before it gets here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orjson import loads as _json_loads  # a dependency; its JSONDecodeError is a ValueError

from probes.logs.logline import Stamp


@dataclass(frozen=True, slots=True)
class JsonRecord:
    """A JSON log record unpacked: its message (lines joined by ``\\n``), level and time.

    ``text`` is the message as the engine's plain format would print it: a ``target`` (tracing's
    module path, e.g. ``text_generation_launcher``) is put in front (``target: message``), and an
    exception or stack text the record carries apart follows on lines of its own.
    """

    text: str
    level: str | None
    stamp: Stamp | None


_RECORD_MSG = ("message", "msg", "event", "log")
_RECORD_LEVEL = ("level", "levelname", "severity", "lvl", "log.level")
_RECORD_TIME = ("timestamp", "time", "ts", "asctime", "@timestamp", "t")
_RECORD_EXTRA = ("exc_info", "exception", "exc_text", "stack_trace", "error")
_RECORD_TIME_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?")


def decode_record(text: str) -> JsonRecord | None:
    """Unpack one JSON log record, or None when ``text`` is not one.

    A record is a JSON object with a message under ``message``/``msg``/``event``/``log``, at the
    top or under ``fields`` (Rust ``tracing-subscriber``'s JSON format, which TGI's
    ``--json-output`` uses: ``{"timestamp":"2024-06-17T13:18:04.047265Z","level":"INFO",
    "fields":{"message":"Args {"},"target":"text_generation_launcher"}``; Python's
    ``python-json-logger``: ``{"asctime": ..., "levelname": "INFO", "message": ...}``; Go's slog
    and logfmt-to-JSON shippers: ``{"time": ..., "level": ..., "msg": ...}``). Never raises.
    """
    s = text.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return None
    try:
        obj = _json_loads(s)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    fields = obj.get("fields")
    msg = None
    for src in ((fields if isinstance(fields, dict) else None), obj):
        if src is None:
            continue
        for key in _RECORD_MSG:
            v = src.get(key)
            if isinstance(v, str):
                msg = v
                break
        if msg is not None:
            break
    if msg is None:
        return None
    target = obj.get("target")
    if isinstance(target, str) and target and not msg.startswith(target):
        msg = f"{target}: {msg}"
    for key in _RECORD_EXTRA:
        v = obj.get(key)
        if isinstance(v, str) and v and v not in msg:
            msg = f"{msg}\n{v}"
    level = None
    for key in _RECORD_LEVEL:
        v = obj.get(key)
        if isinstance(v, str) and v:
            level = v.upper()[:16]
            break
    stamp = None
    for key in _RECORD_TIME:
        v = obj.get(key)
        if isinstance(v, str):
            m = _RECORD_TIME_RE.match(v)
            if m:
                stamp = Stamp(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5) or "")
                break
    return JsonRecord(msg, level, stamp)
