"""What :kbd:`K` offers to kill (:func:`orphan_pids`) and the pure logic of the safe restart's
"wait until the GPUs are free" (:class:`GpuReleaseWait`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from probes.clock import Clock
from probes.data.events import GpuProcess
from probes.data.state import HostState


def orphan_pids(state: HostState) -> list[tuple[int, str, int | None]]:
    """Processes holding GPU memory outside the unit: ``(pid, command, mem MiB)``, one per PID
    (memory summed over its GPUs), from the GPU-memory verdict's list (``state.gpu_orphans``:
    compute processes whose PIDs are not in the unit's cgroup, read recursively, so the engine's
    own workers such as ``sglang::scheduler_TP1`` never appear). Empty when the cgroup could not
    be read: nothing is offered for killing on a guess.
    """
    found: dict[int, tuple[str, int | None]] = {}
    for o in state.gpu_orphans or ():
        if o.pid <= 1:
            continue
        name, mem = found.get(o.pid, (o.command, 0))
        found[o.pid] = (name, None if mem is None or o.mem_mib is None else mem + o.mem_mib)
    return [(pid, name, mem) for pid, (name, mem) in found.items()]


@dataclass(frozen=True, slots=True)
class ReleaseStatus:
    """Where the wait for free GPUs stands.

    Attributes:
        state: ``waiting``, ``released`` or ``timed_out``.
        waited_s: clock seconds since the wait began.
        holders: the processes still holding memory on the unit's GPUs (latest sample after the stop).
        used_mib: GPU index → memory used (MiB, None unknown) on the unit's GPUs, latest sample.
        fresh: whether a GPU sample taken after the stop has been seen at all.
    """

    state: str
    waited_s: float
    holders: tuple[GpuProcess, ...] = ()
    used_mib: tuple[tuple[int, int | None], ...] = ()
    fresh: bool = False

    def describe(self) -> str:
        """One or more lines for the operator (host text: plain, never markup)."""
        if self.state == "released":
            return f"GPU memory released after {self.waited_s:.0f} s"
        if not self.fresh:
            head = f"no GPU sample since the stop yet ({self.waited_s:.0f} s)"
        elif self.holders:
            head = f"still held after {self.waited_s:.0f} s by:"
        else:
            used = ", ".join(f"GPU {i}: {m if m is not None else '?'} MiB" for i, m in self.used_mib)
            head = f"memory still in use after {self.waited_s:.0f} s ({used})"
        lines = [head]
        for p in self.holders:
            mem = f"{p.mem_mib} MiB" if p.mem_mib is not None else "? MiB"
            gpu = f"GPU {p.gpu_index}" if p.gpu_index is not None else p.gpu_uuid
            lines.append(f"  pid {p.pid} {p.name} ({mem} on {gpu})")
        return "\n".join(lines)


class GpuReleaseWait:
    """The safe restart's wait, as pure logic over snapshots: feed it states, it says where it stands.

    The unit's GPUs are those that held a compute process when the unit was stopped (all the host's
    GPUs when that is unknown). They count as released when a GPU sample taken after the stop shows
    no process on them; when the host cannot list processes (no ``gpu_apps``), when each of them
    uses at most ``idle_mib``.

    Args:
        before: the host's state just before the stop.
        stopped_at: clock time the stop command returned; only samples from then on count.
        timeout_s: how long to wait (clock seconds) before :meth:`observe` says ``timed_out``.
        idle_mib: memory a GPU may use and still count as free (driver/context overhead).
    """

    def __init__(self, before: HostState, stopped_at: float, timeout_s: float = 120.0,
                 idle_mib: int = 1024) -> None:
        self.stopped_at = stopped_at
        self.timeout_s = timeout_s
        self.idle_mib = idle_mib
        uuids: set[str] = set()
        if before.gpu_apps is not None:
            uuids = {p.gpu_uuid for p in before.gpu_apps.apps}
        if not uuids and before.gpus is not None:
            uuids = {g.uuid for g in before.gpus.gpus}
        self.gpus: frozenset[str] = frozenset(uuids)  # empty: every GPU of the host

    def _mine(self, uuid: str) -> bool:
        return not self.gpus or uuid in self.gpus

    def observe(self, state: HostState, now: float) -> ReleaseStatus:
        """Where the wait stands given the latest ``state`` at clock time ``now``."""
        waited = max(0.0, now - self.stopped_at)
        apps = state.gpu_apps if state.gpu_apps is not None and state.gpu_apps.time >= self.stopped_at else None
        gpus = state.gpus if state.gpus is not None and state.gpus.time >= self.stopped_at else None
        used = tuple((g.index, g.mem_used_mib) for g in gpus.gpus if self._mine(g.uuid)) if gpus else ()
        holders: tuple[GpuProcess, ...] = ()
        if apps is not None:
            holders = tuple(p for p in apps.apps if self._mine(p.gpu_uuid))
            released = not holders
        elif gpus is not None and state.gpu_apps is None:
            released = all(m is not None and m <= self.idle_mib for _, m in used)
        else:
            released = False
        fresh = apps is not None or gpus is not None
        if released:
            return ReleaseStatus("released", waited, (), used, fresh)
        timed_out = waited >= self.timeout_s
        return ReleaseStatus("timed_out" if timed_out else "waiting", waited, holders, used, fresh)


async def wait_for_release(wait: GpuReleaseWait, snapshot: Callable[[], HostState], clock: Clock,
                           poll_s: float = 1.0,
                           on_status: Callable[[ReleaseStatus], None] | None = None) -> ReleaseStatus:
    """Poll ``snapshot()`` every ``poll_s`` clock seconds until the GPUs are released or the wait
    times out; ``on_status`` hears every status (for a progress line). Returns the last status."""
    while True:
        status = wait.observe(snapshot(), clock.now())
        if on_status is not None:
            on_status(status)
        if status.state != "waiting":
            return status
        await clock.sleep(poll_s)


def pids_of(holders: Sequence[GpuProcess]) -> list[int]:
    """The distinct PIDs of ``holders``, in order."""
    return list(dict.fromkeys(p.pid for p in holders if p.pid > 1))
