"""Smoke tests of the real-systemd test host (tests/systemd_host.py) and the stand-in LLM server
(tests/fake_llm.py): everything read over SSH comes from a real systemd 252, journald and sshd."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import LOGS
from probes.transport.runner import ProbeError
from systemd_host import FAKE_LLM, SystemdHost, llm_unit, start_systemd_host
from waiting import until, until_sync

OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.19 GiB of which 1.02 GiB is free.")
PYTHON_FOR_FAKE = "/usr/bin/python3"  # fake_llm.py is stdlib-only; the host runs it with this one
READY_LINE = b"[2025-05-02 16:15:37] The server is fired up and ready to roll!"


def log_lines(name: str) -> list[bytes]:
    lines = (LOGS / name).read_bytes().split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def message(entry: dict[str, Any]) -> bytes:
    """MESSAGE of a ``journalctl -o json`` record (a list of byte values when not printable)."""
    value = entry["MESSAGE"]
    return bytes(value) if isinstance(value, list) else value.encode()


async def show(runner: Any, unit: str, *props: str) -> dict[str, str]:
    done = await runner.run(["systemctl", "show", unit, "-p", ",".join(props)], timeout=10)
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.decode().splitlines())


async def journal(runner: Any, unit: str) -> list[dict[str, Any]]:
    done = await runner.run(["journalctl", "-u", unit, "-o", "json", "--all", "--no-pager"], timeout=10)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def test_boots_and_answers_over_ssh(systemd_host: SystemdHost) -> None:
    runner = systemd_host.runner()
    try:
        async def hostname() -> bytes | None:
            try:
                return (await runner.run(["hostname"], timeout=5)).stdout
            except ProbeError:
                return None

        assert await until("ssh answers", hostname, deadline_s=10) == b"gpu-node-3\n"
        done = await runner.run(["sh", "-c", "cat /proc/1/comm; command -v nvidia-smi; command -v systemctl; "
                                 "command -v journalctl"])
        assert done.stdout.decode().splitlines() == [
            "systemd", f"{systemd_host.work}/shims/nvidia-smi", "/usr/bin/systemctl", "/usr/bin/journalctl"]
        systemd_host.set_gpus(["0, GPU-aaaa, NVIDIA H200, 81234, 143771, 37, 41, 250.00, 700.00"])
        done = await runner.run(["nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total,"
                                 "utilization.gpu,temperature.gpu,power.draw,power.limit", "--format=csv,noheader"])
        assert done.stdout == b"0, GPU-aaaa, NVIDIA H200, 81234, 143771, 37, 41, 250.00, 700.00\n"
    finally:
        await runner.close()
    plain = subprocess.run(systemd_host.ssh_argv("systemctl", "is-system-running"), capture_output=True,
                           text=True, timeout=20)
    assert plain.stdout.strip() in ("running", "degraded", "starting"), plain  # the real answer, via OpenSSH


async def test_systemctl_show_and_journal_over_ssh(systemd_host: SystemdHost) -> None:
    runner = systemd_host.runner()
    try:
        props = await show(runner, "fake-llm.service", "Id", "LoadState", "ActiveState", "SubState",
                           "NRestarts", "MainPID", "ControlGroup")
        main_pid = props.pop("MainPID")
        assert props == {"Id": "fake-llm.service", "LoadState": "loaded", "ActiveState": "active",
                         "SubState": "running", "NRestarts": "0",
                         "ControlGroup": "/system.slice/fake-llm.service"}

        async def replayed() -> list[dict[str, Any]] | None:
            entries = await journal(runner, "fake-llm.service")
            return entries if any(message(e) == READY_LINE for e in entries) else None

        entries = await until("the ready line in the journal", replayed, deadline_s=15, every=0.2)
        own = [e for e in entries if e.get("_SYSTEMD_UNIT") == "fake-llm.service"]
        # every line, in order, exactly; journald stores no entry for an empty stdout line (measured)
        assert [message(e) for e in own] == [line for line in log_lines("sglang-ok-01.log") if line]
        assert len(own) == 30
        assert {(e["_PID"], e["_TRANSPORT"], e["SYSLOG_IDENTIFIER"], e["PRIORITY"]) for e in own} == {
            (main_pid, "stdout", "python3", "6")}
        assert {e["_HOSTNAME"] for e in own} == {"gpu-node-3"}
    finally:
        await runner.close()


async def test_health_refused_then_503_then_200_through_forward(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("http-llm.service", llm_unit("sglang-ok-01.log", port=30001, speed=50))
    runner = systemd_host.runner()
    try:
        local = await runner.forward(30001)
        seen: list[tuple[Any, bytes]] = []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{local}", timeout=5) as client:
            async def probe() -> tuple[Any, bytes]:
                try:
                    r = await client.get("/health")
                    return r.status_code, r.content
                except httpx.TransportError as exc:
                    return "refused", type(exc).__name__.encode()

            first = await probe()  # the unit is not started: nothing listens
            assert first[0] == "refused" and first[1] in (b"RemoteProtocolError", b"ReadError"), first
            seen.append(first)
            done = systemd_host.systemctl("start", "http-llm.service")
            assert done.returncode == 0, done.stderr

            async def ready() -> bool:
                got = await probe()
                if got[0] != seen[-1][0]:
                    seen.append(got)
                return got[0] == 200

            await until("/health 200", ready, deadline_s=15, every=0.03)
            assert [s for s, _ in seen] == ["refused", 503, 200]
            assert seen[1][1] == b"" and seen[2][1] == b""
            models = (await client.get("/v1/models")).json()
            assert models["object"] == "list"
            assert [(m["id"], m["object"]) for m in models["data"]] == [
                ("/mnt/d/user/Desktop/Model/Qwen3-0___6B", "model")]
            r = await client.post("/v1/completions", json={"model": models["data"][0]["id"],
                                                           "prompt": "The capital of France is", "max_tokens": 1})
            body = r.json()
            assert (r.status_code, body["object"], len(body["choices"]), body["usage"]["completion_tokens"]) == (
                200, "text_completion", 1, 1)
    finally:
        await runner.close()


async def test_crash_loop_gives_real_nrestarts_and_journal(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("crashy.service", llm_unit(
        "sglang-ok-01.log", port=30002, crash_at="Load weight begin", crash_line=OOM_LINE, exit_code=1,
        restart_sec=0.5, start_limit_interval_s=0), start=True)
    runner = systemd_host.runner()
    try:
        async def two_restarts() -> dict[str, str] | None:
            p = await show(runner, "crashy.service", "NRestarts")
            return p if int(p["NRestarts"]) >= 2 else None

        await until("NRestarts >= 2", two_restarts, deadline_s=20, every=0.2)

        async def scheduled() -> list[dict[str, Any]] | None:
            found = [e for e in await journal(runner, "crashy.service")
                     if message(e) == b"crashy.service: Scheduled restart job, restart counter is at 2."]
            return found or None

        [entry] = await until("the restart line", scheduled, deadline_s=10, every=0.2)
        assert (entry["N_RESTARTS"], entry["UNIT"], entry["_PID"], entry["_SYSTEMD_UNIT"], entry["MESSAGE_ID"]) == (
            "2", "crashy.service", "1", "init.scope", "5eb03494b6584870a536b337290809b3")
        entries = await journal(runner, "crashy.service")
        texts = [message(e) for e in entries]
        assert texts.count(b"crashy.service: Main process exited, code=exited, status=1/FAILURE") >= 2
        assert texts.count(b"crashy.service: Failed with result 'exit-code'.") >= 2
        crash = [e for e in entries if message(e) == OOM_LINE.encode()]
        assert len(crash) >= 2 and {e["_SYSTEMD_UNIT"] for e in crash} == {"crashy.service"}
    finally:
        await runner.close()


async def test_start_limit_in_a_crash_loop_keeps_result_exit_code(systemd_host: SystemdHost) -> None:
    """Real systemd 252: when an automatic restart hits StartLimitBurst the unit fails, but Result
    keeps the first failure's value (``service_enter_dead`` only sets it while it is ``success``)."""
    systemd_host.add_unit("burst.service", llm_unit(
        "sglang-ok-01.log", port=30003, crash_at="server_args=", restart_sec=0.1,
        start_limit_interval_s=60, start_limit_burst=3), start=True)
    runner = systemd_host.runner()
    try:
        async def failed() -> dict[str, str] | None:
            p = await show(runner, "burst.service", "ActiveState", "SubState", "Result", "NRestarts")
            return p if p["ActiveState"] == "failed" else None

        props = await until("ActiveState=failed", failed, deadline_s=20, every=0.1)
        assert props == {"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "NRestarts": "3"}
        texts = [message(e) for e in await journal(runner, "burst.service")]
        assert texts[-4:] == [b"Stopped burst.service - fake LLM server.",
                              b"burst.service: Start request repeated too quickly.",
                              b"burst.service: Failed with result 'exit-code'.",
                              b"Failed to start burst.service - fake LLM server."]
    finally:
        await runner.close()


async def test_start_limit_hit_after_clean_exits(systemd_host: SystemdHost) -> None:
    """``Result=start-limit-hit`` needs a unit whose runs succeed: Restart=always, exit status 0."""
    systemd_host.add_unit("burst0.service", llm_unit(
        "sglang-ok-01.log", port=30004, crash_at="server_args=", exit_code=0, restart="always",
        restart_sec=0.1, start_limit_interval_s=60, start_limit_burst=3), start=True)
    runner = systemd_host.runner()
    try:
        async def failed() -> dict[str, str] | None:
            p = await show(runner, "burst0.service", "ActiveState", "SubState", "Result", "NRestarts")
            return p if p["ActiveState"] == "failed" else None

        props = await until("ActiveState=failed", failed, deadline_s=20, every=0.1)
        assert props == {"ActiveState": "failed", "SubState": "failed", "Result": "start-limit-hit",
                         "NRestarts": "3"}
        texts = [message(e) for e in await journal(runner, "burst0.service")]
        assert b"burst0.service: Start request repeated too quickly." in texts
        assert b"burst0.service: Failed with result 'start-limit-hit'." in texts
    finally:
        await runner.close()


async def test_manual_restart_resets_nrestarts(systemd_host: SystemdHost) -> None:
    runner = systemd_host.runner()
    try:
        before = (await show(runner, "fake-llm.service", "MainPID"))["MainPID"]
        done = await runner.run(["systemctl", "kill", "-s", "SIGKILL", "fake-llm.service"])
        assert done.returncode == 0, done.stderr

        async def restarted() -> dict[str, str] | None:
            p = await show(runner, "fake-llm.service", "NRestarts", "ActiveState", "SubState", "MainPID")
            return p if p["NRestarts"] == "1" and p["SubState"] == "running" else None

        props = await until("restarted after SIGKILL", restarted, deadline_s=10, every=0.1)
        assert props["MainPID"] != before and props["ActiveState"] == "active"
        done = await runner.run(["systemctl", "restart", "fake-llm.service"])
        assert done.returncode == 0, done.stderr
        assert await show(runner, "fake-llm.service", "NRestarts", "ActiveState") == {
            "NRestarts": "0", "ActiveState": "active"}
    finally:
        await runner.close()


async def test_stray_process_is_outside_the_unit_cgroup(systemd_host: SystemdHost) -> None:
    pid = systemd_host.start_stray(["sleep", "300"])
    systemd_host.set_compute_apps([f"{pid}, python3, 10240 MiB, GPU-aaaa"])
    runner = systemd_host.runner()
    try:
        props = await show(runner, "fake-llm.service", "ControlGroup", "MainPID")
        assert props["ControlGroup"] == "/system.slice/fake-llm.service"
        procs = await runner.run(["cat", f"/sys/fs/cgroup{props['ControlGroup']}/cgroup.procs"])
        members = [int(p) for p in procs.stdout.split()]
        assert int(props["MainPID"]) in members and pid not in members
        cgroups = (await runner.run(["cat", f"/proc/{pid}/cgroup"])).stdout.decode().splitlines()
        assert cgroups[-1] == "0::/stray"  # the unified line; v1 lines above come from this machine
        assert (await runner.run(["sh", "-c", f"cut -d' ' -f4 /proc/{pid}/stat"])).stdout == b"1\n"
        assert (await runner.run(["cat", f"/proc/{pid}/comm"])).stdout == b"sleep\n"
        apps = await runner.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                                 "--format=csv,noheader"])
        assert apps.stdout == f"{pid}, python3, 10240 MiB, GPU-aaaa\n".encode()
    finally:
        await runner.close()


