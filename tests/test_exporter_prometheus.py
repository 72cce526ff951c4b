"""``upwatch exporter`` end to end with the real Debian ``prometheus`` and
``prometheus-alertmanager`` (TESTBED.md section 8): the exporter (a real ``upwatch exporter``
process) watches a unit crash-looping under a real systemd 252 (tests/systemd_host.py) over SSH;
Prometheus on 127.0.0.1 scrapes it every second with contrib/prometheus/upwatch-rules.yml loaded;
a query returns the phase and ``upwatch_restart_loop 1``; Alertmanager (``--cluster.listen-address=``
empty: no gossip port on 0.0.0.0) delivers UpwatchRestartLoop to a webhook receiver on 127.0.0.1.

Every wait polls with a deadline (tests/waiting.py); every process started here is ended after,
even when the test failed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from systemd_host import SystemdHost, llm_unit
from test_systemd_host import OOM_LINE
from tui.metrics import START_PHASES
from waiting import until_sync

pytestmark = [pytest.mark.host, pytest.mark.filterwarnings("ignore::ResourceWarning")]

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "contrib" / "prometheus" / "upwatch-rules.yml"
DASHBOARD = ROOT / "contrib" / "grafana" / "upwatch-dashboard.json"
#: Seconds for each stage: generous, reached only when the test fails (measured: the loop shows
#: in Prometheus ~10 s after the unit starts, the alert reaches the webhook ~2 s later).
STAGE_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Webhook:
    """An Alertmanager webhook receiver on 127.0.0.1: keeps every notification's JSON body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                n = int(self.headers.get("Content-Length", "0"))
                outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def alerts(self) -> list[dict[str, Any]]:
        return [a for b in self.bodies for a in b.get("alerts", [])]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def process(argv: list[str], log: Path, **kw: Any) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running with its output in ``log``; SIGTERM (then SIGKILL) after."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def query(port: int, promql: str) -> list[dict[str, Any]]:
    r = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": promql}, timeout=5)
    r.raise_for_status()
    return r.json()["data"]["result"]


def listens_on(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} writes them) with a socket listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                found.append(local)
    return found


def remote_followers(host: SystemdHost) -> list[str]:
    """The long-lived remote commands upwatch starts (``journalctl -f``, ``nvidia-smi -lms``)
    running on the host now, as command lines."""
    found = []
    for pid in host.host_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile
            continue
        if argv and ((argv[0].endswith(b"journalctl") and b"-f" in argv)
                     or (argv[0].endswith(b"nvidia-smi") and b"-lms" in argv)):
            found.append(b" ".join(argv).decode(errors="replace"))
    return found


def exporter_env(tmp_path: Path, host: SystemdHost) -> dict[str, str]:
    """The exporter's environment: a HOME whose ~/.ssh/config names the systemd host ``sysd``."""
    home = host.ssh_home(tmp_path / "home", "sysd")
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "UPWATCH_CONFIG")}
    env["HOME"] = str(home)
    return env


