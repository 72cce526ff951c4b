"""Whatever collected the log, the reading is the same (issue 25's format invariance): every real
fixture, re-read through each wrapper people put around these logs (tests/wrapping.py: container
runtimes' and kubectl's timestamps and prefixes, docker compose with other services between the
lines, Ray's coloured process prefix, journalctl's short formats with any identifier, CRLF, ``> ``
quoting, a blank line after every line, a terminal's hard wrap at 120 and 200 columns, a shell
prompt and nohup around it, UTF-16), gives the same engine, state, phase, phases seen, cause,
starts, progress and decisive line (the same line of the bare log, its text inside the wrapped
one) as the bare log does; else the test names the wrapper and the fields that changed.

``KNOWN`` lists the pairs that still read differently, each with why: for them the test checks that
they still do (a fix shows up as a failure that says to take the pair off the list).
bench/wrapper_matrix.py prints the whole matrix.
"""

from __future__ import annotations

import io

import pytest

from conftest import log_cases
from probes.sources.logfile import read_stream
from wrapping import WRAPPERS, split_log

# Logs that already carry a wrapper of their own (syslog, grep -n, a gutter, journalctl -x) are read bare only.
CASES = [p for p in log_cases() if p.stem not in {
    "vllm-restart-loop-02", "vllm-journal-ok-01", "ollama-restart-loop-02", "vllm-fail-nccl-01",
    "ollama-fail-permission-01", "ollama-fail-startlimit-01", "ollama-restart-loop-03-oldsystemd",
    "vllm-fail-unsupported-compose-01", "sglang-fail-zmqport-01", "vllm-fail-oom-hip-01",
    "ollama-fail-oomkill-01", "tgi-fail-oom-01", "tgi-ok-01", "tgi-fail-download-sigkill-01",
    "tgi-fail-shard-sigkill-01", "tgi-fail-sigill-01", "sglang-ok-06-dockerdesktop"}]

_FRAME_FIRST = "the excerpt begins at a traceback frame: behind a second process prefix the block path marks Starting"
_CUT = "a terminal's wrap cuts the decisive words or the bar in two"
#: (log, wrapper) pairs that read differently today, and why.
KNOWN: dict[tuple[str, str], str] = {
    **{(log, w): _FRAME_FIRST for w in ("ray-prefix", "ray-ansi-prefix") for log in (
        "vllm-fail-kvcache-xpu-wrap-33", "tgi-fail-warmup-rocm-11", "vllm-fail-wrap-compose-tail-22",
        "vllm-fail-wrap-quoted-25")},
    **{(log, w): "a process prefix outside another wrapper's (Ray's outside compose's or '> '): no such log exists"
       for w in ("ray-prefix", "ray-ansi-prefix") for log in (
           "llamacpp-fail-unsupported-compose-13", "ollama-warn-cudainit-15")},
    **{("tgi-ok-11-jsonwrap", w): "a JSON record behind a process prefix is not rejoined"
       for w in ("ray-prefix", "ray-ansi-prefix")},
    **{(log, "wrap-120"): _CUT for log in (
        "vllm-fail-silent-01", "llamacpp-fail-oomd-14", "ollama-ok-runner-crash-12", "ollama-warn-cudainit-15",
        "sglang-fail-errorlevel-dpattn-16", "sglang-fail-nccl-tp16-01", "tgi-fail-warmup-rocm-11",
        "vllm-fail-graphcap-tp-19", "vllm-fail-kvsrc-34", "vllm-fail-oom-triton-compose-30",
        "vllm-fail-trustremote-runpod-36", "vllm-fail-wrap-compose-tail-22", "vllm-loading-offline-windows-13")},
    **{(log, "wrap-200"): _CUT for log in ("vllm-fail-silent-01", "sglang-fail-warmup-dpattn-npu-11")},
    ("tgi-fail-storetimeout-12", "compose-interleaved"): "a neighbour's line between a traceback's lines",
    ("vllm-fail-wrap-compose-tail-22", "compose-interleaved"): "a neighbour's line between a traceback's lines",
    ("vllm-ok-wrap-compose-21", "compose-interleaved"): "a neighbour's line between a traceback's lines",
}


def reading_key(data: bytes, where: list[int] | None = None) -> dict[str, object]:
    """What must not change: the reading's fields, the decisive line as a line of the bare log."""
    j = read_stream(io.BytesIO(data)).to_json()
    e = j["error"]
    line = None if e is None else (where[e["line"] - 1] if where is not None else e["line"])
    return {k: j[k] for k in ("engine", "state", "phase", "phases_seen", "cause", "starts", "restart_loop",
                              "progress")} | {"error_line": line, "error_text": None if e is None else e["text"]}


def differences(bare: dict[str, object], wrapped: dict[str, object]) -> list[str]:
    """The fields that changed (the decisive text: the bare one must lie inside the wrapped one)."""
    out = [k for k in bare if k != "error_text" and bare[k] != wrapped[k]]
    bt, wt = bare["error_text"], wrapped["error_text"]
    if (bt is None) != (wt is None) or (isinstance(bt, str) and isinstance(wt, str) and bt not in wt
                                        and wt not in bt):
        out.append("error_text")
    return out


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("log", CASES, ids=lambda p: p.stem)
def test_a_wrapped_log_reads_as_the_bare_one(log, wrapper) -> None:
    data = log.read_bytes()
    wrapped, where = WRAPPERS[wrapper](split_log(data))
    changed = differences(reading_key(data), reading_key(wrapped, where))
    why = KNOWN.get((log.stem, wrapper))
    if why is None:
        assert not changed, f"through {wrapper}, these changed: {changed}"
    else:
        assert changed, f"{log.stem} through {wrapper} now reads as the bare log: take it off KNOWN ({why})"


def test_the_wrappers_keep_every_line() -> None:
    # Each wrapper's line map names every bare line, in order: the comparison above means something.
    lines = [b"first line", b"x" * 450, b"bar 1/2\rbar 2/2", b"last"]
    for name, wrap in WRAPPERS.items():
        _data, where = wrap(lines)
        assert sorted(set(where) - {0}) == [1, 2, 3, 4], name
        assert [w for w in where if w] == sorted(w for w in where if w), name


def test_known_pairs_are_real_pairs() -> None:
    stems = {p.stem for p in CASES}
    for (log, wrapper) in KNOWN:
        assert log in stems and wrapper in WRAPPERS, (log, wrapper)
