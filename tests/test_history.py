"""The start history (probes/store/history.py), the ETA rules (probes/fold/eta.py), the "slower than usual"
verdict, and ``upwatch history``: a seeded SQLite file and an injected clock, no sleeps."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import threading
from datetime import datetime, timezone
from io import StringIO
from pathlib import Path

import pytest

from conftest import LOGS
from probes.clock import ManualClock
from probes.fold.eta import (SLOWER_FACTOR, SLOWER_MARGIN, SLOWER_MIN_S, clock_span, eta_for, slower_after,
                             typical_words)
from probes.store.history import SCHEMA_VERSION, History, StartRecord, phase_durations, start_record
from probes.logs.identity import identify
from probes.logs.journal_json import Record
from probes.fold.model import HostModel
from probes.data.reading import ErrorLine, Progress
from probes.transport.replay.runner import ReplayRunner
from probes.transport.replay.scenario import Gpu, GpuFrame, HealthFrame, Scenario, UnitFrame, stamp_journal
from probes.data.state import HostState, PhaseSpan, Typical, Verdict
from probes.fold.verdict import verdict_for
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from tui.cli import main
from tui.history import run_history

T0 = 1_764_000_000.0

#: Six earlier starts: graph capture takes 1:40 (median), the whole start 6:12.
TYP = Typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", 6, 372.0,
              (("starting", 30.0, 6), ("weights", 100.0, 6), ("init", 50.0, 6), ("graph_capture", 100.0, 6),
               ("warmup", 92.0, 6)))


def loading(now_phase_began: float = T0, *, typical: Typical | None = TYP, phase: str = "graph_capture",
            progress: Progress | None = None, **kw) -> HostState:
    """A start 180 s old, in ``phase`` since ``now_phase_began``."""
    spans = (PhaseSpan("starting", T0 - 180, 30.0), PhaseSpan("weights", T0 - 150, 100.0),
             PhaseSpan("init", T0 - 50, 50.0), PhaseSpan(phase, now_phase_began, None))
    return HostState("h", "sglang.service", engine="sglang", state="loading", phase=phase, phases=spans,
                     progress=progress, start_began=T0 - 180, phase_began=now_phase_began,
                     model="Qwen/Qwen3-8B", args_hash="abcdef012345", typical=typical,
                     last_log_at=kw.pop("last_log_at", T0 + 1000), **kw)


# --- ETA and "slower than usual" ----------------------------------------------------------------


def test_eta_in_graph_capture_from_the_medians() -> None:
    clock = ManualClock(T0 + 72)
    e = eta_for(loading(), clock.now())
    assert e is not None
    assert (e.phase, e.phase_elapsed_s, e.phase_typical_s, e.elapsed_s, e.total_typical_s) == (
        "graph_capture", 72.0, 100.0, 252.0, 372.0)
    assert e.remaining_s == 28.0 + 92.0  # what is left of graph capture, then the warm-up
    assert not e.slower and e.n == 6
    assert typical_words(loading(), clock.now()) == "graph capture 1:12 of ~1:40 · ready in ~2m"


def test_eta_uses_the_progress_fraction_when_the_phase_has_a_bar() -> None:
    s = loading(progress=Progress("graph_capture", 3, 4))
    e = eta_for(s, T0 + 10)
    assert e is not None and e.remaining_s == 25.0 + 92.0  # a quarter of 1:40 left, not 1:30
    # A bar of another phase (the weights' last frame) says nothing about this one.
    e = eta_for(loading(progress=Progress("weights", 14, 14)), T0 + 10)
    assert e is not None and e.remaining_s == 90.0 + 92.0


def test_no_eta_while_the_start_looks_hung() -> None:
    # A fresh user saw a row read "STALLED ... ~2m": a bar stuck at 0/34 kept the ETA at the whole
    # graph capture's median plus the warm-up, a promise the stall already belied.
    hung = Verdict("warning", kind="stalled", sentence="No log line for 2m00s in CUDA graph capture at 0/34: "
                                                         "the start looks hung.")
    s = loading(progress=Progress("graph_capture", 0, 34), verdict=hung)
    e = eta_for(s, T0 + 30)
    assert e is not None and e.remaining_s is None and e.phase_elapsed_s == 30.0
    assert typical_words(s, T0 + 30) == "graph capture 0:30 of ~1:40"
    assert eta_for(loading(progress=Progress("graph_capture", 0, 34)), T0 + 30).remaining_s == 100.0 + 92.0


def test_eta_overdue_phase_counts_zero_and_a_rare_phase_stays_out() -> None:
    t = Typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", 6, 372.0,
                (("download", 600.0, 1), ("init", 50.0, 6), ("graph_capture", 100.0, 6), ("warmup", 92.0, 6)))
    e = eta_for(loading(typical=t, phase="weights"), T0 + 5)  # weights: no median
    # No median for the phase: the total says what is left (372 - 185); the one-time download not.
    assert e is not None and e.phase_typical_s is None and e.remaining_s == 372.0 - 185.0
    e = eta_for(loading(typical=t), T0 + 130)  # 1:30 over the graph capture's median... not 1.5x yet
    assert e is not None and e.remaining_s == 92.0 and not e.slower


@pytest.mark.parametrize(("elapsed", "slower"), [(149.0, False), (150.0, False), (150.5, True), (151.0, True)])
def test_slower_strictly_past_one_and_a_half_times_the_phase_median(elapsed: float, slower: bool) -> None:
    assert SLOWER_FACTOR * 100.0 == 150.0
    clock = ManualClock(T0 + elapsed)
    s = loading()
    e = eta_for(s, clock.now())
    assert e is not None and e.slower_phase is slower and e.slower_start is False
    assert typical_words(s, clock.now()).endswith("slower than usual") is slower
    v = verdict_for(s, clock.now())
    assert (v is not None and v.kind == "slower") is slower


def test_slower_as_a_whole_at_the_total_boundary() -> None:
    t = Typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", 3, 200.0, ())  # no phase medians
    s = loading(typical=t, phase="init")
    assert not eta_for(s, T0 - 180 + 300).slower  # exactly 1.5 x 200 s
    e = eta_for(s, T0 - 180 + 301)
    assert e.slower_start and not e.slower_phase
    # No ETA once slower: "ready in <1m" beside "slower than usual" would be a guess the medians no longer make.
    assert typical_words(s, T0 - 180 + 301) == "5:01 of ~3:20 · slower than usual"
    v = verdict_for(s, T0 - 180 + 301)
    assert v == Verdict("warning", "Slower than usual: this start 5:01 so far, usually ready in ~3:20 "
                                   "(median of 3 starts).", kind="slower",
                        evidence=("whole start: 5:01 so far, median 3:20 to ready",
                                  "compared with the last 3 ready starts of sglang.service (Qwen/Qwen3-8B, "
                                  "engine arguments abcdef012345)"))


@pytest.mark.parametrize("median", [1.0, 2.0, 10.0, 59.0, 60.0, 100.0, 600.0])
def test_slower_exactly_past_the_median_plus_the_documented_margin(median: float) -> None:
    # README: past its median plus half of it, and at least 30 s past it.
    assert (SLOWER_MARGIN, SLOWER_MIN_S) == (0.5, 30.0)
    limit = median + max(0.5 * median, 30.0)
    assert slower_after(median) == limit
    t = Typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", 6, None, (("graph_capture", median, 6),))
    s = loading(typical=t)
    for elapsed, slower in ((median, False), (limit - 0.5, False), (limit, False), (limit + 0.5, True),
                            (limit + 60, True)):
        e = eta_for(s, T0 + elapsed)
        assert e is not None and e.slower is slower, (median, elapsed)
        assert ("slower than usual" in typical_words(s, T0 + elapsed)) is slower
        v = verdict_for(s, T0 + elapsed)
        assert (v is not None and v.kind == "slower") is slower, (median, elapsed, v)


def test_a_two_second_phase_is_not_slower_after_eight() -> None:
    # The demo once said "Slower than usual: starting 0:08" 1.5 s into the demo: a 2 s median.
    t = Typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", 6, 140.0, (("starting", 2.0, 6),))
    s = loading(typical=t, phase="starting")
    assert verdict_for(s, T0 + 8) is None and "slower" not in typical_words(s, T0 + 8)
    assert verdict_for(s, T0 + 33).kind == "slower"


def test_a_phase_the_start_comes_back_to_counts_once_with_its_spans_summed() -> None:
    # TensorRT-LLM: starting, a Hub download, then starting again (the fixture trtllm-ok-01).
    spans = (PhaseSpan("starting", T0, 1.0), PhaseSpan("download", T0 + 1, 28.0), PhaseSpan("starting", T0 + 29, 24.0),
             PhaseSpan("weights", T0 + 53, 48.0), PhaseSpan("ready", T0 + 101, None))
    assert phase_durations(spans) == (("starting", 25.0), ("download", 28.0), ("weights", 48.0))
    st = HostState("h", "trtllm.service", engine="trtllm", state="ready", phase="ready", phases=spans,
                   start_began=T0, phase_began=T0 + 101)
    rec = start_record(st)
    assert rec is not None and rec.phases == phase_durations(spans) and rec.total_s == 101.0
    assert sum(d for _, d in rec.phases) == rec.total_s


def test_typical_before_counts_only_starts_ready_before_it(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite3")
    for began in (T0 - 2000, T0 - 1000, T0):  # the last one is "the current start"
        h.add(StartRecord("h", "u", None, None, "sglang", began, began + 100, "ready", 100.0, (("weights", 100.0),)))
    assert h.typical("h", "u", None, None).n == 3
    assert h.typical("h", "u", None, None, before=T0).n == 2
    # The start's beginning as the watcher sees it can move by a second as more of it is read.
    assert h.typical("h", "u", None, None, before=T0 + 1.0).n == 2
    assert h.typical("h", "u", None, None, before=T0 - 1000).n == 1
    assert h.typical("h", "u", None, None, before=T0 - 2000) is None


def test_slower_verdict_sentence_and_evidence() -> None:
    v = verdict_for(loading(), T0 + 160)
    assert v == Verdict(
        "warning", "Slower than usual: graph capture 2:40, usually ~1:40 (median of 6 starts).", kind="slower",
        evidence=("graph capture: 2:40 so far, median 1:40", "whole start: 5:40 so far, median 6:12 to ready",
                  "compared with the last 6 ready starts of sglang.service (Qwen/Qwen3-8B, engine arguments "
                  "abcdef012345)"))


def test_slower_never_masks_a_stall_or_a_failure() -> None:
    stalled = loading(last_log_at=T0 + 10)
    assert verdict_for(stalled, T0 + 160).kind == "stalled"  # 150 s silent > 120 s limit
    failed = HostState("h", "sglang.service", state="failed", phase="graph_capture", phase_began=T0,
                       start_began=T0 - 180, typical=TYP, error=ErrorLine(3, "CUDA out of memory", "cuda_oom", ""))
    assert verdict_for(failed, T0 + 1000).kind == "failed"
    assert eta_for(failed, T0 + 1000) is None and typical_words(failed, T0 + 1000) == ""


def test_nothing_without_history_or_when_not_loading() -> None:
    assert typical_words(loading(typical=None), T0 + 500) == ""
    assert verdict_for(loading(typical=None), T0 + 500) is None
    ready = HostState("h", "u", state="ready", phase="ready", typical=TYP, start_began=T0)
    assert eta_for(ready, T0 + 5000) is None
    assert clock_span(72) == "1:12" and clock_span(3723) == "1:02:03" and clock_span(None) == "?"


def test_model_shows_typical_only_for_the_same_identity() -> None:
    m = HostModel("h", "sglang.service")
    line = (LOGS / "sglang-ok-01.log").read_text().splitlines()[1]  # the server_args dump
    m.apply(Record(texts=(line,), cursor="c1", realtime_us=int(T0 * 1e6), pid="3207", ident="python3",
                   unit="sglang.service", invocation=None, systemd=False))
    ident = identify(line)
    s = m.state(T0)
    assert (s.model, s.args_hash) == (ident.model, ident.args_hash)
    m.apply(Typical("h", "sglang.service", ident.model, "000000000000", 2, 100.0, ()))
    assert m.state(T0).typical is None  # other engine arguments: not comparable
    good = Typical("h", "sglang.service", ident.model, ident.args_hash, 2, 100.0, ())
    m.apply(good)
    assert m.state(T0).typical == good


# --- the database -------------------------------------------------------------------------------


def ready_state(began: float, *, host: str = "h", unit: str = "sglang.service", model: str | None = "Qwen/Qwen3-8B",
                args_hash: str | None = "abcdef012345", weights_s: float = 100.0, graph_s: float = 60.0) -> HostState:
    spans = (PhaseSpan("starting", began, 20.0), PhaseSpan("weights", began + 20, weights_s),
             PhaseSpan("graph_capture", began + 20 + weights_s, graph_s),
             PhaseSpan("ready", began + 20 + weights_s + graph_s, None))
    return HostState(host, unit, engine="sglang", state="ready", phase="ready", phases=spans, start_began=began,
                     model=model, args_hash=args_hash)


def test_record_once_per_start(tmp_path: Path) -> None:
    h = History(tmp_path / "history.sqlite3")
    assert h.problem is None and h.ok
    s = ready_state(T0)
    assert h.record(s) is True
    assert h.record(s) is False  # the same start again (same host, unit, beginning)
    assert History(tmp_path / "history.sqlite3").record(s) is False  # and from another process
    assert h.starts() == [StartRecord("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", "sglang", T0, T0 + 180,
                                      "ready", 180.0, (("starting", 20.0), ("weights", 100.0), ("graph_capture", 60.0)))]
    assert h.record(loading()) is False  # not finished: nothing written
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_failed_start_ends_at_its_decisive_line(tmp_path: Path) -> None:
    s = HostState("h", "sglang.service", engine="sglang", state="failed", phase="init", start_began=T0,
                  phases=(PhaseSpan("starting", T0, 10.0), PhaseSpan("weights", T0 + 10, 50.0),
                          PhaseSpan("init", T0 + 60, None)), failed_at=T0 + 75.5, model=None, args_hash=None)
    assert start_record(s) == StartRecord("h", "sglang.service", None, None, "sglang", T0, T0 + 75.5, "failed", 75.5,
                                          (("starting", 10.0), ("weights", 50.0), ("init", 15.5)))
    h = History(tmp_path / "h.sqlite3")
    assert h.record(s)
    assert h.typical("h", "sglang.service", None, None) is None  # failed starts are not typical


def test_medians_over_the_last_twenty_ready_starts(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite3")
    for i in range(25):
        assert h.record(ready_state(T0 + i * 3600, weights_s=10.0 * i, graph_s=60.0 + i))
    h.record(HostState("h", "sglang.service", state="failed", phase="weights", start_began=T0 + 99 * 3600,
                       failed_at=T0 + 99 * 3600 + 5, model="Qwen/Qwen3-8B", args_hash="abcdef012345"))
    t = h.typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345")
    newest = range(5, 25)  # the last 20 ready ones
    assert t == Typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345", 20,
                        statistics.median(20 + 10.0 * i + 60 + i for i in newest),
                        (("starting", 20.0, 20), ("weights", 145.0, 20), ("graph_capture", 74.5, 20)))
    assert t.total_s == 20 + 145 + 74.5


def test_comparable_starts_only(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite3")
    h.record(ready_state(T0, weights_s=100))
    h.record(ready_state(T0 + 1, weights_s=200, model="Qwen/Qwen3-32B"))
    h.record(ready_state(T0 + 2, weights_s=300, args_hash="999999999999"))
    h.record(ready_state(T0 + 3, weights_s=400, model=None, args_hash=None))
    h.record(ready_state(T0 + 4, weights_s=500, unit="vllm.service"))
    h.record(ready_state(T0 + 5, weights_s=600, host="other"))
    got = {key: h.typical(*key).phase_s("weights") for key in [
        ("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345"), ("h", "sglang.service", "Qwen/Qwen3-32B", "abcdef012345"),
        ("h", "sglang.service", "Qwen/Qwen3-8B", "999999999999"), ("h", "sglang.service", None, None),
        ("h", "vllm.service", "Qwen/Qwen3-8B", "abcdef012345"), ("other", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345")]}
    assert list(got.values()) == [100.0, 200.0, 300.0, 400.0, 500.0, 600.0]
    assert h.typical("h", "sglang.service", "Qwen/Qwen3-8B", None) is None
    assert len(h.summary()) == 6 and [r.host for r in h.summary(["other"])] == ["other"]


def test_corrupt_file_turns_history_off_without_raising(tmp_path: Path) -> None:
    bad = tmp_path / "history.sqlite3"
    bad.write_bytes(b"this is not a database, it is a text file someone put here\n" * 40)
    h = History(bad)
    assert h.problem == f"history off: {bad}: file is not a database" and not h.ok
    assert h.record(ready_state(T0)) is False
    assert h.typical("h", "sglang.service", None, None) is None and h.summary() == [] and h.starts() == []
    assert bad.read_bytes().startswith(b"this is not a database")  # left as it was


def test_unwritable_folder_and_newer_schema(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    h = History(tmp_path / "afile" / "history.sqlite3")
    assert h.problem is not None and h.problem.startswith(f"history off: {tmp_path / 'afile' / 'history.sqlite3'}: ")
    newer = tmp_path / "newer.sqlite3"
    db = sqlite3.connect(newer)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    h = History(newer)
    assert h.problem == (f"history off: {newer}: written by a newer upwatch (schema 99, this one knows "
                         f"{SCHEMA_VERSION})")


def test_two_writers_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    a, b = History(path), History(path)
    go = threading.Barrier(2)
    results: dict[str, list[bool]] = {"a": [], "b": []}

    def write(name: str, h: History, offset: int) -> None:
        go.wait()
        for i in range(40):
            results[name].append(h.record(ready_state(T0 + offset + 2 * i)))
            results[name].append(h.record(ready_state(T0 + 1000 + i)))  # both write the same starts

    threads = [threading.Thread(target=write, args=("a", a, 0)), threading.Thread(target=write, args=("b", b, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert a.problem is None and b.problem is None
    assert sum(results["a"]) + sum(results["b"]) == 40 + 40 + 40  # the shared 40 written once
    assert len(a.starts()) == len(b.starts()) == 120
    assert a.typical("h", "sglang.service", "Qwen/Qwen3-8B", "abcdef012345").n == 20


# --- upwatch history ----------------------------------------------------------------------------


def seed(path: Path) -> None:
    h = History(path)
    for i in range(3):
        h.record(ready_state(T0 + i * 3600, weights_s=100.0 + 10 * i))
    h.record(HostState("h", "sglang.service", engine="sglang", state="failed", phase="weights",
                       phases=(PhaseSpan("starting", T0 + 5 * 3600, 20.0), PhaseSpan("weights", T0 + 5 * 3600 + 20, None)),
                       start_began=T0 + 5 * 3600, failed_at=T0 + 5 * 3600 + 30, model="Qwen/Qwen3-8B",
                       args_hash="abcdef012345"))
    h.record(ready_state(T0, host="b\x1b[31m[bold]x", model=None, args_hash=None))
    h.close()


def _local(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M")


def test_history_command_text(tmp_path: Path) -> None:
    seed(tmp_path / "history.sqlite3")
    out, err = StringIO(), StringIO()
    assert run_history([], as_json=False, out=out, err=err, path=tmp_path / "history.sqlite3") == 0
    assert err.getvalue() == ""
    assert out.getvalue() == (
        "b[bold]x  sglang.service · sglang\n"  # the escape goes whole (probes.hosttext)
        "  model      (not printed by the engine)\n"
        "  arguments  (no argument dump)\n"
        f"  starts     1 ready, 0 failed; last began {_local(T0)} (ready)\n"
        "  median     ready in 3m00s, over the last 1 ready start\n"
        "  phases     starting 20s · weight load 1m40s · graph capture 1m00s\n"
        "\n"
        "h  sglang.service · sglang\n"
        "  model      Qwen/Qwen3-8B\n"
        "  arguments  abcdef012345\n"
        f"  starts     3 ready, 1 failed; last began {_local(T0 + 5 * 3600)} (failed)\n"
        "  median     ready in 3m10s, over the last 3 ready starts\n"
        "  phases     starting 20s · weight load 1m50s · graph capture 1m00s\n")


def test_history_command_json_and_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("UPWATCH_DATA_DIR", str(tmp_path))
    seed(tmp_path / "history.sqlite3")
    assert main(["history", "--json", "h"]) == 0
    got = json.loads(capsys.readouterr().out)
    last = datetime.fromtimestamp(T0 + 5 * 3600, tz=timezone.utc).astimezone().isoformat(timespec="seconds")
    assert got == [{"host": "h", "unit": "sglang.service", "model": "Qwen/Qwen3-8B", "args_hash": "abcdef012345",
                    "engine": "sglang", "ready": 3, "failed": 1, "typical_starts": 3, "median_total_s": 190.0,
                    "median_phases_s": {"starting": 20.0, "weights": 110.0, "graph_capture": 60.0},
                    "last_start": last, "last_outcome": "failed"}]
    assert main(["history", "nobody"]) == 0
    assert capsys.readouterr().out.startswith(f"No starts recorded for nobody yet in {tmp_path / 'history.sqlite3'}.")


def test_history_command_empty_and_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("UPWATCH_DATA_DIR", str(tmp_path))
    assert main(["history"]) == 0
    assert capsys.readouterr().out.startswith(f"No starts recorded yet in {tmp_path / 'history.sqlite3'}.")
    assert not (tmp_path / "history.sqlite3").exists()  # looking does not create it
    assert main(["history", "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
    (tmp_path / "history.sqlite3").write_text("garbage " * 100)
    assert main(["history"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == (f"upwatch history: history off: {tmp_path / 'history.sqlite3'}: "
                                         "file is not a database\n")


# --- end to end: a real log through a HostWatcher --------------------------------------------------

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]")


def _epoch(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def log_scenario(name: str, start: float) -> tuple[Scenario, float, float]:
    """The fixture log as ``sglang.service``'s journal, each line at its own timestamp's offset from
    the first, offset 0 at ``start``. Returns the scenario and the ready line's offset, and the log's
    first timestamp."""
    lines = (LOGS / name).read_text(encoding="utf-8").split("\n")
    first = next(_epoch(m.group(1)) for ln in lines if (m := _STAMP.match(ln)))
    recs, off, ready = [], 0.0, None
    for ln in lines:
        if not ln:
            continue
        m = _STAMP.match(ln)
        if m:
            off = _epoch(m.group(1)) - first
        if "fired up and ready to roll" in ln:
            ready = off
        recs.append((off, {"_PID": "3207", "_SYSTEMD_UNIT": "sglang.service", "SYSLOG_IDENTIFIER": "python3",
                           "PRIORITY": "6", "_TRANSPORT": "stdout", "_BOOT_ID": "b" * 32, "MESSAGE": ln}))
    seq = "5e9e0000000000000000000000000002"
    sc = Scenario(
        host="gpu-node-1", unit="sglang.service", engine="sglang", port=30000, model="m", start=start,
        gpus=(Gpu(0, "GPU-00000000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3", 81559, 700.0, 69.85,
                  631.95, 33, 59),),
        journal=stamp_journal(recs, start, seqnum_id=seq, monotonic_start_us=17_266_167_096),
        unit_timeline=(UnitFrame(-60.0, {"Restart": "on-failure"}),
                       UnitFrame(0.0, {"ActiveState": "active", "SubState": "running", "MainPID": 3207,
                                       "ExecMainStartTimestamp": 0.0, "ExecMainStartTimestampMonotonic": 0.0,
                                       "ActiveEnterTimestamp": 0.0, "InactiveExitTimestamp": 0.0,
                                       "ControlGroup": "/system.slice/sglang.service"})),
        gpu_timeline=(GpuFrame(0.0, (0,), (0,)),), health=(HealthFrame(0.0, "refused"),),
        seqnum_id=seq, monotonic_start_us=17_266_167_096)
    assert ready is not None
    return sc, ready, first


async def _watch(sc: Scenario, start: float, history: History, seconds: float,
                 during: list | None = None) -> HostState:
    clock = ManualClock(start)
    w = HostWatcher(HostSpec(sc.host, sc.unit, sc.port, sc.engine), ReplayRunner(sc, clock, start=start), clock,
                    history=history)
    w.start()
    try:
        for _ in range(int(seconds // 5)):
            await clock.advance(5)
            await w.sync_history()
            if during is not None:
                during.append((clock.now(), w.state()))
        return w.state()
    finally:
        await w.stop()


async def test_the_history_look_judges_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The look ran every second per host and judged the verdict each time (a share of the
    # dashboard's cost at 128 hosts); nothing it writes or reads depends on the verdict.
    import probes.fold.model as model_module

    sc, ready_off, first = log_scenario("sglang-ok-01.log", T0)
    clock = ManualClock(first)
    h = History(tmp_path / "history.sqlite3")
    w = HostWatcher(HostSpec(sc.host, sc.unit, sc.port, sc.engine), ReplayRunner(sc.rebased(first), clock, start=first),
                    clock, history=h)
    judged: list[float] = []
    real = model_module.verdict_for
    monkeypatch.setattr(model_module, "verdict_for", lambda base, now, stall: judged.append(now) or real(base, now, stall))
    w.start()
    try:
        for _ in range(int((ready_off + 30) // 5)):
            await clock.advance(5)
            await w.sync_history()
    finally:
        await w.stop()  # no probe loop runs now: only the look below can judge
    judged.clear()
    await w.sync_history()
    assert judged == [] and [r.outcome for r in h.starts()] == ["ready"]
    assert w.state().state == "ready" and judged  # the snapshot itself still judges


async def test_a_real_start_is_recorded_with_its_phases_and_model(tmp_path: Path) -> None:
    sc, ready_off, first = log_scenario("sglang-ok-01.log", T0)
    expected = json.loads((LOGS / "sglang-ok-01.expected.json").read_text())
    ident = identify((LOGS / "sglang-ok-01.log").read_text().split("\n")[1])
    h = History(tmp_path / "history.sqlite3")
    # The log's own timestamps are the start's times: the scenario starts at the first of them.
    s = await _watch(sc.rebased(first), first, h, ready_off + 30)
    assert s.state == "ready"
    [rec] = h.starts()
    assert (rec.host, rec.unit, rec.engine, rec.outcome) == ("gpu-node-1", "sglang.service", "sglang", "ready")
    assert (rec.model, rec.args_hash) == ("/mnt/d/user/Desktop/Model/Qwen3-0___6B", ident.args_hash)
    assert rec.args_hash is not None and re.fullmatch(r"[0-9a-f]{12}", rec.args_hash)
    assert [p for p, _ in rec.phases] == [p for p in expected["phases_seen"] if p != "ready"]
    assert rec.began == first and rec.total_s == ready_off == 122.0  # 16:13:35 → 16:15:37
    assert sum(d for _, d in rec.phases) == pytest.approx(rec.total_s)
    assert dict(rec.phases)["graph_capture"] == 26.0  # 16:14:33 → 16:14:59 (uvicorn starts: warm-up)

    # Watching the same start again writes nothing new; a later start of the same kind compares.
    await _watch(sc.rebased(first), first, h, ready_off + 30)
    assert len(h.starts()) == 1
    later = first + 86400
    seen: list[tuple[float, HostState]] = []
    await _watch(sc.rebased(later), later, h, ready_off + 30, seen)
    mid = [(t, st) for t, st in seen if st.state == "loading" and st.phase == "weights"]
    assert mid, "the second start was seen loading its weights"
    t, st = mid[0]
    assert st.typical is not None and st.typical.n == 1 and st.typical.total_s == 122.0
    assert typical_words(st, t).startswith("weight load ")
    assert st.verdict is None  # as fast as the first
    assert len(h.starts()) == 2
    assert h.typical("gpu-node-1", "sglang.service", rec.model, rec.args_hash).n == 2


async def test_the_current_start_is_never_its_own_history(tmp_path: Path) -> None:
    # A live host once said "1 earlier start: ready in ~29s" of the start it was showing.
    sc, ready_off, first = log_scenario("sglang-ok-01.log", T0)
    h = History(tmp_path / "history.sqlite3")
    seen: list[tuple[float, HostState]] = []
    s = await _watch(sc.rebased(first), first, h, ready_off + 30, seen)
    assert s.state == "ready" and len(h.starts()) == 1  # written ...
    assert all(st.typical is None for _, st in seen)  # ... and never shown as its own history
    later = first + 86400
    seen = []
    s = await _watch(sc.rebased(later), later, h, ready_off + 30, seen)
    assert s.state == "ready" and len(h.starts()) == 2
    assert {st.typical.n for _, st in seen if st.typical is not None} == {1}  # the first start only, ready or not
    assert seen[-1][1].state == "ready" and seen[-1][1].typical is not None


async def test_a_watcher_with_a_broken_history_carries_on(tmp_path: Path) -> None:
    bad = tmp_path / "history.sqlite3"
    bad.write_bytes(b"\x00garbage" * 500)
    h = History(bad)
    sc, ready_off, first = log_scenario("sglang-ok-01.log", T0)
    s = await _watch(sc.rebased(first), first, h, ready_off + 10)
    assert s.state == "ready" and s.typical is None
    assert h.problem == f"history off: {bad}: file is not a database"


# --- what the card and the detail timeline show ---------------------------------------------------


async def test_card_and_timeline_show_the_typical_durations() -> None:
    from test_widgets import One, screen_text

    from widgets.detail import PhaseTimeline
    from widgets.host_card import HostCard

    card = HostCard(loading(), now=T0 + 72)
    app = One(card)
    async with app.run_test(size=(100, 13)) as pilot:
        await pilot.pause()
        assert card.times_text(loading(), T0 + 72).plain == (
            "in Graph capture 1m12s of ~1m40s · ready in ~2m · since start 4m12s")
        assert "in Graph capture 1m12s of ~1m40s · ready in ~2m" in screen_text(app)
        assert card.times_text(loading(), T0 + 151).plain == (
            "in Graph capture 2m31s of ~1m40s · slower than usual · since start 5m31s")
        assert card.times_text(loading(typical=None), T0 + 72).plain == "in Graph capture 1m12s · since start 4m12s"
    timeline = PhaseTimeline(loading(), T0 + 72)
    async with One(timeline).run_test(size=(100, 10)) as pilot:
        await pilot.pause()
        lines = timeline.render_text(loading(), T0 + 72, 100).plain.splitlines()
        assert lines[0].startswith("✓ Starting      15:57:00      30s    ~30s")
        assert lines[3].startswith("▸ Graph capture 16:00:00   1m12s…  ~1m40s")
        assert lines[4:] == ["6 earlier starts: ready in ~6m12s", "graph capture 1:12 of ~1:40 · ready in ~2m"]
        plain = timeline.render_text(loading(typical=None), T0 + 72, 100).plain.splitlines()
        assert len(plain) == 4 and "~" not in plain[0]


def test_status_text_and_json_carry_the_typical_durations() -> None:
    from tui.status import format_host, host_json

    spec = HostSpec("h", "sglang.service")
    text = format_host(spec, loading(), now=T0 + 72)
    assert "  usually     graph capture 1:12 of ~1:40 · ready in ~2m\n" in text
    assert "usually" not in format_host(spec, loading(typical=None), now=T0 + 72)
    assert host_json(spec, loading(), T0 + 72)["typical"] == {
        "starts": 6, "total_s": 372.0, "eta_s": 120.0, "slower": False,
        "phases": {"starting": 30.0, "weights": 100.0, "init": 50.0, "graph_capture": 100.0, "warmup": 92.0}}
    assert host_json(spec, loading(), T0 + 151)["typical"]["slower"] is True
    assert host_json(spec, loading(typical=None), T0 + 72)["typical"] is None
