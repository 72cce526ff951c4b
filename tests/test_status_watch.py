"""``upwatch status --watch`` against a real systemd 252 (tests/systemd_host.py): one JSON line per
change, the verdict sentence in every line, the watchers stopped at the end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from probes.spec import HostSpec
from systemd_host import SystemdHost, llm_unit
from waiting import until
from tui.config import Config
from tui.status import change_key, watch

ROOT = Path(__file__).resolve().parent.parent


class Lines:
    """A write-only text stream that keeps parsed JSON lines."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            self.items.append(json.loads(line))
        return len(text)

    def flush(self) -> None:
        pass


def test_a_restart_is_followed_phase_by_phase_to_ready(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("slow.service", llm_unit("sglang-ok-01.log", port=30011, speed=10))
    spec = HostSpec("gpu-node-3", "slow.service", ssh=systemd_host.target, engine="sglang", port=30011)
    config = Config(hosts=(spec,), unit_interval_s=0.2, health_interval_s=0.2)
    out = Lines()

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch(config, out, stop=stop, runner_factory=lambda s: systemd_host.runner()))
        await until("first line", lambda: out.items, 30)
        systemd_host.systemctl("start", "slow.service")
        await until("ready and healthy", lambda: any(
            i["state"] == "ready" and i["readiness"] in ("healthy", "serving") for i in out.items), 90)
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(go())
    first, rest = out.items[0], out.items[1:]
    assert first["changed"] == ["first"] and first["host"] == "gpu-node-3" and first["state"] in ("waiting", "stopped")
    assert all(i["state"] == "waiting" for i in rest if i["phase"] is None)  # no phase before a line
    phases = [i["phase"] for i in rest if i["phase"] is not None]
    order = ["starting", "weights", "init", "graph_capture", "warmup", "ready"]
    assert [order.index(p) for p in phases] == sorted(order.index(p) for p in phases), phases
    assert phases[-1] == "ready"
    # the journal delivers lines in batches: a short phase may pass between two lines, but every
    # line lists the start's phases so far
    # (a unit with no entries when the follow began: journalctl 252 loses entries unless the
    # follow is reopened, systemd#25649; the whole start must be there)
    assert [p["phase"] for p in out.items[-1]["phases"]] == order
    assert [p["duration_s"] is None for p in out.items[-1]["phases"]] == [False] * 5 + [True]
    rungs = [i["readiness"] for i in rest]
    assert "port_closed" in rungs and rungs.index("port_closed") < len(rungs) - 1
    for prev, cur in zip(out.items, rest):
        assert cur["changed"], cur  # every line says what changed ...
        keys = {"state", "phase", "progress", "download", "readiness", "verdict", "connection"}
        assert set(cur["changed"]) <= keys
        assert cur["verdict"]["sentence"]  # ... and carries the sentence
        assert any(_key(prev)[k] != _key(cur)[k] for k in cur["changed"])
    steps = [tuple(i["progress"][k] for k in ("done", "total")) for i in rest
             if i["progress"] and i["progress"]["phase"] == "graph_capture"]
    # steps as they were seen, of the one 4-batch bar; its last step may come in the same journal
    # batch as the next phase's first line, and progress is only ever the current phase's
    assert steps and steps == sorted(steps) and {total for _, total in steps} == {4.0}, steps
    assert systemd_host.exec("pgrep", "-f", "journalctl -u slow.service").returncode == 1


def _key(item: dict) -> dict:
    p = item["progress"]
    return {"state": item["state"], "phase": item["phase"],
            "progress": [p["done"], p["total"]] if p and p["phase"] == item["phase"] else None,
            "download": item["download"] and item["download"]["bytes"],
            "readiness": item["readiness"], "verdict": [item["verdict"]["level"], item["verdict"]["kind"]],
            "connection": "ok" if item["connection"] == "ok" else "x"}


def test_change_key_ignores_a_ticking_sentence() -> None:
    import dataclasses

    from probes.data.state import HostState, Verdict

    a = HostState("h", "u", state="loading", phase="graph_capture",
                  verdict=Verdict("warning", "No log line for 2m10s in Graph capture: the start looks hung.", "stalled"))
    b = dataclasses.replace(a, verdict=dataclasses.replace(a.verdict, sentence="No log line for 2m11s ..."))
    assert change_key(a) == change_key(b)
    assert change_key(a) != change_key(dataclasses.replace(a, readiness="port_closed"))


def test_the_command_stops_on_sigint_and_leaves_nothing_running(systemd_host: SystemdHost, tmp_path: Path) -> None:
    home = systemd_host.ssh_home(tmp_path / "home", "gpu-node-3")
    env = {**{k: v for k, v in os.environ.items() if k != "UPWATCH_CONFIG"}, "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config")}
    proc = subprocess.Popen([sys.executable, "-m", "tui", "status", "--watch", "gpu-node-3/fake-llm.service"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, (proc.wait(10), proc.stderr.read())
        first = json.loads(line)
        assert first["host"] == "gpu-node-3" and first["changed"] == ["first"], first
        assert systemd_host.exec("pgrep", "-f", "journalctl -u fake-llm.service").returncode == 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in proc.stderr.read()
    asyncio.run(until("remote journalctl ended", lambda: systemd_host.exec(
        "pgrep", "-f", "journalctl -u fake-llm.service").returncode == 1, 10))


def test_one_look_asks_the_port_the_log_names_not_a_default(systemd_host: SystemdHost) -> None:
    # No engine and no port configured: a first health look before the log is read asked port 8000
    # (the fallback) and a healthy SGLang server read "port closed"; the log names 30000.
    from tui.look import collect

    asyncio.run(until("fake-llm ready", lambda: systemd_host.show("fake-llm.service", "SubState")["SubState"]
                      == "running", 20))
    spec = HostSpec("gpu-node-3", "fake-llm.service", ssh=systemd_host.target)  # no engine, no port
    config = Config(hosts=(spec,))  # the default intervals (health every 2 s): one look is all it gets

    async def ready_then_look():
        # the fake server replays its log at speed 50: give it the few seconds to be up
        await until("listening on 30000", lambda: systemd_host.exec(
            "/usr/bin/python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 30000), 1)").returncode == 0,
            30)
        return await collect(config, 30, runner_factory=lambda s: systemd_host.runner())

    [(_, s, answered)] = asyncio.run(ready_then_look())
    assert answered and s.engine == "sglang" and s.port == 30000
    # The look reached the server on 30000: it answered (200, or 503 while SGLang still warms up,
    # which the socket being open does not rule out); a look at 8000 would read "port closed".
    assert s.health is not None and s.health.status in (200, 503), (s.readiness, s.health)
    assert s.readiness in ("http_unhealthy", "healthy", "serving"), (s.readiness, s.health)
