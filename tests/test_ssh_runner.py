"""SshRunner against a real OpenSSH sshd on loopback (tests/sshd.py, shared/TESTBED.md section 1).

The server is local, so "is the remote process still running?" is a local ``pgrep -f`` for a
marker unique to each test. Every wait polls with a deadline; no test sleeps a fixed time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from probes.sources.health import probe_health
from probes.transport.runner import ProbeError
from probes.transport.ssh import SshRunner
from probes.transport.target import parse_target
from sshd import Sshd, SshdError, start_sshd
from waiting import until

DEADLINE_S = 5.0

TICKER = """#!/bin/sh
# ticker MARKER: a slow producer, one line every 50 ms, forever
i=0
while :; do echo "tick $i $1"; i=$((i+1)); sleep 0.05; done
"""

SILENT = """#!/bin/sh
# silent MARKER: prints nothing, never ends (a journalctl -f on a quiet unit)
while :; do sleep 0.2; done
"""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SshdError as exc:
        pytest.fail(f"cannot start the test sshd: {exc}", pytrace=False)
    for name, text in (("ticker", TICKER), ("silent", SILENT)):
        script = server.shims / name
        script.write_text(text)
        script.chmod(0o755)
    yield server
    server.stop()


@pytest.fixture
async def runner(sshd: Sshd) -> AsyncIterator[SshRunner]:
    r = make_runner(sshd)
    yield r
    await r.close()


def make_runner(sshd: Sshd, target: str = "testhost", **kw: object) -> SshRunner:
    opts: dict[str, object] = {"config": [sshd.ssh_config], "known_hosts": sshd.known_hosts,
                               "client_keys": [sshd.client_key], "connect_timeout": 5.0}
    opts.update(kw)
    return SshRunner(target, **opts)  # type: ignore[arg-type]


def marker() -> str:
    return f"uwtest-{uuid.uuid4().hex[:12]}"


def remote_pids(mark: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


async def take(it: AsyncIterator[bytes], n: int) -> list[bytes]:
    return [await asyncio.wait_for(anext(it), DEADLINE_S) for _ in range(n)]


# --- target parsing ------------------------------------------------------------------------------

def test_parse_target() -> None:
    assert parse_target("gpu1") == (None, "gpu1", None)
    assert parse_target("ops@gpu1:2222") == ("ops", "gpu1", 2222)
    assert parse_target("[::1]:22") == (None, "::1", 22)
    assert parse_target("fe80::1") == (None, "fe80::1", None)
    with pytest.raises(ValueError):
        parse_target("host:notaport")
    # No name longer than DNS allows resolves: refused before connecting, not retried forever with
    # an IDNA codec error as the reason (the fresh-user check's 260-character name).
    assert parse_target(f"root@{'a' * 63}.example:2202")[1] == f"{'a' * 63}.example"
    for name in ("h" * 64, "h" * 260, ".".join(["abc"] * 64)):
        with pytest.raises(ValueError, match="is not a host name"):
            parse_target(f"root@{name}:2202")


# --- run -----------------------------------------------------------------------------------------

async def test_run_echo_exit_codes_and_quoting(runner: SshRunner) -> None:
    done = await runner.run(["echo", "hello world"])
    assert (done.returncode, done.stdout, done.argv) == (0, b"hello world\n", ("echo", "hello world"))
    done = await runner.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, b"", b"oops\n")
    done = await runner.run(["echo", "$HOME; touch /nonexistent/x"])  # quoted, not interpreted
    assert done.stdout == b"$HOME; touch /nonexistent/x\n"


async def test_run_returns_invalid_utf8_intact(runner: SshRunner) -> None:
    done = await runner.run(["printf", r"\377\376ok\n\300"])
    assert done.stdout == b"\xff\xfeok\n\xc0"
    assert (await runner.run(["echo", "still connected"])).stdout == b"still connected\n"


async def test_run_sees_the_shim_dir_first_on_path(runner: SshRunner, sshd: Sshd) -> None:
    done = await runner.run(["sh", "-c", "command -v ticker"])
    assert done.stdout.decode().strip() == str(sshd.shims / "ticker")


async def test_run_timeout_raises_and_ends_the_remote_process(runner: SshRunner) -> None:
    mark = marker()
    with pytest.raises(ProbeError) as err:
        await runner.run(["silent", mark], timeout=0.5)
    assert err.value.kind == "timeout"
    await until(f"{mark} ended after the timeout", lambda: not remote_pids(mark))


# --- stream --------------------------------------------------------------------------------------

async def test_stream_yields_lines_as_they_come_and_closing_ends_the_remote_process(runner: SshRunner) -> None:
    mark = marker()
    it = runner.stream(["ticker", mark])
    lines = await take(it, 3)  # the producer never ends: these came while it ran
    assert lines == [f"tick {i} {mark}".encode() for i in range(3)]
    assert remote_pids(mark)
    await it.aclose()
    await until(f"{mark} ended after aclose()", lambda: not remote_pids(mark))


async def test_stream_ends_with_the_command_and_keeps_bytes(runner: SshRunner) -> None:
    lines = [line async for line in runner.stream(["printf", r"a\n\377b\n\nlast"])]
    assert lines == [b"a", b"\xffb", b"", b"last"]


async def test_a_stream_that_ends_tells_its_exit_status_and_the_start_of_its_stderr(runner: SshRunner) -> None:
    from probes.transport.runner import STDERR_KEEP, StreamEnd, stream_batches

    ended = StreamEnd()
    script = f"echo out; echo 'Failed to open journal: Input/output error' >&2; head -c {2 * STDERR_KEEP} /dev/zero >&2; exit 3"
    batches = [b async for b in stream_batches(runner, ["sh", "-c", script], ended)]
    assert [line for b in batches for line in b] == [b"out"]
    assert ended.returncode == 3
    assert ended.stderr.startswith(b"Failed to open journal: Input/output error\n") and len(ended.stderr) == STDERR_KEEP
    plain = StreamEnd()  # a command that ends well: status 0, nothing said
    assert [b async for b in stream_batches(runner, ["true"], plain)] == [] and plain == StreamEnd(0, b"")


async def test_cancelling_a_stream_consumer_ends_the_remote_process(runner: SshRunner) -> None:
    mark = marker()
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in runner.stream(["ticker", mark]):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), DEADLINE_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(f"{mark} ended after cancel", lambda: not remote_pids(mark))


async def test_close_with_three_streams_open_leaves_no_remote_process(sshd: Sshd) -> None:
    r = make_runner(sshd)
    marks = [marker() for _ in range(3)]
    its = [r.stream([name, m]) for name, m in zip(("ticker", "silent", "ticker"), marks)]
    await take(its[0], 1)
    await take(its[2], 1)
    pending = asyncio.ensure_future(anext(its[1]))  # a silent stream, blocked in readline
    await until("the silent stream started", lambda: bool(remote_pids(marks[1])))
    await r.close()
    await until("all streams ended after close()", lambda: not any(remote_pids(m) for m in marks))
    with pytest.raises(ProbeError) as err:
        await asyncio.wait_for(pending, DEADLINE_S)
    assert err.value.kind == "closed"
    for it in its:
        await it.aclose()
    assert r._slots._value == 6  # every slot given back exactly once


async def test_more_streams_than_channels_wait_for_a_slot(sshd: Sshd) -> None:
    r = make_runner(sshd, max_channels=2)
    try:
        a, b = r.stream(["ticker", marker()]), r.stream(["ticker", marker()])
        await take(a, 1)
        await take(b, 1)
        run = asyncio.ensure_future(r.run(["echo", "third"], timeout=DEADLINE_S))
        done, _ = await asyncio.wait({run}, timeout=0.3)
        assert not done, "a third channel opened while two streams held both slots"
        await a.aclose()
        assert (await asyncio.wait_for(run, DEADLINE_S)).stdout == b"third\n"
        await b.aclose()
    finally:
        await r.close()


# --- failures, as the operator sees them ---------------------------------------------------------

async def test_unknown_host_key_says_how_to_fix_it(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    r = make_runner(sshd, known_hosts=empty)
    with pytest.raises(ProbeError) as err:
        await r.run(["true"])
    assert err.value.kind == "host_key"
    # The file named is the one in use, so the command really fixes it.
    assert err.value.message.endswith(f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}")
    assert f"No ED25519 host key is known for [127.0.0.1]:{sshd.port} in {empty}." in err.value.message
    assert "CHANGED" not in err.value.message
    await r.close()


async def test_changed_host_key_is_host_key(sshd: Sshd, tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} " + " ".join((tmp_path / "other.pub").read_text().split()[:2]) + "\n")
    r = make_runner(sshd, known_hosts=kh)
    with pytest.raises(ProbeError) as err:
        await r.run(["true"])
    assert err.value.kind == "host_key"
    assert f"the host key of 127.0.0.1:{sshd.port} CHANGED since it was recorded in {kh}" in err.value.message
    assert f"ssh-keygen -f {kh} -R '[127.0.0.1]:{sshd.port}', then ssh-keyscan -p {sshd.port} 127.0.0.1 >> {kh}" in err.value.message
    await r.close()


async def test_wrong_client_key_is_auth(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # no agent keys either
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    r = make_runner(sshd, client_keys=[tmp_path / "stranger"])
    with pytest.raises(ProbeError) as err:
        await r.run(["true"])
    assert err.value.kind == "auth"
    await r.close()


async def test_nothing_listening_is_unreachable(sshd: Sshd) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        r = make_runner(sshd, target=f"root@127.0.0.1:{port}", config=[])
        with pytest.raises(ProbeError) as err:
            await r.run(["true"])
    assert err.value.kind == "unreachable"
    assert "refused" in err.value.message.lower()
    await r.close()


async def test_unknown_name_is_unreachable(sshd: Sshd) -> None:
    r = make_runner(sshd, target="no-such-host.invalid", config=[])
    with pytest.raises(ProbeError) as err:
        await r.run(["true"])
    assert err.value.kind == "unreachable"
    await r.close()


# --- forward -------------------------------------------------------------------------------------

async def test_forward_reaches_a_remote_http_port_and_a_closed_one_reads_port_closed(runner: SshRunner) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        local = await runner.forward(port)
        assert local != port and await runner.forward(port) == local  # one listener, reused
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{local}",
                                     transport=runner.http_transport()) as client:
            response = await client.get("/health")
            assert (response.status_code, response.text) == (200, "ok")
            assert (await probe_health(client, 0.0)).rung == "healthy"
    finally:
        server.close()
        await server.wait_closed()

    closed = await runner.forward(port)  # nothing listens there any more
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{closed}") as client:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            await client.get("/health")
        assert (await probe_health(client, 0.0)).rung == "port_closed"


# --- a dropped connection --------------------------------------------------------------------------

async def test_dropped_connection_ends_the_stream_as_closed_and_run_reconnects(runner: SshRunner, sshd: Sshd) -> None:
    loud, quiet = marker(), marker()
    it = runner.stream(["ticker", loud])
    await take(it, 1)
    silent = runner.stream(["silent", quiet])
    pending = asyncio.ensure_future(anext(silent))
    await until("the silent stream started", lambda: bool(remote_pids(quiet)))
    sessions = sshd.session_pids()
    assert sessions, "no sshd session process found"
    for pid in sessions:  # the [priv] monitor and its user@notty child (TESTBED 1)
        os.kill(pid, signal.SIGKILL)

    with pytest.raises(ProbeError) as err:
        async with asyncio.timeout(DEADLINE_S):
            async for _ in it:
                pass
    assert err.value.kind == "closed"
    with pytest.raises(ProbeError) as err:
        await asyncio.wait_for(pending, DEADLINE_S)
    assert err.value.kind == "closed"
    # no signal can reach them now: the stream wrapper ends them when their stdin closes
    await until("streams ended after the drop", lambda: not remote_pids(loud) and not remote_pids(quiet))

    assert (await runner.run(["echo", "back"])).stdout == b"back\n"


async def test_failed_connects_back_off_and_count_attempts(sshd: Sshd) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = make_runner(sshd, target=f"root@127.0.0.1:{port}", config=[])
        r.reconnect_s = 0.2
        for _ in range(3):  # within the backoff: no new connect, the same error at once
            with pytest.raises(ProbeError) as err:
                await r.run(["true"])
            assert err.value.kind == "unreachable" and r.attempts == 1

        async def tried_again() -> bool:
            with pytest.raises(ProbeError):
                await r.run(["true"])
            return r.attempts >= 2

        await until("a second connect attempt after the backoff", tried_again, 5)
        assert r.attempts == 2
        assert r._retry_at - time.monotonic() > 0.2  # doubled: 0.4 s from the second failure
    await r.close()


async def test_a_good_connect_counts_no_attempt(runner: SshRunner) -> None:
    assert (await runner.run(["true"])).returncode == 0
    assert runner.attempts == 0
