#!/usr/bin/env python3
"""Benchmark the dashboard under a log flood: what does the UI cost on top of the watchers?

Usage::

    python3 bench/dashboard_bench.py [--seconds 60] [--hosts 32] [--rate 200] [--gpus 8] [--json OUT]
                                     [--view auto|cards|compact]
    python3 bench/dashboard_bench.py --quick            # 5 s per run, for trying things
    python3 bench/dashboard_bench.py --profile OUT.pstats [--seconds 20]   # cProfile the UI run only

Every run is a fresh child process of this interpreter (``sys.executable``), one after the other,
all of them watching ``--hosts`` simulated hosts (:class:`FloodRunner`), each host writing
``--rate`` journal lines a second (in bursts every ``--burst-ms``) and streaming ``--gpus`` rows of
``nvidia-smi`` a second, for ``--seconds`` seconds of real time:

* ``floor``: the load generator alone (every host's journal and GPU streams drained by a loop that
  only counts): what the fake hosts themselves cost, so it can be told apart from upwatch's cost;
* ``noui``: one :class:`~probes.watch.watcher.HostWatcher` per host (``WallClock``), as the dashboard makes
  them (same intervals), on one asyncio loop; ``on_change`` marks the host dirty in a set, as the
  app does, and nothing reads the snapshots;
* ``ui``: the dashboard, ``make_app(Config(hosts=...), FloodRunner factory, WallClock())`` run
  headless by Textual's ``App.run_test(size=(160, 48))``, its 10 Hz repaint timer and 1 Hz tick
  running as in normal use. Headless, Textual builds every screen update (layout, widget render,
  compositing into strips) but skips the last step, encoding the update as terminal escape
  sequences and writing it. ``--view`` sets the overview it shows (``auto``, the default: the
  cards while half of them fit the screen, else one row per host; ``cards``; ``compact``).

Measured in each child over the load window only (the hosts start writing when the window opens,
after imports, watcher set-up and the app's mount): CPU time (``time.process_time()``, all
threads; / wall time = percent of one core), the event loop's lag (a task sleeping 10 ms in a loop
records actual minus expected wake-up time; p50 / p99 / max), journal lines delivered to the
models (sum of ``HostState.log_count``: must be hosts x rate x seconds, 384,000 by default, or the
load did not happen; when upwatch cannot keep up, fewer are, and CPU time per delivered line is
then the figure that compares runs), ``nvidia-smi`` rows sent, and the app's repaints
(``app.repaints``: flushes that handed snapshots to the screens). Peak memory is the child's own peak RSS: ``ru_maxrss`` of
``getrusage(RUSAGE_SELF)`` read in the child at its end (the parent imports only the standard
library and ``probes``, so the ~20 MB a child inherits at fork is far below any child's figure),
with Linux's ``VmHWM`` (this process image's peak, reset at exec) as a cross-check.

Prints a table with the three runs, the ratio UI / no-UI of CPU time (also less the generator
floor, and per delivered line), PASS/MISS for the targets (UI run under 25 % of one core, under 300 MB, event
loop p99 lag under 50 ms), and writes everything to ``bench/out/dashboard_bench.json`` (or
``--json OUT``). Always exits 0: this is a report, not a test. An error raised while the app shuts
down after the window is recorded (``shutdown_error``), not fatal; one during the window is.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from probes.transport.runner import Completed, ProbeError  # noqa: E402  (after the path set-up)
from probes.transport.replay.journalctl import ALWAYS_FIELDS  # noqa: E402

TARGET_CPU_PCT = 25.0     # UI run, percent of one core
TARGET_RSS_MB = 300.0     # UI run, peak RSS
TARGET_LAG_P99_MS = 50.0  # UI run, event loop lag p99

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
LOG_FIXTURE = os.path.join(FIXTURES, "logs", "sglang-ok-03.log")
JOURNAL_FIXTURE = os.path.join(FIXTURES, "journal", "sglang-startup.jsonl")
GPU_FIXTURE = os.path.join(FIXTURES, "nvidia-smi", "query-gpu.h100x8-sglang-tp8.loop.csv")
SHOW_FIXTURE = os.path.join(FIXTURES, "systemctl-show", "active-running.gpu-node-1.derived.txt")

UNIT = "sglang.service"
PORT = 30000

# systemd 252's own records around a restart of the unit (src/core/job.c, unit.c; MESSAGE_IDs from
# systemd's catalog). "Started" is copied from JOURNAL_FIXTURE; the other three have the same
# shape (PID 1, _TRANSPORT=journal, UNIT=) with the words and ids systemd 252 writes.
_STOP_RECORDS = (
    ("Stopping sglang.service - SGLang server...", "de5b426a63be47a7b6ac3eaac82e2f6f", "job_emit_start_message",
     "src/core/job.c", "JOB_TYPE", "stop"),
    ("sglang.service: Deactivated successfully.", "7ad2d189f7e94e70a38c781354912448", "unit_log_success",
     "src/core/unit.c", None, None),
    ("Stopped sglang.service - SGLang server.", "9d1aaa27d60140bd96365438aad20286", "job_emit_done_message",
     "src/core/job.c", "JOB_TYPE", "stop"),
)

# Uvicorn colours its level name when it may (``use_colors``); a journal then stores the ESC bytes
# and ``journalctl -o json`` prints MESSAGE as an array of byte values.
_UVICORN_INFO = re.compile(r"^(\[[^\]]+\] )INFO:")


def _load_templates() -> tuple[dict[str, Any], dict[str, Any]]:
    """The journal fixture's first PID-1 record (systemd's "Started") and first stdout record of the
    server: every field and the key order are copied from them."""
    systemd = server = None
    with open(JOURNAL_FIXTURE, encoding="utf-8") as f:
        for row in f:
            rec = json.loads(row)
            if systemd is None and rec.get("_PID") == "1" and rec.get("UNIT") == UNIT:
                systemd = rec
            if server is None and rec.get("_TRANSPORT") == "stdout" and rec.get("_SYSTEMD_UNIT") == UNIT:
                server = rec
    if systemd is None or server is None:
        raise SystemExit(f"{JOURNAL_FIXTURE}: no systemd/server template record")
    return systemd, server


def _fixture_messages() -> list[str]:
    """The log fixture's lines, some uvicorn ones coloured (see :data:`_UVICORN_INFO`)."""
    with open(LOG_FIXTURE, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [_UVICORN_INFO.sub(lambda m: m.group(1) + "\x1b[32mINFO\x1b[0m:", s) for s in lines]


def _hex_id(*parts: object) -> str:
    """32 hex digits, stable for the same parts (ids such as _BOOT_ID, INVOCATION_ID)."""
    import hashlib

    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=16).hexdigest()


