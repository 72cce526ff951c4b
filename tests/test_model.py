"""HostModel and verdicts over real journal output, real-shaped unit/GPU/health events, and a clock."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import JOURNAL
from probes.logs.journal_json import parse_record
from probes.fold.headline import headline
from probes.fold.model import HostModel
from probes.data.reading import ErrorLine, Progress
from probes.data.events import GpuReading, GpuSample, Health, ProbeFailure, ProbeOk, UnitState
from probes.data.state import HostState, Verdict
from probes.data.durations import fmt_span
from probes.fold.verdict import STALL_AFTER_S, verdict_for


def _fold(name: str, unit: str) -> HostModel:
    m = HostModel("gpu-node-1", unit)
    for raw in (JOURNAL / name).read_bytes().splitlines():
        m.apply(parse_record(raw))
    return m


def test_sglang_journal_folds_to_ready_with_phase_times():
    m = _fold("sglang-startup.jsonl", "sglang.service")
    s = m.state(now=1741437200.0)
    assert s.state == "ready" and s.phase == "ready" and s.engine == "sglang"
    assert [p.phase for p in s.phases] == ["starting", "weights", "init", "graph_capture", "warmup", "ready"]
    # Every phase began at its journal entry's realtime stamp (second resolution, UTC).
    assert all(p.began is not None for p in s.phases)
    assert [p.began for p in s.phases] == sorted(p.began for p in s.phases)
    assert s.phases[-1].duration_s is None and s.phases[0].duration_s is not None
    assert s.log_count == 34 and len(m.log) == 34
    assert s.verdict is None
    # The log keeps host text as written (the injected markup record is a plain string).
    assert any("[bold]x[/]" in e.text for e in m.log)
    assert s.last_log_at == pytest.approx(int(
        [ln for ln in (JOURNAL / "sglang-startup.jsonl").read_text().splitlines()][-1]
        .split('"__REALTIME_TIMESTAMP":"')[1].split('"')[0]) / 1e6)


def test_vllm_restart_loop_gives_error_verdict_with_cause_and_counter():
    m = _fold("vllm-restart-loop.jsonl", "vllm.service")
    s = m.state(now=1730800000.0)
    assert s.state == "failed" and s.restart_loop and s.cause == "cuda_oom"
    assert s.restart_counter == 3 and s.starts == 3
    assert s.verdict is not None and s.verdict.level == "error"
    assert s.verdict.sentence == ("Restart loop: 3 starts failed in 2m44s, each CUDA out of memory during init; "
                                  "systemd gave up (start limit): fix it, then systemctl reset-failed.")
    assert s.verdict.evidence[:3] == ("start 1 (began 03:21:02): CUDA out of memory in Init",
                                      "start 2 (began 03:21:59): CUDA out of memory in Init",
                                      "start 3 (began 03:22:56): CUDA out of memory in Init")
    assert s.verdict.evidence[3] == "restart counter (NRestarts) 3"
    # The decisive line is an entry of the log: its line number is that entry's seq.
    assert s.error is not None
    entry = next(e for e in m.log if e.seq == s.error.line)
    assert "CUDA out of memory" in entry.text


def test_entries_after_is_by_sequence_and_survives_the_cap():
    m = HostModel("h", "u.service", log_keep=10)
    for raw in (JOURNAL / "sglang-startup.jsonl").read_bytes().splitlines():
        m.apply(parse_record(raw))
    assert [e.seq for e in m.entries_after(30)] == [31, 32, 33, 34]
    assert [e.seq for e in m.entries_after(0)] == list(range(25, 35))  # oldest dropped, never re-sent
    assert m.entries_after(34) == []


def test_bad_record_is_kept_visibly_and_counted():
    m = HostModel("h", "u.service")
    m.bad_record(b'{"MESSAGE": "trunc', 5.0)
    s = m.state(10.0)
    assert s.log_count == 1 and m.log[0].text.startswith("[unreadable journal record] {")


def _unit(active="active", sub="running", **kw) -> UnitState:
    return UnitState(time=100.0, unit="sglang.service", load_state=kw.pop("load", "loaded"),
                     active_state=active, sub_state=sub, **kw)


@pytest.mark.parametrize("active,sub,health,rung", [
    ("inactive", "dead", None, "inactive"),
    ("activating", "auto-restart", Health(1.0, "healthy", 200), "inactive"),
    ("failed", "failed", None, "inactive"),
    ("active", "running", None, "unknown"),
    ("active", "running", Health(1.0, "port_closed", None, "connection refused"), "port_closed"),
    ("active", "running", Health(1.0, "http_unhealthy", 503, "HTTP 503"), "http_unhealthy"),
    ("active", "running", Health(1.0, "serving", 200), "serving"),
])
def test_readiness_rung(active, sub, health, rung):
    m = HostModel("h", "sglang.service")
    m.apply(_unit(active, sub))
    if health is not None:
        m.apply(health)
    assert m.state(200.0).readiness == rung


def test_gpu_history_and_none_is_kept_as_none():
    m = HostModel("h", "u.service")
    for t, used in ((1.0, 500), (2.0, None), (3.0, 40000)):
        m.apply(GpuReading(t, (GpuSample(0, "GPU-0", "NVIDIA H100 80GB HBM3", used, 81559, None),)))
    s = m.state(4.0)
    assert s.gpus is not None and s.gpus.gpus[0].mem_used_mib == 40000
    assert [u for _, u in s.gpu_history[0]] == [None, None, None]
    assert s.gpu_history[0][1][0] is None and s.gpu_history[0][2][0] == pytest.approx(40000 / 81559)


def test_connection_failure_makes_the_host_stale_and_keeps_its_state():
    m = _fold("sglang-startup.jsonl", "sglang.service")
    m.apply(Health(1741437000.0, "serving", 200))
    m.apply(ProbeFailure(1741437100.0, "journal", "closed", "connection lost"))
    m.apply(ProbeFailure(1741437105.0, "unit", "unreachable", "no route to host"))
    m.apply(Health(1741437110.0, "port_closed", None, "connection refused"))  # the tunnel, not the server
    s = m.state(1741437200.0)
    assert s.stale_since == 1741437100.0
    assert s.state == "ready" and s.readiness == "serving"  # last known, not zeros
    assert s.verdict is not None and s.verdict.level == "warning"
    assert s.verdict.sentence.startswith("Connection lost, reconnecting, last data ")
    assert "(connection lost)" in s.verdict.sentence and s.reconnect_attempt == 0
    m.apply(ProbeFailure(1741437120.0, "unit", "unreachable", "no route to host", attempt=3))
    s = m.state(1741437200.0)
    assert s.reconnect_attempt == 3 and s.stale_since == 1741437100.0
    assert s.verdict.sentence.startswith("Reconnecting (attempt 3), last data ")
    assert s.failure("unit").time == 1741437105.0  # when it began, with the latest attempt count
    m.apply(ProbeOk(1741437300.0, "journal"))
    m.apply(ProbeOk(1741437300.0, "unit"))
    assert m.state(1741437300.0).stale_since is None


def test_a_refused_login_is_an_error_that_says_how_to_fix_it():
    m = HostModel("h", "u.service")
    m.apply(ProbeFailure(5.0, "unit", "host_key", "h: Host key is not trusted. New host: ssh-keyscan h >> ~/.ssh/known_hosts", attempt=1))
    s = m.state(6.0)
    assert s.stale_since == 5.0 and s.verdict is not None
    assert (s.verdict.level, s.verdict.kind) == ("error", "ssh")
    assert s.verdict.sentence.startswith("SSH login failed: h: Host key is not trusted") and "ssh-keyscan" in s.verdict.sentence


def test_command_failure_degrades_only_its_cell():
    m = HostModel("h", "u.service")
    m.apply(ProbeFailure(5.0, "gpu", "command", "NVIDIA driver not loaded"))
    s = m.state(6.0)
    assert s.stale_since is None and s.failure("gpu").message == "NVIDIA driver not loaded"


def _loading(**kw) -> HostState:
    base = dict(host="h", unit="sglang.service", engine="sglang", state="loading", phase="graph_capture",
                progress=Progress("graph_capture", 0, 34), last_log_at=1000.0)
    base.update(kw)
    return HostState(**base)


def test_stall_verdict_needs_the_clock_not_sleep():
    s = _loading()
    limit = STALL_AFTER_S["graph_capture"]
    assert verdict_for(s, 1000.0 + limit - 1) is None
    v = verdict_for(s, 1000.0 + limit + 12)
    assert v is not None and v.level == "warning"
    assert v.sentence == f"No log line for {fmt_span(limit + 12)} in CUDA graph capture at 0/34: the start looks hung."


def test_failed_verdict_names_phase_and_cause():
    s = _loading(state="failed", phase="weights", cause="cuda_oom",
                 error=ErrorLine(7, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", ""))
    assert verdict_for(s, 0.0).sentence == "Start failed in Weight load: CUDA out of memory."


def test_a_long_decisive_line_in_the_evidence_says_it_was_shortened():
    # The evidence holds the line cut to 160 characters; a cut that ended mid-word with no mark
    # read as the whole line (a fresh user took "determine_num_avail" for the method's name).
    text = "RuntimeError: Worker failed with error 'CUDA out of memory', while processing method " + "x" * 200
    s = _loading(state="failed", phase="init", cause="cuda_oom", error=ErrorLine(7, text, "cuda_oom", ""))
    (evidence,) = verdict_for(s, 0.0).evidence
    assert evidence.startswith("decisive line: RuntimeError: Worker failed") and evidence.endswith("…")
    assert len(evidence) == len("decisive line: ") + 160


def test_ready_but_unhealthy_is_a_warning():
    s = _loading(state="ready", phase="ready", readiness="http_unhealthy",
                 health=Health(5.0, "http_unhealthy", 503, "HTTP 503"))
    v = verdict_for(s, 0.0)
    assert v.sentence == "The log says ready but the server is not healthy (HTTP 503)."
    assert v.evidence[0] == "readiness: http_unhealthy (HTTP 503)"
    # "ready" is the log's word: the host's condition (cards, rows, status --json's headline) is not.
    assert headline(dataclasses.replace(s, verdict=v)) == "unhealthy"
    assert headline(dataclasses.replace(s, readiness="serving", health=None)) == "ready"
    # ... whichever verdict is shown (GPU memory held outside the unit comes first: a fresh
    # helper's break found "ready" there).
    assert headline(dataclasses.replace(s, verdict=Verdict("warning", "held", kind="gpu_orphans"))) == "unhealthy"


def test_unit_not_found_is_said():
    s = dataclasses.replace(_loading(), unit_state=_unit("inactive", "dead", load="not-found"))
    assert verdict_for(s, 0.0).sentence == "Unit sglang.service does not exist on this host: check its name (systemctl list-unit-files there lists the units)."


def test_fmt_span():
    assert [fmt_span(x) for x in (0, 42, 75, 3725)] == ["0s", "42s", "1m15s", "1h02m"]


def test_a_start_after_a_failed_one_says_so():
    s = _loading(phase="starting", progress=None, starts=2, restart_counter=1,
                 error=ErrorLine(7, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", ""))
    v = verdict_for(s, 1001.0)
    assert v.level == "warning"
    assert v.sentence == "The previous start failed: CUDA out of memory; this is start 2, restart counter at 1."


def test_headline_is_the_worst_that_is_true_and_the_summary_puts_it_first():
    from probes.data.state import Verdict
    from probes.fold.headline import headline
    from tui.screens import summary

    ready = _loading(state="ready", phase="ready", progress=None)
    stalled = _loading(verdict=Verdict("warning", "No log line for 4m00s ...", "stalled"))
    looping = _loading(restart_loop=True, verdict=Verdict("error", "Restart loop: ...", "restart_loop"))
    failed = _loading(state="failed")
    stale = dataclasses.replace(ready, stale_since=5.0, updated=4.0)
    never = dataclasses.replace(_loading(state="waiting"), stale_since=5.0, updated=None)
    assert [headline(s) for s in (ready, stalled, looping, failed, _loading(), stale, never)] == [
        "ready", "stalled", "restart loop", "failed", "loading", "ready", "unreachable"]
    # Each host counts once; a stale host's state is only the last known one.
    assert summary([ready, stalled, looping, failed, stale]) == \
        "5 hosts: 1 failed · 1 stale · 1 restart loop · 1 stalled · 1 ready"
    assert summary([ready, never, stale]) == "3 hosts: 1 stale · 1 unreachable · 1 ready"


def test_a_host_never_reached_says_connecting_with_no_data_yet():
    m = HostModel("h", "u.service")
    m.apply(ProbeFailure(5.0, "unit", "unreachable", "h: Connection refused", attempt=2))
    s = m.state(6.0)
    assert s.verdict is not None and s.verdict.sentence == "Connecting (attempt 2), no data yet (h: Connection refused)."


def test_systemd_beats_a_log_that_says_ready():
    from probes.data.events import UnitState

    m = _fold("sglang-startup.jsonl", "sglang.service")
    assert m.state(1741437200.0).state == "ready"
    m.apply(UnitState(1741437300.0, "sglang.service", "loaded", "failed", "failed", "signal",
                      exec_main_code=2, exec_main_status=9))
    s = m.state(1741437300.0)
    assert s.state == "failed" and s.readiness == "inactive"
    m.apply(UnitState(1741437301.0, "sglang.service", "loaded", "inactive", "dead", "success"))
    assert m.state(1741437301.0).state == "stopped"
    m.apply(UnitState(1741437302.0, "sglang.service", "not-found", "inactive", "dead"))
    s = m.state(1741437302.0)
    assert s.state == "stopped" and s.verdict is not None and s.verdict.kind == "not_found"
    # Between automatic restarts the log's reading stands (the next start is on its way).
    m.apply(UnitState(1741437303.0, "sglang.service", "loaded", "activating", "auto-restart", "exit-code"))
    assert m.state(1741437303.0).state == "ready"


def test_a_unit_killed_without_a_word_in_the_log_says_how_it_ended():
    from probes.data.events import UnitState

    m = _fold("sglang-startup.jsonl", "sglang.service")
    m.apply(UnitState(1741437300.0, "sglang.service", "loaded", "failed", "failed", "signal",
                      exec_main_code=2, exec_main_status=9))
    v = m.state(1741437300.0).verdict
    assert v is not None and (v.level, v.kind) == ("error", "unit_failed")
    assert v.sentence == ("Unit sglang.service failed (result signal, the main process was killed by signal 9); "
                          "the log says nothing of it.")


# --- issue 5 rules ---------------------------------------------------------------------------------

def test_gpu_memory_moving_keeps_a_quiet_start_from_stalling():
    s = _loading(last_log_at=1000.0, gpu_changed_at=1150.0)
    assert verdict_for(s, 1000.0 + 179.0) is None
    v = verdict_for(s, 1150.0 + 180.0)
    assert v is not None and v.kind == "stalled" and v.sentence == ("No log line for 5m30s and no GPU memory change for 3m00s in CUDA graph "
                                                        "capture at 0/34: the start looks hung.")
    assert "GPU memory last moved at " in v.evidence[1]


def test_stall_limits_per_host_and_phase():
    s = _loading(last_log_at=1000.0)
    assert verdict_for(s, 1000.0 + 60.0, {"graph_capture": 60.0}).kind == "stalled"
    assert verdict_for(s, 1000.0 + 60.0, {"*": 61.0}) is None
    assert verdict_for(s, 1000.0 + 61.0, {"*": 61.0}).kind == "stalled"


def test_nrestarts_going_down_is_a_reset_not_a_negative_count():
    from probes.data.events import UnitState

    m = HostModel("h", "u.service")
    for t, n in ((1.0, 0), (2.0, 1), (3.0, 3), (4.0, 0), (5.0, 2)):
        m.apply(UnitState(t, "u.service", "loaded", "activating", "auto-restart", "exit-code", n_restarts=n))
    assert m.state(6.0).restarts_seen == 5  # 1 + 2, reset, then 2


def test_health_answered_by_an_earlier_process_is_not_readiness():
    from probes.data.events import UnitState

    m = _fold("sglang-startup.jsonl", "sglang.service")
    up = dict(load_state="loaded", active_state="active", sub_state="running", started_at=1741436938.0)
    m.apply(UnitState(1741437000.0, "sglang.service", main_pid=100, invocation_id="a" * 32, **up))
    m.apply(Health(1741437001.0, "healthy", 200))
    assert m.state(1741437002.0).readiness == "healthy" and not m.state(1741437002.0).health_stale
    # Restarted: a new MainPID and invocation; /health still answers 200 (the old process).
    m.apply(UnitState(1741437100.0, "sglang.service", main_pid=200, invocation_id="b" * 32,
                      **{**up, "started_at": 1741437099.0}))
    m.apply(Health(1741437101.0, "healthy", 200))
    s = m.state(1741437102.0)
    assert s.health_stale and s.readiness == "port_closed"
    assert s.verdict is not None and s.verdict.kind == "stale_health"
    assert s.verdict.sentence.startswith("/health answers, but from an earlier process: MainPID is now 200")
    # Health going down and up again after the restart belongs to the new process.
    m.apply(Health(1741437103.0, "port_closed", None))
    m.apply(Health(1741437104.0, "healthy", 200))
    s = m.state(1741437105.0)
    assert not s.health_stale and s.readiness == "healthy"


def test_active_for_long_with_the_port_closed_and_no_start_in_the_log():
    from probes.data.events import UnitState

    u = UnitState(1000.0, "u.service", "loaded", "active", "running", main_pid=5, started_at=1000.0)
    s = HostState(host="h", unit="u.service", state="waiting", readiness="port_closed", unit_state=u,
                  health=Health(1500.0, "port_closed", None, "connection refused"))
    assert verdict_for(s, 1000.0 + 599.0) is None
    v = verdict_for(s, 1000.0 + 600.0)
    assert v is not None and v.sentence == ("Unit active for 10m00s but not serving (connection refused), "
                                            "and the log shows no start in progress.")


def test_a_process_past_download_with_no_gpu_memory():
    from probes.data.events import UnitState

    u = UnitState(1000.0, "u.service", "loaded", "active", "running", main_pid=5, started_at=1000.0)
    idle = GpuReading(1290.0, tuple(GpuSample(i, f"GPU-{i}", "NVIDIA H100 80GB HBM3", 3, 81559, 0) for i in range(2)))
    s = _loading(unit_state=u, gpus=idle, last_log_at=1299.0, phase="weights", progress=None)
    assert verdict_for(s, 1299.0) is None
    v = verdict_for(s, 1300.0)
    assert v is not None and v.kind == "no_gpu_memory"
    assert v.sentence.startswith("The process is up 5m00s, in Weight load, but no GPU holds memory")


def test_start_request_repeated_too_quickly_says_systemd_gave_up_without_the_unit_probe():
    m = _fold("vllm-restart-loop.jsonl", "vllm.service")  # the journal only: no systemctl show
    s = m.state(now=1730800000.0)
    assert s.unit_state is None and s.gave_up
    assert s.verdict.sentence.endswith("; systemd gave up (start limit): fix it, then systemctl reset-failed.")


def test_a_start_by_hand_begins_a_new_count_of_failed_starts():
    # The real vLLM loop: three starts, each CUDA OOM. Before the third, the operator starts the
    # unit by hand (systemd flushes NRestarts: 2 → 0). The loop before it is history.
    records = [parse_record(raw) for raw in (JOURNAL / "vllm-restart-loop.jsonl").read_bytes().splitlines()]
    m = HostModel("gpu-node-1", "vllm.service")
    starts = [r for r in records if r.systemd and r.text.startswith("Started ")]
    assert len(starts) == 3
    t3 = starts[2].realtime_us / 1e6
    before = [r for r in records if r.realtime_us / 1e6 < t3]
    after = [r for r in records if r.realtime_us / 1e6 >= t3]
    for r in before:
        m.apply(r)
    m.apply(UnitState(time=t3 - 2.0, unit="vllm.service", load_state="loaded", active_state="activating",
                      sub_state="auto-restart", n_restarts=2))
    s = m.state(t3 - 1.0)
    assert s.restart_loop and len(s.failed_starts) == 2
    m.apply(UnitState(time=t3 + 0.5, unit="vllm.service", load_state="loaded", active_state="activating",
                      sub_state="start", n_restarts=0))  # started by hand
    for r in after:
        m.apply(r)
    s = m.state(t3 + 60.0)
    assert [f.cause for f in s.failed_starts] == ["cuda_oom"]  # only the start after the hand start
    assert not s.restart_loop and s.state == "failed"
    assert s.verdict is not None and s.verdict.kind != "restart_loop"


def _journal_line(text: str, t_us: int, pid: int = 4242) -> bytes:
    """A ``journalctl -o json`` record of the server's own output, as journald writes it."""
    import json

    return json.dumps({"__REALTIME_TIMESTAMP": str(t_us), "_PID": str(pid), "SYSLOG_IDENTIFIER": "python3",
                       "_SYSTEMD_UNIT": "vllm.service", "MESSAGE": text}).encode()


