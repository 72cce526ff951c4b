"""Lines that cannot matter (probes/logs/quiet.py): they skip the rules, and nothing read changes.

The reader with its quiet path and the reader with it turned off (``_steady_matcher`` answering
None: every line parsed and matched, as before issue 17) must give the same ``repr`` of
``reading()`` and ``reading(ended=True)`` after every line, on every fixture log and on made-up
sequences of real lines that stress what the quiet lines' bookkeeping must keep exact: the last
timestamp, the year of year-less marks, the last line shown (a probe's access line is never it),
the line before a traceback, ``grep -n`` numbers.
"""

from __future__ import annotations

from pathlib import Path
import random
from typing import Any

import pytest

from probes.logs import reader as reader_module
from probes.logs.engines import ENGINES, matcher_for
import re

from probes.logs.engines.base import SCAN_CHARS, required_literals
from probes.logs.engines.patterns import required_lower
from probes.logs.quiet import has_cue
from probes.logs.reader import StartupReader
from probes.sources.logfile import iter_lines

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted([*(FIXTURES / "logs").glob("*.log"), *(FIXTURES / "logs-extra").glob("*.log")])


def _loud() -> StartupReader:
    """A reader with the quiet path off: every line goes through parse and the rules."""
    r = StartupReader()
    r._steady_matcher = lambda: None  # type: ignore[method-assign]
    r._service_quiet = lambda *a: False  # type: ignore[method-assign]  # a service's lines too
    return r


def _both(lines: list[str]) -> tuple[StartupReader, StartupReader]:
    quiet, loud = StartupReader(), _loud()
    for k, text in enumerate(lines, 1):
        quiet.feed(text)
        loud.feed(text)
        assert repr(quiet.reading()) == repr(loud.reading()), f"after line {k}: {text!r}"
        assert repr(quiet.reading(ended=True)) == repr(loud.reading(ended=True)), f"after line {k}: {text!r}"
    return quiet, loud


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.stem)
def test_every_fixture_reads_the_same_with_and_without_quiet_lines(path: Path) -> None:
    quiet, loud = StartupReader(), _loud()
    with path.open("rb") as f:
        for k, raw in enumerate(iter_lines(f), 1):
            quiet.feed_bytes(raw)
            loud.feed_bytes(raw)
            assert repr(quiet.reading()) == repr(loud.reading()), f"{path.name}: after line {k}"
    assert repr(quiet.reading(ended=True)) == repr(loud.reading(ended=True))


SGLANG_START = (FIXTURES / "logs" / "sglang-ok-03.log").read_text().splitlines()
VLLM_START = (FIXTURES / "logs" / "vllm-ok-01.log").read_text().splitlines()


def test_a_serving_sglang_log_is_mostly_quiet_and_reads_the_same() -> None:
    serving = [
        '[2025-03-08 12:30:01] INFO:     10.0.0.12:24382 - "GET /health HTTP/1.1" 200 OK',
        "[2025-03-08 12:30:02 TP0] Decode batch. #running-req: 1, #token: 48, token usage: 0.00, "
        "cuda graph: True, gen throughput (token/s): 1.88, #queue-req: 0",
        '[2025-03-08 12:30:02] INFO:     10.0.0.1:54800 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        '[2025-03-08 12:30:03] INFO:     10.0.0.12:24394 - "GET /health HTTP/1.1" 200 OK',
    ] * 30
    quiet, _ = _both(SGLANG_START + serving)
    # Most serving lines were never parsed: the last ones are still waiting to be settled (the
    # reading above settles them; feed more to see them wait).
    for text in serving[:8]:
        quiet.feed(text)
    assert len(quiet._quiet.lines) == 8
    assert quiet.reading().last_line == serving[6]  # the POST: a probe's GET /health is never the last line


