#!/usr/bin/env python3
"""Benchmark journal latency over SSH: how late does upwatch show a new log line, next to plain ssh?

Usage::

    python3 bench/latency_bench.py [--count 200] [--gap-ms 20] [--json OUT]

Needs root, OpenSSH's sshd and ``systemd-journal-remote`` (the test host of ``tests/testhost.py``:
a real sshd on 127.0.0.1 whose ``journalctl`` is the real one reading a real journal file).

One test host, two followers of the same unit's journal, in this one asyncio process:

* **upwatch**: a :class:`~probes.watch.watcher.HostWatcher` (all four probes running, as the dashboard
  runs them, :class:`~probes.clock.WallClock`) on an :class:`~probes.transport.ssh.SshRunner` to the host;
  an entry counts as shown when ``on_change`` fires and ``watcher.entries_after(seq)`` holds it;
* **plain ssh**: ``ssh -F <ssh_config> testhost journalctl -u UNIT -o json -f -n 0`` (the OpenSSH
  client as a subprocess); an entry counts as shown when a reader task got its JSON line.

Then ``--count`` times: append one entry with a unique ``MESSAGE`` (``systemd-journal-remote``
started in a worker thread, so the event loop keeps running), taking ``time.perf_counter()`` just
before the append starts, and wait (10 s deadline) until both followers showed it; then
``--gap-ms`` of quiet. Each latency is from that instant to the moment it was shown, so the append
itself (spawning journal-remote, about 5-20 ms) is inside both figures, equally; its own time is
reported too. Warm-up entries first (until both followers show one, then three more), not counted.

Prints p50 / p99 / max of both and the ratios upwatch / plain, and PASS/MISS for the targets of
the issue (upwatch p50 within 1.5x of plain ssh; upwatch p99 under 250 ms). Writes every sample to
``bench/out/latency_bench.json`` (or ``--json OUT``). Always exits 0 unless the test host cannot
start: a report, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
for p in (ROOT, os.path.join(ROOT, "tests")):
    if p not in sys.path:
        sys.path.insert(0, p)

from probes.clock import WallClock  # noqa: E402  (after the path set-up)
from probes.spec import HostSpec  # noqa: E402
from probes.watch.watcher import HostWatcher  # noqa: E402
from testhost import TestHost, start_testhost  # noqa: E402

UNIT = "sglang.service"
TARGET_RATIO_P50 = 1.5   # upwatch p50 / plain ssh p50
TARGET_P99_MS = 250.0    # upwatch p99
DEADLINE_S = 10.0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values`` (any unit); NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


class Seen:
    """When each MESSAGE was first shown by one follower: ``times[message] = perf_counter()``."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.event = asyncio.Event()

    def saw(self, message: str) -> None:
        if message not in self.times:
            self.times[message] = time.perf_counter()
            self.event.set()

    async def wait_for(self, message: str, until: float) -> bool:
        """Wait until ``message`` was seen or ``until`` (perf_counter seconds) passed."""
        while message not in self.times:
            left = until - time.perf_counter()
            if left <= 0:
                return False
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), left)
            except TimeoutError:
                return message in self.times
        return True


async def plain_reader(proc: asyncio.subprocess.Process, seen: Seen) -> None:
    """Read ``journalctl -o json`` lines from the ssh subprocess and note each MESSAGE."""
    assert proc.stdout is not None
    while line := await proc.stdout.readline():
        try:
            msg = json.loads(line).get("MESSAGE")
        except ValueError:
            continue
        if isinstance(msg, str):
            seen.saw(msg)