def test_a_suspect_is_a_warning_live_and_the_failure_once_systemd_says_the_process_is_gone():
    # derived: vLLM V0 lines through the journal; a bare exception line, no traceback, no exit line yet.
    m = HostModel("gpu-node-1", "vllm.service")
    m.apply(dataclasses.replace(_unit(active="active", sub="running"), unit="vllm.service"))
    for i, text in enumerate(["INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.6.3",
                              "INFO 05-04 14:43:20 model_runner.py:173] Loading model weights took 14.9595 GB",
                              "ValueError: No available memory for the cache blocks."]):
        m.apply(parse_record(_journal_line(text, 1_746_369_796_000_000 + i * 1_000_000)))
    live = m.state(now=1746369800.0)
    assert (live.state, live.cause) == ("loading", None)
    assert live.suspect is not None and live.suspect.cause == "cuda_oom"
    assert live.verdict is not None and (live.verdict.level, live.verdict.kind) == ("warning", "suspect")
    assert live.verdict.sentence == "Possible failure: CUDA out of memory logged; the process has not ended (yet)."
    assert "No available memory" in live.verdict.evidence[0]
    # systemd says the process is gone (no journal line says so yet): the suspect was the end.
    m.apply(dataclasses.replace(_unit(active="failed", sub="failed"), unit="vllm.service", time=101.0))
    gone = m.state(now=1746369801.0)
    assert (gone.state, gone.phase, gone.cause) == ("failed", "init", "cuda_oom")
    assert gone.suspect is None and gone.error is not None and "No available memory" in gone.error.text
    assert gone.verdict is not None and gone.verdict.kind == "failed"


