"""What a probe's loop gets from the watcher: :class:`SourceContext`.

Each source (:mod:`~probes.sources.unit`, :mod:`~probes.sources.journal`, :mod:`~probes.sources.gpu`,
:mod:`~probes.sources.gpu_apps`, :mod:`~probes.sources.health`, :mod:`~probes.sources.download`) is a
loop that runs until cancelled. It reaches the host through ``context.runner``, waits on
``context.clock``, delivers through :meth:`SourceContext.emit`, says what went wrong through
:meth:`SourceContext.fail` and backs off through :meth:`SourceContext.retry`; what it needs of the
state so far it reads through the narrow accessors here, never the model's insides.

The signals between loops are :class:`Signals`, made once with the context: the unit loop sets
``unit_seen`` (the journal waits for it to know when the start began), the journal sets
``log_known`` (the health loop waits for it to know the port), the GPU loop keeps ``uuid_index``
(the process list names GPUs by uuid).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from probes.clock import Clock
from probes.data.reading import Reading
from probes.data.events import (CONNECTION_KINDS, GpuReading, Health, ProbeFailure, ProbeOk, UnitState,
                                Unparsable)
from probes.data.state import HostState
from probes.fold.model import HostModel
from probes.spec import HostSpec
from probes.transport.runner import Runner

#: Longest wait (seconds) for cancelled tasks to end (the watcher's stop, the journal's follow).
STOP_WAIT_S = 5.0


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s`` (real) seconds; True when it is set. Unlike
    ``asyncio.wait_for`` before Python 3.12, a cancellation that meets the event being set is never
    swallowed (that left a probe task running after the watcher stopped, and its stop waiting)."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout_s)
    finally:
        waiter.cancel()
    return event.is_set()


@dataclass(slots=True)
class Cadence:
    """How often the probes look, in clock seconds; read at each use, so a change before (or
    while) the loops run takes effect at their next wait.

    Attributes:
        unit_interval_s: ``systemctl show`` period (also how often an idle download loop looks).
        health_interval_s: ``GET /health`` period. gpu_interval_s: ``nvidia-smi -lms`` period.
        apps_interval_s: ``--query-compute-apps`` period. serving_every_s: how often a healthy
            server is asked for a one-token generation. download_interval_s: how often a
            download's folder is measured.
        retry_s: first retry delay after a failure (doubles up to ``retry_max_s``).
    """

    unit_interval_s: float = 1.0
    health_interval_s: float = 2.0
    gpu_interval_s: float = 1.0
    apps_interval_s: float = 5.0
    serving_every_s: float = 30.0
    download_interval_s: float = 5.0
    retry_s: float = 2.0
    retry_max_s: float = 30.0


@dataclass(slots=True)
class Signals:
    """What one loop tells another, made once per watcher.

    Attributes:
        unit_seen: set once ``systemctl show`` answered (or failed) the first time.
        log_known: set once the log has said what it can of the health target (engine, port), or
            cannot say more (no entries, the journal failing).
        uuid_index: GPU uuid → index from the last GPU sample (the process list names uuids).
    """

    unit_seen: asyncio.Event = field(default_factory=asyncio.Event)
    log_known: asyncio.Event = field(default_factory=asyncio.Event)
    uuid_index: dict[str, int] = field(default_factory=dict)


class SourceContext:
    """One host's probes' shared ground: the host, the way to it, the clock, the model they feed.

    Args:
        spec: the host. runner: how commands reach it. clock: polls wait on it; failures and
            events are stamped with its time.
        model: the model the events are folded into (only read through the accessors below).
        on_change: called (synchronously, cheap) after each change of the model; None: nobody.
        cadence: the probes' periods (shared, so later changes are seen); default
            :class:`Cadence`'s.
    """

    def __init__(self, spec: HostSpec, runner: Runner, clock: Clock, model: HostModel,
                 on_change: Callable[[], None] | None = None, cadence: Cadence | None = None) -> None:
        self.spec = spec
        self.runner = runner
        self.clock = clock
        self.cadence = cadence if cadence is not None else Cadence()
        self.signals = Signals()
        self._model = model
        self._on_change = on_change

    # --- delivering -------------------------------------------------------------------------------

    def changed(self) -> None:
        """Tell the watcher's consumer that the model changed."""
        if self._on_change is not None:
            self._on_change()

    def emit(self, event: object) -> None:
        """Fold ``event`` into the model (:meth:`HostModel.apply`; ``TypeError`` for an unknown
        kind) and say so."""
        self._model.apply(event)
        self.changed()

    def fold(self, event: object) -> None:
        """Fold ``event`` into the model (:meth:`HostModel.apply`; ``TypeError`` for an unknown
        kind) without saying so: for a batch of events, which then calls :meth:`changed` once."""
        self._model.apply(event)

    def fold_bad_record(self, raw: bytes, time: float | None) -> None:
        """A journal line that is not a record, read at clock ``time``: kept in the log as it is
        (:meth:`HostModel.bad_record`), without saying so (as :meth:`fold`)."""
        self._model.bad_record(raw, time)

    def fail(self, probe: str, kind: str, message: str, reason: str = "") -> None:
        """``probe`` could not get its data: a :class:`ProbeFailure` of ``kind`` (an
        :data:`~probes.transport.runner.ERROR_KINDS` key) with ``message`` (one line) and the
        access ``reason`` id when there is one; stamped with the runner's reconnect attempts."""
        attempt = getattr(self.runner, "attempts", 0)
        self.emit(ProbeFailure(self.clock.now(), probe, kind, message,
                               attempt if isinstance(attempt, int) else 0, reason))

    def ok(self, probe: str, *, first: bool = False) -> None:
        """``probe`` got its data: its failure is over, and so is any lost connection (a quiet
        journal stream that reconnected has nothing else to say that it did). ``first``: also
        when the probe has never delivered (its knowledge becomes "read")."""
        m = self._model
        if m.failing(probe) or m.unreachable() or (first and not m.has_read(probe)):
            self.emit(ProbeOk(self.clock.now(), probe))

    def delivered(self, probe: str, bad: tuple[Unparsable, ...]) -> None:
        """``probe`` delivered; it fails with kind ``unparsable`` when some of its values could not
        be read (the message names one, a GPU's value first, and how many more), else it is OK."""
        if not bad:
            self.ok(probe)
            return
        first = next((b for b in bad if b.gpu is not None), bad[0])  # a GPU's value before a row's index
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        self.fail(probe, "unparsable", first.message + more)

    async def retry(self, delay: float, kind: str = "command") -> float:
        """Wait before the next try and return the delay for the one after: a lost connection
        (a :data:`~probes.data.events.CONNECTION_KINDS` kind but ``auth``/``host_key``) waits
        ``retry_s`` every time (the runner paces its own reconnects); anything else waits
        ``delay`` and doubles it, up to ``retry_max_s`` (clock seconds)."""
        c = self.cadence
        if kind in CONNECTION_KINDS and kind not in ("auth", "host_key"):
            await self.clock.sleep(c.retry_s)
            return c.retry_s
        await self.clock.sleep(delay)
        return min(delay * 2, c.retry_max_s)

    def privileged(self, argv: list[str]) -> list[str]:
        """``argv`` as the host needs it: ``sudo -n`` in front when configured (system units)."""
        if self.spec.sudo and not self.spec.user_unit:
            return ["sudo", "-n", *argv]
        return argv

    # --- reading the state so far -----------------------------------------------------------------

    def state(self) -> HostState:
        """The host's snapshot now (:meth:`HostModel.state` at the clock's now)."""
        return self._model.state(self.clock.now())

    def facts(self) -> HostState:
        """The host's snapshot as built, its verdict not judged (:meth:`HostModel.facts`): for a
        look that reads only the state, phase, progress or model, as the download look does."""
        return self._model.facts()

    def unit(self) -> UnitState | None:
        """The last ``systemctl show`` read, or None."""
        return self._model.last_unit()

    def gpus(self) -> GpuReading | None:
        """The last GPU reading, or None."""
        return self._model.last_gpus()

    def health(self) -> Health | None:
        """The last health answer, or None."""
        return self._model.last_health()

    def failure(self, probe: str) -> ProbeFailure | None:
        """``probe``'s current failure, or None."""
        return self._model.failure(probe)

    def failing(self, probe: str) -> bool:
        """Whether ``probe`` is failing now."""
        return self._model.failing(probe)

    def unreachable(self) -> bool:
        """Whether some probe lost the connection to the host (and it has not come back)."""
        return self._model.unreachable()

    def log_reading(self) -> Reading:
        """What the log says so far (port, phase, ...)."""
        return self._model.log_reading()

    def log_engine(self) -> str | None:
        """The engine the log names (or the one configured), or None."""
        return self._model.log_engine()

    def log_count(self) -> int:
        """How many log entries have been read (the model's ``seq``)."""
        return self._model.seq
