#!/usr/bin/env python3
"""Benchmark ``upwatch replay --json`` on a large log against the floor of reading the same file.

Usage::

    python3 bench/replay_bench.py [--lines N] [--repeat R] [--keep] [--fixtures GLOB]

What it does:

1. Builds an N-line log (default 1,000,000) from ``tests/fixtures/logs/*.log``: every line of every
   fixture, files in sorted order, cycled in order until N lines. A line is the bytes up to ``\\n``
   (a ``\\r`` inside a line is kept, as upwatch sees it); every line ends with ``\\n``. The log goes
   to ``bench/out/`` (git-ignored) and is deleted at the end unless ``--keep``.
2. Times, each as its own child process with this interpreter (``sys.executable``), R times
   (default 3) round-robin, keeping the best (minimum) wall time:

   * ``python -c pass``: interpreter start, the fixed cost in every Python figure;
   * ``python -m tui replay --json <1-line log>``: upwatch's own fixed cost (start + imports);
   * ``python -m tui replay --json LOG``: the figure under test (stdout to a file, checked to be JSON);
   * ``for line in f: pass`` in text mode (``encoding='utf-8', errors='replace', newline='\\n'``);
   * ``for line in f: pass`` in binary mode (``open(path, 'rb')``), the closer floor: upwatch reads bytes;
   * ``wc -l LOG``.

   Each command runs under a fresh small launcher that forks it and reaps it with
   :func:`os.wait4`, which returns that one child's resource usage, so the peak RSS reported for
   upwatch is its own (``ru_maxrss``), not the largest of all children nor this script's size.
3. Prints a table, the ratios (wall time; wall time less interpreter start; CPU time) and PASS/MISS
   against the targets (upwatch within 16x of the bare text loop's wall time on the fixture-cycled
   log, within 6x on the serving log; upwatch's peak RSS under 150 MB), and writes everything to ``bench/out/replay_bench.json``. Always exits
   0: this is a report, not a test.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "logs")
FIXTURES_EXTRA = os.path.join(ROOT, "tests", "fixtures", "logs-extra")
#: The serving log of an engine begins with one of its starts (a whole fixture that ends ready; for
#: SGLang the start ``dashboard_bench.py`` cycles too), so the serving lines are read as a ready
#: server's.
SERVING_START = {"sglang": os.path.join(FIXTURES, "sglang-ok-03.log"),
                 "vllm": os.path.join(FIXTURES, "vllm-ok-01.log")}

TARGET_RATIO = 16.0      # upwatch wall time / bare text loop wall time, on the fixture-cycled log (issue 17)
TARGET_RATIO_SERVING = 6.0  # the same on the serving log (``--serving``)
TARGET_RSS_MB = 150.0    # upwatch peak RSS

TEXT_LOOP = (
    "import sys\n"
    "with open(sys.argv[1], encoding='utf-8', errors='replace', newline='\\n') as f:\n"
    "    for line in f:\n"
    "        pass\n"
)
BINARY_LOOP = (
    "import sys\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    for line in f:\n"
    "        pass\n"
)


def _fixture_lines(name: str) -> list[bytes]:
    """A fixture's lines, each without its ``\\n`` (a ``\\r`` inside a line stays)."""
    with open(name, "rb") as f:
        data = f.read()
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()  # the file's final newline, not an empty last line
    return parts


def serving_lines(files: list[str], engine: str | None = None) -> list[bytes]:
    """The lines of ``files`` that the reader itself reads as a serving server's: read while the
    reading of the file so far says ``ready`` (state and phase, the same start, before and after
    the line), beginning a message (an engine prefix: :attr:`Line.prefixed`), and changing nothing
    of the reading but its line count and last line. That is access log lines (health probes and
    answered requests), the engine's metrics lines (vLLM's ``Avg prompt throughput``), decode and
    prefill batch lines (SGLang), a model loaded on request (Ollama), warnings while serving. In
    file order, each file's in turn; with ``engine``, only of the files the reader reads as that
    engine's. A line behind a docker compose prefix (``voxtral-1  | ``) is taken without it: the
    start the log begins with has none, and one log is one server's (a unit's journal), not a
    start without prefixes followed by another service's lines (whose reader never saw a start)."""
    sys.path.insert(0, ROOT)
    import dataclasses

    from probes.data.reading import Reading
    from probes.logs.logline import COMPOSE_RE, frames, parse
    from probes.logs.reader import StartupReader
    from probes.sources.logfile import read_path

    def same(a: Reading, b: Reading) -> bool:  # the phases' durations run to the last timestamped line
        def bare(r: Reading) -> Reading:
            return dataclasses.replace(r, lines=0, last_line="", phases=tuple(
                dataclasses.replace(m, duration_s=None) for m in r.phases))
        return bare(a) == bare(b)

    compose = re.compile(COMPOSE_RE.pattern.encode())  # the service prefix parse() reads, on bytes
    out: list[bytes] = []
    for name in files:
        reader = StartupReader()
        before = reader.reading()
        if engine is not None and read_path(name).engine != engine:
            continue
        for raw in _fixture_lines(name):
            reader.feed_bytes(raw)
            after = reader.reading()
            pieces = frames(raw.decode("utf-8", "replace"))
            ln = parse(1, pieces[0]) if len(pieces) == 1 else None
            if before.state == before.phase == "ready" and same(before, after) and ln is not None and ln.prefixed:
                if ln.service is not None and ln.service_depth == 1 and (m := compose.match(raw)):
                    raw = raw[m.end():]
                out.append(raw)
            before = after
    return out


