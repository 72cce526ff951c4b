"""``nvidia-smi`` as a replayed host answers it: ``--query-gpu`` fields and their aliases, the
``csv`` format's options, ``-i`` to pick GPUs, and loop mode (``-l``/``-lms``). GPU values follow
the simulated host (:meth:`~probes.transport.replay.host.SimulatedHost.gpu_at`); ``--query-compute-apps``
is refused (not replayed).

What it prints: ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits [-l S | -lms MS]``: one line
per GPU, fields joined by ``", "``, in the order asked for, power with two decimals, ``[N/A]`` for a
value the board does not give; in loop mode every GPU once per interval, no separator line
(``tests/fixtures/nvidia-smi/query-gpu.h100x8-sglang-tp8.loop.csv``).
No GPU: exit 6, "No devices were found" (``tests/fixtures/nvidia-smi/error.no-devices.txt``).

Accepted: ``nvidia-smi --query-gpu=F,… --format=csv[,noheader][,nounits] [-i IDS] [-l [S] | -lms MS]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from probes.transport.replay.command_line import UsageError
from probes.transport.replay.host import SimulatedHost
from probes.transport.replay.scenario import Gpu
from probes.transport.runner import Completed, ProbeError


def run_nvidia_smi(host: SimulatedHost, argv: tuple[str, ...], args: Sequence[str]) -> Completed:
    """``nvidia-smi ARGS`` once on ``host`` (``argv``: the whole command, for the result).

    Returns:
        Exit 0 and the header (unless ``noheader``) and one line per GPU; exit 2 and nvidia-smi's
        message for arguments it refuses; exit 6 on a host without GPUs.

    Raises:
        ProbeError: ``command`` for ``-l``/``-lms``, which never end (use :func:`stream_nvidia_smi`).
    """
    try:
        q = _parse_nvidia_smi(args)
    except UsageError as exc:
        return Completed(argv, exc.code, f"{exc}\n".encode())
    if q.interval_s is not None:
        raise ProbeError("command", "nvidia-smi -l never ends: use stream()")
    if not host.scenario.gpus:
        return Completed(argv, 6, b"No devices were found\n")  # nvidia-smi/error.no-devices.txt
    return Completed(argv, 0, b"".join(line + b"\n" for line in _gpu_lines(host, q, header=True)))


async def stream_nvidia_smi(host: SimulatedHost, args: Sequence[str]) -> AsyncIterator[bytes]:
    """The output lines (bytes, no newline) of ``nvidia-smi ARGS`` on ``host``: the header and the
    GPUs, then in loop mode the GPUs again every interval until the host is closed.

    Raises:
        ProbeError: ``command`` for arguments nvidia-smi refuses; ``closed`` when an outage begins.
    """
    try:
        q = _parse_nvidia_smi(args)
    except UsageError as exc:
        raise ProbeError("command", f"nvidia-smi exited {exc.code}: {exc}") from None
    first = True
    while True:
        if not host.check_open("nvidia-smi"):
            return
        for line in _gpu_lines(host, q, header=first):
            yield line
        first = False
        if q.interval_s is None:
            return
        await host.wait_until(host.now_s() + q.interval_s)
        # An outage that began during the wait ends the stream at the top of the loop; a wait cut
        # short by one would otherwise sample early.


def _gpu_lines(host: SimulatedHost, q: _GpuQuery, header: bool) -> list[bytes]:
    """One sample: the header line (when ``header`` and not ``noheader``), then the chosen GPUs."""
    t = host.now_s()
    values = host.gpu_at(t)
    out = []
    if header and not q.noheader:
        out.append(", ".join(_header(f, q.nounits) for f in q.fields).encode())
    for gpu, (mem, util) in zip(host.scenario.gpus, values):
        if q.ids is not None and str(gpu.index) not in q.ids and gpu.uuid not in q.ids:
            continue
        cells = [_gpu_cell(f, gpu, mem, util, len(host.scenario.gpus), q.nounits) for f in q.fields]
        out.append(", ".join(cells).encode())
    return out


@dataclass
class _GpuQuery:
    """A ``--query-gpu`` command line: canonical field names in the order asked, the ``csv``
    options, the loop interval in seconds (None: once) and the ``-i`` GPUs (indexes or UUIDs, None: all)."""

    fields: list[str]
    noheader: bool
    nounits: bool
    interval_s: float | None
    ids: set[str] | None


#: Field aliases (``nvidia-smi --help-query-gpu``): the header prints the canonical name.
_ALIASES = {"gpu_uuid": "uuid", "gpu_name": "name", "clocks.sm": "clocks.current.sm"}
_UNITS = {"memory.used": "MiB", "memory.total": "MiB", "memory.free": "MiB", "utilization.gpu": "%",
          "power.draw": "W", "power.limit": "W", "enforced.power.limit": "W", "clocks.current.sm": "MHz"}
_KNOWN = ("index", "uuid", "name", "count", "memory.used", "memory.total", "memory.free", "utilization.gpu",
          "temperature.gpu", "power.draw", "power.limit", "enforced.power.limit", "clocks.current.sm",
          "pci.bus_id", "driver_version")


def _parse_nvidia_smi(args: Sequence[str]) -> _GpuQuery:
    """Read an ``nvidia-smi`` command line (without the program name).

    Raises:
        UsageError: (code 2) arguments nvidia-smi refuses, or a form the replay does not model.
    """
    args = list(args)
    fields: list[str] | None = None
    fmt: list[str] | None = None
    interval: float | None = None
    ids: set[str] | None = None
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a.startswith("--query-gpu="):
            fields = [f.strip() for f in a.split("=", 1)[1].split(",") if f.strip()]
        elif a == "--query-gpu" and nxt is not None:
            fields = [f.strip() for f in nxt.split(",") if f.strip()]
            i += 1
        elif a.startswith("--format="):
            fmt = [f.strip() for f in a.split("=", 1)[1].split(",")]
        elif a == "--format" and nxt is not None:
            fmt = [f.strip() for f in nxt.split(",")]
            i += 1
        elif a in ("-lms", "--loop-ms"):
            if nxt is None or not nxt.isdigit():
                raise UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
            interval = max(1, int(nxt)) / 1000.0
            i += 1
        elif a.startswith("--loop-ms="):
            interval = max(1, int(a.split("=", 1)[1])) / 1000.0
        elif a in ("-l", "--loop"):
            if nxt is not None and nxt.isdigit():
                interval = float(max(1, int(nxt)))
                i += 1
            else:
                interval = 5.0  # "If no argument is specified for the -l form a default interval of 5 seconds"
        elif a.startswith("--loop="):
            interval = float(max(1, int(a.split("=", 1)[1])))
        elif a in ("-i", "--id") and nxt is not None:
            ids = {x.strip() for x in nxt.split(",")}
            i += 1
        elif a.startswith("--id="):
            ids = {x.strip() for x in a.split("=", 1)[1].split(",")}
        elif a.startswith("--query-compute-apps"):
            raise UsageError("upwatch replay: --query-compute-apps is not replayed", 2)
        else:
            raise UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
        i += 1
    if fields is None or fmt is None or "csv" not in fmt:
        raise UsageError("upwatch replay: only nvidia-smi --query-gpu=... --format=csv[,...] is replayed", 2)
    canon = [_ALIASES.get(f, f) for f in fields]
    for f in canon:
        if f not in _KNOWN:
            raise UsageError(f'Field "{f}" is not a valid field to query.', 2)
    return _GpuQuery(canon, "noheader" in fmt, "nounits" in fmt, interval, ids)


def _header(f: str, nounits: bool) -> str:
    """Field ``f``'s header cell: its name, with ``[unit]`` for a field that has one."""
    unit = _UNITS.get(f)
    return f"{f} [{unit}]" if unit else f


