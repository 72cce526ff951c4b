"""The GPU probe: ``nvidia-smi --query-gpu`` CSV (over SSH) or NVML (locally) → :class:`GpuReading`.

Two sources, one model (:class:`~probes.data.state.GpuSample`); a value a board cannot give is ``None``,
never ``0``.

**nvidia-smi** (FORMATS.md 1.1, 1.2, 1.4; nvidia-smi documentation; rows captured on drivers
590.48.01 / 595.80 in ``tests/fixtures/nvidia-smi``). :func:`query_argv` asks for
``--format=csv,noheader,nounits``: one line per GPU, fields separated by ``", "``, in the order
asked for (parse by position; the header, when present, prints canonical names). Cells may read
``[N/A]``, ``N/A``, ``[Not Supported]``, ``[Unknown Error]``, ``[Insufficient Permissions]``,
``[Requested functionality has been deprecated]``, ``[GPU requires reset]`` or be empty; all are "no
value". Whole-command failures are printed on **stdout** instead of CSV (driver not loaded,
driver/library mismatch, no devices, ``Unable to determine the device handle for GPU…``) with a
non-zero exit status; :func:`classify_error` turns them into one line for an operator. In loop mode
(``-lms``) the kernel's Xid lines may be interleaved with the rows; :func:`parse_query_line` raises
``ValueError`` for them so the caller can skip them.

**Bad values.** A row that is a row (index and uuid read) but holds a value no board prints (not a
number, ``inf``/``nan``, a 309-digit number, a negative memory size, a utilisation over 100 %) is not
a crash and not a silent ``None``: :func:`parse_query_row` gives the sample with that value None and
an :class:`Unparsable` naming the column, so the caller can say "unparsable value in column
memory.used" while the other values keep updating. A row whose key cell (the index, a process's
pid) is unusable raises :class:`UnparsableValue` (a ``ValueError``) with the same description.

**NVML** (nvidia-ml-py 13.615.71, module ``pynvml``; FORMATS.md 1.7): :class:`NvmlSource`. Memory
comes in bytes, power in milliwatts; per-field ``NVMLError`` (``NotSupported`` under MIG, …) gives
``None``; a device whose handle cannot be had (``GpuIsLost``, ``Unknown``) gives a sample with a
note; a driver-level failure raises :class:`GpuError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probes.hosttext import one_line
from probes.data.state import GpuProcess, GpuReading, GpuSample, Unparsable

#: The ``--query-gpu`` fields, in the order :class:`GpuSample` is read from.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)

#: Cells that mean "no value" (compared without case). ``[GPU requires reset]`` is kept apart: it
#: also sets the sample's note.
NA_TOKENS = frozenset(
    t.lower()
    for t in (
        "",
        "N/A",
        "[N/A]",
        "[Not Supported]",
        "[Unknown Error]",
        "[Insufficient Permissions]",
        "[Requested functionality has been deprecated]",
        "ERR!",
    )
)
#: The cell nvidia-smi prints in every device field of a GPU in a fault state (after an Xid).
RESET_TOKEN = "[GPU requires reset]"

_NUMBER_RE = re.compile(r"([-+]?\d+(?:\.\d+)?)(?:\s*(?:MiB|%|W|C|MHz))?", re.ASCII)
#: A cell nvidia-smi writes instead of a value: a bracketed note (``[N/A]``, ``[Not Supported]``,
#: and notes of drivers not seen yet).
_BRACKET_RE = re.compile(r"\[[^\]]*\]")
_UUID_RE = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z-]+")
_HANDLE_RE = re.compile(r"Unable to determine the device handle for gpu\s*([0-9A-Fa-f:.]+)\s*:\s*(.*)", re.I)
_NVML_VERSION_RE = re.compile(r"NVML library version:\s*(\S+)")

# One line for an operator per failure (shared by nvidia-smi and NVML).
MSG_DRIVER_NOT_LOADED = "NVIDIA driver not loaded (kernel module missing, e.g. after a kernel update)"
MSG_MISMATCH = "NVIDIA driver/library version mismatch: reboot or reload the nvidia kernel module"
MSG_NO_DEVICES = "no NVIDIA GPU found: the driver is loaded but sees no device"
MSG_NOT_INSTALLED = "nvidia-smi not found on the host (no NVIDIA driver installed?)"
MSG_NO_LIBRARY = "NVML library not found (libnvidia-ml.so.1): no NVIDIA driver installed?"


class UnparsableValue(ValueError):
    """A row whose key cell (``index``, ``pid``) holds a value no board prints: the row cannot be
    used. ``problem`` (a :class:`~probes.data.state.Unparsable`) says which column and why."""

    def __init__(self, problem: Unparsable) -> None:
        super().__init__(problem.message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One ``--query-gpu`` row read: the sample (an unparsable value is None in it) and the
    values that could not be read, in column order."""

    sample: GpuSample
    bad: tuple[Unparsable, ...] = ()


