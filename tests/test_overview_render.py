"""The overview renders only what is on screen (issue 17): a card scrolled out of the grid's view
keeps the latest state and clock it is given but restyles, redraws and repaints nothing until it is
back in view (scrolled, the terminal resized), when it shows them; the header counts every host,
on screen or not; a state that changes nothing a card shows repaints nothing."""

from __future__ import annotations

from probes.clock import ManualClock
from probes.spec import HostSpec
from canned_runner import CannedRunner
from test_widgets import T0, Grid, loading_state, screen_text
from tui.app import make_app
from tui.config import Config
from widgets.host_card import HostCard
from widgets.overview import CardGrid


def _count_refreshes(card: HostCard) -> list[str]:
    """Record every ``refresh`` of the card and of its lines, bars and strips from now on."""
    seen: list[str] = []

    def counting(widget):
        orig, name = widget.refresh, type(widget).__name__

        def refresh(*args, **kw):
            seen.append(name)
            return orig(*args, **kw)
        return refresh

    for widget in (card, *card.walk_children()):
        widget.refresh = counting(widget)  # type: ignore[method-assign]
    return seen


def _states(n: int = 8):
    return [loading_state(host=f"gpu-{i}") for i in range(n)]


async def test_a_card_off_screen_keeps_its_state_and_shows_it_when_scrolled_into_view():
    app = Grid(_states(), now=T0 + 200)
    async with app.run_test(size=(100, 30)) as pilot:  # one column: two or three cards on screen
        await pilot.pause()
        grid = app.query_one(CardGrid)
        cards = list(grid.cards.values())
        assert grid.max_scroll_y > 0 and cards[0].on_screen and not cards[-1].on_screen
        assert [c.on_screen for c in cards] == [grid.region.overlaps(c.region) for c in cards]
        last = cards[-1]
        refreshes = _count_refreshes(last)
        classes = set(last.classes)

        grid.update_host(loading_state(host="gpu-7", state="failed", phase="weights",
                                       verdict=None, hint="lower --max-model-len"))
        grid.set_now(T0 + 260)
        await pilot.pause()
        assert last.state.state == "failed"  # kept, not lost
        assert set(last.classes) == classes and refreshes == []  # no restyle, no redraw
        assert last.now == T0 + 200  # its clock stays until it is back on screen
        assert cards[0].now == T0 + 260

        last.scroll_visible(animate=False)
        await pilot.pause()
        await pilot.pause()
        assert last.on_screen and not cards[0].on_screen
        assert last.has_class("-failed") and not last.has_class("-loading")
        assert last.now == T0 + 260
        text = screen_text(app)
        assert "FAILED" in text and "Hint: lower --max-model-len" in text


async def test_a_resize_that_shows_every_card_brings_each_up_to_date():
    app = Grid(_states(), now=T0 + 200)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        grid = app.query_one(CardGrid)
        off = [c for c in grid.cards.values() if not c.on_screen]
        assert len(off) >= 4
        for card in off:
            grid.update_host(loading_state(host=card.state.host, readiness="healthy", state="ready",
                                           phase="ready", progress=None, verdict=None))
        grid.set_now(T0 + 300)
        await pilot.pause()
        assert not any(c.has_class("-ready") for c in off)
        await pilot.resize_terminal(160, 48)  # 8 cards fit in two columns: all on screen
        await pilot.pause()
        await pilot.pause()
        assert all(c.on_screen for c in grid.cards.values())
        assert all(c.has_class("-ready") and c.now == T0 + 300 for c in off)
        assert screen_text(app).count("READY") == len(off)


async def test_a_state_that_changes_nothing_the_card_shows_repaints_nothing():
    app = Grid(_states(1), now=T0 + 200)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        card = app.query_one(CardGrid).card("gpu-0")
        assert card is not None and card.on_screen
        refreshes = _count_refreshes(card)
        # A new line that is not shown (the last meaningful one stays) and a newer stamp.
        card.state = loading_state(host="gpu-0", log_count=500, updated=T0 + 201)
        await pilot.pause()
        assert refreshes == []
        card.state = loading_state(host="gpu-0", last_line="Capture cuda graph end.")
        await pilot.pause()
        assert "_Line" in refreshes  # the log line did change: it is redrawn


async def test_the_header_counts_every_host_not_only_the_cards_on_screen():
    config = Config(hosts=tuple(HostSpec(f"gpu-{i:02d}", "sglang.service") for i in range(40)))
    app = make_app(config, lambda spec: CannedRunner(), ManualClock(T0), start_watchers=False,
                   audit=None, history=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.set_view("cards")  # 40 hosts would show as rows by themselves
        await pilot.pause()
        for i in range(40):  # the last ten fail, far below the screen
            screen.update_host(loading_state(host=f"gpu-{i:02d}", state="failed" if i >= 30 else "loading",
                                             verdict=None))
        await pilot.pause()
        grid = screen.query_one(CardGrid)
        assert not any(grid.card(f"gpu-{i}").on_screen for i in range(30, 40))
        assert screen.sub_title == "40 hosts: 10 failed · 30 loading"
        assert "40 hosts: 10 failed · 30 loading" in screen_text(app)
        # Hosts that change count once, as what they are now (the counts are kept per host).
        for i in (38, 39, 0):
            screen.update_host(loading_state(host=f"gpu-{i:02d}", state="ready", phase="ready", readiness="serving",
                                             progress=None, verdict=None))
        screen.update_host(loading_state(host="gpu-01", stale_since=T0, verdict=None))
        await pilot.pause()
        assert screen.sub_title == "40 hosts: 8 failed · 1 stale · 28 loading · 3 ready"
