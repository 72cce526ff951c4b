"""Whatever collected the log, the reading is the same: every fixture, wrapped the ways operators
get their logs (`docker logs -t`, `kubectl logs --prefix [--timestamps]`, docker compose, `grep -n`),
reads as it does bare; so does a log with a date in front that crosses the new year."""

from __future__ import annotations

import io

import pytest

from conftest import log_cases
from probes.sources.logfile import read_stream

WRAPPERS = {
    "docker-logs-t": lambda i, line: b"2025-03-08T12:30:00.123456789Z " + line,
    "kubectl-prefix": lambda i, line: b"[pod/sglang-7d9f/sglang] " + line,
    "kubectl-prefix-timestamps": lambda i, line: b"[pod/sglang-7d9f/sglang] 2025-03-08T12:30:00.123456789Z " + line,
    "compose": lambda i, line: b"server-1  | " + line,
    "grep-n": lambda i, line: str(i).encode() + b":" + line,
    # A date in front whose first number grows (the new year) is no grep -n number: the log must
    # not lose its dates from there on (it did: 2025 > 2024 read as two growing line numbers).
    "dated-over-new-year": lambda i, line: (b"2024-12-31 23:59:59 " if i < 8 else b"2025-01-01 00:00:00 ") + line,
}
# Logs that already carry a wrapper of their own (syslog, grep -n, a gutter) are read bare only.
CASES = [p for p in log_cases() if p.stem not in {
    "vllm-restart-loop-02", "vllm-journal-ok-01", "ollama-restart-loop-02", "vllm-fail-nccl-01",
    "ollama-fail-permission-01", "ollama-fail-startlimit-01", "ollama-restart-loop-03-oldsystemd",
    "vllm-fail-unsupported-compose-01", "sglang-fail-zmqport-01", "vllm-fail-oom-hip-01",
    "ollama-fail-oomkill-01", "tgi-fail-oom-01", "tgi-ok-01", "tgi-fail-download-sigkill-01",
    "tgi-fail-shard-sigkill-01", "tgi-fail-sigill-01", "sglang-ok-06-dockerdesktop"}]


def _key(reading) -> tuple:
    j = reading.to_json()
    return (j["engine"], j["state"], j["phase"], j["phases_seen"], j["cause"], j["starts"], j["restart_loop"],
            j["progress"], None if j["error"] is None else j["error"]["line"])


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("log", CASES, ids=lambda p: p.stem)
def test_a_wrapped_log_reads_as_the_bare_one(log, wrapper) -> None:
    data = log.read_bytes()
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    wrap = WRAPPERS[wrapper]
    wrapped = b"".join(wrap(i, line) + b"\n" for i, line in enumerate(lines, 1))
    assert _key(read_stream(io.BytesIO(wrapped))) == _key(read_stream(io.BytesIO(data)))
