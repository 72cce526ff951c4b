"""``journalctl`` as a replayed host answers it: option parsing (:func:`parse_journalctl`), where
the output starts (a cursor, ``--since``, ``-n``), following with ``-f``, and each record's output.

What it prints: with
``-o json``, one compact JSON object per line, all values strings except ``MESSAGE`` (a list of
byte values when the text holds a control character other than TAB/LF or invalid UTF-8) and any
value of ``len(name) + 1 + size >= 4096`` bytes, which is ``null`` unless ``-a`` is given (systemd
v240+ ``src/shared/logs-show.c``; observed on systemd 252 in ``tests/fixtures/journal/*.jsonl``);
with ``-o cat``, the messages. ``-n``/``-f``/``--after-cursor`` as journalctl(1) says.

Accepted: ``journalctl [-u UNIT]… [-o json|cat] [-a] [-f] [-n N|-n all] [--after-cursor=C |
--cursor=C | --since=@EPOCH] [--output-fields=A,B] [--show-cursor] [--no-pager] [-q] [-b]
[--merge]`` (a cursor or ``--since`` decides where the output starts; ``-n`` applies only without
them; with ``-f`` and no ``-n`` the backlog is 10 records, without ``-f`` everything).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from probes.transport.replay.command_line import UsageError, unit_name
from probes.transport.replay.host import SimulatedHost
from probes.transport.replay.scenario import EPS_S, JournalEntry
from probes.transport.runner import Completed, ProbeError

#: Fields journalctl prints whatever ``--output-fields`` asks (systemd 252 ``output_json``; v254+
#: also ``__SEQNUM`` and ``__SEQNUM_ID``).
ALWAYS_FIELDS = frozenset({"__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID"})


@dataclass
class JournalOpts:
    """What a ``journalctl`` command line asks for (:func:`parse_journalctl`).

    Attributes:
        units: ``-u`` units, mangled (``sglang.service``); empty: every record.
        output: ``json`` or ``cat``. follow: ``-f``. lines: ``-n`` count, None for all;
        lines_set: whether ``-n``/``--no-tail`` was given at all. after_cursor, cursor: ``--after-cursor``,
        ``--cursor``. since: ``--since=@EPOCH`` in epoch seconds. show_all: ``-a``.
        show_cursor: ``--show-cursor``. output_fields: ``--output-fields``, None for all.
    """

    units: list[str] = field(default_factory=list)
    output: str = "short"
    follow: bool = False
    lines: int | None = None
    lines_set: bool = False
    after_cursor: str | None = None
    cursor: str | None = None
    since: float | None = None
    show_all: bool = False
    show_cursor: bool = False
    output_fields: frozenset[str] | None = None


def run_journalctl(host: SimulatedHost, argv: tuple[str, ...], args: Sequence[str]) -> Completed:
    """``journalctl ARGS`` run to completion on ``host`` (``argv``: the whole command, for the result).

    Returns:
        Exit 0 and the records up to now (plus ``-- cursor: C`` with ``--show-cursor``); exit 1 and
        journalctl's message for options it refuses or a cursor it cannot seek to.

    Raises:
        ProbeError: ``command`` for ``-f``, which never ends (use :func:`stream_journalctl`).
    """
    try:
        opts = parse_journalctl(args)
    except UsageError as exc:
        return Completed(argv, 1, b"", f"{exc}\n".encode())
    if opts.follow:
        raise ProbeError("command", "journalctl -f never ends: use stream()")
    try:
        lines = _backlog(host, opts)
    except UsageError as exc:
        return Completed(argv, 1, b"", f"{exc}\n".encode())
    out = [_render(e, opts) for e in lines]
    if opts.show_cursor and lines:
        out.append(f"-- cursor: {lines[-1].cursor}".encode())
    return Completed(argv, 0, b"".join(line + b"\n" for line in out))


async def stream_journalctl(host: SimulatedHost, args: Sequence[str]) -> AsyncIterator[bytes]:
    """The output lines (bytes, no newline) of ``journalctl ARGS`` on ``host``, each when its time
    comes; with ``-f`` it ends only when the host is closed.

    Raises:
        ProbeError: ``command`` for options journalctl refuses; ``closed`` when an outage begins.
    """
    try:
        opts = parse_journalctl(args)
        entries = _backlog(host, opts, all_after=True)
    except UsageError as exc:
        raise ProbeError("command", f"journalctl exited 1: {exc}") from None
    first = host.cursor_index[entries[0].cursor] if entries else len(host.journal)
    async for line in _follow(host, opts, first):
        yield line


def _backlog(host: SimulatedHost, opts: JournalOpts, all_after: bool = False) -> list[JournalEntry]:
    """The entries of this query from the first one to show: up to now, or (``all_after``) up
    to the end of the scenario, for a follower to pace."""
    t = host.now_s()
    entries = [e for e in host.journal if matches(e.fields, opts.units)]
    cursor = opts.after_cursor if opts.after_cursor is not None else opts.cursor
    if cursor is not None:
        first = _seek_cursor(entries, cursor, inclusive=opts.cursor is not None,
                             seqnum_id=host.scenario.seqnum_id)
        entries = entries[first:]
    elif opts.since is not None:
        since_us = int(opts.since * 1_000_000)
        entries = [e for e in entries if int(e.fields["__REALTIME_TIMESTAMP"]) >= since_us]
    else:
        n = opts.lines
        if n is None and opts.follow and not opts.lines_set:
            n = 10
        if n is not None:
            past = [e for e in entries if e.offset_s <= t + EPS_S]
            keep = past[len(past) - n:] if n > 0 else []
            entries = keep + entries[len(past):]
    if all_after:
        return entries
    return [e for e in entries if e.offset_s <= t + EPS_S]


def _seek_cursor(entries: list[JournalEntry], cursor: str, inclusive: bool, seqnum_id: str) -> int:
    """The index in ``entries`` where output starts for ``cursor`` (at it when ``inclusive``, else
    after it); a cursor of another journal file (``s=`` not ``seqnum_id``) seeks by its time.

    Raises:
        UsageError: a cursor journalctl cannot read.
    """
    parts = dict(p.split("=", 1) for p in cursor.split(";") if "=" in p)
    if "s" not in parts or "i" not in parts or not re.fullmatch(r"[0-9a-fA-F]+", parts["i"]):
        raise UsageError("Failed to seek to cursor: Invalid argument")
    if parts["s"] == seqnum_id:
        seq = int(parts["i"], 16)
        key = [int(e.cursor.split(";i=", 1)[1].split(";", 1)[0], 16) for e in entries]
        return bisect.bisect_left(key, seq) if inclusive else bisect.bisect_right(key, seq)
    # Another journal file: journalctl seeks to the nearest realtime position, silently.
    t_us = int(parts.get("t", "0"), 16) if re.fullmatch(r"[0-9a-fA-F]+", parts.get("t", "")) else 0
    for i, e in enumerate(entries):
        rt = int(e.fields["__REALTIME_TIMESTAMP"])
        if rt > t_us or (inclusive and rt == t_us):
            return i
    return len(entries)


async def _follow(host: SimulatedHost, opts: JournalOpts, first: int) -> AsyncIterator[bytes]:
    """The entries of ``host.journal`` from index ``first`` that match ``opts``, each when its
    time comes. An action only ever changes what lies in the future, so the index stays valid
    when the journal is replaced."""
    i = first
    last: JournalEntry | None = None
    while True:
        if not host.check_open("journalctl"):
            return
        t = host.now_s()
        journal = host.journal
        if i < len(journal) and journal[i].offset_s <= t + EPS_S:
            e = journal[i]
            i += 1
            if matches(e.fields, opts.units):
                last = e
                yield _render(e, opts)
            continue
        if not opts.follow:
            if opts.show_cursor and last is not None:
                yield f"-- cursor: {last.cursor}".encode()
            return
        await host.wait_until(journal[i].offset_s if i < len(journal) else math.inf)


def _render(entry: JournalEntry, opts: JournalOpts) -> bytes:
    """One record as ``opts`` print it (``-o cat``: the message bytes; ``-o json``: one compact
    JSON object), without the newline."""
    fields = entry.fields
    if opts.output == "cat":
        msg = fields.get("MESSAGE")
        if isinstance(msg, list):
            return bytes(msg)
        return b"" if msg is None else str(msg).encode()
    out: dict[str, Any] = {}
    for k, v in fields.items():
        if opts.output_fields is not None and k not in opts.output_fields and k not in ALWAYS_FIELDS:
            continue
        if not opts.show_all and v is not None:
            size = len(v) if isinstance(v, list) else len(str(v).encode())
            if len(k) + 1 + size >= 4096:
                v = None
        out[k] = v
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()


def matches(fields: Mapping[str, Any], units: list[str]) -> bool:
    """Whether a record (``fields``) is shown by ``journalctl -u`` of ``units`` (every record when
    there are none): the unit's own output, PID 1's messages about it, and privileged daemons'
    messages about it (journalctl(1), ``-u``; coredump matches are not modelled)."""
    if not units:
        return True
    for u in units:
        if fields.get("_SYSTEMD_UNIT") == u:
            return True
        if fields.get("_PID") == "1" and fields.get("UNIT") == u:
            return True
        if fields.get("OBJECT_SYSTEMD_UNIT") == u and fields.get("_UID") == "0":
            return True
    return False


def parse_journalctl(args: Sequence[str]) -> JournalOpts:
    """Read a ``journalctl`` command line (without the program name) as the replay accepts it.

    Raises:
        UsageError: an option journalctl refuses (its own message), or one the replay does not
            model (``upwatch replay: …``).
    """
    opts = JournalOpts()
    args = list(args)
    i = 0

    def value(name: str) -> str:
        nonlocal i
        if i + 1 >= len(args):
            raise UsageError(f"journalctl: option '{name}' requires an argument")
        i += 1
        return args[i]

    def set_lines(v: str) -> None:
        opts.lines_set = True
        if v == "all":
            opts.lines = None
        elif v.lstrip("+").isdigit():
            opts.lines = int(v.lstrip("+"))
        else:
            raise UsageError(f'Failed to parse lines \'{v}\'')

    while i < len(args):
        a = args[i]
        if a in ("-u", "--unit"):
            opts.units.append(unit_name(value(a)))
        elif a.startswith("--unit="):
            opts.units.append(unit_name(a.split("=", 1)[1]))
        elif a.startswith("-u") and not a.startswith("--"):
            opts.units.append(unit_name(a[2:]))
        elif a in ("-o", "--output"):
            opts.output = value(a)
        elif a.startswith("--output="):
            opts.output = a.split("=", 1)[1]
        elif a.startswith("-o") and not a.startswith("--"):
            opts.output = a[2:]
        elif a in ("-n", "--lines"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and (nxt == "all" or nxt.lstrip("+").isdigit()):
                set_lines(value(a))
            else:
                opts.lines_set, opts.lines = True, 10
        elif a.startswith("--lines="):
            set_lines(a.split("=", 1)[1])
        elif a.startswith("-n") and not a.startswith("--"):
            set_lines(a[2:])
        elif a == "--no-tail":
            opts.lines_set, opts.lines = True, None
        elif a in ("-f", "--follow"):
            opts.follow = True
        elif a in ("-a", "--all"):
            opts.show_all = True
        elif a == "--after-cursor":
            opts.after_cursor = value(a)
        elif a.startswith("--after-cursor="):
            opts.after_cursor = a.split("=", 1)[1]
        elif a in ("-c", "--cursor"):
            opts.cursor = value(a)
        elif a.startswith("--cursor="):
            opts.cursor = a.split("=", 1)[1]
        elif a in ("-S", "--since") or a.startswith("--since="):
            v = value(a) if "=" not in a else a.split("=", 1)[1]
            if not v.startswith("@"):
                raise UsageError(f"upwatch replay: only --since=@EPOCH is replayed, not {v!r}")
            try:
                opts.since = float(v[1:])
            except ValueError:
                raise UsageError(f'Failed to parse timestamp: {v}') from None
        elif a.startswith("--output-fields="):
            opts.output_fields = frozenset(f for f in a.split("=", 1)[1].split(",") if f)
        elif a == "--output-fields":
            opts.output_fields = frozenset(f for f in value(a).split(",") if f)
        elif a == "--show-cursor":
            opts.show_cursor = True
        elif a in ("--no-pager", "-q", "--quiet", "-b", "--boot", "--merge", "-m", "--no-hostname", "--utc"):
            pass
        elif a.startswith("-") and not a.startswith("--") and len(a) > 2 and set(a[1:]) <= set("faqbm"):
            for ch in a[1:]:
                if ch == "f":
                    opts.follow = True
                elif ch == "a":
                    opts.show_all = True
        elif a.startswith("--"):
            raise UsageError(f"journalctl: unrecognized option '{a}'")
        elif a.startswith("-"):
            raise UsageError(f"journalctl: invalid option -- '{a[1:2]}'")
        else:
            raise UsageError(f"upwatch replay: journal matches such as {a!r} are not replayed")
        i += 1
    if sum(x is not None for x in (opts.since, opts.cursor, opts.after_cursor)) > 1:
        raise UsageError("Please specify only one of --since=, --cursor=, and --after-cursor=.")
    if opts.output not in ("json", "cat"):
        raise UsageError(f"upwatch replay: journalctl -o {opts.output} is not replayed (use json or cat)")
    return opts
