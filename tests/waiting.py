"""Waiting for a condition, bounded, in real time: the one ``until`` of the tests.

``until(what, check, deadline_s, every=..., pilot=...)`` (async) and ``until_sync(what, check,
deadline_s, every=...)`` (outside any event loop, e.g. a tmux screen) call ``check()`` until it
returns something truthy and return that value; after ``deadline_s`` seconds the test fails with
``what`` and the last value seen. Both share :class:`Deadline`; only the pause between two looks
differs (``asyncio.sleep``, a Pilot's ``pause`` so the app runs meanwhile, or ``time.sleep``).
The pause is a polling interval, never a wait for an outcome.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

#: Seconds before a wait gives up: generous, it is only reached when the test fails.
DEADLINE_S = 30.0


class Deadline:
    """The deadline of one wait: :meth:`done` says whether ``value`` ends it, and raises once
    ``deadline_s`` seconds (``time.monotonic``) have passed without a truthy value."""

    def __init__(self, what: str, deadline_s: float) -> None:
        self.what = what
        self.deadline_s = deadline_s
        self.end = time.monotonic() + deadline_s

    def done(self, value: Any) -> bool:
        """True when ``value`` is truthy; False while time is left.

        Raises:
            AssertionError: falsy and past the deadline; the message names ``what`` and ``value``.
        """
        if value:
            return True
        if time.monotonic() > self.end:
            raise AssertionError(f"{self.what}: not within {self.deadline_s:g} s (last: {value!r})")
        return False


async def until(what: str, check: Callable[[], Any], deadline_s: float = DEADLINE_S, *,
                every: float = 0.02, pilot: Any = None) -> Any:
    """Call ``check()`` (a plain function, or one returning an awaitable, which is awaited) every
    ``every`` seconds until it gives something truthy, and return that.

    Args:
        what: what is awaited, for the failure message. deadline_s: seconds before failing.
        every: seconds between two looks. pilot: a Textual ``Pilot``: pause with
            ``pilot.pause(every)`` (the app runs meanwhile) instead of ``asyncio.sleep``.

    Raises:
        AssertionError: nothing truthy within ``deadline_s`` (with the last value).
    """
    deadline = Deadline(what, deadline_s)
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if deadline.done(value):
            return value
        await (pilot.pause(every) if pilot is not None else asyncio.sleep(every))


def until_sync(what: str, check: Callable[[], Any], deadline_s: float = DEADLINE_S, *,
               every: float = 0.05) -> Any:
    """:func:`until` without an event loop: ``time.sleep(every)`` between two looks.

    Raises:
        AssertionError: nothing truthy within ``deadline_s`` (with the last value).
    """
    deadline = Deadline(what, deadline_s)
    while True:
        value = check()
        if deadline.done(value):
            return value
        time.sleep(every)
