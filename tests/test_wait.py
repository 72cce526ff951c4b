"""``upwatch wait`` against a real systemd 252 (tests/systemd_host.py): ready after a restart, a
failed start, a restart loop, a timeout, a host that cannot be reached; exit codes asserted."""

from __future__ import annotations

import io
import socket

import pytest

from probes.spec import HostSpec
from systemd_host import SystemdHost, llm_unit
from test_systemd_host import OOM_LINE
from waiting import until
from tui.config import Config
from tui.duration import parse_duration
from tui.wait import EXIT_FAILED, EXIT_LOOP, EXIT_READY, EXIT_TIMEOUT, EXIT_UNREACHABLE, run_wait

FAST = Config(hosts=(), unit_interval_s=0.2, health_interval_s=0.2)


def wait_on(host: SystemdHost, unit: str, port: int, **kw) -> tuple[int, str]:
    """Run ``wait``; returns the exit status and what it wrote: stdout, then stderr (the reason of
    a non-zero exit goes there, and only there)."""
    out, err = io.StringIO(), io.StringIO()
    spec = HostSpec("gpu-node-3", unit, ssh=host.target, engine="sglang", port=port)
    code = run_wait(spec, out=out, tty=False, config=FAST, runner_factory=lambda s: host.runner(), err=err, **kw)
    if code == EXIT_READY:
        assert err.getvalue() == ""
    else:
        assert err.getvalue().strip(), "a non-zero exit says why on stderr"
    return code, out.getvalue() + err.getvalue()


def test_parse_duration() -> None:
    assert [parse_duration(t) for t in ("90", "90s", "30m", "1h", "1h30m", "1.5m")] == [90, 90, 1800, 3600, 5400, 90]
    for bad in ("", "0", "-5", "5x", "m"):
        with pytest.raises(ValueError):
            parse_duration(bad)


async def _running(host: SystemdHost, unit: str) -> None:
    await until(f"{unit} running", lambda: host.show(unit, "SubState")["SubState"] == "running", 20)


def test_restart_then_ready_waits_for_the_new_process(systemd_host: SystemdHost) -> None:
    import asyncio

    asyncio.run(_running(systemd_host, "fake-llm.service"))
    before = systemd_host.show("fake-llm.service", "MainPID")["MainPID"]
    code, out = wait_on(systemd_host, "fake-llm.service", 30000, restart=True, until="serving", timeout_s=60)
    assert code == EXIT_READY, out
    assert out.splitlines()[-1] == "gpu-node-3: ready (serving)"
    assert systemd_host.show("fake-llm.service", "MainPID")["MainPID"] != before
    assert any("Weight load" in line or "CUDA graph capture" in line for line in out.splitlines()), out
    from probes.store.history import History

    # the start before the restart may be written too (its backlog said ready): the newest is wait's
    recs = [r for r in History().starts("gpu-node-3") if r.unit == "fake-llm.service" and r.outcome == "ready"]
    assert 1 <= len(recs) <= 2, recs
    rec = max(recs, key=lambda r: r.began)
    assert rec.model == "/mnt/d/user/Desktop/Model/Qwen3-0___6B" and rec.total_s is not None
    assert [p for p, _ in rec.phases] == ["starting", "weights", "init", "graph_capture", "warmup"]


