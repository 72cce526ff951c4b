#!/usr/bin/env python3
"""Where ``upwatch replay`` spends its time, stage by stage, without a profiler's overhead.

Usage::

    python3 bench/replay_stages.py LOG        # e.g. the log kept by `replay_bench.py --keep`

Each row runs the reading pipeline on the whole file up to one more stage (read, split into
lines, decode, ``frames``, ``parse``, the key-word matcher, the full reader), in this process,
and prints its wall time; the difference between two rows is that stage's cost. cProfile puts a
hook on every call and roughly doubles the run time, which inflates the share of small, hot
functions; this does not. A row whose API has changed is skipped with its error.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: python3 bench/replay_stages.py LOG", file=sys.stderr)
        return 2
    path = sys.argv[1]

    from probes.logs.engines import matcher_for
    from probes.sources.logfile import iter_lines
    from probes.logs.logline import decode, frames, parse
    from probes.logs.reader import StartupReader

    # The engine the full reader settles on, so the matcher row uses the same table.
    reader = StartupReader()
    with open(path, "rb") as f:
        for i, raw in enumerate(iter_lines(f)):
            reader.feed_bytes(raw)
            if i >= 20000:
                break
    engine = reader.reading().engine
    matcher = matcher_for(engine if engine != "unknown" else None)

    def s_read(f):
        for _ in f:
            pass

    def s_iter(f):
        for _ in iter_lines(f):
            pass

    def s_decode(f):
        for raw in iter_lines(f):
            decode(raw)

    def s_frames(f):
        for raw in iter_lines(f):
            frames(decode(raw))

    def s_parse(f):
        n = 0
        for raw in iter_lines(f):
            n += 1
            for fr in frames(decode(raw)):
                parse(n, fr)

    def s_match(f):
        n = 0
        match = matcher.match
        for raw in iter_lines(f):
            n += 1
            for fr in frames(decode(raw)):
                match(parse(n, fr).msg)

    def s_full(f):
        r = StartupReader()
        feed = r.feed_bytes
        for raw in iter_lines(f):
            feed(raw)
        r.reading()

    rows = [("for raw in open(path, 'rb')", s_read),
            ("iter_lines (readline(MAX_READ))", s_iter),
            ("+ decode", s_decode),
            ("+ frames", s_frames),
            ("+ parse", s_parse),
            (f"+ Matcher.match ({engine} table)", s_match),
            ("full StartupReader.feed_bytes + reading()", s_full)]
    with open(path, "rb") as f:
        n_lines = sum(1 for _ in f)
    print(f"{path}: {n_lines:,} lines; engine {engine}")
    print(f"{'stage (cumulative)':<44}{'wall s':>9}{'us/line':>9}{'stage s':>9}")
    prev = None
    for label, fn in rows:
        try:
            t0 = time.perf_counter()
            with open(path, "rb") as f:
                fn(f)
            dt = time.perf_counter() - t0
        except Exception as exc:  # an API that moved: report it, keep going
            print(f"{label:<44}  skipped: {type(exc).__name__}: {exc}")
            continue
        step = "" if prev is None else f"{dt - prev:9.2f}"
        print(f"{label:<44}{dt:9.2f}{dt / max(n_lines, 1) * 1e6:9.2f}{step}")
        prev = dt
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
