"""Never "ok" for what was not read, in the first seconds: a real systemd host (tests/systemd_host.py)
whose ``journalctl`` answers :data:`JOURNAL_DELAY_S` late (a shim in the host's PATH that sleeps,
then runs the real one), while ``systemctl show`` answers at once, as on a host with a big journal.

* ``upwatch exporter``: while ``upwatch_probe_up{probe="journal"}`` is 0, ``upwatch_verdict`` is
  ``kind="waiting",level="info"``, never ``kind="none",level="ok"``.
* ``status --json``, ``report`` and the MCP tools wait for the answers: what they give says the
  journal was read (its knowledge ``read``, its last line), never a look from before it.
"""

from __future__ import annotations

import asyncio
import io
import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from probes.spec import HostSpec
from systemd_host import SystemdHost
from testhost import _write_script
from tui.config import Config
from tui.exporter import serve
from tui.host_report import run_report
from tui.mcp_server import Session
from tui.status import run_status
from waiting import until

pytestmark = [pytest.mark.host, pytest.mark.filterwarnings("ignore::ResourceWarning")]

#: Seconds the journalctl shim waits before running the real journalctl.
JOURNAL_DELAY_S = 3.0

SLOW_JOURNALCTL = f"""#!/bin/sh
sleep {JOURNAL_DELAY_S:g}
exec /usr/bin/journalctl "$@"
"""


@pytest.fixture
def slow_journal_host(systemd_host: SystemdHost) -> SystemdHost:
    """The systemd host with ``fake-llm.service`` ready and a slow ``journalctl`` first in sshd's PATH."""
    _write_script(systemd_host.shims / "journalctl", SLOW_JOURNALCTL)
    return systemd_host


def config_for(host: SystemdHost) -> Config:
    return Config(hosts=(HostSpec("gpu-node-3", "fake-llm.service", engine="sglang", port=30000, ssh=host.target),))


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("host", "unit")))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples if s.name.startswith("upwatch_")}


async def test_the_exporter_says_waiting_not_ok_until_the_journal_answered(slow_journal_host: SystemdHost) -> None:
    host = slow_journal_host
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(config_for(host), "127.0.0.1", 0, stop=stop,
                                     runner_factory=lambda spec: host.runner(),
                                     gpu_source_factory=lambda spec: None, on_listening=bound.set_result))
    port = await asyncio.wait_for(bound, 10)
    scrapes: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []
    try:
        async with httpx.AsyncClient() as client:
            async def journal_read() -> bool:
                scrapes.append(samples((await client.get(f"http://127.0.0.1:{port}/metrics")).text))
                return scrapes[-1].get(("upwatch_probe_up", (("probe", "journal"),))) == 1

            await until("the journal probe up", journal_read, 30, every=0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    verdicts = [tuple(dict(ls) for (n, ls), v in s.items() if n == "upwatch_verdict" and v == 1) for s in scrapes]
    unread = [(s, v) for s, v in zip(scrapes, verdicts)
              if s.get(("upwatch_probe_up", (("probe", "unit"),))) == 1
              and s.get(("upwatch_probe_up", (("probe", "journal"),))) == 0]
    assert unread, "no scrape saw the unit read and the journal not yet (the shim's delay did not show)"
    for _s, v in unread:
        assert v == ({"kind": "waiting", "level": "info"},), v
    # Once every probe answered, a ready server with nothing wrong is (none, ok).
    assert verdicts[-1] in (({"kind": "none", "level": "ok"},), ({"kind": "waiting", "level": "info"},))


def test_status_json_and_report_wait_for_the_journal(slow_journal_host: SystemdHost) -> None:
    host = slow_journal_host
    runner = lambda spec: host.runner()  # noqa: E731
    out, err = io.StringIO(), io.StringIO()
    code = run_status(config_for(host), as_json=True, timeout_s=20, out=out, err=err, runner_factory=runner,
                      gpu_source_factory=lambda spec: None, history=None)
    [item] = json.loads(out.getvalue())
    assert code == 0, err.getvalue()
    assert item["knowledge"]["journal"]["status"] == "read" and item["last_line"], item
    assert item["verdict"]["kind"] != "waiting"

    out = io.StringIO()
    assert run_report(config_for(host), timeout_s=20, out=out, err=err, runner_factory=runner,
                      gpu_source_factory=lambda spec: None) == 0, err.getvalue()
    report = out.getvalue()
    assert "Engine:** SGLang" in report, report  # named by the log: the journal was read
    assert "journal: never answered" not in report and "Waiting for" not in report, report


async def test_the_mcp_tools_wait_for_the_journal(slow_journal_host: SystemdHost) -> None:
    host = slow_journal_host
    session = Session(config_for(host), runner_factory=lambda spec: host.runner(),
                      gpu_source_factory=lambda spec: None, history=None)
    session.start()
    try:
        [listed] = (await session.list_hosts())["hosts"]
        assert listed["answered"] and listed["state"] != "waiting", listed
        status = await session.host_status("gpu-node-3")
        assert status["knowledge"]["journal"]["status"] == "read" and status["last_line"], status
        assert "Engine:** SGLang" in await session.report("gpu-node-3")
    finally:
        await session.stop()

