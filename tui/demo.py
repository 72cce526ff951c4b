"""The demo's four simulated hosts, built from real log lines (``tui/scenarios/``, see its README).

:func:`demo_scenarios` returns one :class:`~probes.transport.replay.scenario.Scenario` per host (times are scenario
seconds; the demo plays them at 10x):

* ``gpu-node-1`` ``sglang.service``: SGLang 0.4.3 TP4 (QwQ-32B) on 4x H100 reaches ready at 158.2 s
  (``/health`` refused until 136 s, 503 until 158.2 s, then 200).
* ``gpu-node-2`` ``vllm.service``: vLLM 0.6.x TP2 CUDA OOM, three restarts, start limit: failed at
  171.2 s.
* ``gpu-node-3`` ``sglang.service``: SGLang DP/TP8 DeepSeek on 8x H200 stalls at ``Capturing batches
  0/34``: its last line is at 56.0 s, then nothing, ever.
* ``gpu-node-4`` ``trtllm.service``: TensorRT-LLM 1.1 (in docker) downloads (1.5-29 s), loads, and
  is ready at 150.25 s (``/health`` 200 from 150.5 s).

Every journal line's text is real (copied byte for byte from a public log or a real systemd 252
capture); what is derived is named in ``tui/scenarios/README.md``: the times between lines, the
PIDs of hosts 3 and 4, and every GPU, unit-state and health number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from probes.transport.replay.scenario import Gpu, HealthFrame, Scenario, UnitFrame, journal_value, stamp_journal
from tui.demo_pieces import (gpu_frames, h100, h200, idle_tail, message_text, piecewise, started_record,
                             stdout_record)

#: Where the source files live inside the installed package (``package-data``: ``scenarios/*``).
SCENARIO_FILES = ("sglang-startup.all.jsonl", "vllm-restart-loop.all.jsonl", "sglang-ok-03.log",
                  "sglang-fail-graphcapture-01.log", "sglang-hang-graphcapture-01.log", "trtllm-ok-01.log")


def read_scenario_file(name: str) -> bytes:
    """The bytes of one file of ``tui/scenarios/``."""
    return (resources.files("tui") / "scenarios" / name).read_bytes()


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_scenario_file(name).splitlines() if line.strip()]


def _log_lines(name: str) -> list[str]:
    """The file's ``\\n``-separated lines (1-based: ``lines[n - 1]``), as UTF-8 text."""
    return read_scenario_file(name).decode("utf-8").split("\n")


def demo_scenarios(start: float) -> list[Scenario]:
    """The four demo hosts, with scenario offset 0 at ``start`` (epoch seconds)."""
    return [sglang_ready(start), vllm_restart_loop(start), sglang_graph_stall(start), trtllm_download_ready(start)]


# --- a. gpu-node-1: SGLang TP4 start that reaches ready -------------------------------------------

#: Record number (1-based, in ``sglang-startup.all.jsonl``) -> scenario offset (s). Records between
#: anchors keep their real relative spacing (linear in their ``__REALTIME_TIMESTAMP``); the start
#: is stretched about 4.5x, and the 0 s gaps between phases are opened up.
_A_ANCHORS = {1: 0.0, 2: 12.0, 3: 16.0, 4: 40.0, 8: 48.0, 9: 50.0, 12: 52.0, 13: 82.0, 15: 86.0, 16: 92.0,
              17: 97.0, 22: 127.0, 24: 128.0, 25: 131.0, 26: 133.0, 30: 136.0, 31: 140.0, 32: 158.0, 33: 158.2,
              34: 162.0}
#: The shard frames ``1/14``..``13/14`` the fixture dropped: lines 34-46 of ``sglang-ok-03.log``.
_A_SHARD_LINES = range(34, 47)
_A_SHARD_START, _A_SHARD_END = 52.0, 82.0
A_UVICORN_S, A_READY_S = 136.0, 158.2


