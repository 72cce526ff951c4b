"""The demo's made-up earlier starts (tui/demo_app.py seed_demo_history): the cards show typical
durations and an ETA from the first minute, and the hung host is "slower than usual"."""

from __future__ import annotations

from pathlib import Path

from probes.clock import ManualClock
from probes.store.history import History
from tui.demo import demo_scenarios
from tui.demo_app import advance_demo, make_demo_app, seed_demo_history

T0 = 1_764_460_800.0


def test_seeding_writes_six_earlier_starts_per_host_that_does_not_fail(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite3")
    assert seed_demo_history(h, demo_scenarios(T0)) == 18
    assert seed_demo_history(h, demo_scenarios(T0)) == 0  # written once
    by_host = {}
    for r in h.starts():
        by_host.setdefault(r.host, []).append(r)
    assert sorted(by_host) == ["gpu-node-1", "gpu-node-3", "gpu-node-4"]  # not the crash-looping one
    [one] = {(r.model, r.args_hash) for r in by_host["gpu-node-1"]}
    assert one == ("/home/user/Qwen/QwQ-32B", "6398c4073e9a")
    t = h.typical("gpu-node-1", "sglang.service", *one)
    assert t.n == 6 and all(r.began < T0 for r in by_host["gpu-node-1"])
    hung = h.typical("gpu-node-3", "sglang.service", None, None)
    assert hung is not None and dict((p, m) for p, m, *_ in hung.phases)["graph_capture"] > 80


async def test_the_demo_cards_show_typical_durations(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    history = History(tmp_path / "h.sqlite3")
    app = make_demo_app(clock=clock, history=history, seed_history=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 60)
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "of ~" in text and "ready in ~" in text, text
        await advance_demo(app, clock, pilot, 300)
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "slower than usual" in text, text  # gpu-node-3, hung in graph capture
    history.close()
