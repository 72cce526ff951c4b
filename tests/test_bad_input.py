"""Bad input: it never crashes the reader and never loses data.

Every kind of bad input gets a reading, or (for input that is not a log at all) exit status 2 with
one line on stderr that says why; never a traceback. Each test here names the bad input it feeds and
asserts what a correct reader gives for it. The CLI is run as an operator runs it, as a subprocess.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import re
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.data.vocab import CAUSES, PHASES
from probes.logs.journal_json import TOO_LONG, RecordError, parse_record
from probes.sources.logfile import LogReadError, read_path, read_stream
from probes.logs.logline import MAX_LINE_CHARS
from probes.data.reading import Reading
from probes.logs.reader import StartupReader

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOGS = FIXTURES / "logs"
JOURNAL = FIXTURES / "journal"
RESTART_LOOP = JOURNAL / "vllm-restart-loop.jsonl"
OOM_LOG = LOGS / "vllm-fail-oom-01.log"

STATES = {"loading", "ready", "failed", "stopped"}
#: C0 and C1 control characters (Unicode category Cc), ESC and BEL among them.
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: The marker :func:`probes.logs.logline.frames` ends a cut line with: `` …[cut N chars]``.
CUT_MARKER_RE = re.compile(r" …\[cut \d+ chars\]$")

MODEST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- helpers ---------------------------------------------------------------------------------------


def replay(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``upwatch replay ARGS`` as a subprocess, from the repository root."""
    return subprocess.run([sys.executable, "-m", "tui", "replay", *args], input=stdin,
                          capture_output=True, cwd=ROOT, timeout=timeout)


def assert_read(proc: subprocess.CompletedProcess) -> None:
    """The CLI read the log: exit 0, nothing on stderr."""
    stderr = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert stderr == ""


def assert_refused(proc: subprocess.CompletedProcess, *words: str) -> str:
    """The CLI refused the input: exit 2, one line on stderr naming the reason, no traceback."""
    stderr = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 2, stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, repr(stderr)
    assert stderr.startswith("upwatch replay: "), stderr
    for word in words:
        assert word in stderr, stderr
    assert proc.stdout == b""
    return stderr


def json_reading(proc: subprocess.CompletedProcess) -> dict:
    """The ``--json`` output, parsed strictly (``NaN``/``Infinity`` are not JSON)."""
    def no_constants(name: str) -> None:
        raise ValueError(f"not JSON: {name}")
    return json.loads(proc.stdout, parse_constant=no_constants)


def texts(reading: Reading) -> list[str]:
    """Every piece of log text a reading shows an operator."""
    out = [reading.last_line, reading.hint]
    out += [m.text for m in reading.phases]
    if reading.error is not None:
        out += [reading.error.text, reading.error.hint]
    return out


def assert_clean_texts(reading: Reading) -> None:
    for text in texts(reading):
        assert CONTROL_RE.search(text) is None, repr(text)


def assert_sane(reading: Reading, lines: int | None = None) -> None:
    """What holds for every reading, whatever was fed."""
    assert isinstance(reading, Reading)
    assert reading.state in STATES
    assert reading.phase in PHASES
    assert reading.starts >= 0
    if lines is not None:
        assert reading.lines == lines
    assert 0 <= reading.bad_lines <= reading.lines
    if reading.error is not None:
        assert 1 <= reading.error.line <= reading.lines, (reading.error, reading.lines)
        assert reading.error.cause in CAUSES
    if reading.cause is not None:
        assert reading.state == "failed" and reading.cause in CAUSES
    for mark in reading.phases:
        assert mark.phase in PHASES
        assert 1 <= mark.line <= reading.lines
    if reading.state == "failed":
        assert reading.starts >= 1
    assert len(reading.last_line) <= MAX_LINE_CHARS + 64
    json.dumps(reading.to_json(), allow_nan=False)


def read_bytes(data: bytes) -> Reading:
    return read_stream(io.BytesIO(data))


def journal_lines() -> list[bytes]:
    """The restart-loop journal export, one record a line (three OOM starts; systemd gives up)."""
    data = RESTART_LOOP.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def record(message: object, **fields: object) -> bytes:
    """One ``journalctl -o json`` line from a python3 process of a unit, with ``MESSAGE`` as given."""
    rec = {"__CURSOR": "s=0;i=1", "__REALTIME_TIMESTAMP": "1730776901000000", "_PID": "4242",
           "SYSLOG_IDENTIFIER": "python3", "_SYSTEMD_UNIT": "vllm.service", "_TRANSPORT": "stdout",
           "MESSAGE": message}
    rec.update(fields)
    return json.dumps(rec).encode()


def journal(*records: bytes) -> bytes:
    return b"".join(r + b"\n" for r in records)


#: A journal record that begins a start and proves the engine (a vLLM worker line).
VLLM_FIRST = record("INFO 11-05 03:21:41 model_runner.py:1025] Loading model weights took 10.0714 GB")
OOM_TEXT = ("ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] Exception in worker: "
            "CUDA out of memory. Tried to allocate 1.95 GiB.")


