#!/usr/bin/env python3
"""Benchmark ``upwatch exporter``: its own CPU and memory on one host at 1 and 50 journal lines a
second, and what one scrape costs.

Usage::

    python3 bench/exporter_bench.py [--seconds 60] [--rates 1,50] [--hosts 1] [--scrape-s 15] [--scrapes 200] [--json OUT]
    python3 bench/exporter_bench.py --quick            # 10 s per run, for trying things

Each run is a fresh child process of this interpreter. The simulated host is
``bench/dashboard_bench.py``'s :class:`FloodRunner` (real ``journalctl -o json`` records of a real
SGLang start, cycled as restarts; 8 ``nvidia-smi`` rows a second; ``systemctl show``; a healthy
``/health``), so the whole probe → model → metrics path runs:

* ``floor``: the load generator alone (journal and GPU streams drained by a loop that only counts);
* ``exporter``: :func:`tui.exporter.serve` on ``--hosts`` such hosts (the watchers of
  ``upwatch exporter``, the same intervals, its notes on stderr, no history), serving ``/metrics``
  on 127.0.0.1.

In the load window (``--seconds``; the host writes ``rate`` lines a second from its start) this
parent scrapes the child every ``--scrape-s`` seconds, as Prometheus would; the child measures its
CPU time (``time.process_time()``, all threads) over the window. Then the parent scrapes
``--scrapes`` times back to back and reads the child's CPU time from ``/proc/PID/stat`` before and
after: CPU per scrape (includes the quiet watchers meanwhile, so it is an upper bound), with the
wall latency (p50, p99) and the body size. Lines delivered to the models (the sum of
``upwatch_journal_lines_total`` after the window) must equal the lines sent, or the load did not
happen. Memory: the child's peak RSS (``VmHWM``) and RSS at the end.

Targets (issue 16): at 50 lines/s under 2 % of one core and under 80 MB. Prints a table, PASS/MISS,
and writes everything to ``bench/out/exporter_bench.json`` (or ``--json OUT``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from dashboard_bench import UNIT, FloodRunner, Gate, _peak_memory, _specs  # noqa: E402 - after the path

#: Targets at 50 lines/s (issue 16).
TARGET_CPU_PCT = 2.0
TARGET_RSS_MB = 80.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- the child -------------------------------------------------------------------------------------

async def _child(mode: str, rate: float, seconds: float, hosts: int) -> None:
    from probes.clock import WallClock
    from tui.config import Config
    from tui.exporter import serve

    gate = Gate()
    specs = _specs(hosts)
    index = {spec.name: i for i, spec in enumerate(specs)}
    runners: dict[str, FloodRunner] = {}

    def factory(spec: Any) -> FloodRunner:
        r = FloodRunner(spec.name, gate, index=index[spec.name], rate=rate, seconds=seconds, gpus=8)
        runners[spec.name] = r
        return r

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tasks: list[asyncio.Task[Any]] = []
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    if mode == "exporter":
        tasks.append(asyncio.create_task(serve(Config(hosts=specs), "127.0.0.1", 0, stop=stop, clock=WallClock(),
                                               runner_factory=factory, gpu_source_factory=lambda s: None,
                                               on_listening=bound.set_result, notes=sys.stderr)))
        port = await bound
    else:
        from probes.sources import gpu as gpu_probe
        from probes.sources.journal_cmd import journal_argv

        async def drain(r: FloodRunner, argv: list[str]) -> None:
            async for _ in r.stream(argv):
                pass

        for spec in specs:
            r = factory(spec)
            tasks.append(asyncio.create_task(drain(r, journal_argv(UNIT, None, spec.backlog))))
            tasks.append(asyncio.create_task(drain(r, gpu_probe.query_argv(loop_ms=1000))))
        port = 0
    print(json.dumps({"port": port}), flush=True)
    for _ in range(5):  # every task reaches its first wait (streams open, waiting for the gate)
        await asyncio.sleep(0.05)
    rss0 = _peak_memory()["vmrss_mb"]
    c0 = time.process_time()
    gate.open()
    await asyncio.sleep(seconds)
    wall = time.perf_counter() - gate.t0
    c1 = time.process_time()
    print(json.dumps({"window": {"wall_s": wall, "cpu_s": c1 - c0, "cpu_pct": (c1 - c0) / wall * 100.0,
                                 "sent": sum(r.sent for r in runners.values()), "rss_at_start_mb": rss0,
                                 **_peak_memory()}}), flush=True)
    if mode == "floor":
        stop.set()
    await stop.wait()
    for r in runners.values():
        await r.close()
    for t in tasks:
        if mode == "floor":
            t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- the parent --------------------------------------------------------------------------------------

def _cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _mem_mb(pid: int) -> dict[str, float]:
    out = {}
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(("VmHWM:", "VmRSS:")):
            out[row.split(":")[0].lower() + "_mb"] = int(row.split()[1]) / 1024.0
    return out


def _scrape(url: str) -> tuple[float, int]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    return time.perf_counter() - t, len(body)


def run(mode: str, rate: float, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", mode, "--rate", str(rate), "--seconds", str(args.seconds),
            "--hosts", str(args.hosts)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        port = json.loads(proc.stdout.readline())["port"]
        url = f"http://127.0.0.1:{port}/metrics"
        window_done = threading.Event()
        during: list[float] = []

        def scrape_in_window() -> None:
            while not window_done.wait(args.scrape_s):
                during.append(_scrape(url)[0])

        scraper = threading.Thread(target=scrape_in_window, daemon=True) if port else None
        if scraper is not None:
            scraper.start()
        res: dict[str, Any] = {"mode": mode, "rate": rate, **json.loads(proc.stdout.readline())["window"]}
        window_done.set()
        res["scrapes_in_window"] = len(during)
        if port:
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
            res["delivered"] = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                   if line.startswith("upwatch_journal_lines_total{"))
            c0 = _cpu_s(proc.pid)
            lat, size = zip(*(_scrape(url) for _ in range(args.scrapes)))
            res["scrape"] = {"n": args.scrapes, "cpu_ms": (_cpu_s(proc.pid) - c0) / args.scrapes * 1000.0,
                             "p50_ms": statistics.median(lat) * 1000.0,
                             "p99_ms": sorted(lat)[int(0.99 * (len(lat) - 1))] * 1000.0, "bytes": size[-1]}
            res.update(_mem_mb(proc.pid))
            proc.send_signal(signal.SIGTERM)
        if proc.wait(60) != 0:
            raise SystemExit(f"{mode} at {rate}/s: child exited {proc.returncode}")
        return res
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rates", default="1,50", help="journal lines a second, comma-separated (default 1,50)")
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--scrape-s", type=float, default=15.0, help="scrape interval in the load window")
    ap.add_argument("--scrapes", type=int, default=200, help="back-to-back scrapes for the per-scrape cost")
    ap.add_argument("--quick", action="store_true", help="10 s per run")
    ap.add_argument("--json", default=str(HERE / "out" / "exporter_bench.json"))
    ap.add_argument("--child", choices=("floor", "exporter"), help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        asyncio.run(_child(args.child, args.rate, args.seconds, args.hosts))
        return 0
    if args.quick:
        args.seconds = 10.0
    rates = [float(r) for r in args.rates.split(",")]
    runs = []
    for rate in rates:
        for mode in ("floor", "exporter"):
            runs.append(run(mode, rate, args))
            r = runs[-1]
            print(f"  {mode:8} {rate:5g}/s: {r['cpu_pct']:.2f} % of a core, peak RSS {r['vmhwm_mb']:.1f} MB",
                  file=sys.stderr)
    print(f"\nupwatch exporter, {args.hosts} host(s), {args.seconds:g} s per run, a scrape every {args.scrape_s:g} s "
          f"in the window ({platform.python_version()}, {os.cpu_count()} CPUs)\n")
    print(f"{'rate':>6}  {'sent':>6}  {'read':>6}  {'floor %':>8}  {'exporter %':>10}  {'less floor':>10}  {'peak RSS':>9}  {'RSS end':>8}  "
          f"{'scrape CPU':>10}  {'p50':>7}  {'p99':>7}  {'bytes':>6}")
    verdicts = []
    for rate in rates:
        floor = next(r for r in runs if r["mode"] == "floor" and r["rate"] == rate)
        exp = next(r for r in runs if r["mode"] == "exporter" and r["rate"] == rate)
        s = exp["scrape"]
        print(f"{rate:>5g}/s  {exp['sent']:>6}  {exp['delivered']:>6g}  {floor['cpu_pct']:>7.2f}%  {exp['cpu_pct']:>9.2f}%  {exp['cpu_pct'] - floor['cpu_pct']:>9.2f}%  "
              f"{exp['vmhwm_mb']:>6.1f} MB  {exp['vmrss_mb']:>5.1f} MB  {s['cpu_ms']:>7.2f} ms  {s['p50_ms']:>4.1f} ms  "
              f"{s['p99_ms']:>4.1f} ms  {s['bytes']:>6}")
        if rate == 50:
            verdicts.append(("CPU at 50 lines/s", exp["cpu_pct"], TARGET_CPU_PCT, "%"))
            verdicts.append(("peak RSS at 50 lines/s", exp["vmhwm_mb"], TARGET_RSS_MB, " MB"))
    print()
    for what, got, target, unit in verdicts:
        print(f"{'PASS' if got < target else 'MISS'}  {what}: {got:.2f}{unit} (target under {target:g}{unit})")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