def test_the_bookkeeping_of_quiet_lines_is_exact_on_made_up_sequences() -> None:
    stamp_less = "(APIServer pid=11980) INFO:     10.0.0.3:43420 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"
    metrics = ("(APIServer pid=11980) INFO 02-12 19:40:01 [loggers.py:127] Engine 000: Running: 1 reqs, "
               "Waiting: 0 reqs, GPU KV cache usage: 0.4%")
    health = '(APIServer pid=11980) INFO:     127.0.0.1:34026 - "GET /health HTTP/1.1" 200 OK'
    full_date = "2025-02-13 08:00:00,123 - INFO - served one request"  # Python logging's full date
    blank_msg = "(APIServer pid=11980) INFO 02-12 19:40:02 [x.py:1] "
    warned = "(APIServer pid=11980) WARNING 02-12 19:40:03 [serving.py:1] slow: 3.2 s"
    traceback = ["Traceback (most recent call last):", '  File "/x/y.py", line 1, in f', "ValueError: boom"]
    tails = [
        [stamp_less, metrics, health, health],          # the last shown line is before the probes'
        [metrics, stamp_less, stamp_less],               # the last timestamp is not the last line
        [metrics, full_date, metrics, stamp_less],       # a full date gives year-less marks their year
        [health] * 5,                                    # only probes: the last line stays the ready line's
        [metrics, blank_msg, health],                    # a line whose message is empty is never shown
        [metrics, metrics, *traceback, metrics],         # the line before a traceback
        [*[metrics] * 5, warned, *(f"(APIServer pid=11980) {t}" for t in traceback)],  # ... under a warning
    ]
    for tail in tails:
        _both(VLLM_START + tail * 3)


def test_quiet_lines_settled_at_once_give_marks_the_first_full_date_after_them() -> None:
    # Several quiet lines with full dates of different years, read with no reading between them:
    # the year-less marks take the first one's year (the year nearest them), as read line by line.
    metrics = ("(APIServer pid=11980) INFO 02-12 19:40:01 [loggers.py:127] Engine 000: Running: 1 reqs, "
               "Waiting: 0 reqs, GPU KV cache usage: 0.4%")
    dated = "2025-02-13 08:00:00,123 - INFO - served one request"
    next_year = "2026-02-13 08:00:00,123 - INFO - served one request"
    quiet, loud = StartupReader(), _loud()
    for text in [*VLLM_START, metrics, metrics, metrics, dated, metrics, next_year, metrics]:
        quiet.feed(text)
        loud.feed(text)
    assert len(quiet._quiet.lines) == 4  # the four since the last line that mattered, one batch
    assert repr(quiet.reading()) == repr(loud.reading())
    assert repr(quiet.reading(ended=True)) == repr(loud.reading(ended=True))


def test_a_few_quiet_lines_with_runs_settle_as_the_runs_search_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settle's short way for a few lines (runs read line by line) and its way for many (a search over
    # each run) must give the same lines (numbers included) and stamps, whatever the mix.
    import random

    from probes.logs import settle
    from probes.logs.settle import Quiet, QuietRun

    texts = ["[2025-03-08 12:30:01] INFO:     10.0.0.12:24382 - \"GET /health HTTP/1.1\" 200 OK",
             "[2024-12-31 23:59:59 TP0] Decode batch. #running-req: 1, #token: 48",
             "(APIServer pid=7) INFO 02-12 19:40:01 [loggers.py:127] Engine 000: Running: 1 reqs",
             "print_info: EOG token             = 248065", "   ", "2025-02-13 08:00:00,123 - INFO - served"]
    rng = random.Random(5)

    def quiet() -> Quiet:
        q, lineno = Quiet(), 1
        for _ in range(rng.randrange(1, 6)):
            if rng.random() < 0.5:
                q.lines.append((lineno, rng.choice(texts), None, None))
                q.count += 1
                lineno += 1
            else:
                raws = [rng.choice(texts).encode() for _ in range(rng.randrange(1, 12))]
                start = rng.randrange(len(raws))
                q.add_run(QuietRun(lineno, raws, start, len(raws)))
                lineno += len(raws) - start
        return q

    for _ in range(200):
        a = quiet()
        b = Quiet()
        b.lines, b.count, b.runs = list(a.lines), a.count, a.runs
        waiting = rng.random() < 0.5
        if not a.runs:
            continue
        short = a.settle(False, waiting)
        monkeypatch.setattr(settle, "_SMALL_SETTLE", 0)
        assert repr(b.settle(False, waiting)) == repr(short)
        monkeypatch.undo()


def test_grep_numbered_and_journal_texts_read_the_same() -> None:
    numbered = [f"{k}:{line}" for k, line in enumerate(SGLANG_START + [
        '[2025-03-08 12:30:01] INFO:     10.0.0.12:24382 - "GET /health HTTP/1.1" 200 OK'] * 20, 1)]
    _both(numbered)


def test_no_line_a_rule_matches_is_quiet() -> None:
    # may_match is the rules' own test turned around: every fixture line any rule of any engine's
    # matcher matches (as its message, or with its prefix) is one may_match or a cue lets through.
    matchers = [matcher_for(None), *(matcher_for(e) for e in ENGINES),
                *(matcher_for(e, committed=False) for e in ENGINES)]
    checked = 0
    for path in LOGS:
        for raw in path.read_bytes().split(b"\n"):
            text = raw.decode("utf-8", "replace")
            if len(text) > SCAN_CHARS or has_cue(text):
                continue
            for m in matchers:
                if m.match(text) or m.match(text[text.find("] ") + 2:] if "] " in text else text):
                    checked += 1
                    assert m.may_match(text), text
    assert checked > 300