# --- empty input ------------------------------------------------------------------------------------


def test_empty_file_reads_as_a_start_not_yet_begun(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    reading = read_path(str(path))
    assert (reading.state, reading.phase, reading.starts, reading.error) == ("loading", "starting", 0, None)
    assert (reading.lines, reading.bad_lines, reading.phases, reading.cause) == (0, 0, (), None)

    proc = replay(str(path), "--json")
    assert_read(proc)
    out = json_reading(proc)
    # --json agrees with the text form's "NO SERVER START FOUND" (tui.replay.NO_START)
    assert (out["state"], out["phase"], out["starts"], out["error"]) == ("none", None, 0, None)


def test_file_of_blank_lines_reads_as_a_start_not_yet_begun(tmp_path: Path) -> None:
    path = tmp_path / "blank.log"
    path.write_bytes(b"\n \n\r\n\t\n")
    reading = read_path(str(path))
    assert (reading.state, reading.phase, reading.starts, reading.error) == ("loading", "starting", 0, None)
    assert reading.lines == 4
    assert_read(replay(str(path)))


# --- binary files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [
    pytest.param(gzip.compress(OOM_LOG.read_bytes(), mtime=0), id="gzipped-log"),
    pytest.param(b"SQLite format 3\x00" + bytes(range(256)) * 16, id="sqlite-database"),
    pytest.param(b"\x93NUMPY\x01\x00v\x00{'descr': '<f4'}" + bytes(4096), id="numpy-array"),
])
def test_binary_file_with_nul_bytes_is_refused_in_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "not-a-log"
    path.write_bytes(content)
    with pytest.raises(LogReadError, match="binary"):
        read_path(str(path))
    assert_refused(replay(str(path)), str(path), "binary")
    assert_refused(replay(str(path), "--json"), "binary")


def test_executable_is_refused_as_binary(tmp_path: Path) -> None:
    exe = Path("/bin/true") if Path("/bin/true").is_file() else Path(sys.executable).resolve()
    path = tmp_path / "true"
    shutil.copyfile(exe, path)
    assert_refused(replay(str(path)), "binary")


def test_binary_journal_file_on_stdin_is_refused_in_one_line() -> None:
    proc = replay("-", stdin=b"LPKSHHRH" + bytes(range(256)) * 8)
    assert_refused(proc, "standard input", "journal")


@pytest.mark.parametrize("hole", [100_000, 5_000_000], ids=["100KB-hole", "5MB-hole"])
def test_log_whose_start_was_zeroed_by_copytruncate_is_read(tmp_path: Path, hole: int) -> None:
    """``logrotate copytruncate`` under ``nohup vllm serve > vllm.log`` leaves a hole of NUL bytes as
    long as the old content (megabytes); the server keeps writing after it, so the first line after
    the hole is glued to the NULs. The log after the hole is a real log, first line included."""
    path = tmp_path / "vllm.log"
    path.write_bytes(b"\x00" * hole + OOM_LOG.read_bytes())
    reading = read_path(str(path))
    assert reading == read_bytes(OOM_LOG.read_bytes())
    proc = replay(str(path), "--json")
    assert_read(proc)
    out = json_reading(proc)
    assert (out["engine"], out["state"], out["cause"]) == ("vllm", "failed", "cuda_oom")
    assert out["phases"][0]["line"] == 1


# --- one enormous line ----------------------------------------------------------------------------------


