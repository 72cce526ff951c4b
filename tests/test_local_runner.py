"""LocalRunner: commands on this machine, ended with their children; health_target; compute apps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.sources.gpu_apps import compute_apps_argv, parse_compute_apps
from probes.transport.local import LocalRunner
from probes.transport.runner import ProbeError
from probes.sources.health_target import HealthTarget, health_target
from probes.sources.journal_cmd import journal_access_problem, journal_argv
from probes.spec import HostSpec
from waiting import until

FIXTURES = Path(__file__).parent / "fixtures"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_run_returns_status_and_bytes() -> None:
    r = LocalRunner("here")
    done = await r.run(["sh", "-c", "printf 'a\\377b'; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, b"a\xffb", b"err\n")
    missing = await r.run(["no-such-program-upwatch"])
    assert missing.returncode == 127 and b"command not found" in missing.stderr
    await r.close()


async def test_run_timeout_ends_the_process_and_its_children(tmp_path: Path) -> None:
    r = LocalRunner("here", grace_s=0.5)
    pidfile = tmp_path / "child"
    with pytest.raises(ProbeError) as err:
        await r.run(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], timeout=0.5)
    assert err.value.kind == "timeout"
    child = int(pidfile.read_text())
    await until("the background child is gone", lambda: not _alive(child))
    await r.close()


async def test_closing_a_stream_ends_the_process_group(tmp_path: Path) -> None:
    r = LocalRunner("here", grace_s=0.5)
    pidfile = tmp_path / "child"
    lines = []
    agen = r.stream(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; while true; do echo tick; sleep 0.05; done"])
    async for line in agen:
        lines.append(line)
        if len(lines) == 3:
            break
    await agen.aclose()
    assert lines == [b"tick"] * 3
    child = int(pidfile.read_text())
    await until("the stream's child is gone", lambda: not _alive(child))
    await r.close()


async def test_forward_is_the_port_itself_and_close_refuses_more() -> None:
    r = LocalRunner("here")
    assert await r.forward(30000) == 30000 and r.http_transport() is None
    await r.close()
    with pytest.raises(ProbeError) as err:
        await r.forward(30000)
    assert err.value.kind == "closed"


# --- health_target --------------------------------------------------------------------------------

def test_health_target_defaults_by_engine_and_tunnels_loopback() -> None:
    assert health_target(HostSpec("h", "u.service", engine="sglang")) == HealthTarget("http://127.0.0.1:30000", "/health", 30000, True)
    assert health_target(HostSpec("h", "u.service"), "vllm").port == 8000
    assert health_target(HostSpec("h", "u.service")).port == 8000  # engine not known yet
    assert health_target(HostSpec("h", "u.service", port=9000, engine="sglang")).port == 9000


def test_health_target_from_a_url() -> None:
    t = health_target(HostSpec("h", "u.service", health_url="http://localhost:30000/health_generate"))
    assert t == HealthTarget("http://127.0.0.1:30000", "/health_generate", 30000, True)
    direct = health_target(HostSpec("h", "u.service", health_url="https://10.0.0.5:8443/ready?x=1"))
    assert direct == HealthTarget("https://10.0.0.5:8443", "/ready?x=1", 8443, False)
    local = health_target(HostSpec("h", "u.service", ssh="local", health_url="http://127.0.0.1:8000/health"))
    assert local.tunnel is False  # this machine's loopback: no SSH
    with pytest.raises(ValueError):
        health_target(HostSpec("h", "u.service", health_url="ftp://x/health"))


# --- journal command and access --------------------------------------------------------------------

def test_journal_argv_forms() -> None:
    assert journal_argv("s.service", None, 5000, since=1741436937.9) == [
        "journalctl", "-u", "s.service", "-o", "json", "-a", "-f", "--no-pager", "--since=@1741436937", "-n", "5000"]
    assert journal_argv("s.service", "s=abc;i=5", 5000, since=1.0)[-2:] == ["--after-cursor", "s=abc;i=5"]
    assert journal_argv("s.service", None, 10, user_unit=True)[1:3] == ["--user-unit", "s.service"]


def test_journal_access_problem_reads_journalctl_and_sudo() -> None:
    hint = (b"Hint: You are currently not seeing messages from other users and the system.\n"
            b"      Users in groups 'adm', 'systemd-journal' can see all messages.\n")
    assert "systemd-journal" in journal_access_problem(b"", hint, 0, sudo=False)
    assert journal_access_problem(b"loaded weights\n", b"", 0, sudo=False) is None
    sudo = journal_access_problem(b"", b"sudo: a password is required\n", 1, sudo=True)
    assert sudo is not None and "NOPASSWD" in sudo


# --- compute apps ------------------------------------------------------------------------------------

def test_compute_apps_fixture_rows() -> None:
    text = (FIXTURES / "nvidia-smi" / "compute-apps.sglang-tp8.csv").read_text()
    index = {f"GPU-00000000-0000-0000-0000-0000000000a{i}": i for i in range(8)}
    apps = parse_compute_apps(text, index)
    assert len(apps) == 9
    assert (apps[0].pid, apps[0].name, apps[0].mem_mib, apps[0].gpu_index) == (51873, "sglang::scheduler_TP0", 73072, 0)
    assert apps[7].gpu_index == 7
    # A process whose name nvidia-smi could not read (it is gone, or in another namespace).
    assert (apps[8].pid, apps[8].name, apps[8].mem_mib, apps[8].gpu_index) == (50112, "[Not Found]", 1536, 7)
    assert parse_compute_apps("", index) == ()
    odd = parse_compute_apps("524, [Insufficient Permissions], [N/A], GPU-x\nnot a row\n")
    assert (odd[0].pid, odd[0].name, odd[0].mem_mib, odd[0].gpu_index) == (524, "[Insufficient Permissions]", None, None)
    assert compute_apps_argv()[1] == "--query-compute-apps=pid,process_name,used_memory,gpu_uuid"


async def test_a_local_stream_that_ends_tells_its_exit_status_and_stderr() -> None:
    from probes.transport.runner import StreamEnd, stream_batches

    runner, ended, missing = LocalRunner(), StreamEnd(), StreamEnd()
    batches = [b async for b in stream_batches(runner, ["sh", "-c", "echo out; echo oops >&2; exit 2"], ended)]
    assert batches == [[b"out"]] and ended == StreamEnd(2, b"oops\n")
    assert [b async for b in stream_batches(runner, ["/nonexistent/upwatch-no-such-tool"], missing)] == []
    assert missing.returncode == 127 and b"not found" in missing.stderr
