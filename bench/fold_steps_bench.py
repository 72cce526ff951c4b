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
import os
import sys
import tempfile
import time

from fleet_steps import CODE, fleet, gpu_look, log_line  # bench/ is on sys.path when run as a script
from probes.store.history import History  # after fleet_steps: it puts CODE first on sys.path

HOSTS, SECONDS = int(sys.argv[1]), int(sys.argv[2])
SHOWN = int(sys.argv[3]) if len(sys.argv) > 3 else 40


async def main() -> float:
    clock, app, tmpl = fleet(HOSTS)
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
        log_line(w, tmpl[w.name], n, clock.now())

    c0 = time.process_time()
    for _ in range(SECONDS):
        clock._now += 0.5
        for w in ws[0::2]:
            line(w)
        now = clock.now()
        for w in ws:  # the tick
            w.state(now)
        for w in ws:
            gpu_look(w, clock.now())
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
