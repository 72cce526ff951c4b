"""The reader is incremental: after line k it says exactly what it says of the file cut after line k.

There is no look-ahead. A file's reading is ``reading(ended=True)`` (the log ends there: a suspect
nothing recovered is then a failure); after line k the reader gives exactly that reading of the file
cut after line k, so the dashboard can feed it live journal lines and show each reading as it comes.
"""

from __future__ import annotations

import io

import pytest

from conftest import EXTRA_LOGS, LOGS, log_cases
from probes.sources.logfile import read_stream
from probes.logs.reader import StartupReader

# Files with the most going on: ranks, glued bars, \r frames, restarts, provisional ready.
STREAMED = [LOGS / "sglang-ok-03.log", LOGS / "sglang-fail-graphcapture-01.log", LOGS / "sglang-ok-05-cr.log",
            LOGS / "vllm-fail-port-01.log", LOGS / "vllm-fail-silent-01.log", LOGS / "ollama-restart-loop-02.log",
            LOGS / "tgi-fail-oom-01.log", LOGS / "vllm-restart-loop-02.log", LOGS / "trtllm-ok-01.log",
            EXTRA_LOGS / "ollama-restart-loop-03-oldsystemd.log"]


def _readings_as_you_go(data: bytes) -> list:
    seen = []
    read_stream(io.BytesIO(data), on_line=lambda r: seen.append(r.reading(ended=True)))
    return seen


def _assert_streams_as_cut(log, most: int | None = None) -> None:
    """After line k the reader says what it says of the file cut after line k: at every k, or at
    ``most`` cut points spread over the file (and its last line)."""
    data = log.read_bytes()
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    streamed = _readings_as_you_go(data)
    assert len(streamed) == len(lines)
    step = 1 if most is None else max(1, len(lines) // most)
    for k in sorted({*range(1, len(lines) + 1, step), len(lines)}):
        cut = b"\n".join(lines[:k]) + b"\n"
        assert read_stream(io.BytesIO(cut)) == streamed[k - 1], f"differs after line {k}"


@pytest.mark.parametrize("log", STREAMED, ids=lambda p: p.stem)
def test_reading_after_line_k_equals_reading_of_file_cut_after_k(log) -> None:
    _assert_streams_as_cut(log)


@pytest.mark.parametrize("log", log_cases(), ids=lambda p: p.stem)
def test_every_fixture_streams_as_it_reads_cut(log) -> None:
    """Every fixture, at up to 60 cut points spread over it (every line of a short one)."""
    _assert_streams_as_cut(log, most=60)


def test_a_live_reading_differs_from_an_ended_one_only_in_what_is_proven() -> None:
    """Live (the process not known to be gone) a suspect stays a suspect: the state is loading, the
    suspect is named; the same lines as a finished log read failed, with it as the decisive line."""
    lines = (LOGS / "vllm-fail-pythonh-01.log").read_bytes().split(b"\n")
    reader = StartupReader()
    for raw in lines:
        reader.feed_bytes(raw)
    live, ended = reader.reading(), reader.reading(ended=True)
    assert (live.state, live.cause) == ("loading", None)
    assert live.suspect is not None and live.suspect.cause == "missing_python_h"
    assert (ended.state, ended.cause, ended.error.line) == ("failed", "missing_python_h", live.suspect.line)
    assert ended.phases_seen == live.phases_seen


def test_vllm_port_in_use_reads_ready_then_failed() -> None:
    """`Application startup complete.` (L14) is ready until the bind error (L15) takes it back."""
    reader = StartupReader()
    lines = (LOGS / "vllm-fail-port-01.log").read_bytes().split(b"\n")
    for raw in lines[:14]:
        reader.feed_bytes(raw)
    ready = reader.reading()
    assert (ready.state, ready.phase, ready.phases_seen) == ("ready", "ready", ["warmup", "ready"])
    reader.feed_bytes(lines[14])
    failed = reader.reading()
    assert (failed.state, failed.phase, failed.cause) == ("failed", "warmup", "port_in_use")
    assert failed.phases_seen == ["warmup"]
    assert failed.error is not None and failed.error.line == 15
    assert "port 8000" in failed.hint


def test_reading_does_not_change_the_reader() -> None:
    reader = StartupReader()
    for raw in (LOGS / "sglang-ok-01.log").read_bytes().split(b"\n")[:20]:
        reader.feed_bytes(raw)
    assert reader.reading() == reader.reading()


def test_streamed_reading_sees_phases_in_order() -> None:
    """Live, the phase only moves forward through an SGLang TP4 start (no flicker back)."""
    order = ["starting", "weights", "init", "graph_capture", "warmup", "ready"]
    phases = [r.phase for r in _readings_as_you_go((LOGS / "sglang-ok-03.log").read_bytes())]
    indexes = [order.index(p) for p in phases]
    assert indexes == sorted(indexes)
    assert phases[-1] == "ready" and "graph_capture" in phases
