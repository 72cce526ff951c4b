"""TensorRT-LLM's OpenAI server (``trtllm-serve``), PyTorch backend, 0.2x and 1.x.

Sources: fixture log ``trtllm-ok-01`` (1.1.0rc3); TensorRT-LLM's ``_torch/pyexecutor`` log calls.
Lines read ``[12/20/2025-04:20:04] [TRT-LLM] [I] ...``; the version banner prints once per process
(launcher and worker), and autotuning plus CUDA-graph warm-up run twice around the KV-cache resize:
neither is a restart.
"""

from __future__ import annotations

from probes.engines.base import Engine, Rule

ENGINE = Engine(
    name="trtllm",
    label="TensorRT-LLM",
    idents=("trtllm-serve",),
    hints={
        "cuda_oom": "GPU memory ran out: lower free_gpu_memory_fraction in kv_cache_config, "
                    "--max_batch_size or --max_num_tokens, or raise --tp_size.",
    },
    rules=(
        Rule(r"\[TRT-LLM\] \[E\]|Executor worker returned error|MPI_ABORT was invoked",
             keys=("trt", "executor", "mpi_abort"), cause="unknown", strength=2,
             example="[TRT-LLM] [E] Failed to initialize executor on rank 0"),
        Rule(r"\[TRT-LLM\]|TensorRT-LLM|trtllm-serve|tensorrt_llm",
             keys=("trt", "tensorrt", "trtllm", "tensorrt_llm"), detect="trtllm",
             example="[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3"),
        Rule(r"Starting trtllm-serve|TensorRT-LLM version|Using LLM with PyTorch backend",
             keys=("starting", "tensorrt", "using"), phase="starting",
             example="Starting trtllm-serve for model openai/gpt-oss-120b on port 8355..."),
        Rule(r"Use [\d.]+ GB for model weights|Loading weights|Model init total",
             keys=("use", "loading", "model"), phase="weights",
             example="[TRT-LLM] [I] Use 63.32 GB for model weights."),
        Rule(r"Allocated [\d.]+ GiB for max tokens in paged KV cache|Autotuning process starts|"
             r"Using Sampler:", keys=("allocated", "autotuning", "sampler"), phase="init",
             example="[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224)."),
        Rule(r"Creating CUDA graph instances|CUDA graph warmup for batch size", keys=("creating", "warmup"),
             phase="graph_capture", example="[TRT-LLM] [I] Creating CUDA graph instances for 11 batch sizes."),
        Rule(r"Started server process|Waiting for application startup", keys=("started", "waiting"),
             phase="warmup", example="INFO:     Started server process [41]"),
        Rule(r"Application startup complete", keys=("startup",), ready=True, provisional=True,
             example="INFO:     Application startup complete."),
        Rule(r"Uvicorn running on", ready=True, confirm=True,
             example="INFO:     Uvicorn running on http://0.0.0.0:8355 (Press CTRL+C to quit)"),
    ),
)