def test_required_literals_are_text_every_match_holds() -> None:
    assert required_literals(r"(?:[Mm]ain|[Cc]ontrol) process exited, code=(?P<code>\w+)") == (
        " process exited, code=",)
    assert required_literals(r"^\s*Downloading \S|^--\d{4}-\d\d--  https?://") == ("Downloading ", "--  http")
    assert required_literals(r"x{100}ab") is None  # a quantifier's bounds are no text; "ab" too short
    assert required_literals(r"abc+def") == ("def",) or required_literals(r"abc+def") == ("abc",)
    assert required_literals(r"Model architectures? \[[^\]]{0,500}\]") == ("Model architecture",)
    assert required_literals(r"(?i)cuda error") is None
    assert required_literals("cuda error", flags=2) is None  # re.IGNORECASE: no fixed text


def test_a_group_that_must_match_gives_its_texts() -> None:
    # "(?:A|B)...": every match holds one of the group's texts; the most telling group is taken
    # (the longest shortest text), not a short run outside it.
    assert required_literals(r"(?:\[Errno 98\]|address already in use|EADDRINUSE)(?:.{0,200}?:(?P<p>\d+))?") == (
        "[Errno 98]", "address already in use", "EADDRINUSE")
    assert required_literals(r"(?:WorkerProc|EngineCore|Worker) (?:hit an exception|encountered a fatal error)") == (
        "hit an exception", "encountered a fatal error")
    assert required_literals(r"(abcd|efgh)+") == ("abcd", "efgh")
    assert required_literals(r"x(?:abcd|efgh)?") is None   # the group may be absent
    assert required_literals(r"x(?=abcd)") is None         # a look-ahead: no claim
    assert required_literals(r"(?i:abcd)") is None         # scoped flags: no claim
    assert required_literals(r"(?:ab|cdef)x") is None      # "ab" is too short to tell


def test_a_case_insensitive_rule_needs_its_texts_in_lower_case() -> None:
    assert required_lower(r"address already in use|EADDRINUSE", re.IGNORECASE) == ("address already in use", "eaddrinuse")
    assert required_lower(r"address already in use", 0) is None          # case-sensitive: required_literals
    assert required_lower(r"addreſs in use", re.IGNORECASE) is None       # "ſ" matches "s": no ASCII claim
    assert required_lower(r"address in use", re.IGNORECASE | re.VERBOSE) is None
    m = matcher_for("vllm")
    # vLLM's realtime API logs this line a second while serving; "already" is the key word of the
    # case-insensitive port_in_use rule, whose texts it does not hold.
    assert not m.may_match("(APIServer pid=1) WARNING 03-08 03:19:06 [connection.py:164] Generation already in progress, ignoring commit")
    for line in ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
                 "OSError: ADDRESS ALREADY IN USE", "bind: Address already in use (port 8000)",
                 "Generation already in progress — ignoring commit"):  # not ASCII: may match
        assert m.may_match(line), line


def test_the_kernel_cue_is_the_kernels_own_lines() -> None:
    # Syslog's "kernel:" identifier is the kernel's line; the word alone (Triton kernel JIT
    # warnings of a serving vLLM) is not a cue.
    assert has_cue("Sep 11 00:44:21 gpu-node-1 kernel: amdgpu 0000:c4:00.0: amdgpu: [gfxhub] page fault")
    assert has_cue("Mar 08 12:30:05 gpu-node-1 kernel[0]: Out of memory: Killed process 1234 (python3)")
    assert not has_cue(VLLM_JIT)
    assert not matcher_for("vllm").may_match(VLLM_JIT)


VLLM_JIT = ("(EngineCore pid=284) WARNING 05-30 07:48:45 [jit_monitor.py:103] Triton kernel JIT compilation during "
            "inference: _zero_kv_blocks_kernel. This causes a latency spike; consider extending warmup to cover this "
            "shape/config.")


