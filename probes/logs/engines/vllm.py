"""vLLM (``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``), V0 (0.4-0.10) and V1 (0.8+).

Sources: fixture logs ``vllm-ok-01`` (0.15.1, V1), ``vllm-ok-03`` (0.4.1, V0), ``vllm-fail-*``
(0.5-0.18), vLLM's ``gpu_model_runner.py``, ``kv_cache_utils.py``, ``api_server.py`` and
``launcher.py`` log calls. V0 lines read ``INFO 05-04 14:43:16 api_server.py:151] ...``; V1 adds
brackets (``[api_server.py:151]``) and process prefixes (``(APIServer pid=N)``,
``(EngineCore_DP0 pid=N)``, ``(Worker_TP1 pid=N)``), coloured with ANSI codes in 0.6-0.11.

``Application startup complete.`` is ready, but provisionally: vLLM prints it before Uvicorn binds the
port, so a bind error right after it takes it back (``vllm-fail-port-01``).
"""

from __future__ import annotations

import re

from probes.logs.engines.base import Engine, Rule

ENGINE = Engine(
    name="vllm",
    label="vLLM",
    idents=("vllm",),
    hints={
        "cuda_oom": "GPU memory ran out: lower --max-model-len or --max-num-seqs, add --enforce-eager to "
                    "skip CUDA graphs, or raise --tensor-parallel-size.",
        "insufficient_free_memory": "Another process already holds memory on this GPU (vLLM checks free "
                                    "memory against --gpu-memory-utilization): stop it (nvidia-smi) or "
                                    "lower --gpu-memory-utilization.",
    },
    rules=(
        Rule(r"No available memory for the cache blocks|"
             r"is larger than the maximum number of tokens that can be stored in KV cache|"
             r"To serve at least one request with the models?'s max seq len",
             keys=("available", "larger", "serve"), cause="cuda_oom",
             hint="The KV cache does not fit: lower --max-model-len or raise --gpu-memory-utilization.",
             example="ValueError: No available memory for the cache blocks. Try increasing "
                     "`gpu_memory_utilization` when initializing the engine."),
        # The memory profile's KV budget (gpu_worker.py logs it at INFO): at or below zero vLLM
        # always raises next ("No available memory for the cache blocks", kv_cache_utils.py), so
        # the INFO line is the root cause and says the start cannot go on, whatever follows it
        # ("EngineCore failed to start." and a traceback an excerpt may cut).
        Rule(r"Available KV cache memory: (?:-\d|0\.00 GiB)", keys=("available",), cause="cuda_oom",
             terminal=True,
             hint="The weights and activations leave no GPU memory for the KV cache (the budget is "
                  "negative): raise --gpu-memory-utilization, lower --max-num-batched-tokens or "
                  "--max-model-len, or spread the model over more GPUs (--tensor-parallel-size).",
             example="(EngineCore_0 pid=5839) INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache "
                     "memory: -2.14 GiB"),
        Rule(r"Engine core initialization failed|EngineDeadError|Engine process failed to start|"
             r"died unexpectedly|Worker \S+ pid \d+ died, exit code: -?\d+",
             # V0's AsyncEngineDeadError and MQEngineDeadError end in the same words
             keys=("engine", "enginedeaderror", "asyncenginedeaderror", "mqenginedeaderror", "died"),
             cause="engine_died", detect="vllm",
             example="RuntimeError: Engine core initialization failed. See root cause above. "
                     "Failed core proc(s): {}"),
        # A process's own words that it failed, before its traceback (whose exception line, when
        # it comes, is more decisive).
        Rule(r"(?:WorkerProc|EngineCore|Worker) (?:hit an exception|encountered a fatal error)",
             keys=("workerproc", "enginecore", "worker"), cause="unknown", strength=2,
             example="(Worker_TP2 pid=99) ERROR 04-09 20:31:10 [multiproc_executor.py:949] WorkerProc hit an exception."),
        Rule(r"(?:WorkerProc|EngineCore) failed to start", keys=("workerproc", "enginecore"), cause="unknown",
             strength=2, terminal=True,
             example="(Worker_TP0 pid=2712) ERROR 01-02 10:00:00 [multiproc_executor.py:743] WorkerProc failed to start."),
        # The plugin loader logs a plugin that fails to import with its traceback and goes on without it.
        Rule(r"Failed to load plugin ", keys=("plugin",), benign=True,
             example="ERROR 10-20 11:18:05 [__init__.py:54] Failed to load plugin register_paddlex_genai_models"),
        # The request log (on unless --disable-log-requests) echoes what a client sent, quoting any
        # error a prompt names (vllm-project/vllm#34503, #15519), and with --enable-log-outputs what
        # it answered (RequestLogger.log_outputs).
        Rule(r"^Received request \S+: (?:prompt|params|prompt_token_ids): |^Generated response \S+(?: \([\w ]+\))?: output",
             keys=("received", "generated"), harmless=True,
             example="Received request chatcmpl-a269fdcb: prompt: 'my app says OSError: [Errno 98] Address "
                     "already in use', params: SamplingParams(n=1), lora_request: None."),
        Rule(r"Exception in worker \S+ while processing method", keys=("exception",), cause="unknown",
             strength=2, example="Exception in worker VllmWorkerProcess while processing method "
                                 "determine_num_available_blocks: boom"),
        Rule(r"vLLM API server version", phase="starting", banner=True, detect="vllm",
             example="vLLM API server version 0.4.1"),
        Rule(r"non-default args: \{", phase="starting", banner=True, detect="vllm",
             example="non-default args: {'model_tag': 'openai/whisper-large-v3', 'host': '0.0.0.0'}"),
        Rule(r"Initializing an? (?:V1 )?LLM engine", keys=("initializing",), phase="starting",
             detect="vllm",
             example="Initializing a V1 LLM engine (v0.15.1) with config: model='openai/whisper-large-v3'"),
        Rule(r"args: Namespace\(|Waiting for init message from front-end|"
             r"is assigned as DP rank|Resolved architecture:",
             keys=("namespace", "waiting", "assigned", "resolved"), phase="starting",
             example="Resolved architecture: WhisperForConditionalGeneration"),
        Rule(r"vllm serve|vllm\.entrypoints|VllmWorkerProcess", keys=("vllm", "vllmworkerprocess"),
             detect="vllm", example="vllm serve openai/whisper-large-v3 --port 8000"),
        # A wrapper logging the engine arguments it hands to vLLM as a dict (RunPod's worker-vllm
        # "engine.py :43 ... vLLM config: {'model': ...}", other launchers' logger.info lines):
        # weak, a stronger sign of another engine wins.
        Rule(r"\bvLLM config: \{", keys=("vllm",), detect="vllm", weak=True,
             example="engine.py           :43   2024-02-08 08:40:56,015 vLLM config: {'model': "
                     "'TheBloke/Nous-Capybara-34B-AWQ', 'quantization': 'awq'}"),
        Rule(r"Automatically detected platform", detect="vllm", weak=True,
             example="Automatically detected platform cuda."),
        Rule(r"Starting to load model|Time spent downloading weights", keys=("starting", "spent"),
             phase="weights", detect="vllm", example="Starting to load model openai/whisper-large-v3..."),
        Rule(r"Loading model weights took|Loading weights took|Model loading took", keys=("loading", "model"),
             phase="weights", completes=True, detect="vllm",
             example="Loading model weights took 14.9595 GB"),
        # Function names (profile_run, initialize_kv_cache) are frames, not messages: a warning may
        # list them (the frame rules in common.py place a failure under them).
        Rule(r"Starting profile run|[Mm]emory profiling|# (?:GPU|CUDA) blocks:|Available KV cache memory|"
             r"GPU KV cache size|for vLLM's torch\.compile|Dynamo bytecode transform time|"
             r"torch\.compile takes|Encoder cache will be initialized|Maximum concurrency for",
             keys=("profile", "profiling", "blocks", "available", "cache", "compile", "dynamo",
                   "encoder", "maximum"),
             phase="init", example="Available KV cache memory: 10.14 GiB"),
        Rule(r"Graph capturing finished", keys=("capturing",), phase="graph_capture", completes=True,
             example="Graph capturing finished in 5 secs."),
        Rule(r"Capturing (?:a |the model for )?(?:CUDA ?graphs?|cudagraphs?)|CUDA graphs can take additional",
             keys=("capturing", "graphs"), phase="graph_capture", flags=re.IGNORECASE, detect="vllm", weak=True,
             example="Capturing the model for CUDA graphs. This may lead to unexpected consequences."),
        Rule(r"Starting vLLM (?:API )?server|Available routes are|Route: /", keys=("starting", "available",
             "route"), phase="warmup", detect="vllm", example="Starting vLLM API server 0 on http://0.0.0.0:8000"),
        # "Warming up chat template processing...", not the per-shape "Warming up 1/1 for shape 272"
        # that graph capture logs at DEBUG.
        Rule(r"Started server process|Waiting for application startup|Supported tasks:|Warming up (?!\d)",
             keys=("started", "waiting", "supported", "warming"), phase="warmup",
             example="INFO:     Started server process [11980]"),
        Rule(r"Application startup complete", keys=("startup",), ready=True, provisional=True,
             example="INFO:     Application startup complete."),
        # The engine's periodic stats are printed only while it serves: an excerpt that begins there
        # is of a start that was ready.
        Rule(r"Avg prompt throughput: [\d.]+ tokens/s", keys=("avg",), ready=True, confirm=True,
             example="(APIServer pid=3478) INFO 10-16 16:27:51 [loggers.py:127] Engine 000: Avg prompt throughput: "
                     "393.0 tokens/s, Avg generation throughput: 16.0 tokens/s"),
        Rule(r"Uvicorn running on", ready=True, confirm=True,
             example="INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"),
    ),
)
