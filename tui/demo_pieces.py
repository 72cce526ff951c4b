"""The pieces the demo's hosts (:mod:`tui.demo`) are built from: GPUs with the figures of real
captures, journal records with the fields of real systemd 252 records, GPU keyframes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from probes.transport.replay.scenario import Gpu, GpuFrame, journal_value

#: The H100's name as ``nvidia-smi`` prints it.
H100 = "NVIDIA H100 80GB HBM3"


def h100(i: int, tag: str) -> Gpu:
    """GPU ``i`` (0-based) of a host's H100s, its UUID ending in ``tag`` and ``i``: total memory
    (MiB), power limit, idle and gpu-burn load figures (W, C) from the real H100 capture
    (tests/fixtures/nvidia-smi/query-gpu.*.csv), a little apart per GPU."""
    return Gpu(i, f"GPU-00000000-0000-0000-0000-0000000000{tag}{i}", H100, 81559, 700.0,
               69.85 + (1.37, 0.0, 2.16, 0.84)[i % 4], 631.95, 33 + (2, 0, 1, 3)[i % 4], 59)


def h200(i: int) -> Gpu:
    """GPU ``i`` (0-7) of the 8x H200 host, from the real H200 capture: 143771 MiB, 700 W; idle
    77.71 W / 28 C, load 627.40 W / 52 C, a little apart per GPU."""
    return Gpu(i, f"GPU-00000000-0000-0000-0000-0000000000c{i}", "NVIDIA H200", 143771, 700.0,
               77.71 + (0.0, 1.12, 0.64, 2.03, 0.37, 1.58, 0.91, 0.22)[i], 627.40, 28 + (0, 2, 1, 3, 0, 2, 1, 4)[i], 52)


def stdout_record(*, host: str, machine: str, boot: str, unit: str, invocation: str, stream: str, pid: int,
                   comm: str, exe: str, cmdline: str, ident: str, message: str | bytes,
                   **extra: str) -> dict[str, Any]:
    """A service-output record with the fields (and key order) of the real systemd 252 records in
    ``sglang-startup.all.jsonl``."""
    rec: dict[str, Any] = {
        "_UID": "0", "PRIORITY": "6", "_HOSTNAME": host, "__CURSOR": "", "_BOOT_ID": boot, "_CMDLINE": cmdline,
        "_RUNTIME_SCOPE": "system", "_GID": "0", "_PID": str(pid), "_TRANSPORT": "stdout", "_MACHINE_ID": machine,
        "_COMM": comm, "_EXE": exe, "_SYSTEMD_INVOCATION_ID": invocation, "_STREAM_ID": stream,
        "SYSLOG_FACILITY": "3", "_SYSTEMD_SLICE": "system.slice", "_SYSTEMD_UNIT": unit,
        "__MONOTONIC_TIMESTAMP": "", "SYSLOG_IDENTIFIER": ident, "_CAP_EFFECTIVE": "1ffffffffff",
        "__REALTIME_TIMESTAMP": "", "MESSAGE": journal_value(message), "_SYSTEMD_CGROUP": f"/system.slice/{unit}",
    }
    rec.update(extra)
    return rec


def started_record(template: dict[str, Any], *, host: str, machine: str, boot: str, unit: str, description: str,
                    invocation: str, job_id: int) -> dict[str, Any]:
    """PID 1's ``Started UNIT - Description.`` record, field for field as systemd 252 wrote it
    (``sglang-startup.all.jsonl`` record 1), for another host and unit."""
    rec = dict(template)
    rec.update({"_HOSTNAME": host, "_MACHINE_ID": machine, "_BOOT_ID": boot, "UNIT": unit,
                "INVOCATION_ID": invocation, "JOB_ID": str(job_id), "MESSAGE": f"Started {unit} - {description}."})
    return rec


def piecewise(x: float, points: Sequence[tuple[float, float]]) -> float:
    """Linear interpolation through ``points`` (x ascending); constant outside."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def gpu_frames(n: int, points: Iterable[tuple[float, Sequence[int | None] | int | None, Sequence[int | None] | int | None]]
            ) -> tuple[GpuFrame, ...]:
    """GPU keyframes from ``(offset, memory, util)`` where each value is per GPU or one for all."""
    out = []
    for t, mem, util in points:
        m = tuple(mem) if isinstance(mem, (list, tuple)) else (mem,) * n
        u = tuple(util) if isinstance(util, (list, tuple)) else (util,) * n
        out.append(GpuFrame(float(t), m, u))
    out.sort(key=lambda f: f.offset_s)
    return tuple(out)


def idle_tail(n: int, t0: float, t1: float, mem: Sequence[int], pattern: Sequence[int]) -> list:
    """Idle-with-a-little-load keyframes every 15 s from ``t0`` to ``t1``."""
    out = []
    t, k = t0, 0
    while t <= t1:
        out.append((t, list(mem), [min(100, pattern[(k + i) % len(pattern)]) for i in range(n)]))
        t += 15.0
        k += 1
    return out


def message_text(fields: dict[str, Any]) -> str:
    """A journal record's ``MESSAGE`` as text: a byte array (``-o json``'s form for a message that
    is not plain UTF-8) decoded with replacement and its leading ``\\r`` dropped; "" when absent."""
    m = fields.get("MESSAGE")
    if isinstance(m, list):
        return bytes(m).decode("utf-8", "replace").lstrip("\r")
    return "" if m is None else str(m)
