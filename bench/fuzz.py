#!/usr/bin/env python3
"""Fuzz every parser entry point of upwatch with seeded random and mutated real inputs.

Usage::

    python3 bench/fuzz.py                      # 100,000 inputs, seed 13 (about a minute here)
    python3 bench/fuzz.py --inputs 20000 --seed 7 --slow-ms 50

Entry points (each input goes through the parser *and* what consumes its result, so a value that
parses but breaks the model later counts too):

========== ===============================================================================
log        ``logline.decode`` → ``frames`` → ``parse``, ``jsonlog.decode_record``: one line
reader     ``StartupReader.feed_bytes`` over a chunk of 1-40 lines, then ``reading()``
journal    ``journal.parse_record`` → ``HostModel.apply`` → ``HostModel.state``
unit       ``unit.read_show`` → ``HostModel.apply`` → ``state``; ``download.parse_unit_env``
gpu        ``gpu.parse_query`` / ``parse_query_row`` / ``read_compute_apps`` /
           ``classify_error`` → ``HostModel.apply`` → ``state``
health     ``health.probe_health`` (serving check on) against ``httpx.MockTransport`` answers
toml       ``tui.config.load_config`` on a hosts.toml file
========== ===============================================================================

Seeds are the real fixtures (``tests/fixtures``, ``/work/shared/fixtures/formats`` when present,
the schema example of ``tui/config.py``); each input is a fixture piece with 1-4 mutations (bytes
flipped, inserted, deleted, duplicated; numbers replaced by hostile ones: 309 and 5000 digits,
``inf``, ``nan``, ``-1``, ``2**64``; escape sequences, NUL, bidi overrides; JSON values replaced by
other types), or, for one in ten, random bytes.

A **crash** is an exception the entry point does not document (``RecordError`` from
``parse_record``, ``ValueError`` from ``parse_show``/``parse_query_row``, ``GpuError`` from
``parse_query``, ``ConfigError`` from ``load_config`` are answers, not crashes). Each distinct crash
(entry point, exception type, innermost upwatch frame) is printed with a count, and its first input
and traceback are saved to ``bench/out/fuzz/``. A **slow input** is one that took more than
``--slow-ms`` (timed again once, the smaller time kept, so a busy machine is not blamed on the
input); the slowest are printed and saved the same way.

Always exits 0: a report, not a test. The inputs that once crashed are unit tests in
``tests/test_fuzz_found.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probes.sources import gpu as gpu_probe
from probes.sources import gpu_apps as gpu_apps_probe
from probes.sources import gpu_errors
from probes.sources import health as health_probe
from probes.sources import unit as unit_probe
from probes.sources.download import parse_unit_env
from probes.logs.journal_json import RecordError, parse_record
from probes.logs.jsonlog import decode_record
from probes.logs.logline import decode, frames, parse
from probes.fold.model import HostModel
from probes.logs.reader import StartupReader
from probes.data.events import GpuApps
from tui.config import ConfigError, load_config

FIXTURES = ROOT / "tests" / "fixtures"
SHARED = Path("/work/shared/fixtures/formats")
OUT = ROOT / "bench" / "out" / "fuzz"

#: Inputs per entry point for every 100 inputs.
SHARES = {"log": 20, "reader": 8, "journal": 20, "unit": 14, "gpu": 20, "health": 6, "toml": 12}
NOW = 1_741_437_000.0

#: Hostile replacements for a number or a value.
HOSTILE_NUMBERS = [
    "1" + "0" * 308, "9" * 309, "9" * 5000, "1e309", "-1e309", "inf", "-inf", "nan", "NaN", "-1", "-0",
    "0", str(2**64), str(2**64 - 1), str(2**63), "4294967295", "1.7976931348623157e308", "0x7fffffff",
    "", " ", "[N/A]", "[GPU requires reset]", "1_000", "٣", "１２", "1.5", "-999999999999", "00000000001",
]
HOSTILE_TEXT = [
    "\x1b[2J", "\x1b]52;c;UFdORUQ=\x1b\\", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\x9b31m", "\x00",
    "\u202e", "\u200b", "\r", "\n", "\t", "\x1b", "\ud800", "\ufffd", "[bold]", "[/]", "%s%n", "{", "}", "\"",
    "\\", "=", ",", ", ", "\x7f", "\x85", "é" * 3, "𝕏", "\x1bP1$r\x1b\\", "\x1b_apc\x1b\\",
]


# --- seeds -------------------------------------------------------------------------------------------


def _files(*patterns: str) -> list[Path]:
    out: list[Path] = []
    for pattern in patterns:
        for base in (FIXTURES, SHARED):
            if base.is_dir():
                out.extend(sorted(base.glob(pattern)))
    return out


def load_seeds() -> dict[str, list[bytes]]:
    """Seed inputs per entry point, from the real fixtures."""
    log_lines: list[bytes] = []
    for path in _files("logs/*.log", "logs-extra/*.log"):
        log_lines.extend(path.read_bytes().splitlines())
    records: list[bytes] = []
    for path in _files("journal/*.jsonl"):
        records.extend(line for line in path.read_bytes().splitlines() if line.strip())
    shows = [p.read_bytes() for p in _files("systemctl-show/*.txt", "systemctl-show-env/*.txt")]
    # The same with --timestamp=unix (systemd 251+) and --timestamp=us forms.
    shows += [re.sub(rb"(Timestamp=)[A-Z][a-z]{2} [0-9-]+ [0-9:]+ UTC", rb"\g<1>@1741436938.177848", s) for s in shows[:4]]
    shows += [re.sub(rb"(Timestamp=[A-Z][a-z]{2} [0-9-]+ [0-9:]+)", rb"\g<1>.177848", s) for s in shows[:4]]
    gpu = [p.read_bytes() for p in _files("nvidia-smi/*.csv", "nvidia-smi/error.*.txt")]
    doc = (ROOT / "tui" / "config.py").read_text()
    example = doc.split("::\n\n", 1)[1].split('\n\nEvery effective', 1)[0]
    toml_text = "\n".join(line[4:] for line in example.splitlines())
    tomls = [toml_text.encode(),
             b'[[host]]\nname = "a"\nunit = "sglang"\nport = 30000\n',
             (b'[defaults]\nsudo = true\n[[host]]\nssh = "u@h:2222"\nunit = "vllm.service"\n'
              b'stall_after_s = { graph_capture = 600, "*" = 180 }\n')]
    models = json.dumps({"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B", "object": "model"}]}).encode()
    answer = json.dumps({"id": "c", "choices": [{"text": "!", "index": 0}]}).encode()
    return {
        "log": log_lines, "reader": log_lines, "journal": records, "unit": shows, "gpu": gpu,
        "health": [b"", models, answer, b"{}", b"[]", b"null"], "toml": tomls,
    }


# --- mutation ------------------------------------------------------------------------------------------


class Mutator:
    """Seeded mutations of bytes (and of JSON, for journal records)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def random_bytes(self) -> bytes:
        r = self.rng
        n = r.choice([0, 1, 2, 8, 64, 512, 4096])
        alphabet = r.choice([None, b"0123456789,. -\n", b"[]{}\":,0-9ae\n", b"\x1b[;0123456789m\r\n"])
        if alphabet is None:
            return r.randbytes(n)
        return bytes(r.choice(alphabet) for _ in range(n))

    def mutate(self, data: bytes, rounds: int | None = None) -> bytes:
        r = self.rng
        for _ in range(rounds or r.randint(1, 4)):
            data = r.choice(self._ops)(self, data)
        return data

    def _flip(self, data: bytes) -> bytes:
        if not data:
            return bytes([self.rng.randrange(256)])
        i = self.rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << self.rng.randrange(8))]) + data[i + 1:]

    def _insert(self, data: bytes) -> bytes:
        i = self.rng.randint(0, len(data))
        piece = self.rng.choice(HOSTILE_TEXT).encode("utf-8", "surrogatepass") if self.rng.random() < 0.7 \
            else self.rng.randbytes(self.rng.randint(1, 8))
        return data[:i] + piece + data[i:]

    def _delete(self, data: bytes) -> bytes:
        if not data:
            return data
        i = self.rng.randrange(len(data))
        return data[:i] + data[i + self.rng.randint(1, 16):]

    def _duplicate(self, data: bytes) -> bytes:
        if not data:
            return data
        i = self.rng.randrange(len(data))
        j = min(len(data), i + self.rng.randint(1, 64))
        return data[:j] + data[i:j] * self.rng.choice([1, 2, 10, 100]) + data[j:]

    def _number(self, data: bytes) -> bytes:
        """Replace one run of digits (or, lacking any, a random spot) with a hostile number."""
        digits = [i for i, b in enumerate(data) if 48 <= b <= 57]
        value = self.rng.choice(HOSTILE_NUMBERS).encode()
        if not digits:
            i = self.rng.randint(0, len(data))
            return data[:i] + value + data[i:]
        i = self.rng.choice(digits)
        j = i
        while i > 0 and 48 <= data[i - 1] <= 57:
            i -= 1
        while j < len(data) and (48 <= data[j] <= 57 or data[j] == 46):
            j += 1
        return data[:i] + value + data[j:]

    def _cut(self, data: bytes) -> bytes:
        return data[: self.rng.randint(0, len(data))]

    _ops: ClassVar[tuple[Callable[[Mutator, bytes], bytes], ...]] = (
        _flip, _insert, _delete, _duplicate, _number, _number, _cut)

    def json_value(self) -> object:
        r = self.rng
        return r.choice([
            None, True, 0, -1, 2**64, 10**400, 1e308, 1.5, "", "x", r.choice(HOSTILE_NUMBERS),
            [], [256], [-1], list(range(0, 256, 7)), [[1, 2], "a"], [None, "a"], {"a": 1}, [[[]]],
            "\x1b]52;c;UFdORUQ=\x07", "\u202e" * 3,
        ])

    def mutate_record(self, line: bytes) -> bytes:
        """A journal record with fields replaced by other JSON types or hostile values."""
        try:
            obj = json.loads(line)
        except ValueError:
            return self.mutate(line)
        if not isinstance(obj, dict):
            return self.mutate(line)
        keys = list(obj) + ["MESSAGE", "__REALTIME_TIMESTAMP", "__CURSOR", "_PID", "UNIT", "SYSLOG_IDENTIFIER"]
        for _ in range(self.rng.randint(1, 3)):
            key = self.rng.choice(keys)
            if self.rng.random() < 0.15:
                obj.pop(key, None)
            else:
                obj[key] = self.json_value()
        text = json.dumps(obj, ensure_ascii=self.rng.random() < 0.5).encode("utf-8", "surrogatepass")
        return self.mutate(text, 1) if self.rng.random() < 0.3 else text


