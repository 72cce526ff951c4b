#!/usr/bin/env python3
"""Benchmark the dashboard under a log flood: what does the UI cost on top of the watchers?

Usage::

    python3 bench/dashboard_bench.py [--seconds 60] [--hosts 32] [--rate 200] [--gpus 8] [--json OUT]
                                     [--view auto|cards|compact]
    python3 bench/dashboard_bench.py --cases all --seconds 20   # issue 17's three loads, PASS/MISS each
    python3 bench/dashboard_bench.py --cases all --seconds 20 --code /work/main   # the same, on another checkout
    python3 bench/dashboard_bench.py --quick            # 5 s per run, for trying things
    python3 bench/dashboard_bench.py --profile OUT.pstats [--seconds 20]   # cProfile the UI run only
    python3 bench/dashboard_bench.py --profile OUT.pstats --profile-run noui   # ... or the watchers alone

Every run is a fresh child process of this interpreter (``sys.executable``), one after the other,
all of them watching ``--hosts`` simulated hosts (:class:`FloodRunner`), each host writing
``--rate`` journal lines a second (in bursts every ``--burst-ms``) and streaming ``--gpus`` rows of
``nvidia-smi`` a second, for ``--seconds`` seconds of real time:

* ``floor``: the load generator alone (every host's journal and GPU streams drained by a loop that
  only counts, by ``FloodRunner.stream_batches``: the journal a burst at a time, as one read of a
  real stream brings it): what the fake hosts themselves cost, so it can be told apart from upwatch's cost;
* ``noui``: one :class:`~probes.watch.watcher.HostWatcher` per host (``WallClock``), as the dashboard makes
  them (same intervals), on one asyncio loop; ``on_change`` marks the host dirty in a set, as the
  app does, and nothing reads the snapshots;
* ``ui``: the dashboard, ``make_app(Config(hosts=...), FloodRunner factory, WallClock())`` run
  headless by Textual's ``App.run_test(size=(160, 48))``, its 10 Hz repaint timer and 1 Hz tick
  running as in normal use. Headless, Textual builds every screen update (layout, widget render,
  compositing into strips) but skips the last step, encoding the update as terminal escape
  sequences and writing it. ``--view`` sets the overview it shows (``auto``, the default: the
  cards while half of them fit the screen, else one row per host; ``cards``; ``compact``).

Measured in each child over the load window only (the hosts start writing when the window opens,
after imports, watcher set-up and the app's mount): CPU time (``time.process_time()``, all
threads; / wall time = percent of one core), the event loop's lag (a task sleeping 10 ms in a loop
records actual minus expected wake-up time; p50 / p99 / max), journal lines delivered to the
models (sum of ``HostState.log_count``: must be hosts x rate x seconds, 384,000 by default, or the
load did not happen; when upwatch cannot keep up, fewer are, and CPU time per delivered line is
then the figure that compares runs), ``nvidia-smi`` rows sent, and the app's repaints
(``app.repaints``: flushes that handed snapshots to the screens). Peak memory is the child's own peak RSS: ``ru_maxrss`` of
``getrusage(RUSAGE_SELF)`` read in the child at its end (the parent imports only the standard
library and ``probes``, so the ~20 MB a child inherits at fork is far below any child's figure),
with Linux's ``VmHWM`` (this process image's peak, reset at exec) as a cross-check.

Prints a table with the three runs, the ratio UI / no-UI of CPU time (also less the generator
floor, and per delivered line), PASS/MISS for the targets, and writes everything to ``bench/out/dashboard_bench.json`` (or
``--json OUT``). Always exits 0: this is a report, not a test. An error raised while the app shuts
down after the window is recorded (``shutdown_error``), not fatal; one during the window is.

Targets: ``--cases`` runs the loads of issue 17 (:data:`CASES`: 32 hosts at 1 line/s, the
dashboard at most 8 % of a core; 32 at 200 lines/s, at most 30 % and lag p99 under 50 ms; 128 at
1 line/s, at most 15 % and under 400 MB), each with its own no-UI run, and ends with a summary row
per case; every line must be delivered in each. A single ``--hosts``/``--rate`` run is held to
:data:`ADHOC_TARGETS` (25 % of a core, 300 MB, lag p99 50 ms). ``--code DIR`` measures another
checkout's upwatch (its ``probes``, ``tui``, ``widgets``) with this load and this report, so a
before and after come from the same sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
#: Set (by ``--code DIR``) for the children: they import upwatch from DIR instead of this checkout.
CODE_ENV = "DASHBOARD_BENCH_CODE"
CODE = os.path.abspath(os.environ.get(CODE_ENV) or ROOT)
if CODE not in sys.path:
    sys.path.insert(0, CODE)

from flood_host import PORT, UNIT, FloodRunner, Gate  # noqa: E402  (after the path set-up)

TARGET_CPU_PCT = 25.0     # UI run, percent of one core
TARGET_RSS_MB = 300.0     # UI run, peak RSS
TARGET_LAG_P99_MS = 50.0  # UI run, event loop lag p99

# --- the child: one run ------------------------------------------------------------------------------


class LagMonitor:
    """Sleeps ``interval`` seconds in a loop and records how late each wake-up was (seconds)."""

    def __init__(self, interval: float = 0.010) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        clock = time.perf_counter
        while True:
            t = clock()
            await asyncio.sleep(self.interval)
            self.samples.append(clock() - t - self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def summary(self) -> dict[str, float | int]:
        s = sorted(self.samples)
        if not s:
            return {"n": 0}

        def pct(p: float) -> float:
            return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))] * 1000.0

        return {"n": len(s), "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "max_ms": s[-1] * 1000.0,
                "mean_ms": sum(s) / len(s) * 1000.0}


def _peak_memory() -> dict[str, float | None]:
    import resource

    kb = 1024.0 if sys.platform == "darwin" else 1.0
    out: dict[str, float | None] = {
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kb / 1024.0, "vmhwm_mb": None,
        "vmrss_mb": None}
    try:
        with open("/proc/self/status") as f:
            for row in f:
                if row.startswith("VmHWM:"):
                    out["vmhwm_mb"] = int(row.split()[1]) / 1024.0
                elif row.startswith("VmRSS:"):
                    out["vmrss_mb"] = int(row.split()[1]) / 1024.0
    except OSError:
        pass
    return out


def _code_path() -> str:
    """The checkout whose ``tui`` package this process imports."""
    import tui

    return os.path.dirname(os.path.dirname(os.path.abspath(tui.__file__)))


def _specs(hosts: int) -> tuple[Any, ...]:
    from probes.spec import HostSpec

    return tuple(HostSpec(f"gpu-node-{i + 1:02d}", UNIT, port=PORT) for i in range(hosts))


async def _child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    from probes.clock import WallClock

    gate = Gate()
    runners: dict[str, FloodRunner] = {}
    index = {spec.name: i for i, spec in enumerate(_specs(args.hosts))}

    def factory(spec: Any) -> FloodRunner:
        r = FloodRunner(spec.name, gate, index=index[spec.name], rate=args.rate, seconds=args.seconds,
                        pattern=args.pattern,
                        burst_s=args.burst_ms / 1000.0, gpus=args.gpus)
        runners[spec.name] = r
        return r

    specs = _specs(args.hosts)
    lag = LagMonitor(0.010)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    # Where the upwatch measured comes from (``--code``), as the child imported it.
    result: dict[str, Any] = {"mode": mode, "code": _code_path()}

    async def window(before_close: Any = None) -> None:
        # Let every task reach its first wait (streams opened, waiting for the gate).
        for _ in range(5):
            await asyncio.sleep(0.05)
        rss_before = _peak_memory()
        ru0 = _rusage()
        c0 = time.process_time()
        if profiler is not None:
            profiler.enable()
        gate.open()
        lag.start()
        await asyncio.sleep(args.seconds)
        wall = time.perf_counter() - gate.t0
        c1 = time.process_time()
        ru1 = _rusage()
        if profiler is not None:
            profiler.disable()
        await lag.stop()
        result.update({
            "wall_s": wall, "cpu_s": c1 - c0, "cpu_pct": (c1 - c0) / wall * 100.0,
            "user_s": ru1[0] - ru0[0], "sys_s": ru1[1] - ru0[1],
            "lag": lag.summary(),
            "sent": sum(r.sent for r in runners.values()),
            "gpu_rows_sent": sum(r.gpu_rows for r in runners.values()),
            "rss_at_start_mb": rss_before["vmrss_mb"],
        })
        if before_close is not None:
            before_close()

    if mode == "floor":
        async def drain(r: FloodRunner, argv: list[str]) -> None:
            # Read as upwatch's journal source reads a runner that has them: by batches.
            async for _ in r.stream_batches(argv):
                pass

        from probes.sources import gpu as gpu_probe
        from probes.sources.journal_cmd import journal_argv

        tasks = []
        for spec in specs:
            r = factory(spec)
            tasks.append(asyncio.create_task(drain(r, journal_argv(UNIT, None, spec.backlog))))
            tasks.append(asyncio.create_task(drain(r, gpu_probe.query_argv(loop_ms=1000))))
        await window(lambda: result.update(delivered=result["sent"], repaints=None))
        for r in runners.values():
            await r.close()
        await asyncio.gather(*tasks, return_exceptions=True)

    elif mode == "noui":
        from probes.watch.watcher import HostWatcher
        from tui.config import Config

        cfg = Config(hosts=specs)
        dirty: set[str] = set()
        watchers = [HostWatcher(spec, factory(spec), WallClock(), lambda w: dirty.add(w.name),
                                unit_interval_s=cfg.unit_interval_s, health_interval_s=cfg.health_interval_s,
                                gpu_interval_s=cfg.gpu_interval_s) for spec in specs]
        tasks = [asyncio.create_task(w.run()) for w in watchers]

        def collect() -> None:
            result["delivered"] = sum(w.state().log_count for w in watchers)
            result["repaints"] = None
            result["sample"] = _sample(watchers[0].state())

        await window(collect)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    elif mode == "ui":
        from tui.app import make_app
        from tui.config import Config

        app = make_app(Config(hosts=specs), factory, WallClock())

        def collect() -> None:
            ws = list(app.watchers.values())
            result["delivered"] = sum(w.state().log_count for w in ws)
            result["repaints"] = app.repaints
            result["sample"] = _sample(ws[0].state())
            result["screen"] = type(app.screen).__name__
            result["cards"] = len(app.screen.query("HostCard"))
            result["view"] = "compact" if getattr(app.screen, "compact", False) else "cards"

        done = False
        try:
            async with app.run_test(size=(args.width, args.height)):
                # Open the gate only when every card is composed (the window starts after the mount).
                # (No Pilot.pause() here: on a busy machine mounting 128 cards outlasts its own
                # timeout, WaitForScreenTimeout; this wait has its own bound.)
                deadline = time.perf_counter() + 60.0
                while time.perf_counter() < deadline:  # the overview composed (the view is set on it)
                    if getattr(app.screen, "_ready", False):
                        break
                    await asyncio.sleep(0.05)
                if hasattr(app.screen, "set_view"):  # (a checkout before the compact view has cards only)
                    app.screen.set_view(args.view)  # --view: auto, cards or compact
                # ... or every row is in the table.
                while time.perf_counter() < deadline:
                    if getattr(app.screen, "compact", False):
                        if app.screen.table.total == args.hosts:
                            break
                    else:
                        cards = app.screen.query("HostCard")
                        if len(cards) == args.hosts and all(c.query("#hc-times") for c in cards):
                            break
                    await asyncio.sleep(0.05)
                r0 = app.repaints
                await window(collect)
                result["repaints"] = app.repaints - r0
                done = True
                for w in app.watchers.values():  # end the flood first: a quicker, quieter exit
                    await w.stop()
        except Exception as exc:
            # An error while the app shuts down, after the window, does not void the figures
            # (it is reported); one during the window does.
            if not done:
                raise
            result["shutdown_error"] = f"{type(exc).__name__}: {exc}"
    else:
        raise SystemExit(f"unknown mode {mode!r}")

    result["expected"] = args.hosts * int(round(args.rate * args.seconds))
    result.update(_peak_memory())
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return result


def _sample(state: Any) -> dict[str, Any]:
    return {"host": state.host, "engine": state.engine, "state": state.state, "phase": state.phase,
            "starts": state.starts, "readiness": state.readiness, "log_count": state.log_count,
            "gpus": len(state.gpus.gpus) if state.gpus else 0}


def _rusage() -> tuple[float, float]:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


# --- the parent --------------------------------------------------------------------------------------


def run_child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix=f"dashboard_bench_{mode}_", suffix=".json", delete=False) as tmp:
        path = tmp.name
    argv = [sys.executable, os.path.abspath(__file__), "--child", mode, "--result", path,
            "--seconds", str(args.seconds), "--hosts", str(args.hosts), "--rate", str(args.rate),
            "--burst-ms", str(args.burst_ms), "--gpus", str(args.gpus),
            "--width", str(args.width), "--height", str(args.height), "--pattern", args.pattern,
            "--view", args.view]
    if args.profile:
        argv += ["--profile", args.profile]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=os.environ.get(CODE_ENV, ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{mode} run failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
        with open(path, encoding="utf-8") as f:
            res = json.load(f)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    res["process_s"] = elapsed
    if proc.stderr.strip():
        res["stderr_tail"] = proc.stderr[-2000:]
    return res


def machine() -> dict[str, Any]:
    """The machine as ``replay_bench.py`` describes it, plus the load average before the runs."""
    from replay_bench import machine as replay_machine  # bench/ is on sys.path when run as a script

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {**replay_machine(), "platform": platform.platform(), "loadavg_1m_before": load}


def git_state(path: str) -> dict[str, Any]:
    """The checkout at ``path`` whose code is measured: its commit, and the files of ``probes/``,
    ``tui/`` and ``widgets/`` with uncommitted changes."""
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=path, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = git("status", "--porcelain", "--", "probes", "tui", "widgets")
    return {"path": path, "commit": git("rev-parse", "--short", "HEAD") or None,
            "dirty": [r[3:] for r in dirty.splitlines()]}


def _fmt(v: Any, spec: str, dash: str = "-") -> str:
    return dash if v is None else format(v, spec)


@dataclasses.dataclass(frozen=True)
class Case:
    """A load and the UI run's targets: ``hosts`` hosts at ``rate`` journal lines a second each;
    the dashboard at most ``cpu_pct`` % of a core, and (when given) under ``rss_mb`` MB peak RSS
    and under ``lag_p99_ms`` event-loop lag p99; every line delivered in both runs, always."""

    hosts: int
    rate: float
    cpu_pct: float
    rss_mb: float | None = None
    lag_p99_ms: float | None = None

    def verdicts(self, ui: dict[str, Any], noui: dict[str, Any]) -> dict[str, bool]:
        """Target name -> met, for the UI and no-UI runs' results."""
        out = {f"dashboard <= {self.cpu_pct:g} % of a core": ui["cpu_pct"] <= self.cpu_pct}
        if self.rss_mb is not None:
            out[f"dashboard peak RSS < {self.rss_mb:g} MB"] = ui["maxrss_mb"] < self.rss_mb
        if self.lag_p99_ms is not None:
            out[f"dashboard event loop lag p99 < {self.lag_p99_ms:g} ms"] = (
                ui["lag"].get("p99_ms", 1e9) < self.lag_p99_ms)
        out["every line delivered in the window (UI and no-UI runs)"] = (
            ui["delivered"] == ui["expected"] and noui["delivered"] == noui["expected"])
        return out