def test_a_serving_vllm_log_is_mostly_quiet_and_reads_the_same() -> None:
    serving = [
        VLLM_JIT,
        "(APIServer pid=1) WARNING 03-08 03:19:06 [connection.py:164] Generation already in progress, ignoring commit",
        '(APIServer pid=1) INFO:     172.18.0.6:58636 - "WebSocket /v1/realtime" [accepted]',
    ] * 30
    quiet, _ = _both(VLLM_START + serving)
    for text in serving[:6]:
        quiet.feed(text)
    assert len(quiet._quiet.lines) == 6
    # ... and what comes after them is still read: a bind error in capitals, the kernel's OOM kill.
    for tail in ("(APIServer pid=1) ERROR 03-08 03:19:07 [api_server.py:1] OSError: [Errno 98] ADDRESS ALREADY IN USE",
                 "Mar 08 03:19:08 gpu-node-1 kernel: Out of memory: Killed process 1234 (python3) total-vm:1kB"):
        q, _ = _both(VLLM_START + serving + [tail])
        assert q.reading(ended=True).state == "failed", tail


COMPOSE_START = (FIXTURES / "logs-extra" / "vllm-ok-wrap-compose-21.log").read_text().splitlines()


def test_a_serving_compose_service_is_quiet_in_its_own_reader_and_reads_the_same() -> None:
    # docker compose logs (a unit running `docker compose up` writes these to the journal): each
    # service's lines go to a reader of its own, and a steady service's quiet lines stay quiet.
    serving = [line for line in COMPOSE_START if line.startswith("voxtral-1  | ") and (
        "Generation already" in line or "connection open" in line or "WebSocket" in line)]
    assert len(serving) > 20
    quiet, _ = _both(COMPOSE_START + serving * 3)
    sub = quiet._services.subs["voxtral-1"]
    for text in serving[:8]:
        quiet.feed(text)
    assert len(sub._quiet.lines) == 8 and quiet._quiet.lines == []
    assert quiet.reading().last_line == serving[7]
    # ... and what comes after them is read, in that service or another, as the long way reads it.
    for tail in (["voxtral-1  | (APIServer pid=1) ERROR 03-08 03:19:20 [core.py:1] torch.OutOfMemoryError: "
                  "CUDA out of memory. Tried to allocate 2.00 GiB."],
                 ["asr-1  | INFO:     10.0.0.5:5000 - \"GET /health HTTP/1.1\" 200 OK", serving[0],
                  "voxtral-1  | Traceback (most recent call last):", 'voxtral-1  |   File "x.py", line 1, in <module>',
                  "voxtral-1  | RuntimeError: Engine core initialization failed."],
                 ["voxtral-1  | " + serving[0], serving[1]]):  # a nested prefix: the long way
        _both(COMPOSE_START + serving * 2 + tail)


def test_settling_year_less_quiet_lines_parses_only_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM's prefixes have a clock but no year ("INFO 03-08 03:19:06"): the settle looked for the
    # last full date by parsing every quiet line back to the first (and found none).
    from probes.logs import settle

    reader = StartupReader()
    for text in VLLM_START:
        reader.feed(text)
    quiet = [f"(APIServer pid=1) WARNING 03-08 03:19:{k:02d} [connection.py:164] Generation already in progress, "
             "ignoring commit" for k in range(40)]
    for text in quiet:
        reader.feed(text)
    assert len(reader._quiet.lines) >= 30  # (the first few after the start's lines are read the long way)
    calls = []
    real = settle.parse
    monkeypatch.setattr(settle, "parse", lambda *a, **k: calls.append(a) or real(*a, **k))
    reader.reading()
    assert len(calls) <= 2, calls   # the last line (shown, and the last time); no year to find
    assert reader.reading().last_line == quiet[-1]


def test_the_quiet_path_skips_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = StartupReader()
    for text in SGLANG_START:
        reader.feed(text)
    calls = []
    real = reader_module.parse
    monkeypatch.setattr(reader_module, "parse", lambda *a, **k: calls.append(a) or real(*a, **k))
    for _ in range(50):
        reader.feed("[2025-03-08 12:30:02 TP0] Decode batch. #running-req: 1, #token: 48, token usage: 0.00")
    assert calls == []


def test_coloured_journal_texts_are_quiet_and_read_the_same() -> None:
    # uvicorn colours its access log; in the journal MESSAGE is then a byte array with ESC codes.
    coloured = '[2025-03-08 12:30:01] \x1b[32mINFO\x1b[0m:     10.0.0.1:5 - "POST /generate HTTP/1.1" \x1b[32m200 OK\x1b[0m'
    digit_first = '\x1b[32m12:[2025-03-08 12:30:01] INFO:     10.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK\x1b[0m'
    quiet, loud = StartupReader(), _loud()
    lines = SGLANG_START + [coloured, digit_first] * 20
    for k, text in enumerate(lines, 1):
        for r in (quiet, loud):
            r.feed(text, stamp=None, ident="python3")
        assert repr(quiet.reading()) == repr(loud.reading()), f"after line {k}"
    for _ in range(3):
        quiet.feed(coloured, ident="python3")
    assert len(quiet._quiet.lines) == 3


