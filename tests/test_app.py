"""The dashboard driven by Pilot on the demo scenarios, with a ManualClock: no sleeps, no luck."""

from __future__ import annotations

import pytest
from textual import events
from textual.widgets import Input

from probes.clock import ManualClock
from tui.demo_app import advance_demo, make_demo_app
from tui.detail_screen import DetailScreen
from tui.help_screen import HelpScreen
from tui.screens import OverviewScreen
from widgets.host_card import HostCard
from widgets.log_pane import LogPane

T0 = 1_764_000_000.0


async def _advance(app, pilot, clock: ManualClock, seconds: float) -> None:
    """Move simulated time, then let the app take its snapshots and repaint."""
    await advance_demo(app, clock, pilot, seconds)


def _screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_navigate_open_filter_jump_to_error_and_quit():
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 400)
        assert isinstance(app.screen, OverviewScreen)
        cards = list(app.screen.query(HostCard))
        assert [c.state.host for c in cards] == ["gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"]
        assert app.screen.focused is cards[0]
        text = _screen_text(app)
        assert "4 hosts: 1 failed · 1 stalled · 2 ready" in text
        assert "Restart loop: 3 starts failed in 2m44s, each CUDA out of memory" in text
        assert "the start looks hung" in text

        await pilot.press("down")  # the grid has two columns: down is the card below
        assert app.screen.focused is cards[2]
        await pilot.press("up", "right")
        assert app.screen.focused is cards[1]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.watcher.name == "gpu-node-2"
        pane = app.screen.query_one(LogPane)
        assert len(pane.entries) == app.watchers["gpu-node-2"].state().log_count == 42

        # / filters the log as you type; escape in the filter box clears it and stays.
        await pilot.press("slash")
        await pilot.press(*"out of memory")
        await pilot.pause()
        assert 0 < len(pane.shown) < len(pane.entries)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and len(pane.shown) == len(pane.entries)
        # enter keeps the filter; escape then clears it, and a second escape goes back.
        await pilot.press("slash", *"out of memory", "enter")
        await pilot.pause()
        assert 0 < len(pane.shown) < len(pane.entries)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and len(pane.shown) == len(pane.entries)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)

        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        pane = app.screen.query_one(LogPane)
        # e jumps to the decisive error line and stops following.
        await pilot.press("e")
        await pilot.pause()
        err = app.watchers["gpu-node-2"].state().error
        assert err is not None and pane.cursor_seq == err.line and pane.follow is False
        assert str(app.screen.query_one("#status").render()) == f"error line {err.line}: cuda_oom"
        await pilot.press("f")
        assert pane.follow is True

        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "esc, q or ? closes" in _screen_text(app)  # the box covers the footer (a fresh user)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)


async def test_escape_clears_a_kept_filter_before_leaving_and_the_footer_names_it_once():
    # A fresh user: / Load enter kept the filter, and the next escape left the screen with it
    # (the help says "escape clears it"); the pane's border said `filter “load” · search “Load”`
    # for the one thing typed in the one box.
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 300)
        app.open_detail("gpu-node-2")
        await pilot.pause()
        pane = app.screen.query_one(LogPane)
        await pilot.press("slash", *"Load", "enter")
        await pilot.pause()
        assert pane.filter == "load" and 0 < len(pane.shown) < len(pane.entries)
        subtitle = str(pane.border_subtitle)
        assert "filter “Load”" in subtitle and "search" not in subtitle, subtitle
        status = app.screen.query_one("#status")

        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        assert pane.filter is None and pane.search_term is None and len(pane.shown) == len(pane.entries)
        assert app.screen.query_one("#filter", Input).value == ""
        assert "filter" not in str(pane.border_subtitle)
        assert str(status.render()) == "filter “Load” cleared (escape again goes back)"

        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_e_after_a_kept_filter_says_the_error_line():
    # e clears a kept filter to show the error line; the box's emptying must not blank what it said.
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 400)
        app.open_detail("gpu-node-2")
        await pilot.pause()
        pane = app.screen.query_one(LogPane)
        await pilot.press("slash", *"Load", "enter", "e")
        await pilot.pause()
        err = app.watchers["gpu-node-2"].state().error
        assert err is not None and pane.cursor_seq == err.line and pane.filter is None
        assert pane.search_term is None
        assert str(app.screen.query_one("#status").render()) == f"error line {err.line}: cuda_oom"


async def test_filter_then_n_steps_through_matches():
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 300)
        app.open_detail("gpu-node-1")
        await pilot.pause()
        pane = app.screen.query_one(LogPane)
        await pilot.press("slash", *"shards", "enter")
        await pilot.pause()
        assert len(pane.shown) >= 14
        first = pane.cursor_seq
        await pilot.press("n")
        await pilot.press("n")
        second = pane.cursor_seq
        await pilot.press("N")
        assert second is not None and second != first and pane.cursor_seq != second


async def test_a_filter_sent_in_one_read_never_reaches_the_action_keys():
    # `tmux send-keys "/ready" Enter` on the detail screen (an agent, a paste) queued every key
    # before "/" had focused the box: the "r" then asked to restart the unit, the other letters
    # went to "e" (jump to error) and the rest. A "/" typed in the box stays a letter.
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 300)
        app.open_detail("gpu-node-1")
        await pilot.pause()
        for key, char in [("slash", "/"), *((c, c) for c in "ready/x"), ("enter", "\r")]:
            app.post_message(events.Key("slash" if key == "/" else key, char))  # all queued at once
        await pilot.pause()
        assert len(app.screen_stack) == 2 and isinstance(app.screen, DetailScreen)  # no confirmation above
        assert app.screen.query_one("#filter", Input).value == "ready/x"


