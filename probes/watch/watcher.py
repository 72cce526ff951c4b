"""HostWatcher: runs one host's probes concurrently, feeds its model, and says when it changed.

One long-lived task per probe, each a loop that never overlaps itself:

* journal: ``journalctl -u UNIT -o json -a -f`` streamed; after a drop it resumes with
  ``--after-cursor`` (the last cursor delivered), so no entry is lost or shown twice;
* unit: ``systemctl show`` polled every ``unit_interval_s``;
* gpu: ``nvidia-smi --query-gpu ... -lms`` streamed (one row per GPU per interval);
* health: ``GET /health`` through the runner's port forward every ``health_interval_s``, plus a
  one-token generation now and then once healthy (the ``serving`` rung);
* download: while a start fetches its model (the ``download`` phase, or ``weights`` with no shard
  bar yet and a hub model id), the repo's folder in the hub cache measured every
  ``download_interval_s`` (:mod:`probes.sources.download`).

Each loop is a source of :mod:`probes.sources` running on the one
:class:`~probes.sources.context.SourceContext` the watcher builds; the watcher only starts,
supervises and stops them, and keeps the start history in step.

A failing probe degrades its own cell (a :class:`~probes.data.events.ProbeFailure` in the model) and
retries with backoff; it never stops the others. A value a probe cannot parse is a failure of that
probe (kind ``unparsable``, naming the column) while the rest of its data keeps coming. A probe task
that raises anyway (a bug) is supervised: its cell fails with kind ``crashed`` and the exception's
type and message, and the task is started again after a capped exponential backoff
(:meth:`HostWatcher._supervise`); the host's other probes keep running.

The watcher does not push snapshots: it calls ``on_change(watcher)`` (cheap, possibly many times a
second) and consumers pull :meth:`state` and :meth:`entries_after` at their own rate, which is how
the dashboard coalesces per host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from probes.clock import Clock
from probes.data.events import UnitState
from probes.data.state import HostState, LogEntry
from probes.fold.model import HostModel
from probes.sources import download as download_probe
from probes.sources.context import STOP_WAIT_S, Cadence, SourceContext
from probes.sources.download import DownloadSource
from probes.sources.gpu import GpuSampler, GpuSource
from probes.sources.gpu_apps import GpuAppsSource
from probes.sources.health import HealthSource
from probes.sources.journal import JournalSource
from probes.sources.unit import UnitSource
from probes.spec import HostSpec
from probes.store.history import History
from probes.transport.runner import Runner

#: A restarted probe task that ran this many clock seconds before raising again starts its
#: backoff over (a rare crash is retried soon; a crash loop waits up to ``retry_max_s``).
CRASH_RESET_S = 300.0


def _cadence(name: str) -> Any:
    """A watcher attribute that is its context's :class:`Cadence` field ``name`` (read and set)."""
    return property(lambda self: getattr(self.context.cadence, name),
                    lambda self, value: setattr(self.context.cadence, name, value),
                    doc=f"The probes' ``{name}`` (clock seconds; see :class:`Cadence`).")


