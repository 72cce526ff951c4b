"""``upwatch wait``'s pure parts: which snapshot decides which exit status, the lines it prints."""

from __future__ import annotations

import dataclasses
import io

import pytest

from probes.data.reading import ErrorLine, Progress
from probes.data.state import HostState, PhaseSpan, Verdict
from probes.data.events import UnitState
from tui.wait import _NOT_ALLOWED_RE, wait
from tui.wait_rules import (
    EXIT_FAILED, EXIT_LOOP, EXIT_READY, EXIT_UNREACHABLE, decisive_line_known, describe, outcome, tty_line,
)

T0 = 1_764_460_800.0  # 2025-11-30 00:00 UTC


def unit(active: str = "active", sub: str = "running", started: float | None = T0 + 10, at: float = T0 + 20,
         load: str = "loaded") -> UnitState:
    return UnitState(time=at, unit="sglang.service", load_state=load, active_state=active, sub_state=sub,
                     main_pid=4242 if sub == "running" else None, started_at=started)


def state(**kw) -> HostState:
    base = dict(host="gpu-node-3", unit="sglang.service", engine="sglang", state="loading", phase="weights",
                readiness="port_closed", unit_state=unit(), updated=T0 + 20)
    base.update(kw)
    return HostState(**base)


def test_ready_needs_the_log_health_and_a_start_after_since() -> None:
    ready = state(state="ready", phase="ready", readiness="healthy")
    assert outcome(ready, since=0, until="ready") == EXIT_READY
    assert outcome(ready, since=T0 + 11, until="ready") == EXIT_READY  # whole seconds: 1 s of slack
    assert outcome(ready, since=T0 + 12, until="ready") is None        # the process before the restart
    assert outcome(ready, since=0, until="serving") is None            # healthy is not serving yet
    assert outcome(dataclasses.replace(ready, readiness="serving"), since=0, until="serving") == EXIT_READY
    assert outcome(dataclasses.replace(ready, health_stale=True), since=0, until="ready") is None
    assert outcome(dataclasses.replace(ready, state="loading", phase="warmup"), since=0, until="ready") is None
    assert outcome(dataclasses.replace(ready, readiness="http_unhealthy"), since=0, until="ready") is None