async def test_host_text_in_the_journal_renders_literally():
    """Scenario a carries real trap records: Rich markup, ANSI colour, invalid UTF-8, 5000 bytes."""
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(200, 60)) as pilot:
        await _advance(app, pilot, clock, 300)
        app.open_detail("gpu-node-1")
        await pilot.pause()
        text = _screen_text(app)
        assert "[bold]x[/] and [/usr/bin/python3]" in text
        assert "\x1b" not in text


async def test_small_terminal_one_column_scrolls():
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await _advance(app, pilot, clock, 60)
        grid = app.screen.query_one("#grid")
        assert grid.columns == 1
        cards = list(app.screen.query(HostCard))
        for _ in range(3):
            await pilot.press("down")
        await pilot.pause()
        assert app.screen.focused is cards[3]
        assert grid.scroll_y > 0  # the fourth card was scrolled into view


async def test_clicking_a_card_opens_it():
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 30)
        card = list(app.screen.query(HostCard))[2]
        await pilot.click(card)
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.watcher.name == "gpu-node-3"


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
async def test_both_themes_render(theme):
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        app.theme = theme
        await _advance(app, pilot, clock, 200)
        assert "gpu-node-4" in _screen_text(app)


def _one_host_app(clock: ManualClock, **changes):
    """The app on one demo scenario with some of its fields changed (host name, outages...)."""
    import dataclasses

    from probes.transport.replay.runner import ReplayRunner
    from probes.spec import HostSpec
    from tui.app import make_app
    from tui.config import Config
    from tui.demo import demo_scenarios

    sc = dataclasses.replace(demo_scenarios(T0)[0].rebased(T0), **changes)
    spec = HostSpec(sc.host, sc.unit, sc.port, sc.engine)
    return make_app(Config(hosts=(spec,)), lambda s: ReplayRunner(sc, clock, start=T0), clock)


async def test_markup_in_host_and_unit_names_is_shown_literally():
    clock = ManualClock(T0)
    app = _one_host_app(clock, host="[bold]gpu-[/]node\x1b[31m-9", unit="[/usr/bin/x].service")
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 200)
        text = _screen_text(app)
        assert "[bold]gpu-[/]node-9" in text and "[/usr/bin/x].service" in text
        app.open_detail("[bold]gpu-[/]node\x1b[31m-9")
        await pilot.pause()
        text = _screen_text(app)
        assert "[/usr/bin/x].service" in text and "\x1b" not in text


async def test_a_host_that_drops_its_connection_is_stale_and_keeps_its_state():
    clock = ManualClock(T0)
    app = _one_host_app(clock, outages=((170.0, 400.0),))
    async with app.run_test(size=(160, 48)) as pilot:
        await _advance(app, pilot, clock, 165)
        before = app.watchers["gpu-node-1"].state()
        assert before.state == "ready" and before.stale_since is None
        await _advance(app, pilot, clock, 60)
        card = app.screen.query_one(HostCard)
        assert card.has_class("-stale")
        text = _screen_text(app)
        assert "STALE · connection lost, reconnecting, last data" in text and "Connection lost, reconnecting, last data" in text
        # Last known state, not zeros: still ready, GPUs still show their memory.
        assert "READY" in text and "serving" in text and "71/80G" in text
        assert "1 host: 1 stale " in text  # counted once: its "ready" is only the last known state
        assert "No route to host" not in text.split("Connection lost")[0]  # not repeated in the GPU line
        await _advance(app, pilot, clock, 300)
        assert not app.screen.query_one(HostCard).has_class("-stale")


async def test_detail_screen_in_a_small_terminal_gives_the_log_the_room():
    from tui.demo_app import advance_demo

    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(60, 15)) as pilot:
        await advance_demo(app, clock, pilot, 200, host="gpu-node-2", keys=("e",))
        assert not app.screen.query_one("#card").display and not app.screen.query_one("#side").display
        assert str(app.screen.query_one("#status").render()) == "error line 32: cuda_oom"
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert app.screen.query_one("#card").display and app.screen.query_one("#side").display


async def test_a_long_verdict_and_hint_are_whole_on_the_card():
    from tui.demo_app import advance_demo

    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 400)
        card = list(app.screen.query(HostCard))[1]
        text = card.verdict_text(card.state).plain
        assert text.startswith("Restart loop: 3 starts failed") and "…" not in text
        assert "Hint: GPU memory ran out: lower --max-model-len or --max-num-seqs, add --enforce-eager" in text
        # The sentence says "fix it, then systemctl reset-failed": the hint does not say it again.
        assert text.count("reset-failed") == 1 and "start limit): `systemctl" not in text
        app.open_detail("gpu-node-2")
        await pilot.pause()
        on_detail = app.screen.query_one(HostCard)
        assert on_detail.verdict_text(on_detail.state).plain == text
        line = card.query_one("#hc-verdict")
        assert line.size.height == line.get_content_height(line.size, app.size, line.size.width) >= 4
