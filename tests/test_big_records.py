"""Journal records of any size: read whole up to probes.data.cutline.LINE_CAP (16 MiB of JSON), cut past it
with a visible mark and the cursor kept (issue 13: asyncssh's ``readline`` handed a 3 MB record
over in two pieces, both "[unreadable journal record]", and its cursor was lost).

The end-to-end tests write the records with the real systemd-journal-remote into a real journal
file, read them with the real journalctl over a real sshd (tests/testhost.py), and compare with
journalctl's own JSON of the same file.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import pytest
from test_live_watch import flush, journal_records, texts, watcher
from waiting import until
from testhost import TestHost

from probes.logs.journal_json import CUT_MARK, parse_record
from probes.data.cutline import CUT_TAIL, LINE_CAP, CutLine
from probes.transport.runner import split_batches, split_lines


def reader(data: bytes, chunk_max: int = 7):  # type: ignore[no-untyped-def]
    """``read(n)`` over ``data``, handing out at most ``chunk_max`` bytes a call (so lines straddle
    reads)."""
    pos = 0

    async def read(n: int) -> bytes:
        nonlocal pos
        piece = data[pos:pos + min(n, chunk_max)]
        pos += len(piece)
        return piece
    return read


async def collect(it: AsyncIterator[bytes]) -> list[bytes]:
    return [line async for line in it]


# --- split_lines ---------------------------------------------------------------------------------

async def test_lines_across_reads_come_whole_and_a_last_line_without_newline_too() -> None:
    data = b"one\ntwo and more\n\nthree"
    assert await collect(split_lines(reader(data, 3), cap=64, tail=8, chunk=5)) == \
        [b"one", b"two and more", b"", b"three"]
    assert await collect(split_lines(reader(b"x\n"), cap=64, tail=8)) == [b"x"]
    assert await collect(split_lines(reader(b""), cap=64, tail=8)) == []


async def test_a_line_at_the_cap_is_whole_and_one_past_it_is_cut_with_head_and_tail() -> None:
    at_cap = bytes(range(65, 65 + 26)) * 2 + b"0123456789ab"  # 64 bytes
    long = b"H" * 50 + b"m" * 1000 + b"T" * 8
    lines = await collect(split_lines(reader(at_cap + b"\n" + long + b"\nafter\n", 13), cap=64, tail=8,
                                      chunk=13))
    assert lines[0] == at_cap and not isinstance(lines[0], CutLine)
    cut = lines[1]
    assert isinstance(cut, CutLine)
    assert bytes(cut) == b"H" * 50 + b"m" * 6  # cap - tail bytes of head
    assert cut.tail == b"T" * 8
    assert cut.size == len(long) and cut.dropped == len(long) - 64
    assert lines[2:] == [b"after"]


async def test_each_read_brings_the_lines_it_completed_and_a_line_across_reads_comes_whole() -> None:
    data = b"one\ntwo and more\n\nthree"
    batches = [b async for b in split_batches(reader(data, 5), cap=64, tail=8, chunk=5)]
    # reads: "one\nt", "wo an", "d mor", "e\n\nth", "ree", then the end
    assert batches == [[b"one"], [b"two and more", b""], [b"three"]]


def _shape(line: bytes) -> tuple[bytes, bytes | None, int | None]:
    return bytes(line), getattr(line, "tail", None), getattr(line, "size", None)


async def test_batches_hold_the_same_lines_as_a_plain_split_however_the_reads_fall() -> None:
    # Lines up to the cap and past it (cut), empty ones, reads of 1 byte to more than a line: the
    # one-split path (no line of a read can pass the cap) and the byte-by-byte one agree.
    import random

    rnd = random.Random(17)
    lines = [bytes(rnd.choice(b"ab{}\"") for _ in range(rnd.choice((0, 1, 5, 40, 63, 64, 65, 200))))
             for _ in range(300)]
    data = b"\n".join(lines) + b"\n"
    want = [_shape(line if len(line) <= 64 else CutLine(line[:56], line[-8:], len(line))) for line in lines]
    for chunk_max in (1, 3, 7, 64, 100, 5000):
        got = [_shape(line) async for batch in split_batches(reader(data, chunk_max), cap=64, tail=8,
                                                             chunk=chunk_max) for line in batch]
        assert got == want, chunk_max
        assert [_shape(line) async for line in split_lines(reader(data, chunk_max), cap=64, tail=8,
                                                           chunk=chunk_max)] == want


# --- parse_record of a cut line ------------------------------------------------------------------

RECORD = {"__CURSOR": "s=abc;i=1f", "__REALTIME_TIMESTAMP": "1700000000000000", "_PID": "42",
          "SYSLOG_IDENTIFIER": "sglang", "_SYSTEMD_UNIT": "sglang.service",
          "_SYSTEMD_INVOCATION_ID": "inv1"}


def cut_of(line: bytes, cap: int = 4096, tail: int = 512) -> CutLine:
    head = line[:cap - tail]
    return CutLine(head, line[-tail:], len(line))


@pytest.mark.parametrize("message", [
    "plain text " * 2000,
    'quotes " and backslashes \\ and \\" and \u00e9 ' * 300,
    list(b"\x1b[31mred\x1b[0m\r" * 1000),  # a byte array, as journalctl prints colours
], ids=["plain", "escapes", "byte-array"])
def test_a_cut_record_keeps_its_cursor_time_and_metadata_and_marks_its_message(message: object) -> None:
    obj = {"__CURSOR": RECORD["__CURSOR"], "__REALTIME_TIMESTAMP": RECORD["__REALTIME_TIMESTAMP"],
           "MESSAGE": message, **{k: v for k, v in RECORD.items() if not k.startswith("__")}}
    line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    for cap, tail in ((4096, 512), (4096, 300), (4096, 4000)):
        rec = parse_record(cut_of(line, cap, tail))
        assert rec.cursor == RECORD["__CURSOR"]
        assert rec.realtime_us == 1700000000000000
        assert (rec.pid, rec.ident, rec.unit, rec.invocation) == ("42", "sglang", "sglang.service", "inv1")
        assert rec.text.endswith(CUT_MARK.format(size=len(line), cap=LINE_CAP // 2**20))
        whole = message if isinstance(message, str) else bytes(message).decode()  # type: ignore[arg-type]
        kept = rec.text[:-len(CUT_MARK.format(size=len(line), cap=16)) - 1]
        assert kept and whole.startswith(kept)


def test_a_tail_that_begins_after_the_long_value_leaves_its_fields_out_but_keeps_the_cursor() -> None:
    obj = {**RECORD, "MESSAGE": "x" * 10_000}
    obj["_PID"] = obj.pop("_PID")  # after MESSAGE
    line = json.dumps(obj, separators=(",", ":")).encode()
    rec = parse_record(cut_of(line, 4096, 7))  # the tail is '"42"}' and a bit: no value start
    assert rec.cursor == RECORD["__CURSOR"] and rec.realtime_us == 1700000000000000
    assert rec.pid is None
    assert rec.text.startswith("xxxx") and rec.text.endswith("16 MiB of it]")


def test_a_cut_line_that_is_not_json_is_a_bad_record() -> None:
    from probes.logs.journal_json import RecordError
    with pytest.raises(RecordError):
        parse_record(CutLine(b"garbage" * 10, b"tail", 5000))


# --- end to end: real journal-remote, journalctl and sshd ------------------------------------------

def test_the_cap_is_what_the_docs_say() -> None:
    assert LINE_CAP == 16 * 2**20 and CUT_TAIL == 2**20


async def test_big_records_arrive_whole_or_cut_with_their_cursor_over_ssh(testhost: TestHost) -> None:
    coloured = ("\x1b[32m" + "c" * 50 + "\x1b[0m\r") * 20_000   # ~1.1 MB as bytes, ~3.5 MB as JSON
    plain_3m = "p" * 3_000_000                                  # whole: 3 MB of JSON
    huge = "h" * 20_000_000                                     # 20 MB: cut
    huge_coloured = "\x1b[1m" + "k" * 6_000_000                 # 6 MB as a byte array: ~22 MB, cut
    w = watcher(testhost)
    w.start()
    try:
        await until("the seeded entries", lambda: len(texts(w)) >= 5)
        testhost.append_log_lines([coloured, plain_3m, huge, huge_coloured])
        t0 = time.monotonic()
        await flush(w, testhost)
        took = time.monotonic() - t0
        entries = w.entries_after(0)[5:]
        records = journal_records(testhost)[5:]
        assert [e.cursor for e in entries] == [r["__CURSOR"] for r in records]  # none lost or added
        assert entries[0].text == coloured and entries[1].text == plain_3m
        for entry, size_of in ((entries[2], huge), (entries[3], huge_coloured)):
            assert "[unreadable journal record]" not in entry.text[:40]
            assert entry.text.startswith(size_of[:1000])
            assert entry.text.endswith("upwatch reads 16 MiB of it]")
            assert len(entry.text) < LINE_CAP
        assert entries[2].time == int(records[2]["__REALTIME_TIMESTAMP"]) / 1e6  # type: ignore[call-overload]
        assert not w.state().failures
        print(f"4 big records (~50 MB of JSON) followed in {took:.2f} s")
    finally:
        await w.stop()


async def test_the_local_runner_reads_long_lines_whole_and_cuts_past_the_cap() -> None:
    from probes.transport.local import LocalRunner
    r = LocalRunner()
    script = ("head -c 3000000 /dev/zero | tr '\\0' a; echo; "
              "head -c 20000000 /dev/zero | tr '\\0' b; echo; echo done")
    try:
        lines = [line async for line in r.stream(["sh", "-c", script])]
    finally:
        await r.close()
    assert lines[0] == b"a" * 3_000_000  # asyncio's readline stops at 64 KiB
    assert isinstance(lines[1], CutLine) and lines[1].size == 20_000_000
    assert bytes(lines[1]) == b"b" * (LINE_CAP - CUT_TAIL) and lines[1].tail == b"b" * CUT_TAIL
    assert lines[2:] == [b"done"]