async def measure(host: TestHost, count: int, gap_s: float) -> dict[str, Any]:
    """Run the two followers on ``host`` and time ``count`` appends. Returns the raw samples (ms)."""
    up_seen, plain_seen = Seen(), Seen()
    last = 0

    def on_change(w: HostWatcher) -> None:
        nonlocal last
        if w.model.seq == last:
            return  # a GPU, unit or health change: cheap to skip
        for e in w.entries_after(last):
            up_seen.saw(e.text)
        last = w.model.seq

    assert host.health is not None
    spec = HostSpec("bench", UNIT, port=host.health.port, ssh=host.target, backlog=0)
    watcher = HostWatcher(spec, host.runner(), WallClock(), on_change)
    proc = await asyncio.create_subprocess_exec(
        *host.ssh_argv("journalctl", "-u", UNIT, "-o", "json", "-f", "-n", "0"),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    reader = asyncio.create_task(plain_reader(proc, plain_seen))
    watcher.start()
    up: list[float] = []
    plain: list[float] = []
    append_ms: list[float] = []
    missed = {"upwatch": 0, "plain": 0}
    run = uuid.uuid4().hex[:8]
    try:
        # Warm-up: both followers start with -n 0, so entries appended before they follow are
        # never shown. Append until each showed one, then three more, none of them counted.
        until = time.perf_counter() + 3 * DEADLINE_S
        w = 0
        while True:
            mark = f"latency-bench {run} warm-up {w}"
            w += 1
            await asyncio.to_thread(host.append_log_lines, [mark])
            soon = min(until, time.perf_counter() + 0.5)
            if await up_seen.wait_for(mark, soon) and await plain_seen.wait_for(mark, soon):
                break
            if time.perf_counter() > until:
                err = b""
                if proc.returncode is not None and proc.stderr is not None:
                    err = await proc.stderr.read()
                raise RuntimeError(f"no warm-up entry shown by both within {3 * DEADLINE_S:g} s "
                                   f"(upwatch saw {len(up_seen.times)}, plain ssh {len(plain_seen.times)}; "
                                   f"ssh said {err.decode(errors='replace')!r}; watcher: {watcher.state()!r:.300})")
        for i in range(-3, count):  # three more warm-up entries (i < 0)
            mark = f"latency-bench {run} {i}"
            t0 = time.perf_counter()
            await asyncio.to_thread(host.append_log_lines, [mark])
            t_appended = time.perf_counter()
            until = t0 + DEADLINE_S
            ok_up = await up_seen.wait_for(mark, until)
            ok_plain = await plain_seen.wait_for(mark, until)
            if i >= 0:
                append_ms.append((t_appended - t0) * 1000)
                if ok_up:
                    up.append((up_seen.times[mark] - t0) * 1000)
                else:
                    missed["upwatch"] += 1
                if ok_plain:
                    plain.append((plain_seen.times[mark] - t0) * 1000)
                else:
                    missed["plain"] += 1
            await asyncio.sleep(gap_s)
    finally:
        await watcher.stop()
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()
        reader.cancel()
    return {"upwatch_ms": up, "plain_ms": plain, "append_ms": append_ms, "missed": missed}


def summary(samples: list[float]) -> dict[str, float]:
    """p50, p99 and max (ms) of ``samples``."""
    return {"p50": percentile(samples, 50), "p99": percentile(samples, 99), "max": max(samples, default=float("nan"))}


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--", "probes", "tests/testhost.py", "tests/sshd.py")
    return {"commit": git("rev-parse", "--short", "HEAD") or None, "dirty": [r[3:] for r in dirty.splitlines()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=200, help="entries timed (default 200)")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="quiet time after each entry (default 20 ms)")
    ap.add_argument("--json", default=os.path.join(OUT, "latency_bench.json"), help="where to write the results")
    args = ap.parse_args(argv)

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="uw-latency-") as tmp:
        host = start_testhost(__import__("pathlib").Path(tmp))
        try:
            raw = asyncio.run(measure(host, args.count, args.gap_ms / 1000))
        finally:
            host.stop()

    up, plain, app = summary(raw["upwatch_ms"]), summary(raw["plain_ms"]), summary(raw["append_ms"])
    ratios = {k: up[k] / plain[k] if plain[k] else float("nan") for k in ("p50", "p99", "max")}
    checks = {
        f"upwatch p50 within {TARGET_RATIO_P50}x of plain ssh": ratios["p50"] <= TARGET_RATIO_P50,
        f"upwatch p99 under {TARGET_P99_MS:g} ms": up["p99"] < TARGET_P99_MS,
        "every entry seen by both": raw["missed"] == {"upwatch": 0, "plain": 0},
    }
    print(f"journal latency over SSH, {args.count} entries, append start -> shown (ms)")
    print(f"{'':<22}{'p50':>9}{'p99':>9}{'max':>9}")
    for name, s in (("upwatch (HostWatcher)", up), ("plain ssh journalctl", plain),
                    ("  append alone", app)):
        print(f"{name:<22}{s['p50']:>9.1f}{s['p99']:>9.1f}{s['max']:>9.1f}")
    print(f"{'ratio upwatch/plain':<22}{ratios['p50']:>9.2f}{ratios['p99']:>9.2f}{ratios['max']:>9.2f}")
    if any(raw["missed"].values()):
        print(f"missed (not seen within {DEADLINE_S:g} s): {raw['missed']}")
    for what, ok in checks.items():
        print(f"{'PASS' if ok else 'MISS'}  {what}")

    result = {
        "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "args": vars(args), "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                                        "load_before": load_before},
        "git": git_state(), "upwatch": up, "plain": plain, "append": app, "ratio": ratios,
        "checks": checks, "samples": raw,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
