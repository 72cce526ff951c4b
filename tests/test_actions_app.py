"""The actions through the real app (Pilot), on the real sshd of tests/testhost.py and on a real
systemd (tests/systemd_host.py). Every wait polls with a deadline."""

from __future__ import annotations

from pathlib import Path

from probes.store.audit import AuditLog
from probes.clock import WallClock
from probes.spec import HostSpec
from testhost import TestHost
from tui.actions import READ_ONLY_MESSAGE, ConfirmScreen, SafeRestartScreen
from tui.app import make_app
from tui.config import Config
from tui.detail_screen import DetailScreen
from tui.screens import OverviewScreen
from waiting import until




def _app(spec: HostSpec, runner_factory, tmp_path: Path, **kw):
    config = Config(hosts=(spec,), unit_interval_s=1.0, health_interval_s=5.0, gpu_interval_s=1.0)
    audit = AuditLog(tmp_path / "audit.jsonl")
    return make_app(config, runner_factory, WallClock(), audit=audit, **kw), audit


def _notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def _confirm(pilot) -> None:
    await pilot.press("tab")  # from Cancel to Confirm: an explicit choice
    assert pilot.app.screen.focused.id == "confirm"
    await pilot.press("enter")


async def test_restart_cancel_then_confirm_with_sudo(testhost: TestHost, tmp_path: Path) -> None:
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target, port=testhost.health.port, sudo=True)
    app, audit = _app(spec, lambda s: testhost.runner(), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("r")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        modal = app.screen
        assert modal.command_text == f"ssh {testhost.target}: sudo -n systemctl restart sglang.service"
        assert modal.title_text == "restart sglang.service on gpu-node-1?"
        assert modal.focused is not None and modal.focused.id == "cancel"
        await pilot.press("escape")
        await until("back on the overview", lambda: isinstance(app.screen, OverviewScreen), pilot=pilot)
        assert testhost.log("systemctl.log") == []
        [cancelled] = audit.lines()
        assert (cancelled["outcome"], cancelled["action"], cancelled["exit_status"]) == ("cancelled", "restart", None)
        assert cancelled["command"] == modal.command_text

        # n cancels too; enter on the focused Cancel as well.
        await pilot.press("r")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        await pilot.press("n")
        await until("back", lambda: isinstance(app.screen, OverviewScreen), pilot=pilot)
        await pilot.press("r")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        await pilot.press("enter")
        await until("back", lambda: isinstance(app.screen, OverviewScreen), pilot=pilot)
        assert testhost.log("systemctl.log") == []

        await pilot.press("r")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        await _confirm(pilot)
        await until("systemctl ran", lambda: testhost.log("systemctl.log"), pilot=pilot)
        assert testhost.log("systemctl.log") == ["restart sglang.service"]
        assert "-n systemctl restart sglang.service" in testhost.log("sudo.log")
        await until("the notification", lambda: "gpu-node-1: restart sglang.service: done" in _notes(app), pilot=pilot)
        lines = audit.lines()
        assert [r["outcome"] for r in lines] == ["cancelled"] * 3 + ["ok"]
        assert (lines[-1]["exit_status"], lines[-1]["output"], lines[-1]["host"]) == (0, "", "gpu-node-1")


async def test_read_only_runs_nothing_and_says_so(testhost: TestHost, tmp_path: Path) -> None:
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target, port=testhost.health.port)
    app, audit = _app(spec, lambda s: testhost.runner(), tmp_path, read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for key in ("r", "s", "S", "k", "K", "R"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, OverviewScreen)
        assert _notes(app) == [READ_ONLY_MESSAGE] * 6
        assert testhost.log("systemctl.log") == [] and audit.lines() == []


async def test_kill_from_the_detail_screen_and_stop_start(testhost: TestHost, tmp_path: Path) -> None:
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target, port=testhost.health.port)
    app, audit = _app(spec, lambda s: testhost.runner(), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.open_detail("gpu-node-1")
        await until("the detail screen", lambda: isinstance(app.screen, DetailScreen), pilot=pilot)
        await pilot.press("k")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        assert app.screen.command_text == f"ssh {testhost.target}: systemctl kill -s SIGKILL sglang.service"
        await _confirm(pilot)
        await until("systemctl ran", lambda: testhost.log("systemctl.log"), pilot=pilot)
        await until("back on the detail screen", lambda: isinstance(app.screen, DetailScreen), pilot=pilot)
        for key in ("s", "S"):
            await until("idle", lambda: not app.actions.busy, pilot=pilot)
            await pilot.press(key)
            await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
            await _confirm(pilot)
        await until("three commands", lambda: len(testhost.log("systemctl.log")) == 3, pilot=pilot)
        assert testhost.log("systemctl.log") == ["kill -s SIGKILL sglang.service", "stop sglang.service",
                                                 "start sglang.service"]
        await until("three audit lines", lambda: len(audit.lines()) == 3, pilot=pilot)
        assert [(r["action"], r["outcome"], r["exit_status"]) for r in audit.lines()] == [
            ("kill", "ok", 0), ("stop", "ok", 0), ("start", "ok", 0)]


async def test_kill_gpu_orphans_kills_the_real_stray_and_nothing_of_the_unit(systemd_host, tmp_path: Path) -> None:
    # A real stray process outside the unit's cgroup holds "GPU memory" (the nvidia-smi shim names
    # it, next to the unit's own MainPID): K offers exactly it, and the kill is real.
    stray = systemd_host.start_stray(["sleep", "300"])
    systemd_host.set_gpus_from_fixture()
    spec = HostSpec("gpu-node-3", "fake-llm.service", ssh=systemd_host.target, port=30000)
    app, audit = _app(spec, lambda s: systemd_host.runner(), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        w = app.watchers["gpu-node-3"]
        st = await until("the MainPID", lambda: w.state().unit_state is not None and w.state().unit_state.main_pid
                         and w.state(), pilot=pilot, deadline_s=20)
        main = st.unit_state.main_pid
        uuid0, uuid7 = "GPU-00000000-0000-0000-0000-0000000000a0", "GPU-00000000-0000-0000-0000-0000000000a7"
        systemd_host.set_compute_apps([f"{main}, sglang::scheduler_TP0, 70000, {uuid0}",
                                       f"{stray}, [Not Found], 30000, {uuid7}"])
        await until("the orphan", lambda: w.state().gpu_orphans, pilot=pilot, deadline_s=20)
        await pilot.press("K")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        lines = app.screen.command_text.splitlines()
        assert lines[1] == f"{stray}  sleep 300  30000 MiB"  # the real command line, from ps
        assert lines[-1] == f"ssh {systemd_host.target}: kill -s KILL -- {stray}"
        assert app.screen.title_text == "kill 1 process(es) on gpu-node-3?"
        await _confirm(pilot)
        await until("the audit line", lambda: audit.lines(), pilot=pilot, deadline_s=15)
        [line] = audit.lines()
        assert (line["action"], line["outcome"], line["exit_status"], line["pids"]) == ("kill_pids", "ok", 0, [stray])
        # The stray is gone; the unit's process is not touched.
        assert systemd_host.exec("kill", "-0", str(stray)).returncode != 0
        assert systemd_host.show("fake-llm.service", "MainPID")["MainPID"] == str(main)


async def test_safe_restart_waits_for_the_gpus_then_starts(testhost: TestHost, tmp_path: Path) -> None:
    uuid = "GPU-00000000-0000-0000-0000-0000000000a0"
    testhost.set_compute_apps([f"72, sglang::scheduler, 70000, {uuid}"])
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target, port=testhost.health.port)
    app, audit = _app(spec, lambda s: testhost.runner(), tmp_path)
    for w in app.watchers.values():
        w.apps_interval_s = 0.5
    async with app.run_test(size=(160, 48)) as pilot:
        w = app.watchers["gpu-node-1"]
        await until("the GPU processes", lambda: w.state().gpu_apps is not None and w.state().gpu_apps.apps, pilot=pilot)
        await pilot.press("R")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        text = app.screen.command_text
        assert text.splitlines()[0] == f"1. ssh {testhost.target}: systemctl stop sglang.service"
        assert text.splitlines()[-1] == f"3. ssh {testhost.target}: systemctl start sglang.service"
        await _confirm(pilot)
        await until("stopped", lambda: testhost.log("systemctl.log") == ["stop sglang.service"], pilot=pilot)
        screen = await until("the progress screen", lambda: isinstance(app.screen, SafeRestartScreen) and app.screen,
                             pilot=pilot)
        await until("waiting, showing the holder", lambda: "pid 72 sglang::scheduler" in screen.wait_text, pilot=pilot)
        assert testhost.log("systemctl.log") == ["stop sglang.service"]  # not started while held
        testhost.set_compute_apps([])  # the server's processes are gone
        await until("started", lambda: len(testhost.log("systemctl.log")) == 2, pilot=pilot)
        assert testhost.log("systemctl.log") == ["stop sglang.service", "start sglang.service"]
        await until("back on the card", lambda: isinstance(app.screen, OverviewScreen), pilot=pilot)
        assert [(r["action"], r["outcome"]) for r in audit.lines()] == [("stop", "ok"), ("start", "ok")]


async def test_restart_on_a_real_systemd_gives_a_new_main_pid(systemd_host, tmp_path: Path) -> None:
    def props() -> dict[str, str]:
        return systemd_host.show("fake-llm.service", "MainPID", "ExecMainPID", "NRestarts", "ActiveState")

    def running() -> dict[str, str] | None:
        p = props()
        return p if p["ActiveState"] == "active" and p["MainPID"] != "0" else None

    before = await until("fake-llm.service active with a MainPID", running, 15, every=0.1)
    spec = HostSpec("gpu-node-3", "fake-llm.service", ssh=systemd_host.target, port=30000)
    app, audit = _app(spec, lambda s: systemd_host.runner(), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await until("the confirmation", lambda: isinstance(app.screen, ConfirmScreen), pilot=pilot)
        assert app.screen.command_text == f"ssh {systemd_host.target}: systemctl restart fake-llm.service"
        await _confirm(pilot)
        await until("the audit line", lambda: audit.lines(), pilot=pilot, deadline_s=20)
    [line] = audit.lines()
    assert (line["action"], line["outcome"], line["exit_status"]) == ("restart", "ok", 0)
    after = props()
    assert after["ActiveState"] == "active" and after["MainPID"] not in ("0", before["MainPID"])
    assert after["ExecMainPID"] == after["MainPID"] != before["ExecMainPID"]
    assert after["NRestarts"] == "0"  # a manual restart is not an automatic one
