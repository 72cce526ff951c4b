"""probes/ops/actions.py without a UI: argv per action, refusals, the shown command, the audit line,
running through a runner, the orphan rule and the safe restart's wait (pure, on a ManualClock)."""

from __future__ import annotations

import dataclasses

import asyncio
import json
from datetime import datetime
from pathlib import Path

import pytest

from probes.store.audit import OUTPUT_MAX_CHARS
from probes.ops.actions import ActionRefused, check_unit, execute, plan
from probes.ops.release import wait_for_release
from probes.store.audit import AuditLog
from probes.ops.release import GpuReleaseWait, orphan_pids, pids_of
from probes.store.paths import default_data_dir
from probes.clock import ManualClock
from probes.transport.runner import Completed, ProbeError
from probes.data.events import GpuApps, GpuProcess, GpuReading, GpuSample, UnitState
from probes.data.state import HostState
from probes.spec import HostSpec

T0 = 1_746_195_337.25
SPEC = HostSpec("gpu-node-1", "sglang.service")


class FakeRunner:
    """Answers every run with ``answer`` (a Completed) or raises it (a ProbeError); records argv."""

    host = "gpu-node-1"

    def __init__(self, answer):
        self.answer = answer
        self.calls: list[tuple[list[str], float]] = []

    async def run(self, argv, timeout=30.0):
        self.calls.append((list(argv), timeout))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


# --- argv and shown command ---------------------------------------------------------------------------


@pytest.mark.parametrize("action, argv", [
    ("restart", ("systemctl", "restart", "sglang.service")),
    ("stop", ("systemctl", "stop", "sglang.service")),
    ("start", ("systemctl", "start", "sglang.service")),
    ("kill", ("systemctl", "kill", "-s", "SIGKILL", "sglang.service")),
])
def test_argv_per_action_with_and_without_sudo(action, argv):
    assert plan(SPEC, action).argv == argv
    sudo = HostSpec("gpu-node-1", "sglang.service", sudo=True)
    assert plan(sudo, action).argv == ("sudo", "-n", *argv)
    user = HostSpec("gpu-node-1", "sglang.service", sudo=True, user_unit=True)  # never sudo for --user
    assert plan(user, action).argv == ("systemctl", "--user", *argv[1:])


def test_kill_pids_argv_and_shown_command():
    p = plan(HostSpec("gpu-node-1", "sglang.service", sudo=True, ssh="root@10.0.0.5:2222"), "kill_pids",
             [4242, 4243, 4242])
    assert p.argv == ("sudo", "-n", "kill", "-s", "KILL", "--", "4242", "4243")
    assert p.pids == (4242, 4243)
    assert p.shown == "ssh root@10.0.0.5:2222: sudo -n kill -s KILL -- 4242 4243"


def test_shown_command_names_the_host_and_quotes_the_unit():
    assert plan(SPEC, "restart").shown == "ssh gpu-node-1: systemctl restart sglang.service"
    assert (plan(HostSpec("gpu-node-1", "sglang.service", sudo=True), "restart").shown
            == "ssh gpu-node-1: sudo -n systemctl restart sglang.service")
    # A valid name holding a shell character (systemd's \x2d escape, an instance '@') is quoted.
    odd = HostSpec("n2", "vllm@llama\\x2d70b.service", ssh="local")
    p = plan(odd, "stop")
    assert p.argv == ("systemctl", "stop", "vllm@llama\\x2d70b.service")  # the argv itself is unquoted
    assert p.shown == "local: systemctl stop 'vllm@llama\\x2d70b.service'"


@pytest.mark.parametrize("unit", [
    "sglang.service; reboot", "$(reboot).service", "`id`.service", "a b.service", "-x.service",
    "x@.service", "sglang", "", "sglang.service\n", "../../etc.service", "x" * 300 + ".service",
])
def test_hostile_or_bad_unit_names_are_refused(unit):
    with pytest.raises(ActionRefused):
        plan(HostSpec("gpu-node-1", unit), "restart")
    with pytest.raises(ActionRefused):
        check_unit(unit)


@pytest.mark.parametrize("pids", [[0], [1], [-1], [True], ["12"], [], [4242, -1]])
def test_bad_pids_are_refused(pids):
    with pytest.raises(ActionRefused):
        plan(SPEC, "kill_pids", pids)


def test_unknown_action_is_refused():
    with pytest.raises(ActionRefused, match="unknown action"):
        plan(SPEC, "reboot")


# --- running and the audit line ------------------------------------------------------------------------


