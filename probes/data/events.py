"""The events the probes deliver to the fold: GPU samples and processes, the unit's state, the
health rung, a probe's failure or recovery, a value that could not be parsed. Frozen values; a
field a source cannot give is ``None``, never ``0``. Times are epoch seconds taken at the source.
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one moment. Format of ``nvidia-smi --query-gpu=index,uuid,name,memory.used,
    memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit --format=csv,noheader,
    nounits`` (or the same values from NVML).

    Attributes:
        index: the GPU's index (may change across boots; ``uuid`` is the key).
        uuid: ``GPU-xxxxxxxx-...``.
        name: product name, e.g. ``NVIDIA H100 80GB HBM3``.
        mem_used_mib, mem_total_mib: memory in MiB, None when not available (``[N/A]``).
        util_pct: kernel-busy percent 0-100, None when not available (MIG).
        temp_c: degrees Celsius or None. power_w, power_limit_w: watts or None.
        note: a per-GPU problem as nvidia-smi wrote it (``[GPU requires reset]``), or None.
    """

    index: int
    uuid: str
    name: str
    mem_used_mib: int | None
    mem_total_mib: int | None
    util_pct: int | None
    temp_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    note: str | None = None

    @property
    def mem_fraction(self) -> float | None:
        """Used / total in [0, 1], or None when either is unknown."""
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return min(1.0, self.mem_used_mib / self.mem_total_mib)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One sample of every GPU on a host (``gpus`` in index order), taken at ``time``."""

    time: float
    gpus: tuple[GpuSample, ...]


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding GPU memory (one row of ``nvidia-smi --query-compute-apps``).

    Attributes:
        pid: the host PID. name: its ``process_name`` (the process title, e.g.
            ``sglang::scheduler_TP0``; host text). mem_mib: memory it holds on that GPU, MiB, or None
            when not available. gpu_uuid: the GPU's uuid. gpu_index: the GPU's index when known.
    """

    pid: int
    name: str
    mem_mib: int | None
    gpu_uuid: str
    gpu_index: int | None = None


@dataclass(frozen=True, slots=True)
class GpuApps:
    """All processes holding GPU memory on a host at ``time`` (epoch seconds)."""

    time: float
    apps: tuple[GpuProcess, ...]


@dataclass(frozen=True, slots=True)
class GpuOrphan:
    """A process holding GPU memory on the host that is not in the unit's cgroup.

    Attributes:
        pid: host PID. command: its command line (``ps -o args``; host text) or nvidia-smi's
            process name when ``ps`` did not know it. mem_mib: MiB it holds (None: not available).
        gpu_index: the GPU's index, or None when unknown.
    """

    pid: int
    command: str
    mem_mib: int | None
    gpu_index: int | None


@dataclass(frozen=True, slots=True)
class GpuOrphans:
    """The processes holding GPU memory outside the unit's cgroup, looked at ``time``."""

    time: float
    orphans: tuple[GpuOrphan, ...]


@dataclass(frozen=True, slots=True)
class UnitState:
    """The unit as ``systemctl show`` reports it (format of systemd 252; real captures in
    ``tests/fixtures/systemctl-show``).

    Attributes:
        time: when it was read (epoch seconds).
        unit: ``Id``, e.g. ``sglang.service``.
        load_state: ``loaded``, ``not-found``, ``masked``, ...
        active_state: ``active``, ``activating``, ``inactive``, ``failed``, ``deactivating``, ...
        sub_state: ``running``, ``auto-restart``, ``dead``, ``failed``, ...
        result: ``success``, ``exit-code``, ``signal``, ``oom-kill``, ``start-limit-hit``, ...
        n_restarts: ``NRestarts`` (automatic restarts since the last explicit start), or None.
        main_pid: ``MainPID``, None when 0.
        started_at: ``ExecMainStartTimestamp`` as epoch seconds, None when empty.
        active_since: ``ActiveEnterTimestamp`` as epoch seconds, None when empty.
        memory_bytes: ``MemoryCurrent`` in bytes, None for ``[not set]``.
        exec_main_code, exec_main_status: how the main process last ended (1 exited, 2 killed,
            3 dumped; the status is an exit code or a signal number), None when unknown.
        inactive_exit_at: ``InactiveExitTimestamp`` (when the current activation began, before
            any ``ExecStartPre``), epoch seconds, or None.
        started_monotonic_us: ``ExecMainStartTimestampMonotonic`` in microseconds since boot, or
            None (``0``: never started).
        invocation_id: ``InvocationID`` (32 hex digits, new for every start; empty before v232 or
            when never started → None).
        control_group: ``ControlGroup``, e.g. ``/system.slice/sglang.service``, or None.
    """

    time: float
    unit: str
    load_state: str
    active_state: str
    sub_state: str
    result: str = ""
    n_restarts: int | None = None
    main_pid: int | None = None
    started_at: float | None = None
    active_since: float | None = None
    memory_bytes: int | None = None
    exec_main_code: int | None = None
    exec_main_status: int | None = None
    inactive_exit_at: float | None = None
    started_monotonic_us: int | None = None
    invocation_id: str | None = None
    control_group: str | None = None

    @property
    def running(self) -> bool:
        """The unit has a process that may serve (``active`` or ``activating``, not auto-restart)."""
        return self.active_state in ("active", "activating", "reloading") and self.sub_state != "auto-restart"