def _gpu_cell(f: str, gpu: Gpu, mem: int | None, util: int | None, count: int, nounits: bool) -> str:
    """Field ``f`` of ``gpu`` with ``mem`` MiB used at ``util`` % (None: ``[N/A]``), on a host of
    ``count`` GPUs; with its unit unless ``nounits``."""
    def unit(v: str, u: str) -> str:
        return v if nounits or v.startswith("[") else f"{v} {u}"

    na = "[N/A]"
    frac = (util or 0) / 100.0
    if f == "index":
        return str(gpu.index)
    if f == "uuid":
        return gpu.uuid
    if f == "name":
        return gpu.name
    if f == "count":
        return str(count)
    if f == "memory.used":
        return unit(na if mem is None or gpu.memory_total_mib is None else str(mem), "MiB")
    if f == "memory.total":
        return unit(na if gpu.memory_total_mib is None else str(gpu.memory_total_mib), "MiB")
    if f == "memory.free":
        if mem is None or gpu.memory_total_mib is None:
            return unit(na, "MiB")
        return unit(str(max(0, gpu.memory_total_mib - mem - 479)), "MiB")  # 479 MiB reserved on H100
    if f == "utilization.gpu":
        return unit(na if util is None else str(util), "%")
    if f == "temperature.gpu":
        return str(int(round(gpu.idle_temp_c + (gpu.load_temp_c - gpu.idle_temp_c) * frac)))
    if f == "power.draw":
        return unit(f"{gpu.idle_power_w + (gpu.load_power_w - gpu.idle_power_w) * frac:.2f}", "W")
    if f in ("power.limit", "enforced.power.limit"):
        return unit(na if gpu.power_limit_w is None else f"{gpu.power_limit_w:.2f}", "W")
    if f == "clocks.current.sm":
        return unit("1980" if util else "345", "MHz")
    if f == "pci.bus_id":
        return f"00000000:{0x18 + 0x10 * gpu.index:02X}:00.0"
    if f == "driver_version":
        return "590.48.01"
    return na
