"""``upwatch status`` end to end against real OpenSSH test hosts (tests/testhost.py).

Each test writes a ``hosts.toml`` and a ``~/.ssh/config`` (under a fake ``HOME``: asyncssh reads
``~/.ssh/config`` itself, with ``HostName``, ``Port``, ``User``, ``IdentityFile`` and
``UserKnownHostsFile``), runs ``tui.cli.main(["status", ...])`` and checks what it printed and
its exit status. The host side is real: sshd, journalctl on a real journal file; systemctl and
nvidia-smi print real captured output (shims).
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from probes.logs.journal_json import READ_FIELDS
from probes.sources.journal_cmd import output_fields_option
from probes.sources.gpu_errors import MSG_MISMATCH, MSG_NOT_INSTALLED
from testhost import TestHost
from tui.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def setup_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: TestHost, *,
               alias: str = "gpu-a", known_hosts: Path | None = None, key: Path | None = None) -> Path:
    """A fake HOME whose ``~/.ssh/config`` names ``host`` as ``alias``; no agent."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    cfg = home / ".ssh" / "config"
    old = cfg.read_text() if cfg.exists() else ""
    cfg.write_text(old + f"Host {alias}\n  HostName 127.0.0.1\n  Port {host.sshd.port}\n  User root\n"
                   f"  IdentityFile {key or host.sshd.client_key}\n"
                   f"  UserKnownHostsFile {known_hosts or host.sshd.known_hosts}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("UPWATCH_CONFIG", raising=False)
    return home


def hosts_toml(tmp_path: Path, body: str) -> str:
    path = tmp_path / "hosts.toml"
    path.write_text(body)
    return str(path)


def status_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict]]:
    rc = main(["status", "--json", "--timeout", "20", *args])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def host_block(name: str, port: int, extra: str = "") -> str:
    return (f'[[host]]\nname = "{name}"\nunit = "sglang.service"\n'
            f'health_url = "http://127.0.0.1:{port}/health"\n{extra}')


# --- a host that is up ----------------------------------------------------------------------------

