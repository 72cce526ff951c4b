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

A failing probe degrades its own cell (a :class:`~probes.data.state.ProbeFailure` in the model) and
retries with backoff; it never stops the others. A value a probe cannot parse is a failure of that
probe (kind ``unparsable``, naming the column) while the rest of its data keeps coming. A probe task
that raises anyway (a bug) is supervised: its cell fails with kind ``crashed`` and the exception's
type and message, and the task is started again after a capped exponential backoff
(:meth:`HostWatcher._supervise`); the host's other probes keep running.

The watcher does not push snapshots: it calls
``on_change(watcher)`` (cheap, possibly many times a second) and consumers pull :meth:`state`
and :meth:`entries_after` at their own rate, which is how the dashboard coalesces per host.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from probes.fold import access
from probes.sources import download as download_probe
from probes.sources import gpu as gpu_probe
from probes.sources import health as health_probe
from probes.sources import unit as unit_probe
from probes.clock import Clock
from probes.fold.download import hub_repo_id, wanted
from probes.spec import DEFAULT_PORTS, HostSpec
from probes.store.history import History
from probes.logs.journal import RecordError, parse_record
from probes.fold.model import HostModel
from probes.transport.runner import ProbeError, Runner
from probes.data.state import (CONNECTION_KINDS, GpuApps, GpuOrphan, GpuOrphans, GpuProcess, GpuReading,
                               GpuSample, HostState, LogEntry, ProbeFailure, ProbeOk, Unparsable)

if TYPE_CHECKING:  # httpx loads rich at import when rich is installed; probes import it lazily
    import httpx

@dataclass(frozen=True, slots=True)
class HealthTarget:
    """Where the health probe goes: ``base_url`` + ``path``; ``tunnel`` when ``port`` is a port on
    the host's loopback that must be reached through the runner's port forward."""

    base_url: str
    path: str
    port: int
    tunnel: bool


#: Lists every PID in the cgroup ``$1`` and below: cgroup v2 (``/sys/fs/cgroup``), hybrid
#: (``/sys/fs/cgroup/unified``) or v1 (``/sys/fs/cgroup/systemd``). The path is an argument, never
#: spliced into the script. Exit 3 when no hierarchy has it.
CGROUP_PIDS_SCRIPT = (
    'for r in /sys/fs/cgroup/unified /sys/fs/cgroup /sys/fs/cgroup/systemd; do '
    'if [ -f "$r$1/cgroup.procs" ]; then find "$r$1" -name cgroup.procs -exec cat {} +; exit 0; fi; '
    'done; exit 3')

#: Real seconds after a GPU row with no further row before the first sample is shown as it is.
EARLY_GPU_S = 0.3
#: Seconds without a journal entry after which the watcher checks that ``journalctl -f`` has not
#: fallen behind the journal (systemd#25649), and seconds between the two looks that must agree.
JOURNAL_GUARD_S = 10.0
JOURNAL_RECHECK_S = 3.0
#: Seconds between looks (``journalctl -n 1``) while a follow that began with no entries has
#: delivered none: the unit's first entries may never come through it (systemd#25649).
JOURNAL_UNTRUSTED_POLL_S = 2.0
#: With no port or health URL configured, the first health look waits at most this many (real)
#: seconds for the log to name the port (or the engine) and, once the backlog is quiet, no longer.
LOG_KNOWN_WAIT_S = 5.0
#: Longest wait (seconds) in :meth:`HostWatcher.stop` for the probe tasks to end.
STOP_WAIT_S = 5.0
#: A restarted probe task that ran this many clock seconds before raising again starts its
#: backoff over (a rare crash is retried soon; a crash loop waits up to ``retry_max_s``).
CRASH_RESET_S = 300.0


async def _wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s`` seconds; True when it is set. Unlike
    ``asyncio.wait_for`` before Python 3.12, a cancellation that meets the event being set is never
    swallowed (that left a probe task running after :meth:`HostWatcher.stop`, and stop waiting)."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout_s)
    finally:
        waiter.cancel()
    return event.is_set()


class _Reopen(Exception):
    """The journal follow must be opened again (see :meth:`HostWatcher._journal_read`)."""

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"})


