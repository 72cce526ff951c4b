"""`upwatch replay`: the first command an operator runs, as a subprocess, the way they run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import EXTRA_LOGS, LOGS

KEYS = ["engine", "state", "phase", "phases_seen", "phases", "progress", "error", "cause", "hint", "starts",
        "restart_loop", "suspects", "service", "why"]


def _upwatch(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", *args], input=stdin, capture_output=True)


def test_the_decisive_lines_time_is_its_own() -> None:
    # A journal record's time (its __REALTIME_TIMESTAMP), not the time of the start or of the log's end.
    proc = _upwatch("replay", "--json", str(Path(__file__).parent / "fixtures" / "journal" / "vllm-restart-loop.jsonl"))
    assert proc.returncode == 0, proc.stderr
    err = json.loads(proc.stdout)["error"]
    assert (err["line"], err["time"]) == (32, "2024-11-05T03:23:46Z")


def test_json_has_exactly_the_documented_keys() -> None:
    proc = _upwatch("replay", "--json", str(LOGS / "sglang-fail-graphcapture-01.log"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == KEYS
    assert out["state"] == "failed" and out["cause"] == "unknown"
    assert out["error"] == {"line": 111, "time": None, "text": "KeyError: 'BLOCK_SIZE_M'"}  # a line with no time
    assert out["progress"] == {"phase": "graph_capture", "done": 0, "total": 51}
    assert [set(p) for p in out["phases"]] == [{"phase", "line", "time", "text"}] * 3
    assert out["phases"][0] == {"phase": "weights", "line": 1, "time": None,
                                "text": "Loading safetensors checkpoint shards: 100% Completed | 163/163 "
                                        "[00:16<00:00, 10.15it/s]"}
    assert out["phases"][1]["time"] == "2026-05-08T14:34:31"
    # What read it: the decisive line's own line and text, and the state is the failure's.
    assert out["why"]["error"]["line"] == 111 and out["why"]["state"] == out["why"]["error"]
    assert set(out["why"]["error"]) == {"line", "text", "rule", "engine", "message"}


def test_a_log_with_no_year_shows_month_day_and_clock_and_says_so() -> None:
    # vLLM writes `INFO 02-12 19:33:39`: with no full date anywhere, the text timeline showed ISO's
    # year-less `--02-12T19:33:39`, which reads as a typo; --json keeps that form (documented).
    path = str(LOGS / "vllm-ok-01.log")
    text = _upwatch("replay", path).stdout.decode()
    assert "  Starting         8  Feb 12 19:33:39     1m26s" in text and "--02-" not in text
    assert "The log gives no year" in text
    assert json.loads(_upwatch("replay", "--json", path).stdout)["phases"][0]["time"] == "--02-12T19:33:39"
    assert "no year" not in _upwatch("replay", str(LOGS / "sglang-ok-01.log")).stdout.decode()


def test_a_log_that_begins_inside_the_start_does_not_say_how_long_it_took() -> None:
    # vllm-journal-ok-01 begins at the warm-up: "READY after 0s" summed the phases the excerpt has.
    text = _upwatch("replay", str(LOGS / "vllm-journal-ok-01.log")).stdout.decode()
    assert "READY (the log begins in Warm-up: how long the start took is not in it)" in text
    assert "READY after 2m02s" in _upwatch("replay", str(LOGS / "sglang-ok-01.log")).stdout.decode()


def test_a_crash_after_ready_is_said_to_be_while_serving() -> None:
    text = _upwatch("replay", str(EXTRA_LOGS / "vllm-fail-wrap-quoted-25.log")).stdout.decode()
    assert "FAILED while serving (after Ready): engine_died" in text and "during Ready" not in text


def test_text_timeline_names_phases_lines_times_and_the_outcome() -> None:
    proc = _upwatch("replay", str(LOGS / "vllm-fail-oom-01.log"))
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "vLLM, 6 lines, 1 start" in text
    assert "Weight load" in text and "Init" in text
    assert "FAILED during Init: cuda_oom" in text
    assert "decisive line, line 5:" in text and "CUDA out of memory. Tried to allocate 1.95 GiB" in text
    assert "hint: GPU memory ran out" in text


def test_ready_timeline_shows_durations_and_progress() -> None:
    text = _upwatch("replay", str(LOGS / "sglang-ok-01.log")).stdout.decode()
    assert "READY after 2m02s" in text          # 16:13:35 to 16:15:37
    row = next(line for line in text.splitlines() if "Graph capture" in line)
    assert row.split()[2:] == ["15", "2025-05-02T16:14:33", "26s", "4/4", "(100%)"]


def test_stdin_and_engine_flag() -> None:
    data = (LOGS / "vllm-ok-03.log").read_bytes()
    out = json.loads(_upwatch("replay", "--json", "-", stdin=data).stdout)
    assert (out["engine"], out["state"]) == ("vllm", "ready")
    out = json.loads(_upwatch("replay", "--json", "--engine", "tgi", "-", stdin=data).stdout)
    assert out["engine"] == "tgi"


def test_unreadable_input_exits_2_with_one_line() -> None:
    proc = _upwatch("replay", "/nonexistent/x.log")
    assert proc.returncode == 2
    assert proc.stderr.decode() == "upwatch replay: /nonexistent/x.log: no such file\n"
    proc = _upwatch("replay", "--engine", "nosuch", "x.log")
    assert proc.returncode == 2 and b"invalid choice" in proc.stderr


def test_help_documents_the_exit_status() -> None:
    out = _upwatch("replay", "--help").stdout.decode()
    assert "Exit status: 0" in out and "2 it could not be read" in out


def test_a_pipe_given_as_a_path_is_read(tmp_path) -> None:
    import os

    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "tui", "replay", "--json", str(fifo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(fifo, "wb") as writer:
        writer.write((LOGS / "vllm-fail-oom-01.log").read_bytes())
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["cause"] == "cuda_oom"


def test_unit_filter_names_the_units_present_when_none_match() -> None:
    from conftest import JOURNAL

    proc = _upwatch("replay", "--unit", "nosuch", str(JOURNAL / "captured-systemd252.jsonl"))
    assert proc.returncode == 2
    assert b"no journal entries about nosuch.service" in proc.stderr and b"vllm.service" in proc.stderr
    proc = _upwatch("replay", "--json", "--unit", "vllm", str(JOURNAL / "captured-systemd252.jsonl"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["cause"] == "cuda_oom"
    proc = _upwatch("replay", str(JOURNAL / "captured-systemd252.jsonl"))
    assert b"holds entries of 5 units" in proc.stderr


def test_compressed_and_empty_inputs_say_what_they_are(tmp_path) -> None:
    import gzip

    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress((LOGS / "vllm-ok-03.log").read_bytes()))
    proc = _upwatch("replay", str(gz))
    assert proc.returncode == 2 and b"zcat" in proc.stderr
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    proc = _upwatch("replay", str(empty))
    assert proc.returncode == 0 and b"NO SERVER START FOUND" in proc.stdout
