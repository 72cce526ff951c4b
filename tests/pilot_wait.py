"""Waiting for a condition, bounded: in a Pilot test (:func:`until`, checked between short pauses
of the app) or outside any event loop (:func:`until_sync`, e.g. a tmux screen); real time, and the
test fails with what was last seen."""

from __future__ import annotations

import time
from typing import Any


async def until(what: str, check: Any, pilot, deadline_s: float = 30.0, every: float = 0.02) -> Any:
    """Call ``check()`` until it returns something truthy and return that; fail after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline_s:g} s (last: {value!r})")
        await pilot.pause(every)


def until_sync(what: str, check: Any, deadline_s: float = 15.0, every: float = 0.05) -> Any:
    """:func:`until` without an app: call ``check()`` every ``every`` seconds until it returns
    something truthy and return that; fail after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline_s:g} s (last: {value!r})")
        time.sleep(every)
