"""The engine tables: every rule matches its own example through the fast matcher, and the reader's
rules of the game (ranks, restarts, years, warnings) hold on small made-up sequences of real lines."""

from __future__ import annotations

import re

import pytest

from probes.data.vocab import CAUSES, PHASES
from probes.logs.engines import ENGINES, _detect_only, frame_matcher_for, matcher_for
from probes.logs.engines import common
from probes.logs.engines.base import BarLabel, Matcher, Rule, derive_keys, literal_head
from probes.logs.reader import StartupReader

ALL_RULES = [(None, r) for r in common.RULES] + [(name, r) for name, e in ENGINES.items() for r in e.rules]


@pytest.mark.parametrize("engine, rule", ALL_RULES, ids=lambda x: x.pattern[:40] if isinstance(x, Rule) else str(x))
def test_every_rule_matches_its_example_through_the_matcher(engine, rule) -> None:
    assert rule.example, "every rule carries a real example line"
    # Detection-only rules matter only while the engine is unknown; the rest hold once it is known.
    if rule.frame:  # frame rules run on traceback frames and their source lines only
        matcher = frame_matcher_for(engine)
    else:
        matcher = matcher_for(None) if _detect_only(rule) else matcher_for(engine or "vllm")
    hits = matcher.match(rule.example)
    assert rule in [r for r, _ in hits], f"key words {rule.keys} do not select {rule.pattern!r}"


def test_detection_rules_are_dropped_once_the_engine_is_known() -> None:
    known = matcher_for("vllm").rules
    assert not any(_detect_only(r) for r in known)
    assert any(_detect_only(r) for r in matcher_for("vllm", committed=False).rules)


def test_derived_keys_are_whole_literal_words() -> None:
    assert derive_keys(r"Load weight begin") == ("weight",)
    assert derive_keys(r"Capture cuda graph begin\. avail mem=\d+") == ("capture",)
    assert derive_keys(r"Python\.h: No such file or directory") == ("directory",)
    with pytest.raises(ValueError):
        derive_keys(r"\d+/\d+")


def test_a_literal_head_is_text_every_match_begins_with() -> None:
    assert literal_head(r"CUDA out of memory") == "CUDA out of memory"
    assert literal_head(r"^Start(?:ed|ing) (?P<what>.+?)$") == "Start"
    assert literal_head(r"Free memory on device .{0,200}? is") == "Free memory on device "
    assert literal_head(r"Workers? died") == "Worker"
    assert literal_head(r"abcde?f") == "abcd"
    assert literal_head(r"\bserver (?:is )?ready") == "server "  # a boundary or spaces first: skipped
    assert literal_head(r"^\s*Downloading \S") == "Downloading "
    assert literal_head(r"\s*?abcd") is None
    assert literal_head(r"Python\.h: No such") == "Python.h: No such"  # escaped punctuation is itself
    assert literal_head(r"ab\1cdef") is None  # a back-reference ends it
    assert literal_head(r"abcd\.?e") == "abcd"
    assert literal_head(r"\.(?<=x)json") is None and literal_head(r"\.(?<=x)json", shortest=1) == "."
    assert literal_head(r"foo bar|baz qux") is None  # either branch: no one text
    assert literal_head(r"out of memory", re.IGNORECASE) is None  # any case: no fixed text
    assert literal_head(r"abc") is None  # too short to be worth a test


def test_the_literal_head_never_hides_a_match() -> None:
    # A line without the head is skipped, not searched: every rule's example still matches, and
    # a head in the middle of a line (after the key word) is found there.
    rule = Rule(r"CUDA out of memory", cause="cuda_oom")
    m = Matcher([rule])
    assert [r for r, _ in m.match("torch.OutOfMemoryError: CUDA out of memory. Tried")] == [rule]
    assert m.match("torch.OutOfMemoryError: cuda out of memory") == []
    for _engine, r in ALL_RULES:
        if r.example and not r.frame and r.rx.search(r.example):
            head = literal_head(r.pattern, r.flags)
            assert head is None or head in r.example, r.pattern


def test_a_bar_label_answers_as_its_regex_does() -> None:
    bar = BarLabel(r"checkpoint shards|load(?:ing)? model weights", "weights")
    assert bar.heads == ("checkpoint shards", "load")
    for label in ("Loading safetensors checkpoint shards:  50% Completed ", "LOADING MODEL WEIGHTS: 3%",
                  "Engine 000: Avg prompt throughput: 0.0 tokens/s, GPU KV cache usage: 0.0%",
                  "ſafetensors checkpoint ſhards: 1%",  # non-ASCII: case folding is left to re
                  "checkpoint ſhards 5%", "load model weights", "lo ad"):
        low = label.lower() if label.isascii() else None
        assert bar.search(label, low) == (bar.rx.search(label) is not None), label
    assert BarLabel(r"^\s*downloading|\.json", "download").heads == ("downloading", ".json")
    assert BarLabel(r"downloading|\d+ files", "download").heads is None  # a branch with no head
    assert BarLabel(r"Loading weights", "weights", flags=0).heads is None  # case-sensitive: no lower copy