def test_the_log_pane_keeps_a_bounded_amount_of_what_a_host_sends() -> None:
    """Records arrive whole up to 16 MiB (probes/transport/runner.py): the pane keeps ENTRY_CHARS characters
    of an entry (its head and its tail around a visible cut mark) and LOG_CHARS in all, oldest
    dropped first; the reader still reads every line."""
    from probes.logs.journal_json import Record
    from probes.fold.model import ENTRY_CHARS, ENTRY_TAIL, LOG_CHARS

    m = HostModel("h", "sglang.service")
    big = "x" * (2 * ENTRY_CHARS) + "the end"
    n = 2 * LOG_CHARS // ENTRY_CHARS
    for i in range(n):
        m.apply(Record((f"line {i} {big}",), f"c{i}", 1_700_000_000_000_000 + i, "1", "python3",
                       "sglang.service", None, False))
    kept = list(m.log)
    assert all(len(e.text) <= ENTRY_CHARS + 40 for e in kept)
    cut = len(f"line {n - 1} {big}") - ENTRY_CHARS
    assert kept[-1].text.startswith(f"line {n - 1} xxx") and f" …[cut {cut} chars]… " in kept[-1].text
    assert kept[-1].text.endswith("the end") and len(kept[-1].text.rpartition("]… ")[2]) == ENTRY_TAIL
    assert sum(len(e.text) for e in kept) <= LOG_CHARS
    assert len(kept) < n and kept[-1].seq == n and kept[-1].cursor == f"c{n - 1}"  # the newest kept, the oldest gone
    assert m.reader.lines == n
    small = HostModel("h", "sglang.service")  # an entry under the cap is kept whole
    small.apply(Record(("y" * 3_000_000,), "c", None, "1", "python3", "sglang.service", None, False))
    assert small.log[0].text == "y" * 3_000_000


