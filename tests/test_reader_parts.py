"""The startup reader's parts on their own (probes/logs/: timeline, starts, context, services):
what each promises, without a whole log around it."""

from __future__ import annotations

from probes.logs.context import LineContext
from probes.logs.logline import Line, Stamp, parse
from probes.logs.reader import StartupReader
from probes.logs.services import Services
from probes.logs.starts import Failure, Start
from probes.logs.timeline import Timeline, resolve


def _line(lineno: int, stamp: Stamp | None) -> Line:
    return Line(lineno, f"line {lineno}", f"line {lineno}", stamp)


def test_a_year_less_mark_takes_the_nearer_full_dates_year_across_new_year() -> None:
    tl = Timeline()
    tl.saw(1, Stamp(2024, 12, 31, "23:59:50"))
    after = tl.mark("weights", _line(2, Stamp(None, 1, 1, "00:00:05")))  # the month went back: 2025
    got = resolve(after)
    assert got is not None and got[0] == "2025-01-01T00:00:05"
    before = Timeline()
    early = before.mark("starting", _line(1, Stamp(None, 12, 31, "23:59:58")))
    assert early.next is None  # no full date yet: it waits for the next one
    before.saw(3, Stamp(2025, 1, 1, "00:00:01"))
    assert early.next == (3, 2025, 1)
    got = resolve(early)
    assert got is not None and got[0] == "2024-12-31T23:59:58"  # the next full date's year, less one


def test_phase_durations_of_year_less_dates_run_across_new_year() -> None:
    tl = Timeline()
    marks = [tl.mark("weights", _line(1, Stamp(None, 12, 31, "23:59:50"))),
             tl.mark("init", _line(2, Stamp(None, 1, 1, "00:00:10")))]
    tl.saw(3, Stamp(None, 1, 1, "00:00:40"))
    phases = tl.phase_marks(marks)
    assert [(p.phase, p.duration_s) for p in phases] == [("weights", 20.0), ("init", 30.0)]
    assert phases[0].time == "--12-31T23:59:50"  # no full date anywhere: no year is made up


