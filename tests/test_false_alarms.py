"""Lines a healthy server prints, while it loads or once it serves, that hold a failure's words but
report no failure of the server: each kind must leave a serving server ready and a loading one
loading (a confident "failed" on a server that serves is the worst answer the reader can give).
Each line is a real wording (the source is next to it); the starts around them are lines of the
-ok- fixtures (tests/fixtures/logs)."""

from __future__ import annotations

import io

import pytest

from probes.logs.reader import StartupReader
from probes.sources.logfile import read_stream

# vllm-ok-01 (0.15.1, V1): no "Uvicorn running" line, so its ready stays provisional.
VLLM_V1 = ["(APIServer pid=11980) INFO 02-12 19:33:39 [utils.py:261] non-default args: {'model_tag': "
           "'openai/whisper-large-v3', 'host': '0.0.0.0'}",
           "(EngineCore_DP0 pid=12321) INFO 02-12 19:35:05 [gpu_model_runner.py:4033] Starting to load model "
           "openai/whisper-large-v3...",
           "(EngineCore_DP0 pid=12321) INFO 02-12 19:35:33 [default_loader.py:291] Loading weights took 2.70 seconds"]
VLLM_V1_READY = VLLM_V1 + ["(APIServer pid=11980) INFO:     Started server process [11980]",
                           "(APIServer pid=11980) INFO:     Waiting for application startup.",
                           "(APIServer pid=11980) INFO:     Application startup complete."]
# sglang-ok-01 (0.4.6): Uvicorn binds, then the warm-up request runs before the ready line.
SGLANG_WARMUP = ["[2025-05-02 16:13:35] server_args=ServerArgs(model_path='/models/Qwen3-0___6B', tp_size=1)",
                 "[2025-05-02 16:13:42] Load weight begin. avail mem=3.23 GB",
                 "[2025-05-02 16:14:33] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=2.03 GB",
                 "[2025-05-02 16:14:33] KV Cache is allocated. #tokens: 15387, K size: 0.82 GB, V size: 0.82 GB",
                 "[2025-05-02 16:14:58] Capture cuda graph end. Time elapsed: 24.85 s. mem usage=0.00 GB.",
                 "[2025-05-02 16:14:59] INFO:     Started server process [1320]",
                 "[2025-05-02 16:14:59] INFO:     Application startup complete.",
                 "[2025-05-02 16:14:59] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"]
SGLANG_READY = SGLANG_WARMUP + ["[2025-05-02 16:15:37] The server is fired up and ready to roll!"]
SGLANG_LOADING = SGLANG_WARMUP[:4]


def _read(lines: list[str]):
    """The reading of a log of these lines that ends there (as ``upwatch replay`` reads a file)."""
    reader = StartupReader()
    for line in lines:
        reader.feed(line)
    return reader.reading(ended=True)


def _healthy(lines: list[str], state: str) -> None:
    """The log reads ``state`` with no cause, line by line and as ``upwatch replay`` reads a file
    (its quiet lines found by the block scan)."""
    r = _read(lines)
    assert (r.state, r.cause, r.error) == (state, None, None), lines[-1]
    r = read_stream(io.BytesIO("\n".join(lines + [""]).encode()))
    assert (r.state, r.cause, r.error) == (state, None, None), lines[-1]


# Request logs echo what a client sent (vLLM's "Received request ...: prompt: '...'" and
# "Generated response ...: output: '...'",
# vllm-project/vllm#34503; SGLang's --log-requests "Receive: obj=GenerateReqInput(text='...')" and
# "Finish: obj=..., out={'text': '...'}",
# sgl-project/sglang#3699, #4045): a prompt may quote any error.
VLLM_PROMPTS = [
    "(APIServer pid=11980) INFO 02-13 11:33:33 [logger.py:49] Received request chatcmpl-a269fdcb: prompt: "
    "'my flask app says OSError: [Errno 98] Address already in use', params: SamplingParams(n=1), "
    "lora_request: None.",
    # ... and what it answered (--enable-log-outputs: RequestLogger.log_outputs).
    "(APIServer pid=11980) INFO 02-13 11:33:40 [logger.py:71] Generated response chatcmpl-a269fdcb (streaming "
    "complete): output: 'Uvicorn says error while attempting to bind on address (\\'0.0.0.0\\', 8000): address "
    "already in use: another process holds the port.', output_token_ids: None, finish_reason: stop",
]
SGLANG_PROMPTS = [
    "[2025-02-20 16:56:30] Receive: obj=GenerateReqInput(text='torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.95 GiB. why?', input_ids=[151644, 8948], sampling_params={'temperature': 0.7}, "
    "rid='ced00776101841e180bf04c8dbdc4ec2', stream=True, log_metrics=True, modalities=[], lora_path=None)",
    "[2025-02-20 16:56:30] Receive: obj=GenerateReqInput(text='RuntimeError: Not enough memory. Please try to "
    "increase --mem-fraction-static.', input_ids=None, rid='ced0', stream=True)",
    "[2025-03-03 17:53:04] Receive: obj=GenerateReqInput(text='ImportError: libcudart.so.12: cannot open shared "
    "object file: No such file or directory', input_ids=None, rid='ced0', stream=True)",
    # ... and what it answered (tokenizer_manager's "Finish: obj=..., out=...").
    "[2025-05-02 16:15:40] Finish: obj=GenerateReqInput(text='hi', rid='ab12'), out={'text': 'The error CUDA out "
    "of memory means the GPU ran out of memory.', 'meta_info': {'id': 'ab12', 'finish_reason': {'type': 'stop'}}}",
]