def test_alternation_without_keys_is_refused() -> None:
    with pytest.raises(ValueError):
        Rule(r"foo|bar")


def test_phase_and_cause_ids_are_canonical() -> None:
    for _, rule in ALL_RULES:
        assert rule.phase is None or rule.phase in PHASES
        assert rule.cause is None or rule.cause in CAUSES


def _read(lines: list[str], engine: str | None = None):
    """The reading of a log of these lines that ends there (as ``upwatch replay`` reads a file)."""
    reader = StartupReader(engine)
    for line in lines:
        reader.feed(line)
    return reader.reading(ended=True)


def test_a_phase_is_the_hosts_only_when_every_rank_has_reached_it() -> None:
    lines = [f"[2025-03-08 12:29:13 TP{i}] Load weight begin. avail mem=21.63 GB" for i in range(4)]
    lines += ["[2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 46611",
              "[2025-03-08 12:29:21 TP1] KV Cache is allocated. #tokens: 46611"]
    r = _read(lines)
    assert r.phase == "weights"                          # TP2 and TP3 are still loading
    assert r.phases_seen == ["weights", "init"]         # but init has begun (first attributable line)
    r = _read(lines + [f"[2025-03-08 12:29:21 TP{i}] KV Cache is allocated. #tokens: 1" for i in (2, 3)])
    assert r.phase == "init"


def test_progress_is_the_slowest_ranks() -> None:
    bar = "(Worker_TP{} pid=1{}) Loading safetensors checkpoint shards:  {}% Completed | {}/8 [00:01<00:01,  1.0it/s]"
    r = _read(["vllm serve m --tensor-parallel-size 2", bar.format(0, 0, 75, 6), bar.format(1, 1, 25, 2),
               bar.format(0, 0, 100, 8)])
    assert r.progress is not None
    assert (r.progress.phase, r.progress.done, r.progress.total) == ("weights", 2, 8)


def test_a_date_without_a_year_takes_the_year_of_the_nearest_full_date() -> None:
    r = _read(["INFO 12-31 23:59:58 api_server.py:151] vLLM API server version 0.4.1",
               "INFO 01-01 00:00:03 model_runner.py:173] Loading model weights took 14.9595 GB"] + ["x"] * 5 +
              ["[2026-01-01 00:00:09] something with a full date"])
    # Across New Year: the December line before a January full date belongs to the year before.
    assert [m.time for m in r.phases] == ["2025-12-31T23:59:58", "2026-01-01T00:00:03"]
    assert r.phases[0].duration_s == 5.0
    r = _read(["INFO 12-31 23:59:55 api_server.py:151] vLLM API server version 0.4.1",
               "INFO 01-01 00:00:10 model_runner.py:173] Loading model weights took 14.9595 GB"])
    assert r.phases[0].duration_s == 15.0                    # no year anywhere: still 15 s, not 0
    r = _read(["[2025-12-31 23:59:00] before", "INFO 12-31 23:59:58 api_server.py:151] vLLM API server version 0.4.1"]
              + ["x"] * 5 + ["[2026-01-01 00:00:09] after"])
    assert r.phases[0].time == "2025-12-31T23:59:58"     # the nearer full date wins
    r = _read(["INFO 02-12 19:33:39 api_server.py:151] vLLM API server version 0.4.1"])
    assert r.phases[0].time == "--02-12T19:33:39"         # no full date anywhere: no year


def test_phase_durations_come_from_line_times() -> None:
    r = _read(["[2025-03-08 12:29:04] server_args=ServerArgs(model_path='m')",
               "[2025-03-08 12:29:13] Load weight begin. avail mem=21.63 GB",
               "[2025-03-08 12:30:13] Load weight end. type=Qwen2ForCausalLM",
               "[2025-03-08 12:30:43] KV Cache is allocated. #tokens: 46611"])
    assert [m.duration_s for m in r.phases] == [9.0, 90.0, 0.0]


def test_warnings_that_do_not_stop_the_server_are_not_failures() -> None:
    r = _read(["[2026-05-22 15:58:30] Ignore import error when loading sglang.srt.multimodal.processors.x: "
               "Could not load libtorchcodec. Likely causes:",
               "FFmpeg version 7: Could not load this library: libtorchcodec_core7.so",
               "OSError: libavutil.so.59: cannot open shared object file: No such file or directory",
               "[2025-03-08 12:29:12 TP0] Custom allreduce is disabled because it's not supported on more "
               "than two PCIe-only GPUs."])
    assert r.state == "loading" and r.error is None