def health_target(spec: HostSpec, engine: str | None = None, port: int | None = None) -> HealthTarget:
    """Resolve ``spec.health_url`` (or the port) into a :class:`HealthTarget`.

    Args:
        spec: the host. engine: the engine detected from the log, used when the spec names none.
        port: the port the start's log says the server serves on; used when the spec names
            neither ``port`` nor ``health_url`` (before the engine's default port).

    Raises:
        ValueError: ``health_url`` is not an ``http://`` or ``https://`` URL with a host.
    """
    from urllib.parse import urlsplit

    if spec.health_url is None:
        port = spec.port or port or DEFAULT_PORTS.get(spec.engine or engine or "", 8000)
        return HealthTarget(f"http://127.0.0.1:{port}", "/health", port, True)
    parts = urlsplit(spec.health_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"health_url must be an http:// or https:// URL with a host: {spec.health_url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/health"
    if parts.query:
        path += "?" + parts.query
    host = parts.hostname
    if host.lower() in _LOOPBACK_NAMES or host.startswith("127."):
        return HealthTarget(f"{parts.scheme}://127.0.0.1:{port}", path, port, not spec.is_local)
    netloc = f"[{host}]" if ":" in host else host
    return HealthTarget(f"{parts.scheme}://{netloc}:{port}", path, port, False)


def journal_argv(unit: str, cursor: str | None, backlog: int, *, since: float | None = None,
                 user_unit: bool = False) -> list[str]:
    """``journalctl`` follow command for ``unit`` (``-o json -a -f``).

    Args:
        unit: the unit. cursor: resume after this journal cursor (``--after-cursor``); no entry is
            repeated or lost. backlog: without a cursor, at most this many entries of history
            (``-n``). since: without a cursor, only entries from this time on (epoch seconds,
            ``--since=@…``; the current start's beginning). user_unit: ``--user-unit`` instead of
            ``-u``.

    Returns:
        The argv, e.g. ``["journalctl", "-u", "sglang.service", "-o", "json", "-a", "-f",
        "--no-pager", "--since=@1741436938", "-n", "5000"]``. With ``--since`` and ``-n`` both,
        journalctl (systemd 252, measured) prints the newest ``-n`` entries not older than since.
    """
    argv = ["journalctl", "--user-unit" if user_unit else "-u", unit, "-o", "json", "-a", "-f", "--no-pager"]
    if cursor:
        argv += ["--after-cursor", cursor]
    else:
        if since is not None:
            argv.append(f"--since=@{int(since)}")
        argv += ["-n", str(backlog)]
    return argv


def journal_access_problem(stdout: bytes, stderr: bytes, returncode: int, *, sudo: bool) -> str | None:
    """Why the journal cannot be read, from ``journalctl -u UNIT -n 1 -o cat`` run as the probes
    run it (``-o json`` prints nothing at all for a user who may not read it, so a plain-format
    look detects it; the texts are :mod:`probes.fold.access`'s), or None when it can.

    Returns:
        One line for the operator with what to do, e.g. ``the SSH user may not read the system
        journal (No journal files were opened ...): add it to the systemd-journal (or adm) group,
        or set sudo = true with NOPASSWD for journalctl and systemctl``.
    """
    found = access_problem(stdout, stderr, returncode, sudo=sudo)
    return found[1] if found is not None else None


def access_problem(stdout: bytes, stderr: bytes, returncode: int | None, *,
                   sudo: bool) -> tuple[str, str] | None:
    """``(reason id, one line with the fix)`` when a ``systemctl``/``journalctl`` command's output
    says the host cannot be read (:func:`probes.fold.access.classify`), else None."""
    text = (stderr + b"\n" + stdout).decode("utf-8", "replace")
    reason = access.classify(text, returncode, sudo=sudo)
    if reason is None:
        return None
    return reason, access.reason_words(reason, access.first_line(stderr.decode("utf-8", "replace"))
                                       or access.first_line(text))


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
        gpu_source: sample GPUs with this (a :class:`~probes.sources.gpu.NvmlSource` for a local host)
            instead of streaming ``nvidia-smi`` through the runner.
        history: the start history: each finished start is written to it, and the typical
            durations of the current start's kind are read from it (see :meth:`sync_history`);
            None keeps no history.
        history_every_s: how often (clock seconds) the history task looks at the state.
        download_interval_s: how often a download's folder is measured (clock seconds).
    """

    def __init__(self, spec: HostSpec, runner: Runner, clock: Clock,
                 on_change: Callable[[HostWatcher], None] | None = None, *,
                 unit_interval_s: float = 1.0, health_interval_s: float = 2.0,
                 gpu_interval_s: float = 1.0, apps_interval_s: float = 5.0,
                 serving_every_s: float = 30.0, retry_s: float = 2.0, retry_max_s: float = 30.0,
                 gpu_source: gpu_probe.NvmlSource | None = None, history: History | None = None,
                 history_every_s: float = 1.0,
                 download_interval_s: float = download_probe.SAMPLE_INTERVAL_S) -> None:
        self.spec = spec
        self.runner = runner
        self.clock = clock
        self.on_change = on_change
        self.model = HostModel(spec.name, spec.unit, spec.engine, stall_after=dict(spec.stall_after_s))
        self.cursor: str | None = None
        #: times the journal follow was reopened because it had fallen behind (systemd#25649)
        self.journal_reopened = 0
        self._journal_rx = 0.0  # clock time of the last line the follow delivered
        self._journal_delivered = False
        self.unit_interval_s = unit_interval_s
        self.health_interval_s = health_interval_s
        self.gpu_interval_s = gpu_interval_s
        self.apps_interval_s = apps_interval_s
        self.serving_every_s = serving_every_s
        self.retry_s = retry_s
        self.retry_max_s = retry_max_s
        self.gpu_source = gpu_source
        self.download_interval_s = download_interval_s
        #: (MainPID, InvocationID) the hub cache was found for, and the folder (None: unknown).
        self._hub_cache: tuple[tuple[int | None, str | None], str | None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: how many times each probe's task raised and was started again (:meth:`_supervise`)
        self.crashes: dict[str, int] = {}
        self._unit_seen = asyncio.Event()
        #: set once the log has said what it can about the health target (engine, port), or can't
        self._log_known = asyncio.Event()
        self._uuid_index: dict[str, int] = {}
        self.history = history
        self.history_every_s = history_every_s
        self._history_lock = asyncio.Lock()
        self._recorded: tuple[float, str] | None = None
        self._typical_key: tuple[str | None, str | None, float | None] | None = None

    @property
    def name(self) -> str:
        """The host's name."""
        return self.spec.name

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
        return ((m._unit is not None or m.failing("unit"))
                and (m.seq > 0 or self._journal_open or m.failing("journal"))
                and ((m._gpus is not None and (m._gpu_apps is not None or m.failing("gpu_apps")))
                     or m.failing("gpu"))
                and (m._health is not None or m.failing("health")))

    _journal_open = False

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the probe tasks on the running loop."""
        if self._tasks:
            return
        for name, loop in (("journal", self._journal), ("unit", self._unit),
                           ("gpu", self._gpu), ("gpu_apps", self._gpu_apps), ("health", self._health),
                           ("download", self._download)):
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

        The cell gets a :class:`~probes.data.state.ProbeFailure` of kind ``crashed`` whose message is
        the exception as it is (``OverflowError: cannot convert float infinity to integer``), with
        the restart count and delay. Delays start at ``retry_s`` and double up to ``retry_max_s``;
        a loop that ran :data:`CRASH_RESET_S` clock seconds before raising starts over at
        ``retry_s``. :attr:`crashes` counts the crashes per probe. Cancellation is never caught.

        Args:
            probe: the cell (``journal``, ``unit``, ``gpu``, ``gpu_apps``, ``health``, ``download``).
            loop: the probe's loop (a coroutine function that runs until cancelled).
        """
        delay = self.retry_s
        while True:
            began = self.clock.now()
            try:
                await loop()
                return  # a loop that ends on its own has nothing more to do
            except Exception as exc:  # noqa: BLE001 - shown as what it is, then restarted
                if self.clock.now() - began >= CRASH_RESET_S:
                    delay = self.retry_s
                n = self.crashes.get(probe, 0) + 1
                self.crashes[probe] = n
                what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self._fail(probe, "crashed", f"the {probe} probe crashed ({what[:300]}); "
                           f"restart {n} in {delay:g} s")
                await self.clock.sleep(delay)
                delay = min(delay * 2, self.retry_max_s)

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
            s = self.state()
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
                    self._apply(typical)

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

    # --- plumbing --------------------------------------------------------------------------------

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def _apply(self, event: object) -> None:
        self.model.apply(event)
        self._changed()

    def _fail(self, probe: str, kind: str, message: str, reason: str = "") -> None:
        attempt = getattr(self.runner, "attempts", 0)
        self._apply(ProbeFailure(self.clock.now(), probe, kind, message,
                                 attempt if isinstance(attempt, int) else 0, reason))

    def _ok(self, probe: str, *, first: bool = False) -> None:
        """``probe`` got its data: its failure is over, and so is any lost connection (a quiet
        journal stream that reconnected has nothing else to say that it did). ``first``: also
        when the probe has never delivered (its knowledge becomes "read")."""
        if self.model.failing(probe) or self.model.unreachable() or (
                first and not self.model.has_read(probe)):
            self._apply(ProbeOk(self.clock.now(), probe))

    async def _retry(self, delay: float, kind: str = "command") -> float:
        if kind in CONNECTION_KINDS and kind not in ("auth", "host_key"):
            await self.clock.sleep(self.retry_s)  # the runner paces reconnects (backoff, cap 30 s)
            return self.retry_s
        await self.clock.sleep(delay)
        return min(delay * 2, self.retry_max_s)

    def _privileged(self, argv: list[str]) -> list[str]:
        """``argv`` as the host needs it: ``sudo -n`` in front when configured (system units)."""
        if self.spec.sudo and not self.spec.user_unit:
            return ["sudo", "-n", *argv]
        return argv

    # --- probes ------------------------------------------------------------------------------------

    async def _journal_since(self) -> float | None:
        """When the current start began (for ``--since`` on first connect): the unit's
        ``InactiveExitTimestamp`` (the activation's beginning), else ``ExecMainStartTimestamp``;
        None when unknown, and None in a restart loop (``NRestarts`` above 0, auto-restart, or
        failed), where the ``backlog`` is read so the loop's earlier starts are seen."""
        if not await _wait_event(self._unit_seen, 10.0):
            return None
        u = self.model._unit
        if u is None or u.load_state == "not-found":
            return None
        if u.n_restarts or u.sub_state == "auto-restart" or u.active_state == "failed":
            # A restart loop: every automatic restart passes through "inactive" (systemd 252,
            # measured), so InactiveExitTimestamp is only the last start. Read the backlog instead,
            # which holds the loop's earlier starts.
            return None
        t = u.inactive_exit_at or u.started_at
        return t - 1.0 if t is not None else None  # timestamps are printed in whole seconds

    async def _journal_access(self) -> tuple[str, str] | None:
        """Look once at the journal in a plain format, which (unlike ``-o json``) says when the
        user may not read it. Returns ``(reason id, the problem)``, or None."""
        unit_flag = "--user-unit" if self.spec.user_unit else "-u"
        done = await self.runner.run(self._privileged(
            ["journalctl", unit_flag, self.spec.unit, "-n", "1", "-o", "cat", "--no-pager"]), timeout=30.0)
        return access_problem(done.stdout, done.stderr, done.returncode, sudo=self.spec.sudo)

    async def _journal(self) -> None:
        delay = self.retry_s
        checked = False
        reopened = False
        while True:
            try:
                if not checked:
                    problem = await self._journal_access()
                    if problem is not None:
                        reason, words = problem
                        self._fail("journal", "permission" if reason != "no_systemd" else "command",
                                   f"{self.spec.name}: {words}", reason)
                        delay = await self._retry(delay)
                        continue
                    checked = True
                    self._ok("journal", first=True)  # readable: known as read even before an entry
                since = None if self.cursor else await self._journal_since()
                argv = self._privileged(journal_argv(self.spec.unit, self.cursor, self.spec.backlog,
                                                     since=since, user_unit=self.spec.user_unit))
                flag = "--user-unit" if self.spec.user_unit else "-u"
                # A follow that begins with nothing to show is not trusted (systemd#25649), except
                # right after a reopen for that reason (it had entries then).
                trusted = reopened or await self._journal_has_more(flag, since, on_error=True)
                reopened = False
                if not trusted:
                    self._log_known.set()  # nothing in the log yet: the default port it is
                self._journal_open = True
                self._journal_rx = self.clock.now()
                reader = asyncio.ensure_future(self._journal_read(argv, trusted))
                guard = asyncio.ensure_future(self._journal_guard(since, trusted))
                try:
                    finished, _ = await asyncio.wait({reader, guard}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in (reader, guard):
                        task.cancel()
                    await asyncio.wait({reader, guard}, timeout=STOP_WAIT_S)
                if reader not in finished or isinstance(reader.exception(), _Reopen):
                    # journalctl -f fell behind the journal (systemd 252 misses a unit's entries
                    # when it had none as the follow began, systemd#25649): reopen after the cursor.
                    self.journal_reopened += 1
                    reopened = isinstance(reader.exception(), _Reopen) if reader in finished else False
                    delay = self.retry_s
                    continue
                reader.result()  # a ProbeError from the stream
                if self._journal_delivered:
                    delay = self.retry_s
                # The stream ended while the connection held (a dropped link raises ``closed``):
                # journalctl itself stopped, on the host. The host is not stale, its journal is
                # not being read: say that, and retry with backoff.
                self._fail("journal", "command", f"{self.spec.name}: journalctl -f ended on the host; "
                           "the journal is not being followed (retrying)")
                kind = "command"
            except ProbeError as exc:
                self._fail("journal", exc.kind, exc.message)
                kind = exc.kind
            self._log_known.set()
            delay = await self._retry(delay, kind)

    async def _journal_read(self, argv: list[str], trusted: bool) -> None:
        """Read one ``journalctl -f`` stream into the model until it ends (the remote process is
        ended when this is cancelled).

        Args:
            argv: the follow command. trusted: the follow begins with entries to show; journalctl
                252 misses entries of a follow that began with none (systemd#25649), so when it
                did not, its first entry is not taken and :class:`_Reopen` is raised: the follow is
                opened again, now with entries to begin with.

        Raises:
            ProbeError: the stream failed. _Reopen: see above.
        """
        self._journal_delivered = False
        async with contextlib.aclosing(self.runner.stream(argv)) as lines:  # type: ignore[type-var]
            async for raw in lines:
                if not raw.strip() or raw.startswith(b"-- "):
                    continue
                if not trusted:
                    raise _Reopen
                self._journal_rx = self.clock.now()
                try:
                    rec = parse_record(raw)
                except RecordError:
                    self.model.bad_record(raw, self.clock.now())
                    self._changed()
                    continue
                if rec.cursor:
                    self.cursor = rec.cursor
                self.model.apply(rec)
                self._ok("journal")
                self._changed()
                self._journal_delivered = True
                if not self._log_known.is_set() and (self.model.reader.reading().port is not None or (
                        self.model.seq >= 30 and self.model.reader.engine is not None)):
                    self._log_known.set()

    async def _journal_guard(self, since: float | None, trusted: bool = True) -> None:
        """Return when the open ``journalctl -f`` has fallen behind the journal. A follow that is
        not ``trusted`` (it began with no entries) is given up as soon as the unit has an entry
        (looks every :data:`JOURNAL_UNTRUSTED_POLL_S`). Otherwise: after
        :data:`JOURNAL_GUARD_S` seconds without an entry, ``journalctl -n 1`` (after our cursor, or
        since the start) finds an entry, and :data:`JOURNAL_RECHECK_S` seconds later it still does
        and the stream has still delivered nothing. Failures of the look are ignored (the stream's
        own errors speak for the connection)."""
        flag = "--user-unit" if self.spec.user_unit else "-u"
        while not trusted:
            # A follow that began with no entries may deliver none at all (systemd#25649): look
            # every few seconds whether the unit has logged; then the follow is reopened.
            await self.clock.sleep(JOURNAL_UNTRUSTED_POLL_S)
            if await self._journal_has_more(flag, since):
                return
        while True:
            await self.clock.sleep(JOURNAL_GUARD_S)
            if self.clock.now() - self._journal_rx < JOURNAL_GUARD_S:
                continue
            seen = self._journal_rx
            if not await self._journal_has_more(flag, since):
                continue
            await self.clock.sleep(JOURNAL_RECHECK_S)
            if self._journal_rx == seen and await self._journal_has_more(flag, since):
                return

    async def _journal_has_more(self, flag: str, since: float | None, on_error: bool = False) -> bool:
        """Whether the journal holds an entry of the unit after the cursor (or since ``since``,
        or at all): one ``journalctl -n 1``. A look that fails answers ``on_error``."""
        argv = ["journalctl", flag, self.spec.unit, "-o", "json", "-a", "--no-pager", "-n", "1"]
        if self.cursor:
            argv += ["--after-cursor", self.cursor]
        elif since is not None:
            argv.append(f"--since=@{int(since)}")
        try:
            done = await self.runner.run(self._privileged(argv), timeout=30.0)
        except ProbeError:
            return on_error
        if done.returncode != 0:
            return on_error
        return any(line.lstrip().startswith(b"{") for line in done.stdout.splitlines())

    async def _unit(self) -> None:
        delay = self.retry_s
        argv = unit_probe.show_argv(self.spec.unit)
        if self.spec.user_unit:
            argv.insert(1, "--user")
        argv = self._privileged(argv)
        while True:
            try:
                done = await self.runner.run(argv, timeout=30.0)
                text = done.stdout.decode("utf-8", "replace")
                try:
                    read = unit_probe.read_show(text, self.clock.now())
                except ValueError as exc:
                    err = done.stderr.decode("utf-8", "replace").strip()
                    found = access_problem(done.stdout, done.stderr, done.returncode, sudo=self.spec.sudo)
                    reason, words = found if found is not None else ("", err.splitlines()[0][:200] if err else str(exc))
                    self._fail("unit", "permission" if reason.startswith("sudo_") else "command",
                               f"systemctl show: {words}", reason)
                    self._unit_seen.set()
                    delay = await self._retry(delay)
                    continue
            except ProbeError as exc:
                self._fail("unit", exc.kind, exc.message)
                self._unit_seen.set()
                delay = await self._retry(delay, exc.kind)
                continue
            self._apply(read.state)
            self._unparsable("unit", read.bad)
            self._unit_seen.set()
            delay = self.retry_s
            await self.clock.sleep(self.unit_interval_s)

    async def _gpu(self) -> None:
        if self.gpu_source is not None:
            await self._gpu_local()
            return
        delay = self.retry_s
        argv = gpu_probe.query_argv(loop_ms=int(self.gpu_interval_s * 1000))
        loop = asyncio.get_running_loop()
        while True:
            batch: list[GpuSample] = []
            bad: list[Unparsable] = []  # values of this batch's rows that could not be read
            junk: list[str] = []
            rows = 0
            kind = "command"
            early: asyncio.TimerHandle | None = None

            def show_early() -> None:
                # The first sample: how many GPUs there are is not known until the next sample
                # begins (one interval later); show what came, without learning a count from it.
                if batch and not self._gpu_count:
                    self._gpu_reading(list(batch), learn=False, bad=tuple(bad))

            try:
                async with contextlib.aclosing(self.runner.stream(argv)) as stream:  # type: ignore[type-var]
                    async for raw in stream:
                        line = raw.decode("utf-8", "replace").strip()
                        if not line:
                            continue
                        try:
                            row = gpu_probe.parse_query_row(line)
                        except gpu_probe.UnparsableValue as exc:
                            bad.append(exc.problem)  # a row, but its index cannot be read
                            continue
                        except ValueError:
                            junk.append(line)  # Xid notes between samples, or an error message
                            continue
                        g = row.sample
                        rows += 1
                        if early is not None:
                            early.cancel()
                            early = None
                        if batch and g.index <= batch[-1].index:
                            self._gpu_reading(list(batch), bad=tuple(bad))
                            batch.clear()
                            bad.clear()
                        batch.append(g)
                        bad.extend(row.bad)
                        if self._gpu_count and len(batch) == self._gpu_count:
                            self._gpu_reading(list(batch), bad=tuple(bad))
                            batch.clear()
                            bad.clear()
                        elif not self._gpu_count:
                            early = loop.call_later(EARLY_GPU_S, show_early)
                if early is not None:
                    early.cancel()
                if batch:
                    self._gpu_reading(list(batch), bad=tuple(bad))
                if rows == 0:
                    # No row at all: ask once more without the loop, for the exit status and
                    # stderr the stream does not carry (missing binary, driver mismatch, ...).
                    done = await self.runner.run(gpu_probe.query_argv(), timeout=60.0)
                    msg = gpu_probe.classify_error(
                        (done.stdout + b"\n" + done.stderr).decode("utf-8", "replace"), done.returncode)
                else:
                    msg = gpu_probe.classify_error("\n".join(junk[-5:]), 1) if junk else "nvidia-smi ended"
                self._fail("gpu", "command", msg)
            except ProbeError as exc:
                kind = "command" if exc.kind == "timeout" else exc.kind  # a slow nvidia-smi, not the link
                self._fail("gpu", kind, exc.message)
            finally:
                if early is not None:
                    early.cancel()
            delay = await self._retry(delay, kind)

    async def _gpu_local(self) -> None:
        """Sample local GPUs through NVML (blocking calls, in a thread) every ``gpu_interval_s``."""
        source = self.gpu_source
        assert source is not None
        delay = self.retry_s
        while True:
            try:
                reading = await asyncio.to_thread(source.sample, self.clock.now())
            except gpu_probe.GpuError as exc:
                self._fail("gpu", "command", str(exc))
                delay = await self._retry(delay)
                continue
            self._gpu_reading(list(reading.gpus))
            delay = self.retry_s
            await self.clock.sleep(self.gpu_interval_s)

    _gpu_count = 0

    def _gpu_reading(self, batch: list[GpuSample], *, learn: bool = True,
                     bad: tuple[Unparsable, ...] = ()) -> None:
        """Deliver one GPU sample; values that could not be read (``bad``) are None in it, and
        make the GPU cell fail with kind ``unparsable`` (the first one named) until a sample
        reads whole."""
        if learn:
            self._gpu_count = max(self._gpu_count, len(batch))
        for g in batch:
            if g.uuid:
                self._uuid_index[g.uuid] = g.index
        self._apply(GpuReading(self.clock.now(), tuple(batch)))
        self._unparsable("gpu", bad)

    def _unparsable(self, probe: str, bad: tuple[Unparsable, ...]) -> None:
        """``probe`` delivered; it fails with kind ``unparsable`` when some of its values could not
        be read (the message names one, a GPU's value first, and how many more), else it is OK."""
        if not bad:
            self._ok(probe)
            return
        first = next((b for b in bad if b.gpu is not None), bad[0])  # a GPU's value before a row's index
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        self._fail(probe, "unparsable", first.message + more)

    async def _gpu_apps(self) -> None:
        """List the processes holding GPU memory every ``apps_interval_s`` (one call at a time,
        each with a time limit: a call can take 2-30 s on hosts without persistence mode)."""
        argv = gpu_probe.compute_apps_argv()
        delay = self.retry_s
        while True:
            gpu_failure = self.model._failures.get("gpu")
            if self.model._gpus is None or (gpu_failure is not None and gpu_failure.kind != "unparsable"):
                await self.clock.sleep(self.gpu_interval_s)  # no GPU seen: nothing to attribute
                continue
            try:
                done = await self.runner.run(argv, timeout=60.0)
            except ProbeError as exc:
                if exc.kind == "timeout":  # nvidia-smi can be that slow without persistence mode
                    exc = ProbeError("command", "nvidia-smi --query-compute-apps took more than 60 s")
                self._fail("gpu_apps", exc.kind, exc.message)
                delay = await self._retry(delay, exc.kind)
                continue
            if done.returncode != 0:
                self._fail("gpu_apps", "command", gpu_probe.classify_error(
                    (done.stdout + b"\n" + done.stderr).decode("utf-8", "replace"), done.returncode))
                delay = await self._retry(delay)
                continue
            read = gpu_probe.read_compute_apps(done.stdout.decode("utf-8", "replace"), self._uuid_index)
            apps = read.apps
            delay = self.retry_s
            self._apply(GpuApps(self.clock.now(), apps))
            self._unparsable("gpu_apps", read.bad)
            try:
                orphans = await self._orphans(apps)
            except ProbeError:
                orphans = None  # the next look tries again; the apps themselves are shown
            if orphans is not None:
                self._apply(GpuOrphans(self.clock.now(), orphans))
            await self.clock.sleep(self.apps_interval_s)

    async def _orphans(self, apps: tuple[GpuProcess, ...]) -> tuple[GpuOrphan, ...] | None:
        """The processes of ``apps`` outside the unit's cgroup (read recursively, cgroup v2, hybrid
        or v1), with their command lines from ``ps``; None when the cgroup cannot be read."""
        u = self.model._unit
        if not apps:
            return ()
        if u is None or u.load_state == "not-found":
            return None
        inside: set[int] = set()
        if u.control_group:  # empty: the unit has no process at all (inactive, failed)
            done = await self.runner.run(["sh", "-c", CGROUP_PIDS_SCRIPT, "sh", u.control_group], timeout=30.0)
            if done.returncode != 0:
                return None
            inside = {int(w) for w in done.stdout.split() if w.isdigit() and len(w) <= 8}
        outside = [a for a in apps if a.pid not in inside]
        if not outside:
            return ()
        pids = sorted({a.pid for a in outside})
        ps = await self.runner.run(["ps", "-o", "pid=,args=", "-p", ",".join(map(str, pids))], timeout=30.0)
        commands: dict[int, str] = {}
        for line in ps.stdout.decode("utf-8", "replace").splitlines():
            head, _, args = line.strip().partition(" ")
            if head.isdigit() and len(head) <= 8:  # a PID (at most 2**22)
                commands[int(head)] = args.strip()
        # A PID that ps does not know is gone (nvidia-smi's list lags): never name it, so nothing
        # can kill an unrelated process that gets the number next.
        return tuple(GpuOrphan(a.pid, commands[a.pid], a.mem_mib, a.gpu_index) for a in outside if a.pid in commands)

    async def _health(self) -> None:
        import httpx

        delay = self.retry_s
        client: httpx.AsyncClient | None = None
        last_serving_check: float | None = None
        target: HealthTarget | None = None
        if self.spec.port is None and self.spec.health_url is None:
            # The port comes from the log (the engine's default, or the port the start names):
            # a first look before the log is read would ask the wrong port.
            await _wait_event(self._log_known, LOG_KNOWN_WAIT_S)
        try:
            while True:
                if client is not None and target is not None and target.tunnel and self.model.unreachable():
                    # The connection dropped: its port forward went with it. Forward again once
                    # the runner has reconnected.
                    await client.aclose()
                    client = None
                log_port = self.model.reader.reading().port
                engine = self.model.reader.engine if self.spec.engine is None else None
                if (self.spec.port is None and self.spec.health_url is None and self.spec.engine is None
                        and engine is None and log_port is None):
                    # No port is known: not configured, no engine and no port in the log (the
                    # journal may be unreadable). An answer, or none, on a guessed port says nothing
                    # of this unit's server: do not probe, say why.
                    if client is not None:
                        await client.aclose()
                        client, target = None, None
                    self._fail("health", "command", f"{self.spec.name}: no port known for the server (no port or "
                               "engine configured, none named in the log): set port = in hosts.toml")
                    await self.clock.sleep(self.health_interval_s)
                    continue
                want = health_target(self.spec, engine, log_port)
                if client is not None and want != target:
                    await client.aclose()  # the engine or the start's own port became known
                    client = None
                try:
                    if client is None:
                        target = want
                        if target.tunnel:
                            port = await self.runner.forward(target.port)
                            client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                                       transport=self.runner.http_transport())
                        else:
                            client = httpx.AsyncClient(base_url=target.base_url,
                                                       transport=self.runner.http_transport())
                except ProbeError as exc:
                    self._fail("health", exc.kind, exc.message)
                    delay = await self._retry(delay, exc.kind)
                    continue
                now = self.clock.now()
                healthy_before = self.model._health is not None and self.model._health.rung in ("healthy", "serving")
                check = healthy_before and (last_serving_check is None
                                            or now - last_serving_check >= self.serving_every_s)
                h = await health_probe.probe_health(client, now, serving_check=check, path=target.path)
                if target.tunnel and h.status is None:
                    # No HTTP answer through the tunnel: is it the server's port, or the SSH link?
                    # A frozen link looks like a server that does not answer until keepalives
                    # give up (about 12 s); a dropped one refuses the local end of the forward.
                    connected = getattr(self.runner, "connected", None)
                    if h.rung == "port_closed" and connected is not None and not connected():
                        await self.clock.sleep(self.health_interval_s)
                        continue
                    if h.rung != "port_closed":
                        try:
                            await self.runner.run(["true"], timeout=5.0)
                        except ProbeError as exc:
                            self._fail("health", exc.kind, exc.message)
                            delay = await self._retry(delay, exc.kind)
                            continue
                if check:
                    last_serving_check = now
                if h.rung not in ("healthy", "serving"):
                    last_serving_check = None
                elif not check and self.model._health is not None and self.model._health.rung == "serving":
                    # Between generation checks a healthy server keeps the rung it proved.
                    h = replace(h, rung="serving")
                self._ok("health")
                self._apply(h)
                delay = self.retry_s
                await self.clock.sleep(self.health_interval_s)
        finally:
            if client is not None:
                await client.aclose()

    async def _find_hub_cache(self) -> str | None:
        """The hub cache folder of the current process: ``hf_cache`` when configured, else from the
        unit's ``Environment=`` and its user's home (``getent passwd``), looked up once per process
        (MainPID, InvocationID). None when it cannot be known.

        Raises:
            ProbeError: the connection failed.
        """
        if self.spec.hf_cache:
            return self.spec.hf_cache
        u = self.model._unit
        key = (u.main_pid, u.invocation_id) if u is not None else (None, None)
        if self._hub_cache is not None and self._hub_cache[0] == key:
            return self._hub_cache[1]
        done = await self.runner.run(self._privileged(
            download_probe.unit_env_argv(self.spec.unit, user_unit=self.spec.user_unit)), timeout=30.0)
        env, user = download_probe.parse_unit_env(done.stdout.decode("utf-8", "replace"))
        if self.spec.user_unit:  # the SSH user's own manager: its home
            done = await self.runner.run(["sh", "-c", 'printf "%s\\n" "$HOME"'], timeout=30.0)
            home = done.stdout.decode("utf-8", "replace").strip() or None
        else:
            name = user or "root"
            done = await self.runner.run(["getent", "passwd", name], timeout=30.0)
            home = download_probe.home_from_passwd(done.stdout.decode("utf-8", "replace"))
            if home is None and name in ("root", "0"):
                home = "/root"
        cache = download_probe.hub_cache(env, home if home is None or home.startswith("/") else None)
        self._hub_cache = (key, cache)
        return cache

    async def _download(self) -> None:
        """Measure the model's folder in the hub cache every ``download_interval_s`` while the
        start downloads (:func:`probes.fold.download.wanted`), one command at a time, each with a time
        limit. A failure is this cell's only ("download"): a lost connection is left to the other
        probes to say, a slow ``du`` is a command failure, never a stale host."""
        sudo = False
        while True:
            s = self.state()
            if not wanted(s.state, s.phase, s.progress.phase if s.progress is not None else None,
                                         s.model):
                if self.model.failing("download") and not self.model.unreachable():
                    # That download is over. (Not while the host is out of reach: a ProbeOk says
                    # the connection works.)
                    self._apply(ProbeOk(self.clock.now(), "download"))
                await self.clock.sleep(self.unit_interval_s)
                continue
            repo = hub_repo_id(s.model)
            assert repo is not None
            path = ""
            try:
                cache = await self._find_hub_cache()
                if cache is None:
                    self._fail("download", "command", "the Hugging Face cache folder is not known (HF_HOME or "
                               "HF_HUB_CACHE is relative, or the user's home is unknown): set hf_cache for this host")
                    await self.clock.sleep(self.download_interval_s)
                    continue
                path = download_probe.repo_dir(cache, repo)
                argv = download_probe.sample_argv(path)
                done = await self.runner.run(["sudo", "-n", *argv] if sudo else argv,
                                             timeout=download_probe.SAMPLE_TIMEOUT_S)
                sample = download_probe.parse_sample(done.stdout.decode("utf-8", "replace"), self.clock.now(), path)
            except ProbeError as exc:
                if exc.kind == "timeout":
                    self._fail("download", "command",
                               f"du of {path or 'the cache'} took more than {download_probe.SAMPLE_TIMEOUT_S:.0f} s")
                elif exc.kind not in CONNECTION_KINDS:
                    self._fail("download", exc.kind, exc.message)
                await self.clock.sleep(self.download_interval_s)
                continue
            except ValueError as exc:
                err = done.stderr.decode("utf-8", "replace").strip().splitlines()
                self._fail("download", "command", f"{path}: {err[0][:200] if err else exc}")
                await self.clock.sleep(self.download_interval_s)
                continue
            if sample.status == "denied" and not sudo and self.spec.sudo and not self.spec.user_unit:
                sudo = True  # e.g. /root/.cache: look again through sudo -n at once
                continue
            if sample.status == "denied":
                self._fail("download", "permission", f"{path}: the SSH user may not read it"
                           + ("" if sudo else " (set sudo = true for this host, or hf_cache)"))
            else:
                self._ok("download")
                self._apply(sample)
            await self.clock.sleep(self.download_interval_s)