@pytest.mark.parametrize("line", VLLM_PROMPTS)
def test_a_prompt_a_vllm_request_log_echoes_is_no_failure(line) -> None:
    _healthy(VLLM_V1_READY + [line], "ready")     # took a provisional ready back as port_in_use
    _healthy(VLLM_V1 + [line], "loading")


@pytest.mark.parametrize("line", SGLANG_PROMPTS)
def test_a_prompt_an_sglang_request_log_echoes_is_no_failure(line) -> None:
    _healthy(SGLANG_READY + [line], "ready")      # read "failed" with the prompt's cause at the log's end
    _healthy(SGLANG_WARMUP + [line], "loading")   # the warm-up request is logged too


# NCCL probes for optional libraries (a network or tuner plugin, InfiniBand verbs) and says so when
# one is missing, then uses its own (NVIDIA/nccl#1231: "is harmless"; vllm-project/vllm#8978,
# NVIDIA/nccl-tests#166, NVIDIA/nccl#367).
NCCL_PROBES = [
    "cuda0003:2752870:2752870 [2] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
    "file: No such file or directory No plugin found (libnccl-net.so), using internal implementation",
    "ubuntu:9621:9621 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: "
    "cannot open shared object file: No such file or directory",
    "26a46eb2b1d3:111329:111329 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
]
NCCL_REFUSED = ("gpu-node-1:1180824:1180824 [3] os/linux.cc:200 NCCL WARN ncclOsSocketPollConnect: connect to "
                "10.0.0.2<58525> returned Connection refused, exceeded error retry count after 35 attempts")


@pytest.mark.parametrize("line", NCCL_PROBES)
def test_nccl_falling_back_from_an_optional_library_is_no_failure(line) -> None:
    _healthy(VLLM_V1_READY + [line], "ready")
    _healthy(VLLM_V1 + [line], "loading")
    _healthy(SGLANG_LOADING + [line], "loading")
    # ... and NCCL's own failure right after it is still read.
    r = _read(VLLM_V1 + [line, NCCL_REFUSED])
    assert (r.state, r.cause, r.error.line) == ("failed", "nccl", 5)


# Uvicorn logs a request's unhandled exception with its traceback and goes on serving (a client
# that went away: vllm-project/vllm#7173); SGLang's Uvicorn is up while its warm-up runs.
ASGI_TRACE = ["Traceback (most recent call last):",
              '  File "/opt/venv/lib/python3.10/site-packages/starlette/responses.py", line 265, in __call__',
              "    await wrap(partial(self.listen_for_disconnect, receive))",
              '  File "/usr/lib/python3.10/asyncio/locks.py", line 214, in wait',
              "    await fut",
              "asyncio.exceptions.CancelledError: Cancelled by cancel scope 757f107d7cd0"]


@pytest.mark.parametrize("head", ["[2025-05-02 16:15:00] ERROR:    Exception in ASGI application",
                                  "ERROR:    Exception in ASGI application"])
def test_one_requests_exception_in_uvicorn_while_warming_up_is_no_failure(head) -> None:
    _healthy(SGLANG_WARMUP + [head] + ASGI_TRACE, "loading")
    _healthy(SGLANG_READY + [head] + ASGI_TRACE, "ready")
    # The same traceback on its own is the process's last word.
    r = _read(SGLANG_WARMUP + ASGI_TRACE)
    assert (r.state, r.cause) == ("failed", "unknown")


# torch's c10d logs through glog's prefix; torch <= 2.1 writes it without the date ("[W socket.cpp:426] ",
# as vllm-ok-03's "[rank0]:[W ProcessGroupGloo.cpp:721] "), and its level is the line's all the same.
# Binding [::] fails while 0.0.0.0 may bind; when neither does, the error line and the exception say so
# (PyTorch's torchrun docs quote the sequence below).
C10D_BIND_WARNING = "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."
C10D_BIND_FAILED = [
    "[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
    "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/rendezvous.py", line 186, in _create_c10d_store',
    "    return TCPStore(",
    "RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
    "failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to "
    "0.0.0.0:29500 (errno: 98 - Address already in use)."]