def test_audit_line_fields(tmp_path: Path):
    log = AuditLog(tmp_path / "data" / "audit.jsonl", now=lambda: T0)
    p = plan(HostSpec("gpu-node-1", "sglang.service", sudo=True), "restart")
    log.record(p, "ok", exit_status=0, output="done\n", duration_s=0.12345)
    log.record(p, "cancelled")
    raw = (tmp_path / "data" / "audit.jsonl").read_text().splitlines()
    assert len(raw) == 2
    first, second = (json.loads(line) for line in raw)
    assert set(first) == {"time", "user", "actor", "host", "target", "unit", "action", "command", "outcome",
                          "exit_status", "output", "duration_s"}
    assert first["actor"] == "tui"  # the dashboard's, when nobody says otherwise
    when = datetime.fromisoformat(first["time"])
    assert when.utcoffset() is not None and when.timestamp() == T0
    assert first["time"][-6] in "+-" and first["time"][-3] == ":"  # ±HH:MM, not a bare local time
    assert (first["host"], first["target"], first["unit"], first["action"]) == (
        "gpu-node-1", "gpu-node-1", "sglang.service", "restart")
    assert first["command"] == "ssh gpu-node-1: sudo -n systemctl restart sglang.service"
    assert (first["outcome"], first["exit_status"], first["output"], first["duration_s"]) == ("ok", 0, "done\n", 0.123)
    assert (second["outcome"], second["exit_status"], second["output"]) == ("cancelled", None, "")
    assert log.lines() == [first, second]
    assert (tmp_path / "data" / "audit.jsonl").stat().st_mode & 0o777 == 0o600


def test_default_data_dir_env_override(tmp_path: Path):
    assert default_data_dir({"UPWATCH_DATA_DIR": str(tmp_path)}) == tmp_path
    assert default_data_dir({}).name == "upwatch"


async def test_execute_ok_failed_and_error_write_audit_lines(tmp_path: Path):
    log = AuditLog(tmp_path / "audit.jsonl", now=lambda: T0)
    p = plan(SPEC, "restart")
    ok = FakeRunner(Completed(p.argv, 0, b"", b""))
    result = await execute(p, ok, log)
    assert ok.calls == [(["systemctl", "restart", "sglang.service"], 120.0)]
    assert (result.ok, result.exit_status, result.summary()) == (True, 0, "gpu-node-1: restart sglang.service: done")

    big = b"x" * 10_000 + b"\n"
    failed = FakeRunner(Completed(p.argv, 5, big, b"Failed to restart sglang.service: Unit not found.\n"))
    result = await execute(p, failed, log)
    assert (result.outcome, result.exit_status) == ("failed", 5)
    assert result.summary() == "gpu-node-1: restart sglang.service: exit 5: Failed to restart sglang.service: Unit not found."
    assert result.output.endswith("Unit not found.\n") and len(result.output) <= OUTPUT_MAX_CHARS + 40

    result = await execute(p, FakeRunner(ProbeError("unreachable", "gpu-node-1: connection refused")), log)
    assert (result.outcome, result.exit_status, result.output) == ("error", None, "gpu-node-1: connection refused")

    await execute(p, ok, log, actor="mcp")
    assert log.lines()[-1]["actor"] == "mcp"
    log.refused(SPEC, "kill", "not offered")
    assert log.lines()[-1]["actor"] == "tui"
    assert log.refused(SPEC, "stop", "read-only", actor="mcp")["actor"] == "mcp"

    lines = log.lines()[:3]
    assert [(r["outcome"], r["exit_status"]) for r in lines] == [("ok", 0), ("failed", 5), ("error", None)]
    assert lines[1]["output"].startswith("[") and lines[1]["output"].endswith("Unit not found.\n")


# --- orphans and the GPU-release wait ----------------------------------------------------------------------

GPU0, GPU1, GPU2 = "GPU-aaaa", "GPU-bbbb", "GPU-cccc"


def _gpus(t: float, used: tuple[int | None, ...]) -> GpuReading:
    return GpuReading(t, tuple(GpuSample(i, u, "NVIDIA H100", m, 81559, 0)
                               for i, (u, m) in enumerate(zip((GPU0, GPU1, GPU2), used))))


def _apps(t: float, *procs: tuple[int, str, int | None, str]) -> GpuApps:
    index = {GPU0: 0, GPU1: 1, GPU2: 2}
    return GpuApps(t, tuple(GpuProcess(pid, name, mem, uuid, index[uuid]) for pid, name, mem, uuid in procs))


def _state(t: float, apps: GpuApps | None, gpus: GpuReading | None, main_pid: int | None = 100) -> HostState:
    unit = UnitState(t, "sglang.service", "loaded", "active", "running", main_pid=main_pid)
    return HostState("gpu-node-1", "sglang.service", unit_state=unit, gpu_apps=apps, gpus=gpus)


def test_orphan_pids_come_from_the_cgroup_verdict_not_a_guess():
    from probes.data.events import GpuOrphan

    apps = _apps(T0, (100, "sglang::scheduler", 70000, GPU0), (101, "sglang::scheduler_TP1", 70000, GPU1),
                 (555, "python3 old.py", 30000, GPU1))
    s = dataclasses.replace(_state(T0, apps, None), gpu_orphans=(
        GpuOrphan(555, "python3 old.py --port 30000", 30000, 1), GpuOrphan(555, "python3 old.py --port 30000", 2000, 2),
        GpuOrphan(777, "[N/A]", None, 2)))
    assert orphan_pids(s) == [(555, "python3 old.py --port 30000", 32000), (777, "[N/A]", None)]
    # The cgroup was not read: the TP1 worker must not be offered for killing on a guess.
    assert orphan_pids(_state(T0, apps, None)) == []


