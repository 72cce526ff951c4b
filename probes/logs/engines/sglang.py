"""SGLang (``python -m sglang.launch_server``), versions 0.2 to 0.5.

Sources: fixture logs ``sglang-ok-01`` (0.4.6), ``sglang-ok-03`` (0.4.3, TP4), ``sglang-ok-05-cr``
(0.5.x, ``--log-level warning``), ``sglang-fail-graphcapture-01`` (0.5.x, TP8), SGLang's
``model_runner.py`` / ``cuda_graph_runner.py`` / ``http_server.py`` log calls. Lines carry
``[YYYY-MM-DD HH:MM:SS TPn]`` (``DPn TPn`` with data parallelism) once ranks exist.

Ready is only ``The server is fired up and ready to roll!``: Uvicorn binds earlier and SGLang answers
503 until its warm-up request (which may JIT-compile kernels for half a minute) has succeeded.
"""

from __future__ import annotations

from probes.logs.engines.base import Engine, Rule

ENGINE = Engine(
    name="sglang",
    label="SGLang",
    idents=("sglang",),
    hints={
        "cuda_oom": "GPU memory ran out: lower --mem-fraction-static, --max-running-requests or "
                    "--cuda-graph-max-bs, shorten --context-length, or raise --tp.",
        "insufficient_free_memory": "Another process holds memory on these GPUs (SGLang needs equal free "
                                    "memory on every rank): find it with nvidia-smi and stop it.",
    },
    rules=(
        Rule(r"Not enough memory\. Please try to increase --mem-fraction-static|"
             r"Not enough memory for the KV cache", keys=("enough",), cause="cuda_oom",
             hint="Too little GPU memory is left for the KV cache: raise --mem-fraction-static (SGLang's "
                  "share of GPU memory), shorten --context-length, or raise --tp.",
             example="RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
        Rule(r"Scheduler hit an exception|TpModelWorkerClient hit an exception|"
             r"DataParallelController hit an exception|DetokenizerManager hit an exception",
             keys=("scheduler", "tpmodelworkerclient", "dataparallelcontroller", "detokenizermanager"),
             cause="unknown", strength=2,
             example="[2026-05-08 14:34:42 TP3] Scheduler hit an exception: Traceback (most recent call last):"),
        Rule(r"Received sigquit from a child process|Child process unexpectedly failed",
             keys=("sigquit", "unexpectedly"), cause="engine_died", terminal=True,
             example="Received sigquit from a child process. It usually means the child failed."),
        Rule(r"Initialization failed\. warmup error", keys=("warmup",), cause="unknown", strength=2,
             example="Initialization failed. warmup error: Traceback (most recent call last):"),
        # --log-requests echoes each request, its text included (sgl-project/sglang#3699, #4045), and
        # what it answered (tokenizer_manager's "Finish: obj=..., out=...").
        Rule(r"^(?:Receive(?: OpenAI)?|Finish): obj=\w+\(", keys=("receive", "finish"), harmless=True,
             example="Receive: obj=GenerateReqInput(text='torch.OutOfMemoryError: CUDA out of memory. why?', "
                     "input_ids=None, rid='ced0', stream=True)"),
        Rule(r"server_args=ServerArgs\(", phase="starting", banner=True, detect="sglang",
             example="server_args=ServerArgs(model_path='/models/Qwen3-0.6B', tokenizer_path=...)"),
        Rule(r"sglang\.launch_server|sglang serve|sglang::scheduler", keys=("sglang",), detect="sglang",
             example="python3 -m sglang.launch_server --model-path /models/x --tp 4"),
        Rule(r"Init (?:torch distributed|nccl) begin", keys=("init",), phase="starting", detect="sglang",
             example="Init torch distributed begin."),
        Rule(r"Load weight begin", phase="weights", detect="sglang",
             example="Load weight begin. avail mem=21.63 GB"),
        Rule(r"Load weight end", phase="weights", completes=True, detect="sglang",
             example="Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB"),
        Rule(r"KV Cache is allocated|Memory pool end|Using KV cache dtype", keys=("cache", "pool"),
             phase="init", example="KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"),
        # Speculative decoding adds stages ("Capture draft cuda graph begin", "Capture draft extend
        # cuda graph end"); the words between "Capture" and "cuda graph" name the stage.
        Rule(r"Capture (?:[\w-]+ ){0,3}(?:cuda|CUDA) graph end", keys=("capture",), phase="graph_capture",
             completes=True, example="Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB."),
        Rule(r"Capture (?:[\w-]+ ){0,3}(?:cuda|CUDA) graph (?:begin|bs)", keys=("capture",),
             phase="graph_capture", detect="sglang",
             example="Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB"),
        Rule(r"Capture (?:[\w-]+ ){0,3}(?:cuda|CUDA) graph failed", keys=("capture",), phase="graph_capture",
             cause="unknown", strength=3,
             example="Exception: Capture cuda graph failed: CUDA error: out of memory"),
        Rule(r"Scheduler watchdog timeout|watchdog timeout \(self\.watchdog_timeout", keys=("watchdog",),
             cause="unknown", strength=3, terminal=True,
             hint="SGLang's scheduler watchdog found one batch running longer than --watchdog-timeout and "
                  "killed the server: a hang (a stuck NCCL collective, a kernel that never returns) or a very "
                  "slow first batch; raise --watchdog-timeout to tell which.",
             example="Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"),
        Rule(r"Started server process|Waiting for application startup|Application startup complete|"
             r"Uvicorn running on", keys=("started", "waiting", "startup", "uvicorn"), phase="warmup",
             example="INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"),
        # The HTTP server's SIGTERM handler (http_server.py, 0.4.6+) and the graceful exit that follows.
        Rule(r"^SIGTERM received\. .{0,80}Draining requests and shutting down|^Gracefully exiting\.\.\. Remaining number of requests|"
             r"^Signal SIGTERM received while .{0,80}\. Force exiting\.",
             keys=("sigterm", "gracefully", "signal"), ends=True,
             example="SIGTERM received. signum=15 frame=None. Draining requests and shutting down..."),
        Rule(r"The server is fired up and ready to roll", keys=("fired",), ready=True, detect="sglang",
             example="The server is fired up and ready to roll!"),
    ),
)