@dataclass(frozen=True, slots=True)
class AppsRead:
    """A ``--query-compute-apps`` output read: the processes, and the cells that could not be read
    (a row whose pid cannot be read is left out; one whose memory cannot has ``mem_mib`` None)."""

    apps: tuple[GpuProcess, ...]
    bad: tuple[Unparsable, ...] = ()


#: Plausible ranges per numeric column (inclusive): a value outside is unparsable, not data.
#: Memory: up to 2**40 MiB (an exbibyte); power: up to 100 kW; temperature: -100..300 °C.
COLUMN_RANGES: dict[str, tuple[float, float]] = {
    "memory.used": (0, 2**40),
    "memory.total": (0, 2**40),
    "utilization.gpu": (0, 100),
    "temperature.gpu": (-100, 300),
    "power.draw": (0, 100_000),
    "power.limit": (0, 100_000),
    "used_memory": (0, 2**40),
}
#: Largest GPU index read (nvidia-smi numbers boards from 0; no host has thousands).
MAX_GPU_INDEX = 4096
#: Largest PID read: Linux's ``PID_MAX_LIMIT`` (2**22).
MAX_PID = 2**22


class GpuError(Exception):
    """The GPU probe could not read any GPU.

    Args:
        message: one line for an operator (plain text; may quote host output).
        fatal: True when polling again cannot help until someone acts on the host (driver not
            loaded, library mismatch, no GPU, no nvidia-smi); False when it may be passing or partial
            (one GPU's handle lost: the others can still be read one by one with ``-i``).
    """

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.fatal = fatal