def _every_fixture_line() -> list[str]:
    return [line for p in LOGS for line in p.read_text(encoding="utf-8", errors="replace").splitlines()]


def _mutate(rng: random.Random, splices: list[str], line: str) -> str:
    """``line`` as it is, or with its case flipped (1 in 10), or a splice put in at random (2 in 10)."""
    roll = rng.random()
    if roll < 0.1:
        return line.swapcase()
    if roll < 0.3:
        k = rng.randrange(len(line) + 1)
        return line[:k] + rng.choice(splices) + line[k:]
    return line


def test_seeded_mixes_of_real_lines_read_the_same() -> None:
    # Serving lines with every fixture's lines dropped in at random, some with their case flipped,
    # a cue or a key word spliced in, or the colours of the journal: the quiet path's bookkeeping
    # and its tests must hold on orders no fixture has.
    rng = random.Random(17)
    pool = _every_fixture_line()
    serving = ['[2025-03-08 12:30:01] INFO:     10.0.0.12:24382 - "GET /health HTTP/1.1" 200 OK',
               "[2025-03-08 12:30:02 TP0] Decode batch. #running-req: 1, #token: 48, token usage: 0.00",
               '(APIServer pid=7) INFO:     10.0.0.3:43420 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
               "(APIServer pid=7) INFO 02-12 19:40:01 [loggers.py:127] Engine 000: Running: 1 reqs"]
    splices = ["Error", "Traceback", "cuda", "http://x:1", "...", "| ", "$ ", "model ", "2025-01-01 00:00:00 ",
               "\x1b[31m", "12:", "{", "kernel: ", "x.service: "]

    def mutate(line: str) -> str:
        return _mutate(rng, splices, line)

    for other in (0.01, 0.03, 0.03, 0.1, 0.3):  # how often a line is any fixture's, not a serving one
        lines = [mutate(rng.choice(pool) if rng.random() < other else rng.choice(serving)) for _ in range(400)]
        quiet, loud = StartupReader(), _loud()
        for k, text in enumerate(SGLANG_START + lines, 1):
            quiet.feed(text)
            loud.feed(text)
            if k % 7 == 0:
                assert repr(quiet.reading()) == repr(loud.reading()), f"after line {k}: {text!r}"
        assert repr(quiet.reading(ended=True)) == repr(loud.reading(ended=True))


def test_seeded_mixes_of_compose_services_read_the_same() -> None:
    # The same for a log of services: serving lines of one service, other services' lines and any
    # fixture's lines behind a prefix (or none, or two), mutated as above.
    rng = random.Random(23)
    pool = _every_fixture_line()
    serving = [line for line in COMPOSE_START if line.startswith("voxtral-1  | ") and (
        "Generation already" in line or "connection open" in line or "WebSocket" in line or "Avg prompt" in line)]
    prefixes = ["voxtral-1  | "] * 6 + ["asr-1  | ", "", "voxtral-1  | voxtral-1  | ", "Voxtral-1  | ", "db-1\t| "]
    splices = ["Error", "Traceback", "cuda", "...", "| ", "$ ", "model ", "2025-01-01 00:00:00 ", "\x1b[31m",
               "12:", "{", "kernel: ", "Kernel", "already in use"]

    def mutate(line: str) -> str:
        return _mutate(rng, splices, line)

    for other in (0.01, 0.05, 0.2):
        lines = [mutate(rng.choice(prefixes) + rng.choice(pool)) if rng.random() < other else mutate(rng.choice(serving))
                 for _ in range(400)]
        quiet, loud = StartupReader(), _loud()
        kept: list[int] = []

        def counted(*a: object, look: Any = quiet._service_quiet, kept: list[int] = kept) -> bool:
            if look(*a):
                kept.append(1)
                return True
            return False

        quiet._service_quiet = counted  # type: ignore[method-assign]
        for k, text in enumerate(COMPOSE_START + lines, 1):
            quiet.feed(text)
            loud.feed(text)
            if k % 5 == 0:
                assert repr(quiet.reading()) == repr(loud.reading()), f"after line {k}: {text!r}"
        assert repr(quiet.reading(ended=True)) == repr(loud.reading(ended=True))
        assert len(kept) > 100  # the service's quiet path was taken (not only the long way)
