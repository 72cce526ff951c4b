"""Journal input: real `journalctl -o json` output and real binary journal files (systemd 252).

The binary files are read through the real `journalctl`; CI installs it (.ci/run). When it is
missing the test fails and says so: it does not skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import JOURNAL
from probes.logs.journal_json import (
    READ_FIELDS, TOO_LONG, RecordError, _record, field_text, is_journal_json, parse_record)
from probes.sources.logfile import read_path
from probes.transport.replay.journalctl import ALWAYS_FIELDS


def test_field_values_in_every_shape_journalctl_prints() -> None:
    assert field_text("plain") == "plain"
    assert field_text(None) is None
    assert field_text([27, 91, 51, 49, 109, 104, 105]) == "\x1b[31mhi"
    assert field_text([0xFF, 0x41]) == "\ufffdA"                      # invalid UTF-8 is replaced
    assert field_text(["a", None, [104, 105]]) == f"a\n{TOO_LONG}\nhi"  # a repeated field
    with pytest.raises(RecordError):
        field_text(3.5)


def test_records_of_pid1_and_of_the_service() -> None:
    lines = (JOURNAL / "vllm-restart-loop.jsonl").read_text().splitlines()
    started = parse_record(lines[0])
    assert started.systemd and started.unit == "vllm.service"
    assert started.text.startswith("Started vllm.service")
    assert started.invocation == "c0000000000000000000000000000011"
    assert started.realtime_us == 1730776862118204
    assert started.stamp is not None and (started.stamp.year, started.stamp.hms, started.stamp.tz) == (2024, "03:21:02", "Z")
    worker = parse_record(lines[2])
    assert not worker.systemd and worker.unit == "vllm.service" and worker.pid == "2751070"
    assert worker.text.startswith("\x1b[1;36m(VllmWorkerProcess pid=2751070)")  # was a byte array


@pytest.mark.parametrize("line", ["", "{", '{"MESSAGE": "x"', "[1, 2]", "-- cursor: s=abc", "not json"])
def test_what_is_not_a_record_says_so(line) -> None:
    with pytest.raises(RecordError):
        parse_record(line)


def test_null_message_is_shown_as_too_long() -> None:
    assert parse_record('{"MESSAGE": null, "__CURSOR": "s=1"}').text == TOO_LONG


def test_json_detection() -> None:
    assert is_journal_json((JOURNAL / "sglang-startup.jsonl").read_bytes().split(b"\n")[0])
    assert not is_journal_json(b"[2025-03-08 12:29:04] server_args=ServerArgs(")
    assert not is_journal_json(b'{"some": "other json"}')


def _summary(reading) -> tuple:
    return (reading.engine, reading.state, reading.phase, tuple(reading.phases_seen), reading.cause,
            reading.starts, reading.restart_loop, None if reading.error is None else reading.error.line)


SGLANG = ("sglang", "ready", "ready", ("starting", "weights", "init", "graph_capture", "warmup", "ready"),
          None, 1, False, None)
VLLM_LOOP = ("vllm", "failed", "init", ("starting", "weights", "init"), "cuda_oom", 3, True, 32)  # Starting: systemd's "Started"


@pytest.mark.parametrize("name, expected", [
    ("sglang-startup.jsonl", SGLANG), ("sglang-startup.all.jsonl", SGLANG),
    ("vllm-restart-loop.jsonl", VLLM_LOOP), ("vllm-restart-loop.all.jsonl", VLLM_LOOP),
])
def test_journal_json_readings(name, expected) -> None:
    reading = read_path(str(JOURNAL / name))
    assert _summary(reading) == expected
    assert reading.bad_lines == 0


def test_journal_json_times_are_the_journals_own() -> None:
    reading = read_path(str(JOURNAL / "sglang-startup.jsonl"))
    # systemd's "Started" record (Starting), then the weights; each at its record's __REALTIME_TIMESTAMP.
    assert [m.time for m in reading.phases][:2] == ["2025-03-08T12:28:58Z", "2025-03-08T12:29:13Z"]
    assert reading.progress is not None and (reading.progress.done, reading.progress.total) == (13, 13)


def test_restart_loop_to_the_start_limit() -> None:
    reading = read_path(str(JOURNAL / "vllm-restart-loop.jsonl"))
    assert reading.gave_up and reading.restart_counter == 3
    assert "CUDA out of memory" in reading.error.text
    assert "start limit" in reading.hint


@pytest.mark.parametrize("unit, expected", [
    ("vllm.service", ("failed", "cuda_oom", 3, True)),
    ("sglang-7b.service", ("failed", "signal", 1, False)),          # systemctl kill -s SIGKILL
    ("vllm-embed.service", ("stopped", None, 1, False)),           # systemctl stop
    ("vllm-warmup.service", ("failed", "start_limit", 4, False)),  # clean exits, then the start limit
    ("sglang.service", ("loading", None, 1, False)),
])
def test_captured_systemd_journal_by_unit(unit, expected) -> None:
    reading = read_path(str(JOURNAL / "captured-systemd252.jsonl"), unit=unit)
    assert (reading.state, reading.cause, reading.starts, reading.restart_loop) == expected


def test_captured_trap_lines_read_safely() -> None:
    reading = read_path(str(JOURNAL / "captured-systemd252.jsonl"), unit="sglang.service")
    assert reading.phase == "graph_capture"
    assert reading.progress is not None and (reading.progress.done, reading.progress.total) == (13, 13)
    assert reading.last_line == "tab    here"
    texts = [m.text for m in reading.phases] + [reading.last_line]
    assert not any(c in t for t in texts for c in "\x1b\r\x07")


def test_show_cursor_line_is_not_a_bad_record() -> None:
    reading = read_path(str(JOURNAL / "sglang-startup.after-cursor-line10.show-cursor.txt"))
    assert reading.bad_lines == 0
    assert reading.state == "ready" and reading.engine == "sglang"


def _journalctl() -> str:
    exe = shutil.which("journalctl")
    assert exe, "journalctl is not installed: these tests read real journal files with it (.ci/run installs " \
                "the Debian package systemd)"
    return exe


@pytest.mark.host  # the real journalctl on journal files
@pytest.mark.parametrize("name, expected", [("sglang-startup.journal", SGLANG),
                                            ("vllm-restart-loop.journal", VLLM_LOOP)])
def test_binary_journal_files_through_real_journalctl(name, expected) -> None:
    _journalctl()
    reading = read_path(str(JOURNAL / name))
    assert _summary(reading) == expected


@pytest.mark.host  # the real journalctl on a journal file
def test_binary_journal_equals_its_json_export() -> None:
    exe = _journalctl()
    out = subprocess.run([exe, f"--file={JOURNAL / 'vllm-restart-loop.journal'}", "-o", "json", "-a"],
                         capture_output=True, check=True).stdout
    lines = out.decode().splitlines()
    stored = (JOURNAL / "vllm-restart-loop.all.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [json.loads(x) for x in stored]


def test_replay_cli_reads_a_binary_journal() -> None:
    _journalctl()
    proc = subprocess.run([sys.executable, "-m", "tui", "replay", "--json", str(JOURNAL / "vllm-restart-loop.journal")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cause"] == "cuda_oom"


@pytest.mark.host  # the real journalctl on a journal file
@pytest.mark.parametrize("mode", ["short-iso", "short", "cat"])
def test_journalctl_text_output_reads_like_its_json(tmp_path, mode) -> None:
    """What an operator pastes (`journalctl -u vllm`, `-o short-iso`, `-o cat`) reads like the JSON."""
    exe = _journalctl()
    out = subprocess.run([exe, f"--file={JOURNAL / 'vllm-restart-loop.journal'}", "-o", mode],
                         capture_output=True, check=True).stdout
    path = tmp_path / f"{mode}.log"
    path.write_bytes(out)
    reading = read_path(str(path))
    assert _summary(reading)[:7] == VLLM_LOOP[:7]
    assert reading.gave_up and reading.restart_counter == 3


class _Reads(dict):  # type: ignore[type-arg]
    """A record that notes every field asked of it."""

    asked: set[str]

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        self.asked.add(key)
        return super().get(key, default)


@pytest.mark.parametrize("name", ["captured-systemd252.jsonl", "sglang-startup.all.jsonl",
                                  "vllm-restart-loop.all.jsonl"])
def test_the_parser_reads_only_the_fields_journalctl_is_asked_for(name) -> None:
    # The journal probe asks journalctl for READ_FIELDS only (--output-fields): a field the parser
    # reads outside that list would silently be missing on every host.
    always = ALWAYS_FIELDS
    for raw in (JOURNAL / name).read_bytes().splitlines():
        obj = json.loads(raw)
        seen = _Reads(obj)
        seen.asked = set()
        full = _record(seen)
        assert seen.asked <= set(READ_FIELDS) | always, seen.asked - set(READ_FIELDS)
        kept = {k: v for k, v in obj.items() if k in READ_FIELDS or k in always}
        assert parse_record(json.dumps(kept).encode()) == full


@pytest.mark.parametrize(("fields", "unit"), [
    ({"_SYSTEMD_USER_UNIT": "llm.service", "_SYSTEMD_UNIT": "user@1000.service"}, "llm.service"),
    ({"_SYSTEMD_USER_UNIT": "", "_SYSTEMD_UNIT": "sglang.service"}, "sglang.service"),
    ({"_SYSTEMD_UNIT": "sglang.service"}, "sglang.service"),
    ({"_SYSTEMD_USER_UNIT": ["llm.service", "other.service"], "_SYSTEMD_UNIT": "user@1000.service"}, "llm.service"),
    ({"_SYSTEMD_UNIT": ["sglang.service", "x.service"]}, "sglang.service"),
    ({"_SYSTEMD_USER_UNIT": None, "_SYSTEMD_UNIT": ""}, ""),
    ({}, None),
], ids=["user-unit", "empty-user-unit", "system-unit", "repeated-user-unit", "repeated-unit", "empty", "none"])
def test_the_unit_of_a_servers_entry_is_its_user_unit_else_its_system_unit(fields: dict[str, object],
                                                                          unit: str | None) -> None:
    rec = parse_record(json.dumps({"MESSAGE": "hi", "_PID": "42", **fields}))
    assert rec.unit == unit and not rec.systemd
