"""The help screen (``?``): the action keys when the actions are on; when they are off, none of
them, but that they are off and how to get them (tui/help_screen.py ``help_text``)."""

from __future__ import annotations

from textual.widgets import Static

from probes.clock import ManualClock
from tui.demo_app import make_demo_app
from tui.help_screen import HelpScreen, help_text

T0 = 1_764_000_000.0
ACTION_LINES = ("restart the unit", "stop the unit", "SIGKILL every process of the unit", "safe restart")


async def _help_of(read_only: bool) -> str:
    app = make_demo_app(clock=ManualClock(T0), read_only=read_only)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        static = app.screen.query_one(Static)
        text = str(static.render())
        widest = max(len(line) for line in text.splitlines())
        assert static.size.width >= widest, f"a help line of {widest} characters wraps in {static.size.width}"
        return text


async def test_help_lists_the_action_keys_when_the_actions_are_on() -> None:
    text = await _help_of(read_only=False)
    assert all(line in text for line in ACTION_LINES)
    assert "Actions are off" not in text


async def test_read_only_help_offers_no_action_and_says_how_to_get_them() -> None:
    text = await _help_of(read_only=True)
    assert not any(line in text for line in ACTION_LINES), text
    assert "Actions are off: upwatch runs read-only (--read-only, or" in text
    assert "run upwatch without it." in text
    assert "enter / click    open the host's detail screen" in text  # the rest of the help is there


def test_a_browser_session_is_told_to_run_upwatch_in_a_terminal() -> None:
    text = help_text(read_only=True, web=True)
    assert not any(line in text for line in ACTION_LINES)
    assert "Actions are off in this view" in text and "run upwatch in a terminal" in text
    assert help_text(read_only=False, web=True) == help_text()  # a browser with actions on (none today) sees them
