"""Rules every engine shares: hub downloads, progress-bar labels, failure causes that read the same
in every server (CUDA, NCCL, the kernel, the Hub, Python), and systemd's own lifecycle lines.

Sources: the fixture logs in ``tests/fixtures/logs``; systemd 252 wording observed in
``tests/fixtures/journal`` (``Main process exited``, ``Failed with result``, ``Scheduled restart job``,
``Start request repeated too quickly``); PyTorch's OOM text (``torch.cuda.OutOfMemoryError: CUDA out
of memory. Tried to allocate ...``); huggingface_hub's error classes.
"""

from __future__ import annotations

import re

from probes.engines.base import BarLabel, Rule

I = re.IGNORECASE

#: Bar labels (text before ``NN%|``) shared by several engines.
BARS: tuple[BarLabel, ...] = (
    BarLabel(r"^\s*fetching \d+ files|^\s*downloading|[\w-]\.(?:json|safetensors|bin|model|txt|py|gguf|"
             r"tiktoken|pt|pth|msgpack|jinja|md)\s*:", "download"),
    BarLabel(r"checkpoint shards|safetensors|loading weights|load(?:ing)? model weights|"
             r"loading (?:pt|bin|gguf)", "weights"),
    BarLabel(r"captur\w* (?:batches|cuda ?graph|num tokens)|cuda graph", "graph_capture"),
)