#: The targets of issue 17, at 160x48 (``--cases``).
CASES = {
    "32x1": Case(32, 1.0, cpu_pct=8.0),
    "32x200": Case(32, 200.0, cpu_pct=30.0, lag_p99_ms=50.0),
    "128x1": Case(128, 1.0, cpu_pct=15.0, rss_mb=400.0),
}
#: An ad-hoc run (``--hosts``/``--rate`` without ``--cases``) is held to these.
ADHOC_TARGETS = {"cpu_pct": TARGET_CPU_PCT, "rss_mb": TARGET_RSS_MB, "lag_p99_ms": TARGET_LAG_P99_MS}


def run_case(name: str, case: Case, args: argparse.Namespace) -> dict[str, Any]:
    """Run the floor (unless ``--no-floor``), no-UI and UI children for ``case``, one after the
    other, and print its table. Returns the case's report (load, results, ratios, verdicts)."""
    run_args = argparse.Namespace(**{**vars(args), "hosts": case.hosts, "rate": case.rate})
    modes = (["floor"] if not args.no_floor else []) + ["noui", "ui"]
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        print(f"  {name}, {mode}: {case.hosts} hosts x {case.rate:g} lines/s x {args.seconds:g} s ...",
              file=sys.stderr, flush=True)
        results[mode] = r = run_child(mode, run_args)
        print(f"    {r['cpu_pct']:.1f} % of a core, {r['maxrss_mb']:.1f} MB, "
              f"lag p99 {r['lag'].get('p99_ms', 0):.1f} ms, {r['delivered']:,}/{r['expected']:,} lines",
              file=sys.stderr, flush=True)
    ui, noui, floor = results["ui"], results["noui"], results.get("floor")
    ratio = ui["cpu_s"] / noui["cpu_s"] if noui["cpu_s"] > 0 else None
    # Under overload (lines not all delivered) CPU time saturates and says little; CPU time per
    # delivered line still compares the two runs.
    per_line_ratio = None
    if ui["delivered"] and noui["delivered"] and noui["cpu_s"] > 0:
        per_line_ratio = (ui["cpu_s"] / ui["delivered"]) / (noui["cpu_s"] / noui["delivered"])
    net_ratio = None
    if floor is not None and noui["cpu_s"] - floor["cpu_s"] > 0:
        net_ratio = (ui["cpu_s"] - floor["cpu_s"]) / (noui["cpu_s"] - floor["cpu_s"])
    verdicts = case.verdicts(ui, noui)
    labels = {"floor": "load generator only", "noui": "watchers, no UI", "ui": "dashboard (headless UI)"}
    rows = [f"{name}: {case.hosts} hosts x {args.gpus} GPUs, {case.rate:g} journal lines/s each (bursts every "
            f"{args.burst_ms:g} ms), {args.seconds:g} s per run, {args.width}x{args.height}", "",
            f"{'run':<26}{'CPU s':>7}{'% core':>8}{'peak RSS MB':>13}{'lag p50':>9}{'p99':>9}{'max ms':>9}"
            f"{'lines delivered':>22}{'CPU us/line':>12}{'repaints':>10}"]
    for mode in modes:
        r = results[mode]
        lag = r["lag"]
        delivered = f"{r['delivered']:,} ({r['delivered'] / r['expected'] * 100:.1f} %)"
        per_line = r["cpu_s"] / r["delivered"] * 1e6 if r["delivered"] else None
        rows.append(f"{labels[mode]:<26}{r['cpu_s']:>7.2f}{r['cpu_pct']:>8.1f}{r['maxrss_mb']:>13.1f}"
                    f"{_fmt(lag.get('p50_ms'), '.1f'):>9}{_fmt(lag.get('p99_ms'), '.1f'):>9}"
                    f"{_fmt(lag.get('max_ms'), '.1f'):>9}{delivered:>22}{_fmt(per_line, '.0f'):>12}"
                    f"{_fmt(r.get('repaints'), 'd'):>10}")
    rows.append(f"(expected lines per run: {ui['expected']:,}; CPU = process_time over the window of "
                f"{ui['wall_s']:.1f} s; peak RSS = the child's ru_maxrss)")
    rows.append("")
    rows.append(f"ratio UI / no-UI, CPU time:                    {_fmt(ratio, '.2f')}x")
    if net_ratio is not None and floor is not None:
        rows.append(f"ratio UI / no-UI, CPU time less the generator: {net_ratio:.2f}x  "
                    f"(upwatch alone: {noui['cpu_pct'] - floor['cpu_pct']:.1f} % -> "
                    f"{ui['cpu_pct'] - floor['cpu_pct']:.1f} % of a core)")
    rows.append(f"ratio UI / no-UI, CPU time per delivered line: {_fmt(per_line_ratio, '.2f')}x")
    rows.append(f"the UI adds {ui['cpu_pct'] - noui['cpu_pct']:.1f} % of a core and "
                f"{ui['maxrss_mb'] - noui['maxrss_mb']:.1f} MB")
    s = ui.get("sample")
    if s:
        rows.append(f"{s['host']} at the end (UI run): engine={s['engine']} state={s['state']} phase={s['phase']} "
                    f"starts={s['starts']} readiness={s['readiness']} gpus={s['gpus']}; screen {ui.get('screen')} "
                    f"({ui.get('view')} view, --view {args.view}) with {ui.get('cards')} cards")
    rows.append("targets:")
    for target, ok in verdicts.items():
        rows.append(f"  {'PASS' if ok else 'MISS'}  {target}")
    print("\n".join(rows) + "\n", flush=True)
    return {"load": {"hosts": case.hosts, "gpus": args.gpus, "rate": case.rate, "seconds": args.seconds,
                     "burst_ms": args.burst_ms, "size": [args.width, args.height], "pattern": args.pattern,
                     "view": args.view},
            "targets": dataclasses.asdict(case),
            "results": results, "ratios": {"ui/noui cpu": ratio, "ui/noui cpu less floor": net_ratio,
                                           "ui/noui cpu per delivered line": per_line_ratio},
            "verdicts": {k: ("PASS" if v else "MISS") for k, v in verdicts.items()}}