@pytest.mark.parametrize("newline", [False, True], ids=["no-newline", "newline"])
def test_20mb_single_line_is_read_in_bounded_memory(tmp_path: Path, newline: bool) -> None:
    path = tmp_path / "huge.log"
    path.write_bytes(b"x" * 20_000_000 + (b"\n" if newline else b""))
    tracemalloc.start()
    try:
        reading = read_path(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes for a 20 MB line"
    assert reading.lines == 1
    assert (reading.state, reading.error) == ("loading", None)
    assert reading.starts == 1
    # The line kept is cut and says so.
    assert len(reading.last_line) <= MAX_LINE_CHARS + 64
    assert reading.last_line.startswith("x" * MAX_LINE_CHARS)
    assert CUT_MARKER_RE.search(reading.last_line), reading.last_line[-80:]
    assert_read(replay(str(path)))


def test_line_after_a_20mb_line_is_still_read(tmp_path: Path) -> None:
    """The rest of a cut line is skipped, not the lines after it."""
    oom = OOM_LOG.read_bytes()
    path = tmp_path / "huge-then-log.log"
    path.write_bytes(b"y" * 20_000_000 + b"\n" + oom)
    reading = read_path(str(path))
    clean = read_bytes(oom)
    assert (reading.engine, reading.state, reading.cause) == ("vllm", "failed", "cuda_oom")
    assert reading.lines == clean.lines + 1
    assert reading.error is not None and clean.error is not None
    assert reading.error.line == clean.error.line + 1
    assert reading.error.text == clean.error.text


def test_long_line_of_tqdm_frames_keeps_its_last_frame(tmp_path: Path) -> None:
    """tqdm writes ``\\r`` frames and no newline: a five-minute download at 10 frames a second is one
    physical line of ~400 KB. The progress is the last frame's (fixture README, rule 5), not one from
    the first minute."""
    def frame(i: int, n: int) -> str:
        pct = 100 * i // n
        return (f"model-00001-of-00002.safetensors: {pct:3d}%|{('█' * (pct // 10)).ljust(10)}| "
                f"{4.97 * i / n:.2f}G/4.97G [00:{i % 60:02d}<00:10, 61.2MB/s]")

    n = 4000
    path = tmp_path / "download.log"
    path.write_bytes("\r".join(frame(i, n) for i in range(n + 1)).encode() + b"\n")
    assert path.stat().st_size > 300_000
    reading = read_path(str(path))
    assert reading.progress is not None
    assert (reading.progress.done, reading.progress.total) == (4.97e9, 4.97e9), reading.progress
    assert reading.last_line == frame(n, n)


@pytest.mark.parametrize("line", [
    pytest.param("/s] " + "1" * 70_000, id="digits-in-a-bar-line"),
    pytest.param("/s] " + " " * 70_000 + "x", id="spaces-in-a-bar-line"),
    pytest.param("NCCL WARN " * 7_000, id="nccl-warn-repeated"),
])
def test_pathological_64k_line_is_read_in_bounded_time(tmp_path: Path, line: str) -> None:
    """A 64 KiB line (the most the reader keeps) costs milliseconds whatever it holds; a regex that
    backtracks quadratically over it turns one line into minutes and hangs ``upwatch``. The 60 s limit
    is a hang detector, not a speed check (this takes well under a second)."""
    path = tmp_path / "pathological.log"
    path.write_text(line + "\n")
    try:
        proc = replay(str(path), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"upwatch replay hung (over 60 s) on one {len(line)}-char line {line[:20]!r}...")
    assert_read(proc)


# --- invalid UTF-8 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("junk", [b"\xff\xfe", b"\xe2\x96", b"\xc0\x80", b"\xed\xa0\x80"],
                         ids=["ff-fe", "cut-multibyte", "overlong-nul", "utf8-surrogate"])
def test_invalid_utf8_inside_the_failure_line_keeps_the_failure(tmp_path: Path, junk: bytes) -> None:
    lines = OOM_LOG.read_bytes().split(b"\n")
    target = lines[4]  # line 5: the decisive OOM line
    anchor = b"Exception in worker"
    assert anchor in target
    lines[4] = target.replace(anchor, anchor[:9] + junk + anchor[9:], 1)
    path = tmp_path / "oom-bad-utf8.log"
    path.write_bytes(b"\n".join(lines))
    reading = read_path(str(path))
    assert (reading.engine, reading.state, reading.cause, reading.starts) == ("vllm", "failed", "cuda_oom", 1)
    assert reading.error is not None and reading.error.line == 5
    assert "\ufffd" in reading.error.text
    assert "CUDA out of memory. Tried to allocate 1.95 GiB" in reading.error.text
    assert_clean_texts(reading)
    assert_read(replay(str(path)))


def test_invalid_utf8_on_every_line_changes_nothing_but_the_text() -> None:
    clean = read_bytes(OOM_LOG.read_bytes())
    dirty = read_bytes(b"\n".join(ln + b" \xff" if ln else ln for ln in OOM_LOG.read_bytes().split(b"\n")))
    assert (dirty.engine, dirty.state, dirty.phase, dirty.phases_seen, dirty.cause, dirty.starts) == \
        (clean.engine, clean.state, clean.phase, clean.phases_seen, clean.cause, clean.starts)
    assert dirty.error is not None and clean.error is not None
    assert dirty.error.line == clean.error.line
    assert dirty.error.text == clean.error.text + " \ufffd"


# --- truncated journal records -------------------------------------------------------------------------


def test_journal_intact_restart_loop_reference() -> None:
    reading = read_bytes(RESTART_LOOP.read_bytes())
    assert (reading.engine, reading.state, reading.cause, reading.starts) == ("vllm", "failed", "cuda_oom", 3)
    assert (reading.lines, reading.bad_lines) == (42, 0)


def test_journal_last_record_cut_in_half_counts_as_one_bad_line() -> None:
    lines = journal_lines()
    intact = read_bytes(RESTART_LOOP.read_bytes())
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    for data in (b"\n".join(lines), b"\n".join(lines) + b"\n"):  # cut file, or cut then newline
        reading = read_bytes(data)
        assert (reading.engine, reading.state, reading.cause, reading.starts) == ("vllm", "failed", "cuda_oom", 3)
        assert (reading.lines, reading.bad_lines) == (42, 1)
        assert dataclasses.replace(reading, bad_lines=0) == intact


def test_journal_middle_record_cut_counts_as_one_bad_line() -> None:
    lines = journal_lines()
    intact = read_bytes(RESTART_LOOP.read_bytes())
    lines[9] = lines[9][:300]  # "vllm.service: Consumed 1min 12.513s CPU time." of the first start
    reading = read_bytes(b"\n".join(lines) + b"\n")
    assert (reading.engine, reading.state, reading.cause, reading.starts) == ("vllm", "failed", "cuda_oom", 3)
    assert (reading.lines, reading.bad_lines) == (42, 1)
    assert dataclasses.replace(reading, bad_lines=0) == intact