def sglang_ready(start: float) -> Scenario:
    """gpu-node-1: the real journal of an SGLang 0.4.3 TP4 start of ``sglang.service``, with the
    13 intermediate shard-bar frames of the same run put back, stretched to 2.7 minutes."""
    recs = _jsonl("sglang-startup.all.jsonl")
    t_orig = [int(r["__REALTIME_TIMESTAMP"]) / 1e6 for r in recs]
    anchors = sorted(_A_ANCHORS.items())
    points = [(t_orig[n - 1], off) for n, off in anchors]
    timed: list[tuple[float, dict[str, Any]]] = []
    for r, t in zip(recs, t_orig):
        timed.append((piecewise(t, points), r))
    shard_template = recs[11]  # record 12: the 0/14 frame, written by TP0 (PID 3421)
    log = _log_lines("sglang-ok-03.log")
    for k, n in enumerate(_A_SHARD_LINES, 1):
        rec = dict(shard_template)
        rec["MESSAGE"] = journal_value("\r" + log[n - 1])  # tqdm's leading \r, as the fixture restores it
        timed.append((_A_SHARD_START + (_A_SHARD_END - _A_SHARD_START) * k / 14, rec))
    seqnum = recs[0]["__CURSOR"].split(";")[0][2:]
    mono0 = int(recs[0]["__MONOTONIC_TIMESTAMP"])
    journal = stamp_journal(timed, start, seqnum_id=seqnum, monotonic_start_us=mono0)

    n = 4
    d_mem = [46, 0, 12, 0]  # TP0 holds a little more (as in the H100 loop fixture)
    weights_mib = 15913     # "Load weight end ... mem usage=15.54 GB"
    kv_mib = 71388          # KV pool on an H100 80GB (the H100 loop fixture's jump)
    graph_mib = 950         # "Capture cuda graph end ... mem usage=0.93 GB"
    g: list = [(0, 0, 0), (16, 0, 0), (40, 524, 0), (48, 1028, 0), (50, 1028, 1)]
    for k in range(15):  # one step per shard, util low while streaming weights
        t = _A_SHARD_START + (_A_SHARD_END - _A_SHARD_START) * k / 14
        g.append((t, [1028 + d + weights_mib * k // 14 for d in d_mem], [(2, 4, 1, 3)[(k + i) % 4] for i in range(n)]))
    g += [(86, [1028 + d + weights_mib for d in d_mem], 0), (91.9, [1028 + d + weights_mib for d in d_mem], 0),
          (92, [kv_mib + d for d in d_mem], 0), (97, [kv_mib + d for d in d_mem], 0)]
    bursts = [23, 41, 38, 44, 37, 12]  # graph capture (the loop fixture's figures)
    for k, u in enumerate(bursts, 1):
        t = 97 + 30 * k / (len(bursts) + 1)
        g.append((t, [kv_mib + d + graph_mib * k // (len(bursts) + 1) for d in d_mem], [u, u - 3, u + 2, u - 1]))
    steady = [kv_mib + d + graph_mib for d in d_mem]
    g += [(127, steady, 9), (128, steady, 0), (140, steady, 0), (146, steady, 62), (152, steady, 100),
          (158, [m + 20 for m in steady], 31), (162, [m + 20 for m in steady], 3)]
    g += idle_tail(n, 177, 1800, [m + 20 for m in steady], [0, 4, 1, 5, 2, 0, 3])

    unit = "sglang.service"
    base = {"Restart": "on-failure", "RestartUSec": "10s", "Description": "SGLang server",
            "FragmentPath": "/etc/systemd/system/sglang.service", "StartLimitIntervalUSec": "10s",
            "StartLimitBurst": 5}
    # ExecMainStartTimestampMonotonic=17266158233 in active-running.gpu-node-1.derived.txt: 8.9 ms
    # before the Started record.
    t_exec = (17266158233 - mono0) / 1e6
    running = {"ActiveState": "active", "SubState": "running", "MainPID": 3207, "ExecMainPID": 3207,
               "ExecMainStartTimestamp": t_exec, "ExecMainStartTimestampMonotonic": t_exec,
               "StateChangeTimestamp": t_exec, "StateChangeTimestampMonotonic": t_exec,
               "InactiveExitTimestamp": t_exec, "InactiveExitTimestampMonotonic": t_exec,
               "ActiveEnterTimestamp": t_exec, "ActiveEnterTimestampMonotonic": t_exec,
               "ControlGroup": f"/system.slice/{unit}", "MemoryCurrent": 412_655_616,
               "InvocationID": recs[0]["INVOCATION_ID"]}
    units = [UnitFrame(-30.0, base), UnitFrame(t_exec, running)]
    # MemoryCurrent includes the page cache of the safetensors read at load time
    # (systemd's MemoryCurrent is the cgroup's memory.current).
    for t, b in ((16, 1_289_748_480), (40, 6_845_104_128), (52, 9_126_805_504), (67, 38_654_705_664),
                 (82, 68_719_476_736), (136, 70_866_960_384), (A_READY_S, 71_834_742_784)):
        units.append(UnitFrame(float(t), {"MemoryCurrent": b}))

    health = (HealthFrame(0.0, "refused"), HealthFrame(A_UVICORN_S, 503), HealthFrame(A_READY_S, 200))
    return Scenario(
        host="gpu-node-1", unit=unit, engine="sglang", port=30000, model="/home/user/Qwen/QwQ-32B", start=start,
        gpus=tuple(h100(i, "a") for i in range(n)), journal=journal, unit_timeline=tuple(units),
        gpu_timeline=gpu_frames(n, g), health=health, max_model_len=131072,
        boot_id=recs[0]["_BOOT_ID"], seqnum_id=seqnum, monotonic_start_us=mono0,
        notes="SGLang 0.4.3 TP4 start of QwQ-32B that reaches ready")


# --- b. gpu-node-2: vLLM CUDA OOM restart loop ----------------------------------------------------

def vllm_restart_loop(start: float) -> Scenario:
    """gpu-node-2: the real journal of ``vllm.service`` crashing three times with a CUDA OOM in the
    profile run and stopped by the start limit, at its real relative times (171 s)."""
    recs = _jsonl("vllm-restart-loop.all.jsonl")
    t0 = int(recs[0]["__REALTIME_TIMESTAMP"])
    timed = [((int(r["__REALTIME_TIMESTAMP"]) - t0) / 1e6, r) for r in recs]
    seqnum = recs[0]["__CURSOR"].split(";")[0][2:]
    mono0 = int(recs[0]["__MONOTONIC_TIMESTAMP"])
    journal = stamp_journal(timed, start, seqnum_id=seqnum, monotonic_start_us=mono0)

    def when(pred) -> list[float]:
        return [t for t, r in timed if pred(r)]

    def text(r: dict[str, Any]) -> str:
        m = r.get("MESSAGE")
        return bytes(m).decode("utf-8", "replace") if isinstance(m, list) else str(m)

    starts = when(lambda r: text(r).startswith("Started vllm.service"))
    exits = when(lambda r: "Main process exited" in text(r))
    restarts = when(lambda r: "Scheduled restart job" in text(r))
    weights = when(lambda r: "Loading model weights took" in text(r) and r["_PID"] != "1")[::2]
    ooms = when(lambda r: "CUDA out of memory" in text(r))
    gave_up = when(lambda r: text(r).startswith("Failed to start vllm.service"))[0]
    main_pids = [int(r["_PID"]) for t, r in timed if "Loading model weights took" in text(r)][::2]
    invocations = [r["INVOCATION_ID"] for t, r in timed if text(r).startswith("Started vllm.service")]

    n = 2
    ctx, weights_mib, peak = 420, 10313, 21862  # "took 10.0714 GB"; "Process ... has 21.35 GiB memory in use"
    g: list = [(0, 0, 0)]
    for s, w, o, e in zip(starts, weights, ooms, exits):
        g += [(s, 0, 0), (s + 18, 0, 0), (s + 20, ctx, 0), (s + 24, [ctx + 310, ctx + 296], 0),
              (w - 0.2, [ctx + 310 + weights_mib, ctx + 296 + weights_mib], 3),
              (w + 0.2, [ctx + 310 + weights_mib, ctx + 296 + weights_mib], 0),
              (w + 1.0, [ctx + 310 + weights_mib + 900, ctx + 296 + weights_mib + 900], 97),
              (o - 0.1, [peak - 211, peak], 100), (o, [peak - 211, peak], 100),
              (e - 0.1, [peak - 211, peak], 0), (e + 0.1, 0, 0)]
    g.append((gave_up, 0, 0))

    unit = "vllm.service"
    base = {"Restart": "on-failure", "RestartUSec": "5s", "StartLimitIntervalUSec": "5min", "StartLimitBurst": 3,
            "Description": "vLLM OpenAI-compatible server", "FragmentPath": "/etc/systemd/system/vllm.service"}
    units = [UnitFrame(-30.0, base)]
    for k, (s, e, pid, inv) in enumerate(zip(starts, exits, main_pids, invocations)):
        ts = s - 0.0078  # ExecMainStart happens a few ms before PID 1 logs "Started"
        units.append(UnitFrame(ts, {
            "ActiveState": "active", "SubState": "running", "MainPID": pid, "ExecMainPID": pid, "Result": "success",
            "NRestarts": k, "ExecMainStartTimestamp": ts, "ExecMainStartTimestampMonotonic": ts,
            "ExecMainExitTimestamp": None, "ExecMainExitTimestampMonotonic": None, "ExecMainCode": 0,
            "ExecMainStatus": 0, "StateChangeTimestamp": ts, "StateChangeTimestampMonotonic": ts,
            "InactiveExitTimestamp": ts, "InactiveExitTimestampMonotonic": ts, "ActiveEnterTimestamp": ts,
            "ActiveEnterTimestampMonotonic": ts, "ControlGroup": f"/system.slice/{unit}", "InvocationID": inv,
            "MemoryCurrent": 2_147_483_648}))
        units.append(UnitFrame(s + 30, {"MemoryCurrent": 13_421_772_800}))
        dead = {"MainPID": 0, "Result": "exit-code", "ExecMainCode": 1, "ExecMainStatus": 1,
                "ExecMainExitTimestamp": e, "ExecMainExitTimestampMonotonic": e, "StateChangeTimestamp": e,
                "StateChangeTimestampMonotonic": e, "ActiveExitTimestamp": e, "ActiveExitTimestampMonotonic": e,
                "InactiveEnterTimestamp": e, "InactiveEnterTimestampMonotonic": e, "ControlGroup": None,
                "MemoryCurrent": None}
        if k < len(restarts):
            units.append(UnitFrame(e, {**dead, "ActiveState": "activating", "SubState": "auto-restart"}))
        r = restarts[k] if k < len(restarts) else None
        if r is not None and k == len(starts) - 1:
            # The restart the start limit refuses: failed/failed, Result stays exit-code
            # (tests/fixtures/systemctl-show/failed-start-limit-hit.txt).
            units.append(UnitFrame(r, {"NRestarts": k + 1, "ActiveState": "failed", "SubState": "failed",
                                       "StateChangeTimestamp": r, "StateChangeTimestampMonotonic": r}))
    return Scenario(
        host="gpu-node-2", unit=unit, engine="vllm", port=8000, model="meta-llama/Llama-3.2-11B-Vision-Instruct",
        start=start, gpus=tuple(Gpu(i, f"GPU-00000000-0000-0000-0000-0000000000d{i}", "NVIDIA A10", 23028, 150.0,
                                    16.21 + i * 0.87, 148.60, 31 + i, 71) for i in range(n)),
        journal=journal, unit_timeline=tuple(sorted(units, key=lambda f: f.offset_s)), gpu_timeline=gpu_frames(n, g),
        health=(HealthFrame(0.0, "refused"),), max_model_len=8192,
        boot_id=recs[0]["_BOOT_ID"], seqnum_id=seqnum, monotonic_start_us=mono0,
        notes="vLLM 0.6.x TP2 CUDA OOM in the profile run, three times, then the start limit")


# --- c. gpu-node-3: SGLang start that stalls in CUDA graph capture --------------------------------

_C_HOST = dict(host="gpu-node-3", machine="a0000000000000000000000000000003", boot="b0000000000000000000000000000003",
               unit="sglang.service", invocation="c0000000000000000000000000000003",
               stream="d0000000000000000000000000000003")
_C_MAIN_PID = 4188
_C_CMDLINE = ("/usr/bin/python3.12 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp 8 --dp 8 "
              "--enable-dp-attention --trust-remote-code --host 0.0.0.0 --port 30000")
_RANK_RE = re.compile(r"^\[[^\]]*?(?: DP(\d+))? TP(\d+)\]")
C_STALL_S = 56.0


def sglang_graph_stall(start: float) -> Scenario:
    """gpu-node-3: an SGLang DP/TP8 DeepSeek start on 8x H200 that hangs at ``Capturing batches
    0/34`` (the real lines of sglang-hang-graphcapture-01, SGLang issue #6017), after real earlier
    phase lines of sglang-ok-03 (start, weight-load begin) and sglang-fail-graphcapture-01 (DeepSeek
    TP8 weight end, KV cache, capture begin). Nothing follows, ever."""
    ok03 = _log_lines("sglang-ok-03.log")
    failgc = _log_lines("sglang-fail-graphcapture-01.log")
    hang = _log_lines("sglang-hang-graphcapture-01.log")
    template = _jsonl("sglang-startup.all.jsonl")[0]

    def rec(text: str, pid: int | None = None, **extra: str) -> dict[str, Any]:
        rank = _RANK_RE.match(text)
        if pid is None:
            pid = 4301 + int(rank.group(2)) if rank else _C_MAIN_PID
        if pid == _C_MAIN_PID:
            comm, cmd, exe = "python3.12", _C_CMDLINE, "/usr/bin/python3.12"
        else:
            r = pid - 4301
            comm, cmd, exe = "sglang::schedul", f"sglang::scheduler_DP{r}_TP{r}", "/usr/bin/python3.12"
        return stdout_record(host=_C_HOST["host"], machine=_C_HOST["machine"], boot=_C_HOST["boot"],
                              unit=_C_HOST["unit"], invocation=_C_HOST["invocation"], stream=_C_HOST["stream"],
                              pid=pid, comm=comm, exe=exe, cmdline=cmd, ident="python3.12", message=text, **extra)

    timed: list[tuple[float, dict[str, Any]]] = [
        (0.0, started_record(template, host=_C_HOST["host"], machine=_C_HOST["machine"], boot=_C_HOST["boot"],
                              unit=_C_HOST["unit"], description="SGLang server", invocation=_C_HOST["invocation"],
                              job_id=2207)),
    ]

    def spread(lines: Sequence[str], t0: float, t1: float) -> None:
        for k, line in enumerate(lines):
            timed.append((t0 + (t1 - t0) * k / max(1, len(lines) - 1), rec(line)))

    timed.append((8.0, rec(ok03[2 - 1])))                                 # platform detected (main)
    spread([ok03[n - 1] for n in range(9, 13)], 15.0, 15.004)             # Init torch distributed begin
    spread([ok03[n - 1] for n in range(21, 25)], 17.0, 17.002)            # ... ends
    spread([ok03[n - 1] for n in range(25, 29)], 17.5, 17.502)            # Load weight begin
    # "Load weight end. elapsed=32.63 s": the 163/163 bar (TP0 prints tqdm) 32.6 s after the begin.
    timed.append((50.1, rec("\r" + failgc[0], pid=4301)))
    spread([failgc[n - 1] for n in range(2, 18)], 50.2, 51.2)             # FP8 KV note + Load weight end x8
    spread([failgc[n - 1] for n in range(18, 35)], 51.6, 52.6)            # KV cache allocated, memory pool
    spread([failgc[n - 1] for n in (35, 36, 37, 38, 39, 40, 41, 43)], 54.5, 54.51)  # Capture cuda graph begin
    timed.append((55.2, rec(hang[0])))                                    # Capture cuda graph bs [...]
    bar, _, glued = hang[1].partition("[2025-06-26")
    # journald flushes TP0's unfinished tqdm frame when another process writes (systemd src/journal/journald-stream.c).
    timed.append((C_STALL_S - 0.2, rec("\r" + bar, pid=4301, _LINE_BREAK="pid-change")))
    timed.append((C_STALL_S - 0.19, rec("[2025-06-26" + glued)))
    spread([hang[n - 1] for n in (3, 4, 5)], C_STALL_S - 0.1, C_STALL_S)  # DeepGEMM JIT on DP3, DP4, DP1
    journal = stamp_journal(timed, start, seqnum_id="5e9e0000000000000000000000000003",
                            monotonic_start_us=4_318_220_517)

    n = 8
    stuck = [100, 0, 0, 0, 0, 100, 100, 100]  # DP1-DP4 in DeepGEMM JIT, the rest spinning in NCCL
    weights_mib, kv_mib, held = 81920, 114100, 143771 - 28641  # "avail_mem=27.97 GB" at capture
    g: list = [(0, 0, 0), (14.5, 0, 0), (15, 524, 0), (17, 1052, 0), (17.5, 1052, 2)]
    for k in range(1, 11):
        g.append((17.5 + 32.6 * k / 10, 1052 + weights_mib * k // 10, (3, 5, 2, 4)[k % 4]))
    g += [(51.5, 1052 + weights_mib, 0), (51.6, kv_mib, 0), (54.5, kv_mib, 0), (55.2, kv_mib + 600, 38),
          (C_STALL_S, held, stuck), (C_STALL_S + 60, held, stuck)]
    unit = _C_HOST["unit"]
    units = [UnitFrame(-30.0, {"Restart": "on-failure", "RestartUSec": "10s", "Description": "SGLang server",
                               "FragmentPath": "/etc/systemd/system/sglang.service"}),
             UnitFrame(-0.0091, {"ActiveState": "active", "SubState": "running", "MainPID": _C_MAIN_PID,
                                 "ExecMainPID": _C_MAIN_PID, "ExecMainStartTimestamp": -0.0091,
                                 "ExecMainStartTimestampMonotonic": -0.0091, "StateChangeTimestamp": -0.0091,
                                 "StateChangeTimestampMonotonic": -0.0091, "InactiveExitTimestamp": -0.0091,
                                 "InactiveExitTimestampMonotonic": -0.0091, "ActiveEnterTimestamp": -0.0091,
                                 "ActiveEnterTimestampMonotonic": -0.0091, "ControlGroup": f"/system.slice/{unit}",
                                 "MemoryCurrent": 398_458_880, "InvocationID": _C_HOST["invocation"]}),
             UnitFrame(15.0, {"MemoryCurrent": 11_811_160_064}),
             UnitFrame(34.0, {"MemoryCurrent": 389_120_000_000}),
             UnitFrame(51.0, {"MemoryCurrent": 712_964_571_136})]
    return Scenario(
        host="gpu-node-3", unit=unit, engine="sglang", port=30000, model="deepseek-ai/DeepSeek-R1", start=start,
        gpus=tuple(h200(i) for i in range(n)), journal=journal, unit_timeline=tuple(units),
        gpu_timeline=gpu_frames(n, g), health=(HealthFrame(0.0, "refused"),), max_model_len=163840,
        boot_id=_C_HOST["boot"], seqnum_id="5e9e0000000000000000000000000003", monotonic_start_us=4_318_220_517,
        notes="SGLang DP/TP8 DeepSeek start stuck at 'Capturing batches 0/34'")


# --- d. gpu-node-4: a start that downloads first, then becomes ready --------------------------------

_D_HOST = dict(host="gpu-node-4", machine="a0000000000000000000000000000004", boot="b0000000000000000000000000000004",
               unit="trtllm.service", invocation="c0000000000000000000000000000004",
               stream="d0000000000000000000000000000004")
_D_DOCKER_PID = 5120
_D_CMDLINE = ("/usr/bin/docker run --rm --name trtllm --gpus all --ipc host --network host "
              "-v /home/user/.cache/huggingface:/root/.cache/huggingface "
              "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc3 bash /opt/serve.sh")
_STAMPS = (
    (re.compile(r"^--(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)--"), "%Y-%m-%d %H:%M:%S"),
    (re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[ ,]"), "%Y-%m-%d %H:%M:%S"),
    (re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]"), "%Y-%m-%d %H:%M:%S"),
    (re.compile(r"^\[(\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\]"), "%m/%d/%Y-%H:%M:%S"),
)
_D_LEAD_S = 1.5  # PID 1's Started to the wrapper's first line
_ELAPSED_RE = re.compile(r"\[(\d\d):(\d\d)<")


def _line_time(line: str) -> float | None:
    for rx, fmt in _STAMPS:
        m = rx.match(line)
        if m:
            return datetime.strptime(m.group(1), fmt).replace(tzinfo=timezone.utc).timestamp()
    return None


def _tqdm(line: str) -> bool:
    return "it/s]" in line or "s/it]" in line


def trtllm_download_ready(start: float) -> Scenario:
    """gpu-node-4: the real log trtllm-ok-01 (a DGX Spark playbook: a wrapper downloads the tiktoken
    files with wget and fetches the HF snapshot, then ``trtllm-serve`` loads gpt-oss-120b, tunes,
    captures CUDA graphs and serves), as the journal of ``trtllm.service`` running ``docker run``."""
    lines = _log_lines("trtllm-ok-01.log")
    # journald stores no entry for an empty line; "..." is the poster's elision, not output.
    kept = [(i, s) for i, s in enumerate(lines) if s.strip() and s.strip() != "..."]
    stamps = [_line_time(s) for _, s in kept]
    # A finished tqdm bar ends its own elapsed time ("[00:46<00:00, ...]") after the line before it.
    last: float | None = None
    for k, (_, s) in enumerate(kept):
        if stamps[k] is not None:
            last = stamps[k]
            continue
        m = _ELAPSED_RE.search(s)
        nxt = next((u for u in stamps[k + 1:] if u is not None), None)
        if m and last is not None and _tqdm(s):
            t = last + int(m.group(1)) * 60 + int(m.group(2)) + 0.5
            if nxt is None or t < nxt:
                stamps[k] = last = t
    known = [(k, t) for k, t in enumerate(stamps) if t is not None]
    first_t = known[0][1]
    times: list[float] = []
    for k, t in enumerate(stamps):
        if t is not None:
            times.append(t)
            continue
        before = [(j, u) for j, u in known if j < k]
        after = [(j, u) for j, u in known if j > k]
        if not before:
            times.append(first_t - 0.5 * (known[0][0] - k))
        elif not after:
            times.append(before[-1][1] + 0.25 * (k - before[-1][0]))
        else:
            (j0, u0), (j1, u1) = before[-1], after[0]
            times.append(u0 + (u1 - u0) * (k - j0) / (j1 - j0))
    # Lines stamped with the same second are spread over that second, in order.
    spread: list[float] = []
    k = 0
    while k < len(times):
        j = k
        while j + 1 < len(times) and times[j + 1] == times[k]:
            j += 1
        width = 1.0 if j > k and stamps[k] is not None else 0.0
        for m in range(k, j + 1):
            spread.append(times[m] + width * (m - k) / (j - k + 1))
        k = j + 1
    t0 = min(spread) - _D_LEAD_S
    template = _jsonl("sglang-startup.all.jsonl")[0]
    timed: list[tuple[float, dict[str, Any]]] = [
        (0.0, started_record(template, host=_D_HOST["host"], machine=_D_HOST["machine"], boot=_D_HOST["boot"],
                              unit=_D_HOST["unit"], description="TensorRT-LLM server (gpt-oss-120b)",
                              invocation=_D_HOST["invocation"], job_id=3115))]
    for (_, text), t in zip(kept, spread):
        msg = "\r" + text if _tqdm(text) else text  # tqdm writes "\r" before every frame
        timed.append((t - t0, stdout_record(
            host=_D_HOST["host"], machine=_D_HOST["machine"], boot=_D_HOST["boot"], unit=_D_HOST["unit"],
            invocation=_D_HOST["invocation"], stream=_D_HOST["stream"], pid=_D_DOCKER_PID, comm="docker",
            exe="/usr/bin/docker", cmdline=_D_CMDLINE, ident="docker", message=msg)))
    journal = stamp_journal(timed, start, seqnum_id="5e9e0000000000000000000000000004",
                            monotonic_start_us=9_804_733_104)

    def at(pred) -> float:
        return next(e.offset_s for e in journal if pred(message_text(e.fields)))

    t_serve = at(lambda s: s.startswith("Starting trtllm-serve"))
    t_weights = at(lambda s: "Use 63.32 GB for model weights" in s)
    t_loaded = at(lambda s: s.startswith("Model init total"))
    t_tune = at(lambda s: "Autotuning process starts" in s)
    t_graph_end = at(lambda s: "Setting PyTorch memory fraction" in s)
    t_ready = at(lambda s: "Uvicorn running on" in s)

    # The log's real board is a DGX Spark GB10 (unified memory: nvidia-smi prints [N/A] for memory).
    # The demo shows it on one H100 80GB instead, so the card has a memory bar to watch: CUDA
    # context at serve start, the 63.32 GB the log says it uses for weights ramping in over weight
    # loading, the KV cache jump when autotuning starts, a little more in graph capture. Derived.
    w_mib = int(63.32 * 1024)
    g: list = [(0, 0, 0), (t_serve, 520, 0), (t_weights, 1210, 4)]
    for k in range(1, 8):
        g.append((t_weights + (t_loaded - t_weights) * k / 8, 1210 + w_mib * k // 8, (6, 9, 7, 10, 8, 6, 9)[k - 1]))
    g += [(t_loaded, 1210 + w_mib, 2), (t_tune, 74_210, 35), (t_tune + 10, 74_690, 88),
          (t_tune + 20, 75_020, 41), (t_tune + 30, 75_410, 93), (t_tune + 40, 75_700, 76),
          (t_graph_end, 76_012, 64), (t_ready, 76_012, 3)]
    g += idle_tail(1, t_ready + 15, 1800, [76_012], [0, 2, 1, 3, 0])

    unit = _D_HOST["unit"]
    units = [UnitFrame(-30.0, {"Restart": "on-failure", "RestartUSec": "10s",
                               "Description": "TensorRT-LLM server (gpt-oss-120b)",
                               "FragmentPath": "/etc/systemd/system/trtllm.service"}),
             UnitFrame(-0.0087, {"ActiveState": "active", "SubState": "running", "MainPID": _D_DOCKER_PID,
                                 "ExecMainPID": _D_DOCKER_PID, "ExecMainStartTimestamp": -0.0087,
                                 "ExecMainStartTimestampMonotonic": -0.0087, "StateChangeTimestamp": -0.0087,
                                 "StateChangeTimestampMonotonic": -0.0087, "InactiveExitTimestamp": -0.0087,
                                 "InactiveExitTimestampMonotonic": -0.0087, "ActiveEnterTimestamp": -0.0087,
                                 "ActiveEnterTimestampMonotonic": -0.0087, "ControlGroup": f"/system.slice/{unit}",
                                 "MemoryCurrent": 61_865_984, "InvocationID": _D_HOST["invocation"]})]
    health = (HealthFrame(0.0, "refused"), HealthFrame(t_ready, 200))
    gpu = h100(0, "b")
    return Scenario(
        host="gpu-node-4", unit=unit, engine="trtllm", port=8355, model="openai/gpt-oss-120b", start=start,
        gpus=(gpu,), journal=journal, unit_timeline=tuple(units), gpu_timeline=gpu_frames(1, g),
        health=health, max_model_len=86720, boot_id=_D_HOST["boot"], seqnum_id="5e9e0000000000000000000000000004",
        monotonic_start_us=9_804_733_104,
        notes="TensorRT-LLM 1.1.0rc3 on a DGX Spark: downloads, loads gpt-oss-120b, ready")
