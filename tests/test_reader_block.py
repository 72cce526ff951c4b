"""The reader's block path (``StartupReader.feed_lines``, probes/logs/blockscan.py): lines fed many
at once read the same as fed one by one (``feed_bytes``), whether the block scan runs or not.

The scan must find every line that may matter (a line it lets through is kept as quiet without a
look); tests/test_reader_checkpoints.py judges it line by line against recorded readings, and
this file feeds whole blocks, where the quiet lines are kept as runs, and checks the scan's answer
against the per-line test itself, line by line, for every matcher.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probes.logs import blockscan, quiet
from probes.logs.engines import ENGINES, matcher_for
from probes.logs.engines.base import SCAN_CHARS
from probes.logs.logline import DATE_OR_CLOCK_RE
from probes.logs.reader import StartupReader
from probes.sources.logfile import iter_lines, read_path

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted([*(FIXTURES / "logs").glob("*.log"), *(FIXTURES / "logs-extra").glob("*.log")])
SGLANG_START = (FIXTURES / "logs" / "sglang-ok-03.log").read_bytes().splitlines()
VLLM_START = (FIXTURES / "logs" / "vllm-ok-01.log").read_bytes().splitlines()
HEALTH = b'[2025-03-08 12:30:01] INFO:     10.0.0.12:24382 - "GET /health HTTP/1.1" 200 OK'
POST = b'[2025-03-08 12:30:02] INFO:     10.0.0.1:54800 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
DECODE = (b"[2025-03-08 12:30:02 TP0] Decode batch. #running-req: 1, #token: 48, token usage: 0.00, "
          b"cuda graph: True, gen throughput (token/s): 1.88, #queue-req: 0")


def _lines(path: Path) -> list[bytes]:
    with path.open("rb") as f:
        return list(iter_lines(f))


def _same_in_blocks(lines: list[bytes], size: int, what: str) -> StartupReader:
    """Feed ``lines`` one by one to one reader and ``size`` at a time to another; the readings must
    be the same after every block (and, ended, at the end). Returns the block-fed reader."""
    one, block = StartupReader(), StartupReader()
    for k in range(0, len(lines), size):
        for raw in lines[k:k + size]:
            one.feed_bytes(raw)
        block.feed_lines(lines[k:k + size])
        assert repr(block.reading()) == repr(one.reading()), f"{what}: block of {size} at line {k + 1}"
    assert repr(block.reading(ended=True)) == repr(one.reading(ended=True)), f"{what}: at the end"
    return block


def test_the_scan_is_installed() -> None:
    # ahocorasick-rs is a dependency (pyproject.toml): without it every test below would only test
    # the per-line path.
    assert blockscan.AVAILABLE


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.stem)
def test_every_fixture_reads_the_same_fed_in_blocks(path: Path) -> None:
    lines = _lines(path)
    for size in (7, 61, len(lines) or 1):
        _same_in_blocks(lines, size, f"{path.name}")


def test_without_the_scan_the_block_path_is_the_one_line_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blockscan, "AVAILABLE", False)
    lines = SGLANG_START + [HEALTH, DECODE, POST] * 40
    reader = _same_in_blocks(lines, 50, "no scan")
    assert reader._quiet.runs == 0  # every quiet line was kept one by one, as feed_bytes keeps it


def test_a_serving_log_is_kept_as_runs_and_reads_the_same() -> None:
    serving = [HEALTH, DECODE, POST, HEALTH] * 300
    reader = StartupReader()
    reader.feed_lines(SGLANG_START + serving[:200])  # after a start, the scan may wait a little
    count, entries = reader._quiet.count, len(reader._quiet.lines)
    reader.feed_lines(serving[200:-5])
    # The serving lines are waiting as a few runs, not one entry per line.
    assert reader._quiet.count == count + len(serving) - 205
    assert len(reader._quiet.lines) <= entries + 4
    _same_in_blocks(SGLANG_START + serving, 500, "serving")


@pytest.mark.parametrize("tail", [
    # Lines the scan must send the long way (each changes what is read or how it is parsed), among
    # quiet ones: a bar, a traceback, an error, a service prefix, a tab, escape codes, a \r frame,
    # text that is not ASCII, an empty line, a line too long for the quiet test, a word that is a
    # cue ("model") next to one that is not ("models").
    [b"Loading safetensors checkpoint shards: 100% 4/4 [00:10<00:00, 2.50s/it]"],
    [b"Traceback (most recent call last):", b'  File "/x/y.py", line 1, in f', b"ValueError: boom"],
    [b"[2025-03-08 12:30:04] ERROR:    Exception in ASGI application"],
    [b"worker-1  | " + HEALTH],
    [b"[2025-03-08 12:30:04] INFO:\tsomething with a tab"],
    [b"\x1b[32mINFO\x1b[0m:     10.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK"],
    [b"[2025-03-08 12:30:04] a frame\r[2025-03-08 12:30:05] another"],
    ["[2025-03-08 12:30:04] INFO: l\u00e4uft \u2026".encode()],
    [b""],
    [b"[2025-03-08 12:30:04] INFO: " + b"x" * SCAN_CHARS],
    [b"[2025-03-08 12:30:04] INFO: loaded model weights", b"[2025-03-08 12:30:04] INFO: GET /v1/models"],
    # Numbers: a date at the start is quiet while the reader's grep -n check lets it through; a
    # growing leading number makes the log numbered (from then on every line's number is cut).
    [b"2025-03-08 12:30:04 " + HEALTH, b"2025-03-08 12:30:05 " + POST, b"2026-01-01 00:00:00 " + HEALTH],
    [b"41:" + HEALTH, b"42:" + POST, b"43:" + DECODE],
    [b"7-" + HEALTH],
])
def test_lines_that_matter_among_quiet_ones_read_the_same(tail: list[bytes]) -> None:
    lines = SGLANG_START + [HEALTH, DECODE] * 5 + tail + [POST, HEALTH] * 5 + tail + [DECODE] * 3
    for size in (1, 3, 17, len(lines)):
        _same_in_blocks(lines, size, repr(tail))
    _same_in_blocks(VLLM_START + lines[len(SGLANG_START):], len(lines), f"vllm {tail!r}")


def _quiet_one_by_one(raw: bytes, matcher: object) -> bool | None:
    """What the one-line path says of a line with ``matcher`` steady: True (quiet), False (it may
    matter), None (quiet but for the number check: a line that begins with a digit, not with a
    date, which the check passes over whether the log is numbered or not: ``QuietLines._quiet_line``'s
    shape, then ``StartupReader._note_number``'s DATE_OR_CLOCK_RE)."""
    text = raw.decode("utf-8", "replace")
    if not text or not text.isascii() or not text.isprintable() or len(text) > SCAN_CHARS:
        return False
    if not quiet.quiet_ascii(text, matcher):  # type: ignore[arg-type]
        return False
    if not text[0].isdigit():
        return True
    dated = text[1:2].isdigit() and text[4:5] == "-" and text[7:8] == "-" and DATE_OR_CLOCK_RE.match(text)
    return True if dated else None


def test_the_scan_finds_every_line_the_one_line_test_finds() -> None:
    # For every matcher and every line of every fixture: a line the per-line test says may matter
    # is one the scan names (a superset); one that begins with a digit and is otherwise quiet is
    # in the scan's "only a digit" set.
    lines = sorted({raw for p in LOGS for raw in _lines(p)})
    matchers = [matcher_for(None), *(matcher_for(e) for e in ENGINES), *(matcher_for(e, committed=False) for e in ENGINES)]
    for matcher in matchers:
        hits, only_digit = blockscan.scan_for(matcher, quiet._CUE_WORDS).may_matter(lines, 0, len(lines))
        named = set(hits)
        assert only_digit <= named
        for k, raw in enumerate(lines):
            said = _quiet_one_by_one(raw, matcher)
            if said is False:
                assert k in named and k not in only_digit, raw
            elif said is None:
                assert k in named, raw
        assert len(named) < len(lines)  # the scan lets some lines through


def test_replay_reads_a_file_in_blocks_as_line_by_line(tmp_path: Path) -> None:
    log = tmp_path / "serving.log"
    lines = SGLANG_START + [HEALTH, DECODE, POST, b"2025-03-08 12:30:04 " + HEALTH] * 3000
    log.write_bytes(b"\n".join(lines) + b"\n")
    one = StartupReader()
    for raw in lines:
        one.feed_bytes(raw)
    assert repr(read_path(str(log))) == repr(one.reading(ended=True))


def test_date_led_lines_are_quiet_in_the_scan_without_the_number_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # "2025-02-04 21:29:21 [2025-02-04 05:29:21] INFO: ..." (a log with the journal's short-iso
    # time before SGLang's own): its first number is a year, never grep -n evidence, so the scan
    # keeps a run of such lines quiet with no Python per line, and the reading is the one-line way's.
    dated = [b"2025-02-04 21:29:%02d " % (k % 60) + line for k, line in enumerate([HEALTH, DECODE, POST] * 100)]
    lines = SGLANG_START + [HEALTH, DECODE, POST] * 30 + dated
    one = StartupReader()
    for raw in lines:
        one.feed_bytes(raw)
    block = StartupReader()
    block.feed_lines(lines[:len(lines) - len(dated)])
    checked: list[str] = []
    real = StartupReader._note_number

    def note_number(self: StartupReader, text: str) -> bool:
        checked.append(text)
        return real(self, text)
    monkeypatch.setattr(StartupReader, "_note_number", note_number)
    block.feed_lines(lines[len(lines) - len(dated):])
    assert checked == []  # no date-led line went through the number check
    assert repr(block.reading(ended=True)) == repr(one.reading(ended=True))
    # A line that begins with a digit but not with a date still gets the check, as one by one.
    block.feed_lines([b"41:" + HEALTH, b"42:" + POST])
    assert checked and block._numbered


class _Counting:
    """An automaton's stand-in that counts the bytes it is asked to scan."""

    def __init__(self, real: object) -> None:
        self.real, self.scanned = real, 0

    def find_matches_as_indexes(self, data: bytes) -> list[tuple[int, int, int]]:
        self.scanned += len(data)
        return self.real.find_matches_as_indexes(data)  # type: ignore[attr-defined, no-any-return]


def test_the_scan_judges_each_template_once() -> None:
    # Lines that differ only in their digits (times, ports, counts) are one template: the automata
    # scan it once; later blocks of the same templates are classes looked up, and say the same.
    scan = blockscan.BlockScan(matcher_for("sglang"), quiet._CUE_WORDS)
    texts, words = _Counting(scan._texts), _Counting(scan._words)
    scan._texts, scan._words = texts, words  # type: ignore[assignment]
    first = [HEALTH, DECODE, POST, b"41:" + HEALTH, b"[2025-03-08 12:30:04] Traceback (most recent call last):"]
    hits, numbers = scan.may_matter(first * 20, 0, 100)
    assert hits == [k for k in range(100) if k % 5 in (3, 4)] and numbers == set(range(3, 100, 5))
    seen = texts.scanned, words.scanned
    assert 0 < seen[0] < sum(map(len, first)) + 10  # each template once, not each line
    later = [raw.replace(b"2025-03-08 12:30", b"2026-11-17 09:45").replace(b"10.0.0.12:24382", b"10.0.0.98:61234")
             .replace(b"41:", b"97:") for raw in first]
    assert scan.may_matter(later * 40, 0, 200) == ([k for k in range(200) if k % 5 in (3, 4)],
                                                   set(range(3, 200, 5)))
    assert (texts.scanned, words.scanned) == seen


class _CountingClasses(dict[bytes, int]):
    """The scan's classes, counting the look-ups."""

    looks = 0

    def get(self, key: bytes, default: int | None = None) -> int | None:  # type: ignore[override]
        self.looks += 1
        return super().get(key, default)


def test_a_window_of_quiet_templates_costs_no_look_a_line() -> None:
    # A serving log's window holds a few templates, all quiet: the scan looks each one up once and
    # names no line, without a look for each of the 1,000 lines; one line that matters among them
    # is named, at its place.
    scan = blockscan.BlockScan(matcher_for("sglang"), quiet._CUE_WORDS)
    scan._classes = classes = _CountingClasses()
    serving = [HEALTH, DECODE, POST, b"2025-03-08 12:30:04 " + HEALTH] * 250
    assert scan.may_matter(serving, 0, len(serving)) == ([], set())
    assert classes.looks <= 4
    loud = serving[:500] + [b"[2025-03-08 12:30:04] ERROR:    Exception in ASGI application"] + serving[500:]
    assert scan.may_matter(loud, 0, len(loud)) == ([500], set())


def test_reading_a_serving_log_does_not_fault_the_heap_in_again_every_block(tmp_path: Path) -> None:
    # The block scan copies each block twice; with 256 KiB blocks the heap grew past glibc's trim
    # threshold and was given back after every block, then faulted in again: 6,000 page faults
    # for these 10 MB (a third of the CPU time of a serving log's replay). A fresh interpreter,
    # so that the heap is the command's own.
    log = tmp_path / "serving.log"
    log.write_bytes(b"\n".join(SGLANG_START + [HEALTH, DECODE, POST, b"2025-03-08 12:30:04 " + HEALTH] * 25000) + b"\n")
    code = ("import resource, sys\nfrom probes.sources.logfile import read_path\n"
            "read_path(sys.argv[1])  # the imports, the matchers and the scan built\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "read_path(sys.argv[1])\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)")
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 1000  # 4 MB at most, of 10 MB read


def test_scans_that_keep_few_lines_quiet_wait_longer_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A scan that keeps fewer than half its lines quiet is followed by 64, then 128 ... 4096 lines
    # read the one-line way: where most lines matter, few are scanned (the back-off used to be
    # reset before the scan after a deferral was judged, so it was 64 every time: 44 % scanned).
    scanned: list[int] = []
    real = blockscan.BlockScan.may_matter

    def counted(self: blockscan.BlockScan, lines: list[bytes], start: int, stop: int) -> tuple[list[int], set[int]]:
        scanned.append(stop - start)
        return real(self, lines, start, stop)
    monkeypatch.setattr(blockscan.BlockScan, "may_matter", counted)
    cue = b"[2025-03-08 12:30:02] INFO:     paid $5 for it"  # a cue: read the long way, changes nothing
    lines = SGLANG_START + [HEALTH, cue, cue, cue] * 5000
    reader = StartupReader()
    for k in range(0, len(lines), 2000):
        reader.feed_lines(lines[k:k + 2000])
    assert 0 < sum(scanned) < len(lines) // 10
    one_by_one = StartupReader()
    for raw in lines:
        one_by_one.feed_bytes(raw)
    assert reader.reading(ended=True) == one_by_one.reading(ended=True)