def build_log(path: str, n_lines: int, pattern: str = "*.log", serving: str | None = None) -> tuple[int, int, int]:
    """Write the benchmark log; returns (lines, bytes, fixture lines per cycle). ``serving`` (an
    engine): one of its starts (:data:`SERVING_START`), then only the serving lines of the fixtures
    of that engine (:func:`serving_lines`, of ``tests/fixtures/logs`` and
    ``tests/fixtures/logs-extra``), cycled to N lines in all."""
    dirs = (FIXTURES, FIXTURES_EXTRA) if serving else (FIXTURES,)
    files = sorted(f for d in dirs for f in glob.glob(os.path.join(d, pattern)))
    if not files:
        raise SystemExit(f"no fixture logs matching {pattern!r} in {FIXTURES}")
    picked = serving_lines(files, serving) if serving else [p for name in files for p in _fixture_lines(name)]
    if not picked:
        raise SystemExit(f"no serving lines in the fixture logs matching {pattern!r}")
    lines = [p + b"\n" for p in picked]
    cycle = len(lines)
    head = b"".join(p + b"\n" for p in _fixture_lines(SERVING_START[serving])) if serving else b""
    block = b"".join(lines)
    full, rest = divmod(max(0, n_lines - head.count(b"\n")), cycle)
    size = len(head)
    with open(path, "wb") as out:
        out.write(head)
        for _ in range(full):
            out.write(block)
            size += len(block)
        tail = b"".join(lines[:rest])
        out.write(tail)
        size += len(tail)
    return n_lines, size, cycle


# Each measured command runs under this small launcher (``python -S``: no site packages), which
# forks, execs the command and reaps it with wait4, whose rusage is that one child's. A fresh
# launcher per run matters: on Linux a child's ru_maxrss starts from what it inherited at fork
# (exec keeps the pre-exec peak), so reaping straight from this script (~15-30 MB after building the
# log) would floor every figure at this script's size. Through the launcher the floor is ~5 MB
# (see ``wc -l``'s figure; GNU time says wc itself peaks at ~2 MB), far below any Python process.
LAUNCHER = """
import os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
fd = os.open(out or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(fd, 1)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
print(wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def run_child(argv: list[str], stdout_path: str | None = None) -> dict:
    """Run one command to completion under a fresh launcher; its wall time and its own rusage."""
    res = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, stdout_path or "", *argv],
                         cwd=ROOT, stdout=subprocess.PIPE, check=True, text=True)
    wall, user, sys_s, maxrss, rc = res.stdout.split()
    kb = 1024.0 if sys.platform == "darwin" else 1.0  # ru_maxrss: KiB on Linux, bytes on macOS
    return {
        "wall_s": float(wall),
        "user_s": float(user),
        "sys_s": float(sys_s),
        "maxrss_mb": int(maxrss) / kb / 1024.0,
        "rc": int(rc),
    }


def measure(commands: list[tuple[str, str, list[str], str | None]], repeat: int) -> dict[str, dict]:
    """Run each command ``repeat`` times, round-robin (so a burst of load on a shared machine hits
    every command alike), and keep each one's best wall time; peak RSS is the largest of its runs."""
    runs: dict[str, list[dict]] = {key: [] for key, *_ in commands}
    for i in range(repeat):
        for key, label, argv, stdout_path in commands:
            r = run_child(argv, stdout_path)
            runs[key].append(r)
            print(f"  round {i + 1}/{repeat}  {label:<34} {r['wall_s']:8.3f} s  rss {r['maxrss_mb']:7.1f} MB"
                  f"  rc {r['rc']}", file=sys.stderr, flush=True)
    out = {}
    for key, label, argv, _ in commands:
        best = min(runs[key], key=lambda r: r["wall_s"])
        out[key] = {
            "label": label,
            "argv": argv,
            "wall_s": best["wall_s"],
            "user_s": best["user_s"],
            "sys_s": best["sys_s"],
            "cpu_s_min": min(r["user_s"] + r["sys_s"] for r in runs[key]),
            "maxrss_mb": max(r["maxrss_mb"] for r in runs[key]),
            "rc": max((r["rc"] for r in runs[key]), key=abs),
            "runs": runs[key],
        }
    return out


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for row in f:
                if row.startswith("model name"):
                    cpu = row.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
    }


