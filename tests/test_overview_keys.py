"""Every key press on the overview is handled (issue 17): arrow keys and tab sent back to back,
as a terminal delivers a held or fast-tapped key (one read, several key events, no pause between
them), move the focus as many cards or rows as there were keys, while the grid scrolls; arrows
stop at the grid's ends. The real app (``make_app``) on 50 hosts whose watchers are not started,
in the cards view (50 hosts would show as rows by themselves: tests/test_compact_view.py has the
rows' fast keys)."""

from __future__ import annotations

from probes.clock import ManualClock
from probes.spec import HostSpec
from tui.app import make_app
from tui.config import Config
from canned_runner import CannedRunner
from widgets.host_card import HostCard
from widgets.overview import CardGrid

T0 = 1_764_000_000.0
HOSTS = 50


def _app():
    config = Config(hosts=tuple(HostSpec(f"gpu-{i:02d}", "sglang.service") for i in range(HOSTS)))
    return make_app(config, lambda spec: CannedRunner(), ManualClock(T0), start_watchers=False,
                    audit=None, history=None)


async def _cards(app, pilot) -> None:
    """Show the cards (``v`` would cycle to them), and let them mount."""
    app.screen.set_view("cards")
    await pilot.pause()
    await pilot.pause()


async def _send(app, pilot, *keys: str) -> None:
    """Post ``keys`` to the app back to back (no turn of the event loop between them), then let
    it handle them all."""
    for key in keys:
        app.simulate_key(key)
    await pilot.pause()
    await pilot.pause()


def _index(app) -> int:
    cards = list(app.screen.query_one(CardGrid).cards.values())
    assert isinstance(app.focused, HostCard)
    return cards.index(app.focused)


async def test_ten_fast_downs_move_the_focus_ten_cards_in_one_column_and_the_grid_follows():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await _cards(app, pilot)
        grid = app.screen.query_one(CardGrid)
        assert grid.columns == 1 and _index(app) == 0
        await _send(app, pilot, *["down"] * 10)
        assert _index(app) == 10
        card = app.focused
        assert grid.region.contains_region(card.region), (grid.region, card.region)  # scrolled to it
        await _send(app, pilot, *["up"] * 3)
        assert _index(app) == 7
        await _send(app, pilot, *["tab"] * 4)
        assert _index(app) == 11
        await _send(app, pilot, *["shift+tab"] * 2)
        assert _index(app) == 9


async def test_fast_keys_in_two_columns_move_rows_and_columns_and_stop_at_the_ends():
    app = _app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await _cards(app, pilot)
        grid = app.screen.query_one(CardGrid)
        assert grid.columns == 2
        await _send(app, pilot, *["down"] * 10)
        assert _index(app) == 20  # ten rows of two
        await _send(app, pilot, "right", "right", "right")
        assert _index(app) == 23  # right steps on through the cards, row to row
        await _send(app, pilot, *["left"] * 5)
        assert _index(app) == 18
        await _send(app, pilot, *["down"] * 40)  # past the last row: it stops there
        assert _index(app) == 48
        assert grid.region.contains_region(app.focused.region)
        await _send(app, pilot, *["right"] * 5)
        assert _index(app) == 49  # the last card: no wrap
        await _send(app, pilot, *["up"] * 40)
        assert _index(app) == 1
        await _send(app, pilot, *["left"] * 3)
        assert _index(app) == 0
        assert grid.scroll_y == 0