#: Rules that hold for every engine. Failure rules come first, most specific first.
RULES: tuple[Rule, ...] = (
    # --- failures with a named root cause (strength 4) -----------------------------------------
    Rule(r"Free memory on device .{0,200}? is less than desired GPU memory utilization|"
         r"memory capacity is unbalanced|Not enough free GPU memory",
         keys=("free", "unbalanced"), cause="insufficient_free_memory",
         example="ValueError: Free memory on device cuda:0 (0.34/23.56 GiB) on startup is less than "
                 "desired GPU memory utilization (0.9, 21.2 GiB)."),
    Rule(r"CUDA out of memory|OutOfMemoryError|cudaMalloc failed: out of memory|"
         r"CUDA error: out of memory|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|"
         r"HIP out of memory|hipErrorOutOfMemory",
         keys=("cuda", "outofmemoryerror", "cudamalloc", "cudaerrormemoryallocation",
               "cublas_status_alloc_failed", "hip", "hiperroroutofmemory"),
         cause="cuda_oom",
         example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB."),
    Rule(r"Out of memory: Killed process|killed by the OOM killer|oom-kill|Memory cgroup out of memory",
         keys=("killed", "oom", "cgroup"), cause="host_oom_killed",
         example="Out of memory: Killed process 12345 (python3) total-vm:812345kB"),
    # Other ranks noticing that a peer died: a consequence, weaker than the peer's own exception.
    Rule(r"NCCL error:? .{0,80}?remote process exited|remote process exiting prematurely|"
         r"[Cc]onnection closed by (?:remote )?peer",
         keys=("nccl", "remote", "connection"), cause="nccl", strength=2,
         hint="NCCL lost a peer rank: another rank died first; its own error is the cause.",
         example="torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote "
                 "process exited or there was a network error, NCCL version 2.21.5"),
    Rule(r"Watchdog caught collective operation timeout|NCCL error|ncclUnhandledCudaError|"
         r"ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclRemoteError|DistBackendError|"
         r"NCCL communicator was aborted|NCCL timeout|"
         r"NCCL WARN .{0,300}?(?:exceeded|refused|[Ff]ailed|failure|[Ee]rror)",
         keys=("watchdog", "nccl", "ncclunhandledcudaerror", "ncclsystemerror", "ncclinternalerror",
               "ncclinvalidusage", "ncclremoteerror", "distbackenderror"),
         cause="nccl",
         example="[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
                 "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE)"),
    Rule(r"(?:\[Errno 98\]|address already in use|EADDRINUSE|couldn't bind HTTP server socket)"
         r"(?:.{0,200}?\('[^']{0,100}', (?P<port>\d{1,5})\)|.{0,200}?:(?P<port2>\d{1,5}))?",
         keys=("errno", "eaddrinuse", "bind", "already"), cause="port_in_use", flags=I,
         example="ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
                 "address already in use"),
    Rule(r"Python\.h: No such file or directory", cause="missing_python_h", phase="init",
         example="/tmp/tmp_bcihhdm/main.c:5:10: fatal error: Python.h: No such file or directory"),
    Rule(r"cannot open shared object file|error while loading shared libraries|undefined symbol: |"
         r"libcuda\.so\S* (?:not found|cannot)|Could not load library lib\w+|ld: cannot find -l\w+",
         keys=("cannot", "shared", "undefined", "libcuda", "could"), cause="shared_library",
         example="ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"),
    Rule(r"HTTPSConnectionPool\(host='huggingface\.co'|couldn't connect to 'https://huggingface\.co|"
         r"LocalEntryNotFoundError|OfflineModeIsEnabled|cannot find the requested files in the "
         r"(?:disk|local) cache|HfHubHTTPError|hf_hub_download.{0,300}?(?:Error|timed out)",
         keys=("httpsconnectionpool", "couldn", "localentrynotfounderror", "offlinemodeisenabled",
               "cannot", "hfhubhttperror", "hf_hub_download"),
         cause="hub_download", phase="download",
         example="urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='huggingface.co', port=443): "
                 "Max retries exceeded with url: /openai/gpt-oss-120b/resolve/main/config.json"),
    Rule(r"Repository Not Found|RepositoryNotFoundError|GatedRepoError|Cannot access gated repo|"
         r"is not a local folder and is not a valid model identifier|HFValidationError|"
         r"does not appear to have a file named|Invalid repository ID or local directory|"
         r"No such file or directory: '[^']*(?:config\.json|\.gguf|\.safetensors)'|"
         r"failed to open GGUF file|gguf_init_from_file.{0,300}?failed|pull model manifest: file does not exist",
         keys=("repository", "repositorynotfounderror", "gatedrepoerror", "cannot", "local",
               "hfvalidationerror", "appear", "invalid", "such", "gguf", "gguf_init_from_file",
               "manifest"),
         cause="model_not_found",
         example="huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found "
                 "for url: https://huggingface.co/api/models/foo/bar"),
    Rule(r"(?:Failed|Unable) to (?:load|initialize|get|create) (?:the )?tokenizer|"
         r"Can't load tokenizer|Tokenizer class \S+ does not exist|"
         r"data did not match any variant of untagged enum|requires the SentencePiece library|"
         r"Error loading tokenizer|TokenizerError",
         keys=("tokenizer", "variant", "sentencepiece", "tokenizererror"), cause="tokenizer",
         example="ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported."),
    Rule(r"Model architectures? \[[^\]]{0,500}\] (?:is|are) not supported|is not supported for now|"
         r"Model architectures? \[[^\]]{0,500}\] failed to be inspected|"
         r"[Uu]nsupported (?:model )?architecture|unknown model architecture|"
         r"does not recognize this architecture|but Transformers does not recognize",
         keys=("architectures", "architecture", "supported", "unsupported", "recognize"),
         cause="unsupported_model",
         example="ValueError: Model architectures ['Qwen3NextForCausalLM'] are not supported for now."),
    Rule(r"Fatal Python error: Segmentation fault|Segmentation fault \(core dumped\)|SIGSEGV",
         keys=("segmentation", "sigsegv"), cause="core_dump", strength=3,
         example="Fatal Python error: Segmentation fault"),
    Rule(r"^(?:\S+: line \d+: +\d+ )?Bus error(?: \(core dumped\))?|Fatal Python error: Bus error",
         keys=("bus",), cause="core_dump", strength=3,
         hint="Bus error: in a container this is almost always a too small /dev/shm (NCCL and PyTorch "
              "use it); run with --ipc=host or --shm-size=16g.",
         example="Bus error (core dumped)"),
    Rule(r"Illegal instruction(?: \(core dumped\))?", keys=("illegal",), cause="core_dump", strength=3,
         hint="Illegal instruction: the CPU lacks an instruction this build uses (AVX-512, AVX2); use a "
              "build or image made for this CPU.",
         example="Illegal instruction (core dumped)"),
    Rule(r"^\s*what\(\): ", keys=("what",), cause="core_dump", strength=3,
         hint="The process aborted on this C++ exception: check CUDA, driver and engine versions.",
         example="  what():  CUDA error: an illegal memory access was encountered"),
    Rule(r"^(?:\S+: line \d+: +\d+ )?Aborted(?: \(core dumped\))?\s|^Aborted(?: \(core dumped\))?$|"
         r"Fatal Python error: Aborted|terminate called after throwing an instance of",
         keys=("aborted", "terminate"), cause="core_dump", strength=2,
         hint="The process aborted in native code (a C++ exception or assertion): the lines around it "
              "name the library; check CUDA, driver and engine versions.",
         example="terminate called after throwing an instance of 'c10::Error'"),
    Rule(r"^(?:\S+: line \d+: +\d+ )?Killed(?:\s|$)", keys=("killed",), cause="signal", strength=3,
         hint="The process was killed with SIGKILL, most often by the kernel's OOM killer (host RAM): "
              "check `dmesg` or `journalctl -k` for 'Out of memory'.",
         example="Killed"),
    Rule(r"^KeyboardInterrupt\b", keys=("keyboardinterrupt",), ends=True, example="KeyboardInterrupt"),
    # --- warnings that look like errors ------------------------------------------------------------
    Rule(r"^Ignore import error|can be ignored|UserWarning|FutureWarning|DeprecationWarning|"
         r"^\s*warnings\.warn\(|is deprecated|Warning: ",
         keys=("ignore", "ignored", "userwarning", "futurewarning", "deprecationwarning", "warnings",
               "deprecated", "warning"),
         benign=True,
         example="Ignore import error when loading sglang.srt.multimodal.processors.mimo_v2: Could not "
                 "load libtorchcodec. Likely causes:"),
    # --- phases every engine shares --------------------------------------------------------------
    Rule(r"^\s*Downloading \S|^--\d{4}-\d\d-\d\d \d\d:\d\d:\d\d--  https?://",
         keys=("downloading", "http", "https"), phase="download",
         example=" Downloading tiktoken encoding files..."),
    Rule(r"site-packages/vllm/|dist-packages/vllm/", keys=("vllm",), detect="vllm", weak=True,
         example='  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1004'),
    Rule(r"\((?:APIServer|EngineCore|VllmWorker|Worker_TP)\w* pid=\d+\)", keys=("pid",), detect="vllm",
         example="(EngineCore pid=3043) ERROR 05-08 11:50:14 [core.py:1136] Traceback"),
    Rule(r"Application shutdown complete|Finished server process \[\d+\]", keys=("shutdown", "finished"),
         ends=True, example="INFO:     Application shutdown complete."),
    Rule(r"^\[Gloo\] Rank \d+ is connected", phase="starting",
         example="[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0"),
    # --- systemd (PID 1 or the user manager) about the unit: only lines systemd wrote ------------
    Rule(r"^Start(?:ed|ing) (?P<what>.+?)(?:\.\.\.|\.)?$", keys=("started", "starting"),
         lifecycle="started", example="Started vllm.service - vLLM OpenAI-compatible server."),
    Rule(r"(?:[Mm]ain|[Cc]ontrol) process exited, code=(?P<code>\w+), status=(?P<status>\d+)"
         r"(?:/(?P<name>[\w/]+))?", keys=("process",),
         lifecycle="exited", example="vllm.service: Main process exited, code=exited, status=1/FAILURE"),
    Rule(r"Failed with result '(?P<result>[\w-]+)'", lifecycle="result",
         example="ollama.service: Failed with result 'core-dump'."),
    Rule(r"Unit \S+ entered failed state|^\S+ failed\.$", keys=("entered", "failed"), lifecycle="result",
         example="Unit ollama.service entered failed state."),
    Rule(r"holdoff time over, scheduling restart", lifecycle="restart",
         example="ollama.service holdoff time over, scheduling restart."),
    Rule(r"Scheduled restart job, restart counter is at (?P<n>\d{1,9})", lifecycle="restart",
         example="vllm.service: Scheduled restart job, restart counter is at 3."),
    Rule(r"Start request repeated too quickly", lifecycle="gave_up",
         example="vllm.service: Start request repeated too quickly."),
    Rule(r"^Stopping (?P<what>.+?)\.\.\.$", lifecycle="stopping",
         example="Stopping vllm-embed.service - vLLM embeddings..."),
    Rule(r"^Stopped (?P<what>.+?)\.?$", lifecycle="stopped",
         example="Stopped vllm.service - vLLM OpenAI-compatible server."),
    Rule(r"Deactivated successfully|: Succeeded\.$", keys=("deactivated", "succeeded"),
         lifecycle="deactivated", example="vllm-embed.service: Deactivated successfully."),
    Rule(r"^Failed to start (?P<what>.+?)\.?$", lifecycle="job_failed",
         example="Failed to start vllm.service - vLLM OpenAI-compatible server."),
)

#: ``Error: ...`` as Go and Rust programs print a fatal error (Ollama, TGI's launcher).
GO_ERROR_RE = re.compile(r"^Error: \S")

#: Exception lines as Python prints them (``KeyError: 'BLOCK_SIZE_M'``, ``torch.cuda.XError: ...``):
#: a failure with cause ``unknown`` when no rule names the cause.
EXCEPTION_RE = re.compile(
    r"^\s*(?:[A-Za-z_]\w{0,80}\.){0,12}([A-Z]\w{0,80}?(?:Error|Exception|Exit|Interrupt)|Exception)(?::\s|:?$)")