def query_argv(loop_ms: int | None = None) -> list[str]:
    """The ``nvidia-smi`` command for :data:`QUERY_FIELDS`.

    Args:
        loop_ms: when given, nvidia-smi keeps running and prints every GPU again every ``loop_ms``
            milliseconds (``-lms``): one long-lived process instead of one per poll.

    Returns:
        ``["nvidia-smi", "--query-gpu=index,uuid,…", "--format=csv,noheader,nounits"]`` (+ ``-lms N``).
    """
    argv = ["nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
    if loop_ms is not None:
        argv += ["-lms", str(loop_ms)]
    return argv


def parse_query_line(line: str) -> GpuSample:
    """Parse one row of the :func:`query_argv` query into its sample (see :func:`parse_query_row`;
    an unparsable value is None here, and :func:`parse_query_row` says which).

    Raises:
        ValueError: as :func:`parse_query_row` (:class:`UnparsableValue` among them).
    """
    return parse_query_row(line).sample


def parse_query_row(line: str) -> GpuRow:
    """Parse one row of the :func:`query_argv` query.

    Format of ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits`` (nvidia-smi docs; drivers
    590/595): nine cells joined by ``", "``. Cells with units (``19818 MiB``, ``100 %``,
    ``69.85 W``, from ``--format=csv``) are read too. A "no value" cell (:data:`NA_TOKENS`, or any
    other bracketed note such as ``[Not Supported]``) is None; ``[GPU requires reset]`` also sets
    ``note``. Any other value that is not a number in its column's range (:data:`COLUMN_RANGES`) is
    None in the sample and an :class:`Unparsable` in ``bad``. The row is read outside-in (index and
    uuid from the left, six values from the right, the name between), so a comma inside a name
    cannot shift the numbers.

    Args:
        line: one line of stdout, with or without its line end.

    Returns:
        The GPU's sample and the values that could not be read.

    Raises:
        ValueError: the line is not a row of this query (a header, an Xid line, an error message,
            a truncated row).
        UnparsableValue: the uuid reads but the index is not a GPU index (too many digits, over
            :data:`MAX_GPU_INDEX`).
    """
    cells = [c.strip() for c in line.strip().split(",")]
    if len(cells) < len(QUERY_FIELDS):
        raise ValueError(f"not a --query-gpu row ({len(cells)} of {len(QUERY_FIELDS)} cells): {line.strip()[:80]!r}")
    index_cell, uuid_cell, *middle = cells[: len(cells) - 6]
    values = cells[len(cells) - 6:]
    if not (_UUID_RE.fullmatch(uuid_cell) or _is_token(uuid_cell)):
        raise ValueError(f"not a --query-gpu row (uuid {uuid_cell[:40]!r}): {line.strip()[:80]!r}")
    if not (index_cell.isascii() and index_cell.isdigit()):
        raise ValueError(f"not a --query-gpu row (index {index_cell[:20]!r}): {line.strip()[:80]!r}")
    if len(index_cell) > 6 or int(index_cell) > MAX_GPU_INDEX:
        raise UnparsableValue(Unparsable("index", _cut(index_cell), f"not a GPU index (0..{MAX_GPU_INDEX})"))
    index = int(index_cell)
    note = RESET_TOKEN if any(c.lower() == RESET_TOKEN.lower() for c in cells) else None
    bad: list[Unparsable] = []
    read = [_cell(cell, column, bad, index) for cell, column in zip(values, QUERY_FIELDS[3:])]
    used, total, util, temp, power, limit = read
    sample = GpuSample(
        index=index,
        uuid=uuid_cell if _UUID_RE.fullmatch(uuid_cell) else "",
        name=", ".join(middle),
        mem_used_mib=_as_int(used),
        mem_total_mib=_as_int(total),
        util_pct=_as_int(util),
        temp_c=_as_int(temp),
        power_w=power,
        power_limit_w=limit,
        note=note,
    )
    return GpuRow(sample, tuple(bad))


def parse_query(text: str, time: float, *, returncode: int = 0) -> GpuReading:
    """Parse one complete output of the :func:`query_argv` query (one iteration).

    Blank lines and lines that are not rows (a header, ``WARNING: infoROM is corrupted …``, Xid
    lines) are skipped. GPUs are returned in index order.

    Args:
        text: stdout of nvidia-smi (decoded).
        time: when the sample was taken (epoch seconds).
        returncode: nvidia-smi's exit status, used only to word the error when no row parses.

    Returns:
        Every GPU that has a row.

    Raises:
        GpuError: no line is a row; carries :func:`classify_error`'s message.
    """
    gpus: list[GpuSample] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            gpus.append(parse_query_line(line))
        except ValueError:
            continue
    if not gpus:
        message, fatal = _classify(text, returncode)
        raise GpuError(message, fatal)
    return GpuReading(time=time, gpus=tuple(sorted(gpus, key=lambda g: g.index)))


#: The ``--query-compute-apps`` fields, in the order :func:`parse_compute_apps` reads them.
COMPUTE_FIELDS: tuple[str, ...] = ("pid", "process_name", "used_memory", "gpu_uuid")


def compute_apps_argv() -> list[str]:
    """The ``nvidia-smi`` command listing processes that hold GPU memory (one row per process and
    GPU): ``["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
    "--format=csv,noheader,nounits"]``."""
    return ["nvidia-smi", "--query-compute-apps=" + ",".join(COMPUTE_FIELDS), "--format=csv,noheader,nounits"]


def parse_compute_apps(text: str, uuid_index: dict[str, int] | None = None) -> tuple[GpuProcess, ...]:
    """The processes of :func:`read_compute_apps` (what could not be read left out or None)."""
    return read_compute_apps(text, uuid_index).apps


def read_compute_apps(text: str, uuid_index: dict[str, int] | None = None) -> AppsRead:
    """Parse the :func:`compute_apps_argv` output.

    Format of ``nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid
    --format=csv,noheader,nounits`` (FORMATS.md 1.3; fixtures ``compute-apps.*.csv``): ``51873,
    sglang::scheduler_TP0, 73072, GPU-…``. No process: empty output, exit 0. The name is what
    ``/proc/PID/cmdline`` shows (engines set titles) and may hold commas, so the row is read
    outside-in. Memory is MiB; ``[N/A]`` (Windows WDDM, restricted containers) gives None, and so
    does ``[Insufficient Permissions]`` as a name (kept as the name text).

    Args:
        text: stdout. uuid_index: GPU uuid → index from the last ``--query-gpu`` sample, so each
            process gets its GPU's index (None when the uuid is unknown).

    Returns:
        The processes in output order (lines that are not rows are skipped) and the cells that
        could not be read: a pid of 0 or over :data:`MAX_PID` leaves its row out (it names no
        process that could be acted on); a memory cell that is not a size in range is None.
    """
    out = []
    bad: list[Unparsable] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().split(",")]
        if len(cells) < 4 or not (cells[0].isascii() and cells[0].isdigit()):
            continue
        if len(cells[0]) > 8 or not 0 < int(cells[0]) <= MAX_PID:
            bad.append(Unparsable("pid", _cut(cells[0]), f"not a process id (1..{MAX_PID})"))
            continue
        uuid = cells[-1]
        name = ", ".join(cells[1:-2])
        out.append(GpuProcess(pid=int(cells[0]), name=name, mem_mib=_as_int(_cell(cells[-2], "used_memory", bad)),
                              gpu_uuid=uuid, gpu_index=(uuid_index or {}).get(uuid)))
    return AppsRead(tuple(out), tuple(bad))


