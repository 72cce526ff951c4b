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
import sys
import time

from fleet_steps import CODE, fleet, gpu_look, log_line  # bench/ is on sys.path when run as a script

HOSTS, SECONDS, ROUNDS, EVERY_HALF = (int(a) for a in sys.argv[1:5])
GPU = int(sys.argv[5]) if len(sys.argv) > 5 else 0


async def one() -> float:
    clock, app, tmpl = fleet(HOSTS)
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
                log_line(w, tmpl[w.name], n, clock.now())
                w.on_change(w)

        def gpu_looks() -> None:
            for w in ws:
                gpu_look(w, clock.now())
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