def summary_rows(cases: dict[str, dict[str, Any]]) -> list[str]:
    """One row per case: the no-UI and UI figures from the same sitting, and the verdicts."""
    rows = [f"{'case':<8}{'hosts':>6}{'lines/s':>8}{'no-UI %':>9}{'UI %':>7}{'UI/no-UI':>9}{'lag p99':>9}"
            f"{'RSS MB':>8}{'delivered':>11}  verdict"]
    for name, rep in cases.items():
        ui, noui = rep["results"]["ui"], rep["results"]["noui"]
        delivered = "all" if ui["delivered"] == ui["expected"] and noui["delivered"] == noui["expected"] else (
            f"{ui['delivered'] / ui['expected'] * 100:.1f} %")
        verdict = "PASS" if all(v == "PASS" for v in rep["verdicts"].values()) else "MISS: " + "; ".join(
            k for k, v in rep["verdicts"].items() if v != "PASS")
        rows.append(f"{name:<8}{rep['load']['hosts']:>6}{rep['load']['rate']:>8g}{noui['cpu_pct']:>9.1f}"
                    f"{ui['cpu_pct']:>7.1f}{_fmt(rep['ratios']['ui/noui cpu'], '.2f'):>8}x"
                    f"{_fmt(ui['lag'].get('p99_ms'), '.1f'):>9}{ui['maxrss_mb']:>8.1f}{delivered:>11}  {verdict}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", metavar="NAMES",
                    help="run the issue's cases instead of one --hosts/--rate load: 'all' or a comma list of "
                         + ", ".join(f"{k} ({c.hosts} hosts at {c.rate:g} lines/s)" for k, c in CASES.items()))
    ap.add_argument("--seconds", type=float, default=60.0, help="load window per run (default 60)")
    ap.add_argument("--hosts", type=int, default=32, help="simulated hosts (default 32)")
    ap.add_argument("--rate", type=float, default=200.0, help="journal lines a second per host (default 200)")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per host (default 8)")
    ap.add_argument("--burst-ms", type=float, default=100.0, help="lines come in bursts this often (default 100)")
    ap.add_argument("--width", type=int, default=160, help="terminal width of the UI run (default 160)")
    ap.add_argument("--height", type=int, default=48, help="terminal height of the UI run (default 48)")
    ap.add_argument("--view", choices=("auto", "cards", "compact"), default="auto",
                    help="the overview the UI run shows: auto (cards while half of them fit the screen, "
                         "else one row per host), cards, or compact (default auto)")
    ap.add_argument("--pattern", choices=("restarts", "serving"), default="restarts",
                    help="restarts: the startup log cycled, every pass a new start (each card changes "
                         "state about twice a second: the worst case); serving: one start, then a busy "
                         "server's real serving lines (default restarts)")
    ap.add_argument("--code", metavar="DIR",
                    help="measure the upwatch code of this checkout (e.g. /work/main, for the figures "
                         "before a change, in the same sitting); default: this one")
    ap.add_argument("--quick", action="store_true", help="5-second runs, for trying things")
    ap.add_argument("--no-floor", action="store_true", help="skip the generator-only run")
    ap.add_argument("--json", metavar="OUT", help="where to write the report (default bench/out/dashboard_bench.json)")
    ap.add_argument("--profile", metavar="OUT.pstats",
                    help="run only one child (--profile-run, the UI by default) under cProfile (load window "
                         "only) and print its top functions")
    ap.add_argument("--profile-run", choices=("floor", "noui", "ui"), default="ui",
                    help="the child --profile runs: floor (the fake hosts alone), noui (the watchers) or ui "
                         "(default ui)")
    ap.add_argument("--child", choices=("floor", "noui", "ui"), help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds = 5.0
    if args.hosts < 1 or args.rate <= 0 or args.seconds <= 0:
        ap.error("--hosts, --rate and --seconds must be positive")
    names: list[str] = []
    if args.cases:
        names = list(CASES) if args.cases == "all" else [n.strip() for n in args.cases.split(",") if n.strip()]
        unknown = [n for n in names if n not in CASES]
        if unknown or not names:
            ap.error(f"--cases: unknown {', '.join(unknown) or '(none given)'}; known: all, {', '.join(CASES)}")
    if args.code:
        os.environ[CODE_ENV] = os.path.abspath(args.code)  # the children import upwatch from there

    if args.child:
        res = asyncio.run(_child(args.child, args))
        with open(args.result, "w", encoding="utf-8") as f:
            json.dump(res, f)
        return 0

    if args.profile:
        res = run_child(args.profile_run, args)
        import pstats

        print(f"{args.profile_run} run under cProfile: {res['cpu_pct']:.1f} % of a core (profiler overhead "
              f"included), {res['delivered']:,} lines, {res['repaints']} repaints")
        st = pstats.Stats(args.profile)
        st.strip_dirs().sort_stats("tottime").print_stats(25)
        st.sort_stats("cumulative").print_stats(40)
        return 0

    os.makedirs(OUT, exist_ok=True)
    mach, gst = machine(), git_state(os.environ.get(CODE_ENV, ROOT))
    now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"dashboard benchmark, {now}; machine: {mach['nproc']} CPUs, {mach['cpu']}, Python {mach['python']}; "
          f"code {gst['path']} at {gst['commit']}{' + uncommitted changes' if gst['dirty'] else ''}; load "
          f"average before: {_fmt(mach['loadavg_1m_before'], '.2f')} (other processes share these CPUs)\n",
          flush=True)
    chosen = {n: CASES[n] for n in names} or {"adhoc": Case(args.hosts, args.rate, **ADHOC_TARGETS)}
    reports = {name: run_case(name, case, args) for name, case in chosen.items()}
    if len(reports) > 1:
        print("\n".join(["summary (each case's no-UI and UI runs one after the other):", *summary_rows(reports)]))

    report = {"date": now, "machine": mach, "git": gst, "cases": reports}
    path = args.json or os.path.join(OUT, "dashboard_bench.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nwrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