def test_a_c10d_warning_without_its_date_is_a_warning() -> None:
    _healthy(VLLM_V1_READY + [C10D_BIND_WARNING], "ready")
    _healthy(VLLM_V1 + [C10D_BIND_WARNING], "loading")
    r = _read(VLLM_V1 + [C10D_BIND_WARNING] + C10D_BIND_FAILED)
    assert (r.state, r.cause, r.error.line) == ("failed", "port_in_use", 10)


# Python's logging prints a log call it could not format with its traceback and goes on
# (logging.Handler.handleError; pencoa/PCNN#1: "a warning from logging module", zai-org/ChatGLM3#451:
# the requests are answered).
LOGGING_ERROR = ["--- Logging error ---",
                 "Traceback (most recent call last):",
                 '  File "/usr/lib/python3.10/logging/__init__.py", line 1100, in emit',
                 "    msg = self.format(record)",
                 '  File "/usr/lib/python3.10/logging/__init__.py", line 368, in getMessage',
                 "    msg = msg % self.args",
                 "TypeError: not all arguments converted during string formatting",
                 "Call stack:",
                 '  File "/usr/lib/python3.10/threading.py", line 973, in _bootstrap',
                 "    self._bootstrap_inner()",
                 "Message: 'Shape: '",
                 "Arguments: ((53,),)"]


def test_a_log_call_python_could_not_format_is_no_failure() -> None:
    _healthy(VLLM_V1 + LOGGING_ERROR, "loading")
    _healthy(SGLANG_WARMUP + LOGGING_ERROR, "loading")
    _healthy(SGLANG_LOADING + LOGGING_ERROR + SGLANG_WARMUP[4:] + SGLANG_READY[-1:], "ready")


@pytest.mark.parametrize("echo", [
    # A prompt quoting a server's banner and its weights' progress bar (a fresh helper's break:
    # "loading, starting, starts 2" and "Starting 1/4 (25%)" on a serving vLLM).
    "(APIServer pid=11980) INFO 02-12 19:40:02 [logger.py:39] Received request chatcmpl-9: prompt: 'why does my "
    "log say non-default args: {\"model_tag\": \"x\"} and then Loading safetensors checkpoint shards:  25% "
    "Completed | 1/4 [00:01<00:03,  1.10s/it]', params: SamplingParams(n=1)",
])
def test_a_request_logs_echo_begins_no_start_phase_or_bar(echo) -> None:
    r = _read(VLLM_V1_READY + [echo])
    assert (r.state, r.starts, r.progress) == ("ready", 1, None), r
    assert [p.phase for p in r.phases][-1] == "ready"


def test_an_echo_of_a_banner_in_sglangs_request_log_begins_no_start() -> None:
    echo = ("[2025-05-02 16:15:40] Receive: obj=GenerateReqInput(text='server_args=ServerArgs(model_path=x) "
            "Capture cuda graph begin', input_ids=None, rid='ced0', stream=True)")
    r = _read(SGLANG_READY + [echo])
    assert (r.state, r.starts) == ("ready", 1), r


def test_a_logging_errors_call_stack_and_arguments_are_no_failure() -> None:
    # logging.Handler.handleError prints, after the traceback, "Call stack:", the frames, then
    # "Message: %r" and "Arguments: %s": an argument that is an exception read a loading vLLM as
    # failed, hub_download (a fresh helper's break of the --- Logging error --- rule).
    block = ["--- Logging error ---", "Traceback (most recent call last):",
             '  File "/usr/lib/python3.12/logging/__init__.py", line 392, in getMessage',
             "    msg = msg % self.args",
             "TypeError: not all arguments converted during string formatting",
             "Call stack:",
             '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", line 300, in get_config',
             '    logger.warning("Could not reach the Hub, using the local files", e)',
             "Message: 'Could not reach the Hub, using the local files'",
             "Arguments: (OSError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with "
             "url: /Qwen/Qwen3-8B/resolve/main/config.json\"),)"]
    core = "(EngineCore_DP0 pid=12321) INFO 02-12 19:35:5"
    init = [core + "1 [backends.py:872] Dynamo bytecode transform time: 16.41 s",
            core + "6 [monitor.py:34] torch.compile takes 18.50 s in total"]
    after = [core + "7 [gpu_worker.py:356] Available KV cache memory: 10.14 GiB",
             core + "7 [kv_cache_utils.py:1307] GPU KV cache size: 33,216 tokens"]
    _healthy(VLLM_V1 + init + block + after, "loading")