def test_prometheus_and_alertmanager_see_a_crash_loop(systemd_host: SystemdHost, tmp_path: Path) -> None:
    systemd_host.add_unit("crashy.service", llm_unit(
        "sglang-ok-01.log", port=30021, crash_at="Load weight begin", crash_line=OOM_LINE, exit_code=1,
        restart_sec=0.5, start_limit_interval_s=0))
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[settings]\nunit_interval_s = 0.5\nhealth_interval_s = 0.5\n\n'
                     '[[host]]\nname = "gpu-node-3"\nssh = "sysd"\nunit = "crashy.service"\nengine = "sglang"\n')
    hook = Webhook()
    prom_port, am_port = free_port(), free_port()
    (tmp_path / "am.yml").write_text(json.dumps({
        "route": {"receiver": "hook", "group_by": ["alertname", "host"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": hook.url, "send_resolved": False}]}]}))
    exporter_log = tmp_path / "exporter.log"
    try:
        with process([sys.executable, "-m", "tui", "exporter", "--config", str(hosts), "--listen", "127.0.0.1:0"],
                     exporter_log, cwd=ROOT, env=exporter_env(tmp_path, systemd_host)) as exporter:
            m = until_sync("the exporter listens", lambda: re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics",
                                                                 exporter_log.read_text()), STAGE_S, every=0.05)
            exp_port = int(m.group(1))
            (tmp_path / "prometheus.yml").write_text(json.dumps({
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
                "scrape_configs": [{"job_name": "upwatch", "static_configs": [{"targets": [f"127.0.0.1:{exp_port}"]}]}]}))
            with process(["prometheus-alertmanager", f"--config.file={tmp_path / 'am.yml'}",
                          f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
                          "--cluster.listen-address="], tmp_path / "am.log"), \
                 process(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                         tmp_path / "prometheus.log"):
                # Alertmanager is up before the alert fires (else Prometheus resends only after 1 min).
                until_sync("Alertmanager ready", lambda: ready(f"http://127.0.0.1:{am_port}/-/ready"), STAGE_S, every=0.1)
                until_sync("Prometheus ready", lambda: ready(f"http://127.0.0.1:{prom_port}/-/ready"), STAGE_S, every=0.1)
                assert listens_on(9094) == []  # no gossip: nothing bound 0.0.0.0:9094
                until_sync("the exporter scraped, the unit's state read",
                      lambda: query(prom_port, 'upwatch_probe_up{host="gpu-node-3",probe="unit"} == 1'), STAGE_S, every=0.2)

                assert systemd_host.systemctl("start", "crashy.service").returncode == 0
                [loop] = until_sync("upwatch_restart_loop 1 in Prometheus",
                               lambda: query(prom_port, 'upwatch_restart_loop{host="gpu-node-3"} == 1'), STAGE_S, every=0.2)
                assert loop["metric"]["unit"] == "crashy.service" and loop["metric"]["job"] == "upwatch"
                assert loop["value"][1] == "1"
                [phase] = query(prom_port, 'upwatch_start_phase{host="gpu-node-3"} == 1')
                assert phase["metric"]["phase"] in START_PHASES
                # The loop dies in weight loading each time: loading in `weights`, or failed between two starts.
                assert phase["metric"]["phase"] in ("starting", "weights", "failed"), phase
                assert query(prom_port, 'upwatch_verdict{host="gpu-node-3",kind="restart_loop",level="error"} == 1')
                assert query(prom_port, 'upwatch_failed_starts{host="gpu-node-3"} >= 2')
                restarts = query(prom_port, 'upwatch_unit_restarts{host="gpu-node-3"}')
                assert restarts and float(restarts[0]["value"][1]) >= 1
                assert query(prom_port, 'process_resident_memory_bytes{job="upwatch"} > 0')

                alerts = until_sync("UpwatchRestartLoop at the webhook", lambda: [
                    a for a in hook.alerts() if a["labels"].get("alertname") == "UpwatchRestartLoop"], STAGE_S, every=0.2)
                a = alerts[0]
                assert a["status"] == "firing" and a["labels"]["severity"] == "critical"
                assert (a["labels"]["host"], a["labels"]["unit"]) == ("gpu-node-3", "crashy.service")
                assert a["annotations"]["summary"] == "gpu-node-3 crashy.service: restart loop"
                assert "upwatch status gpu-node-3" in a["annotations"]["description"]

                # Every query of the Grafana dashboard runs on this Prometheus (its variables filled in).
                answers = {}
                for panel in json.loads(DASHBOARD.read_text())["panels"]:
                    for t in panel["targets"]:
                        expr = t["expr"].replace("$host", ".*").replace("$__rate_interval", "1m")
                        answers[(panel["title"], t["refId"])] = query(prom_port, expr)
                assert [r["value"][1] for r in answers[("Restart loops", "A")]] == ["1"]
                [timeline] = answers[("Start phase per host", "A")]
                assert 1 <= float(timeline["value"][1]) <= len(START_PHASES)
                assert {r["metric"]["phase"] for r in answers[("Hosts by phase", "A")]} <= set(START_PHASES)
                assert any(r["metric"]["kind"] == "restart_loop" for r in answers[("Verdicts", "A")])

                # promtool lints the live output (a real host's state, process metrics included).
                body = httpx.get(f"http://127.0.0.1:{exp_port}/metrics", timeout=5).text
                lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                                      text=True, timeout=30)
                assert lint.returncode == 0, lint.stdout + lint.stderr
            assert any("crashy.service" in c for c in remote_followers(systemd_host))
            exporter.send_signal(signal.SIGTERM)
            assert exporter.wait(30) == 0, exporter_log.read_text()
            # SIGTERM ends every remote process the exporter started.
            until_sync("the remote follows ended", lambda: remote_followers(systemd_host) == [], STAGE_S, every=0.1)
    finally:
        hook.close()
