"""probes.fold.notify: which changes between two snapshots are news, timed by the event's own time."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

from probes.fold.notify import Notice, NoticeTracker, notices, url_label
from probes.data.reading import ErrorLine, FailedStart
from probes.data.state import HostState, PhaseSpan
from probes.data.events import UnitState
from probes.fold.verdict import judge

T = 1_700_000_000.0          # the server's start
SINCE = T + 60.0             # the dashboard connected a minute into it
HOST, UNIT = "gpu-node-3", "sglang.service"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unit(t: float, active: str = "activating", sub: str = "start", result: str = "success") -> UnitState:
    return UnitState(time=t, unit=UNIT, load_state="loaded", active_state=active, sub_state=sub, result=result)


def loading(start: float = T, last: float = T + 30.0, phase: str = "weights", **kw) -> HostState:
    spans = (PhaseSpan("starting", start, 10.0), PhaseSpan(phase, start + 10.0, None))
    s = HostState(HOST, UNIT, engine="sglang", state="loading", phase=phase, phases=spans, start_began=start,
                  phase_began=start + 10.0, last_log_at=last, log_count=20, **kw)
    return judge(s, last)


def ready(start: float = T, at: float = T + 252.0) -> HostState:
    spans = (PhaseSpan("starting", start, 10.0), PhaseSpan("weights", start + 10.0, at - start - 10.0),
             PhaseSpan("ready", at, None))
    return judge(HostState(HOST, UNIT, engine="sglang", state="ready", phase="ready", phases=spans,
                           start_began=start, phase_began=at, last_log_at=at, log_count=40), at)


def failed(start: float = T, at: float = T + 100.0, **kw) -> HostState:
    err = ErrorLine(35, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", "lower --mem-fraction-static")
    s = HostState(HOST, UNIT, engine="sglang", state="failed", phase="init",
                  phases=(PhaseSpan("starting", start, 10.0), PhaseSpan("init", start + 10.0, None)),
                  start_began=start, error=err, failed_at=at, cause="cuda_oom", last_log_at=at + 1.0,
                  log_count=36, **kw)
    return judge(s, at + 1.0)


# --- ready ---------------------------------------------------------------------------------------

def test_ready_after_since_is_told_once_with_its_own_time() -> None:
    [n] = notices(loading(), ready(), SINCE)
    assert n == Notice(HOST, UNIT, "ready", "ready after 4m12s", T + 252.0)
    assert n.text == "gpu-node-3 sglang.service: ready after 4m12s"
    assert n.to_json() == {"text": "gpu-node-3 sglang.service: ready after 4m12s", "host": HOST, "unit": UNIT,
                           "kind": "ready", "sentence": "ready after 4m12s", "time": T + 252.0}
    # The same start seen ready again (a health poll, a tick): nothing new, also when its start
    # time moved (the unit's start timestamp came after the journal).
    assert notices(ready(), dataclasses.replace(ready(), readiness="serving"), SINCE) == []
    assert notices(ready(), dataclasses.replace(ready(), start_began=T + 2), SINCE) == []


def test_ready_in_the_backlog_is_not_told() -> None:
    yesterday = SINCE - 86400
    # First snapshot, and a snapshot after an empty one (the backlog came in pieces): both history.
    assert notices(None, ready(yesterday, yesterday + 200), SINCE) == []
    assert notices(HostState(HOST, UNIT), ready(yesterday, yesterday + 200), SINCE) == []
    # Ready one second before connecting is history too; at the instant of connecting it is news.
    assert notices(None, ready(T, SINCE - 1), SINCE) == []
    assert [n.time for n in notices(None, ready(T, SINCE), SINCE)] == [SINCE]


def test_a_new_start_that_gets_ready_is_told_again() -> None:
    tracker = NoticeTracker(SINCE)
    assert [n.kind for n in tracker.update(loading())] == []
    assert [n.sentence for n in tracker.update(ready())] == ["ready after 4m12s"]
    assert tracker.update(ready()) == []                       # repeated snapshot
    assert tracker.update(HostState(HOST, UNIT)) == []         # a flicker to nothing known ...
    assert tracker.update(ready()) == []                       # ... and back: the same start, told once
    restart = T + 1000.0
    assert tracker.update(loading(restart, restart + 5)) == []
    [again] = tracker.update(ready(restart, restart + 90.0))
    assert (again.sentence, again.time) == ("ready after 1m30s", restart + 90.0)


# --- failed --------------------------------------------------------------------------------------

def test_failed_is_told_with_the_verdict_sentence_and_the_decisive_line_time() -> None:
    cur = failed()
    [n] = notices(loading(), cur, SINCE)
    assert n == Notice(HOST, UNIT, "failed", "Start failed in Init: CUDA out of memory.", T + 100.0)
    assert n.text == "gpu-node-3 sglang.service: Start failed in Init: CUDA out of memory."
    assert notices(cur, cur, SINCE) == []


def test_a_start_that_failed_and_restarted_between_snapshots_is_told() -> None:
    """Snapshots are taken a few times a second at most: systemd may restart a failed start before
    one shows it failed. The new decisive line is the failure."""
    err = ErrorLine(35, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", "")
    again = judge(dataclasses.replace(
        loading(T + 104, T + 106), error=err, failed_at=T + 100, starts=2,
        failed_starts=(FailedStart("cuda_oom", "init", iso(T)),)), T + 106)
    [n] = notices(loading(), again, SINCE - 100)
    assert n == Notice(HOST, UNIT, "failed", "Start failed in Init: CUDA out of memory.", T + 100)
    assert notices(again, dataclasses.replace(again, last_log_at=T + 107), SINCE - 100) == []
    # Seen failed first, then restarted: one notice for the one failure.
    tracker = NoticeTracker(SINCE - 100)
    assert [x.kind for x in tracker.update(failed())] == ["failed"]
    assert tracker.update(again) == []


def test_failed_in_the_backlog_is_not_told() -> None:
    assert notices(None, failed(T - 3600, T - 3500), SINCE) == []
    assert notices(loading(T - 3600, T - 3590), failed(T - 3600, T - 3500), SINCE) == []


def test_failed_without_log_times_is_told_only_when_seen_live() -> None:
    """systemd says failed, the log has nothing to time it: told when the previous snapshot saw the
    unit running (the unit poll that saw it fail gives the time), never from a first snapshot."""
    dead = HostState(HOST, UNIT, state="failed", unit_state=unit(SINCE + 30, "failed", "failed", "signal"))
    dead = judge(dead, SINCE + 30)
    was_running = HostState(HOST, UNIT, state="loading", unit_state=unit(SINCE + 29, "active", "running"))
    [n] = notices(was_running, dead, SINCE)
    assert (n.kind, n.time) == ("failed", SINCE + 30)
    assert n.sentence == "Unit sglang.service failed (result signal); no line of its log has come in yet."
    assert notices(None, dead, SINCE) == []
    # A failure logged in the backlog but watched as it happened (the unit poll saw it go): told.
    seen = failed(T - 3600, T - 3500, unit_state=unit(SINCE + 30, "failed", "failed", "exit-code"))
    [n] = notices(dataclasses.replace(was_running, unit_state=unit(SINCE + 29, "active", "running")), seen, SINCE)
    assert (n.kind, n.time) == ("failed", SINCE + 30)


# --- restart loop --------------------------------------------------------------------------------

def _loop(last_fail: float, *, gave_up: bool = False, state: str = "loading") -> HostState:
    starts = (FailedStart("cuda_oom", "init", iso(T)), FailedStart("cuda_oom", "init", iso(T + 60)))
    err = ErrorLine(80, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", "")
    u = unit(last_fail + 2, "failed", "failed", "start-limit-hit") if gave_up else unit(last_fail + 2, "activating",
                                                                                         "auto-restart")
    s = HostState(HOST, UNIT, engine="sglang", state="failed" if gave_up else state, phase="init",
                  start_began=T + 60, error=err, failed_at=last_fail, cause="cuda_oom", restart_loop=True,
                  failed_starts=starts, starts=2, last_log_at=last_fail + 1, unit_state=u, log_count=90)
    return judge(s, last_fail + 2)


def test_restart_loop_is_told_once_per_loop_not_per_failed_start() -> None:
    first_fail = failed(T, SINCE + 10)
    [f] = notices(loading(), first_fail, SINCE)
    assert f.kind == "failed"
    loop = _loop(SINCE + 70)
    [n] = notices(first_fail, loop, SINCE)
    assert (n.kind, n.time) == ("restart_loop", SINCE + 70)
    assert n.sentence == "Restart loop: 2 starts failed in 2m10s, each CUDA out of memory during init; starting again."
    # The loop goes on: a further failed start is not told again ...
    assert notices(loop, _loop(SINCE + 130), SINCE) == []
    # ... until systemd gives up: that is told, as a failure, with the loop's sentence.
    [g] = notices(_loop(SINCE + 130), _loop(SINCE + 190, gave_up=True), SINCE)
    assert (g.kind, g.time) == ("failed", SINCE + 190)
    assert g.sentence.startswith("Restart loop: 2 starts failed") and "systemd gave up" in g.sentence
    assert notices(_loop(SINCE + 190, gave_up=True), _loop(SINCE + 190, gave_up=True), SINCE) == []


def test_restart_loop_in_the_backlog_is_not_told() -> None:
    assert notices(None, _loop(SINCE - 600, gave_up=True), SINCE) == []
    assert notices(HostState(HOST, UNIT), _loop(SINCE - 20), SINCE) == []


def test_a_loop_from_before_is_told_when_it_fails_again_after_since() -> None:
    # Looping before upwatch connected (not told), then started by hand and failing again: live now.
    [n] = notices(_loop(SINCE - 600), _loop(SINCE + 30), SINCE)
    assert (n.kind, n.time) == ("restart_loop", SINCE + 30)
    assert notices(_loop(SINCE + 30), _loop(SINCE + 90), SINCE) == []  # then once per loop, as always


# --- stalled -------------------------------------------------------------------------------------

def _stalled(last: float, now: float, stall_after=None) -> HostState:
    base = HostState(HOST, UNIT, engine="sglang", state="loading", phase="graph_capture", start_began=T,
                     phase_began=T + 20, last_log_at=last, log_count=30)
    return judge(base, now, stall_after)


def test_stalled_is_told_at_silence_plus_limit() -> None:
    quiet = _stalled(SINCE - 30, SINCE + 80)          # went quiet before connecting, not stalled yet
    assert quiet.verdict is None
    stalled = _stalled(SINCE - 30, SINCE + 95)
    assert stalled.verdict is not None and stalled.verdict.kind == "stalled"
    [n] = notices(quiet, stalled, SINCE)
    assert (n.kind, n.time) == ("stalled", SINCE + 90)  # the last line + the 120 s default limit
    assert n.sentence == "No log line for 2m05s in CUDA graph capture: the start looks hung."
    assert notices(stalled, _stalled(SINCE - 30, SINCE + 200), SINCE) == []


def test_stalled_uses_the_hosts_limit_and_skips_old_silences() -> None:
    limits = {"graph_capture": 600.0}
    assert _stalled(SINCE, SINCE + 300, limits).verdict is None
    [n] = notices(None, _stalled(SINCE, SINCE + 601, limits), SINCE, limits)
    assert n.time == SINCE + 600
    # Hung since yesterday: the stall began long before connecting.
    assert notices(None, _stalled(SINCE - 86400, SINCE + 1), SINCE) == []


def test_stalled_flicker_is_told_once_and_a_new_silence_again() -> None:
    tracker = NoticeTracker(SINCE)
    assert tracker.update(_stalled(SINCE, SINCE + 10)) == []
    assert [n.kind for n in tracker.update(_stalled(SINCE, SINCE + 130))] == ["stalled"]
    # another verdict wins for a moment (GPU memory outside the unit), then the stall is back
    other = dataclasses.replace(_stalled(SINCE, SINCE + 140), verdict=None)
    assert tracker.update(other) == []
    assert tracker.update(_stalled(SINCE, SINCE + 150)) == []
    # a line came, then silence again: a new stall
    assert tracker.update(_stalled(SINCE + 200, SINCE + 210)) == []
    assert [n.time for n in tracker.update(_stalled(SINCE + 200, SINCE + 330))] == [SINCE + 320]


# --- text ----------------------------------------------------------------------------------------

def test_text_has_no_control_characters_and_urls_hide_their_path() -> None:
    n = Notice("h\x1b[31m", UNIT, "failed", "bad\nline\x07", T)
    assert n.text == "h sglang.service: bad line"  # the escape sequence goes whole (probes.hosttext)
    assert n.to_json()["sentence"] == "bad line"
    assert url_label("https://hooks.slack.com/services/T0/B0/s3cr3t") == "https://hooks.slack.com/…"
    assert url_label("http://user:pw@127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert url_label("http://[::1]:9/x?token=1") == "http://[::1]:9/…"


def test_a_restart_loops_sentence_does_not_grow_with_the_clock() -> None:
    """The span is from the first failed start's beginning to the last failure: the same figure at
    any later moment (it was 'now - first start', so '2 failed in 1m55s' grew each second, then
    fell to '3 failed in 1m54s' when the third failed)."""
    s = _loop(SINCE + 70)
    assert judge(s, SINCE + 75).verdict.sentence == judge(s, SINCE + 500).verdict.sentence
    assert " 2 starts failed in 2m10s," in judge(s, SINCE + 500).verdict.sentence