def test_the_root_cause_beats_its_consequences_whatever_their_order() -> None:
    r = _read(["ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 died, exit code: -6",
               "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: x",
               "RuntimeError: Engine core initialization failed. See root cause above."])
    assert (r.cause, r.error.line) == ("nccl", 2)


def test_a_traceback_source_line_is_not_the_error() -> None:
    r = _read(['  File "/v/utils.py", line 786, in wait_for_engine_startup',
               '    raise RuntimeError("Engine core initialization failed. "',
               "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"])
    assert (r.cause, r.error.line) == ("engine_died", 3)


def test_restarts_from_systemd_lines() -> None:
    started = "Nov 15 21:48:43 gpu-node-1 systemd[1]: Started Ollama Service."
    crash = "Nov 15 21:48:43 gpu-node-1 systemd[1]: ollama.service: Main process exited, code=dumped, status=11/SEGV"
    restart = "Nov 15 21:48:46 gpu-node-1 systemd[1]: ollama.service: Scheduled restart job, restart counter is at {}."
    r = _read([started, crash])
    assert (r.starts, r.restart_loop, r.cause) == (1, False, "core_dump")
    r = _read([started, crash, restart.format(1), started, crash, restart.format(2), started])
    assert (r.starts, r.state, r.cause, r.restart_loop) == (3, "loading", None, True)
    assert r.error is not None and r.error.line == 5        # the latest failure, while the new start loads
    assert r.restart_counter == 2


def test_a_ready_start_resets_the_loop() -> None:
    started = "Nov 15 21:48:43 gpu-node-1 systemd[1]: Started Ollama Service."
    crash = "Nov 15 21:48:43 gpu-node-1 systemd[1]: ollama.service: Main process exited, code=exited, status=1/FAILURE"
    ready = 'Nov 15 21:48:44 gpu-node-1 ollama[9]: time=2024-11-02T10:00:00.000Z level=INFO source=routes.go:1 ' \
            'msg="Listening on 127.0.0.1:11434 (version 0.5.7)"'
    r = _read([started, crash, started, ready, started, crash])
    assert (r.starts, r.restart_loop) == (3, False)
    # A crash after serving counts as one failure: with the next start failing too, that is two.
    r = _read([started, crash, started, ready, crash, started, crash])
    assert (r.starts, r.restart_loop) == (3, True)


def test_a_stop_on_purpose_is_stopped_not_failed() -> None:
    r = _read(["Nov 15 21:48:43 gpu-node-1 systemd[1]: Started vLLM.",
               "Nov 15 21:48:44 gpu-node-1 python3[7]: INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.4.1",
               "Nov 15 21:50:00 gpu-node-1 systemd[1]: Stopping vLLM...",
               "Nov 15 21:50:01 gpu-node-1 systemd[1]: vllm.service: Main process exited, code=killed, status=15/TERM",
               "Nov 15 21:50:01 gpu-node-1 systemd[1]: vllm.service: Failed with result 'signal'.",
               "Nov 15 21:50:01 gpu-node-1 systemd[1]: Stopped vLLM."])
    assert (r.state, r.cause, r.starts) == ("stopped", None, 1)


