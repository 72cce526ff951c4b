"""Hugging Face Text Generation Inference (``text-generation-launcher``), 2.x and 3.x.

Sources: fixture logs ``tgi-ok-01`` (3.x) and ``tgi-fail-oom-01`` (2.0.x); TGI's launcher and router
log calls. Lines read ``2025-07-04T12:35:02.586768Z  INFO text_generation_launcher: ...``. TGI binds
its HTTP socket only after ``Connected``, so warm-up, KV-cache sizing and ``Setting max batch total
tokens`` are ``init``; ``Connected`` is ready. There is no weight-loading progress bar: shards only
report ``Waiting for shard to be ready...`` every 10 s.
"""

from __future__ import annotations

from probes.logs.engines.base import Engine, Rule

ENGINE = Engine(
    name="tgi",
    label="TGI",
    idents=("text-generation-launcher", "text-generation-server"),
    hints={
        "cuda_oom": "GPU memory ran out: lower --cuda-memory-fraction, --max-batch-prefill-tokens or "
                    "--max-total-tokens, quantize, or raise --num-shard.",
    },
    rules=(
        Rule(r"Error: ShardCannotStart|Shard \d+ failed to start|Error: ShuttingDown",
             keys=("shardcannotstart", "shard", "shuttingdown"), cause="engine_died",
             example="Error: ShardCannotStart"),
        Rule(r"(?:Shard|Download) process was signaled to shutdown with signal 9\b", keys=("signaled",),
             cause="signal", strength=3,
             hint="The process got SIGKILL: usually the kernel's OOM killer or the container's memory "
                  "limit; check dmesg and the limit.",
             example="Shard process was signaled to shutdown with signal 9"),
        Rule(r"(?:Shard|Download) process was signaled to shutdown with signal (?P<sig>\d+)",
             keys=("signaled",), cause="signal", strength=3,
             hint="The process got signal {sig} (4 SIGILL: the CPU lacks an instruction the build needs; "
                  "6 SIGABRT: a native abort; 11 SIGSEGV: a native crash).",
             example="Shard process was signaled to shutdown with signal 4"),
        Rule(r"Error: DownloadError|Download encountered an error", keys=("downloaderror", "download"),
             cause="engine_died", example="Error: DownloadError"),
        Rule(r"Error when initializing model|Error: WebserverFailed", keys=("initializing", "webserverfailed"),
             cause="unknown", strength=2,
             example="ERROR text_generation_launcher: Error when initializing model"),
        Rule(r"text_generation_launcher|text_generation_router|text-generation-launcher|"
             r"text_generation_server|text-generation-server",
             keys=("text_generation_launcher", "text_generation_router", "text", "text_generation_server"),
             detect="tgi", example="text_generation_launcher: Args {"),
        Rule(r"Args \{", keys=("args",), phase="starting", banner=True,
             example="text_generation_launcher: Args {"),
        Rule(r"Download: \[(?P<done>\d+)/(?P<total>\d+)\]", keys=("download",), phase="download",
             progress=True, example="text_generation_launcher: Download: [1/1] -- ETA: 0"),
        Rule(r"Starting (?:check and )?download process|Download file: |Successfully downloaded weights",
             keys=("download", "downloaded"), phase="download",
             example="download: text_generation_launcher: Starting check and download process for /models/x"),
        Rule(r"Starting shard|Waiting for shard to be ready", keys=("shard",), phase="weights",
             example="shard-manager: text_generation_launcher: Starting shard rank=0"),
        # The router's warm-up RPC ("warmup{max_input_length=...}:warmup: ...") is init too.
        Rule(r"Starting Webserver|Warming up model|KV-cache blocks|Setting max batch total tokens|"
             r"^warmup\{[^}]{0,300}\}",
             keys=("webserver", "warming", "blocks", "setting", "warmup"), phase="init",
             example="text_generation_launcher: Starting Webserver"),
        Rule(r"Cuda Graphs are enabled for sizes", keys=("graphs",), phase="graph_capture",
             example="text_generation_launcher: Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]"),
        Rule(r"(?:^|: )Connected$", keys=("connected",), ready=True,
             example="text_generation_router::server: router/src/server.rs:2298: Connected"),
    ),
)