@pytest.mark.host  # boots a systemd host itself
def test_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    host = start_systemd_host(tmp_path / "sysd", 1, hostname="gpu-node-4")
    try:
        host.start_stray(["sleep", "300"])
        pids = host.host_pids()
        assert len(pids) >= 6  # unshare, systemd, journald, sshd, fake_llm, nsenter+sleep
        netns, cgroup = host.name, host.cgroup
    finally:
        host.stop()
    assert host.proc.returncode == -2  # reboot(RB_POWER_OFF) in a PID namespace: its init dies of SIGINT
    assert [p for p in pids if os.path.exists(f"/proc/{p}")] == []
    assert not cgroup.exists()
    ip = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    assert netns not in ip.stdout.split()
    until_sync(f"veth {netns}-h gone (freed asynchronously)",
               lambda: subprocess.run(["ip", "link", "show", f"{netns}-h"], capture_output=True).returncode != 0, 5)


def test_fake_llm_crash_and_hang_without_systemd(tmp_path: Path) -> None:
    """The fault options of tests/fake_llm.py, run directly (no host): a crash prints the crash
    line and exits with the code; a hang prints up to its line, then nothing until SIGTERM (exit 0)."""
    base = [PYTHON_FOR_FAKE, str(FAKE_LLM), "--log", str(LOGS / "sglang-ok-01.log"), "--speed", "1000",
            "--port", "0"]
    crash = subprocess.run([*base, "--crash-at", "Load weight begin", "--crash-line", OOM_LINE,
                            "--exit-code", "3"], capture_output=True, timeout=20)
    assert crash.returncode == 3 and crash.stderr == OOM_LINE.encode() + b"\n"
    assert crash.stdout.split(b"\n")[-2] == b"[2025-05-02 16:13:42] Load weight begin. avail mem=3.23 GB"
    hang = subprocess.Popen([*base, "--hang-at", "Capture cuda graph begin"], stdout=subprocess.PIPE)
    try:
        assert hang.stdout is not None
        lines = []
        while not lines or not lines[-1].startswith(b"[2025-05-02 16:14:33] Capture cuda graph begin"):
            line = hang.stdout.readline()
            assert line, "output ended before the hang line"
            lines.append(line)
        with pytest.raises(subprocess.TimeoutExpired):
            hang.wait(timeout=1.0)  # stalled: still running, nothing more printed (checked below)
        hang.terminate()
        assert hang.wait(timeout=5) == 0
        assert hang.stdout.read() == b""
        assert len(lines) == 15
    finally:
        if hang.poll() is None:
            hang.kill()
            hang.wait()