def test_banner_repeats_without_systemd_are_new_starts() -> None:
    banner = "INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.4.1"
    r = _read([banner, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", banner])
    assert (r.starts, r.state, r.phase) == (2, "loading", "starting")
    assert r.error is not None and r.error.line == 2


def test_engine_given_is_used_and_unknown_engine_is_refused() -> None:
    assert _read(["hello"], engine="tgi").engine == "tgi"
    assert _read(["hello"]).engine == "unknown"
    with pytest.raises(ValueError):
        StartupReader("nosuch")


def test_nccl_noticing_a_dead_peer_is_a_consequence_of_that_peers_exception() -> None:
    r = _read(["[2025-03-08 12:29:21 TP0] Capture cuda graph begin. This can take up to several minutes.",
               "[2025-03-08 12:29:25 TP1] Scheduler hit an exception: Traceback (most recent call last):",
               "KeyError: 'BLOCK_SIZE_M'",
               "[2025-03-08 12:29:26 TP0] torch.distributed.DistBackendError: NCCL error in: "
               "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error",
               "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
               "prematurely."])
    assert (r.cause, r.error.line) == ("unknown", 3)


VLLM_READY = ["INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.4.1",
              "INFO 05-04 14:43:20 model_runner.py:173] Loading model weights took 14.9595 GB",
              "INFO:     Started server process [23347]",
              "INFO:     Application startup complete."]


def test_a_crash_long_after_ready_is_a_crash_while_serving() -> None:
    r = _read(VLLM_READY + ["ERROR 05-04 16:11:23 engine.py:1] torch.OutOfMemoryError: CUDA out of memory. "
                            "Tried to allocate 2.00 GiB."])
    assert (r.state, r.phase, r.cause) == ("failed", "ready", "cuda_oom")
    assert r.phases_seen[-1] == "ready"


def test_an_exception_while_serving_is_the_root_cause_when_the_engine_dies_of_it() -> None:
    r = _read(VLLM_READY + ["RuntimeError: CUDA error: an illegal memory access was encountered"])
    assert r.state == "ready"        # one failed request does not end a server
    r = _read(VLLM_READY + ["RuntimeError: CUDA error: an illegal memory access was encountered",
                            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                            "See stack trace (above) for the root cause."])
    assert (r.state, r.cause, r.error.line) == ("failed", "unknown", 5)


@pytest.mark.parametrize("dead", [
    # vLLM V0: every request after the engine's background loop died (vllm-project/vllm#5060, #6361)
    "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.",
    "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running. Inspect the stacktrace to find "
    "the original error: RuntimeError('CUDA error: an illegal memory access was encountered').",
])
def test_vllm_v0s_dead_engine_errors_end_the_start(dead) -> None:
    r = _read(VLLM_READY + [dead])
    assert (r.state, r.cause, r.error.line) == ("failed", "engine_died", 5)
    # After a request's exception, that exception is the root cause.
    r = _read(VLLM_READY + ["RuntimeError: CUDA error: an illegal memory access was encountered", dead])
    assert (r.state, r.error.line) == ("failed", 5)


def test_a_requests_traceback_cut_at_its_raise_line_ends_no_serving_start() -> None:
    # A fresh helper's break: the raise line's named cause ended a ready server's start.
    api = "(APIServer pid=11980) ERROR 02-12 19:40:00 [serving_chat.py:200] "
    r = _read(VLLM_READY + [api + "Error in preprocessing prompt inputs", api + "Traceback (most recent call last):",
                            api + '  File "/x/vllm/entrypoints/openai/serving_engine.py", line 9, in _validate',
                            api + '    raise ValueError("User-specified max_model_len (5000) is greater than the '
                                  'derived max_model_len (4096)")'])
    assert (r.state, r.cause) == ("ready", None)


@pytest.mark.parametrize("line", [
    # vLLM's retry of a Hub call (config.py, logged at ERROR, then it goes on); the 401 is a
    # fresh helper's: the wording's form is vLLM's
    "ERROR 05-04 14:43:20 [config.py:120] Error retrieving safetensors: 401 Client Error: Unauthorized for url: "
    "https://huggingface.co/api/models/org/model, retrying 1 of 2",
    "ERROR 05-04 14:43:20 [x.py:1] HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. "
    "Retrying in 5 s",
])
def test_a_failure_line_that_says_it_retries_ends_nothing(line) -> None:
    r = _read(VLLM_READY[:2] + [line])
    assert (r.state, r.cause) == ("loading", None)
    assert [s.line for s in r.suspects] == [3]  # shown, not decisive


def test_a_server_that_shut_down_after_serving_is_stopped() -> None:
    r = _read(VLLM_READY + ["INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                            "INFO:     Application shutdown complete.", "INFO:     Finished server process [23347]"])
    assert (r.state, r.cause) == ("stopped", None)


@pytest.mark.parametrize("line, cause", [
    ("Killed", "signal"),
    ("/opt/run.sh: line 3:  4242 Killed                  vllm serve m", "signal"),
    ("Bus error (core dumped)", "core_dump"),
    ("Aborted (core dumped)", "core_dump"),
    ("Illegal instruction (core dumped)", "core_dump"),
    ("terminate called after throwing an instance of 'c10::Error'", "core_dump"),
    ("Fatal Python error: Aborted", "core_dump"),
    ("  what():  CUDA error: an illegal memory access was encountered", "core_dump"),
    # Every crash signal as shells print it (strsignal's text): bash interactive, bash in a script
    # (no space, or padding, before "(core dumped)"), zsh in lower case, a job line, musl's wording.
    ("Floating point exception (core dumped)", "core_dump"),
    ("Floating point exception", "core_dump"),
    ('eval.sh: line 8: 158893 Floating point exception(core dumped) CUDA_VISIBLE_DEVICES = 0 python pipeline/gen.py',
     "core_dump"),
    ("zsh: floating point exception (core dumped)  python3 -m vllm.entrypoints.openai.api_server", "core_dump"),
    ("[1]    31674 floating point exception (core dumped)  ./a.out", "core_dump"),
    ("Arithmetic exception (core dumped)", "core_dump"),
    ("/opt/run.sh: line 3:  4242 Segmentation fault      (core dumped) vllm serve m", "core_dump"),
    ("zsh: segmentation fault  python3 -m sglang.launch_server", "core_dump"),
    ("Trace/breakpoint trap (core dumped)", "core_dump"),
    # ... and as the process itself says it: faulthandler, absl's failure handler (Ray), Go's runtime.
    ("(WorkerDict pid=129668) Fatal Python error: Floating point exception", "core_dump"),
    ("Fatal Python error: Illegal instruction", "core_dump"),
    ("*** SIGFPE received at time=1762841745 on cpu 48 ***", "core_dump"),
    ("SIGFPE: floating-point exception", "core_dump"),
    ("SIGBUS: bus error", "core_dump"),
    ("*** SIGSEGV (@0x0) received by PID 4242 (TID 0x7f00) from PID 0; stack trace: ***", "core_dump"),
    ("[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a2b1c]", "core_dump"),
    ("  traceback : Signal 11 (SIGSEGV) received by PID 12321", "core_dump"),  # torch elastic's summary
    ("Aborted (core dumped)", "core_dump"), ("Aborted", "core_dump"),
    ("/opt/run.sh: line 3:  4242 Aborted                 (core dumped) vllm serve m", "core_dump"),
])
def test_a_process_that_dies_in_native_code_or_by_signal_is_failed(line, cause) -> None:
    r = _read(VLLM_READY[:2] + [line])
    assert (r.state, r.cause, r.error.line) == ("failed", cause, 3)


@pytest.mark.parametrize("line", [
    "(EngineCore pid=1) INFO 02-12 19:35:00 [x.py:1] Installing faulthandler for SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL",
    "(EngineCore pid=1) INFO 02-12 19:35:00 [x.py:1] Setting SIGTRAP handler",
    "INFO 02-12 19:35:00 [x.py:1] Floating point exceptions are masked",
    # The words of a crash inside a message (a prompt a request log echoes), or beginning a
    # sentence that is no shell's report (a fresh user's try found each read "failed core_dump").
    "(APIServer pid=7) INFO 02-12 19:40:02 [logger.py:39] Received request chatcmpl-9: prompt: "
    "'my script prints Floating point exception (core dumped), why?', params: SamplingParams(n=1)",
    "(APIServer pid=7) INFO 02-12 19:40:02 [logger.py:39] Received request chatcmpl-9: prompt: "
    "'Segmentation fault (core dumped) in my C code', params: SamplingParams(n=1)",
    "(APIServer pid=7) INFO 02-12 19:40:02 [logger.py:39] Received request chatcmpl-9: prompt: "
    "'what does Fatal Python error: Segmentation fault mean', params: SamplingParams(n=1)",
    "Segmentation fault handler registered",
    "Floating point exception traps disabled",
    "Illegal instruction set extension AVX512 not available, using AVX2 kernels",
    "Bus error handling enabled",
    "*** SIGSEGV handler installed ***",
    # vLLM logs this whenever a client goes away (vllm-project/vllm#2484): no SIGABRT.
    "INFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request 0e89f1d2a7b04ac5b23cb7e0e37e1e88.",
    "(APIServer pid=11980) INFO 02-12 19:40:02 [async_llm.py:400] Aborted request(s) chatcmpl-3f2a.",
])
def test_a_line_that_only_names_a_signal_is_no_crash(line) -> None:
    # A wrong "failed" at 3 a.m. is worse than none: the name of a signal outside a crash report.
    r = _read(VLLM_READY[:2] + [line])
    assert r.state != "failed" and r.cause is None, line


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB.",
    "RuntimeError: CUDA error: out of memory",
    "torch.AcceleratorError: CUDA error: out of memory",
    "RuntimeError: CUDA driver error: out of memory",  # PyTorch's C10_CUDA_DRIVER_CHECK
    "RuntimeError: Triton Error [CUDA]: out of memory",  # Triton's launcher
    "RuntimeError: Triton Error [HIP]:  Code: 2, Messsage: out of memory",
    'DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")',  # the driver API's enum name
])
def test_cuda_out_of_memory_in_every_wording(line) -> None:
    r = _read(VLLM_READY[:2] + [line])
    assert (r.state, r.cause, r.error.line) == ("failed", "cuda_oom", 3)


@pytest.mark.parametrize("line", [
    "OSError: [Errno 28] No space left on device",  # Python
    "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B'",
    "Error: I/O error No space left on device (os error 28)",  # Rust (TGI's launcher, hf-hub)
    'safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
    'message: "No space left on device" })',
    'level=ERROR source=common.go:214 msg="failed to extract files" error="copy payload linux/amd64/cuda_v12/'
    'libggml.so: write /tmp/ollama3893034885/runners/cuda_v12/libggml.so: no space left on device"',  # Go
    "OSError: [Errno 122] Disk quota exceeded: '/workspace/.cache/huggingface/hub'",
])
def test_a_full_disk_is_its_own_cause_with_the_places_to_look(line) -> None:
    r = _read(VLLM_READY[:2] + [line])
    assert (r.state, r.cause, r.error.line) == ("failed", "disk_full", 3)
    assert "HF_HOME" in r.hint and "/tmp" in r.hint and "/dev/shm" in r.hint


@pytest.mark.parametrize("line, state, cause", [
    # pip's warning while a unit's ExecStartPre installs a wheel: its cache could not be written,
    # the install goes on. Logged at WARNING, it is a suspect to show, not a failed start.
    ("WARNING: Error writing to cache: [Errno 122] Disk quota exceeded: '/home/op/.cache/pip/http'",
     "loading", None),
    ("WARNING:  Disk quota exceeded for /scratch, falling back to /tmp", "loading", None),  # uvicorn-padded
    # pip's error is its last word: the install (and the unit's start) failed.
    ("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
     "failed", "disk_full"),
])
def test_a_level_printed_alone_before_the_message_is_the_lines_level(line, state, cause) -> None:
    r = _read(VLLM_READY[:2] + [line])
    assert (r.state, r.cause) == (state, cause), line
    assert [s.line for s in r.suspects] == [3]  # the line is shown either way


def test_a_level_word_alone_introduces_no_traceback_as_a_warnings() -> None:
    # A container's entrypoint: pip's warning, then the next command crashes (a fresh helper's
    # break of the bare-level parse: the traceback read as the warning's exc_info, low: loading).
    r = _read(["WARNING: Running pip as the 'root' user can result in broken permissions",
               "Traceback (most recent call last):",
               '  File "/usr/local/bin/vllm", line 5, in <module>',
               "    from vllm.entrypoints.cli.main import main",
               "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"])
    assert (r.state, r.cause, r.error.line) == ("failed", "shared_library", 5)


def test_the_cpp_exception_text_beats_terminate_called() -> None:
    r = _read(VLLM_READY[:2] + ["terminate called after throwing an instance of 'c10::Error'",
                                "  what():  CUDA error: an illegal memory access was encountered"])
    assert (r.cause, r.error.line) == ("core_dump", 4)


def test_ctrl_c_is_a_stop_not_a_crash() -> None:
    r = _read(VLLM_READY[:2] + ["Traceback (most recent call last):", '  File "x.py", line 3, in f',
                                "    time.sleep(1)", "KeyboardInterrupt"])
    assert (r.state, r.cause) == ("stopped", None)


def test_hints_follow_the_log() -> None:
    r = _read(["[2025-05-02 16:14:33] Load weight begin. avail mem=3.23 GB",
               "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."])
    assert "raise --mem-fraction-static" in r.hint
    r = _read(["2024-08-11T09:36:31.932556Z ERROR shard-manager: text_generation_launcher: Shard process was "
               "signaled to shutdown with signal 4 rank=0"])
    assert "SIGILL" in r.hint and "OOM" not in r.hint


def test_kv_cache_profiling_failures_are_init_not_weights() -> None:
    r = _read(["INFO 11-05 03:21:41 model_runner.py:1025] Loading model weights took 10.0714 GB",
               "ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while "
               "processing method determine_num_available_blocks: CUDA out of memory. Tried to allocate 1.95 GiB."])
    assert (r.phase, r.cause) == ("init", "cuda_oom")
    r = _read(["ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV "
               "cache is needed, which is larger than the available KV cache memory (9.62 GiB)."], engine="vllm")
    assert r.cause == "cuda_oom"


def test_a_failure_after_a_phase_said_it_was_done_is_in_the_next_phase() -> None:
    r = _read(["INFO 11-05 03:21:41 model_runner.py:1025] Loading model weights took 10.0714 GB",
               "ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess: "
               "CUDA out of memory."])
    assert (r.phase, r.phases_seen) == ("init", ["weights", "init"])
    # With ranks, only once every rank has finished: here TP1 is still loading when TP0 fails.
    r = _read(["[2025-03-08 12:29:13 TP0] Load weight begin. avail mem=21.63 GB",
               "[2025-03-08 12:29:13 TP1] Load weight begin. avail mem=21.63 GB",
               "[2025-03-08 12:29:21 TP0] Load weight end. type=Qwen2ForCausalLM",
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    assert r.phase == "weights"


def _v1(proc: str, text: str) -> str:
    return f"({proc} pid=7) INFO 11-24 14:52:34 [x.py:1] {text}"


def test_vllm_data_parallel_engines_are_ranks() -> None:
    """DP0 has captured its graphs while DP1 is still loading: the host is loading weights, and a
    failure of DP1 happened there."""
    lines = [_v1("APIServer", "non-default args: {'data_parallel_size': 2}"),
             _v1("EngineCore_DP0", "Initializing a V1 LLM engine (v0.11.0) with config: model='m'"),
             _v1("EngineCore_DP1", "Initializing a V1 LLM engine (v0.11.0) with config: model='m'"),
             _v1("EngineCore_DP0", "Starting to load model m..."),
             _v1("EngineCore_DP1", "Starting to load model m..."),
             _v1("EngineCore_DP0", "Model loading took 2.88 GiB memory and 27.9 seconds"),
             _v1("EngineCore_DP0", "Available KV cache memory: 10.14 GiB"),
             _v1("EngineCore_DP0", "Graph capturing finished in 3 secs, took 0.22 GiB")]
    r = _read(lines)
    assert r.phase == "weights"
    assert r.phases_seen == ["starting", "weights", "init", "graph_capture"]
    r = _read(lines + ["(EngineCore_DP1 pid=8) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    assert (r.state, r.phase, r.cause) == ("failed", "weights", "cuda_oom")


def test_a_vllm_engine_core_lagging_its_tp_workers_does_not_hold_the_host_back() -> None:
    r = _read([_v1("EngineCore_DP0", "Initializing a V1 LLM engine (v0.11.0) with config: model='m'"),
               _v1("Worker_TP0", "Starting to load model m..."),
               _v1("Worker_TP1", "Starting to load model m...")])
    assert r.phase == "weights"
    r = _read([_v1("EngineCore_DP0", "Initializing a V1 LLM engine (v0.11.0) with config: model='m'"),
               _v1("Worker_TP0", "Starting to load model m..."),
               _v1("Worker_TP0", "Available KV cache memory: 10.14 GiB")])
    assert r.phase == "init"     # TP1 has said nothing yet: the workers seen are all in init


def test_a_rule_is_compiled_when_a_line_first_tries_it() -> None:
    # Compiling every rule of every table was a tenth of `upwatch replay`'s start-up; a matcher,
    # its key look-ups and the literals the quiet path needs compile none, and a line compiles
    # only the rules its key words select. (Every pattern compiles: the test above tries each.)
    rules = [Rule(r.pattern, keys=r.keys, flags=r.flags, phase=r.phase, cause=r.cause, example=r.example)
             for r in common.RULES]
    matcher = Matcher(rules)
    for key in matcher.keys:
        matcher.required(key)
    assert [r.pattern for r in rules if "rx" in vars(r)] == []
    line = next(r.example for r in rules if r.cause == "cuda_oom")
    assert matcher.match(line)
    tried = [r for r in rules if "rx" in vars(r)]
    assert tried and len(tried) < len(rules) // 4


def test_vllm_is_known_by_its_cuda_graph_wording_where_its_prefix_is_not_read() -> None:
    # A pasted V0 log with its dates spaced out ("01 - 23", hkust-nlp/dart-math#7): no prefix to know
    # vLLM by, but "Capturing the model for CUDA graphs" is vLLM's own wording (weak: a stronger
    # sign of another engine wins).
    r = _read(["INFO 01 - 23 22:03:50 model_runner.py:980] Capturing the model for CUDA graphs. This may "
               "lead to unexpected consequences if the model is not static."])
    assert (r.engine, r.phase) == ("vllm", "graph_capture")


@pytest.mark.parametrize("runner", ["llama runner", "llama-server"])
def test_ollamas_model_runner_dying_is_read_in_the_old_and_the_0_30_wording(runner) -> None:
    # Ollama 0.30 runs llama.cpp's llama-server as its runner (ollama/ollama#16492).
    r = _read(['time=2026-06-04T02:00:45.974Z level=INFO source=sched.go:641 msg="Load failed" model=/m '
               f'error="{runner} process has terminated: signal: floating point exception (core dumped)"'])
    assert (r.engine, r.state, r.cause, r.error.line) == ("ollama", "failed", "engine_died", 1)
    assert "floating point exception" in r.hint


@pytest.mark.parametrize("budget", ["-2.14", "-2.77", "-0.31"])
def test_a_negative_kv_cache_budget_is_the_oom_not_the_engine_core_line_after_it(budget) -> None:
    # vLLM logs its KV budget at INFO and raises "No available memory for the cache blocks" when it
    # is not positive (vllm-project/vllm#23278, vllm-project/vllm-omni#469): an excerpt often ends
    # at the ERROR "EngineCore failed to start." and the traceback's first lines.
    r = _read(["(EngineCore_DP0 pid=563) INFO 12-23 23:34:23 [gpu_worker.py:298] Available KV cache memory: "
               f"{budget} GiB",
               "(EngineCore_DP0 pid=563) ERROR 12-23 23:34:23 [core.py:708] EngineCore failed to start.",
               "(EngineCore_DP0 pid=563) ERROR 12-23 23:34:23 [core.py:708] Traceback (most recent call last):"])
    assert (r.state, r.phase, r.cause, r.error.line) == ("failed", "init", "cuda_oom", 1)
    assert "--gpu-memory-utilization" in r.hint


def test_a_positive_kv_cache_budget_is_no_failure() -> None:
    r = _read(["(EngineCore_DP0 pid=6880) INFO 10-31 15:07:49 [gpu_worker.py:298] Available KV cache memory: 1.71 GiB",
               "(EngineCore_DP0 pid=6880) ERROR 10-31 15:07:50 [core.py:708] EngineCore failed to start."])
    assert (r.cause, r.error.line) == ("unknown", 2)
    r = _read(["(EngineCore_DP0 pid=6880) INFO 10-31 15:07:49 [gpu_worker.py:298] Available KV cache memory: 1.71 GiB"])
    assert (r.state, r.phase, r.cause) == ("loading", "init", None)


_KV_TB = ['(EngineCore_DP0 pid=1) ERROR 10-25 13:08:43 [core.py:708]   File "/x/vllm/v1/core/kv_cache_utils.py", '
          'line 699, in check_enough_kv_cache_memory',
          '(EngineCore_DP0 pid=1) ERROR 10-25 13:08:43 [core.py:708]     raise ValueError("No available memory for '
          'the cache blocks. "']


def test_a_traceback_cut_at_its_raise_line_names_what_was_raised() -> None:
    # vllm-project/vllm#27508: the excerpt ends at the source line that raises; it is the
    # decisive line only until the exception line itself comes.
    r = _read(_KV_TB)
    assert (r.state, r.phase, r.cause, r.error.line) == ("failed", "init", "cuda_oom", 2)
    r = _read(_KV_TB + ["(EngineCore_DP0 pid=1) ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory "
                        "for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."])
    assert (r.cause, r.error.line) == ("cuda_oom", 3)
    # An f-string message (sglang's pynccl wrapper) and its exception line: the exception line decides.
    r = _read(['  File "/a/sglang/srt/distributed/device_communicators/pynccl_wrapper.py", line 374, in NCCL_CHECK',
               '    raise RuntimeError(f"NCCL error: {error_str}")',
               "RuntimeError: NCCL error: remote process exited or there was a network error"], engine="sglang")
    assert r.error.line == 3


@pytest.mark.parametrize("line", [
    "(APIServer pid=1) requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: "
    "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json",  # rh-ai-quickstart#200
    "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
    "https://huggingface.co/api/models/meta-llama/Meta-Llama-3-8B",  # opea-project/GenAIInfra#100 (TGI)
    "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
    "https://huggingface.co/chansung/alpaca-lora-7b/resolve/main/adapter_config.json",  # deep-diver/LLM-As-Chatbot#8
    "huggingface_hub.utils._errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6604c5e0-374f)",
    "OSError: You are trying to access a gated repo.",  # transformers' hub.py (sgl-project/sglang#14644)
])
def test_the_hub_refusing_a_repository_is_model_not_found_in_download(line) -> None:
    r = _read(VLLM_READY[:1] + [line])
    assert (r.state, r.phase, r.cause, r.error.line) == ("failed", "download", "model_not_found", 2)
    assert "HF_TOKEN" in r.hint


def test_a_local_model_path_that_is_wrong_is_not_a_download() -> None:
    r = _read(VLLM_READY[:2] + ["OSError: /models/x is not a local folder and is not a valid model identifier "
                                "listed on 'https://huggingface.co/models'"])
    assert (r.phase, r.cause) == ("init", "model_not_found")


@pytest.mark.parametrize("line", [
    # transformers' prompt, printed where there is no stdin (runpod-workers/worker-vllm#43)
    "The repository for TheBloke/Nous-Capybara-34B-AWQ contains custom code which must be executed to correctly "
    "load the model. You can inspect the repository content at https://hf.co/TheBloke/Nous-Capybara-34B-AWQ.",
    # its ValueError (OpenGVLab/InternVL#1244, vllm-project/tpu-inference#2927)
    "ValueError: The repository `/data1/user/InternVL3-1B` contains custom code which must be executed to "
    "correctly load the model. You can inspect the repository content at https://hf.co//data1/user/InternVL3-1B.",
    "ValueError: The repository moonshotai/Kimi-K2.6 contains custom code which must be executed to correctly "
    "load the model. Please pass `trust_remote_code=True`.",
    # the older wording (lmstudio-ai/mlx-engine#172)
    "ValueError: Loading /m/Kimi-VL-A3B-Thinking-8bit requires you to execute the configuration file in that repo "
    "on your local machine. Make sure you have read the code there to avoid malicious use, then set the option "
    "`trust_remote_code=True` to remove this error.",
])
def test_a_model_that_needs_trust_remote_code_is_a_config_fix(line) -> None:
    r = _read(VLLM_READY[:1] + [line, "EOFError: EOF when reading a line"])
    assert (r.state, r.cause, r.error.line) == ("failed", "bad_config", 2)
    assert "--trust-remote-code" in r.hint


def test_a_wrapper_that_logs_the_vllm_config_names_the_engine() -> None:
    # runpod-workers/worker-vllm#43: the only line that names the engine is the worker's own.
    r = _read(["2024-02-08T08:40:56.016480879Z engine.py           :43   2024-02-08 08:40:56,015 vLLM config: "
               "{'model': 'TheBloke/Nous-Capybara-34B-AWQ', 'trust_remote_code': True}",
               "2024-02-08T08:40:56.162202300Z EOFError: EOF when reading a line"])
    assert r.engine == "vllm"
