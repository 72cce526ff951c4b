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
        Rule(r"^main: model loaded|server is listening on .{0,200}? - starting the main loop",
             keys=("main", "listening"), ready=True, example="main: model loaded"),
    ),
)