def classify_error(output: str, returncode: int) -> str:
    """Say in one line why nvidia-smi gave no data.

    The texts are nvidia-smi's own, printed on **stdout** (FORMATS.md 1.2): driver not loaded (exit
    9), ``Failed to initialize NVML: Driver/library version mismatch`` (18, observed), ``No devices
    were found`` (6), ``Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost…``
    (also ``GPU0000:…`` on newer drivers, ``gpu …`` from ``-L``). A shell reports a missing binary
    with exit 127 / ``command not found``.

    Args:
        output: nvidia-smi's stdout (and stderr, if the caller has it).
        returncode: its exit status.

    Returns:
        One line for an operator (plain text; quotes host text with control characters removed).
    """
    return _classify(output, returncode)[0]


def _classify(output: str, returncode: int) -> tuple[str, bool]:
    """:func:`classify_error`'s message and whether the failure is fatal (see :class:`GpuError`)."""
    text = output or ""
    lower = text.lower()
    if "couldn't communicate with the nvidia driver" in lower or "driver not loaded" in lower:
        return MSG_DRIVER_NOT_LOADED, True
    if "driver/library version mismatch" in lower:
        version = _NVML_VERSION_RE.search(text)
        suffix = f" (NVML library {_clean(version.group(1))})" if version else ""
        return MSG_MISMATCH + suffix, True
    if "no devices were found" in lower:
        return MSG_NO_DEVICES, True
    handle = _HANDLE_RE.search(text)
    if handle:
        bus_id, reason = handle.group(1), _clean(handle.group(2).splitlines()[0] if handle.group(2) else "")
        if "gpu is lost" in reason.lower():
            return f"GPU {bus_id} is lost (fell off the bus): reboot the host to recover it", False
        return (f"GPU {bus_id} cannot be reached ({reason or 'no reason given'}); "
                "the other GPUs can still be read one by one"), False
    if returncode == 127 or "command not found" in lower or re.search(r"nvidia-smi: (?:\S+ )?not found", lower):
        return MSG_NOT_INSTALLED, True
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        return f"nvidia-smi gave no output (exit {returncode})", False
    return f"nvidia-smi failed (exit {returncode}): {_clean(first)}", False


