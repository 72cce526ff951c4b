"""The fake GPU host (tests/testhost.py) works through a real SshRunner, shim by shim.

Each test gets a fresh host (the ``testhost`` fixture: real sshd, real journalctl on a real journal
file, shims for systemctl and nvidia-smi, an HTTP server on loopback). Waits poll with deadlines.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from probes.sources import gpu as gpu_probe
from probes.sources import gpu_errors
from probes.sources import unit as unit_probe
from probes.sources.health import probe_health
from probes.transport.runner import ProbeError
from probes.transport.ssh import SshRunner
from probes.sources.journal_cmd import journal_argv
from testhost import FIXTURES, TestHost
from waiting import until

DEADLINE_S = 10.0


@pytest.fixture
async def runner(testhost: TestHost) -> AsyncIterator[SshRunner]:
    r = testhost.runner()
    try:
        yield r
    finally:
        await r.close()


class Collector:
    """Reads a stream into ``lines`` in a task; ``error`` holds the ProbeError that ended it."""

    def __init__(self, it: AsyncIterator[bytes]) -> None:
        self.it = it
        self.lines: list[bytes] = []
        self.error: ProbeError | None = None
        self.done = False
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for line in self.it:
                self.lines.append(line)
        except ProbeError as exc:
            self.error = exc
        finally:
            self.done = True

    async def close(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


# --- journalctl ----------------------------------------------------------------------------------

async def test_journalctl_json_returns_the_seeded_entries_with_cursors(runner: SshRunner) -> None:
    seeded = (FIXTURES / "logs" / "sglang-ok-01.log").read_text().splitlines()[:5]
    done = await runner.run(["journalctl", "-u", "sglang.service", "-o", "json", "--no-pager"])
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["MESSAGE"] for r in records] == seeded
    assert all(r["__CURSOR"].startswith("s=") for r in records)
    assert {r["_SYSTEMD_UNIT"] for r in records} == {"sglang.service"}
    other = await runner.run(["journalctl", "-u", "other.service", "-o", "json", "--no-pager"])
    assert (other.returncode, other.stdout) == (0, b"")


async def test_journalctl_follow_sees_an_appended_entry(runner: SshRunner, testhost: TestHost) -> None:
    follow = Collector(runner.stream(journal_argv("sglang.service", None, 100)))
    try:
        await until("the 5 seeded entries", lambda: len(follow.lines) >= 5)
        mark = f"appended {uuid.uuid4().hex}"
        testhost.append_log_lines([mark], PRIORITY="3")
        await until("the appended entry", lambda: len(follow.lines) >= 6)
        rec = json.loads(follow.lines[5])
        assert (rec["MESSAGE"], rec["PRIORITY"]) == (mark, "3")
    finally:
        await follow.close()


# --- systemctl -------------------------------------------------------------------------------------

async def test_systemctl_show_prints_the_fixture(runner: SshRunner) -> None:
    done = await runner.run(unit_probe.show_argv("sglang.service"))
    assert done.stdout == (FIXTURES / "systemctl-show" / "active-running.txt").read_bytes()
    us = unit_probe.parse_show(done.stdout.decode(), 0.0)
    assert (us.load_state, us.active_state, us.sub_state) == ("loaded", "active", "running")


async def test_systemctl_show_without_a_fixture_is_not_found(runner: SshRunner, testhost: TestHost) -> None:
    testhost.set_systemctl_show(None)
    done = await runner.run(unit_probe.show_argv("nosuch-llm.service"))
    us = unit_probe.parse_show(done.stdout.decode(), 0.0)
    assert (done.returncode, us.unit, us.load_state) == (0, "nosuch-llm.service", "not-found")


async def test_systemctl_verbs_and_sudo_are_logged(runner: SshRunner, testhost: TestHost) -> None:
    done = await runner.run(["sudo", "-n", "systemctl", "restart", "sglang.service"])
    assert done.returncode == 0
    assert testhost.log("sudo.log") == ["-n systemctl restart sglang.service"]
    assert testhost.log("systemctl.log") == ["restart sglang.service"]


# --- nvidia-smi ------------------------------------------------------------------------------------

async def test_nvidia_smi_loop_streams_samples_and_rereads_the_file(runner: SshRunner, testhost: TestHost) -> None:
    gpus = Collector(runner.stream(gpu_probe.query_argv(loop_ms=200)))
    try:
        await until("two samples of 8 GPUs", lambda: len(gpus.lines) >= 16)
        samples = [gpu_probe.parse_query_line(line.decode()) for line in gpus.lines[:16]]
        assert [s.index for s in samples] == list(range(8)) * 2
        assert samples[7].mem_used_mib == 1536  # sample 0 of the loop fixture: the orphan on GPU 7
        testhost.set_gpus_from_fixture(sample=23)
        last = (FIXTURES / "nvidia-smi" / "query-gpu.h100x8-sglang-tp8.loop.csv").read_text().splitlines()[23 * 8]
        await until("a sample with the new rows", lambda: last.encode() in gpus.lines)
        assert gpus.error is None and not gpus.done
    finally:
        await gpus.close()


async def test_nvidia_smi_compute_apps(runner: SshRunner, testhost: TestHost) -> None:
    argv = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader,nounits"]
    assert (await runner.run(argv)).stdout == b""
    rows = (FIXTURES / "nvidia-smi" / "compute-apps.sglang-tp8.csv").read_text()
    testhost.set_compute_apps(rows)
    assert (await runner.run(argv)).stdout == rows.encode()


async def test_nvidia_smi_error_prints_the_real_text_with_its_exit_code(runner: SshRunner, testhost: TestHost) -> None:
    testhost.set_nvidia_error("error.driver-library-mismatch.txt")
    done = await runner.run(gpu_probe.query_argv())
    assert done.returncode == 18  # exit-codes.tsv
    assert done.stdout == (FIXTURES / "nvidia-smi" / "error.driver-library-mismatch.txt").read_bytes()
    assert "mismatch" in gpu_errors.classify_error(done.stdout.decode(), done.returncode).lower()
    testhost.set_nvidia_error(None)
    assert (await runner.run(gpu_probe.query_argv())).returncode == 0


async def test_nvidia_smi_rejects_a_field_list_other_than_the_fixtures(runner: SshRunner) -> None:
    done = await runner.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader,nounits"])
    assert (done.returncode, done.stdout) == (2, b'Field "index,name" is not a valid field to query.\n\n')


async def test_nvidia_smi_missing_is_127(runner: SshRunner, testhost: TestHost) -> None:
    testhost.remove_shim("nvidia-smi")
    done = await runner.run(gpu_probe.query_argv())
    assert done.returncode == 127
    assert b"nvidia-smi: not found" in done.stderr
    testhost.restore_shim("nvidia-smi")
    assert (await runner.run(gpu_probe.query_argv())).returncode == 0


# --- health -----------------------------------------------------------------------------------------

async def test_health_modes_through_the_port_forward(runner: SshRunner, testhost: TestHost) -> None:
    assert testhost.health is not None
    port = await runner.forward(testhost.health.port)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        r = await client.get("/health")
        assert (r.status_code, r.content) == (200, b"")
        assert (await client.get("/v1/models")).json()["data"][0]["id"] == "m"
        r = await client.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 1})
        assert r.json()["choices"][0]["text"]
        assert (await probe_health(client, 0.0, serving_check=True)).rung == "serving"

        testhost.health.set_mode(503)
        r = await client.get("/health")
        assert (r.status_code, r.content) == (503, b"")
        assert (await probe_health(client, 0.0)).rung == "http_unhealthy"

        testhost.health.set_mode("refused")
        assert (await probe_health(client, 0.0)).rung == "port_closed"

        testhost.health.set_mode(200)  # the same port again
        assert (await probe_health(client, 0.0)).rung == "healthy"
    assert ("POST", "/v1/completions") in testhost.health.requests


# --- processes and dropped links --------------------------------------------------------------------

async def test_no_remote_process_is_left_after_close(testhost: TestHost) -> None:
    r = testhost.runner()
    journal = Collector(r.stream(journal_argv("sglang.service", None, 10)))
    gpus = Collector(r.stream(gpu_probe.query_argv(loop_ms=200)))
    await until("both streams produced output", lambda: journal.lines and gpus.lines)
    cmds = " ".join(c for _, c in testhost.remote_processes())
    assert "/usr/bin/journalctl" in cmds and "nvidia-smi" in cmds
    await r.close()
    await until("no remote process after close()", lambda: not testhost.remote_processes(), 5.0)
    await journal.close()
    await gpus.close()


async def test_cut_connections_ends_a_stream_as_closed(runner: SshRunner, testhost: TestHost) -> None:
    follow = Collector(runner.stream(journal_argv("sglang.service", None, 10)))
    try:
        await until("the seeded entries", lambda: len(follow.lines) >= 5)
        assert testhost.cut_connections()
        await until("the stream ended after the cut", lambda: follow.done)
        assert follow.error is not None and follow.error.kind == "closed"
        await until("the remote journalctl ended after the cut", lambda: not testhost.remote_processes())
        assert (await runner.run(["echo", "back"])).stdout == b"back\n"  # the listener stayed up
    finally:
        await follow.close()


# --- the whole watcher on the test host --------------------------------------------------------------

async def test_host_watcher_sees_a_real_sglang_start(testhost: TestHost) -> None:
    from probes.clock import WallClock
    from probes.spec import HostSpec
    from probes.watch.watcher import HostWatcher

    assert testhost.health is not None
    lines = testhost.seed_log("sglang-ok-01.log")  # the whole start, after the default 5 lines
    spec = HostSpec("gpu-node-1", "sglang.service", port=testhost.health.port, ssh=testhost.target)
    w = HostWatcher(spec, testhost.runner(), WallClock(), unit_interval_s=0.2, health_interval_s=0.2,
                    gpu_interval_s=0.2)
    w.start()
    try:
        total = 5 + len(lines)
        await until(f"all {total} journal entries", lambda: w.state().log_count == total)
        await until("8 GPUs", lambda: w.state().gpus is not None and len(w.state().gpus.gpus) == 8)
        await until("the unit probe", lambda: w.state().unit_state is not None)
        await until("health up to the serving rung (a one-token generation answered)",
                    lambda: w.state().health is not None and w.state().health.rung == "serving")
        s = w.state()
        assert (s.engine, s.unit_state.active_state) == ("sglang", "active")
        assert not s.failures
    finally:
        await w.stop()
    await until("no remote process after stop()", lambda: not testhost.remote_processes(), 5.0)