# --- entry points ----------------------------------------------------------------------------------------


def run_log(data: bytes) -> None:
    text = decode(data)
    for i, frame in enumerate(frames(text)):
        parse(i + 1, frame)
    decode_record(text)


def run_reader(data: bytes) -> None:
    reader = StartupReader()
    for i, line in enumerate(data.split(b"\n")):
        reader.feed_bytes(line, i + 1)
    reader.reading()
    reader.reading(ended=True)


def run_journal(data: bytes) -> None:
    model = HostModel("h", "sglang.service")
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = parse_record(line)
        except RecordError:
            model.bad_record(line, NOW)
            continue
        model.apply(rec)
    model.state(NOW)


def run_unit(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    parse_unit_env(text)
    try:
        read = unit_probe.read_show(text, NOW)
    except ValueError:
        return
    for bad in read.bad:
        bad.message  # noqa: B018 - the message is built from host text
    model = HostModel("h", "sglang.service")
    model.apply(read.state)
    model.state(NOW)


def run_gpu(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    model = HostModel("h", "sglang.service")
    gpu_errors.classify_error(text, 1)
    for line in text.splitlines():
        try:
            gpu_probe.parse_query_row(line)
        except ValueError:
            pass
    try:
        reading = gpu_probe.parse_query(text, NOW)
    except gpu_errors.GpuError:
        reading = None
    if reading is not None:
        model.apply(reading)
        index = {g.uuid: g.index for g in reading.gpus if g.uuid}
    else:
        index = {}
    apps = gpu_apps_probe.read_compute_apps(text, index)
    for bad in apps.bad:
        bad.message  # noqa: B018 - the message is built from host text
    model.apply(GpuApps(NOW, apps.apps))
    model.state(NOW)


class HealthRun:
    """``probe_health`` against one scripted answer per path (status, body, content type)."""

    def __init__(self) -> None:
        import httpx

        self.httpx = httpx
        self.answers: dict[str, tuple[int, bytes, bytes]] = {}
        self.client = httpx.AsyncClient(base_url="http://127.0.0.1:30000",
                                        transport=httpx.MockTransport(self._answer))

    def _answer(self, request: object) -> object:
        path = request.url.path  # type: ignore[attr-defined]
        status, body, ctype = self.answers.get(path, (404, b"", b"text/plain"))
        headers = [(b"content-type", ctype)]
        return self.httpx.Response(status, content=body, headers=headers)

    async def run(self, health: tuple[int, bytes, bytes], models: tuple[int, bytes, bytes],
                  answer: tuple[int, bytes, bytes]) -> None:
        self.answers = {"/health": health, "/v1/models": models, "/v1/completions": answer}
        await health_probe.probe_health(self.client, NOW, serving_check=True, timeout_s=1.0)


def health_case(rng: random.Random, m: Mutator, seeds: list[bytes]) -> bytes:
    """Three answers (``/health``, ``/v1/models``, ``/v1/completions``) as one input: JSON list of
    ``[status, body (latin-1), content type]``."""
    def one() -> list[object]:
        status = rng.choice([200, 200, 200, 204, 301, 401, 404, 500, 503, 100, 199, 599, 999])
        body = rng.choice(seeds)
        if rng.random() < 0.7:
            body = m.mutate(body)
        if rng.random() < 0.1:
            body = b"[" * rng.choice([100, 1000, 100000])
        ctype = rng.choice([b"application/json", b"text/plain", b"application/json; charset=utf-16", b"\xff\xfe"])
        return [status, body.decode("latin-1"), ctype.decode("latin-1")]
    return json.dumps([one(), one(), one()]).encode()


def run_health(data: bytes, runner: HealthRun, loop: asyncio.AbstractEventLoop) -> None:
    parts = [(int(s), b.encode("latin-1"), c.encode("latin-1")) for s, b, c in json.loads(data)]
    loop.run_until_complete(runner.run(*parts))  # type: ignore[arg-type]


class TomlRun:
    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="upwatch-fuzz-")
        self.path = Path(self.dir.name) / "hosts.toml"

    def __call__(self, data: bytes) -> None:
        self.path.write_bytes(data)
        try:
            load_config(self.path, env={}, default_path=Path(self.dir.name) / "none.toml")
        except ConfigError as exc:
            str(exc)


# --- the run ---------------------------------------------------------------------------------------------


def innermost_upwatch_frame(exc: BaseException) -> str:
    """``probes/sources/gpu.py:123`` of the deepest traceback frame inside the repository."""
    where = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if ROOT in path.parents and "bench" not in path.parts:
            where = f"{path.relative_to(ROOT)}:{frame.lineno}"
    return where


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=100_000, help="inputs in all (default 100000)")
    ap.add_argument("--seed", type=int, default=13, help="random seed (default 13)")
    ap.add_argument("--slow-ms", type=float, default=100.0, help="an input slower than this is reported (default 100)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"where crashes and slow inputs go (default {OUT})")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    m = Mutator(rng)
    seeds = load_seeds()
    args.out.mkdir(parents=True, exist_ok=True)
    health = HealthRun()
    toml = TomlRun()
    loop = asyncio.new_event_loop()
    runners: dict[str, Callable[[bytes], None]] = {
        "log": run_log, "reader": run_reader, "journal": run_journal, "unit": run_unit, "gpu": run_gpu,
        "health": lambda d: run_health(d, health, loop), "toml": toml,
    }
    total_share = sum(SHARES.values())
    plan = {k: args.inputs * v // total_share for k, v in SHARES.items()}
    plan["log"] += args.inputs - sum(plan.values())

    def make(target: str) -> bytes:
        pool = seeds[target]
        if target == "health":
            return health_case(rng, m, pool)
        if rng.random() < 0.1 or not pool:
            return m.random_bytes()
        if target == "reader":
            start = rng.randrange(len(pool))
            chunk = b"\n".join(pool[start:start + rng.randint(1, 40)])
            return m.mutate(chunk)
        if target == "journal":
            picks = [rng.choice(pool) for _ in range(rng.randint(1, 3))]
            return b"\n".join(m.mutate_record(p) if rng.random() < 0.6 else m.mutate(p) for p in picks)
        base = rng.choice(pool)
        if target in ("unit", "gpu", "toml") and rng.random() < 0.3:
            base = base + b"\n" + rng.choice(pool)  # spliced
        return m.mutate(base)

    crashes: Counter[tuple[str, str, str]] = Counter()
    crash_example: dict[tuple[str, str, str], str] = {}
    slow: list[tuple[float, str, int, str]] = []
    times: dict[str, list[float]] = {k: [] for k in runners}
    began = time.perf_counter()
    order = [t for t, n in plan.items() for _ in range(n)]
    rng.shuffle(order)
    for n, target in enumerate(order):
        data = make(target)
        t0 = time.perf_counter()
        try:
            runners[target](data)
        except Exception as exc:  # noqa: BLE001 - a crash is what this script looks for
            key = (target, type(exc).__name__, innermost_upwatch_frame(exc))
            crashes[key] += 1
            if key not in crash_example:
                name = f"crash-{target}-{hashlib.sha1(repr(key).encode()).hexdigest()[:8]}"
                (args.out / f"{name}.bin").write_bytes(data)
                (args.out / f"{name}.txt").write_text("".join(traceback.format_exception(exc)))
                crash_example[key] = name
        elapsed = time.perf_counter() - t0
        if elapsed * 1000 > args.slow_ms:
            t1 = time.perf_counter()
            with contextlib.suppress(Exception):  # a crash is counted above
                runners[target](data)
            elapsed = min(elapsed, time.perf_counter() - t1)
            if elapsed * 1000 > args.slow_ms:
                name = f"slow-{target}-{n}"
                (args.out / f"{name}.bin").write_bytes(data)
                slow.append((elapsed, target, len(data), name))
        times[target].append(elapsed)
    wall = time.perf_counter() - began
    loop.run_until_complete(health.client.aclose())
    loop.close()

    print(f"upwatch fuzz: {len(order)} inputs, seed {args.seed}, {wall:.1f} s, "
          f"python {sys.version.split()[0]}, out {os.path.relpath(args.out, ROOT)}/")
    print(f"{'entry':<8} {'inputs':>7} {'crashes':>8} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}")
    for target, ts in times.items():
        ts.sort()
        c = sum(v for k, v in crashes.items() if k[0] == target)
        med = ts[len(ts) // 2] * 1000 if ts else 0.0
        p99 = ts[int(len(ts) * 0.99)] * 1000 if ts else 0.0
        print(f"{target:<8} {len(ts):>7} {c:>8} {med:>10.3f} {p99:>8.2f} {(ts[-1] * 1000 if ts else 0):>8.1f}")
    print(f"crashes: {sum(crashes.values())} ({len(crashes)} distinct)")
    for key, count in crashes.most_common():
        print(f"  {count:>6}  {key[0]:<8} {key[1]:<22} {key[2]}  -> {crash_example[key]}.bin")
    print(f"slow inputs (> {args.slow_ms:g} ms, timed twice): {len(slow)}")
    for elapsed, target, size, name in sorted(slow, reverse=True)[:15]:
        print(f"  {elapsed * 1000:>8.1f} ms  {target:<8} {size:>8} bytes  -> {name}.bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
