"""SVG snapshots of the dashboard on the demo (160x48, and 120x40, 100x30, 80x24 for the layout),
with a ManualClock so they are stable.

Update after a deliberate change of the look: ``pytest tests/test_snapshots.py --snapshot-update``,
then look at the report and commit ``tests/__snapshots__``.
"""

from __future__ import annotations

from probes.clock import ManualClock
from tui.demo_app import advance_demo, make_demo_app

T0 = 1_764_000_000.0
SIZE = (160, 48)


def _at(seconds: float, *keys: str, host: str | None = None):
    """An app on a ManualClock and a run_before that moves it ``seconds`` on, then presses keys."""
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)

    async def run_before(pilot) -> None:
        await advance_demo(app, clock, pilot, seconds, host=host, keys=keys)

    return app, run_before


def test_overview_while_loading(snap_compare):
    app, before = _at(90)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_overview_settled(snap_compare):
    app, before = _at(400)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_detail_ready_host(snap_compare):
    app, before = _at(400, host="gpu-node-1")
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_detail_restart_loop_jumped_to_error(snap_compare):
    app, before = _at(400, "e", host="gpu-node-2")
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_overview_small_terminal(snap_compare):
    app, before = _at(400)
    assert snap_compare(app, terminal_size=(100, 30), run_before=before)


def test_overview_120x40_two_columns(snap_compare):
    """All four cards on the screen, two columns of 60 (issue 13: it was one column, the fourth
    card off screen)."""
    app, before = _at(400)
    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


def test_detail_80x24_compact_card_verdict_whole(snap_compare):
    """The compact card with the whole verdict and hint above a log pane of the full width."""
    app, before = _at(400, host="gpu-node-2")
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
