"""contrib/: the systemd unit passes ``systemd-analyze verify`` with the hardening the issue asks
for (its exposure under 3.0 in ``systemd-analyze security``), and the Grafana dashboard is an
importable dashboard whose queries name only metrics the exporter serves. (Its queries run on a
real Prometheus in tests/test_exporter_prometheus.py.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from probes.data.state import HostState
from tui.metrics import host_families

CONTRIB = Path(__file__).resolve().parent.parent / "contrib"
UNIT = CONTRIB / "systemd" / "upwatch-exporter.service"
DASHBOARD = CONTRIB / "grafana" / "upwatch-dashboard.json"


def unit_copy(tmp_path: Path) -> Path:
    """The unit with an ExecStart that exists here (verify checks the binary)."""
    text = UNIT.read_text().replace("/opt/upwatch/bin/upwatch", "/bin/true")
    path = tmp_path / UNIT.name
    path.write_text(text)
    return path


def test_the_unit_is_valid_and_hardened(tmp_path: Path) -> None:
    text = UNIT.read_text()
    for line in ("User=upwatch", "SupplementaryGroups=systemd-journal", "ProtectSystem=strict",
                 "NoNewPrivileges=yes", "CapabilityBoundingSet=", "ExecStart=/opt/upwatch/bin/upwatch exporter "):
        assert re.search(rf"^{re.escape(line)}", text, re.M), line
    assert "--listen 127.0.0.1:9464" in text
    assert not re.search(r"^DynamicUser=yes", text, re.M)  # D-Bus refuses its UIDs (tests/test_exporter_unit.py)
    sysusers = (CONTRIB / "systemd" / "upwatch-exporter.sysusers.conf").read_text()
    assert re.search(r'^u upwatch - "upwatch exporter" /var/lib/upwatch$', sysusers, re.M)
    path = unit_copy(tmp_path)
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    done = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(path)], capture_output=True,
                          text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([\d.]+)", done.stdout)
    assert m and float(m.group(1)) < 3.0, done.stdout[-400:]


def served_names() -> set[str]:
    """Every metric name the exporter serves (hosts' and its own), and Prometheus's ``up``."""
    registry = CollectorRegistry()
    for c in (ProcessCollector, PlatformCollector, GCCollector):
        c(registry=registry)
    text = generate_latest(registry).decode()
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    fams = host_families([("h", HostState("h", "u.service"))], 0.0)
    return names | {f.name for f in fams} | {f.name + "_info" for f in fams} | \
        {f.name + "_total" for f in fams} | {"up"}


def test_the_dashboard_is_importable_and_asks_for_served_metrics_only() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "upwatch-fleet" and dash["schemaVersion"] >= 36
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "host"]
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    titles = {p["title"] for p in panels}
    assert {"Hosts by phase", "Start phase per host", "Restart loops", "ETA to ready", "Verdicts"} <= titles
    served = served_names()
    words = {"by", "sum", "count", "max", "or", "vector", "rate", "and", "unless", "on"}
    for p in panels:
        for t in p["targets"]:
            names = set(re.findall(r"\b([a-z_][a-z0-9_]*)\b\s*(?:\{|\[|\)|$| )", re.sub(r'"[^"]*"', "", t["expr"])))
            metrics = {n for n in names if n not in words and (n.startswith(("upwatch_", "process_")) or n == "up")}
            assert metrics, (p["title"], t["expr"])
            assert metrics <= served, (p["title"], metrics - served)