@dataclass(frozen=True, slots=True)
class Health:
    """One HTTP probe of the server.

    Attributes:
        time: when it was taken (epoch seconds).
        rung: ``port_closed``, ``http_unhealthy``, ``healthy`` or ``serving`` (see :data:`RUNGS`).
        status: the HTTP status of ``/health``, or None when nothing answered.
        detail: one line for an operator: ``connection refused``, ``HTTP 503``, ``200 in 12 ms``.
        latency_s: seconds the health request took, or None.
    """

    time: float
    rung: str
    status: int | None = None
    detail: str = ""
    latency_s: float | None = None


#: :class:`ProbeFailure` kinds that mean the connection to the host, not what a command read: a
#: host with one is stale (its last known state is old); the others (``command``, ``permission``,
#: ``unparsable``, ``crashed``) are one probe's own trouble.
CONNECTION_KINDS = frozenset({"unreachable", "closed", "timeout", "auth", "host_key"})

#: :class:`ProbeFailure` kinds of a probe that asked nothing of the host: ``config`` (upwatch lacks
#: what it needs to ask, e.g. no port is known for the health check) and ``crashed`` (upwatch's own
#: task raised). Unlike the other kinds they are no evidence that the host answered, so they never
#: end another probe's connection failure.
NO_CONTACT_KINDS = frozenset({"config", "crashed"})


@dataclass(frozen=True, slots=True)
class ProbeFailure:
    """A probe could not get its data. ``probe`` is ``journal``, ``unit``, ``gpu``, ``gpu_apps``,
    ``health`` or ``download``; ``kind`` is a :class:`probes.transport.runner.ProbeError` kind, or ``unparsable`` (a
    value it read could not be parsed; the message names the column), ``crashed`` (its task
    raised and is being restarted; the message names the exception) or ``config`` (nothing could
    be asked: upwatch lacks what it needs, e.g. a port); ``message`` is host text
    (plain); ``attempt`` counts the failed connection attempts in a row (0: none yet, e.g. the
    link just dropped); ``reason`` says why the unit or journal cannot be read
    (:data:`probes.fold.access.REASONS`: ``sudo_missing``, ``sudo_refused``, ``no_systemd``,
    ``no_journal_access``), "" when not known."""

    time: float
    probe: str
    kind: str
    message: str
    attempt: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ProbeOk:
    """A probe that had failed delivers again."""

    time: float
    probe: str


@dataclass(frozen=True, slots=True)
class Unparsable:
    """A value a probe read but could not parse, named by its column: something no host prints
    (not a number, 309 digits, a negative size, a utilisation over 100 %).

    Attributes:
        column: the source's own name for it: an nvidia-smi field (``memory.used``, ``pid``) or a
            ``systemctl show`` property (``NRestarts``).
        cell: the cell's text, cut to 40 characters (host text: show it as plain text).
        why: a few words: ``not a number``, ``309 digits``, ``out of range 0..100``, …
        gpu: the row's GPU index (``nvidia-smi --query-gpu``) or None.
    """

    column: str
    cell: str
    why: str
    gpu: int | None = None

    @property
    def message(self) -> str:
        """One line for an operator: ``unparsable value in column memory.used of GPU 3: '1e309'
        (not a number)``."""
        where = f" of GPU {self.gpu}" if self.gpu is not None else ""
        return f"unparsable value in column {self.column}{where}: {self.cell!r} ({self.why})"


# --- the snapshot: what views render --------------------------------------------------------------
