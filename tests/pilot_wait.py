"""Waiting for a condition in a Pilot test, bounded: the condition is checked between short pauses
of the app (real time), and the test fails with what was last seen."""

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