def test_a_start_begins_with_systemds_started_line_and_does_not_move() -> None:
    """The demo's SGLang start (real journal records): systemd's "Started" comes 6 s before the
    server's first line, which the reader names the "starting" phase by. The start and its first
    phase begin at "Started" after every line: before, both jumped forward by 6 s at line 3, so
    "in Starting 6s" fell back to 0s."""
    from pathlib import Path

    from probes.logs.journal_json import parse_record

    path = Path(__file__).parent.parent / "tui" / "scenarios" / "sglang-startup.all.jsonl"
    m = HostModel("gpu-node-1", "sglang.service")
    began = set()
    for raw in path.read_bytes().split(b"\n")[:40]:
        if raw.strip():
            m.apply(parse_record(raw))
            s = m.state(1_741_437_000.0)
            began.add((s.start_began, s.phases[0].phase, s.phases[0].began))
    assert began == {(1_741_436_938.0, "starting", 1_741_436_938.0)}  # 2025-03-08T12:28:58Z, "Started"


def test_a_server_that_dies_while_serving_did_not_fail_to_start() -> None:
    """A start killed once ready reads 'Crashed while serving (ready)' (it read 'Start failed in
    Ready', as if it had not started), and a later start's note says 'failed: <cause>'."""
    from probes.fold.verdict import failed_words

    assert failed_words("ready", "signal") == "Crashed while serving (ready): killed by a signal."
    assert failed_words("graph_capture", "cuda_oom") == "Start failed in CUDA graph capture: CUDA out of memory."


