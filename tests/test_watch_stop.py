"""HostWatcher.stop always returns: a cancellation that meets an event being set is not swallowed
(asyncio.wait_for before Python 3.12 could, and a probe then ran on while stop waited for it: the
hang seen once in the `upwatch wait` tests), and a task that swallows its cancellation anyway is
given up on after STOP_WAIT_S."""

from __future__ import annotations

import asyncio
import time

import pytest

import probes.watch.watcher as watch_mod
from probes.clock import ManualClock
from probes.transport.local import LocalRunner
from probes.spec import HostSpec
from probes.sources.context import wait_event as _wait_event
from probes.watch.watcher import HostWatcher


async def test_wait_event_times_out_is_set_and_never_swallows_a_cancellation() -> None:
    ev = asyncio.Event()
    assert await _wait_event(ev, 0.01) is False
    ev.set()
    assert await _wait_event(ev, 0.01) is True
    ev.clear()
    task = asyncio.ensure_future(_wait_event(ev, 10.0))
    await asyncio.sleep(0)  # the task waits on the event
    ev.set()
    task.cancel()  # in the same turn as the event: the race wait_for lost
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_stop_gives_up_on_a_task_that_swallows_its_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_mod, "STOP_WAIT_S", 0.5)
    w = HostWatcher(HostSpec("h", "u.service", ssh="local"), LocalRunner(), ManualClock(1_764_460_800.0))
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue  # swallowed, as a buggy library might

    task = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)  # inside its try
    w._tasks.append(task)
    started = time.monotonic()
    await w.stop()
    assert time.monotonic() - started < 3.0
    assert not task.done()  # given up on, not waited for
    release.set()
    task.cancel()
    await asyncio.wait({task}, timeout=1.0)