def test_an_error_line_beats_a_warning_and_a_complete_copy_its_truncated_one() -> None:
    warning = Failure(1, "w", "CUDA out of memory", "cuda_oom", 4, "", low=True)
    error = Failure(2, "e", "RuntimeError: x", "unknown", 3, "")
    assert error.beats(warning) and not warning.beats(error)
    cut = Failure(3, "c", "torch.OutOfMemoryError: CUDA out of memory. Tried to alloc", "cuda_oom", 4, "")
    whole = Failure(4, "c", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_oom", 4, "")
    assert whole.beats(cut) and not cut.beats(whole)
    again = Failure(5, "c", cut.msg, "cuda_oom", 4, "")
    assert not again.beats(cut)  # between equals the first stays


def test_the_hosts_phase_is_its_slowest_data_parallel_engine() -> None:
    # DP0's core is at 4 (its worker at 2): DP0 is at 4; DP1 has only a worker, at 3: the host is at 3.
    start = Start(main=1, ranks={"DP0/core": 4, "DP0/Worker_TP0": 2, "DP1/Worker_TP0": 3})
    assert start.host_phase() == 3
    assert start.furthest() == 4
    flat = Start(main=4, ranks={"TP0": 5, "TP1": 2})
    assert flat.host_phase() == 4  # the main process is further than the slowest rank


def test_a_traceback_under_a_warning_is_low_and_its_exception_line_is_its_top() -> None:
    cx = LineContext()
    lines = ["WARNING 02-12 19:33:39 [x.py:1] retrying", "Traceback (most recent call last):",
             '  File "/a/b.py", line 3, in f', "    x = g()", "ValueError: bad"]
    ctxs = [cx.place(parse(i, text)) for i, text in enumerate(lines, 1)]
    frame, code, top, low, high, trace = ctxs[1]
    assert trace is not None and low and not high and not top
    assert ctxs[2][0] and not ctxs[2][1]   # the frame line
    assert ctxs[3][1] and not ctxs[3][0]   # the source line under it is code
    assert ctxs[4][2] and ctxs[4][5] is trace and cx.tb is None  # the exception line ends it


def test_an_unprefixed_line_goes_to_the_last_services_reader() -> None:
    services: Services[StartupReader] = Services(StartupReader)
    web = services.route(parse(1, "web-1  | GET / 200"))
    vllm = services.route(parse(2, "vllm-1  | INFO 02-12 19:33:39 [api_server.py:1] Starting vLLM API server"))
    bar = parse(3, "  0%|  | 0/4 [00:00<?, ?it/s]")
    assert web is not None and vllm is not None and web is not vllm
    assert services.route(bar) is vllm and bar.service == "vllm-1"
    assert sorted(services.subs) == ["vllm-1", "web-1"]


def test_a_start_systemd_saw_end_has_its_last_phase_end_there() -> None:
    # Real logs: the lines after "Main process exited" / "Failed with result" (the restart wait,
    # the start limit) are no part of the start: its last phase ends at the first of systemd's
    # lines that say it ended, not at the log's last line.
    from pathlib import Path

    from probes.sources.logfile import read_path

    fixtures = Path(__file__).parent / "fixtures"
    journal = read_path(str(fixtures / "journal" / "vllm-restart-loop.all.jsonl"))
    # Starting from systemd's "Started" (line 27, 03:22:56) to the first weights line (03:23:35);
    # init from 03:23:35 (line 30) to "Main process exited" at 03:23:48; the log ends at 03:23:53.
    assert [(p.phase, p.line, p.duration_s) for p in journal.phases] == [
        ("starting", 27, 39.0), ("weights", 28, 0.0), ("init", 30, 13.0)]
    text = read_path(str(fixtures / "logs-extra" / "ollama-restart-loop-port-14.log"))
    # The last start: its one line and "Failed with result" in the same second, then the restart
    # counter's line 3 s later: 0 s, not 3.
    assert text.state == "failed" and [p.duration_s for p in text.phases] == [0.0]
    reader = StartupReader()
    for raw in (b"Jul 17 17:10:58 ollama[450341]: Error: listen tcp 127.0.0.1:11434: bind: address already in use",
                b"Jul 17 17:11:01 ollama[450341]: Error: listen tcp 127.0.0.1:11434: bind: address already in use"):
        reader.feed_bytes(raw)
    # With no end from systemd, the phase runs to the last timestamped line.
    assert [p.duration_s for p in reader.reading().phases] == [3.0]


def test_a_start_systemd_began_is_starting_from_its_started_line() -> None:
    # The process's imports (10-30 s for vLLM) come before its first line: Starting begins at
    # systemd's "Started", not at the banner after them, and "ready after" counts them.
    lines = ["2026-11-29T16:27:20+0000 gpu-node-1 systemd[1]: Started vllm.service - vLLM server.",
             "2026-11-29T16:27:41+0000 gpu-node-1 python3[7]: INFO 11-29 16:27:41 api_server.py:151] "
             "vLLM API server version 0.6.3",
             "2026-11-29T16:27:50+0000 gpu-node-1 python3[7]: INFO 11-29 16:27:50 model_runner.py:1025] "
             "Loading model weights took 14.99 GB"]
    reader = StartupReader()
    for raw in lines:
        reader.feed(raw)
    got = [(p.phase, p.line, p.duration_s) for p in reader.reading().phases]
    assert got == [("starting", 1, 30.0), ("weights", 3, 0.0)]
    # Without systemd's line the start begins at its banner; an excerpt that begins later has no
    # Starting at all (how long the start took is not in it).
    reader = StartupReader()
    for raw in lines[1:]:
        reader.feed(raw)
    assert [(p.phase, p.line) for p in reader.reading().phases] == [("starting", 1), ("weights", 2)]
    reader = StartupReader()
    reader.feed(lines[2])
    assert [p.phase for p in reader.reading().phases] == ["weights"]


def test_a_download_before_the_banner_keeps_both_starting_spans() -> None:
    # TensorRT-LLM fetches from the Hub before its banner: Starting (systemd's line), Download,
    # Starting again; the time between the two is the download's, not Starting's (a demo host
    # read "slower than usual: starting 0:35, usually ~0:01" when one span swallowed the other).
    reader = StartupReader("trtllm")
    for raw in ["2026-11-29T16:27:20+0000 gpu-node-4 systemd[1]: Started trtllm.service - TensorRT-LLM.",
                "2026-11-29T16:27:21+0000 gpu-node-4 trtllm-serve[7]: Fetching 12 files: 100%|##########| "
                "12/12 [00:28<00:00,  2.39s/it]",
                "2026-11-29T16:27:50+0000 gpu-node-4 trtllm-serve[7]: Starting trtllm-serve for model "
                "openai/gpt-oss-120b on port 8355..."]:
        reader.feed(raw)
    assert [(p.phase, p.line, p.duration_s) for p in reader.reading().phases] == [
        ("starting", 1, 1.0), ("download", 2, 29.0), ("starting", 3, 0.0)]


def _journal(lines: list[str]):
    reader = StartupReader()
    for raw in lines:
        reader.feed(raw)
    return reader.reading(ended=True)


_VLLM = ["2026-02-12T19:33:39+0000 gpu-node-1 vllm[7]: INFO 02-12 19:33:39 api_server.py:151] vLLM API server "
         "version 0.6.3",
         "2026-02-12T19:34:05+0000 gpu-node-1 vllm[7]: INFO 02-12 19:34:05 model_runner.py:1025] Loading model "
         "weights took 14.99 GB",
         "2026-02-12T19:36:36+0000 gpu-node-1 vllm[7]: INFO:     Application startup complete."]


def test_systemd_saying_started_once_the_server_is_up_is_the_same_start() -> None:
    # ExecStartPost= (a health wait) or Type=notify: "Starting X...", the whole start, then
    # "Started X." (a fresh helper's break: it read a second start, loading).
    r = _journal(["2026-02-12T19:33:10+0000 gpu-node-1 systemd[1]: Starting vllm.service - vLLM server...", *_VLLM,
                  "2026-02-12T19:36:40+0000 gpu-node-1 systemd[1]: Started vllm.service - vLLM server."])
    assert (r.state, r.starts) == ("ready", 1)
    # A "Started" with no "Starting" before it, after the server's lines, is a new start (as before).
    r = _journal(["2026-02-12T19:33:10+0000 gpu-node-1 systemd[1]: Started vllm.service - vLLM server.", *_VLLM,
                  "2026-02-12T19:40:00+0000 gpu-node-1 systemd[1]: Started vllm.service - vLLM server."])
    assert (r.state, r.starts) == ("loading", 2)


def test_another_units_started_line_begins_no_start() -> None:
    # A whole system's journal: a login session's line before the unit's (a fresh helper's break:
    # Starting began 13 minutes early, "READY after 16m36s").
    r = _journal(["2026-02-12T19:20:00+0000 gpu-node-1 systemd[1]: Started Session 12 of User ubuntu.",
                  "2026-02-12T19:33:10+0000 gpu-node-1 systemd[1]: Started vllm.service - vLLM server.", *_VLLM,
                  "2026-02-12T19:35:00+0000 gpu-node-1 systemd[1]: Started apt-daily.timer - Daily apt download."])
    assert (r.state, r.starts) == ("ready", 1)
    assert [(p.phase, p.line) for p in r.phases][0] == ("starting", 2)
