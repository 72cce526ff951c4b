"""``upwatch exporter`` says on stderr when it is blind, one line per change, not per retry
(tui/exporter.py, ``SightNotes``): the UpwatchExporterDown and UpwatchProbeCannotRead annotations
send the operator to its journal, so it must have something to say there.

A real systemd host (tests/systemd_host.py) reached over SSH through a port on 127.0.0.1 that
first refuses (nothing listens: ``Connection refused``, retried every fraction of a second), then
forwards to the host's sshd (a relay on its own event loop, in a thread: relayed on the exporter's
own loop, the SSH channels stalled after the first three under load, seen three runs in four); its ``journalctl`` refuses (a shim first in sshd's PATH, with the real
tool's message) until the test lets it through.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.spec import HostSpec
from probes.transport.ssh import SshRunner
from systemd_host import SystemdHost
from testhost import _write_script
from tui.config import Config
from tui.exporter import serve
from waiting import until
from tcp_relay import pipe

pytestmark = [pytest.mark.host, pytest.mark.filterwarnings("ignore::ResourceWarning")]

REFUSING_JOURNALCTL = """#!/bin/sh
if [ -e "{flag}" ]; then
  echo refused >> "{flag}.count"
  echo "No journal files were opened due to insufficient permissions." >&2
  exit 1
fi
exec /usr/bin/journalctl "$@"
"""


@contextlib.contextmanager
def forward(port: int, to: tuple[str, int]) -> Iterator[None]:
    """Listen on 127.0.0.1:``port`` and pipe each connection to ``to`` (as ``ssh -L`` would), on
    an event loop of its own in a thread (not the exporter's: the relay must not wait on it)."""
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*to)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    loop = asyncio.new_event_loop()
    servers: list[asyncio.Server] = []
    listening = threading.Event()

    def relay() -> None:
        servers.append(loop.run_until_complete(asyncio.start_server(one, "127.0.0.1", port)))
        listening.set()
        loop.run_forever()

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    assert listening.wait(10), "the relay did not listen"
    try:
        yield
    finally:
        loop.call_soon_threadsafe(servers[0].close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def refusals(flag: Path) -> int:
    """How many times the shim refused (it appends a line to ``<flag>.count`` each time)."""
    count = Path(f"{flag}.count")
    return count.read_text().count("\n") if count.exists() else 0


def lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


async def test_one_line_per_change_when_the_host_refuses_and_the_journal_cannot_be_read(
        systemd_host: SystemdHost, tmp_path: Path) -> None:
    host = systemd_host
    flag = host.work / "refuse-journal"
    flag.write_text("")
    _write_script(host.shims / "journalctl", REFUSING_JOURNALCTL.format(flag=flag))
    with socket.socket() as s:  # a port nothing listens on (yet)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    known = tmp_path / "known_hosts"
    key_type, key = (host.work / "host_ed25519.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{port} {key_type} {key}\n")
    runner = SshRunner(f"root@127.0.0.1:{port}", known_hosts=known, client_keys=[host.client_key], config=[],
                       connect_timeout=5.0, reconnect_s=0.05, reconnect_max_s=0.2)
    config = Config(hosts=(HostSpec("gpu-node-3", "fake-llm.service", engine="sglang", port=30000,
                                    ssh=f"root@127.0.0.1:{port}"),))
    notes = io.StringIO()
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(config, "127.0.0.1", 0, stop=stop, runner_factory=lambda spec: runner,
                                     gpu_source_factory=lambda spec: None, on_listening=bound.set_result,
                                     notes=notes))
    await asyncio.wait_for(bound, 10)
    try:
        # Refused, and retried again and again: one line.
        await until("five refused connects", lambda: runner.attempts >= 5, 30)
        assert lines(notes) == [
            f"upwatch exporter: host gpu-node-3: cannot reach: {lines(notes)[0].split('cannot reach: ', 1)[-1]}"]
        assert "refused" in lines(notes)[0].lower(), lines(notes)
        with forward(port, (host.address, 22)):
            await until("reachable again", lambda: "upwatch exporter: host gpu-node-3: reachable again" in lines(notes), 30)
            # The journal refuses: one line, however often the probe retries.
            blind = await until("the journal's refusal told", lambda: [
                ln for ln in lines(notes) if ln.startswith("upwatch exporter: host gpu-node-3: cannot read journal: ")], 30)
            assert "insufficient permissions" in blind[0], blind
            await until("three refusals", lambda: refusals(flag) >= 3, 30)
            flag.unlink()
            await until("journal readable again",
                        lambda: "upwatch exporter: host gpu-node-3: journal readable again" in lines(notes), 60)
        told = [ln for ln in lines(notes) if "journal" in ln or "reach" in ln]
        assert told == [lines(notes)[0], "upwatch exporter: host gpu-node-3: reachable again", blind[0],
                        "upwatch exporter: host gpu-node-3: journal readable again"], lines(notes)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nnotes: {lines(notes)}\nrefusals: {refusals(flag)}\nsshd: "
                             f"{host.journalctl('-u', 'uw-sshd.service', '-n', '15', '-o', 'cat').stdout}") from None
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