def test_journal_several_cut_records_are_each_counted() -> None:
    lines = journal_lines()
    for i in (4, 9, 22, 41):
        lines[i] = lines[i][: len(lines[i]) // 3]
    reading = read_bytes(b"\n".join(lines) + b"\n")
    assert (reading.engine, reading.state, reading.cause, reading.starts) == ("vllm", "failed", "cuda_oom", 3)
    assert (reading.lines, reading.bad_lines) == (42, 4)


def test_journal_record_not_json_at_all_counts_as_bad() -> None:
    lines = journal_lines()
    lines[9] = b"this is not json"
    lines[22] = b"[1, 2, 3]"
    reading = read_bytes(b"\n".join(lines) + b"\n")
    assert (reading.state, reading.cause, reading.starts, reading.bad_lines) == ("failed", "cuda_oom", 3, 2)


@pytest.mark.parametrize("index, fraction", [(0, 0.5), (0, 0.99), (5, 0.01), (5, 0.5), (31, 0.01), (31, 0.5),
                                             (31, 0.99), (41, 0.01), (41, 0.5), (41, 0.99)])
def test_journal_export_cut_at_a_byte_offset_inside_a_record(index: int, fraction: float) -> None:
    """``head -c N``: the records before the cut read as they would alone; the cut one is bad."""
    data = RESTART_LOOP.read_bytes()
    lines = journal_lines()
    start = sum(len(ln) + 1 for ln in lines[:index])
    offset = start + max(1, int(len(lines[index]) * fraction))
    assert offset < start + len(lines[index])
    reading = read_bytes(data[:offset])
    before = read_bytes(data[:start])
    assert (reading.lines, reading.bad_lines) == (index + 1, 1)
    assert dataclasses.replace(reading, lines=index, bad_lines=0) == before
    assert_sane(reading, index + 1)


@pytest.mark.parametrize("offset", [300, 30_000])
def test_journal_export_that_begins_inside_a_record_is_read_as_journal(offset: int) -> None:
    """``tail -c N`` (or a copy that began mid-write): the first line is the tail of a record. The
    rest is still ``journalctl -o json`` output and must be read as such, not as plain text."""
    data = RESTART_LOOP.read_bytes()
    assert data[offset - 1:offset] != b"\n"
    reading = read_bytes(data[offset:])
    assert reading.bad_lines == 1
    assert (reading.engine, reading.state, reading.cause) == ("vllm", "failed", "cuda_oom")
    assert not reading.last_line.startswith("{"), reading.last_line[:80]


def test_journal_export_with_a_leading_blank_line_is_read_as_journal() -> None:
    reading = read_bytes(b"\n" + RESTART_LOOP.read_bytes())
    assert (reading.engine, reading.state, reading.cause, reading.starts) == ("vllm", "failed", "cuda_oom", 3)
    assert reading.bad_lines == 0


def test_show_cursor_trailing_line_is_not_bad() -> None:
    path = JOURNAL / "sglang-startup.after-cursor-line10.show-cursor.txt"
    data = path.read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
    assert last.startswith(b"-- cursor: s=")
    reading = read_path(str(path))
    assert reading.bad_lines == 0
    assert reading.lines == data.count(b"\n")
    without = read_bytes(data[: data.rindex(b"-- cursor:")])
    assert dataclasses.replace(reading, lines=without.lines) == without
    assert_read(replay(str(path)))


def test_journalctl_no_entries_note_is_not_bad() -> None:
    reading = read_bytes(journal(VLLM_FIRST) + b"-- No entries --\n")
    assert (reading.lines, reading.bad_lines) == (2, 0)


# --- journal MESSAGE shapes -----------------------------------------------------------------------------


def test_journal_message_null_is_read_as_the_too_long_marker() -> None:
    reading = read_bytes(journal(VLLM_FIRST, record(None)))
    assert (reading.lines, reading.bad_lines, reading.engine) == (2, 0, "vllm")
    assert reading.last_line == TOO_LONG
    assert reading.state == "loading"


def test_journal_message_byte_array_with_invalid_utf8_finds_the_failure() -> None:
    raw = OOM_TEXT.encode().replace(b"Exception in", b"Exception \xff\xfe in")
    assert b"\xff" in raw
    reading = read_bytes(journal(VLLM_FIRST, record(list(raw))))
    assert (reading.state, reading.cause, reading.bad_lines) == ("failed", "cuda_oom", 0)
    assert reading.error is not None and reading.error.line == 2
    assert "\ufffd" in reading.error.text and "CUDA out of memory" in reading.error.text


def test_journal_message_byte_array_with_colours_and_cr_is_cleaned() -> None:
    raw = b"\x1b[1;36m(VllmWorkerProcess pid=67)\x1b[0;0m " + OOM_TEXT.encode() + b"\r"
    reading = read_bytes(journal(VLLM_FIRST, record(list(raw))))
    assert (reading.state, reading.cause) == ("failed", "cuda_oom")
    assert reading.error is not None
    assert reading.error.text == "(VllmWorkerProcess pid=67) " + OOM_TEXT
    assert_clean_texts(reading)


def test_journal_message_list_of_strings_is_read_line_by_line() -> None:
    """A field repeated in one entry comes out as a list; each value is a line of its own: the
    exception in the last value is found, and no text shown holds a newline."""
    msg = ["Traceback (most recent call last):", '  File "/app/x.py", line 3, in <module>',
           "KeyError: 'BLOCK_SIZE_M'"]
    reading = read_bytes(journal(VLLM_FIRST, record(msg)))
    assert reading.bad_lines == 0
    assert reading.state == "failed"
    assert reading.error is not None and reading.error.text == "KeyError: 'BLOCK_SIZE_M'"
    assert_clean_texts(reading)


def test_journal_message_list_of_strings_shows_no_newline() -> None:
    reading = read_bytes(journal(VLLM_FIRST, record(["loading...", "torch.OutOfMemoryError: CUDA out of memory."])))
    assert (reading.state, reading.cause, reading.bad_lines) == ("failed", "cuda_oom", 0)
    assert_clean_texts(reading)


def test_journal_message_list_of_byte_arrays_is_read() -> None:
    reading = read_bytes(journal(VLLM_FIRST, record([list(b"first \xff"), list(OOM_TEXT.encode())])))
    assert (reading.state, reading.cause, reading.bad_lines) == ("failed", "cuda_oom", 0)


@pytest.mark.parametrize("message", [12345, 1.5, True, {"a": 1}, [1000], [72, "x"], [{"a": 1}]],
                         ids=["int", "float", "bool", "object", "byte-out-of-range", "mixed-list", "list-of-objects"])
def test_journal_message_of_garbage_type_counts_as_bad(message: object) -> None:
    reading = read_bytes(journal(VLLM_FIRST, record(message), record(OOM_TEXT)))
    assert (reading.lines, reading.bad_lines) == (3, 1)
    assert (reading.engine, reading.state, reading.cause) == ("vllm", "failed", "cuda_oom")
    assert reading.error is not None and reading.error.line == 3


def test_journal_message_of_garbage_type_via_cli() -> None:
    proc = replay("-", "--json", stdin=journal(VLLM_FIRST, record(12345), record(OOM_TEXT)))
    assert_read(proc)
    assert json_reading(proc)["cause"] == "cuda_oom"


@pytest.mark.parametrize("realtime", ["99999999999999999999", "253402300800000000", "-99999999999999999999",
                                      "67769000000000000000000", "1" + "0" * 30],
                         ids=["year-3170843", "year-10000", "before-year-1", "eoverflow", "past-time_t"])
def test_journal_realtime_timestamp_out_of_range_does_not_crash(realtime: str) -> None:
    reading = read_bytes(journal(VLLM_FIRST, record(OOM_TEXT, __REALTIME_TIMESTAMP=realtime)))
    assert (reading.state, reading.cause) == ("failed", "cuda_oom")
    assert reading.lines == 2


def test_journal_realtime_timestamp_out_of_range_via_cli() -> None:
    proc = replay("-", stdin=journal(VLLM_FIRST, record(OOM_TEXT, __REALTIME_TIMESTAMP="253402300800000000")))
    assert_read(proc)


@pytest.mark.parametrize("realtime", ["", "abc", "1.5e15", None, ["1730776901000000"]],
                         ids=["empty", "letters", "float-text", "null", "list"])
def test_journal_realtime_timestamp_garbage_is_ignored_or_bad(realtime: object) -> None:
    reading = read_bytes(journal(VLLM_FIRST, record(OOM_TEXT, __REALTIME_TIMESTAMP=realtime)))
    assert_sane(reading, 2)
    assert (reading.state, reading.cause) == ("failed", "cuda_oom")


def test_journal_deeply_nested_field_counts_as_bad() -> None:
    nested = b'{"__CURSOR":"s=1","MESSAGE":"x","X":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    reading = read_bytes(journal(VLLM_FIRST, nested, record(OOM_TEXT)))
    assert (reading.lines, reading.bad_lines) == (3, 1)
    assert (reading.state, reading.cause) == ("failed", "cuda_oom")


def test_journal_deeply_nested_message_list_does_not_crash() -> None:
    nested = b'{"__CURSOR":"s=1","MESSAGE":' + b"[" * 900 + b"]" * 900 + b"}"
    with pytest.raises(RecordError):
        parse_record(nested)
    reading = read_bytes(journal(VLLM_FIRST, nested, record(OOM_TEXT)))
    assert (reading.lines, reading.bad_lines) == (3, 1)
    assert (reading.state, reading.cause) == ("failed", "cuda_oom")


def test_journal_integer_too_long_to_convert_counts_as_bad() -> None:
    huge = b'{"__CURSOR":"s=1","MESSAGE":"x","__REALTIME_TIMESTAMP":' + b"9" * 5000 + b"}"
    reading = read_bytes(journal(VLLM_FIRST, huge, record(OOM_TEXT)))
    assert (reading.lines, reading.bad_lines) == (3, 1)
    assert (reading.state, reading.cause) == ("failed", "cuda_oom")


_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
_json_values = st.recursive(_json_scalars, lambda kids: st.lists(kids, max_size=4)
                            | st.dictionaries(st.text(max_size=5), kids, max_size=3), max_leaves=10)
_field_values = st.one_of(
    _json_values,
    st.lists(st.integers(0, 255), max_size=40),
    st.lists(_json_values, min_size=1, max_size=3),
)
#: Numeric text of any size, up to 24 digits, every magnitude about as likely: what a journal's
#: number-valued fields hold, right or wrong.
_numeric_text = st.builds(lambda neg, digits, zeros: ("-" if neg else "") + str(digits) + "0" * zeros,
                          st.booleans(), st.integers(1, 10 ** 6), st.sampled_from(range(19)))
_text_values = st.text(max_size=12) | st.lists(st.integers(0, 255), max_size=20)
#: Each field mostly well-formed (so a record gets past its other fields), sometimes any JSON at all.
_journal_records = st.fixed_dictionaries({}, optional={
    "MESSAGE": st.sampled_from([OOM_TEXT, "Started vllm.service.", ""]) | _text_values | _field_values,
    "__REALTIME_TIMESTAMP": _numeric_text | _field_values,
    "_PID": _numeric_text | st.just("1") | _field_values,
    "SYSLOG_IDENTIFIER": st.sampled_from(["systemd", "python3"]) | _field_values,
    "_TRANSPORT": st.sampled_from(["journal", "stdout"]) | _field_values,
    "UNIT": st.just("vllm.service") | _field_values,
    "_SYSTEMD_UNIT": st.just("vllm.service") | _field_values,
    "_SYSTEMD_INVOCATION_ID": _text_values | _field_values,
    "INVOCATION_ID": _text_values | _field_values,
    "__CURSOR": _text_values | _field_values,
})


@MODEST
@given(st.lists(_journal_records, max_size=6))
def test_journal_records_with_any_field_values_never_crash(records: list[dict]) -> None:
    data = journal(VLLM_FIRST, *(json.dumps(r).encode() for r in records))
    reading = read_bytes(data)
    assert_sane(reading, 1 + len(records))


# --- escape codes, markup and control characters --------------------------------------------------------


def _decorate(line: bytes, last: bool) -> bytes:
    """A log line as a colour terminal wrapper and a careless logger might leave it."""
    return (b"\x1b]0;vllm serve\x07\r\x1b[32m" + line + b" [bold]boom[/] [/usr/bin/python3]\x1b[0m\x07\x08"
            + (b"\x1b" if last else b""))


def test_markup_escape_codes_and_controls_are_cleaned_and_brackets_kept() -> None:
    raw = OOM_LOG.read_bytes()
    clean = read_bytes(raw)
    lines = raw.split(b"\n")
    n = len(lines) - 1 if lines[-1] == b"" else len(lines)
    dirty = [(_decorate(ln, i == n - 1) if ln else ln) for i, ln in enumerate(lines)]
    reading = read_bytes(b"\n".join(dirty))
    assert (reading.engine, reading.state, reading.phase, reading.phases_seen, reading.cause, reading.starts) == \
        (clean.engine, clean.state, clean.phase, clean.phases_seen, clean.cause, clean.starts)
    suffix = " [bold]boom[/] [/usr/bin/python3]"
    assert reading.error is not None and clean.error is not None
    assert reading.error.line == clean.error.line
    assert reading.error.text == clean.error.text + suffix
    for got, want in zip(reading.phases, clean.phases, strict=True):
        assert (got.phase, got.line, got.time, got.text) == (want.phase, want.line, want.time, want.text + suffix)
    assert reading.last_line == clean.last_line + suffix
    assert_clean_texts(reading)


def test_markup_escape_codes_never_reach_the_cli_output(tmp_path: Path) -> None:
    raw = OOM_LOG.read_bytes().split(b"\n")
    path = tmp_path / "coloured.log"
    path.write_bytes(b"\n".join(_decorate(ln, True) if ln else ln for ln in raw))
    for args in ((str(path),), (str(path), "--json")):
        proc = replay(*args)
        assert_read(proc)
        out = proc.stdout.decode()
        assert CONTROL_RE.search(out.replace("\n", "")) is None, repr(CONTROL_RE.search(out.replace("\n", "")))
        assert "[bold]boom[/] [/usr/bin/python3]" in out


@pytest.mark.parametrize("raw, shown", [
    (b"\x1b[31mERROR\x1b[0m boom", "ERROR boom"),
    (b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m [bold]hi[/]", "(APIServer pid=1) [bold]hi[/]"),
    (b"a\x1b]0;window title\x07b", "ab"),
    (b"see \x1b]8;;http://example.com\x1b\\the docs\x1b]8;;\x1b\\ [/usr/bin/python3]", "see the docs [/usr/bin/python3]"),
    (b"trailing escape \x1b", "trailing escape "),
    (b"bell\x07 and back\x08space", "bell and backspace"),
    (b"\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"),
    (b"frame 1/3\rframe 2/3\rlast frame [/]", "last frame [/]"),
    (b"nul\x00 and del\x7f", "nul and del"),
    (b"\x1b[31mERROR\x1b(B\x1b[m done", "ERROR done"),
], ids=["sgr", "vllm-prefix-colour", "osc-title", "osc8-link", "lone-trailing-esc", "bel-backspace",
        "private-csi", "cr-frames", "nul-del", "tput-sgr0"])
def test_escape_sequence_leaves_nothing_behind(raw: bytes, shown: str) -> None:
    reader = StartupReader()
    reader.feed_bytes(raw)
    reading = reader.reading()
    assert reading.last_line == shown
    assert_clean_texts(reading)


# --- paths the CLI cannot read --------------------------------------------------------------------------


def test_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(LogReadError, match="directory"):
        read_path(str(tmp_path))
    assert_refused(replay(str(tmp_path)), str(tmp_path), "directory")


def test_missing_path_is_refused_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such.log"
    with pytest.raises(LogReadError, match="no such file"):
        read_path(str(missing))
    assert_refused(replay(str(missing)), str(missing), "no such file")
    assert_refused(replay(str(missing), "--json"), "no such file")


def test_path_through_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    file = tmp_path / "a.log"
    file.write_text("hello\n")
    assert_refused(replay(str(file / "x.log")), str(file / "x.log"))


# --- standard input ------------------------------------------------------------------------------------------


def test_stdin_is_read() -> None:
    proc = replay("-", "--json", stdin=OOM_LOG.read_bytes())
    assert_read(proc)
    out = json_reading(proc)
    assert (out["engine"], out["state"], out["cause"]) == ("vllm", "failed", "cuda_oom")
    assert out["error"]["line"] == 5


def test_stdin_journal_is_read() -> None:
    proc = replay("-", "--json", stdin=RESTART_LOOP.read_bytes())
    assert_read(proc)
    out = json_reading(proc)
    assert (out["engine"], out["state"], out["cause"], out["starts"]) == ("vllm", "failed", "cuda_oom", 3)


def test_empty_stdin_is_read() -> None:
    proc = replay("-", "--json", stdin=b"")
    assert_read(proc)
    assert json_reading(proc)["state"] == "none"


def test_binary_stdin_is_refused_in_one_line() -> None:
    assert_refused(replay("-", stdin=b"\x7fELF\x02\x01\x01\x00" + bytes(100)), "standard input", "binary")


# --- numbers too big for the reader ----------------------------------------------------------------------------


def test_huge_restart_counter_does_not_crash() -> None:
    reader = StartupReader()
    reader.feed("Nov 29 16:27:20 gpu-node-1 systemd[1]: vllm.service: Scheduled restart job, "
                "restart counter is at " + "9" * 5000 + ".")
    reading = reader.reading()
    assert_sane(reading, 1)


def test_huge_bar_count_gives_valid_json(tmp_path: Path) -> None:
    path = tmp_path / "bar.log"
    path.write_text("Loading safetensors checkpoint shards:  50% Completed | " + "9" * 400 + "/" + "9" * 400
                    + " [00:01<00:01,  1.2it/s]\n")
    proc = replay(str(path), "--json")
    assert_read(proc)
    out = json_reading(proc)
    # A 400-digit count is not a count: no progress, the phase still read from the bar's label.
    assert out["progress"] is None
    assert out["phases_seen"] == ["weights"]


@pytest.mark.parametrize("line", [
    "kernel: Out of memory: Killed process 12345 (python3) total-vm:812345kB",
    "vllm.service: Failed with result 'exit-code'.",
], ids=["kernel-oom-kill", "systemd-result"])
def test_failure_seen_only_from_outside_still_counts_its_start(line: str) -> None:
    """An excerpt that begins at the end (``journalctl -u vllm | tail -1``): a failed start is a start."""
    reader = StartupReader()
    reader.feed(line)
    reading = reader.reading()
    assert reading.state == "failed"
    assert reading.starts == 1


# --- property tests ------------------------------------------------------------------------------------------


def _fixture_lines() -> list[bytes]:
    out: list[bytes] = []
    for path in sorted(LOGS.glob("*.log")):
        out += [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
    return out


FIXTURE_LINES = _fixture_lines()
_PREFIXES = [b"12:", b"  | ", b"web-1  | ", b"Nov 29 16:27:20 gpu-node-1 python3[12]: ",
             b"2025-03-08T12:29:04.123456Z ", b"\x1b[31m", b"[rank1]: ", b"(VllmWorker rank=1 pid=3) ",
             b"\r", b"user@host:~$ ", b"\xff", b"vllm.service: ", b"[bold]", b"\x1b]0;t\x07"]

_physical = st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" "))
_fixture_line = st.sampled_from(FIXTURE_LINES)
_mixed_line = st.one_of(
    _fixture_line,
    _fixture_line,
    _physical,
    st.text(max_size=80).map(lambda s: s.replace("\n", " ").encode("utf-8", "surrogatepass")),
    st.tuples(st.sampled_from(_PREFIXES), _fixture_line).map(b"".join),
    st.tuples(_fixture_line, _fixture_line).map(b"\r".join),
    st.tuples(_fixture_line, st.integers(0, 400)).map(lambda t: t[0][: t[1]]),
    st.tuples(_fixture_line, st.sampled_from([b"\r", b"\x1b[0m", b"\x00", b"\xfe"]), st.integers(0, 400))
    .map(lambda t: t[0][: t[2]] + t[1] + t[0][t[2]:]),
)


def _feed_all(lines: list[bytes]) -> list[Reading]:
    """Feed every line, taking a reading after each (of a log that ends there, as a file is read);
    reading() must not change the reader, and a live reading only differs in what it has proven."""
    reader = StartupReader()
    readings = [reader.reading(ended=True)]
    for raw in lines:
        reader.feed_bytes(raw)
        first = reader.reading(ended=True)
        assert reader.reading(ended=True) == first
        live = reader.reading()
        assert live.state == first.state or (live.state in ("loading", "ready") and first.state == "failed")
        readings.append(first)
    return readings


@MODEST
@given(st.lists(_physical, max_size=40))
def test_any_bytes_as_lines_never_break_the_reader(lines: list[bytes]) -> None:
    readings = _feed_all(lines)
    for k, reading in enumerate(readings):
        assert_sane(reading, k)
        assert_clean_texts(reading)


@MODEST
@given(st.lists(st.binary(max_size=120), max_size=40))
def test_any_bytes_as_a_file_are_read_or_refused_in_one_line(chunks: list[bytes]) -> None:
    data = b"\n".join(chunks)
    try:
        reading = read_bytes(data)
    except LogReadError as exc:
        assert any(w in str(exc) for w in ("binary", "gzip", "UTF-16", "json-pretty"))
        assert "\n" not in str(exc)
        return
    assert_sane(reading)
    assert reading.lines == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert_clean_texts(reading)


@MODEST
@given(st.lists(_mixed_line, min_size=1, max_size=60), st.data())
def test_fixture_lines_mixed_with_garbage_read_sanely_and_deterministically(lines: list[bytes], data) -> None:
    readings = _feed_all(lines)
    for k, reading in enumerate(readings):
        assert_sane(reading, k)
        assert_clean_texts(reading)
    # No look-ahead, no hidden state: a fresh reader fed lines[:k] says what the first said at line k.
    k = data.draw(st.integers(0, len(lines)), label="k")
    fresh = StartupReader()
    for raw in lines[:k]:
        fresh.feed_bytes(raw)
    assert fresh.reading(ended=True) == readings[k]
    # The same lines as a file read the same, through the file reader.
    blob = b"".join(ln + b"\n" for ln in lines)
    if blob.startswith((b"\xff\xfe", b"\xfe\xff")):
        # UTF-16 text (its byte-order mark first): the file is read as the text it encodes, not
        # as these bytes (tests/test_wrappers.py reads every fixture so).
        assert_sane(read_bytes(blob))
        return
    try:
        from_file = read_bytes(blob)
    except LogReadError as exc:
        # Refused only for a journal file's magic, or garbage: control characters a log does not
        # hold, or invalid UTF-8.
        if blob.lstrip(b"\x00").startswith((b"LPKSHHRH", b"\x1f\x8b", b"\xff\xfe", b"\xfe\xff")):
            assert any(w in str(exc) for w in ("journal", "gzip", "UTF-16"))  # (after a NUL hole)
            return
        head = blob[:8192].decode("utf-8", "replace")
        assert "binary" in str(exc)
        assert any(ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b\x0c\x08\x07") for ch in head)
        return
    if not lines[0].startswith(b"\x00"):
        assert from_file == readings[-1]


@MODEST
@given(st.sampled_from(sorted(LOGS.glob("*.log"))), st.data())
def test_fixture_cut_after_any_line_reads_as_the_stream_did_there(path: Path, data) -> None:
    raw = path.read_bytes()
    seen: list[Reading] = []
    read_stream(io.BytesIO(raw), on_line=lambda r: seen.append(r.reading(ended=True)))
    lines = raw.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    assert len(seen) == len(lines)
    k = data.draw(st.integers(1, len(lines)), label="k")
    cut = read_bytes(b"".join(ln + b"\n" for ln in lines[:k]))
    assert cut == seen[k - 1]


def test_utf16_text_reads_as_its_text_and_without_a_bom_says_how_to_convert() -> None:
    log = (FIXTURES / "logs" / "vllm-fail-oom-01.log").read_bytes()
    bare = read_bytes(log).to_json()
    # PowerShell's `>`: a byte-order mark, then UTF-16 LE (tests/test_wrappers.py reads every fixture so)
    assert read_bytes(b"\xff\xfe" + log.decode().encode("utf-16-le")).to_json() == bare
    with pytest.raises(LogReadError, match=r"UTF-16 text without a byte-order mark.*iconv -f UTF-16LE"):
        read_bytes(log.decode().encode("utf-16-le"))
