"""One named test per class of log the reader must get right (issue 12), each on a real public log
where one was found (the fixture's ``source`` names it) and otherwise on a minimal log marked
*derived*: lines in the real format of the engine, put together for the test.

The two-stage design is tested both ways: a line that looks like a failure is a *suspect* (live, the
start is still loading and the suspect is shown), and the start has *failed* only on evidence that
the process ended (a traceback's final exception line or an ERROR-level traceback, the engine's death
lines, a signal, systemd's lines), or when the log ends after an unrecovered suspect.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXTRA_LOGS, LOGS
from probes.sources.logfile import read_path, read_stream
from probes.logs.logline import parse
from probes.data.reading import Reading
from probes.logs.reader import StartupReader


def _lines(name: str) -> list[bytes]:
    return (EXTRA_LOGS / f"{name}.log").read_bytes().split(b"\n")


def _expected(name: str) -> dict:
    return json.loads((EXTRA_LOGS / f"{name}.expected.json").read_text())


def _read(lines: list[str], *, ended: bool = True, engine: str | None = None, unit: str | None = None) -> Reading:
    reader = StartupReader(engine, unit)
    for line in lines:
        reader.feed(line)
    return reader.reading(ended=ended)


def _live_after(name: str, k: int) -> Reading:
    """The live reading after the first k lines of a fixture (the process not known to be gone)."""
    reader = StartupReader()
    for raw in _lines(name)[:k]:
        reader.feed_bytes(raw)
    return reader.reading()


# --- a message that only looks like an error does not end the start --------------------------

# derived: vLLM V1 lines; the model-type probe's fallback traceback logged at WARNING (logger.warning
# with exc_info, as vLLM's registry does when an optional model class fails to import).
WARNING_TRACEBACK = [
    "(APIServer pid=7) INFO 11-02 10:00:00 [api_server.py:1896] vLLM API server version 0.11.0",
    "(EngineCore_DP0 pid=9) INFO 11-02 10:00:05 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
    "(EngineCore_DP0 pid=9) WARNING 11-02 10:00:06 [registry.py:602] Model type probe failed, falling back:",
    "(EngineCore_DP0 pid=9) Traceback (most recent call last):",
    '(EngineCore_DP0 pid=9)   File "/usr/lib/python3/dist-packages/vllm/model_executor/models/registry.py", line 600, '
    'in _try_inspect',
    "(EngineCore_DP0 pid=9)     return _run_in_subprocess(fn)",
    "(EngineCore_DP0 pid=9) RuntimeError: Error raised in subprocess",
    "(EngineCore_DP0 pid=9) INFO 11-02 10:00:30 [default_loader.py:267] Loading weights took 20.1 seconds",
    "(EngineCore_DP0 pid=9) INFO 11-02 10:00:41 [gpu_worker.py:298] Available KV cache memory: 60.5 GiB",
    "(EngineCore_DP0 pid=9) INFO 11-02 10:00:50 [gpu_model_runner.py:3480] Graph capturing finished in 8 secs",
    "(APIServer pid=7) INFO 11-02 10:00:55 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
    "(APIServer pid=7) INFO:     Application startup complete.",
]


def test_a_traceback_logged_at_warning_level_is_never_a_failure() -> None:
    r = _read(WARNING_TRACEBACK)
    assert (r.state, r.cause, r.error) == ("ready", None, None)
    assert r.phases_seen == ["starting", "weights", "init", "graph_capture", "warmup", "ready"]
    # Cut right after the exception line: a warning's traceback is not even a suspect that ends a log.
    cut = _read(WARNING_TRACEBACK[:7])
    assert (cut.state, cut.phase) == ("loading", "weights")
    assert cut.suspects and all(s.low for s in cut.suspects)


def test_an_info_line_before_a_raw_traceback_does_not_make_it_harmless() -> None:
    """A traceback Python prints itself (no logger prefix) after another process's INFO line is
    the real thing (vllm-fail-silent-01: EngineCore's INFO line, then the benchmark's traceback)."""
    r = read_path(str(LOGS / "vllm-fail-silent-01.log"))
    assert (r.state, r.cause) == ("failed", "engine_died")


def test_an_error_logged_with_its_traceback_by_a_loader_that_goes_on_is_not_a_failure() -> None:
    """vllm-loading-plugin-traceback-18 (PaddlePaddle/PaddleOCR#16738): vLLM's plugin loader logs
    ``Failed to load plugin`` with the traceback at ERROR and carries on without it."""
    r = read_path(str(EXTRA_LOGS / "vllm-loading-plugin-traceback-18.log"))
    assert (r.state, r.cause, r.suspects) == ("loading", None, ())


def test_a_warning_that_lists_method_names_is_not_a_phase_line() -> None:
    # derived: vLLM V0 lines; profile_run / initialize_kv_cache are names of functions, which only
    # traceback frames place in a phase.
    r = _read(["INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.6.3",
               "WARNING 05-04 14:43:17 config.py:1] The methods profile_run, initialize_kv_cache and "
               "determine_num_available_blocks are deprecated for custom executors."])
    assert r.phases_seen == ["starting"]


# --- the phase of a failure ---------------------------------------------------------------------

def test_traceback_frames_place_a_failure_in_graph_capture() -> None:
    """sglang-fail-graphcap-frames-17 (sglang#26734) and vllm-fail-graphcap-tp-19 (vllm#39788): the
    log shows no capture line; the frames (``capture_one_batch_size``, ``capture_model()``) do."""
    for name in ("sglang-fail-graphcap-frames-17", "vllm-fail-graphcap-tp-19"):
        r = read_path(str(EXTRA_LOGS / f"{name}.log"))
        assert (r.state, r.phase) == ("failed", "graph_capture"), name


def test_frames_of_a_weight_loader_place_a_failure_in_weights() -> None:
    """vllm-fail-wrap-compose-tail-22: a compose log cut mid-traceback, frames through load_model."""
    r = read_path(str(EXTRA_LOGS / "vllm-fail-wrap-compose-tail-22.log"))
    assert (r.state, r.phase, r.phases_seen) == ("failed", "weights", ["weights"])


def test_a_jit_failure_during_capture_is_in_graph_capture_not_init() -> None:
    """sglang-fail-jit-capture-dpattn-15 (flashinfer#2203)."""
    e = _expected("sglang-fail-jit-capture-dpattn-15")
    r = read_path(str(EXTRA_LOGS / "sglang-fail-jit-capture-dpattn-15.log"))
    assert (r.state, r.phase) == ("failed", "graph_capture") == (e["state"], e["phase"])


# derived: SGLang 0.5 lines; stderr flushes the capture bar after the scheduler's traceback.
BARS_AFTER = [
    "[2025-10-01 12:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=1)",
    "[2025-10-01 12:00:05 TP0] Load weight begin. avail mem=78.20 GB",
    "[2025-10-01 12:00:30 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.1 GB",
    "[2025-10-01 12:00:31 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "Capturing batches (bs=256 avail_mem=20.10 GB):   2%|▏         | 1/51 [00:01<01:10,  1.40s/it]",
]


def test_bars_flushed_after_the_traceback_move_the_failure_to_their_phase() -> None:
    r = _read(BARS_AFTER)
    assert (r.state, r.phase, r.cause) == ("failed", "graph_capture", "unknown")
    assert r.progress is not None and (r.progress.phase, r.progress.done, r.progress.total) == ("graph_capture", 1, 51)
    assert r.error is not None and r.error.line == 7


def test_a_failure_after_a_phase_ended_is_in_the_next_unless_more_of_that_phase_followed() -> None:
    # derived: SGLang with speculative decoding: the target's capture ends, the draft's begins.
    lines = ["[2025-10-01 12:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.",
             "[2025-10-01 12:00:09 TP0] Capture cuda graph end. Time elapsed: 9.1 s. avail mem=10.5 GB.",
             "[2025-10-01 12:00:10 TP0] Capture draft cuda graph begin. This can take up to several minutes.",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    r = _read(lines)
    assert (r.state, r.phase, r.cause) == ("failed", "graph_capture", "cuda_oom")


# --- a traceback cut before its exception line ----------------------------------------------------

def test_a_traceback_cut_before_its_exception_line_is_a_failure_when_the_log_ends() -> None:
    """sglang-fail-graphcap-cut-14 (sglang#6342): live it is a suspect, at the end a failure."""
    r = read_path(str(EXTRA_LOGS / "sglang-fail-graphcap-cut-14.log"))
    assert (r.state, r.phase) == ("failed", "graph_capture")
    n = len([raw for raw in _lines("sglang-fail-graphcap-cut-14") if raw])
    live = _live_after("sglang-fail-graphcap-cut-14", n)
    assert live.state == "loading" and live.suspect is not None


def test_an_error_level_traceback_is_a_failure_even_before_its_exception_line() -> None:
    """vLLM V1 logs ``EngineCore failed to start.`` and the traceback at ERROR (derived, V1 format);
    the start has failed live, before the exception line arrives."""
    lines = ["(EngineCore_DP0 pid=9) INFO 11-02 10:00:05 [gpu_model_runner.py:2602] Starting to load model m...",
             "(EngineCore_DP0 pid=9) ERROR 11-02 10:00:06 [core.py:708] Traceback (most recent call last):",
             '(EngineCore_DP0 pid=9) ERROR 11-02 10:00:06 [core.py:708]   File "/x/vllm/v1/engine/core.py", line 699, '
             'in run_engine_core']
    r = _read(lines, ended=False)
    assert (r.state, r.phase, r.cause) == ("failed", "weights", "unknown")
    assert "exception line has not arrived" in r.hint


def test_a_raw_exception_is_a_suspect_until_the_process_is_gone() -> None:
    # derived: a bare exception line with no traceback in view, then systemd's exit line.
    lines = ["INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.6.3",
             "ValueError: No available memory for the cache blocks."]
    live = _read(lines, ended=False)
    assert (live.state, live.suspect.cause if live.suspect else None) == ("loading", "cuda_oom")
    gone = _read(lines + ["vllm.service: Main process exited, code=exited, status=1/FAILURE"], ended=False)
    assert (gone.state, gone.cause, gone.error.line) == ("failed", "cuda_oom", 2)


def test_a_suspect_is_recovered_when_the_start_moves_on() -> None:
    # derived: SGLang: an exception line in the middle, then the start goes on to ready.
    lines = ["[2025-10-01 12:00:05 TP0] Load weight begin. avail mem=78.20 GB",
             "ValueError: could not read the optional chat template, using the default",
             "[2025-10-01 12:00:41 TP0] KV Cache is allocated. #tokens: 46611",
             "[2025-10-01 12:01:10] The server is fired up and ready to roll!"]
    assert _read(lines[:2]).state == "failed"          # a log that ends there
    assert _read(lines[:3]).state == "loading"         # moved on: not a failure
    assert _read(lines).state == "ready"


# --- the engine by evidence ------------------------------------------------------------------------

def test_ollama_wins_over_the_llama_cpp_it_embeds() -> None:
    # derived: Ollama's runner passes llama.cpp's own lines on; the first lines seen are llama.cpp's.
    lines = ["llama_model_loader: loaded meta data with 27 key-value pairs and 291 tensors",
             "print_info: file type   = Q4_K - Medium",
             'time=2025-11-19T10:00:02.000Z level=INFO source=server.go:1288 msg="llama runner started in 2.01 seconds"',
             'time=2025-11-19T10:00:03.000Z level=ERROR source=server.go:1000 msg="llama runner process has '
             'terminated: signal: killed"']
    r = _read(lines)
    assert (r.engine, r.state, r.cause) == ("ollama", "failed", "engine_died")
    assert "OOM killer" in r.hint


def test_sglang_module_paths_in_a_traceback_name_the_engine() -> None:
    # derived: only the frames say SGLang.
    lines = ["Traceback (most recent call last):",
             '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1, in load_model',
             "RuntimeError: boom"]
    assert _read(lines).engine == "sglang"


def test_a_unit_name_counts_as_evidence_of_the_engine() -> None:
    # derived: systemd's own lines about a unit named for Ollama, and nothing from Ollama itself.
    lines = ["Nov 29 16:27:20 gpu-node-1 systemd[1]: Started llm-ollama-gpu1.service - LLM server.",
             "Nov 29 16:27:25 gpu-node-1 systemd[1]: llm-ollama-gpu1.service: Main process exited, code=exited, "
             "status=1/FAILURE"]
    assert _read(lines).engine == "ollama"
    assert StartupReader(unit="vllm-qwen.service").reading().engine == "vllm"


# --- formats below the rules -----------------------------------------------------------------------

def test_tgi_json_records_hard_wrapped_by_a_terminal_are_rejoined() -> None:
    """tgi-ok-11-jsonwrap: ``--json-output`` records wrapped at 204 columns."""
    e = _expected("tgi-ok-11-jsonwrap")
    r = read_path(str(EXTRA_LOGS / "tgi-ok-11-jsonwrap.log"))
    assert (r.engine, r.state, r.phases_seen) == ("tgi", "ready", e["phases_seen"])


def test_a_json_record_is_read_as_its_message() -> None:
    # derived: TGI's tracing JSON, one record a line, and a record still being rejoined at the end.
    rec = {"timestamp": "2024-06-17T13:18:04.047265Z", "level": "ERROR",
           "fields": {"message": "Shard 0 failed to start"}, "target": "text_generation_launcher"}
    r = _read([json.dumps(rec)])
    assert (r.engine, r.state, r.cause) == ("tgi", "failed", "engine_died")
    assert r.phases[0].time == "2024-06-17T13:18:04Z" if r.phases else True
    half = json.dumps(rec)[:40]
    assert _read([half]).lines == 1 and _read([half]).state == "loading"


def test_vllm_prefixes_with_a_path_qualified_file_are_read() -> None:
    # derived: vLLM 0.11+ names the file with its folder.
    r = _read(["(EngineCore_DP0 pid=9) INFO 11-02 10:00:50 [compilation/cuda_graph.py:134] Capturing CUDA graphs "
               "(mixed prefill-decode, PIECEWISE):  50%|█████     | 33/67 [00:02<00:02, 14.1it/s]"], ended=False)
    assert (r.engine, r.phase, r.progress.done, r.progress.total) == ("vllm", "graph_capture", 33, 67)


def test_tensorrt_llm_cpp_logger_and_rank_tags() -> None:
    """trtllm-fail-nccl-rank-13 (TensorRT-LLM#9263) and trtllm-fail-gemm-rank-14 (TensorRT-LLM#5389)."""
    for name in ("trtllm-fail-nccl-rank-13", "trtllm-fail-gemm-rank-14"):
        e = _expected(name)
        r = read_path(str(EXTRA_LOGS / f"{name}.log"))
        assert (r.engine, r.state, r.cause, r.error.line) == ("trtllm", "failed", e["cause"], e["error_line"]), name
    r = _read(["[TensorRT-LLM][RANK 3][ERROR] CUDA runtime error in cudaMalloc(&ptr, n): out of memory "
               "(/src/tensorrt_llm/runtime/bufferManager.cpp:42)"])
    assert (r.engine, r.cause) == ("trtllm", "cuda_oom")


def test_torch_c10d_prefix_after_a_rank_tag() -> None:
    # derived: torch 2.5+ c10d lines: "[rank10]:[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] ...".
    r = _read(["[rank10]:[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
               "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error"])
    assert (r.state, r.cause) == ("failed", "dist_timeout")
    assert r.error.text.startswith("[rank10]:[E130")
    line = parse(1, "[rank10]:[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed")
    assert (line.rank, line.level, line.msg, line.stamp.month, line.stamp.day) == (
        "rank10", "E", "Gloo connectFullMesh failed", 1, 30)


def test_lines_quoted_with_markdown_markers_read_as_the_bare_lines() -> None:
    """tgi-loading-11-quoted (TGI#3293), vllm-fail-wrap-quoted-25 (vllm-ascend#3513)."""
    for name in ("tgi-loading-11-quoted", "vllm-fail-wrap-quoted-25"):
        e = _expected(name)
        r = read_path(str(EXTRA_LOGS / f"{name}.log"))
        assert (r.engine, r.state, r.phase) == (e["engine"], e["state"], e["phase"]), name
    raw = (LOGS / "vllm-fail-oom-01.log").read_bytes()
    quoted = b"".join(b"> " + line + b"\n" for line in raw.split(b"\n"))
    bare, q = read_stream(io.BytesIO(raw)), read_stream(io.BytesIO(quoted))
    assert (q.state, q.cause, q.phase, q.error.line) == (bare.state, bare.cause, bare.phase, bare.error.line)


def test_a_compose_log_of_several_services_reads_the_engines_service() -> None:
    """vllm-ok-wrap-compose-21 (AetharaAI/AetherVoice-X), ollama-ok-wrap-compose-21 (4020AIServer)."""
    for name in ("vllm-ok-wrap-compose-21", "ollama-ok-wrap-compose-21"):
        e = _expected(name)
        r = read_path(str(EXTRA_LOGS / f"{name}.log"))
        assert (r.engine, r.state, r.service) == (e["engine"], e["state"], e["service"]), name


def test_another_services_ready_line_is_not_the_engines() -> None:
    # derived: a web UI (FastAPI under Uvicorn) is up before the vLLM service has loaded.
    lines = ["webui-1  | INFO:     Started server process [1]",
             "webui-1  | INFO:     Application startup complete.",
             "vllm-1   | INFO 11-02 10:00:00 [api_server.py:1896] vLLM API server version 0.11.0",
             "vllm-1   | INFO 11-02 10:00:05 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
             "webui-1  | INFO:     10.0.0.2:51234 - \"GET / HTTP/1.1\" 200 OK"]
    r = _read(lines, ended=False)
    assert (r.engine, r.state, r.phase, r.service) == ("vllm", "loading", "weights", "vllm")


# --- wording ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llamacpp-fail-vulkan-warmup-11", "trtllm-fail-trtoom-build-11",
                                  "trtllm-fail-oom-triton-12", "llamacpp-fail-rocm-oom-12"])
def test_out_of_memory_in_every_backends_words(name: str) -> None:
    """Vulkan (vk::OutOfDeviceMemoryError), TensorRT ("Error Code 2: OutOfMemory"), TensorRT-LLM's
    C++ check ("...: out of memory (file.h:112)"), ROCm through llama.cpp."""
    e = _expected(name)
    r = read_path(str(EXTRA_LOGS / f"{name}.log"))
    assert (r.state, r.cause, r.error.line) == ("failed", "cuda_oom", e["error_line"])


def test_sglang_watchdog_timeout_outranks_the_shells_killed() -> None:
    """sglang-fail-watchdog-13 (sglang#17941): SGLang kills itself after the watchdog fires; the
    shell's bare ``Killed`` is not the kernel's OOM killer."""
    e = _expected("sglang-fail-watchdog-13")
    r = read_path(str(EXTRA_LOGS / "sglang-fail-watchdog-13.log"))
    assert (r.state, r.cause, r.error.line) == ("failed", "unknown", e["error_line"])
    assert "watchdog" in r.hint and "OOM" not in r.hint


def test_gloo_mesh_and_store_timeouts_are_distributed_handshake_failures() -> None:
    """tgi-fail-storetimeout-12 (TGI#714): c10d TCPStore "Socket Timeout"."""
    r = read_path(str(EXTRA_LOGS / "tgi-fail-storetimeout-12.log"))
    assert (r.state, r.cause) == ("failed", "dist_timeout")


def test_vllm_debug_per_shape_capture_lines_are_graph_capture() -> None:
    """vllm-loading-debug-capture-17 (vllm#23739): "Warming up 1/1 for shape N" is not the warm-up."""
    r = read_path(str(EXTRA_LOGS / "vllm-loading-debug-capture-17.log"))
    assert (r.state, r.phase, r.phases_seen) == ("loading", "graph_capture", ["graph_capture"])
    assert (r.progress.done, r.progress.total) == (22, 53)


def test_speculative_decodings_capture_stages_are_graph_capture() -> None:
    """sglang-ok-spec-dspark-12: target, draft and draft-extend captures."""
    r = read_path(str(EXTRA_LOGS / "sglang-ok-spec-dspark-12.log"))
    assert r.state == "ready" and "graph_capture" in r.phases_seen


def test_new_causes_gpu_arch_and_bad_config() -> None:
    """vllm-fail-gpuarch-16 (vllm#14452), vllm-fail-badconfig-quant-15; and a pydantic error whose
    message names an unsupported architecture stays unsupported_model (vllm-fail-unsupported-pydantic-14)."""
    for name, cause in (("vllm-fail-gpuarch-16", "gpu_arch"), ("vllm-fail-badconfig-quant-15", "bad_config"),
                        ("vllm-fail-unsupported-pydantic-14", "unsupported_model")):
        e = _expected(name)
        r = read_path(str(EXTRA_LOGS / f"{name}.log"))
        assert (r.cause, r.error.line) == (cause, e["error_line"]), name
        assert r.hint


def test_a_wrapped_exception_whose_message_is_a_traceback_gives_way_to_the_nested_one() -> None:
    """vllm-fail-wrap-rayserve-23 (kuberay#4366): Ray's ``RuntimeError: Traceback (most recent call
    last):`` wraps vLLM's own ValueError, the root cause."""
    e = _expected("vllm-fail-wrap-rayserve-23")
    r = read_path(str(EXTRA_LOGS / "vllm-fail-wrap-rayserve-23.log"))
    assert (r.engine, r.error.line) == ("vllm", e["error_line"])


# --- starts ------------------------------------------------------------------------------------

def test_systemd_only_excerpts_count_each_exit_as_a_start() -> None:
    # derived: `journalctl -u vllm | grep -E 'exited|restart|repeated'` of a crash loop.
    lines = ["Nov 29 16:27:20 gpu-node-1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
             "Nov 29 16:27:25 gpu-node-1 systemd[1]: vllm.service: Scheduled restart job, restart counter is at 1.",
             "Nov 29 16:27:40 gpu-node-1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
             "Nov 29 16:27:45 gpu-node-1 systemd[1]: vllm.service: Scheduled restart job, restart counter is at 2.",
             "Nov 29 16:28:00 gpu-node-1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
             "Nov 29 16:28:00 gpu-node-1 systemd[1]: vllm.service: Start request repeated too quickly."]
    r = _read(lines)
    assert (r.starts, r.restart_loop, r.state, r.gave_up) == (3, True, "failed", True)


def test_two_banner_lines_of_one_vllm_launch_are_one_start() -> None:
    """vllm-fail-badconfig-quant-15: the version banner and ``non-default args``."""
    assert read_path(str(EXTRA_LOGS / "vllm-fail-badconfig-quant-15.log")).starts == 1


def test_a_start_seen_only_as_it_was_stopped_is_a_start() -> None:
    """ollama-warn-cudainit-15: Stopping/Stopped of the previous start, then a new one."""
    r = read_path(str(EXTRA_LOGS / "ollama-warn-cudainit-15.log"))
    assert (r.starts, r.state) == (2, "ready")


def test_tqdm_bars_with_a_postfix_tail_are_bars() -> None:
    # derived: tqdm's set_postfix appends ", name=value" inside the brackets.
    r = _read(["[2025-10-01 12:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.",
               "Capturing batches (bs=128 avail_mem=20.1 GB):  41%|████      | 21/51 [00:07<00:09,  3.1it/s, n=7/17]"],
              ended=False)
    assert (r.progress.phase, r.progress.done, r.progress.total) == ("graph_capture", 21, 51)


def test_a_shell_prompt_glued_to_the_first_log_line_keeps_the_line() -> None:
    """trtllm-ok-11-triton: ``root@gpu-node-1:/workspace# I0521 10:03:57.685707 107 ...]``."""
    r = read_path(str(EXTRA_LOGS / "trtllm-ok-11-triton.log"))
    assert (r.engine, r.state) == ("trtllm", "ready")


# --- what replay --json says -------------------------------------------------------------------------

def _replay_json(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tui", "replay", "--json", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_replay_json_lists_the_suspects_and_the_service() -> None:
    out = _replay_json(EXTRA_LOGS / "vllm-ok-wrap-compose-21.log")
    assert (out["service"], out["suspects"]) == ("voxtral", [])
    out = _replay_json(EXTRA_LOGS / "sglang-fail-graphcap-cut-14.log")
    assert out["service"] is None
    assert out["suspects"] and {"line", "cause", "text"} == set(out["suspects"][0])
    assert out["error"]["line"] in [s["line"] for s in out["suspects"]]


def test_a_harmless_warning_does_not_hide_a_later_failure_in_a_log_without_prefixes() -> None:
    # derived: llama.cpp lines carry no prefix that would end the warning's message.
    lines = ["build: 5489 (2d38b6e4) with cc (Ubuntu 9.4.0) 9.4.0 for x86_64-linux-gnu",
             "warning: the option --log-disable is deprecated, use --log-verbosity",
             *[f"llama_model_loader: - kv {i:3d}: general.name str = Qwen3" for i in range(30)],
             "alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624"]
    r = _read(lines)
    assert (r.state, r.cause, r.error.line) == ("failed", "cuda_oom", 33)
    # ... while the warning's own continuation lines right after it stay harmless.
    near = _read(lines[:2] + ["ValueError: not a real error, part of the warning's text"])
    assert near.state == "loading"


# --- found by a fresh user trying to break it (each a class, the inputs derived from real logs) -----

def test_a_thread_that_dies_of_an_exception_does_not_end_the_start() -> None:
    # derived: Python's threading.excepthook output inside an SGLang start that goes on.
    lines = ["[2025-05-02 16:13:35] server_args=ServerArgs(model_path='/models/m', tp_size=1)",
             "[2025-05-02 16:14:30 TP0] Load weight end. type=Qwen3ForCausalLM, avail mem=6.09 GB",
             "Exception in thread Thread-3 (_metrics_loop):",
             "Traceback (most recent call last):",
             '  File "/usr/lib/python3.12/threading.py", line 1075, in _bootstrap_inner',
             "    self.run()",
             "OSError: [Errno 98] Address already in use",
             "[2025-05-02 16:14:33 TP0] Capture cuda graph begin. This can take up to several minutes.",
             "Capturing batches (avail_mem=0.00 GB):  50%|█████     | 2/4 [00:05<00:05,  2.50s/it]"]
    r = _read(lines)
    assert (r.state, r.phase, r.cause) == ("loading", "graph_capture", None)
    assert (r.progress.done, r.progress.total) == (2, 4)


def test_the_level_of_pythons_default_logging_format_and_of_a_level_word_counts() -> None:
    # derived: "WARNING:name:message" (logging.basicConfig) and SGLang builds that log "[time] WARNING".
    for head in ("WARNING:sglang.srt.layers.quantization:Failed to import optional kernel, falling back",
                 "[2025-05-02 16:14:33] WARNING Failed to import optional kernel, falling back"):
        lines = ["[2025-05-02 16:13:35] server_args=ServerArgs(model_path='/models/m', tp_size=1)", head,
                 "Traceback (most recent call last):",
                 '  File "/sgl-workspace/sglang/python/sglang/srt/layers/quantization/__init__.py", line 9, in <module>',
                 "ModuleNotFoundError: No module named 'vllm'"]
        r = _read(lines)
        assert (r.state, r.cause) == ("loading", None), head


def test_a_failed_request_while_serving_is_not_a_failed_start_when_requests_are_answered_after() -> None:
    """llamacpp-ok-01 (a real ready start) followed by a compute-buffer failure and answered requests."""
    raw = (LOGS / "llamacpp-ok-01.log").read_bytes()
    tail = (b"ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 4412555264\n"
            b"srv    send_error: task id = 7, error: Failed to allocate compute buffer\n"
            b"srv  log_server_r: request: POST /completion 127.0.0.1 500\n"
            b"srv  log_server_r: request: POST /completion 127.0.0.1 200\n")
    assert read_stream(io.BytesIO(raw + tail)).state == "ready"
    # ... while the same failure with nothing answered after it is the end of the start.
    died = read_stream(io.BytesIO(raw + tail.split(b"\n", 1)[0] + b"\n"))
    assert (died.state, died.cause) == ("failed", "cuda_oom")


def test_a_quoted_tracebacks_source_line_is_not_the_decisive_line() -> None:
    """vllm-fail-silent-01 quoted with "> " (and with ">" alone): the source line stays code."""
    raw = (LOGS / "vllm-fail-silent-01.log").read_bytes().rstrip(b"\n").split(b"\n")
    for mark in (b"> ", b">"):
        quoted = b"".join(mark + line + b"\n" for line in raw)
        r = read_stream(io.BytesIO(quoted))
        assert (r.state, r.cause, r.error.line) == ("failed", "engine_died", 65), mark


def test_of_two_engine_services_the_reading_is_the_worse_one() -> None:
    """A compose log of an embedding server (vllm-ok-01, ready) and the chat model
    (sglang-fail-graphcapture-01, failed), lines interleaved: the failed one is read and named."""
    a = [b"embed-1  | " + ln for ln in (LOGS / "vllm-ok-01.log").read_bytes().split(b"\n") if ln]
    b = [b"llm-1    | " + ln for ln in (LOGS / "sglang-fail-graphcapture-01.log").read_bytes().split(b"\n") if ln]
    mixed = [x for pair in zip(a, b) for x in pair] + a[len(b):] + b[len(a):]
    r = read_stream(io.BytesIO(b"\n".join(mixed) + b"\n"))
    assert (r.engine, r.state, r.service, r.engine_services) == ("sglang", "failed", "llm", 2)


def test_a_forced_engine_does_not_make_a_web_ui_the_engines_service() -> None:
    # derived: only the web UI has spoken yet in a compose log of two services.
    lines = ["webui-1  | INFO:     Started server process [1]",
             "webui-1  | INFO:     Application startup complete.",
             "redis-1  | 1:M 01 Dec 2026 07:00:00.000 * Ready to accept connections tcp"]
    r = _read(lines, engine="vllm", ended=False)
    assert (r.state, r.starts) == ("loading", 0)


def test_json_records_shipped_at_info_level_still_show_errors_and_read_as_their_message() -> None:
    """vllm-fail-oom-hip-01 as a log shipper writes it: every record "level": "INFO"."""
    recs = [json.dumps({"timestamp": "2026-05-08T11:50:14.752Z", "level": "INFO", "message": ln.decode()})
            for ln in (EXTRA_LOGS / "vllm-fail-oom-hip-01.log").read_bytes().split(b"\n") if ln]
    r = read_stream(io.BytesIO("\n".join(recs).encode() + b"\n"))
    e = _expected("vllm-fail-oom-hip-01")
    assert (r.state, r.cause, r.error.line) == ("failed", "cuda_oom", e["error_line"])
    assert r.error.text.startswith("2026-05-08 11:50:14.752 [Error]")  # the message, not the JSON


def test_more_wordings_of_distributed_and_gated_repository_failures() -> None:
    # derived: torch 2.4+ and huggingface_hub wordings.
    r = _read(["torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while "
               "trying to connect to (10.0.0.1, 29500)."])
    assert r.cause == "dist_timeout"
    r = _read(["OSError: You are trying to access a gated repo. Make sure to have access to it at "
               "https://huggingface.co/meta-llama/Llama-3.1-8B."])
    assert r.cause == "model_not_found"
