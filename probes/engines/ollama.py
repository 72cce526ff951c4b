"""Ollama (``ollama serve``, usually ``ollama.service``).

Sources: fixture log ``ollama-restart-loop-02`` (Nov 2023, syslog form); Ollama's ``server/routes.go``
and ``llm/server.go`` log calls (``time=... level=INFO source=routes.go:1 msg="Listening on ..."``).
Ollama serves as soon as it listens and loads models lazily, per request, so ``Listening on`` is
ready; later model loads (``starting llama server``) are not new starts.
"""

from __future__ import annotations

from probes.engines.base import Engine, Rule

ENGINE = Engine(
    name="ollama",
    label="Ollama",
    idents=("ollama",),
    hints={
        "cuda_oom": "GPU memory ran out loading the model: use a smaller model or quantization, lower "
                    "num_ctx, or set OLLAMA_GPU_OVERHEAD / fewer num_gpu layers.",
    },
    rules=(
        Rule(r"llama runner process has terminated: (?P<why>.+)", keys=("runner",), cause="engine_died",
             example='msg="llama runner process has terminated: signal: segmentation fault (core dumped)"'),
        Rule(r"Ollama Service|ollama\.service|ollama serve|source=\w+\.go:\d+",
             keys=("ollama", "source"), detect="ollama", example="Started Ollama Service."),
        Rule(r"Listening on \S+ \(version", keys=("listening",), ready=True, banner=True, detect="ollama",
             example='msg="Listening on 127.0.0.1:11434 (version 0.5.7)"'),
    ),
)
