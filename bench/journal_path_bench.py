#!/usr/bin/env python3
"""What one journal line costs on its way from a runner's stream into the model, without a clock.

Usage::

    python3 bench/journal_path_bench.py [--lines 20000] [--burst 20] [--code DIR]   # CPU us per line
    python3 bench/journal_path_bench.py --ir [--lines 20000] [--code DIR]           # callgrind Ir per line
    python3 bench/journal_path_bench.py --ir --stage reader                         # the reader's share

The lines are ``dashboard_bench.py``'s: one :class:`~flood_host.FloodRunner` host's journal records
(``-o json``, the fields ``--output-fields`` asks for; the startup log cycled, a restart a cycle),
all made before the measurement. ``--stage``:

* ``path`` (default): a :class:`~probes.sources.journal.JournalSource` on a
  :class:`~probes.sources.context.SourceContext` and :class:`~probes.fold.model.HostModel`, as a
  :class:`~probes.watch.watcher.HostWatcher` builds them (``on_change`` adds the host to a set, as
  the dashboard does), follows a runner whose stream hands over ``--burst`` records per read, a
  turn of the event loop between reads (``stream_batches`` where the code has it, else
  ``stream``, one line at a time, as that code reads it);
* ``reader``: only :meth:`~probes.logs.reader.StartupReader.feed` of the same records' texts, as
  the model calls it (the part of the path that is not this benchmark's to cut);
* ``make``: only the making of the records, which every stage pays first (subtract it from the
  ``--ir`` figures of the other two).

Prints CPU microseconds per line (``time.process_time`` over the lines). ``--ir`` instead runs the
stage twice under callgrind (``valgrind --tool=callgrind``), for ``--lines`` and half of them, and
prints the instructions per line of the second half (imports and set-up cancel out): the figure a
loaded machine does not move. ``--code DIR`` measures another checkout's ``probes``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _records(lines: int) -> tuple[Any, list[bytes]]:
    from flood_host import FloodRunner, Gate

    from probes.logs.journal_json import READ_FIELDS
    from probes.sources.journal_cmd import journal_argv

    host = FloodRunner("gpu-node-01", Gate(), rate=200.0, seconds=lines / 200.0)
    host._ask_fields(tuple(journal_argv("sglang.service", None, 5000, fields=READ_FIELDS)))
    return host, host._records(lines)


class _Bursts:
    """A runner whose journal follow hands over ``records`` ``burst`` at a time (one read each);
    its looks are the flood host's."""

    def __init__(self, host: Any, records: list[bytes], burst: int, done: asyncio.Event) -> None:
        self.host = host.host
        self._flood = host
        self._reads = [records[i:i + burst] for i in range(0, len(records), burst)]
        self._done = done

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Any:
        return await self._flood.run(argv, timeout)

    async def stream_batches(self, argv: Sequence[str]) -> AsyncIterator[list[bytes]]:
        for batch in self._reads:
            await asyncio.sleep(0)
            yield batch
        self._done.set()
        await asyncio.Event().wait()

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        async for batch in self.stream_batches(argv):
            for line in batch:
                yield line

    async def forward(self, remote_port: int) -> int:
        raise NotImplementedError

    def http_transport(self) -> None:
        return None

    async def close(self) -> None:
        pass


async def _path(lines: int, burst: int) -> tuple[float, int]:
    from probes.clock import WallClock
    from probes.fold.model import HostModel
    from probes.sources import journal as journal_source
    from probes.sources.context import SourceContext
    from probes.spec import HostSpec

    host, records = _records(lines)
    done = asyncio.Event()
    runner = _Bursts(host, records, burst, done)
    spec = HostSpec("gpu-node-01", "sglang.service", port=30000)
    model = HostModel(spec.name, spec.unit)
    dirty: set[str] = set()
    ctx = SourceContext(spec, runner, WallClock(), model, lambda: dirty.add(spec.name))  # type: ignore[arg-type]
    ctx.signals.unit_seen.set()
    source = journal_source.JournalSource(ctx)
    c0 = time.process_time()
    task = asyncio.create_task(source.run())
    await done.wait()
    c1 = time.process_time()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return c1 - c0, model.seq


def _reader(lines: int) -> tuple[float, int]:
    from probes.logs.journal_json import parse_record
    from probes.logs.reader import StartupReader

    _, records = _records(lines)
    recs = [parse_record(r) for r in records]
    reader = StartupReader(None)
    c0 = time.process_time()
    for seq, rec in enumerate(recs, 1):
        for text in rec.texts:
            reader.feed(text, seq, stamp=rec.stamp, ident=rec.ident, systemd=rec.systemd,
                        invocation=rec.invocation)
    return time.process_time() - c0, len(recs)


def _ir(args: argparse.Namespace) -> int:
    def run(lines: int) -> int:
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                os.path.abspath(__file__), "--lines", str(lines), "--burst", str(args.burst),
                "--stage", args.stage, "--code", args.code]
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        m = re.search(r"Collected : (\d+)", out.stderr)
        if m is None:
            raise SystemExit(f"no callgrind total in:\n{out.stderr[-2000:]}")
        return int(m.group(1))

    half = args.lines // 2
    a, b = run(half), run(args.lines)
    print(f"{args.code} {args.stage}: {(b - a) // (args.lines - half):,} Ir/line "
          f"(lines {half + 1}-{args.lines}, bursts of {args.burst})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=20000, help="journal lines (default 20000)")
    ap.add_argument("--burst", type=int, default=20, help="records per read of the stream (default 20)")
    ap.add_argument("--stage", choices=("path", "reader", "make"), default="path",
                    help="what is measured (default path)")
    ap.add_argument("--code", default=ROOT, help="the checkout whose probes are measured (default this one)")
    ap.add_argument("--ir", action="store_true", help="callgrind instructions per line instead of CPU time")
    args = ap.parse_args(argv)
    args.code = os.path.abspath(args.code)
    if args.ir:
        return _ir(args)
    sys.path.insert(0, args.code)
    if args.stage == "path":
        cpu, n = asyncio.run(_path(args.lines, args.burst))
    elif args.stage == "reader":
        cpu, n = _reader(args.lines)
    else:
        c0 = time.process_time()
        n = len(_records(args.lines)[1])
        cpu = time.process_time() - c0
    if n != args.lines:
        raise SystemExit(f"{n} of {args.lines} lines delivered")
    print(f"{args.code} {args.stage}: {cpu / n * 1e6:.2f} CPU us/line over {n:,} lines (bursts of {args.burst})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
