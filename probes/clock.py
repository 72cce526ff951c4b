"""Clocks: the one place upwatch learns what time it is, and how it waits.

Every piece that needs "now" (stall detection, ETA, "time in this phase") or waits between polls
takes a :class:`Clock`, so a replay, a live run and a test compute the same durations and tests
never sleep waiting for luck.

* :class:`WallClock`: real time.
* :class:`ScaledClock`: real time running ``speed`` times faster from a chosen start (the demo).
* :class:`ManualClock`: time moves only when a test (or the benchmark) calls :meth:`ManualClock.advance`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    """What a clock offers. Times are seconds since the Unix epoch (float)."""

    def now(self) -> float:
        """The current time, seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time (0 or less: yield once)."""
        ...


class WallClock:
    """Real time: ``time.time()`` and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ScaledClock:
    """Real time sped up: starts at ``start`` (epoch seconds) and runs ``speed`` times faster.

    Args:
        speed: how many clock seconds pass per real second (> 0).
        start: the clock's time when it is made (default: now).

    Raises:
        ValueError: ``speed`` is not positive.
    """

    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, not {speed!r}")
        self.speed = float(speed)
        self._start = time.time() if start is None else float(start)
        self._t0 = time.monotonic()

    def now(self) -> float:
        return self._start + (time.monotonic() - self._t0) * self.speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.speed)


class ManualClock:
    """A clock that moves only when told to. Sleepers wake in deadline order.

    ``await clock.advance(60)`` walks through every deadline in the next 60 seconds: it sets the
    time to the deadline, wakes the sleepers due then and lets the event loop run until they have
    done their work (``settle`` rounds of ``asyncio.sleep(0)``), then goes on to the next deadline.
    Nothing touches real time, so a test of ten simulated minutes runs in well under a second.

    Args:
        start: the clock's initial time, seconds since the epoch.
        settle: event-loop rounds to run after each wake-up (enough for in-memory work such as an
            httpx request over a mock transport).
    """

    def __init__(self, start: float = 1_700_000_000.0, settle: int = 30) -> None:
        self._now = float(start)
        self._settle = settle
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (self._now + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting on this clock."""
        return sum(1 for _, _, f in self._heap if not f.done())

    async def settle(self) -> None:
        """Let the event loop run ``settle`` rounds without moving time."""
        for _ in range(self._settle):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking each sleeper at its deadline, in order."""
        end = self._now + seconds
        await self.settle()
        while self._heap and self._heap[0][0] <= end:
            deadline, _, fut = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            if not fut.done():
                fut.set_result(None)
            # Wake everyone due at the same instant before settling.
            while self._heap and self._heap[0][0] <= self._now:
                _, _, other = heapq.heappop(self._heap)
                if not other.done():
                    other.set_result(None)
            await self.settle()
        self._now = end
        await self.settle()