def test_a_crash_loop_exits_2_with_the_decisive_line(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("crashy.service", llm_unit(
        "sglang-ok-01.log", port=30002, crash_at="Load weight begin", crash_line=OOM_LINE, restart_sec=0.3,
        start_limit_interval_s=0))
    code, out = wait_on(systemd_host, "crashy.service", 30002, restart=True, until="ready", timeout_s=60)
    assert code == EXIT_LOOP, out
    assert "Restart loop: " in out and "CUDA out of memory" in out
    assert f"  decisive line: {OOM_LINE}" in out


def test_a_failed_start_exits_1(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("once.service", llm_unit(
        "sglang-ok-01.log", port=30007, crash_at="Load weight begin", crash_line=OOM_LINE, restart="no"))
    code, out = wait_on(systemd_host, "once.service", 30007, restart=True, until="ready", timeout_s=60)
    assert code == EXIT_FAILED, out
    assert f"  decisive line: {OOM_LINE}" in out and "  hint: " in out


def test_a_hung_start_times_out_with_3(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("hung.service", llm_unit("sglang-ok-01.log", port=30008, hang_at="Load weight begin"))
    code, out = wait_on(systemd_host, "hung.service", 30008, restart=True, until="ready", timeout_s=4)
    assert code == EXIT_TIMEOUT, out
    assert out.splitlines()[-1] == "gpu-node-3: not ready after 4 s: the start is still in Weight load", out


def test_an_unreachable_host_exits_4() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening
        port = s.getsockname()[1]
        out = io.StringIO()
        spec = HostSpec("gpu-node-9", "sglang.service", ssh=f"root@127.0.0.1:{port}")
        from probes.transport.ssh import SshRunner

        code = run_wait(spec, restart=False, until="ready", timeout_s=20, out=out, tty=False, config=FAST,
                        runner_factory=lambda s: SshRunner(s.target, config=[], known_hosts=[], connect_timeout=3))
    assert code == EXIT_UNREACHABLE, out.getvalue()


def test_without_restart_a_process_already_up_is_ready_at_once(systemd_host: SystemdHost) -> None:
    import asyncio

    asyncio.run(_running(systemd_host, "fake-llm.service"))
    before = systemd_host.show("fake-llm.service", "MainPID")["MainPID"]
    code, out = wait_on(systemd_host, "fake-llm.service", 30000, restart=False, until="ready", timeout_s=60)
    assert code == EXIT_READY, out
    assert systemd_host.show("fake-llm.service", "MainPID")["MainPID"] == before  # nothing was restarted


def test_health_from_the_old_process_does_not_end_the_wait(systemd_host: SystemdHost) -> None:
    # Something outside the unit keeps answering /health 200 (an old server that outlived its
    # unit) while the new start loads and never gets ready: wait must not return early.
    systemd_host.start_stray(["/usr/bin/python3", "-c",
                              "import http.server as h\n"
                              "class H(h.BaseHTTPRequestHandler):\n"
                              "    def do_GET(self):\n"
                              "        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()\n"
                              "    def log_message(self, *a): pass\n"
                              "h.HTTPServer(('127.0.0.1', 30098), H).serve_forever()\n"])
    systemd_host.add_unit("slow.service", llm_unit("sglang-ok-01.log", port=30009, hang_at="Load weight begin"),
                          start=True)
    out, err = io.StringIO(), io.StringIO()
    spec = HostSpec("gpu-node-3", "slow.service", ssh=systemd_host.target, engine="sglang",
                    health_url="http://127.0.0.1:30098/health")
    code = run_wait(spec, out=out, tty=False, config=FAST, runner_factory=lambda s: systemd_host.runner(),
                    restart=True, until="ready", timeout_s=6, err=err)
    lines = out.getvalue().splitlines()
    assert code == EXIT_TIMEOUT, lines
    # why, on stderr: a verdict has formed by then (the answer is someone else's), or the phase
    assert err.getvalue().startswith("gpu-node-3: not ready after 6 s: "), err.getvalue()
    assert ("/health answers" in err.getvalue() or "still in Weight load" in err.getvalue()), err.getvalue()
    assert any("loading · Weight load" in line for line in lines), lines  # it saw the new start loading
    assert not any(": ready" in line for line in lines), lines
    assert not any(line.endswith("· healthy") for line in lines if "Weight load" in line), lines


def test_the_port_the_log_names_is_the_one_probed(systemd_host: SystemdHost) -> None:
    # No port configured: upwatch must not probe the engine's default (30000, where nothing
    # listens now) but the port the start itself names (server_args ... port=30016, Uvicorn line).
    assert systemd_host.systemctl("stop", "fake-llm.service").returncode == 0
    systemd_host.add_unit("p16.service", llm_unit("sglang-ok-01.log", port=30016))
    out = io.StringIO()
    spec = HostSpec("gpu-node-3", "p16.service", ssh=systemd_host.target, engine="sglang")  # no port
    code = run_wait(spec, out=out, tty=False, config=FAST, runner_factory=lambda s: systemd_host.runner(),
                    restart=True, until="ready", timeout_s=60)
    assert code == EXIT_READY, out.getvalue()
    assert out.getvalue().splitlines()[-1] in ("gpu-node-3: ready (healthy)", "gpu-node-3: ready (serving)")


def test_a_unit_that_does_not_exist_exits_1_at_once(systemd_host: SystemdHost) -> None:
    import time

    started = time.monotonic()
    code, out = wait_on(systemd_host, "nosuch.service", 30000, restart=False, until="ready", timeout_s=60)
    assert code == EXIT_FAILED, out
    assert out.splitlines()[-1] == "gpu-node-3: Unit nosuch.service does not exist on this host: check its name (systemctl list-unit-files there lists the units)."
    assert time.monotonic() - started < 30  # not the timeout, nor the wait for a decisive line


def test_a_journal_that_fails_to_be_read_at_the_timeout_exits_4_not_3(systemd_host: SystemdHost) -> None:
    # journalctl fails on the host for a reason not known to last (a damaged journal file): before
    # BLIND_GIVE_UP_S the wait goes on; at a shorter timeout it exited 3, "not ready after 6 s:
    # Cannot read the journal: ..." (a tester's finding), as if the host had been read and were not
    # ready. What decides readiness was not read: 4, with why.
    from testhost import _write_script

    _write_script(systemd_host.shims / "journalctl",
                  "#!/bin/sh\necho 'Failed to iterate through journal: Bad message' >&2\nexit 1\n")
    code, out = wait_on(systemd_host, "fake-llm.service", 30000, restart=False, until="ready", timeout_s=6)
    assert code == EXIT_UNREACHABLE, out
    assert out.splitlines()[-1].startswith("gpu-node-3: cannot see after 6 s: "), out
    assert "journal" in out.splitlines()[-1], out
