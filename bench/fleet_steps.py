"""The set-up ``fold_steps_bench.py`` and ``ui_steps_bench.py`` share: the checkout they measure
(``CODE``, default this one; put first on ``sys.path`` and made the working directory before
anything of upwatch is imported), a demo fleet's app with every watcher's model 60 s into its
scenario (all loading, no watcher started, the clock at ``T0 + 60``), and the two events each
simulated second gives a host: a journal line (its last record at 60 s, with a new message, time
and cursor) and a GPU reading (the last one re-stamped, the first GPU's use moved by 1 %; 8 H100s
at first). Each script keeps its command line and its own steps.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING

CODE = os.path.abspath(os.environ.get("CODE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, CODE)
os.chdir(CODE)
from probes.clock import ManualClock  # noqa: E402  (after the path set-up)
from probes.data.events import GpuReading, GpuSample  # noqa: E402
from probes.logs.journal_json import parse_record  # noqa: E402
from tui.demo_app import fleet_scenarios, make_demo_app  # noqa: E402

if TYPE_CHECKING:  # only named: an older checkout (CODE) may keep them elsewhere
    from probes.watch.watcher import HostWatcher
    from tui.app import UpwatchApp

T0 = 1_764_000_000.0


def fleet(hosts: int) -> tuple[ManualClock, UpwatchApp, dict[str, dict[str, object]]]:
    """The clock, the app of ``hosts`` demo hosts (``gpu-000`` ...) 60 s in, and per host the
    fields of its last journal record by then (the template of :func:`log_line`)."""
    names = [f"gpu-{i:03d}" for i in range(hosts)]
    clock = ManualClock(T0 + 60)
    app = make_demo_app(clock=clock, start=T0, names=names, start_watchers=False)
    tmpl = {}
    for sc in fleet_scenarios(T0, names):
        app.watchers[sc.host].model.apply_all(
            parse_record(json.dumps(dict(e.fields))) for e in sc.journal if e.offset_s <= 60)
        tmpl[sc.host] = dict([e for e in sc.journal if e.offset_s <= 60][-1].fields)
    return clock, app, tmpl


def log_line(w: HostWatcher, fields: dict[str, object], n: int, now: float) -> None:
    """Give ``w``'s model journal line ``n`` (a weight-loading progress line) at ``now``."""
    f = dict(fields)
    f["MESSAGE"] = f"[2025-03-08 12:29:11 TP0] Load weight progress {n % 100}."
    f["__REALTIME_TIMESTAMP"] = str(int(now * 1e6))
    f["__CURSOR"] = f"s=x;i={n}"
    w.model.apply(parse_record(json.dumps(f)))


def gpu_look(w: HostWatcher, now: float) -> None:
    """Give ``w``'s model a GPU reading at ``now``: its last one, the first GPU's use moved by 1 %."""
    last = w.model.last_gpus() or GpuReading(now, tuple(
        GpuSample(i, f"GPU-{i:08d}", "NVIDIA H100 80GB HBM3", 40_000 + i, 81_559, 50 + i, 60, 400.0, 700.0)
        for i in range(8)))
    g0 = dataclasses.replace(last.gpus[0], util_pct=((last.gpus[0].util_pct or 0) + 1) % 100)
    w.model.apply(dataclasses.replace(last, time=now, gpus=(g0, *last.gpus[1:])))