def test_release_wait_needs_a_fresh_sample_then_no_process_on_the_units_gpus():
    before = _state(T0, _apps(T0, (100, "sglang::scheduler_TP0", 70000, GPU0), (101, "sglang::scheduler_TP1", 70000, GPU1)),
                    _gpus(T0, (70500, 70500, 3)))
    wait = GpuReleaseWait(before, stopped_at=T0 + 1, timeout_s=120)
    assert wait.gpus == {GPU0, GPU1}
    # Samples from before the stop do not count, whatever they say.
    s = wait.observe(before, T0 + 2)
    assert (s.state, s.fresh, s.holders) == ("waiting", False, ())
    assert s.describe() == "no GPU sample since the stop yet (1 s)"
    # After the stop: TP1 is still going; a process on another GPU (GPU2) is not ours to wait for.
    mid = _state(T0 + 5, _apps(T0 + 5, (101, "sglang::scheduler_TP1", 70000, GPU1), (999, "other", 500, GPU2)),
                 _gpus(T0 + 5, (3, 70500, 503)))
    s = wait.observe(mid, T0 + 6)
    assert (s.state, s.waited_s, [p.pid for p in s.holders]) == ("waiting", 5.0, [101])
    assert s.describe() == "still held after 5 s by:\n  pid 101 sglang::scheduler_TP1 (70000 MiB on GPU 1)"
    done = _state(T0 + 10, _apps(T0 + 10, (999, "other", 500, GPU2)), _gpus(T0 + 10, (3, 3, 503)))
    s = wait.observe(done, T0 + 10)
    assert (s.state, s.holders, s.used_mib) == ("released", (), ((0, 3), (1, 3)))
    # Still held at the deadline: timed out, with the holders to offer for killing.
    s = wait.observe(mid, T0 + 121)
    assert (s.state, pids_of(s.holders)) == ("timed_out", [101])


def test_release_wait_without_process_list_uses_memory_and_all_gpus():
    before = _state(T0, None, _gpus(T0, (70500, 70500, 70500)))
    wait = GpuReleaseWait(before, stopped_at=T0, timeout_s=30, idle_mib=1024)
    assert wait.gpus == {GPU0, GPU1, GPU2}
    assert wait.observe(_state(T0 + 2, None, _gpus(T0 + 2, (500, 900, 2000))), T0 + 2).state == "waiting"
    assert wait.observe(_state(T0 + 3, None, _gpus(T0 + 3, (500, None, 3))), T0 + 3).state == "waiting"
    s = wait.observe(_state(T0 + 4, None, _gpus(T0 + 4, (500, 900, 1024))), T0 + 4)
    assert s.state == "released"
    s = wait.observe(_state(T0 + 31, None, _gpus(T0 + 31, (500, 900, 2000))), T0 + 31)
    assert s.state == "timed_out" and s.describe() == (
        "memory still in use after 31 s (GPU 0: 500 MiB, GPU 1: 900 MiB, GPU 2: 2000 MiB)")


async def test_wait_for_release_polls_snapshots_on_the_injected_clock():
    clock = ManualClock(T0)
    before = _state(T0, _apps(T0, (100, "sglang", 70000, GPU0)), _gpus(T0, (70500, 3, 3)))
    current = {"s": before}
    seen: list[tuple[str, float]] = []
    wait = GpuReleaseWait(before, stopped_at=T0, timeout_s=120)
    task = asyncio.create_task(wait_for_release(wait, lambda: current["s"], clock, poll_s=1.0,
                                                on_status=lambda st: seen.append((st.state, st.waited_s))))
    await clock.advance(3)
    current["s"] = _state(T0 + 3.5, _apps(T0 + 3.5), _gpus(T0 + 3.5, (3, 3, 3)))
    await clock.advance(1)
    status = await asyncio.wait_for(task, 1)
    assert status.state == "released" and status.waited_s == 4.0
    assert seen == [("waiting", 0.0), ("waiting", 1.0), ("waiting", 2.0), ("waiting", 3.0), ("released", 4.0)]

    # Never released: the wait ends at the timeout, on clock time alone.
    wait = GpuReleaseWait(before, stopped_at=clock.now(), timeout_s=10)
    current["s"] = _state(clock.now(), _apps(clock.now(), (4242, "python3", 1000, GPU0)), None)
    task = asyncio.create_task(wait_for_release(wait, lambda: current["s"], clock, poll_s=2.0))
    await clock.advance(10)
    status = await asyncio.wait_for(task, 1)
    assert status.state == "timed_out" and status.waited_s == 10.0 and pids_of(status.holders) == [4242]
