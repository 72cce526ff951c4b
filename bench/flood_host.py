"""The fake GPU hosts of ``dashboard_bench.py``: :class:`FloodRunner`, a host behind the real
:class:`~probes.transport.runner.Runner` protocol whose server logs a given number of journal lines a
second (in the real ``journalctl -o json`` shape, from the fixtures), streams ``nvidia-smi`` rows and
answers ``systemctl show`` and HTTP; and :class:`Gate`, which holds every host silent until the
benchmark's load window opens. See ``bench/README.md`` for the load they make."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from probes.transport.runner import Completed, ProbeError
try:
    from probes.transport.replay.journalctl import ALWAYS_FIELDS
except ImportError:  # a checkout from before it was public (dashboard_bench.py --code OLD)
    ALWAYS_FIELDS = frozenset({"__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID"})

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


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
        self._sleepers: set[asyncio.Future[None]] = set()  # the waits of _until, woken by close()
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

    def stream_batches(self, argv: Sequence[str]) -> AsyncIterator[list[bytes]]:
        """The journal follow's lines a burst at a time (one read of a real stream: a burst of 20
        records of ~600 bytes is far below a read's 256 KiB); any other stream a line at a time."""
        return self._stream_batches(tuple(argv))

    @staticmethod
    def _is_follow(argv: tuple[str, ...]) -> bool:
        name = argv[0].rsplit("/", 1)[-1] if argv else ""
        return name == "journalctl" and "json" in argv and ("-f" in argv or "--follow" in argv)

    async def _stream_batches(self, argv: tuple[str, ...]) -> AsyncIterator[list[bytes]]:
        if self._is_follow(argv):
            if self._closed.is_set():
                raise ProbeError("closed", f"{self.host}: connection closed")
            self._ask_fields(argv)
            async for burst in self._journal():
                yield burst
            return
        async for line in self._stream(argv):
            yield [line]

    async def _stream(self, argv: tuple[str, ...]) -> AsyncIterator[bytes]:
        if self._closed.is_set():
            raise ProbeError("closed", f"{self.host}: connection closed")
        name = argv[0].rsplit("/", 1)[-1] if argv else ""
        if self._is_follow(argv):
            self._ask_fields(argv)
            async for burst in self._journal():
                for line in burst:
                    yield line
            return
        if name == "nvidia-smi" and "-lms" in argv:
            ms = int(argv[argv.index("-lms") + 1])
            async for line in self._gpu(ms / 1000.0):
                yield line
            return
        raise ProbeError("command", f"{self.host}: {' '.join(argv[:3])} is not simulated")

    async def _until(self, deadline: float) -> bool:
        """Sleep until perf_counter ``deadline``; False when the runner was closed meanwhile
        (:meth:`close` wakes every sleeper at once).

        (One future and one timer a wait, what ``asyncio.sleep`` costs: not ``wait_for`` on the
        closed event, which made a task, a timer and a cancellation every wait, a cost of the
        simulator that a real host's stream does not have.)"""
        delay = deadline - time.perf_counter()
        if delay > 0:
            loop = asyncio.get_running_loop()
            woken = loop.create_future()
            timer = loop.call_later(delay, _wake, woken)
            self._sleepers.add(woken)
            try:
                await woken
            finally:
                timer.cancel()
                self._sleepers.discard(woken)
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

    async def _journal(self) -> AsyncIterator[list[bytes]]:
        """The follow's records, one burst (a list) at a time."""
        if not await self._wait_gate():
            return
        k = 0
        per_burst = self.rate * self.burst_s
        while self.sent < self.total:
            due = min(self.total, int(round(per_burst * (k + 1))))
            if due <= self.sent:
                # Nothing to write in this burst (fewer lines a second than bursts): a real journal
                # is silent then, so the host does not wake up for it either.
                k += 1
                continue
            if not await self._until(self.gate.t0 + k * self.burst_s):
                return
            burst = self._records(due - self.sent)
            self.sent += len(burst)
            if burst:
                yield burst
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
        for woken in self._sleepers:
            if not woken.done():
                woken.set_result(None)
        await self._http.close()
