"""The fold's share of the dashboard's second, with no screen: what ``ui_steps_bench.py`` drives,
less Textual (whose frames follow real time, so its instruction counts move under callgrind's
slowdown), plus the start history's look. A fleet of real watchers' models 60 s into the demo's
scenarios (all loading), each with a real SQLite start history; each simulated second: a journal
line for half the hosts, the tick (every host's snapshot judged at the new time, as the app's
flush takes them), a GPU reading (8 H100s) for every host, every host's history look
(``HostWatcher.sync_history``, as its loop runs it each second), a line for the other half, and
the mid-second repaint (the snapshots of the first ``SHOWN`` hosts, the rows in view).

Usage: ``CODE=/path/to/checkout python bench/fold_steps_bench.py HOSTS SECONDS [SHOWN]`` (``CODE``
defaults to this checkout; SHOWN 40). Prints the process seconds of the window. For instructions:
the same under ``valgrind --tool=callgrind`` with SECONDS and 0, the difference is the window's.
"""
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time

CODE = os.path.abspath(os.environ.get("CODE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, CODE)
os.chdir(CODE)
from probes.clock import ManualClock  # noqa: E402  (after the path set-up)
from probes.data.events import GpuReading, GpuSample  # noqa: E402
from probes.logs.journal_json import parse_record  # noqa: E402
from probes.store.history import History  # noqa: E402
from tui.demo_app import fleet_scenarios, make_demo_app  # noqa: E402

T0 = 1_764_000_000.0
HOSTS, SECONDS = int(sys.argv[1]), int(sys.argv[2])
SHOWN = int(sys.argv[3]) if len(sys.argv) > 3 else 40


async def main() -> float:
    names = [f"gpu-{i:03d}" for i in range(HOSTS)]
    clock = ManualClock(T0 + 60)
    app = make_demo_app(clock=clock, start=T0, names=names, start_watchers=False)
    tmpl = {}
    for sc in fleet_scenarios(T0, names):
        app.watchers[sc.host].model.apply_all(
            parse_record(json.dumps(dict(e.fields))) for e in sc.journal if e.offset_s <= 60)
        tmpl[sc.host] = dict([e for e in sc.journal if e.offset_s <= 60][-1].fields)
    ws = list(app.watchers.values())
    history = History(os.path.join(tempfile.mkdtemp(prefix="fold_steps_"), "history.sqlite3"))
    for w in ws:
        w.history = history
        await w.sync_history()
        w.state(clock.now())
    n = 0

    def line(w) -> None:  # type: ignore[no-untyped-def]
        nonlocal n
        n += 1
        f = dict(tmpl[w.name])
        f["MESSAGE"] = f"[2025-03-08 12:29:11 TP0] Load weight progress {n % 100}."
        f["__REALTIME_TIMESTAMP"] = str(int(clock.now() * 1e6))
        f["__CURSOR"] = f"s=x;i={n}"
        w.model.apply(parse_record(json.dumps(f)))

    def gpu(w) -> None:  # type: ignore[no-untyped-def]
        last = w.model.last_gpus() or GpuReading(clock.now(), tuple(
            GpuSample(i, f"GPU-{i:08d}", "NVIDIA H100 80GB HBM3", 40_000 + i, 81_559, 50 + i, 60, 400.0, 700.0)
            for i in range(8)))
        g0 = dataclasses.replace(last.gpus[0], util_pct=((last.gpus[0].util_pct or 0) + 1) % 100)
        w.model.apply(dataclasses.replace(last, time=clock.now(), gpus=(g0, *last.gpus[1:])))

    c0 = time.process_time()
    for _ in range(SECONDS):
        clock._now += 0.5
        for w in ws[0::2]:
            line(w)
        now = clock.now()
        for w in ws:  # the tick
            w.state(now)
        for w in ws:
            gpu(w)
        for w in ws:  # the history looks
            await w.sync_history()
        clock._now += 0.5
        for w in ws[1::2]:
            line(w)
        for w in ws[:SHOWN]:  # the mid-second repaint: the rows in view
            w.state(now)
    return time.process_time() - c0


took = asyncio.run(main())
print(f"{CODE}: {HOSTS} hosts, {SECONDS} simulated s: {took:.3f} process s ({took / max(1, SECONDS) * 100:.2f} % of a core per simulated second)")
