"""The fixed vocabulary: phase ids in order, failure cause ids with how decisive each is, and the
default one-line hint per cause (docs/architecture.md, "Shared vocabulary"). Engines' rules and every view
use these ids.
"""

from __future__ import annotations



#: Canonical phase ids, in the order a start goes through them (see docs/architecture.md, "Shared vocabulary").
PHASES: tuple[str, ...] = ("starting", "download", "weights", "init", "graph_capture", "warmup", "ready")
PHASE_INDEX: dict[str, int] = {p: i for i, p in enumerate(PHASES)}

#: Failure cause ids, with how decisive each kind of line is. When several failure lines appear in
#: one start, the most decisive wins; between equals, the first (the root cause comes before its
#: consequences: the first rank's exception, not the shutdown noise after it).
#: 4: a named root cause; 3: an exception line (``KeyError: ...``) with no named cause;
#: 2: a line that says the engine died or gave up, without saying why;
#: 1: what systemd saw from outside (exit status, signal, core dump, start limit).
CAUSE_STRENGTH: dict[str, int] = {
    "cuda_oom": 4, "host_oom_killed": 4, "nccl": 4, "port_in_use": 4, "missing_python_h": 4,
    "shared_library": 4, "model_not_found": 4, "hub_download": 4, "tokenizer": 4,
    "unsupported_model": 4, "insufficient_free_memory": 4, "gpu_arch": 4, "bad_config": 4,
    "dist_timeout": 4, "disk_full": 4,
    "unknown": 3, "engine_died": 2,
    "exit_code": 1, "signal": 1, "core_dump": 1, "start_limit": 1,
}
CAUSES: tuple[str, ...] = tuple(CAUSE_STRENGTH)

#: One-line hints an operator can act on, per cause; engines may override with their own flags.
DEFAULT_HINTS: dict[str, str] = {
    "cuda_oom": "GPU memory ran out: lower the memory fraction, max context length or batch sizes, "
                "or spread the model over more GPUs.",
    "host_oom_killed": "The kernel's OOM killer ended the process: host RAM ran out (weights pass "
                       "through RAM); add RAM or swap, or stop what else uses it.",
    "nccl": "NCCL between ranks failed or timed out: check that every GPU is visible and peer-to-peer "
            "works (NCCL_DEBUG=INFO; NCCL_P2P_DISABLE=1 to test) and that no rank died first.",
    "port_in_use": "Another process already listens on {port}: find it with `ss -ltnp` and stop it, "
                   "or start the server on another --port.",
    "missing_python_h": "A JIT build (Triton/FlashInfer) needs the Python headers: install "
                        "python3-dev for the interpreter the server runs with.",
    "shared_library": "A shared library is missing or does not match: install it or fix "
                      "LD_LIBRARY_PATH, and check that CUDA, driver and wheel versions agree.",
    "model_not_found": "The model path or Hub id is wrong or not readable: check --model, the path "
                       "on this host, and HF_TOKEN for gated repositories.",
    "hub_download": "Could not download from the Hugging Face Hub: check the network or proxy to "
                    "huggingface.co and HF_TOKEN, or pre-download and set HF_HUB_OFFLINE=1.",
    "tokenizer": "The tokenizer failed to load: check the tokenizer files, --tokenizer, the "
                 "transformers/tokenizers versions, and --trust-remote-code if the model needs it.",
    "unsupported_model": "This engine version does not support the model's architecture: upgrade the "
                         "engine or check `architectures` in the model's config.json.",
    "insufficient_free_memory": "Another process already holds GPU memory: find it with nvidia-smi "
                                "and stop it, or lower the memory fraction.",
    "gpu_arch": "This build has no kernels for this GPU (its architecture, sm_XX, is too new or too old "
                "for the wheel, or a kernel/feature needs a newer GPU): use a build for this GPU's "
                "compute capability, or turn the feature off (attention backend, FP8, quantization).",
    "bad_config": "The engine refused its arguments or configuration: fix the option the line names "
                  "(see the engine's --help for what it accepts) and start it again.",
    "dist_timeout": "The ranks could not meet (rendezvous, TCPStore or Gloo handshake failed or timed "
                    "out): check that every node and rank started, the master address and port are "
                    "reachable from each, and the network interface (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME).",
    "disk_full": "A filesystem is full (or over quota): find which with `df -h` (and `df -i`) on the "
                 "model cache (HF_HOME, --download-dir, OLLAMA_MODELS), /tmp (TMPDIR, OLLAMA_TMPDIR), "
                 "the JIT and compile caches (~/.cache/vllm, ~/.triton, ~/.cache/flashinfer) and /dev/shm "
                 "(docker --shm-size); free space there or point that path at a larger disk.",
    "exit_code": "The process exited with an error status; the lines before the exit hold the cause.",
    "signal": "The process was killed by a signal (SGLang kills itself with SIGKILL after a startup "
              "error, so read the lines before it).",
    "core_dump": "The process crashed natively (core dump): see `coredumpctl info`, and check driver, "
                 "CUDA and engine versions.",
    "start_limit": "systemd gave up restarting the unit (start limit hit): fix the cause, then "
                   "`systemctl reset-failed UNIT` and start it again.",
    "engine_died": "The engine process died without a Python error (a native crash or a kill): check "
                   "`dmesg` and the journal for OOM kills, segfaults or Xid errors.",
    "unknown": "Read the decisive line (and the traceback above it, if there is one).",
}

# Lower-cases ASCII and turns punctuation but "_" into spaces, on bytes: bytes.translate is a plain
# table lookup, several times faster than str.translate with a dict.
