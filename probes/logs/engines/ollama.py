"""Ollama (``ollama serve``, usually ``ollama.service``).

Sources: fixture log ``ollama-restart-loop-02`` (Nov 2023, syslog form); Ollama's ``server/routes.go``
and ``llm/server.go`` log calls (``time=... level=INFO source=routes.go:1 msg="Listening on ..."``).
Ollama serves as soon as it listens and loads models lazily, per request, so ``Listening on`` is
ready; later model loads (``starting llama server``) are not new starts.
"""

from __future__ import annotations

from probes.logs.engines.base import Engine, Rule

ENGINE = Engine(
    name="ollama",
    label="Ollama",
    idents=("ollama",),
    dots="weights",
    hints={
        "cuda_oom": "GPU memory ran out loading the model: use a smaller model or quantization, lower "
                    "num_ctx, or set OLLAMA_GPU_OVERHEAD / fewer num_gpu layers.",
    },
    rules=(
        # The model runner's death: "llama runner ..." in older versions, "llama-server ..." in 0.30
        # (llama.cpp's server as the runner; ollama/ollama#16492).
        Rule(r"(?:llama runner|llama-server) process has terminated: (?P<why>[^\"]+)",
             keys=("runner", "terminated"), cause="engine_died", terminal=True,
             hint="Ollama's model runner died ({why}): 'signal: killed' is most often the kernel's OOM "
                  "killer (host RAM: check dmesg), 'core dumped' / 'aborted' a native crash (check the "
                  "driver, ROCm/Vulkan/CUDA versions); the runner lines before it name the cause.",
             example='msg="llama runner process has terminated: signal: segmentation fault (core dumped)"'),
        Rule(r"Ollama Service|ollama\.service|ollama serve|source=\w+\.go:\d+",
             keys=("ollama", "source"), detect="ollama", example="Started Ollama Service."),
        # The desktop app's supervisor (app.log): it starts `ollama serve` and respawns it.
        Rule(r"started ollama server with pid \d+", keys=("started",), phase="starting", banner=True,
             detect="ollama", example='msg="started ollama server with pid 56336"'),
        Rule(r"server crash \d+ - exit code (?P<code>\d+) - respawning", keys=("crash",), cause="exit_code",
             strength=1, terminal=True,
             hint="Ollama's server exited with status {code} and the app restarts it: its own log "
                  "(server.log) holds the reason.",
             example='msg="server crash 22 - exit code 1 - respawning"'),
        Rule(r'msg="server config"|^server config env=', keys=("config",), phase="starting", detect="ollama",
             example='time=2025-11-19T10:00:00.000Z level=INFO source=routes.go:1544 msg="server config" env="map[]"'),
        Rule(r"Listening on \S+ \(version", keys=("listening",), ready=True, banner=True, detect="ollama",
             example='msg="Listening on 127.0.0.1:11434 (version 0.5.7)"'),
    ),
)
