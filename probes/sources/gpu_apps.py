"""The GPU process probe: who holds GPU memory (``nvidia-smi --query-compute-apps``), and which of
them are outside the unit's cgroup (the orphans a restart would leave holding memory).

:func:`read_compute_apps` reads the list; :class:`GpuAppsSource` is the loop: every
``apps_interval_s`` once a GPU reading is there, one call at a time, each with a time limit (a call
can take 2-30 s on hosts without persistence mode), then the unit's cgroup and ``ps`` for the
processes outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.data.events import GpuApps, GpuOrphan, GpuOrphans, GpuProcess, Unparsable
from probes.sources.context import SourceContext
from probes.sources.gpu_cells import MAX_PID, as_int, cell_text, numeric_cell
from probes.sources.gpu_errors import classify_error
from probes.transport.runner import ProbeError

#: Lists every PID in the cgroup ``$1`` and below: cgroup v2 (``/sys/fs/cgroup``), hybrid
#: (``/sys/fs/cgroup/unified``) or v1 (``/sys/fs/cgroup/systemd``). The path is an argument, never
#: spliced into the script. Exit 3 when no hierarchy has it.
CGROUP_PIDS_SCRIPT = (
    'for r in /sys/fs/cgroup/unified /sys/fs/cgroup /sys/fs/cgroup/systemd; do '
    'if [ -f "$r$1/cgroup.procs" ]; then find "$r$1" -name cgroup.procs -exec cat {} +; exit 0; fi; '
    'done; exit 3')


@dataclass(frozen=True, slots=True)
class AppsRead:
    """A ``--query-compute-apps`` output read: the processes, and the cells that could not be read
    (a row whose pid cannot be read is left out; one whose memory cannot has ``mem_mib`` None)."""

    apps: tuple[GpuProcess, ...]
    bad: tuple[Unparsable, ...] = ()


#: The ``--query-compute-apps`` fields, in the order :func:`parse_compute_apps` reads them.
COMPUTE_FIELDS: tuple[str, ...] = ("pid", "process_name", "used_memory", "gpu_uuid")


def compute_apps_argv() -> list[str]:
    """The ``nvidia-smi`` command listing processes that hold GPU memory (one row per process and
    GPU): ``["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
    "--format=csv,noheader,nounits"]``."""
    return ["nvidia-smi", "--query-compute-apps=" + ",".join(COMPUTE_FIELDS), "--format=csv,noheader,nounits"]


def parse_compute_apps(text: str, uuid_index: dict[str, int] | None = None) -> tuple[GpuProcess, ...]:
    """The processes of :func:`read_compute_apps` (what could not be read left out or None)."""
    return read_compute_apps(text, uuid_index).apps


def read_compute_apps(text: str, uuid_index: dict[str, int] | None = None) -> AppsRead:
    """Parse the :func:`compute_apps_argv` output.

    Format of ``nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid
    --format=csv,noheader,nounits`` (fixtures ``tests/fixtures/nvidia-smi/compute-apps.*.csv``): ``51873,
    sglang::scheduler_TP0, 73072, GPU-…``. No process: empty output, exit 0. The name is what
    ``/proc/PID/cmdline`` shows (engines set titles) and may hold commas, so the row is read
    outside-in. Memory is MiB; ``[N/A]`` (Windows WDDM, restricted containers) gives None, and so
    does ``[Insufficient Permissions]`` as a name (kept as the name text).

    Args:
        text: stdout. uuid_index: GPU uuid → index from the last ``--query-gpu`` sample, so each
            process gets its GPU's index (None when the uuid is unknown).

    Returns:
        The processes in output order (lines that are not rows are skipped) and the cells that
        could not be read: a pid of 0 or over :data:`MAX_PID` leaves its row out (it names no
        process that could be acted on); a memory cell that is not a size in range is None.
    """
    out = []
    bad: list[Unparsable] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().split(",")]
        if len(cells) < 4 or not (cells[0].isascii() and cells[0].isdigit()):
            continue
        if len(cells[0]) > 8 or not 0 < int(cells[0]) <= MAX_PID:
            bad.append(Unparsable("pid", cell_text(cells[0]), f"not a process id (1..{MAX_PID})"))
            continue
        uuid = cells[-1]
        name = ", ".join(cells[1:-2])
        out.append(GpuProcess(pid=int(cells[0]), name=name, mem_mib=as_int(numeric_cell(cells[-2], "used_memory", bad)),
                              gpu_uuid=uuid, gpu_index=(uuid_index or {}).get(uuid)))
    return AppsRead(tuple(out), tuple(bad))


class GpuAppsSource:
    """The GPU process probe's loop (the ``gpu_apps`` cell): see the module docstring. Waits while
    no GPU reading is there, or the GPU probe fails for a reason other than an unparsable value
    (nothing to attribute). A timeout is a command failure (nvidia-smi can be that slow), never a
    lost link.

    Args:
        context: the host's :class:`~probes.sources.context.SourceContext`.
    """

    def __init__(self, context: SourceContext) -> None:
        self.context = context

    async def run(self) -> None:
        """List until cancelled."""
        ctx = self.context
        argv = compute_apps_argv()
        delay = ctx.cadence.retry_s
        while True:
            gpu_failure = ctx.failure("gpu")
            if ctx.gpus() is None or (gpu_failure is not None and gpu_failure.kind != "unparsable"):
                await ctx.clock.sleep(ctx.cadence.gpu_interval_s)  # no GPU seen: nothing to attribute
                continue
            try:
                done = await ctx.runner.run(argv, timeout=60.0)
            except ProbeError as exc:
                if exc.kind == "timeout":  # nvidia-smi can be that slow without persistence mode
                    exc = ProbeError("command", "nvidia-smi --query-compute-apps took more than 60 s")
                ctx.fail("gpu_apps", exc.kind, exc.message)
                delay = await ctx.retry(delay, exc.kind)
                continue
            if done.returncode != 0:
                ctx.fail("gpu_apps", "command", classify_error(
                    (done.stdout + b"\n" + done.stderr).decode("utf-8", "replace"), done.returncode))
                delay = await ctx.retry(delay)
                continue
            read = read_compute_apps(done.stdout.decode("utf-8", "replace"), ctx.signals.uuid_index)
            delay = ctx.cadence.retry_s
            ctx.emit(GpuApps(ctx.clock.now(), read.apps))
            ctx.delivered("gpu_apps", read.bad)
            try:
                orphans = await self.orphans(read.apps)
            except ProbeError:
                orphans = None  # the next look tries again; the apps themselves are shown
            if orphans is not None:
                ctx.emit(GpuOrphans(ctx.clock.now(), orphans))
            await ctx.clock.sleep(ctx.cadence.apps_interval_s)

    async def orphans(self, apps: tuple[GpuProcess, ...]) -> tuple[GpuOrphan, ...] | None:
        """The processes of ``apps`` outside the unit's cgroup (read recursively, cgroup v2, hybrid
        or v1), with their command lines from ``ps``; None when the cgroup cannot be read.

        Raises:
            ProbeError: a command could not be run.
        """
        runner = self.context.runner
        u = self.context.unit()
        if not apps:
            return ()
        if u is None or u.load_state == "not-found":
            return None
        inside: set[int] = set()
        if u.control_group:  # empty: the unit has no process at all (inactive, failed)
            done = await runner.run(["sh", "-c", CGROUP_PIDS_SCRIPT, "sh", u.control_group], timeout=30.0)
            if done.returncode != 0:
                return None
            inside = {int(w) for w in done.stdout.split() if w.isdigit() and len(w) <= 8}
        outside = [a for a in apps if a.pid not in inside]
        if not outside:
            return ()
        pids = sorted({a.pid for a in outside})
        ps = await runner.run(["ps", "-o", "pid=,args=", "-p", ",".join(map(str, pids))], timeout=30.0)
        commands: dict[int, str] = {}
        for line in ps.stdout.decode("utf-8", "replace").splitlines():
            head, _, args = line.strip().partition(" ")
            if head.isdigit() and len(head) <= 8:  # a PID (at most 2**22)
                commands[int(head)] = args.strip()
        # A PID that ps does not know is gone (nvidia-smi's list lags): never name it, so nothing
        # can kill an unrelated process that gets the number next.
        return tuple(GpuOrphan(a.pid, commands[a.pid], a.mem_mib, a.gpu_index) for a in outside if a.pid in commands)