class HostWatcher:
    """Watches one host: probes → :class:`~probes.fold.model.HostModel` → ``on_change``.

    Args:
        spec: what to watch. runner: how to reach the host. clock: the injected clock (polls wait
            on it; events keep their source time).
        on_change: called (synchronously, must be cheap) after the model changed.
        unit_interval_s, health_interval_s, gpu_interval_s: poll periods in clock seconds.
        apps_interval_s: how often the processes holding GPU memory are listed (clock seconds);
            a call that is still running is never started again.
        serving_every_s: how often a healthy server is asked for a one-token generation.
        retry_s: first retry delay after a probe failed (doubles up to ``retry_max_s``). A lost
            connection is retried every ``retry_s`` without doubling: the runner paces its own
            reconnects.
        gpu_source: sample GPUs with this (a :class:`~probes.sources.nvml.NvmlSource` for a local host)
            instead of streaming ``nvidia-smi`` through the runner.
        history: the start history: each finished start is written to it, and the typical
            durations of the current start's kind are read from it (see :meth:`sync_history`);
            None keeps no history.
        history_every_s: how often (clock seconds) the history task looks at the state.
        download_interval_s: how often a download's folder is measured (clock seconds).

    Attributes:
        model: the host's :class:`~probes.fold.model.HostModel`. context: the
            :class:`~probes.sources.context.SourceContext` every source runs on. journal, gpu,
            download: the sources the tests and the dashboard look into (the journal's cursor, the
            learnt GPU count, the download loop run alone); sources: every probe's loop by cell
            name. The intervals above are attributes too (their context's :class:`Cadence`: a
            change before :meth:`start` is what the loops use). crashes: see :meth:`_supervise`.
    """

    unit_interval_s = _cadence("unit_interval_s")
    health_interval_s = _cadence("health_interval_s")
    gpu_interval_s = _cadence("gpu_interval_s")
    apps_interval_s = _cadence("apps_interval_s")
    serving_every_s = _cadence("serving_every_s")
    download_interval_s = _cadence("download_interval_s")
    retry_s = _cadence("retry_s")
    retry_max_s = _cadence("retry_max_s")

    def __init__(self, spec: HostSpec, runner: Runner, clock: Clock,
                 on_change: Callable[[HostWatcher], None] | None = None, *,
                 unit_interval_s: float = 1.0, health_interval_s: float = 2.0,
                 gpu_interval_s: float = 1.0, apps_interval_s: float = 5.0,
                 serving_every_s: float = 30.0, retry_s: float = 2.0, retry_max_s: float = 30.0,
                 gpu_source: GpuSampler | None = None, history: History | None = None,
                 history_every_s: float = 1.0,
                 download_interval_s: float = download_probe.SAMPLE_INTERVAL_S) -> None:
        self.spec = spec
        self.runner = runner
        self.clock = clock
        self.on_change = on_change
        self.model = HostModel(spec.name, spec.unit, spec.engine, stall_after=dict(spec.stall_after_s))
        cadence = Cadence(unit_interval_s=unit_interval_s, health_interval_s=health_interval_s,
                          gpu_interval_s=gpu_interval_s, apps_interval_s=apps_interval_s,
                          serving_every_s=serving_every_s, download_interval_s=download_interval_s,
                          retry_s=retry_s, retry_max_s=retry_max_s)
        #: what every source runs on (host, runner, clock, the model's doors, the signals)
        self.context = SourceContext(spec, runner, clock, self.model, self._changed, cadence)
        self.gpu_source = gpu_source
        self.journal = JournalSource(self.context)
        self.gpu = GpuSource(self.context, gpu_source)
        self.download = DownloadSource(self.context)
        #: the probes' loops by cell name, in the order they are started
        self.sources: dict[str, Callable[[], Awaitable[None]]] = {
            "journal": self.journal.run, "unit": UnitSource(self.context).run, "gpu": self.gpu.run,
            "gpu_apps": GpuAppsSource(self.context).run, "health": HealthSource(self.context).run,
            "download": self.download.run}
        self._tasks: list[asyncio.Task[None]] = []
        #: how many times each probe's task raised and was started again (:meth:`_supervise`)
        self.crashes: dict[str, int] = {}
        self.history = history
        self.history_every_s = history_every_s
        self._history_lock = asyncio.Lock()
        self._recorded: tuple[float, str] | None = None
        self._typical_key: tuple[str | None, str | None, float | None] | None = None
        self._history_seen: tuple[int, UnitState | None] | None = None  # (seq, unit) of the last look
        #: looks :meth:`sync_history` took at the snapshot (for tests and the benchmark)
        self.history_looks = 0

    @property
    def name(self) -> str:
        """The host's name."""
        return self.spec.name

    @property
    def cursor(self) -> str | None:
        """The journal cursor of the last entry delivered (None before the first)."""
        return self.journal.cursor

    @property
    def journal_reopened(self) -> int:
        """Times the journal follow was reopened because it had fallen behind (systemd#25649)."""
        return self.journal.reopened

    # --- consumers -------------------------------------------------------------------------------

    def state(self, now: float | None = None) -> HostState:
        """The current snapshot, judged at ``now`` (epoch seconds; default: the clock's now). The
        dashboard passes its one screen clock, so a card and its verdict read the same time."""
        return self.model.state(self.clock.now() if now is None else now)

    def entries_after(self, seq: int) -> list[LogEntry]:
        """Log entries newer than ``seq`` (still kept), oldest first."""
        return self.model.entries_after(seq)

    def answered(self) -> bool:
        """Whether every probe has answered or failed at least once (``upwatch status`` waits for
        this): a unit state, a journal look, a GPU reading with its process list, and a health
        rung, each or its failure."""
        m = self.model
        return ((m.last_unit() is not None or m.failing("unit"))
                and (m.seq > 0 or self.journal.answered or m.failing("journal"))
                and ((m.last_gpus() is not None and (m.last_gpu_apps() is not None or m.failing("gpu_apps")))
                     or m.failing("gpu"))
                and (m.last_health() is not None or m.failing("health")))

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the probe tasks on the running loop."""
        if self._tasks:
            return
        for name, loop in self.sources.items():
            self._tasks.append(asyncio.create_task(self._supervise(name, loop), name=f"{self.spec.name}:{name}"))
        if self.history is not None:
            self._tasks.append(asyncio.create_task(self._history_loop(), name=f"{self.spec.name}:history"))

    async def stop(self) -> None:
        """Cancel the probes and close the runner (which ends every remote process it started).

        A task that outlives its cancellation (a library that swallowed it) is cancelled again,
        for at most about :data:`STOP_WAIT_S` seconds; stop never waits longer than that for them."""
        pending = set(self._tasks)
        deadline = asyncio.get_running_loop().time() + STOP_WAIT_S
        while pending:
            for t in pending:
                t.cancel()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=min(left, 0.5))
        for t in self._tasks:
            if t.done() and not t.cancelled():
                t.exception()  # retrieved: no "never retrieved" warning for a probe that failed
        self._tasks.clear()
        if self.gpu_source is not None:
            try:
                self.gpu_source.close()
            except Exception:
                pass
        try:
            await self.runner.close()
        except Exception:
            pass

    async def _supervise(self, probe: str, loop: Callable[[], Awaitable[None]]) -> None:
        """Run one probe's loop; when it raises (a bug: every bad input has its own path), say so in
        that probe's cell and start it again, so one probe's crash never silences the host.

        The cell gets a :class:`~probes.data.events.ProbeFailure` of kind ``crashed`` whose message is
        the exception as it is (``OverflowError: cannot convert float infinity to integer``), with
        the restart count and delay. Delays start at ``retry_s`` and double up to ``retry_max_s``;
        a loop that ran :data:`CRASH_RESET_S` clock seconds before raising starts over at
        ``retry_s``. :attr:`crashes` counts the crashes per probe. Cancellation is never caught.

        Args:
            probe: the cell (``journal``, ``unit``, ``gpu``, ``gpu_apps``, ``health``, ``download``).
            loop: the probe's loop (a coroutine function that runs until cancelled).
        """
        cadence = self.context.cadence
        delay = cadence.retry_s
        while True:
            began = self.clock.now()
            try:
                await loop()
                return  # a loop that ends on its own has nothing more to do
            except Exception as exc:  # noqa: BLE001 - shown as what it is, then restarted
                if self.clock.now() - began >= CRASH_RESET_S:
                    delay = cadence.retry_s
                n = self.crashes.get(probe, 0) + 1
                self.crashes[probe] = n
                what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self.context.fail(probe, "crashed", f"the {probe} probe crashed ({what[:300]}); "
                                  f"restart {n} in {delay:g} s")
                await self.clock.sleep(delay)
                delay = min(delay * 2, cadence.retry_max_s)

    async def run(self) -> None:
        """Start the probes and wait until cancelled (then stop them)."""
        self.start()
        try:
            await asyncio.gather(*self._tasks)
        finally:
            await self.stop()

    # --- history ---------------------------------------------------------------------------------

    async def sync_history(self) -> None:
        """Bring the history and the model up to date once: write the current start when it has
        just finished (ready or failed; once per beginning), and look up the typical durations
        of the starts ready before this one when the start's identity (model, engine-argument
        hash) or beginning is new. SQLite runs in a thread (``asyncio.to_thread``). Never raises: a history that
        fails turns itself off (:attr:`History.problem`)."""
        h = self.history
        if h is None or not h.ok:
            return
        async with self._history_lock:
            m = self.model
            # What is read below (state, start_began, model, args_hash, log_count) follows from the
            # log read and the unit only: with neither new since the last look there is nothing to
            # do (a GPU or health look changes the snapshot every second, not these).
            seen, seq, unit = self._history_seen, m.seq, m.last_unit()
            if seen is not None and seen[0] == seq and seen[1] is unit:
                return
            self._history_seen = (seq, unit)
            self.history_looks += 1
            s = m.facts()  # nothing here depends on the verdict: not judged every second
            if s.state in ("ready", "failed") and s.start_began is not None:
                mark = (round(s.start_began, 3), s.state)
                if mark != self._recorded:
                    self._recorded = mark
                    # Written for the starts to come (the next one's beginning is a new key below).
                    await asyncio.to_thread(h.record, s)
            if s.state == "waiting" and s.log_count == 0:
                return  # nothing read yet: the identity is not known
            key = (s.model, s.args_hash, s.start_began)
            if key != self._typical_key:
                self._typical_key = key
                # Only starts ready before this one began: once written, it is not its own history.
                typical = await asyncio.to_thread(h.typical, self.spec.name, self.spec.unit, s.model, s.args_hash,
                                                  before=s.start_began)
                if typical is not None:
                    self.context.emit(typical)

    async def _history_loop(self) -> None:
        while True:
            try:
                await self.sync_history()
            except Exception as exc:  # never let the history stop the probes
                if self.history is not None:
                    self.history.problem = f"history off: {type(exc).__name__}: {exc}"
                return
            if self.history is None or not self.history.ok:
                return
            await self.clock.sleep(self.history_every_s)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)
