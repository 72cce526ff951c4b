"""The demo, headless: four HostWatchers on ReplayRunners, driven through simulated minutes by a
ManualClock. Each host must reach the state its recorded start reached, through the real probes."""

from __future__ import annotations

import asyncio

import pytest

from probes.clock import ManualClock
from probes.transport.replay.runner import ReplayRunner
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from tui.demo import demo_scenarios

T0 = 1_764_000_000.0


@pytest.fixture
async def demo():
    clock = ManualClock(T0)
    watchers = {}
    for sc in demo_scenarios(T0):
        spec = HostSpec(sc.host, sc.unit, sc.port, sc.engine)
        watchers[sc.host] = HostWatcher(spec, ReplayRunner(sc, clock, start=T0), clock)
    for w in watchers.values():
        w.start()
    yield clock, watchers
    await asyncio.gather(*(w.stop() for w in watchers.values()))


async def test_each_demo_host_reaches_its_recorded_end(demo):
    clock, w = demo
    seen_rungs: dict[str, list[str]] = {h: [] for h in w}
    for _ in range(60 * 10 // 5):  # ten simulated minutes in 5 s steps
        await clock.advance(5)
        for h, watcher in w.items():
            rung = watcher.state().readiness
            if not seen_rungs[h] or seen_rungs[h][-1] != rung:
                seen_rungs[h].append(rung)

    a = w["gpu-node-1"].state()
    assert (a.engine, a.state, a.phase) == ("sglang", "ready", "ready")
    assert a.readiness == "serving" and a.verdict is None
    assert seen_rungs["gpu-node-1"][-3:] == ["port_closed", "http_unhealthy", "serving"][-3:] or \
        "http_unhealthy" in seen_rungs["gpu-node-1"]
    assert a.gpus is not None and len(a.gpus.gpus) == 4
    assert all(g.mem_used_mib > 40_000 for g in a.gpus.gpus)
    assert a.unit_state is not None and a.unit_state.active_state == "active"

    b = w["gpu-node-2"].state()
    assert (b.engine, b.state, b.cause, b.restart_loop) == ("vllm", "failed", "cuda_oom", True)
    assert b.restart_counter == 3 and b.readiness == "inactive"
    assert b.verdict is not None and b.verdict.level == "error"
    assert b.verdict.sentence == ("Restart loop: 3 starts failed in 2m44s, each CUDA out of memory during init; "
                                  "systemd gave up (start limit): fix it, then systemctl reset-failed.")

    c = w["gpu-node-3"].state()
    assert (c.state, c.phase) == ("loading", "graph_capture")
    assert c.progress is not None and (c.progress.done, c.progress.total) == (0, 34)
    assert c.readiness == "port_closed"
    assert c.verdict is not None and c.verdict.level == "warning"
    assert "in CUDA graph capture at 0/34: the start looks hung" in c.verdict.sentence
    assert c.gpus is not None and len(c.gpus.gpus) == 8

    d = w["gpu-node-4"].state()
    assert (d.state, d.phase) == ("ready", "ready")
    assert [p.phase for p in d.phases][:2] == ["starting", "download"]  # systemd started it, then the fetch
    assert d.readiness == "serving" and d.verdict is None


async def test_phases_arrive_in_order_while_loading(demo):
    clock, w = demo
    phases = []
    for _ in range(200):
        await clock.advance(1)
        ph = w["gpu-node-1"].state().phase
        if not phases or phases[-1] != ph:
            phases.append(ph)
    # Seen once a second, a short phase (init here lasts under a second) may fall between looks;
    # what is seen must move forward only, through the long phases.
    from probes.data.vocab import PHASE_INDEX
    assert [PHASE_INDEX[p] for p in phases] == sorted(PHASE_INDEX[p] for p in phases)
    assert {"starting", "weights", "graph_capture", "warmup", "ready"} <= set(phases)
    assert [p.phase for p in w["gpu-node-1"].state().phases] == [
        "starting", "weights", "init", "graph_capture", "warmup", "ready"]


async def test_journal_resumes_after_cursor_across_an_outage():
    """A dropped connection loses no entry and shows none twice (the journal cursor is the bookmark)."""
    clock = ManualClock(T0)
    sc = next(s for s in demo_scenarios(T0) if s.host == "gpu-node-1")
    sc = sc.rebased(T0)
    import dataclasses
    sc = dataclasses.replace(sc, outages=((60.0, 90.0),))
    watcher = HostWatcher(HostSpec(sc.host, sc.unit, sc.port, sc.engine), ReplayRunner(sc, clock, start=T0), clock)
    watcher.start()
    try:
        await clock.advance(75)
        mid = watcher.state()
        assert mid.stale_since is not None and mid.verdict is not None
        assert mid.verdict.sentence.startswith("Connection lost, reconnecting, last data ")
        assert mid.log_count > 0  # last known state kept
        await clock.advance(300)
        end = watcher.state()
        assert end.stale_since is None and end.state == "ready"
        cursors = [e.cursor for e in watcher.model.log]
        assert len(cursors) == len(set(cursors)) == len(sc.journal)
    finally:
        await watcher.stop()
