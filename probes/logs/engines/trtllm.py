"""TensorRT-LLM's OpenAI server (``trtllm-serve``), PyTorch backend, 0.2x and 1.x.

Sources: fixture log ``trtllm-ok-01`` (1.1.0rc3); TensorRT-LLM's ``_torch/pyexecutor`` log calls.
Lines read ``[12/20/2025-04:20:04] [TRT-LLM] [I] ...``; the version banner prints once per process
(launcher and worker), and autotuning plus CUDA-graph warm-up run twice around the KV-cache resize:
neither is a restart.
"""

from __future__ import annotations

from probes.logs.engines.base import Engine, Rule

ENGINE = Engine(
    name="trtllm",
    label="TensorRT-LLM",
    idents=("trtllm-serve",),
    hints={
        "cuda_oom": "GPU memory ran out: lower free_gpu_memory_fraction in kv_cache_config, "
                    "--max_batch_size or --max_num_tokens, or raise --tp_size.",
    },
    rules=(
        Rule(r"\[TRT-LLM\] \[E\]|Executor worker returned error|MPI_ABORT was invoked|"
             r"Failed to initialize executor",
             keys=("trt", "executor", "mpi_abort", "failed"), cause="unknown", strength=2, terminal=True,
             example="[TRT-LLM] [E] Failed to initialize executor on rank 0"),
        Rule(r"^Assertion failed: |\[TensorRT-LLM\]\[ERROR\] Assertion failed", keys=("assertion",),
             cause="unknown", strength=3,
             example="Assertion failed: Failed to initialize cuBLAS (/src/tensorrt_llm/cpp/x.cpp:42)"),
        Rule(r"\[TRT-LLM\]|TensorRT-LLM|trtllm-serve|tensorrt_llm",
             keys=("trt", "tensorrt", "trtllm", "tensorrt_llm"), detect="trtllm",
             example="[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3"),
        Rule(r"Starting trtllm-serve|TensorRT-LLM version|Using LLM with PyTorch backend",
             keys=("starting", "tensorrt", "using"), phase="starting",
             example="Starting trtllm-serve for model openai/gpt-oss-120b on port 8355..."),
        Rule(r"Total time of reading and converting|Loaded engine size: ", keys=("converting", "engine"),
             phase="weights", detect="trtllm",
             example="[TensorRT-LLM][INFO] Loaded engine size: 15320 MiB"),
        Rule(r"Use [\d.]+ GB for model weights|Loading weights|Model init total",
             keys=("use", "loading", "model"), phase="weights",
             example="[TRT-LLM] [I] Use 63.32 GB for model weights."),
        Rule(r"Allocated [\d.]+ GiB for max tokens in paged KV cache|Autotuning process (?:starts|ends)|"
             r"Using Sampler:|allocation in IExecutionContext creation|Max KV cache pages per sequence",
             keys=("allocated", "autotuning", "sampler", "allocation", "max"), phase="init",
             example="[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224)."),
        Rule(r"Creating CUDA graph instances|CUDA graph warmup for batch size", keys=("creating", "warmup"),
             phase="graph_capture", example="[TRT-LLM] [I] Creating CUDA graph instances for 11 batch sizes."),
        Rule(r"Started server process|Waiting for application startup", keys=("started", "waiting"),
             phase="warmup", example="INFO:     Started server process [41]"),
        Rule(r"Application startup complete", keys=("startup",), ready=True, provisional=True,
             example="INFO:     Application startup complete."),
        # Triton Inference Server (tensorrtllm_backend): its first lines, then its endpoints once
        # every model has loaded.
        Rule(r"Pinned memory pool is created at|CUDA memory pool is created on device|loading: tensorrt_llm\b",
             keys=("pinned", "cuda", "loading"), phase="starting",
             example="I0521 10:03:57.685707 107 pinned_memory_manager.cc:275] Pinned memory pool is created at '0x7f'"),
        Rule(r"Started (?:HTTPService|GRPCInferenceService) at ", keys=("httpservice", "grpcinferenceservice"),
             ready=True,
             example="I0521 10:04:28.196281 107 grpc_server.cc:2519] Started GRPCInferenceService at 0.0.0.0:8001"),
        Rule(r"Failed to create instance:|failed to load '[\w-]+' version|Triton server failed to start|"
             r"failed to load all models", keys=("instance", "version", "triton", "models"), cause="unknown",
             strength=2,
             example="E1103 02:59:01.152656 81041 backend_model.cc:553] ERROR: Failed to create instance: x"),
        Rule(r"Uvicorn running on", ready=True, confirm=True,
             example="INFO:     Uvicorn running on http://0.0.0.0:8355 (Press CTRL+C to quit)"),
    ),
)
