"""The dashboard's own work, clock-driven (no real time, no probes): a fleet of real watchers'
models at 60 s into the demo's scenarios, all loading; each simulated second every host gets one
journal line (half before the tick, half before the mid-second repaint flush; EVERY_HALF=1:
every host one line before each, 2 lines/s), then the tick,
its flush, a frame; the mid-second flush, a frame. GPU=1 (optional 5th argument): every host
also gets a GPU reading each second after the tick's frame (its last one, re-stamped, the first
GPU's use moved by 1 %; 8 H100s at first), as the dashboard does from ``nvidia-smi -lms 1000``. Prints process seconds for the S simulated
seconds (best of R). Usage: ``CODE=/path/to/checkout python bench/ui_steps_bench.py HOSTS SECONDS ROUNDS EVERY_HALF [GPU]``
(``CODE`` defaults to this checkout). Deterministic work, so two checkouts compare on a loaded
machine, where the real-time ``dashboard_bench.py`` does not (see bench/README.md)."""
import asyncio
import dataclasses
import json
import os
import sys
import time

CODE = os.path.abspath(os.environ.get("CODE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, CODE)
os.chdir(CODE)
from probes.clock import ManualClock  # noqa: E402  (after the path set-up)
from probes.data.events import GpuReading, GpuSample  # noqa: E402
from probes.logs.journal_json import parse_record  # noqa: E402
from tui.demo_app import fleet_scenarios, make_demo_app  # noqa: E402

T0 = 1_764_000_000.0
HOSTS, SECONDS, ROUNDS, EVERY_HALF = (int(a) for a in sys.argv[1:5])
GPU = int(sys.argv[5]) if len(sys.argv) > 5 else 0


async def one() -> float:
    names = [f"gpu-{i:03d}" for i in range(HOSTS)]
    clock = ManualClock(T0 + 60)
    app = make_demo_app(clock=clock, start=T0, names=names, start_watchers=False)
    tmpl = {}
    for sc in fleet_scenarios(T0, names):
        app.watchers[sc.host].model.apply_all(
            parse_record(json.dumps(dict(e.fields))) for e in sc.journal if e.offset_s <= 60)
        tmpl[sc.host] = dict([e for e in sc.journal if e.offset_s <= 60][-1].fields)
    # Only this script moves the dashboard: the app's own real-time timers (the repaint timer, the
    # 1 Hz tick) are not started, so the work counted is the same however slow the run (callgrind).
    app.set_interval = lambda *args, **kwargs: None  # type: ignore[method-assign]
    ws = list(app.watchers.values())
    async with app.run_test(size=(160, 48)) as pilot:
        app.tick()
        app.flush()
        await pilot.pause()
        await pilot.pause()
        n = 0

        def feed(half: int) -> None:
            nonlocal n
            for i, w in enumerate(ws):
                if EVERY_HALF == 0 and i % 2 != half:
                    continue
                n += 1
                f = dict(tmpl[w.name])
                f["MESSAGE"] = f"[2025-03-08 12:29:11 TP0] Load weight progress {n % 100}."
                f["__REALTIME_TIMESTAMP"] = str(int(clock.now() * 1e6))
                f["__CURSOR"] = f"s=x;i={n}"
                w.model.apply(parse_record(json.dumps(f)))
                w.on_change(w)

        def gpu_looks() -> None:
            for w in ws:
                last = w.model.last_gpus() or GpuReading(clock.now(), tuple(
                    GpuSample(i, f"GPU-{i:08d}", "NVIDIA H100 80GB HBM3", 40_000 + i, 81_559, 50 + i, 60, 400.0, 700.0)
                    for i in range(8)))
                g0 = last.gpus[0]
                g0 = dataclasses.replace(g0, util_pct=((g0.util_pct or 0) + 1) % 100)
                w.model.apply(dataclasses.replace(last, time=clock.now(), gpus=(g0, *last.gpus[1:])))
                w.on_change(w)

        c0 = time.process_time()
        for _ in range(SECONDS):
            clock._now += 0.5
            feed(0)
            app.tick()
            await app._flush_stepwise()
            await pilot.pause()
            if GPU:
                gpu_looks()
            clock._now += 0.5
            feed(1)
            await app._flush_stepwise()
            await pilot.pause()
        return time.process_time() - c0


best = min(asyncio.run(one()) for _ in range(ROUNDS))
print(f"{CODE}: {HOSTS} hosts, {SECONDS} simulated s: {best:.3f} process s ({best / SECONDS * 100:.2f} % of a core per simulated second)")