def test_a_look_at_the_unit_from_before_the_restart_decides_nothing() -> None:
    old_failed = state(state="failed", unit_state=unit("failed", "failed", at=T0 + 5),
                       error=ErrorLine(3, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", ""))
    assert outcome(old_failed, since=T0 + 6, until="ready", unit_after=T0 + 7) is None
    assert outcome(old_failed, since=0, until="ready") == EXIT_FAILED  # without --restart: it failed


def test_failed_loop_and_the_auto_restart_between() -> None:
    err = ErrorLine(3, "torch.OutOfMemoryError: CUDA out of memory.", "cuda_oom", "")
    auto = state(state="failed", error=err, failed_at=T0 + 15, unit_state=unit("activating", "auto-restart", started=T0 + 10))
    assert outcome(auto, since=T0, until="ready") is None  # systemd will start it again: a loop may form
    assert outcome(dataclasses.replace(auto, restart_loop=True), since=T0, until="ready") == EXIT_LOOP
    dead = dataclasses.replace(auto, unit_state=unit("failed", "failed", started=T0 + 10))
    assert outcome(dead, since=T0, until="ready") == EXIT_FAILED
    # two failed starts with no ready between: a loop only while systemd restarts it, or gave up
    by_hand = dataclasses.replace(dead, restart_loop=True)  # NRestarts 0: started by hand again
    assert outcome(by_hand, since=T0, until="ready") == EXIT_FAILED
    gave_up = dataclasses.replace(by_hand, unit_state=dataclasses.replace(by_hand.unit_state, n_restarts=3))
    assert outcome(gave_up, since=T0, until="ready") == EXIT_LOOP
    assert outcome(state(unit_state=unit("inactive", "dead", load="not-found", started=None)), since=0,
                   until="ready") == EXIT_FAILED
    assert decisive_line_known(dead)
    assert not decisive_line_known(dataclasses.replace(dead, error=None))
    assert not decisive_line_known(dataclasses.replace(dead, failed_at=T0 - 60))  # an earlier start's line


def test_unreachable_and_not_allowed_exit_4() -> None:
    from probes.data.events import ProbeFailure

    never = state(unit_state=None, updated=None, stale_since=T0,
                  failures=(ProbeFailure(T0, "unit", "unreachable", "connection refused"),))
    assert outcome(never, since=0, until="ready") == EXIT_UNREACHABLE
    perm = state(failures=(ProbeFailure(T0, "journal", "permission", "the SSH user may not read the journal"),))
    assert outcome(perm, since=0, until="ready") == EXIT_UNREACHABLE
    blip = state(stale_since=T0 + 19, failures=(ProbeFailure(T0 + 19, "unit", "unreachable", "reset"),))
    assert outcome(blip, since=0, until="ready") is None  # a dropped link after data: reconnecting


@pytest.mark.parametrize(("text", "refused"), [
    ("sudo: a password is required\n", True),
    ("Failed to restart sglang.service: Interactive authentication required.\nSee system logs and 'systemctl status sglang.service' for details.\n", True),
    ("Failed to restart sglang.service: Access denied\n", True),
    ("Job for sglang.service failed because the control process exited with error code.\n", False),
])
def test_what_counts_as_not_allowed(text: str, refused: bool) -> None:
    assert (_NOT_ALLOWED_RE.search(text) is not None) is refused


def test_the_lines() -> None:
    s = state(phase="graph_capture", progress=Progress("graph_capture", 12, 34), phase_began=T0 + 100,
              start_began=T0 + 10, phases=(PhaseSpan("starting", T0 + 10, 90.0), PhaseSpan("graph_capture", T0 + 100, None)))
    assert describe(s) == "gpu-node-3: loading · Graph capture 12/34 (35%) · port closed"
    line = tty_line(s, T0 + 172, width=200)
    assert line.startswith("gpu-node-3 Graph capture [#######.............] 12/34 · ")
    assert line.endswith(" · port closed")
    assert "1m12s in graph capture" in line or "of ~" in line
    assert len(tty_line(s, T0 + 172, width=30)) <= 29
    hostile = state(host="h", error=ErrorLine(1, "\x1b[31mboom\x1b[0m\r", "unknown", "[bold]x"), state="failed",
                    verdict=Verdict("error", "Start failed: \x1b[2J", "failed"))
    out, err = io.StringIO(), io.StringIO()
    from tui.wait import _final
    _final(hostile, EXIT_FAILED, out, err)
    assert out.getvalue() == ""  # the reason of a failure goes to stderr
    assert "\x1b" not in err.getvalue() and "\r" not in err.getvalue()
    assert "  decisive line: boom\n" in err.getvalue()  # escape sequences go whole (probes.hosttext)


def test_read_only_refuses_restart_before_connecting() -> None:
    import asyncio

    from probes.spec import HostSpec
    from tui.config import Config

    class NoRunner:
        def __getattr__(self, name):  # any use of the runner is a failure of this test
            raise AssertionError(f"the runner was used: {name}")

    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(wait(HostSpec("gpu-node-3", "sglang.service", ssh="gpu-node-3"), NoRunner(),
                            restart=True, until="ready", timeout_s=5, out=out, tty=False,
                            config=Config(hosts=(), read_only=True), err=err))
    assert code == EXIT_UNREACHABLE and out.getvalue() == ""
    assert err.getvalue() == "gpu-node-3: --restart refused: read-only (read_only = true in the configuration)\n"


@pytest.mark.parametrize("argv", [["wait"], ["wait", "nohost"], ["wait", "a/b.service", "c/d.service"],
                                  ["wait", "--timeout", "5x", "a/b.service"], ["wait", "--until", "soon", "a/b"]])
def test_bad_arguments_exit_64_not_2(argv: list[str], tmp_path, monkeypatch) -> None:
    from tui.cli import main

    monkeypatch.setenv("UPWATCH_CONFIG", str(tmp_path / "hosts.toml"))
    (tmp_path / "hosts.toml").write_text('[[host]]\nname = "gpu-node-1"\nssh = "gpu-node-1"\nunit = "sglang.service"\n')
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 64


def test_a_reader_that_leaves_does_not_change_the_outcome() -> None:
    from tui.wait import _PipeSafe

    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    out = _PipeSafe(Closed())
    assert out.write("gpu-node-3: loading\n") == len("gpu-node-3: loading\n")
    out.flush()
    out.write("more")  # quiet from now on, never raising


async def test_a_failure_seen_as_the_time_runs_out_is_the_failure_not_a_timeout() -> None:
    # `upwatch wait --timeout 0` on a restart loop systemd had given up on exited 3 ("not ready
    # after 0 s: Restart loop ...") because the wait was still holding the failure for its log
    # line when the time ran out (fresh-user check): a script reads 3 as "still starting".
    import asyncio

    from probes.clock import ManualClock
    from tui.wait import EXIT_TIMEOUT, settle

    dead = state(state="failed", error=None, restart_loop=True,
                 unit_state=dataclasses.replace(unit("failed", "failed", started=T0 + 10), n_restarts=3))
    assert outcome(dead, since=T0, until="ready") == EXIT_LOOP and not decisive_line_known(dead)

    class Looked:  # the one watcher method and attribute settle uses
        clock = ManualClock(T0 + 30)

        def state(self) -> HostState:
            return dead

    end = await settle(Looked(), asyncio.Event(), since=T0, until="ready", timeout_s=0.0)  # type: ignore[arg-type]
    assert end.code == EXIT_LOOP != EXIT_TIMEOUT, end


@pytest.mark.parametrize("probe", ["journal", "unit"])
async def test_a_timeout_while_the_unit_or_journal_cannot_be_read_is_4_not_3(probe: str) -> None:
    # `upwatch wait --timeout 10` on a host whose journalctl fails exited 3, "not ready after 10 s:
    # Cannot read the journal: ..." (a tester's finding): 3 reads "read, not ready yet", but what
    # decides readiness was not read. Before BLIND_GIVE_UP_S the wait goes on; at its timeout the
    # answer is 4 with the reason. A host read and not ready stays 3.
    import asyncio

    from probes.clock import ManualClock
    from probes.data.events import ProbeFailure
    from tui.wait import EXIT_TIMEOUT, settle

    failing = ProbeFailure(T0 + 25, probe, "command", f"journalctl exited 1: Failed to open {probe}")
    blind = state(failures=(failing,))

    class Looked:  # the one watcher method and attribute settle uses
        def __init__(self, s: HostState) -> None:
            self.s = s
            self.clock = ManualClock(T0 + 30)  # 5 s of failing: less than BLIND_GIVE_UP_S

        def state(self) -> HostState:
            return self.s

    assert outcome(blind, since=0, until="ready", now=T0 + 30) is None  # it may come back: wait on
    end = await settle(Looked(blind), asyncio.Event(), since=0, until="ready", timeout_s=0.0)  # type: ignore[arg-type]
    assert end.code == EXIT_UNREACHABLE, end
    assert end.sentence == f"gpu-node-3: cannot see after 0 s: the {probe}: {failing.message}", end
    read = await settle(Looked(state()), asyncio.Event(), since=0, until="ready", timeout_s=0.0)  # type: ignore[arg-type]
    assert read.code == EXIT_TIMEOUT and read.sentence.startswith("not ready after 0 s: "), read


async def test_a_timeout_after_the_link_dropped_is_4_not_3() -> None:
    # The host answered, then its connection was lost: "not ready after N s" (3) read as "read, not
    # ready yet" (a helper's finding); what it says now is not known.
    import asyncio

    from probes.clock import ManualClock
    from tui.wait import settle

    lost = state(stale_since=T0 + 20, updated=T0 + 10,
                 verdict=Verdict("warning", "Connection lost at 12:00:20; reconnecting (attempt 2).", kind="stale"))

    class Looked:
        clock = ManualClock(T0 + 30)

        def state(self) -> HostState:
            return lost

    end = await settle(Looked(), asyncio.Event(), since=0, until="ready", timeout_s=0.0)  # type: ignore[arg-type]
    assert end.code == EXIT_UNREACHABLE, end
    assert end.sentence == "gpu-node-3: unreachable at the timeout (0 s): Connection lost at 12:00:20; reconnecting (attempt 2).", end


async def test_a_timeout_while_health_cannot_be_asked_of_a_ready_log_is_4() -> None:
    # The log says ready, the health probe cannot run (no port known, the tunnel refused): 3's
    # "not ready" would be a guess (a helper's finding). While the log says loading, 3 stays.
    import asyncio

    from probes.clock import ManualClock
    from probes.data.events import ProbeFailure
    from tui.wait import EXIT_TIMEOUT, settle

    failing = ProbeFailure(T0 + 25, "health", "config", "gpu-node-3: no port known for the server")

    class Looked:
        def __init__(self, s: HostState) -> None:
            self.s = s
            self.clock = ManualClock(T0 + 30)

        def state(self) -> HostState:
            return self.s

    ready = state(state="ready", phase="ready", readiness="unknown", failures=(failing,))
    end = await settle(Looked(ready), asyncio.Event(), since=0, until="ready", timeout_s=0.0)  # type: ignore[arg-type]
    assert (end.code, end.sentence) == (
        EXIT_UNREACHABLE, "gpu-node-3: cannot check health after 0 s: gpu-node-3: no port known for the server"), end
    loading = state(readiness="unknown", failures=(failing,))
    end = await settle(Looked(loading), asyncio.Event(), since=0, until="ready", timeout_s=0.0)  # type: ignore[arg-type]
    assert end.code == EXIT_TIMEOUT, end


async def test_the_timeout_counts_from_when_wait_begins(monkeypatch) -> None:
    # --timeout 10 waited 10 s more after connecting and reading the backlog (up to 15 s) and the
    # restart (a tester's finding): settle is given the time wait began.
    import time

    import tui.wait as waitmod
    from probes.clock import WallClock
    from probes.spec import HostSpec
    from probes.transport.replay.runner import ReplayRunner
    from tui.demo import demo_scenarios

    seen: dict[str, float] = {}

    async def backlog(*_a, **_k) -> None:
        seen["backlog"] = time.monotonic()

    async def settle(w, changed, **kw):
        seen["started"] = kw["started"]
        return waitmod.WaitEnd(waitmod.EXIT_TIMEOUT, w.state(), "not ready after 10 s: x")

    monkeypatch.setattr(waitmod, "read_backlog", backlog)
    monkeypatch.setattr(waitmod, "settle", settle)
    clock = WallClock()
    sc = next(s for s in demo_scenarios(clock.now()) if s.host == "gpu-node-1")
    before = time.monotonic()
    code = await waitmod.wait(HostSpec(sc.host, sc.unit, sc.port, sc.engine), ReplayRunner(sc, clock),
                              restart=False, until="ready", timeout_s=10, out=io.StringIO(), tty=False,
                              err=io.StringIO())
    assert code == waitmod.EXIT_TIMEOUT
    assert before <= seen["started"] <= seen["backlog"]