@pytest.mark.parametrize("kind", ["config", "crashed"])
def test_a_failure_that_asked_nothing_of_the_host_does_not_end_a_lost_connection(kind: str) -> None:
    """A host that cannot be reached stays unreachable when another probe fails without asking the
    host anything (no port known for the health check, a crashed task): found by a fresh user,
    `upwatch status nosuch.invalid/sglang` said "connection ok" and exited 0."""
    m = HostModel("h", "u.service")
    m.apply(ProbeFailure(100.0, "unit", "unreachable", "h: Name or service not known"))
    m.apply(ProbeFailure(101.0, "health", kind, "h: no port known for the server"))
    s = m.state(102.0)
    assert m.unreachable() and s.failure("unit") is not None
    # whereas a command that ran on the host and failed there proves the link works
    m.apply(ProbeFailure(103.0, "gpu", "command", "nvidia-smi: not found"))
    assert not m.unreachable()


def test_a_failed_unit_before_any_log_line_does_not_say_the_log_was_silent() -> None:
    # A slow host: systemd's answer came, the journal's backlog not yet. "The log says nothing of
    # it" claimed a log that was never read (fresh-user check: it was a restart loop from CUDA OOM).
    m = HostModel("gpu-node-2", "vllm.service")
    m.apply(UnitState(1741437300.0, "vllm.service", "loaded", "failed", "failed", "exit-code",
                      exec_main_code=1, exec_main_status=1))
    v = m.state(1741437300.0).verdict
    assert v is not None and v.kind == "unit_failed"
    assert v.sentence.endswith("; no line of its log has come in yet.") and "says nothing" not in v.sentence