def git_state() -> dict:
    """The commit measured, and whether the code under test had uncommitted changes."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = git("status", "--porcelain", "--", "probes", "tui", "widgets")
    return {"commit": git("rev-parse", "--short", "HEAD") or None,
            "dirty": [row[3:] for row in dirty.splitlines()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines in the generated log (default 1,000,000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept (default 3)")
    ap.add_argument("--keep", action="store_true", help="keep the generated log in bench/out/")
    ap.add_argument("--serving", nargs="?", const="sglang", choices=sorted(SERVING_START), metavar="ENGINE",
                    help="a serving log instead: one start of ENGINE (default sglang), then only the lines of its "
                         "fixtures the reader reads as a serving server's (access log, metrics, decode/prefill "
                         "batches; see serving_lines), cycled")
    ap.add_argument("--fixtures", default="*.log", metavar="GLOB",
                    help="which fixture logs to cycle (default *.log, all of them; e.g. 'vllm-*.log' "
                         "for a one-engine log)")
    args = ap.parse_args(argv)
    if args.lines < 1 or args.repeat < 1:
        ap.error("--lines and --repeat must be at least 1")

    os.makedirs(OUT, exist_ok=True)
    log = os.path.join(OUT, f"replay_{'serving_' + args.serving + '_' if args.serving else ''}{args.lines}.log")
    target = TARGET_RATIO_SERVING if args.serving else TARGET_RATIO
    kind = f"{args.serving} serving log" if args.serving else "fixture-cycled log"
    tiny = os.path.join(OUT, "replay_1line.log")
    up_out = os.path.join(OUT, "replay_bench.stdout.json")
    print(f"building {args.lines:,}-line log at {os.path.relpath(log, ROOT)} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    n_lines, n_bytes, cycle = build_log(log, args.lines, args.fixtures, args.serving)
    build_s = time.perf_counter() - t0
    build_log(tiny, 1)
    print(f"  {n_lines:,} lines, {n_bytes / 1e6:.1f} MB ({cycle} fixture lines per cycle) in {build_s:.2f} s",
          file=sys.stderr, flush=True)

    # Warm the page cache so the first timed reader does not pay for the disk.
    with open(log, "rb") as f:
        while f.read(1 << 20):
            pass

    py = sys.executable
    commands = [
        ("python_start", "python -c pass", [py, "-c", "pass"], None),
        ("upwatch_start", "upwatch replay --json (1 line)", [py, "-m", "tui", "replay", "--json", tiny], None),
        ("upwatch", "upwatch replay --json", [py, "-m", "tui", "replay", "--json", log], up_out),
        ("loop_text", "bare loop, text mode", [py, "-c", TEXT_LOOP, log], None),
        ("loop_binary", "bare loop, binary mode", [py, "-c", BINARY_LOOP, log], None),
    ]
    wc = shutil.which("wc")
    if wc:
        commands.append(("wc", "wc -l", [wc, "-l", log], None))
    try:
        results = measure(commands, args.repeat)
    finally:
        if not args.keep:
            for p in (log, tiny):
                try:
                    os.remove(p)
                except OSError:
                    pass

    reading = None
    try:
        with open(up_out, encoding="utf-8") as f:
            reading = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"warning: upwatch's output is not JSON: {exc}", file=sys.stderr)

    up = results["upwatch"]
    start = results["python_start"]["wall_s"]

    def ratio(a: str, b: str) -> float | None:
        if b not in results or results[b]["wall_s"] <= 0:
            return None
        return results[a]["wall_s"] / results[b]["wall_s"]

    def net_ratio(a: str, b: str) -> float | None:
        if b not in results:
            return None
        den = results[b]["wall_s"] - start
        return (results[a]["wall_s"] - start) / den if den > 0 else None

    def cpu_ratio(a: str, b: str) -> float | None:
        # CPU time is less disturbed than wall time by other load on a shared machine.
        if b not in results or results[b]["cpu_s_min"] <= 0:
            return None
        return results[a]["cpu_s_min"] / results[b]["cpu_s_min"]

    ratios = {
        "upwatch/loop_text": ratio("upwatch", "loop_text"),
        "upwatch/loop_binary": ratio("upwatch", "loop_binary"),
        "upwatch/wc": ratio("upwatch", "wc"),
        "upwatch/loop_text (net of python start)": net_ratio("upwatch", "loop_text"),
        "upwatch/loop_binary (net of python start)": net_ratio("upwatch", "loop_binary"),
        "upwatch/loop_text (CPU time, user+sys)": cpu_ratio("upwatch", "loop_text"),
        "upwatch/loop_binary (CPU time, user+sys)": cpu_ratio("upwatch", "loop_binary"),
    }
    targets = {
        f"upwatch/loop_text <= {target:g}x ({kind})": ratios["upwatch/loop_text"] is not None
        and ratios["upwatch/loop_text"] <= target,
        "upwatch peak RSS < 150 MB": up["maxrss_mb"] < TARGET_RSS_MB,
    }

    labels = {
        "python_start": "python -c pass (interpreter start)",
        "upwatch_start": "upwatch replay --json, 1-line log",
        "upwatch": "upwatch replay --json LOG",
        "loop_text": "bare loop, text mode",
        "loop_binary": "bare loop, binary mode",
        "wc": "wc -l LOG",
    }
    mach, gst = machine(), git_state()
    now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    rows = [f"replay benchmark, {now}: {n_lines:,} lines, {n_bytes / 1e6:.1f} MB "
            f"({kind}: tests/fixtures/logs{',logs-extra' if args.serving else ''}/{args.fixtures}), "
            f"best of {args.repeat}",
            f"machine: {mach['nproc']} CPUs, {mach['cpu']}, Python {mach['python']}; "
            f"code at {gst['commit']}{' + uncommitted changes' if gst['dirty'] else ''}", "",
            f"{'measurement':<38}{'wall s':>9}{'user s':>9}{'sys s':>8}{'peak RSS MB':>13}{'M lines/s':>11}"]
    for key, label in labels.items():
        if key not in results:
            continue
        r = results[key]
        rate = "" if key in ("python_start", "upwatch_start") else f"{n_lines / r['wall_s'] / 1e6:.2f}"
        rows.append(f"{label:<38}{r['wall_s']:>9.3f}{r['user_s']:>9.3f}{r['sys_s']:>8.3f}"
                    f"{r['maxrss_mb']:>13.1f}{rate:>11}")
    rows.append("(peak RSS: each command's own, from wait4 in a fresh launcher; ~5 MB is the launcher's floor,"
                " so wc's figure is a bound)")
    rows.append("")
    for name, v in ratios.items():
        rows.append(f"{name:<46}{'-' if v is None else f'{v:8.2f}x'}")
    rows.append("")
    rows.append(f"per line: upwatch {up['wall_s'] / n_lines * 1e6:.2f} us, "
                f"bare binary loop {results['loop_binary']['wall_s'] / n_lines * 1e6:.3f} us")
    if reading is not None:
        rows.append(f"upwatch said: engine={reading.get('engine')} state={reading.get('state')} "
                    f"phase={reading.get('phase')} starts={reading.get('starts')} (rc {up['rc']})")
    rows.append("")
    rows.append(f"targets: upwatch within {target:g}x of the bare text loop ({kind}); peak RSS under {TARGET_RSS_MB:g} MB")
    for name, ok in targets.items():
        rows.append(f"  {'PASS' if ok else 'MISS'}  {name}")
    print("\n".join(rows))

    report = {
        "date": now,
        "machine": mach,
        "git": gst,
        "log": {"lines": n_lines, "bytes": n_bytes, "fixture_lines_per_cycle": cycle, "fixtures": args.fixtures,
                "serving": args.serving,
                "path": os.path.relpath(log, ROOT), "kept": args.keep, "build_s": build_s},
        "repeat": args.repeat,
        "results": results,
        "ratios": ratios,
        "targets": {"ratio_max": target, "rss_max_mb": TARGET_RSS_MB,
                    "verdicts": {k: ("PASS" if v else "MISS") for k, v in targets.items()}},
        "upwatch_reading": reading,
    }
    path = os.path.join(OUT, "replay_bench_serving.json" if args.serving else "replay_bench.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nwrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