def _systemd_time(epoch: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(int(epoch)))


class Gate:
    """Opened once by the benchmark when the load window starts: hosts write nothing before."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.t0 = 0.0  # perf_counter at the opening

    def open(self) -> None:
        self.t0 = time.perf_counter()
        self.event.set()


class FloodRunner:
    """A fake GPU host whose server logs ``rate`` lines a second: the :class:`~probes.transport.runner.Runner`
    protocol, answering in the real formats.

    * ``stream(journalctl -u UNIT -o json -f ...)``: ``journalctl -o json`` records (fields and
      key order of a real systemd 252 record of ``tests/fixtures/journal/sglang-startup.jsonl``;
      ``MESSAGE`` as a byte array when it holds a control character, as journald does; cursors of
      the real ``s=;i=;b=;m=;t=;x=`` shape) for the lines of ``tests/fixtures/logs/sglang-ok-03.log``,
      cycled: every cycle is one start of the unit (systemd's Stopping / Deactivated / Stopped /
      Started records, then the server's lines under a new PID and invocation id). ``rate * burst_s``
      lines every ``burst_s`` seconds, paced on absolute deadlines from the gate's opening (a late
      burst catches up), ``rate * seconds`` lines in all, then the stream stays open and quiet.
      Records are made as they are sent (nothing is pre-built but each line's JSON-escaped text).
    * ``stream(nvidia-smi --query-gpu=... -lms MS)``: every ``MS`` ms one row per GPU, rows of
      ``tests/fixtures/nvidia-smi/query-gpu.h100x8-sglang-tp8.loop.csv`` cycled (this host's UUIDs).
    * ``run(systemctl show UNIT ...)``: ``tests/fixtures/systemctl-show/active-running.gpu-node-1.derived.txt``
      with the current start's ``MainPID`` and start times.
    * ``forward``/``http_transport``: a :class:`~probes.transport.replay.runner.ReplayRunner` whose server is healthy
      (``/health`` 200 empty body; ``/v1/models`` and ``/v1/completions`` in SGLang's shapes).
    """

    def __init__(self, host: str, gate: Gate, *, index: int = 0, rate: float = 200.0, seconds: float = 60.0,
                 burst_s: float = 0.1, gpus: int = 8, pattern: str = "restarts") -> None:
        from probes.clock import WallClock
        from probes.transport.replay.runner import ReplayRunner
        from probes.transport.replay.scenario import HealthFrame, Scenario

        self.host = host
        self.gate = gate
        self.rate = rate
        self.seconds = seconds
        self.burst_s = burst_s
        self.total = int(round(rate * seconds))
        self.sent = 0          # journal records sent
        self.gpu_rows = 0      # nvidia-smi rows sent
        self._closed = asyncio.Event()
        systemd, server = _load_templates()
        self._boot = _hex_id("boot", host)
        self._machine = _hex_id("machine", host)
        self._seqnum_id = _hex_id("seqnum", host)
        # __MONOTONIC_TIMESTAMP: the host's uptime in µs (the fixture's at its first record, then real time).
        self._mono0_us = 17_266_158_233 - time.monotonic_ns() // 1000
        self._seq = 0
        self._start_no = 0
        self._pid = 3207 + 10 * index
        self._started_at = time.time()
        self._systemd_tpl = systemd
        self._server_tpl = server
        # The fields the follow asked for (``--output-fields``; journalctl keeps the cursor, the
        # timestamps and _BOOT_ID whatever is asked), None for all.
        self._keep: frozenset[str] | None = None
        msgs = _fixture_messages()
        self._messages = [self._msg_json(m) for m in msgs]
        # pattern "serving": one start, then the fixture's own serving lines (SGLang's "Prefill
        # batch" line and uvicorn's POST /generate access line) cycled, as a busy server logs.
        self._pattern = pattern
        self._serving = [self._msg_json(m) for m in msgs if "Prefill batch" in m or '"POST /' in m]
        self._pos = 0
        self._server_prefix = b""
        self._pending = self._new_start(first=True)  # systemd's "Started", then the server's lines
        # GPU rows: the fixture's rows with this host's UUIDs (the last two hex digits are the index).
        with open(GPU_FIXTURE, encoding="utf-8") as f:
            rows = [r.rstrip("\n") for r in f if r.strip()]
        tag = f"{index:08x}"
        self._gpu_rows = [r.replace("GPU-00000000-", f"GPU-{tag}-", 1).encode() for r in rows]
        self._gpus = gpus
        self._gpu_pos = 0
        with open(SHOW_FIXTURE, encoding="utf-8") as f:
            self._show = f.read()
        scenario = Scenario(host=host, unit=UNIT, engine="sglang", port=PORT, model="Qwen/QwQ-32B",
                            start=time.time(), gpus=(), journal=(), unit_timeline=(), gpu_timeline=(),
                            health=(HealthFrame(0.0, 200),))
        self._http = ReplayRunner(scenario, WallClock())

    # --- journal records ---------------------------------------------------------------------------

    @staticmethod
    def _msg_json(text: str) -> bytes:
        from probes.transport.replay.scenario import journal_value

        return json.dumps(journal_value(text), ensure_ascii=False, separators=(",", ":")).encode()

    def _fields_prefix(self, tpl: dict[str, Any], drop: set[str], override: dict[str, Any]) -> bytes:
        """The record's constant fields, JSON, without the closing brace (key order of ``tpl``)."""
        keep = self._keep
        fields = {k: override.get(k, v) for k, v in tpl.items()
                  if k not in drop and (keep is None or k in keep)}
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()[:-1]

    def _ask_fields(self, argv: tuple[str, ...]) -> None:
        """Honour the follow's ``--output-fields=A,B`` from now on, as journalctl does."""
        asked = [a.split("=", 1)[1] for a in argv if a.startswith("--output-fields=")]
        keep = (frozenset(asked[-1].split(",")) | ALWAYS_FIELDS) if asked else None
        if keep == self._keep:
            return
        self._keep = keep

        def refilter(body: bytes) -> bytes:
            fields = json.loads(body + b"}")
            kept = {k: v for k, v in fields.items() if keep is None or k in keep}
            return json.dumps(kept, ensure_ascii=False, separators=(",", ":")).encode()[:-1]

        self._server_prefix = refilter(self._server_prefix)  # fields only dropped, never added:
        self._pending = [refilter(b) for b in self._pending]  # a follow asks for the same each time

    def _new_start(self, first: bool = False) -> list[bytes]:
        """Begin a new start of the unit; returns systemd's records for it (bodies without the
        cursor and timestamps): Stopping / Deactivated / Stopped of the previous start (not for the
        first), then Started."""
        self._start_no += 1
        if not first:
            self._pid += 1
        self._started_at = time.time()
        inv = _hex_id("inv", self.host, self._start_no)
        common = {"_HOSTNAME": self.host, "_BOOT_ID": self._boot, "_MACHINE_ID": self._machine}
        varying = {"MESSAGE", "__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP",
                   "_SOURCE_REALTIME_TIMESTAMP"}
        self._server_prefix = self._fields_prefix(
            self._server_tpl, varying,
            {**common, "_PID": str(self._pid), "_SYSTEMD_INVOCATION_ID": inv,
             "_STREAM_ID": _hex_id("stream", self.host, self._start_no)})
        systemd = []
        tpl = self._systemd_tpl
        if not first:
            old_inv = _hex_id("inv", self.host, self._start_no - 1)
            for msg, mid, func, cfile, k, v in _STOP_RECORDS:
                over = {**common, "INVOCATION_ID": old_inv, "MESSAGE_ID": mid, "CODE_FUNC": func,
                        "CODE_FILE": cfile}
                drop = set(varying)
                if k is None:
                    drop |= {"JOB_TYPE", "JOB_RESULT", "JOB_ID"}
                else:
                    over[k] = v
                    if func == "job_emit_start_message":
                        drop.add("JOB_RESULT")  # a job's start message has no result yet
                systemd.append(self._fields_prefix(tpl, drop, over) + b',"MESSAGE":' + self._msg_json(msg))
        systemd.append(self._fields_prefix(tpl, varying, {**common, "INVOCATION_ID": inv})
                       + b',"MESSAGE":' + self._msg_json(str(tpl["MESSAGE"])))
        return systemd

    def _stamp(self, body: bytes, realtime_us: int) -> bytes:
        self._seq += 1
        seq = self._seq
        mono = self._mono0_us + (time.monotonic_ns() // 1000)
        x = (seq * 0x9E3779B97F4A7C15 + realtime_us) & 0xFFFFFFFFFFFFFFFF
        cursor = f"s={self._seqnum_id};i={seq:x};b={self._boot};m={mono:x};t={realtime_us:x};x={x:016x}"
        return (body + f',"__CURSOR":"{cursor}","__REALTIME_TIMESTAMP":"{realtime_us}",'
                f'"__MONOTONIC_TIMESTAMP":"{mono}"}}'.encode())

    def _records(self, n: int) -> list[bytes]:
        """The next ``n`` journal lines (systemd's records around a restart count as lines)."""
        out: list[bytes] = []
        rt = time.time_ns() // 1000
        msgs = self._messages
        pending = self._pending
        while len(out) < n:
            if pending:
                body = pending.pop(0)
            elif self._pos == len(msgs):
                self._pos = 0
                if self._pattern == "serving":
                    msgs = self._messages = self._serving
                    continue
                pending = self._pending = self._new_start()
                continue
            else:
                body = self._server_prefix + b',"MESSAGE":' + msgs[self._pos]
                self._pos += 1
            out.append(self._stamp(body, rt + len(out)))
        return out

    # --- Runner protocol -----------------------------------------------------------------------------

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        argv = tuple(argv)
        if self._closed.is_set():
            raise ProbeError("closed", f"{self.host}: connection closed")
        if argv[:2] == ("systemctl", "show"):
            started = _systemd_time(self._started_at)
            text = re.sub(r"^MainPID=\d+$", f"MainPID={self._pid}", self._show, flags=re.M)
            text = text.replace("Sat 2025-03-08 12:28:58 UTC", started)
            return Completed(argv, 0, text.encode())
        if argv[:1] == ("journalctl",) and "-n" in argv:
            # The watcher's one-entry looks: the access check (``-o cat``) and whether the journal
            # has an entry to show (``-o json``). This journal always has: it writes from the gate.
            if "json" in argv:
                return Completed(argv, 0, self._stamp(self._server_prefix + b',"MESSAGE":' + self._messages[0],
                                                      time.time_ns() // 1000) + b"\n")
            return Completed(argv, 0, b"[2025-03-08 12:29:01] server_args=ServerArgs(...)\n")
        return Completed(argv, 127, b"", f"sh: 1: {argv[0] if argv else ''}: not found".encode())

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        return self._stream(tuple(argv))

    async def _stream(self, argv: tuple[str, ...]) -> AsyncIterator[bytes]:
        if self._closed.is_set():
            raise ProbeError("closed", f"{self.host}: connection closed")
        name = argv[0].rsplit("/", 1)[-1] if argv else ""
        if name == "journalctl" and "json" in argv and ("-f" in argv or "--follow" in argv):
            self._ask_fields(argv)
            async for line in self._journal():
                yield line
            return
        if name == "nvidia-smi" and "-lms" in argv:
            ms = int(argv[argv.index("-lms") + 1])
            async for line in self._gpu(ms / 1000.0):
                yield line
            return
        raise ProbeError("command", f"{self.host}: {' '.join(argv[:3])} is not simulated")

    async def _until(self, deadline: float) -> bool:
        """Sleep until perf_counter ``deadline``; False when the runner was closed meanwhile."""
        delay = deadline - time.perf_counter()
        if delay > 0:
            try:
                await asyncio.wait_for(self._closed.wait(), delay)
                return False
            except TimeoutError:
                pass
        else:
            # Late (the consumer is behind): still give the loop a turn between bursts, as a socket
            # delivers one read at a time, so one host catching up cannot hold the loop for seconds.
            await asyncio.sleep(0)
        return not self._closed.is_set()

    async def _wait_gate(self) -> bool:
        waiter = asyncio.ensure_future(self.gate.event.wait())
        closer = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({waiter, closer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (waiter, closer):
                t.cancel()
        return not self._closed.is_set()

    async def _journal(self) -> AsyncIterator[bytes]:
        if not await self._wait_gate():
            return
        k = 0
        per_burst = self.rate * self.burst_s
        while self.sent < self.total:
            if not await self._until(self.gate.t0 + k * self.burst_s):
                return
            due = min(self.total, int(round(per_burst * (k + 1))))
            for line in self._records(due - self.sent):
                self.sent += 1
                yield line
            k += 1
        await self._closed.wait()

    async def _gpu(self, interval: float) -> AsyncIterator[bytes]:
        if not await self._wait_gate():
            return
        k = 0
        rows = self._gpu_rows
        while True:
            if not await self._until(self.gate.t0 + k * interval):
                return
            for _ in range(self._gpus):
                self.gpu_rows += 1
                yield rows[self._gpu_pos]
                self._gpu_pos = (self._gpu_pos + 1) % len(rows)
            k += 1

    async def forward(self, remote_port: int) -> int:
        return await self._http.forward(remote_port)

    def http_transport(self) -> Any:
        return self._http.http_transport()

    async def close(self) -> None:
        self._closed.set()
        await self._http.close()


# --- the child: one run ------------------------------------------------------------------------------


class LagMonitor:
    """Sleeps ``interval`` seconds in a loop and records how late each wake-up was (seconds)."""

    def __init__(self, interval: float = 0.010) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        clock = time.perf_counter
        while True:
            t = clock()
            await asyncio.sleep(self.interval)
            self.samples.append(clock() - t - self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def summary(self) -> dict[str, float | int]:
        s = sorted(self.samples)
        if not s:
            return {"n": 0}

        def pct(p: float) -> float:
            return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))] * 1000.0

        return {"n": len(s), "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "max_ms": s[-1] * 1000.0,
                "mean_ms": sum(s) / len(s) * 1000.0}


def _peak_memory() -> dict[str, float | None]:
    import resource

    kb = 1024.0 if sys.platform == "darwin" else 1.0
    out: dict[str, float | None] = {
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kb / 1024.0, "vmhwm_mb": None,
        "vmrss_mb": None}
    try:
        with open("/proc/self/status") as f:
            for row in f:
                if row.startswith("VmHWM:"):
                    out["vmhwm_mb"] = int(row.split()[1]) / 1024.0
                elif row.startswith("VmRSS:"):
                    out["vmrss_mb"] = int(row.split()[1]) / 1024.0
    except OSError:
        pass
    return out


def _specs(hosts: int) -> tuple[Any, ...]:
    from probes.spec import HostSpec

    return tuple(HostSpec(f"gpu-node-{i + 1:02d}", UNIT, port=PORT) for i in range(hosts))


async def _child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    from probes.clock import WallClock

    gate = Gate()
    runners: dict[str, FloodRunner] = {}
    index = {spec.name: i for i, spec in enumerate(_specs(args.hosts))}

    def factory(spec: Any) -> FloodRunner:
        r = FloodRunner(spec.name, gate, index=index[spec.name], rate=args.rate, seconds=args.seconds,
                        pattern=args.pattern,
                        burst_s=args.burst_ms / 1000.0, gpus=args.gpus)
        runners[spec.name] = r
        return r

    specs = _specs(args.hosts)
    lag = LagMonitor(0.010)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    result: dict[str, Any] = {"mode": mode}

    async def window(before_close: Any = None) -> None:
        # Let every task reach its first wait (streams opened, waiting for the gate).
        for _ in range(5):
            await asyncio.sleep(0.05)
        rss_before = _peak_memory()
        ru0 = _rusage()
        c0 = time.process_time()
        if profiler is not None:
            profiler.enable()
        gate.open()
        lag.start()
        await asyncio.sleep(args.seconds)
        wall = time.perf_counter() - gate.t0
        c1 = time.process_time()
        ru1 = _rusage()
        if profiler is not None:
            profiler.disable()
        await lag.stop()
        result.update({
            "wall_s": wall, "cpu_s": c1 - c0, "cpu_pct": (c1 - c0) / wall * 100.0,
            "user_s": ru1[0] - ru0[0], "sys_s": ru1[1] - ru0[1],
            "lag": lag.summary(),
            "sent": sum(r.sent for r in runners.values()),
            "gpu_rows_sent": sum(r.gpu_rows for r in runners.values()),
            "rss_at_start_mb": rss_before["vmrss_mb"],
        })
        if before_close is not None:
            before_close()

    if mode == "floor":
        async def drain(r: FloodRunner, argv: list[str]) -> None:
            async for _ in r.stream(argv):
                pass

        from probes.sources import gpu as gpu_probe
        from probes.sources.journal import journal_argv

        tasks = []
        for spec in specs:
            r = factory(spec)
            tasks.append(asyncio.create_task(drain(r, journal_argv(UNIT, None, spec.backlog))))
            tasks.append(asyncio.create_task(drain(r, gpu_probe.query_argv(loop_ms=1000))))
        await window(lambda: result.update(delivered=result["sent"], repaints=None))
        for r in runners.values():
            await r.close()
        await asyncio.gather(*tasks, return_exceptions=True)

    elif mode == "noui":
        from probes.watch.watcher import HostWatcher
        from tui.config import Config

        cfg = Config(hosts=specs)
        dirty: set[str] = set()
        watchers = [HostWatcher(spec, factory(spec), WallClock(), lambda w: dirty.add(w.name),
                                unit_interval_s=cfg.unit_interval_s, health_interval_s=cfg.health_interval_s,
                                gpu_interval_s=cfg.gpu_interval_s) for spec in specs]
        tasks = [asyncio.create_task(w.run()) for w in watchers]

        def collect() -> None:
            result["delivered"] = sum(w.state().log_count for w in watchers)
            result["repaints"] = None
            result["sample"] = _sample(watchers[0].state())

        await window(collect)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    elif mode == "ui":
        from tui.app import make_app
        from tui.config import Config

        app = make_app(Config(hosts=specs), factory, WallClock())

        def collect() -> None:
            ws = list(app.watchers.values())
            result["delivered"] = sum(w.state().log_count for w in ws)
            result["repaints"] = app.repaints
            result["sample"] = _sample(ws[0].state())
            result["screen"] = type(app.screen).__name__
            result["cards"] = len(app.screen.query("HostCard"))
            result["view"] = "compact" if getattr(app.screen, "compact", False) else "cards"

        done = False
        try:
            async with app.run_test(size=(args.width, args.height)) as pilot:
                await pilot.pause()
                app.screen.set_view(args.view)  # --view: auto, cards or compact
                await pilot.pause()
                # Open the gate only when every card is composed, or every row is in the table
                # (the window starts after the mount).
                deadline = time.perf_counter() + 60.0
                while time.perf_counter() < deadline:
                    if app.screen.compact:
                        if app.screen.table.total == args.hosts:
                            break
                    else:
                        cards = app.screen.query("HostCard")
                        if len(cards) == args.hosts and all(c.query("#hc-times") for c in cards):
                            break
                    await asyncio.sleep(0.05)
                r0 = app.repaints
                await window(collect)
                result["repaints"] = app.repaints - r0
                done = True
                for w in app.watchers.values():  # end the flood first: a quicker, quieter exit
                    await w.stop()
        except Exception as exc:
            # An error while the app shuts down, after the window, does not void the figures
            # (it is reported); one during the window does.
            if not done:
                raise
            result["shutdown_error"] = f"{type(exc).__name__}: {exc}"
    else:
        raise SystemExit(f"unknown mode {mode!r}")

    result["expected"] = args.hosts * int(round(args.rate * args.seconds))
    result.update(_peak_memory())
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return result


def _sample(state: Any) -> dict[str, Any]:
    return {"host": state.host, "engine": state.engine, "state": state.state, "phase": state.phase,
            "starts": state.starts, "readiness": state.readiness, "log_count": state.log_count,
            "gpus": len(state.gpus.gpus) if state.gpus else 0}


def _rusage() -> tuple[float, float]:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


# --- the parent --------------------------------------------------------------------------------------


def run_child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix=f"dashboard_bench_{mode}_", suffix=".json", delete=False) as tmp:
        path = tmp.name
    argv = [sys.executable, os.path.abspath(__file__), "--child", mode, "--result", path,
            "--seconds", str(args.seconds), "--hosts", str(args.hosts), "--rate", str(args.rate),
            "--burst-ms", str(args.burst_ms), "--gpus", str(args.gpus),
            "--width", str(args.width), "--height", str(args.height), "--pattern", args.pattern,
            "--view", args.view]
    if args.profile:
        argv += ["--profile", args.profile]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{mode} run failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
        with open(path, encoding="utf-8") as f:
            res = json.load(f)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    res["process_s"] = elapsed
    if proc.stderr.strip():
        res["stderr_tail"] = proc.stderr[-2000:]
    return res


def machine() -> dict[str, Any]:
    """The machine as ``replay_bench.py`` describes it, plus the load average before the runs."""
    from replay_bench import machine as replay_machine  # bench/ is on sys.path when run as a script

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {**replay_machine(), "platform": platform.platform(), "loadavg_1m_before": load}


def git_state() -> dict[str, Any]:
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = git("status", "--porcelain", "--", "probes", "tui", "widgets")
    return {"commit": git("rev-parse", "--short", "HEAD") or None, "dirty": [r[3:] for r in dirty.splitlines()]}


def _fmt(v: Any, spec: str, dash: str = "-") -> str:
    return dash if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="load window per run (default 60)")
    ap.add_argument("--hosts", type=int, default=32, help="simulated hosts (default 32)")
    ap.add_argument("--rate", type=float, default=200.0, help="journal lines a second per host (default 200)")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per host (default 8)")
    ap.add_argument("--burst-ms", type=float, default=100.0, help="lines come in bursts this often (default 100)")
    ap.add_argument("--width", type=int, default=160, help="terminal width of the UI run (default 160)")
    ap.add_argument("--height", type=int, default=48, help="terminal height of the UI run (default 48)")
    ap.add_argument("--view", choices=("auto", "cards", "compact"), default="auto",
                    help="the overview the UI run shows: auto (cards while half of them fit the screen, "
                         "else one row per host), cards, or compact (default auto)")
    ap.add_argument("--pattern", choices=("restarts", "serving"), default="restarts",
                    help="restarts: the startup log cycled, every pass a new start (each card changes "
                         "state about twice a second: the worst case); serving: one start, then a busy "
                         "server's real serving lines (default restarts)")
    ap.add_argument("--quick", action="store_true", help="5-second runs, for trying things")
    ap.add_argument("--no-floor", action="store_true", help="skip the generator-only run")
    ap.add_argument("--json", metavar="OUT", help="where to write the report (default bench/out/dashboard_bench.json)")
    ap.add_argument("--profile", metavar="OUT.pstats",
                    help="run only the UI child under cProfile (load window only) and print its top functions")
    ap.add_argument("--child", choices=("floor", "noui", "ui"), help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds = 5.0
    if args.hosts < 1 or args.rate <= 0 or args.seconds <= 0:
        ap.error("--hosts, --rate and --seconds must be positive")

    if args.child:
        res = asyncio.run(_child(args.child, args))
        with open(args.result, "w", encoding="utf-8") as f:
            json.dump(res, f)
        return 0

    if args.profile:
        res = run_child("ui", args)
        import pstats

        print(f"UI run under cProfile: {res['cpu_pct']:.1f} % of a core (profiler overhead included), "
              f"{res['delivered']:,} lines, {res['repaints']} repaints")
        st = pstats.Stats(args.profile)
        st.strip_dirs().sort_stats("tottime").print_stats(25)
        st.sort_stats("cumulative").print_stats(40)
        return 0

    os.makedirs(OUT, exist_ok=True)
    mach, gst = machine(), git_state()
    modes = (["floor"] if not args.no_floor else []) + ["noui", "ui"]
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        print(f"  {mode}: {args.hosts} hosts x {args.rate:g} lines/s x {args.seconds:g} s ...",
              file=sys.stderr, flush=True)
        results[mode] = r = run_child(mode, args)
        print(f"    {r['cpu_pct']:.1f} % of a core, {r['maxrss_mb']:.1f} MB, "
              f"lag p99 {r['lag'].get('p99_ms', 0):.1f} ms, {r['delivered']:,}/{r['expected']:,} lines",
              file=sys.stderr, flush=True)

    ui, noui, floor = results["ui"], results["noui"], results.get("floor")
    ratio = ui["cpu_s"] / noui["cpu_s"] if noui["cpu_s"] > 0 else None
    # Under overload (lines not all delivered) CPU time saturates and says little; CPU time per
    # delivered line still compares the two runs.
    per_line_ratio = None
    if ui["delivered"] and noui["delivered"] and noui["cpu_s"] > 0:
        per_line_ratio = (ui["cpu_s"] / ui["delivered"]) / (noui["cpu_s"] / noui["delivered"])
    net_ratio = None
    if floor is not None and noui["cpu_s"] - floor["cpu_s"] > 0:
        net_ratio = (ui["cpu_s"] - floor["cpu_s"]) / (noui["cpu_s"] - floor["cpu_s"])
    targets = {
        f"UI run CPU < {TARGET_CPU_PCT:g} % of one core": ui["cpu_pct"] < TARGET_CPU_PCT,
        f"UI run peak RSS < {TARGET_RSS_MB:g} MB": ui["maxrss_mb"] < TARGET_RSS_MB,
        f"UI run event loop lag p99 < {TARGET_LAG_P99_MS:g} ms": ui["lag"].get("p99_ms", 1e9) < TARGET_LAG_P99_MS,
        "every line delivered in the window (UI and no-UI runs)": ui["delivered"] == ui["expected"]
        and noui["delivered"] == noui["expected"],
    }
    now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    labels = {"floor": "load generator only", "noui": "watchers, no UI", "ui": "dashboard (headless UI)"}
    rows = [f"dashboard benchmark, {now}: {args.hosts} hosts x {args.gpus} GPUs, {args.rate:g} journal lines/s "
            f"each (bursts every {args.burst_ms:g} ms), {args.seconds:g} s per run",
            f"machine: {mach['nproc']} CPUs, {mach['cpu']}, Python {mach['python']}; code at {gst['commit']}"
            f"{' + uncommitted changes' if gst['dirty'] else ''}; load average before: "
            f"{_fmt(mach['loadavg_1m_before'], '.2f')} (other processes share these CPUs)", "",
            f"{'run':<26}{'CPU s':>7}{'% core':>8}{'peak RSS MB':>13}{'lag p50':>9}{'p99':>9}{'max ms':>9}"
            f"{'lines delivered':>22}{'CPU us/line':>12}{'repaints':>10}"]
    for mode in modes:
        r = results[mode]
        lag = r["lag"]
        delivered = f"{r['delivered']:,} ({r['delivered'] / r['expected'] * 100:.1f} %)"
        per_line = r["cpu_s"] / r["delivered"] * 1e6 if r["delivered"] else None
        rows.append(f"{labels[mode]:<26}{r['cpu_s']:>7.2f}{r['cpu_pct']:>8.1f}{r['maxrss_mb']:>13.1f}"
                    f"{_fmt(lag.get('p50_ms'), '.1f'):>9}{_fmt(lag.get('p99_ms'), '.1f'):>9}"
                    f"{_fmt(lag.get('max_ms'), '.1f'):>9}{delivered:>22}{_fmt(per_line, '.0f'):>12}"
                    f"{_fmt(r.get('repaints'), 'd'):>10}")
    rows.append(f"(expected lines per run: {ui['expected']:,}; CPU = process_time over the window of "
                f"{ui['wall_s']:.1f} s; peak RSS = the child's ru_maxrss)")
    rows.append("")
    rows.append(f"ratio UI / no-UI, CPU time:                    {_fmt(ratio, '.2f')}x")
    if net_ratio is not None:
        rows.append(f"ratio UI / no-UI, CPU time less the generator: {net_ratio:.2f}x  "
                    f"(upwatch alone: {noui['cpu_pct'] - floor['cpu_pct']:.1f} % -> "
                    f"{ui['cpu_pct'] - floor['cpu_pct']:.1f} % of a core)")
    rows.append(f"ratio UI / no-UI, CPU time per delivered line: {_fmt(per_line_ratio, '.2f')}x")
    rows.append(f"the UI adds {ui['cpu_pct'] - noui['cpu_pct']:.1f} % of a core and "
                f"{ui['maxrss_mb'] - noui['maxrss_mb']:.1f} MB")
    s = ui.get("sample")
    if s:
        rows.append(f"{s['host']} at the end (UI run): engine={s['engine']} state={s['state']} phase={s['phase']} "
                    f"starts={s['starts']} readiness={s['readiness']} gpus={s['gpus']}; screen {ui.get('screen')} "
                    f"({ui.get('view')} view, --view {args.view}) with {ui.get('cards')} cards")
    rows.append("")
    rows.append("targets:")
    for name, ok in targets.items():
        rows.append(f"  {'PASS' if ok else 'MISS'}  {name}")
    print("\n".join(rows))

    report = {"date": now, "machine": mach, "git": gst,
              "load": {"hosts": args.hosts, "gpus": args.gpus, "rate": args.rate, "seconds": args.seconds,
                       "burst_ms": args.burst_ms, "size": [args.width, args.height], "view": args.view},
              "results": results, "ratios": {"ui/noui cpu": ratio, "ui/noui cpu less floor": net_ratio,
                         "ui/noui cpu per delivered line": per_line_ratio},
              "targets": {"cpu_pct_max": TARGET_CPU_PCT, "rss_max_mb": TARGET_RSS_MB,
                          "lag_p99_max_ms": TARGET_LAG_P99_MS,
                          "verdicts": {k: ("PASS" if v else "MISS") for k, v in targets.items()}}}
    path = args.json or os.path.join(OUT, "dashboard_bench.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nwrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