# --- NVML -----------------------------------------------------------------------------------------


class NvmlSource:
    """Local GPU sampling through NVML (``pynvml`` from the ``nvidia-ml-py`` package).

    Calls block (ctypes into ``libnvidia-ml.so.1``); run :meth:`sample` in a thread from async
    code. Values match the nvidia-smi source: memory bytes → MiB (``// 1024**2``), power mW → W,
    ``power_limit_w`` from ``nvmlDeviceGetPowerManagementLimit`` (nvidia-smi's ``power.limit``).

    Args:
        nvml: the ``pynvml`` module, or an object with the same names (tests); None imports it.
    """

    #: NVML errors that mean the driver state is gone for every device (nvidia_gpu_exporter
    #: re-initialises on these); they raise :class:`GpuError` instead of giving None.
    FATAL_ERRORS = ("NVMLError_Uninitialized", "NVMLError_DriverNotLoaded",
                    "NVMLError_LibRmVersionMismatch", "NVMLError_LibraryNotFound")
    #: NVML errors that mean one device is unusable: its sample carries a note.
    DEVICE_ERRORS = ("NVMLError_GpuIsLost", "NVMLError_Unknown", "NVMLError_ResetRequired")

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml  # imported only where NVML is wanted

            nvml = pynvml
        self._nvml = nvml
        self._open = False

    @classmethod
    def open(cls, nvml: Any = None) -> NvmlSource:
        """Initialise NVML (``nvmlInit``) and return a source ready to sample.

        Args:
            nvml: as for the constructor.

        Raises:
            GpuError: NVML cannot start (library not found, driver not loaded, driver/library
                mismatch, …); always ``fatal``.
        """
        source = cls(nvml)
        try:
            source._nvml.nvmlInit()
        except source._error_class("NVMLError") as exc:
            raise GpuError(source._message(exc), fatal=True) from exc
        source._open = True
        return source

    def sample(self, time: float) -> GpuReading:
        """Read every GPU once.

        Args:
            time: when the sample is taken (epoch seconds; the injected clock's "now").

        Returns:
            One sample per device in index order. A field NVML cannot give is None; a device that
            cannot be reached is a sample with empty uuid/name, None values and a note
            (``GPU is lost``, ``Unknown Error``).

        Raises:
            GpuError: NVML as a whole failed (driver gone, not initialised).
        """
        nvml = self._nvml
        nvml_error = self._error_class("NVMLError")
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml_error as exc:
            raise GpuError(self._message(exc), fatal=self._is(exc, self.FATAL_ERRORS)) from exc
        gpus = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml_error as exc:
                if self._is(exc, self.FATAL_ERRORS):
                    raise GpuError(self._message(exc), fatal=True) from exc
                gpus.append(GpuSample(index, "", "", None, None, None, note=str(exc)))
                continue
            gpus.append(self._device(index, handle))
        return GpuReading(time=time, gpus=tuple(gpus))

    def close(self) -> None:
        """Shut NVML down (``nvmlShutdown``); safe to call twice."""
        if not self._open:
            return
        self._open = False
        try:
            self._nvml.nvmlShutdown()
        except self._error_class("NVMLError"):
            pass

    def __enter__(self) -> NvmlSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers --

    def _device(self, index: int, handle: Any) -> GpuSample:
        """One device's sample; each field read on its own so one failure costs one value."""
        nvml = self._nvml
        notes: list[str] = []

        def field(call: Callable[[], Any]) -> Any:
            try:
                return call()
            except self._error_class("NVMLError") as exc:
                if self._is(exc, self.FATAL_ERRORS):
                    raise GpuError(self._message(exc), fatal=True) from exc
                if self._is(exc, self.DEVICE_ERRORS) and str(exc) not in notes:
                    notes.append(str(exc))
                return None

        memory = field(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        util = field(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        power_mw = field(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        limit_mw = field(lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
        return GpuSample(
            index=index,
            uuid=_text(field(lambda: nvml.nvmlDeviceGetUUID(handle))),
            name=_text(field(lambda: nvml.nvmlDeviceGetName(handle))),
            mem_used_mib=_mib(getattr(memory, "used", None)),
            mem_total_mib=_mib(getattr(memory, "total", None)),
            util_pct=_available(getattr(util, "gpu", None)),
            temp_c=_available(field(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))),
            power_w=_watts(power_mw),
            power_limit_w=_watts(limit_mw),
            note="; ".join(notes) or None,
        )

    def _error_class(self, name: str) -> type[BaseException] | tuple[()]:
        """The bindings' exception class ``name``, or ``()`` (matches nothing) when they lack it."""
        return getattr(self._nvml, name, ())

    def _is(self, exc: BaseException, names: tuple[str, ...]) -> bool:
        return any(isinstance(exc, self._error_class(name)) for name in names)

    def _message(self, exc: BaseException) -> str:
        """One line for an operator about a host-level NVML failure."""
        if self._is(exc, ("NVMLError_LibraryNotFound",)):
            return MSG_NO_LIBRARY
        if self._is(exc, ("NVMLError_DriverNotLoaded",)):
            return MSG_DRIVER_NOT_LOADED
        if self._is(exc, ("NVMLError_LibRmVersionMismatch",)):
            return MSG_MISMATCH
        return f"NVML failed: {_clean(str(exc))}"


# --- cells ------------------------------------------------------------------------------------------


def _is_token(cell: str) -> bool:
    """A "no value" cell (``[N/A]``, ``[GPU requires reset]``, …)."""
    return cell.lower() in NA_TOKENS or cell.lower() == RESET_TOKEN.lower()


def _cell(cell: str, column: str, bad: list[Unparsable], gpu: int | None = None) -> float | None:
    """A numeric cell of ``column``: the number (units allowed), None for a "no value" cell; a value
    that is not a finite number in :data:`COLUMN_RANGES` is None and appended to ``bad``."""
    if _is_token(cell) or _BRACKET_RE.fullmatch(cell):
        return None
    m = _NUMBER_RE.fullmatch(cell)
    why = None
    value = None
    if m is None:
        why = "not a number"
    elif len(m.group(1)) > 40:  # float() would give inf past 309 digits, int() raise past 4300
        why = f"{len(m.group(1))} digits"
    else:
        value = float(m.group(1))
        lo, hi = COLUMN_RANGES[column]
        if not lo <= value <= hi:
            why = f"out of range {_num(lo)}..{_num(hi)}"
    if why is not None:
        bad.append(Unparsable(column, _cut(cell), why, gpu))
        return None
    return value


def _num(x: float) -> str:
    """A range bound as written: ``0``, ``100``, ``1099511627776``, ``-0.5``."""
    return str(int(x)) if float(x).is_integer() else str(x)


def _as_int(value: float | None) -> int | None:
    """A checked cell as an int (the values are finite and in range: no OverflowError)."""
    return None if value is None else int(value)


def _cut(cell: str, limit: int = 40) -> str:
    """A cell as shown in a message: control characters dropped, cut to ``limit`` characters."""
    return _clean(cell, limit)


def _clean(text: str, limit: int = 200) -> str:
    """Host text made one plain line by the one sanitiser (:func:`probes.hosttext.one_line`), cut to ``limit``."""
    return one_line(text.strip(), max_chars=limit)


def _text(value: Any) -> str:
    """NVML strings: ``str`` (nvidia-ml-py ≥ 11.515) or ``bytes`` (older bindings); None → ``""``."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


#: ``NVML_VALUE_NOT_AVAILABLE`` as ``c_uint(-1)`` / ``c_ulonglong(-1)``; read as "no value".
_NOT_AVAILABLE = (2**32 - 1, 2**64 - 1)


def _available(value: Any) -> int | None:
    if value is None or value in _NOT_AVAILABLE:
        return None
    return int(value)


def _mib(value_bytes: Any) -> int | None:
    value = _available(value_bytes)
    return None if value is None else value // 1024**2


def _watts(value_mw: Any) -> float | None:
    value = _available(value_mw)
    return None if value is None else round(value / 1000, 2)
