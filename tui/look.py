"""One look at every host, as the headless commands take it: a watcher per host
(:func:`make_watchers`), run until each has answered once (:class:`Answered`) or the timeout
passed (:func:`look_once`, :func:`collect`), then stopped. ``status``, ``report``, the MCP tools
and the exporter all watch through here; what they print is theirs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

from probes.clock import Clock, WallClock
from probes.data.state import HostState
from probes.sources.nvml import NvmlSource
from probes.spec import HostSpec
from probes.store.history import History
from probes.transport.runner import Runner
from probes.watch.watcher import HostWatcher
from tui.config import Config

T = TypeVar("T")

#: Seconds without a new journal entry after which the first connect's backlog counts as read.
JOURNAL_QUIET_S = 0.5


def never_reached(w: HostWatcher) -> bool:
    """``w`` could not connect at all: the connection fails and no unit state was ever read. Such
    a host has not answered, though waiting for its answer is over (:class:`Answered`)."""
    return w.model.unreachable() and w.model.last_unit() is None


class Answered:
    """Tells when the wait for a watcher's first answer is over: each probe delivered or failed,
    and the journal's backlog is read (no new entry for :data:`JOURNAL_QUIET_S`, on the monotonic
    clock); or it could not connect at all (:func:`never_reached`: nothing more will come before
    the timeout; it did not answer, which a caller that says "answered" must tell apart)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[int, float]] = {}

    def __call__(self, w: HostWatcher) -> bool:
        if never_reached(w):
            return True  # could not connect at all: nothing more will come before the timeout
        if not w.answered():
            return False
        seq, since = self._last.get(id(w), (-1, 0.0))
        now = time.monotonic()
        if w.model.seq != seq:
            self._last[id(w)] = (w.model.seq, now)
            return False
        return now - since >= JOURNAL_QUIET_S or w.model.failing("journal")


def make_watchers(config: Config, changed: asyncio.Event, clock: Clock,
                  runner_factory: Callable[[HostSpec], Runner] | None,
                  gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None,
                  history: History | None = None) -> list[HostWatcher]:
    """One :class:`HostWatcher` per host of ``config`` (config order, not started), with the
    configured poll intervals; each sets ``changed`` when its model changes. ``runner_factory`` and
    ``gpu_source_factory`` default to the live ones (:mod:`tui.live`: SSH, or local for ``local``
    hosts). The headless commands (``status``, ``status --watch``, ``exporter``) all build their
    watchers here."""
    if runner_factory is None or gpu_source_factory is None:
        from tui.live import gpu_source_for, runner_for

        runner_factory = runner_factory or runner_for
        gpu_source_factory = gpu_source_factory or gpu_source_for
    return [HostWatcher(spec, runner_factory(spec), clock, lambda _w: changed.set(),
                        unit_interval_s=config.unit_interval_s, health_interval_s=config.health_interval_s,
                        gpu_interval_s=config.gpu_interval_s, gpu_source=gpu_source_factory(spec),
                        history=history)
            for spec in config.hosts]


async def collect(config: Config, timeout_s: float, *,
                  runner_factory: Callable[[HostSpec], Runner] | None = None,
                  gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
                  clock: Clock | None = None, history: History | None = None,
                  ) -> list[tuple[HostSpec, HostState, bool]]:
    """Watch every host until each answered once (or ``timeout_s`` real seconds passed), then stop.
    With a ``history``, finished starts are written to it and the typical durations read from it.

    Returns:
        ``(spec, snapshot, answered)`` per host, in config order. Every remote process started is
        ended before this returns.
    """
    return await look_once(config, timeout_s, lambda w, answered: (w.spec, w.state(), answered),
                           runner_factory=runner_factory, gpu_source_factory=gpu_source_factory,
                           clock=clock, history=history)


async def look_once(config: Config, timeout_s: float, take: Callable[[HostWatcher, bool], T], *,
                    runner_factory: Callable[[HostSpec], Runner] | None = None,
                    gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
                    clock: Clock | None = None, history: History | None = None) -> list[T]:
    """:func:`collect`'s one look, with what is kept of each watcher chosen by the caller.

    Args:
        take: called once per watcher, in config order, with the watcher and whether it answered
            (:class:`Answered`), after the look and before the watchers stop (``upwatch report``
            also keeps the log entries around the decisive line).

    Returns:
        What ``take`` returned, per host in config order. Every remote process started is ended
        before this returns.
    """
    changed = asyncio.Event()
    watchers = make_watchers(config, changed, clock or WallClock(), runner_factory, gpu_source_factory, history)
    done = Answered()
    for w in watchers:
        w.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not all(done(w) for w in watchers):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            changed.clear()
            try:
                await asyncio.wait_for(changed.wait(), min(left, JOURNAL_QUIET_S / 2))
            except TimeoutError:
                pass
        answered = [done(w) for w in watchers]
        await asyncio.gather(*(w.sync_history() for w in watchers))
        return [take(w, a) for w, a in zip(watchers, answered)]
    finally:
        await asyncio.gather(*(w.stop() for w in watchers), return_exceptions=True)
