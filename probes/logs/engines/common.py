"""Rules every engine shares: hub downloads, progress-bar labels, failure causes that read the same
in every server (CUDA, NCCL, the kernel, the Hub, Python), and systemd's own lifecycle lines.

Sources: the fixture logs in ``tests/fixtures/logs``; systemd 252 wording observed in
``tests/fixtures/journal`` (``Main process exited``, ``Failed with result``, ``Scheduled restart job``,
``Start request repeated too quickly``); PyTorch's OOM text (``torch.cuda.OutOfMemoryError: CUDA out
of memory. Tried to allocate ...``); huggingface_hub's error classes.
"""

from __future__ import annotations

import re

from probes.logs.engines.base import BarLabel, Rule

#: Bar labels (text before ``NN%|``) shared by several engines.
BARS: tuple[BarLabel, ...] = (
    # "\.(?<=[\w-]\.)" is "[\w-]\." begun at the dot: `re` finds a literal fast, a class slowly.
    BarLabel(r"^\s*fetching \d+ files|^\s*downloading|\.(?<=[\w-]\.)(?:json|safetensors|bin|model|txt|py|gguf|"
             r"tiktoken|pt|pth|msgpack|jinja|md)\s*:", "download"),
    BarLabel(r"checkpoint shards|safetensors|loading weights|load(?:ing)? model weights|"
             r"loading (?:pt|bin|gguf)", "weights"),
    BarLabel(r"captur\w* (?:batches|cuda ?graph|num tokens)|cuda graph", "graph_capture"),
)

def _frame_rule(functions: tuple[str, ...], files: tuple[str, ...], phase: str, example: str) -> Rule:
    """A frame rule: a failure under one of these functions (or in one of these files) happened in
    ``phase``; matches ``, in NAME`` of a frame, ``.NAME(`` of the source line under it, and
    ``/FILE.py"`` or ``/FILE/`` of a frame's path."""
    names = "|".join(functions)
    pattern = rf"(?:, in |\.)(?:{names})\b"
    if files:
        pattern += "|" + "|".join(rf"[/\\]{f}(?:\.py\"|[/\\])" for f in files)
    return Rule(pattern, keys=functions, files=files, phase=phase, frame=True, example=example)


#: What a shell prints before a signal's text when a child dies of it: bash in a script
#: (``run.sh: line 8: 158893 ``), zsh (``zsh: ``, the text in lower case), a job line (``[1]  31674 ``).
_SHELL_REPORT = r"(?:\S+: line \d+: +\d+ +|zsh: +|\[\d+\] +\d+ +)"


def _crash_signal(text: str, sig: str, key: str, *, example: str, also: str = "",
                  hint: str | None = None) -> Rule:
    """A native crash by signal ``SIG<sig>`` (core_dump, strength 3, terminal), each way it is
    reported, each where the message begins: the shell's line with the signal's text (glibc's
    strsignal; ``also``: musl's) and ``(core dumped)`` after any padding or none (bash pads the
    text to a column), the text alone on its line, or after a shell's report prefix (bash in a
    script, zsh and a job line in lower case) with the command after it; Python's faulthandler
    (``Fatal Python error: TEXT``); the signal's name as absl's and glog's failure handlers
    (``*** SIGFPE received at``, ``*** SIGSEGV (@0x0) received by PID``) and Go's runtime
    (``SIGFPE: floating-point exception``, ``[signal SIGSEGV: segmentation violation ...]``) begin
    their reports, and torch elastic's ``Signal 11 (SIGSEGV) received by PID``: the words elsewhere
    in a message (a prompt a request log echoes) are no crash. ``key``: the word of ``text`` (and
    of ``also``) the matcher selects the rule by."""
    branches = []
    for words in filter(None, (text, also)):
        lower = words[0].lower() + words[1:]
        # Each at the start of the message: the same words inside one (a prompt a request log
        # echoes, "Segmentation fault handler registered") are no crash.
        branches += [rf"^{_SHELL_REPORT}?{words} *\(core dumped\)", rf"^{words}\s*$",
                     rf"^{_SHELL_REPORT}{words}(?:\s|$)", rf"^{_SHELL_REPORT}{lower}(?:\s|$)",
                     rf"^Fatal Python error: {words}"]
    # The signal's name only where a crash report begins with it: a line that names it otherwise
    # ("installing handlers for SIGSEGV, SIGFPE", "*** SIGSEGV handler installed ***") is no crash.
    branches += [rf"^\*\*\* SIG{sig} (?:received|\(@)", rf"^\[?(?:signal )?SIG{sig}: ",
                 rf"Signal \d+ \(SIG{sig}\) received by PID"]  # the last: torch elastic's summary
    keys = (key, *([also.split()[0].lower()] if also else []), f"sig{sig.lower()}")
    return Rule("|".join(branches), keys=keys, cause="core_dump", strength=3, terminal=True, hint=hint,
                example=example)