def test_status_json_of_a_ready_sglang_host(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0 and len(items) == 1
    h = items[0]
    assert (h["host"], h["unit"], h["engine"], h["state"], h["phase"]) == ("gpu-a", "sglang.service", "sglang", "ready", "ready")
    assert h["readiness"] in ("healthy", "serving")
    assert h["restarts"] == 0 and h["restart_loop"] is None
    assert h["verdict"]["level"] == "ok" and h["verdict"]["sentence"].startswith("Ready and ")
    assert h["gpu_orphans"] == []  # nothing holds GPU memory at all
    assert h["connection"] == "ok" and h["error"] is None and h["gpu_error"] is None
    assert h["last_line"].endswith("The server is fired up and ready to roll!")
    assert len(h["gpus"]) == 8
    assert h["gpus"][0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "mem_used_mib": 0,
                            "mem_total_mib": 81559, "util_pct": 0}
    assert h["gpus"][7]["mem_used_mib"] == 1536
    assert h["gpu_processes"] == []  # the default test host lists no compute process
    # Every remote process of the run is gone once status returned (it waits for them).
    assert testhost.remote_processes() == []


def test_status_text_names_each_part(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc = main(["status", "--timeout", "20", "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port))])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "gpu-a  sglang.service · sglang"
    assert any(ln.split() == ["state", "ready"] for ln in lines), out
    assert "0: 0/81559 MiB 0%" in out and "7: 1536/81559 MiB 0%" in out
    assert any(ln.split()[:2] == ["connection", "ok"] for ln in lines)


def test_status_lists_the_processes_holding_gpu_memory(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rows = (Path(__file__).parent / "fixtures" / "nvidia-smi" / "compute-apps.sglang-tp8.csv").read_text()
    testhost.set_compute_apps(rows)
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0
    procs = items[0]["gpu_processes"]
    assert len(procs) == 9
    assert procs[0] == {"pid": 51873, "name": "sglang::scheduler_TP0", "mem_mib": 73072, "gpu_index": 0}
    assert procs[8] == {"pid": 50112, "name": "[Not Found]", "mem_mib": 1536, "gpu_index": 7}


# --- readiness rungs ------------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "ready", "rungs"), [
    ("refused", True, {"port_closed"}), (503, True, {"http_unhealthy"}), (200, True, {"healthy", "serving"}),
    # SGLang binds its port only after loading: a 200 while its log is still starting is someone else's
    (200, False, {"port_closed"}),
])
def test_status_reads_each_health_rung(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str], mode: int | str, ready: bool,
                                       rungs: set[str]) -> None:
    assert testhost.health is not None
    testhost.health.set_mode(mode)
    if ready:
        testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0
    # A healthy server is "healthy" at the first look and "serving" once a one-token generation
    # answered (the look after it); which of the two the snapshot catches depends on timing.
    assert items[0]["readiness"] in rungs


# --- unit and GPU troubles ------------------------------------------------------------------------

def test_status_of_a_unit_that_does_not_exist(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    testhost.set_systemctl_show(None)  # the real not-found output, with our unit's Id
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0
    assert items[0]["readiness"] == "inactive"
    assert items[0]["verdict"] == {"level": "error", "kind": "not_found", "evidence": [],
                                   "sentence": "Unit sglang.service does not exist on this host: check its name (systemctl list-unit-files there lists the units)."}


def test_status_says_nvidia_smi_is_missing(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    testhost.remove_shim("nvidia-smi")
    assert not Path("/usr/bin/nvidia-smi").exists()
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0
    assert items[0]["gpus"] == [] and items[0]["gpu_error"] == MSG_NOT_INSTALLED
    assert items[0]["connection"] == "ok"


def test_status_says_driver_library_mismatch(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    testhost.set_nvidia_error("error.driver-library-mismatch.txt")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0
    assert items[0]["gpus"] == [] and items[0]["gpu_error"].startswith(MSG_MISMATCH)


# --- hosts that cannot be reached -----------------------------------------------------------------

def test_a_closed_port_exits_4_and_the_other_host_still_reports(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        closed = s.getsockname()[1]
        body = host_block("gpu-a", testhost.health.port) + (
            f'\n[[host]]\nname = "gpu-b"\nssh = "root@127.0.0.1:{closed}"\nunit = "vllm.service"\n')
        t0 = time.monotonic()
        rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, body))
        took = time.monotonic() - t0
    assert rc == 4
    a, b = items
    assert a["connection"] == "ok" and len(a["gpus"]) == 8
    assert b["host"] == "gpu-b" and "refused" in b["connection"].lower()
    assert b["gpus"] == [] and b["readiness"] == "unknown"
    assert took < 15  # an unreachable host does not hold the answer until --timeout (20 s)


def test_an_unknown_host_key_exits_4_with_the_command_that_fixes_it(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    setup_home(tmp_path, monkeypatch, testhost, known_hosts=empty)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 4
    conn = items[0]["connection"]
    # ~/.ssh/config's UserKnownHostsFile is the file to fix, not ~/.ssh/known_hosts.
    assert conn.endswith(f"ssh-keyscan -p {testhost.sshd.port} 127.0.0.1 >> {empty}"), conn
    assert items[0]["verdict"]["level"] == "error" and items[0]["verdict"]["sentence"].startswith("SSH login failed")


def test_a_key_the_host_does_not_accept_exits_4(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    setup_home(tmp_path, monkeypatch, testhost, key=stranger)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 4
    assert "Permission denied" in items[0]["connection"] and "IdentityFile" in items[0]["connection"]


# --- journal: where it starts, who may read it, sudo ------------------------------------------------

def _show_with_activation(testhost: TestHost, began: float) -> None:
    """The active-running capture, with the activation moved to ``began`` (epoch seconds)."""
    stamp = datetime.fromtimestamp(began, timezone.utc).strftime("%a %Y-%m-%d %H:%M:%S UTC")
    lines = []
    for line in (Path(__file__).parent / "fixtures" / "systemctl-show" / "active-running.txt").read_text().splitlines():
        name, _, _ = line.partition("=")
        if name in ("InactiveExitTimestamp", "ExecMainStartTimestamp", "ActiveEnterTimestamp"):
            line = f"{name}={stamp}"
        lines.append(line)
    (testhost.state / "systemctl-show.txt").write_text("\n".join(lines) + "\n")


def test_first_connect_reads_the_journal_from_the_current_activation(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The 5 default entries are "now": an earlier run. The current one began 60 s later (entries
    # may be dated in the future: only their order matters to journalctl).
    now = time.time()
    _show_with_activation(testhost, now + 60)
    lines = ["current start line 1", "current start line 2", "current start line 3"]
    testhost.append({"MESSAGE": text, "__REALTIME_TIMESTAMP": str(int((now + 120 + i) * 1e6))}
                    for i, text in enumerate(lines))
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    assert rc == 0
    assert items[0]["last_line"] == "current start line 3"
    follow = [c for c in testhost.log("journalctl.log") if " -f " in f" {c} "]
    assert follow == [f"-u sglang.service -o json -a -f --no-pager --since=@{int(now + 60) - 1} -n 5000 "
                      + output_fields_option(READ_FIELDS)]


def test_a_user_who_may_not_read_the_journal_is_told_how_to_fix_it(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # What journalctl does for a user outside systemd-journal/adm: JSON mode prints nothing at all,
    # other modes print the hint on stderr (src/shared/journal-util.c).
    (testhost.shims / "journalctl").write_text(
        "#!/bin/sh\ncase \" $* \" in *' json '*) exec sleep 600;; esac\n"
        "echo 'Hint: You are currently not seeing messages from other users and the system.' >&2\n"
        "echo \"      Users in groups 'adm', 'systemd-journal' can see all messages.\" >&2\n"
        "echo '      Pass -q to turn off this notice.' >&2\n")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    # reached, but the journal cannot be read: not "nothing wrong seen" and not exit 0
    assert rc == 4 and items[0]["connection"] == "ok"
    assert "systemd-journal" in items[0]["probe_errors"]["journal"]
    assert "sudo = true" in items[0]["probe_errors"]["journal"]
    assert items[0]["verdict"]["kind"] == "cannot_see"
    assert items[0]["knowledge"]["journal"]["reason"] == "no_journal_access"


def test_sudo_hosts_run_journalctl_and_systemctl_with_sudo_n(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port, "sudo = true\n")))
    assert rc == 0 and items[0]["state"] == "ready"
    calls = testhost.log("sudo.log")
    assert any(c.startswith("-n journalctl -u sglang.service -o json -a -f") for c in calls), calls
    assert any(c.startswith("-n systemctl show sglang.service -p ") for c in calls), calls
    assert not any("nvidia-smi" in c for c in calls)  # nvidia-smi needs no root


def test_a_local_host_runs_the_same_probes_without_ssh(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # This machine as the host: the test host's shims first on our own PATH stand in for
    # systemctl and nvidia-smi; journalctl is the real one on the test journal. NVML is absent
    # here (no driver), so the GPUs come from nvidia-smi, as the README says.
    testhost.seed_log("sglang-ok-01.log")
    monkeypatch.setenv("PATH", f"{testhost.shims}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    monkeypatch.setenv("UPWATCH_TEST_STATE", str(testhost.state))
    monkeypatch.delenv("UPWATCH_CONFIG", raising=False)
    assert testhost.health is not None
    body = (f'[[host]]\nname = "here"\nssh = "local"\nunit = "sglang.service"\n'
            f'health_url = "http://127.0.0.1:{testhost.health.port}/health"\n')
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, body))
    assert rc == 0
    h = items[0]
    assert (h["host"], h["engine"], h["state"], h["connection"]) == ("here", "sglang", "ready", "ok")
    assert h["readiness"] in ("healthy", "serving") and len(h["gpus"]) == 8 and h["probe_errors"] == {}
    testhost.remove_shim("nvidia-smi")
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, body))
    assert rc == 0 and items[0]["gpu_error"] == MSG_NOT_INSTALLED


def test_user_units_use_the_user_journal_and_manager(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name, real in (("journalctl", '/usr/bin/journalctl --file="$UPWATCH_TEST_STATE/test.journal"'),
                       ("systemctl", f'"{testhost.shims}/systemctl.real"')):
        if name == "systemctl":
            (testhost.shims / "systemctl").rename(testhost.shims / "systemctl.real")
        (testhost.shims / name).write_text(
            f'#!/bin/sh\necho "$*" >> "$UPWATCH_TEST_STATE/{name}-calls.log"\nexec {real} "$@"\n')
        (testhost.shims / name).chmod(0o755)
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    body = host_block("gpu-a", testhost.health.port, "user_unit = true\nsudo = true\n")
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, body))
    assert rc == 0 and items[0]["connection"] == "ok"
    journal = testhost.log("journalctl-calls.log")
    assert any(c.startswith("--user-unit sglang.service -o json -a -f") for c in journal), journal
    assert any(c.startswith("--user show sglang.service -p ") for c in testhost.log("systemctl-calls.log"))
    assert testhost.log("sudo.log") == []  # a user's own units need no sudo



# --- a journal that cannot be read: its own words, and its recovery ------------------------------

#: A journalctl shim that fails as a journal with a bad file does (systemd 252's words, exit 1) while
#: ``state/journal.broken`` exists, and is the real one on the test journal otherwise.
BROKEN_JOURNAL_SHIM = (
    "#!/bin/sh\n"
    "if [ -e \"$UPWATCH_TEST_STATE/journal.broken\" ]; then\n"
    "  echo 'Failed to open journal: Input/output error' >&2; exit 1\n"
    "fi\n"
    "exec /usr/bin/journalctl --file=\"$UPWATCH_TEST_STATE/test.journal\" \"$@\"\n")


def test_a_journal_that_fails_says_its_own_words_and_no_state(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (testhost.state / "journal.broken").touch()
    (testhost.shims / "journalctl").write_text(BROKEN_JOURNAL_SHIM)
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    config = hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port))
    rc, items = status_json(capsys, "--config", config)
    h = items[0]
    assert rc == 4 and h["connection"] == "ok"
    # the journal was never read: no "no start seen yet" (waiting), the state is not known
    assert h["state"] == "unknown" and h["phase"] is None
    journal = h["knowledge"]["journal"]
    assert journal["status"] == "failing" and journal["reason"] == "unreadable", journal
    assert "Failed to open journal: Input/output error" in journal["why"], journal
    assert "exit status 1" in journal["why"], journal
    assert h["verdict"]["kind"] == "cannot_see"
    assert "Failed to open journal: Input/output error" in h["verdict"]["sentence"], h["verdict"]
    assert any("Input/output error" in e for e in h["verdict"]["evidence"]), h["verdict"]
    assert "Input/output error" in h["probe_errors"]["journal"]
    # the text form says the same
    rc = main(["status", "--timeout", "20", "--config", config])
    out = capsys.readouterr().out
    assert rc == 4 and "Failed to open journal: Input/output error" in out, out
    assert any(ln.split()[:2] == ["state", "unknown"] for ln in out.splitlines()), out


def test_a_journal_that_can_be_read_again_is_read_at_once_without_a_new_line(
        testhost: TestHost, tmp_path: Path) -> None:
    import asyncio
    import os
    import signal

    from probes.spec import HostSpec
    from tui.config import Config
    from tui.status import watch
    from waiting import until

    (testhost.shims / "journalctl").write_text(BROKEN_JOURNAL_SHIM)
    assert testhost.health is not None
    spec = HostSpec("gpu-a", "sglang.service", ssh=testhost.target, engine="sglang",
                    health_url=f"http://127.0.0.1:{testhost.health.port}/health")
    config = Config(hosts=(spec,), unit_interval_s=0.2, health_interval_s=0.2)
    items: list[dict] = []

    class Out:
        buf = ""

        def write(self, text: str) -> int:
            self.buf += text
            while "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                items.append(json.loads(line))
            return len(text)

        def flush(self) -> None:
            pass

    def journal(i: dict) -> str:
        return i["knowledge"]["journal"]["status"]

    def follows() -> list[int]:
        return [pid for pid, cmd in testhost.remote_processes()
                if cmd.startswith("/usr/bin/journalctl") and " -f " in f"{cmd} "]

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch(config, Out(), stop=stop, runner_factory=lambda s: testhost.runner()))
        try:
            await until("the journal read", lambda: items and journal(items[-1]) == "read" and follows(), 30)
            # the journal breaks: the open follow ends, and every journalctl fails from now on
            (testhost.state / "journal.broken").touch()
            for pid in follows():
                os.kill(pid, signal.SIGTERM)
            await until("the journal failing", lambda: journal(items[-1]) == "failing", 30)
            assert items[-1]["verdict"]["kind"] == "cannot_see"
            appended = testhost.appended
            (testhost.state / "journal.broken").unlink()
            # the journal works again and the unit logs nothing: read again as soon as the follow reopens
            await until("the journal read again", lambda: journal(items[-1]) == "read"
                        and items[-1]["verdict"]["kind"] != "cannot_see" and follows(), 30)
            assert testhost.appended == appended  # no new entry brought it back
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    asyncio.run(go())


def test_a_follow_that_fails_on_the_host_says_its_own_words(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The looks read the journal; journalctl -f itself fails (its stderr, its exit status).
    (testhost.shims / "journalctl").write_text(
        "#!/bin/sh\ncase \" $* \" in *' -f '*) echo 'Failed to seek to cursor: Invalid argument' >&2; exit 1;; esac\n"
        "exec /usr/bin/journalctl --file=\"$UPWATCH_TEST_STATE/test.journal\" \"$@\"\n")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    rc, items = status_json(capsys, "--config", hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port)))
    h = items[0]
    journal = h["knowledge"]["journal"]
    assert rc == 4 and journal["status"] == "failing" and journal["reason"] == "unreadable", journal
    assert ("journalctl -f ended on the host (exit status 1): Failed to seek to cursor: Invalid argument"
            in journal["why"]), journal
    assert "Failed to seek to cursor" in h["verdict"]["sentence"] and h["state"] == "unknown", h
