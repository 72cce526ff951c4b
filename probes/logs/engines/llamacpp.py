"""llama.cpp's HTTP server (``llama-server``; ``server`` in older builds).

Sources: fixture logs ``llamacpp-ok-01`` (build 5489) and ``llamacpp-fail-oom-01`` (2026 build);
llama.cpp's ``tools/server/server.cpp`` and ``src/llama-model-loader.cpp`` log calls. The HTTP port
is bound before the model loads (``main: HTTP server is listening``) and answers 503 while loading;
``main: model loaded`` is ready. ``offloaded 0/29 layers to GPU`` is a layer count, not progress.
"""

from __future__ import annotations

from probes.logs.engines.base import Engine, Rule

ENGINE = Engine(
    name="llamacpp",
    label="llama.cpp",
    idents=("llama-server",),
    dots="weights",
    hints={
        "cuda_oom": "GPU memory ran out: offload fewer layers (-ngl), shrink the context (-c), use a "
                    "smaller quantization, or split across GPUs (--tensor-split).",
    },
    rules=(
        Rule(r"ggml_backend_cuda_buffer_type_alloc_buffer: allocating .{0,200}? failed|"
             r"failed to allocate \w+ buffer", keys=("ggml_backend_cuda_buffer_type_alloc_buffer", "allocate"),
             cause="cuda_oom", example="alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624"),
        Rule(r"error loading model architecture|unknown model architecture", keys=("architecture",),
             cause="unsupported_model", example="llama_model_load: error loading model: error loading "
                                                 "model architecture: unknown model architecture: 'qwen35'"),
        Rule(r"error loading model|failed to load model|unable to load model|"
             r"error: failed to load", keys=("error", "failed", "unable"), cause="unknown", strength=2,
             example="llama_model_load: error loading model: unable to allocate CUDA0 buffer"),
        Rule(r"llama_model_loader:|ggml_cuda_init:|llama-server|llm_load_tensors|load_tensors:|"
             r"llama_context:|print_info:|llama_new_context_with_model",
             keys=("llama_model_loader", "ggml_cuda_init", "llama", "llm_load_tensors", "load_tensors",
                   "llama_context", "print_info", "llama_new_context_with_model"),
             detect="llamacpp", example="llama_model_loader: loaded meta data with 27 key-value pairs"),
        Rule(r"^build: \d+ \(\w+\)", keys=("build",), phase="starting", banner=True, detect="llamacpp",
             example="build: 5489 (2d38b6e4) with cc (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0 for aarch64-linux-gnu"),
        Rule(r"^main: (?:binding port|HTTP server is listening)|^system info:",
             keys=("main", "system"), phase="starting", detect="llamacpp",
             example="main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 7"),
        Rule(r"^main: loading model|load_model: loading model|^llama_model_load|^llama_model_loader:|"
             r"^print_info:|^load_tensors:|^llm_load_(?:print_meta|tensors):",
             keys=("main", "load_model", "llama_model_load", "llama_model_load_from_file_impl",
                   "llama_model_loader", "print_info", "load_tensors", "llm_load_print_meta",
                   "llm_load_tensors"),
             phase="weights", detect="llamacpp", example="main: loading model"),
        Rule(r"^llama_context:|^llama_kv_cache|^llama_new_context_with_model:|^llama_init_from_model:",
             keys=("llama_context", "llama_kv_cache", "llama_kv_cache_unified",
                   "llama_new_context_with_model", "llama_init_from_model"),
             phase="init", example="llama_context: constructing llama_context"),
        Rule(r"warming up the model", keys=("warming",), phase="warmup",
             example="common_init_from_params: warming up the model with an empty run - please wait ..."),
        # The model is loaded and /health answers 200: "main: model loaded" until 2025, then
        # "srv  llama_server: model loaded" (SRV_INF with the function's name, tools/server); the
        # JSON-era builds' "INFO [ main] model loaded | tid=..."; the listening line that follows.
        Rule(r"^main: model loaded|^(?:srv +)?\w+: model loaded\s*$|\] model loaded \||"
             r"server is listening on .{0,200}? - starting the main loop|^srv +\w+: (?:router )?server is listening on https?://",
             keys=("main", "loaded", "listening"), ready=True, example="main: model loaded"),
        # tools/server's newer wording (SRV_INF): the load, the HTTP bind, the slots.
        Rule(r"^srv +\w+: loading model|^llama_params_fit", keys=("loading", "llama_params_fit_impl", "llama_params_fit"),
             phase="weights", example="srv  llama_server: loading model"),
        Rule(r"^system_info: |^srv +\w+: binding port|^ggml_cuda_init: found \d+ \w+ devices|\] HTTP server listening \||"
             r"^srv +\w+: starting router server",
             keys=("system_info", "binding", "ggml_cuda_init", "listening", "starting"), phase="starting",
             example="srv         start: binding port with default address family"),
        # llama-server's signal handler on a second SIGINT/SIGTERM. (Its "cleaning up before exit..."
        # is printed on every exit, a failed load's too: no sign of a stop.)
        Rule(r"^Received second interrupt, terminating immediately", keys=("received",), ends=True,
             example="Received second interrupt, terminating immediately."),
        Rule(r"exiting due to (?:HTTP server|model loading) error", keys=("exiting",), cause="unknown", strength=2,
             terminal=True, example="main: exiting due to model loading error"),
        Rule(r"failed to initialize the context: failed to allocate buffer for kv cache|"
             r"kIOGPUCommandBufferCallbackErrorOutOfMemory", keys=("initialize", "kiogpucommandbuffercallbackerroroutofmemory"),
             cause="cuda_oom", example="llama_init_from_model: failed to initialize the context: failed to allocate "
                                       "buffer for kv cache"),
        # ggml_abort (ggml/src/ggml.c): "FILE:LINE: GGML_ASSERT(x) failed", "FILE:LINE: Fatal error",
        # older builds "GGML_ASSERT: FILE:LINE: x"; the process aborts next.
        Rule(r"GGML_ASSERT\(.{0,300}\) failed|^GGML_ASSERT: |:\d+: Fatal error\s*$", keys=("ggml_assert", "fatal"),
             cause="core_dump", strength=3, terminal=True,
             hint="llama.cpp stopped on an internal check (GGML_ASSERT / ggml_abort): the file and line name the "
                  "backend; check the build against the model and the GPU backend (update llama.cpp).",
             example="/home/runner/work/llama.cpp/llama.cpp/ggml/src/ggml.c:2196: GGML_ASSERT(tensor->op == "
                     "GGML_OP_UNARY) failed"),
        Rule(r"^error: invalid argument: ", keys=("invalid",), cause="bad_config", terminal=True,
             example="error: invalid argument: --foo"),
        Rule(r"invalid magic characters '.{0,8}', expected 'GGUF'", keys=("magic",), cause="unsupported_model",
             example="gguf_init_from_file_impl: invalid magic characters 'tjgg', expected 'GGUF'"),
    ),
)