#: Rules that hold for every engine. Failure rules come first, most specific first.
RULES: tuple[Rule, ...] = (
    # --- failures with a named root cause (strength 4) -----------------------------------------
    Rule(r"Free memory on device .{0,200}? is less than desired GPU memory utilization|"
         r"memory capacity is unbalanced|Not enough free GPU memory",
         keys=("free", "unbalanced"), cause="insufficient_free_memory",
         example="ValueError: Free memory on device cuda:0 (0.34/23.56 GiB) on startup is less than "
                 "desired GPU memory utilization (0.9, 21.2 GiB)."),
    # TensorRT's allocator failing while the builder tries tactics is logged at [E] and retried with
    # less memory: an OOM, but not (yet) the one that ends the build.
    Rule(r"Error Code 1: Cuda Runtime \(out of memory\)", keys=("code",), cause="cuda_oom", strength=3,
         example="[TRT] [E] [resizingAllocator.cpp::allocate::78] Error Code 1: Cuda Runtime (out of memory)"),
    # PyTorch's allocator ("CUDA out of memory"), the runtime and driver APIs as PyTorch words them
    # ("CUDA error: ...", "CUDA driver error: ...") or by their enum names, Triton's launcher
    # ("Triton Error [CUDA]: out of memory", "[HIP]:  Code: 2, Messsage: out of memory"), ROCm, Vulkan.
    Rule(r"CUDA out of memory|OutOfMemoryError|cudaMalloc failed: out of memory|"
         r"CUDA (?:driver )?error: out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|"
         r"CUBLAS_STATUS_ALLOC_FAILED|Triton Error \[(?:CUDA|HIP)\]:.{0,40}?out of memory|"
         r"HIP out of memory|hipErrorOutOfMemory|"
         r"ErrorOutOfDeviceMemory|OutOfDeviceMemoryError|VK_ERROR_OUT_OF_DEVICE_MEMORY|"
         r"Cuda Runtime \(out of memory\)|Error Code 2: OutOfMemory|CUDA runtime error .{0,200}?out of memory|"
         r"Requested amount of GPU memory \(\d+ bytes\) could not be allocated|"
         r": out of memory \([^)\s]{1,300}\.(?:h|hpp|cpp|cu|cc):\d+\)",
         keys=("cuda", "outofmemoryerror", "cudamalloc", "cudaerrormemoryallocation", "cuda_error_out_of_memory",
               "cublas_status_alloc_failed", "triton", "hip", "hiperroroutofmemory", "erroroutofdevicememory",
               "outofdevicememoryerror", "vk_error_out_of_device_memory", "code", "requested", "memory"),
         cause="cuda_oom",
         example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB."),
    Rule(r"Out of memory: Killed process|killed by the OOM killer|oom-kill|Memory cgroup out of memory|"
         r"systemd-oomd killed \d+ process",
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
    Rule(r"no kernel image is available for execution|cudaErrorNoKernelImageForDevice|hipErrorNoBinaryForGpu|"
         r"(?:ROCm|CUDA|HIP) error: invalid device function|hipErrorInvalidDeviceFunction|"
         r"The bin of socVersion \[\w+\] does not support opType|"
         r"is not compatible with the current PyTorch installation|"
         r"FlashAttention only supports (?:Ampere|Turing|Hopper)|"
         r"(?:not supported|unsupported) on (?:this GPU|GPUs? with compute capability|devices? with compute capability)|"
         r"requires (?:a GPU with )?compute capability (?:of )?(?:>= ?)?\d|"
         r"[Uu]nsupported (?:GPU|gpu|CUDA) arch(?:itecture)?|Unsupported SM(?: version)?\b",
         keys=("kernel", "cudaerrornokernelimagefordevice", "hiperrornobinaryforgpu", "invalid",
               "hiperrorinvaliddevicefunction", "bin", "compatible",
               "flashattention", "supported", "unsupported", "requires"),
         cause="gpu_arch",
         example="RuntimeError: CUDA error: no kernel image is available for execution on the device"),
    Rule(r"error: unrecognized arguments:|error: argument --?[\w-]+: |"
         r"error: the following arguments are required|"
         r"User-specified max_model_len \(\d+\) is greater than|"
         r"must be divisible by tensor parallel size|is not divisible by (?:the )?(?:tensor|pipeline) parallel",
         keys=("unrecognized", "argument", "following", "specified", "divisible"),
         cause="bad_config",
         example="api_server.py: error: unrecognized arguments: --max-num-batched-token 8192"),
    # torch's c10d when a rank cannot get what rank 0 should have published: rank 0 died first, or
    # the network between the nodes; which one the line does not say.
    Rule(r"may indicate a possible application crash on rank \d+ or a network set ?up issue",
         keys=("indicate",), cause="unknown", strength=3,
         hint="A rank could not reach rank 0's store: rank 0 probably crashed first (read its log), or "
              "the network between the nodes fails (master address and port, NCCL_SOCKET_IFNAME).",
         example=". This may indicate a possible application crash on rank 0 or a network set up issue."),
    Rule(r"TCPStore|DistStoreError|DistNetworkError|Socket Timeout|socket has timed out|connectFullMesh failed|RendezvousTimeoutError|"
         r"Timed out initializing process group|[Tt]imed out after \d+ ?(?:ms|s|seconds?) waiting for|"
         r"gloo/transport/tcp/pair\.cc.{0,200}?(?:Connection refused|[Tt]imed out|Connection reset)|"
         r"Rendezvous .{0,100}?timed out|wait timeout after \d+ms, keys:",
         keys=("tcpstore", "diststoreerror", "distnetworkerror", "socket", "connectfullmesh", "rendezvoustimeouterror",
               "timed", "pair", "rendezvous", "wait"),
         cause="dist_timeout",
         example="torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined."),
    # Uvicorn's own words when it cannot bind: it exits right after them.
    Rule(r"error while attempting to bind on address(?:.{0,200}?\('[^']{0,100}', (?P<port>\d{1,5})\))?",
         keys=("attempting",), cause="port_in_use", terminal=True, flags=re.IGNORECASE,
         example="ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
                 "address already in use"),
    Rule(r"(?:\[Errno 98\]|address already in use|EADDRINUSE|couldn't bind HTTP server socket)"
         r"(?:.{0,200}?\('[^']{0,100}', (?P<port>\d{1,5})\)|.{0,200}?:(?P<port2>\d{1,5}))?",
         keys=("errno", "eaddrinuse", "bind", "already"), cause="port_in_use", flags=re.IGNORECASE,
         example="ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
                 "address already in use"),
    Rule(r"Python\.h: No such file or directory", cause="missing_python_h", phase="init",
         example="/tmp/tmp_bcihhdm/main.c:5:10: fatal error: Python.h: No such file or directory"),
    Rule(r"cannot open shared object file|error while loading shared libraries|undefined symbol: |"
         r"libcuda\.so\S* (?:not found|cannot)|Could not load library lib\w+|ld: cannot find -l\w+",
         keys=("cannot", "shared", "undefined", "libcuda", "could"), cause="shared_library",
         example="ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"),
    # A full filesystem (or quota) as Python ("[Errno 28] No space left on device"), Rust ("No space
    # left on device (os error 28)", safetensors' "kind: StorageFull") and Go ("...: no space left on
    # device") word ENOSPC, and EDQUOT: weights, a runner's or JIT's files, /dev/shm.
    Rule(r"[Nn]o space left on device|kind: StorageFull|Disk quota exceeded",
         keys=("space", "storagefull", "quota"), cause="disk_full",
         example="OSError: [Errno 28] No space left on device"),
    Rule(r"HTTPSConnectionPool\(host='huggingface\.co'|couldn't connect to 'https://huggingface\.co|"
         r"LocalEntryNotFoundError|OfflineModeIsEnabled|cannot find the requested files in the "
         r"(?:disk|local) cache|HfHubHTTPError|hf_hub_download.{0,300}?(?:Error|timed out)",
         keys=("httpsconnectionpool", "couldn", "localentrynotfounderror", "offlinemodeisenabled",
               "cannot", "hfhubhttperror", "hf_hub_download"),
         cause="hub_download", phase="download",
         example="urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='huggingface.co', port=443): "
                 "Max retries exceeded with url: /openai/gpt-oss-120b/resolve/main/config.json"),
    # The Hub refusing a repository (missing, private, gated, or access not yet granted: a 401 or
    # 403 on a huggingface.co URL, as huggingface_hub's error classes and plain requests word it):
    # the fetch of the model's files, so the download phase.
    Rule(r"Repository Not Found|RepositoryNotFoundError|GatedRepoError|Cannot access gated repo|"
         r"access to model \S+ is restricted|trying to access a gated repo|"
         r"\b40[13] Client Error: (?:Unauthorized|Forbidden) for url: https://(?:huggingface\.co|hf\.co)/",
         keys=("repository", "repositorynotfounderror", "gatedrepoerror", "cannot", "access", "trying", "client"),
         cause="model_not_found", phase="download",
         hint="The Hub refused the model's repository (it does not exist, is private, or is gated and "
              "this token has no access yet): check the model id, accept the model's licence on its "
              "Hub page, and pass a token with access (HF_TOKEN).",
         example="requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: "
                 "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json"),
    Rule(r"is not a local folder and is not a valid model identifier|HFValidationError|"
         r"does not appear to have a file named|Invalid repository ID or local directory|"
         r"No such file or directory: '[^']*(?:config\.json|\.gguf|\.safetensors)'|"
         r"failed to open GGUF file|gguf_init_from_file.{0,300}?failed|pull model manifest: file does not exist",
         keys=("local", "hfvalidationerror", "appear", "invalid", "such", "gguf", "gguf_init_from_file",
               "manifest"),
         cause="model_not_found",
         example="OSError: foo/bar is not a local folder and is not a valid model identifier listed on "
                 "'https://huggingface.co/models'"),
    # transformers refusing to run a repository's own code without trust_remote_code=True (its
    # prompt, printed inside the traceback when there is no stdin, and its ValueErrors): the fix
    # is the engine's --trust-remote-code flag.
    Rule(r"contains custom code which must be executed to correctly load|"
         r"requires you to execute the (?:configuration|tokenizer|modeling)? ?file in that repo|"
         r"[Pp]lease pass the argument `trust_remote_code=True`",
         keys=("contains", "requires", "pass"), cause="bad_config",
         hint="The model's repository ships its own Python code: start the engine with "
              "--trust-remote-code (after reading that code), or use a model that needs none.",
         example="The repository for TheBloke/Nous-Capybara-34B-AWQ contains custom code which must be "
                 "executed to correctly load the model."),
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
    # pydantic's ValidationError names only the class ("1 validation error for VllmConfig"); its
    # next line holds the message ("  Value error, ..."): an engine refusing its configuration,
    # unless a rule above names a more specific cause in that message.
    Rule(r"^\s*Value error, ", keys=("value",), cause="bad_config",
         example="  Value error, Cannot find the config file for awq_marlin [type=value_error, input_value=ArgsKwargs(("),
    _crash_signal("Segmentation fault", "SEGV", "segmentation", example="Fatal Python error: Segmentation fault"),
    _crash_signal("Bus error", "BUS", "bus", example="Bus error (core dumped)",
                  hint="Bus error: in a container this is almost always a too small /dev/shm (NCCL and "
                       "PyTorch use it); run with --ipc=host or --shm-size=16g."),
    _crash_signal("Illegal instruction", "ILL", "illegal", example="Illegal instruction (core dumped)",
                  hint="Illegal instruction: the CPU lacks an instruction this build uses (AVX-512, AVX2); "
                       "use a build or image made for this CPU."),
    _crash_signal("Floating point exception", "FPE", "floating", also="Arithmetic exception",
                  example="Floating point exception (core dumped)",
                  hint="Floating point exception (SIGFPE, mostly an integer division by zero in native "
                       "code): often a CUDA library (cuBLAS) too old for this GPU, or a kernel given an "
                       "empty shape; check the nvidia-* wheel versions against the driver and the engine."),
    _crash_signal("Trace/breakpoint trap", "TRAP", "breakpoint", example="Trace/breakpoint trap (core dumped)",
                  hint="The process hit a trap in native code (an assertion compiled as a trap, e.g. in a "
                       "GPU runtime): check driver, CUDA/ROCm and engine versions."),
    Rule(r"^\s*what\(\): ", keys=("what",), cause="core_dump", strength=3,
         hint="The process aborted on this C++ exception: check CUDA, driver and engine versions.",
         example="  what():  CUDA error: an illegal memory access was encountered"),
    # "Aborted" as the shell reports SIGABRT: alone, with "(core dumped)", or after a script's report
    # prefix; not vLLM's "Aborted request chatcmpl-..." (a client that went away).
    Rule(r"^(?:\S+: line \d+: +\d+ +)?Aborted *\(core dumped\)|^\S+: line \d+: +\d+ +Aborted(?:\s|$)|"
         r"^Aborted\s*$|^Fatal Python error: Aborted|terminate called after throwing an instance of",
         keys=("aborted", "terminate"), cause="core_dump", strength=2, terminal=True,
         hint="The process aborted in native code (a C++ exception or assertion): the lines around it "
              "name the library; check CUDA, driver and engine versions.",
         example="terminate called after throwing an instance of 'c10::Error'"),
    # A shell's "Killed": SIGKILL from someone. Engines kill their own process tree after a fatal
    # error (SGLang does), so the lines before it come first; only with nothing before it is the
    # kernel's OOM killer the likely sender.
    Rule(r"^(?:\S+: line \d+: +\d+ )?Killed(?:\s|$)", keys=("killed",), cause="signal", strength=1,
         terminal=True,
         hint="The process was killed with SIGKILL: read the lines before it (SGLang kills its own "
              "processes after a fatal error); if nothing explains it, check `dmesg` or `journalctl -k` "
              "for the kernel's OOM killer.",
         example="Killed"),
    Rule(r"^KeyboardInterrupt\b", keys=("keyboardinterrupt",), ends=True, example="KeyboardInterrupt"),
    # A shell's report of a child ended by SIGTERM (bash's strsignal text): someone stopped it.
    Rule(r"^(?:\S+: line \d+: +\d+ )?Terminated(?:\s|$)", keys=("terminated",), ends=True, example="Terminated"),
    # uvicorn's shutdown (server.py: handle_exit, shutdown; lifespan/on.py), on a signal or a stop.
    Rule(r"^Shutting down$|^Waiting for application shutdown\.|^Waiting for connections to close\.|"
         r"^Received SIG(?:TERM|INT|QUIT|BREAK), exiting\.", keys=("shutting", "waiting", "received"), ends=True,
         example="Shutting down"),
    # uvicorn's lifespan failed: the app raised during startup and uvicorn exits (lifespan/on.py).
    Rule(r"^Application startup failed\. Exiting\.", keys=("application",), cause="unknown", strength=2,
         terminal=True, example="Application startup failed. Exiting."),
    # The interpreter is exiting: multiprocessing's resource tracker reports what the dead
    # processes left (resource_tracker.py, "There appear to be %d leaked %s objects to clean up at
    # shutdown"), torch warns of a process group never destroyed (2.4-2.5: "process group has NOT
    # been destroyed", 2.6+: "destroy_process_group() was not called"). Evidence that the process
    # ended: a start that was not stopped on purpose and said no more has died here.
    Rule(r"resource_tracker: There appear to be \d+ leaked|destroy_process_group\(\) was not called|"
         r"process group has NOT been destroyed before we destruct ProcessGroupNCCL",
         keys=("resource_tracker", "destroy_process_group", "destroyed"), cause="engine_died", strength=1,
         terminal=True,
         hint="The process exited during the start without an error of its own (only the interpreter's "
              "shutdown warnings remain): it was killed (check `dmesg` / `journalctl -k` for the OOM killer) "
              "or a child process died; read the lines before it.",
         example="/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: "
                 "There appear to be 1 leaked semaphore objects to clean up at shutdown"),
    # ROCr's queue callback aborts the process on a GPU exception (rocdevice.cpp); glibc's malloc
    # checks and assert(3), glog/absl's CHECK, Go's and Rust's panics end the process too.
    Rule(r"aborting with error : HSA_STATUS_ERROR_\w+|HSA_STATUS_ERROR_OUT_OF_RESOURCES",
         keys=("aborting", "hsa_status_error_out_of_resources"), cause="core_dump", strength=3, terminal=True,
         hint="The ROCm runtime aborted on a GPU exception (HSA): check the ROCm version against the GPU "
              "and the engine's build, and dmesg for amdgpu faults.",
         example=":0:rocdevice.cpp            :3586: 11398051401 us:  Callback: Queue 0x7f4307e00000 aborting "
                 "with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016"),
    Rule(r"^(?:free|malloc|realloc|munmap_chunk|malloc_consolidate)\(\): [a-z ]+|^double free or corruption|"
         r"^corrupted size vs\. prev_size|: Assertion `.{1,300}' failed\.$",
         keys=("free", "malloc", "realloc", "munmap_chunk", "malloc_consolidate", "double", "corrupted", "assertion"),
         cause="core_dump", strength=3, terminal=True,
         hint="The process aborted in native code (glibc found heap corruption or an assertion failed): "
              "check the engine, CUDA/ROCm and driver versions.",
         example="free(): double free detected in tcache 2"),
    Rule(r"^Check failed: |^\*\*\* Check failure stack trace: \*\*\*", keys=("check",), cause="core_dump",
         strength=3, terminal=True, example="Check failed: x == y (1 vs. 2)"),
    Rule(r"^panic: |^fatal error: (?:runtime|unexpected signal|all goroutines are asleep|concurrent map)|"
         r"^thread '[^']{1,100}'(?: \(\d+\))? panicked at ",
         keys=("panic", "fatal", "thread"), cause="unknown", strength=3, terminal=True,
         example="thread 'main' panicked at router/src/main.rs:420:10:"),
    # --- warnings that look like errors ------------------------------------------------------------
    Rule(r"^Ignore import error|can be ignored|UserWarning|FutureWarning|DeprecationWarning|"
         r"^\s*warnings\.warn\(|is deprecated|Warning: ",
         keys=("ignore", "ignored", "userwarning", "futurewarning", "deprecationwarning", "warnings",
               "deprecated", "warning"),
         benign=True,
         example="Ignore import error when loading sglang.srt.multimodal.processors.mimo_v2: Could not "
                 "load libtorchcodec. Likely causes:"),
    # Python's logging could not format a log call: it prints the traceback and goes on
    # (logging.Handler.handleError).
    Rule(r"^--- Logging error ---", keys=("logging",), benign=True, example="--- Logging error ---"),
    # ... and after its traceback the call's own place and record (logging.Handler.handleError:
    # "Call stack:", the frames, "Message: %r", "Arguments: %s"): an argument may be an exception.
    Rule(r"^(?:Call stack:$|Message: '|Arguments: \()", keys=("call", "message", "arguments"), harmless=True,
         example="Arguments: (OSError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries\"),)"),
    # NCCL probes for optional libraries (a network, tuner or profiler plugin, InfiniBand verbs) and
    # says so when one is missing, then uses its own (NVIDIA/nccl#1231: "harmless"); its own failures
    # (NCCL WARN ... refused / failure) are other lines, read as usual.
    Rule(r"NCCL (?:INFO|WARN) (?:NET|TUNER|PROFILER|ENV)/Plugin ?: |"
         r"NCCL (?:INFO|WARN) Failed to open lib(?:ibverbs|mlx5|rdmacm)\b",
         keys=("plugin", "open"), harmless=True,
         example="cuda0003:2752870:2752870 [2] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared "
                 "object file: No such file or directory No plugin found (libnccl-net.so), using internal "
                 "implementation"),
    # --- traceback frames: the phase a failure happened in ---------------------------------------
    # Matched only on a traceback's frame lines and the source lines under them, which name the
    # call in progress ("File ..., in capture_one_batch_size", "self.model_runner.capture_model()").
    _frame_rule(("load_weights", "_load_weights", "load_model", "weight_loader", "load_state_dict", "safe_open",
                 "load_checkpoint", "load_weights_and_postprocess"), ("model_loader",), "weights",
                '  File "/x/vllm/model_executor/model_loader/default_loader.py", line 9, in load_weights'),
    _frame_rule(("profile_run", "determine_num_available_blocks", "determine_available_memory",
                 "initialize_kv_cache", "_initialize_kv_caches", "initialize_kv_cache_tensors", "init_memory_pool",
                 "get_kv_cache_config", "get_kv_cache_configs", "check_enough_kv_cache_memory",
                 "_check_enough_kv_cache_memory",
                 "profile_max_num_token", "_allocate_kv_cache_tensors", "initialize_cache", "_init_cache"), (),
                "init", '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 2100, in profile_run'),
    _frame_rule(("capture_model", "_capture_cudagraphs", "capture_one_batch_size", "init_cuda_graphs",
                 "init_device_graphs", "capture", "warmup_and_capture"), ("cuda_graph_runner", "cuda_graph",
                 "cuda_piecewise_backend"), "graph_capture",
                '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 343, in capture_one_batch_size'),
    # --- phases every engine shares --------------------------------------------------------------
    Rule(r"^\s*Downloading \S|^--\d{4}-\d\d-\d\d \d\d:\d\d:\d\d--  https?://",
         keys=("downloading", "http", "https"), phase="download",
         example=" Downloading tiktoken encoding files..."),
    Rule(r"site-packages/vllm/|dist-packages/vllm/", keys=("vllm",), detect="vllm", weak=True,
         example='  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1004'),
    Rule(r"(?:site|dist)-packages/sglang/|/sglang/srt/|\bsglang\.srt\.", keys=("sglang",), detect="sglang",
         weak=True, example='  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2712'),
    Rule(r"(?:site|dist)-packages/text_generation_server/", keys=("text_generation_server",), detect="tgi",
         weak=True, example='  File "/opt/conda/lib/python3.11/site-packages/text_generation_server/cli.py", line 116'),
    Rule(r"(?:site|dist)-packages/tensorrt_llm/", keys=("tensorrt_llm",), detect="trtllm", weak=True,
         example='  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 9'),
    Rule(r"\((?:APIServer|EngineCore|VllmWorker|Worker_TP)\w* pid=\d+\)", keys=("pid",), detect="vllm",
         example="(EngineCore pid=3043) ERROR 05-08 11:50:14 [core.py:1136] Traceback"),
    # A wrapper that runs the engine in a container (py-tgi, docker-py scripts) says when its own
    # readiness probe passed, and when it stops the container on purpose.
    Rule(r"\bserver (?:is )?ready at https?://", keys=("ready",), ready=True,
         example="INFO:tgi-server:        + TGI server ready at http://127.0.0.1:1111"),
    Rule(r"\bStopp?ing (?:the )?(?:[\w-]+ )?container\b", keys=("stopping", "stoping"), ends=True,
         example="INFO:tgi-server:        + Stoping TGI container"),
    Rule(r"Application shutdown complete|Finished server process \[\d+\]", keys=("shutdown", "finished"),
         ends=True, example="INFO:     Application shutdown complete."),
    # NIM and TensorRT-LLM's engine builder name the architecture first.
    Rule(r"^Detected model architecture: ", keys=("architecture",), phase="starting",
         example="Detected model architecture: LlamaForCausalLM"),
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
