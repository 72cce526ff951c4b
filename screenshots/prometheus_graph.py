"""Render ``screenshots/prometheus-graph.png``: Prometheus's graph page over real data from
``upwatch exporter``.

A real systemd 252 test host (tests/systemd_host.py) runs three units replaying a real SGLang
start (tests/fake_llm.py): one that gets ready (and is restarted once), one that crash-loops in
weight loading, one that hangs in CUDA graph capture. A real ``upwatch exporter`` watches them over
SSH, the Debian ``prometheus`` scrapes it every second, and headless Chromium (Playwright, the
system's /usr/bin/chromium) photographs the graph of the dashboard's phase query (1 starting,
2 download, 3 weights, 4 init, 5 graph capture, 6 warm-up, 7 ready, 8 failed, 9 stopped,
10 waiting) over the last three minutes.

Run as root from the repository root: ``python screenshots/prometheus_graph.py`` (about 3 minutes).
Grafana is not used: no registry this project reaches ships it (not in Debian 12, not on PyPI or
npm), so the dashboard itself cannot be photographed here.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from systemd_host import llm_unit, start_systemd_host  # noqa: E402 - after the path
from test_systemd_host import OOM_LINE  # noqa: E402

OUT = HERE / "prometheus-graph.png"
DASHBOARD = ROOT / "contrib" / "grafana" / "upwatch-dashboard.json"
UNITS = {"gpu-node-1": "ok.service", "gpu-node-2": "crashy.service", "gpu-node-3": "hang.service"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, deadline_s: float = 60.0):  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise SystemExit(f"{what}: not within {deadline_s:g} s")
        time.sleep(0.2)


def get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.read()
    except OSError:
        return None


def phase_query() -> str:
    dash = json.loads(DASHBOARD.read_text())
    panel = next(p for p in dash["panels"] if p["title"] == "Start phase per host")
    return panel["targets"][0]["expr"].replace("$host", ".*")


async def photograph(url: str) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        await page.goto(url)
        try:
            await page.wait_for_selector(".rickshaw_legend", timeout=20000)  # Debian 2.42 serves the classic UI
        except Exception:
            await page.screenshot(path="/tmp/prometheus-graph-failed.png")
            alerts = await page.locator(".alert").all_inner_texts()
            raise SystemExit(f"no graph on {url}: {alerts} (page: /tmp/prometheus-graph-failed.png)") from None
        await page.wait_for_timeout(1500)
        await page.screenshot(path=str(OUT))
        await browser.close()


def main() -> int:
    quick = "--quick" in sys.argv  # a short run, to try the script
    work = Path(tempfile.mkdtemp(prefix="upwatch-shot-"))
    host = start_systemd_host(work / "sysd", 0)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        host.add_unit("ok.service", llm_unit("sglang-ok-01.log", port=30031, speed=8))
        host.add_unit("crashy.service", llm_unit("sglang-ok-01.log", port=30032, speed=8, crash_at="Load weight begin",
                                                 crash_line=OOM_LINE, exit_code=1, restart_sec=6,
                                                 start_limit_interval_s=0))
        host.add_unit("hang.service", llm_unit("sglang-ok-01.log", port=30033, speed=8,
                                               hang_at="Capture cuda graph begin"))
        home = host.ssh_home(work / "home", "sysd")
        hosts = work / "hosts.toml"
        hosts.write_text("".join(f'[[host]]\nname = "{n}"\nssh = "sysd"\nunit = "{u}"\nengine = "sglang"\n\n'
                                 for n, u in UNITS.items()))
        env = {**os.environ, "HOME": str(home), "UPWATCH_DATA_DIR": str(work / "data")}
        exp_port, prom_port = free_port(), free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "tui", "exporter", "--config", str(hosts),
                                       "--listen", f"127.0.0.1:{exp_port}"], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        (work / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "upwatch", "static_configs": [{"targets": [f"127.0.0.1:{exp_port}"]}]}]}))
        procs.append(subprocess.Popen(["prometheus", f"--config.file={work / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={work / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{prom_port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for("the exporter", lambda: get(f"http://127.0.0.1:{exp_port}/metrics"))
        wait_for("Prometheus", lambda: get(f"http://127.0.0.1:{prom_port}/-/ready"))
        time.sleep(2 if quick else 10)  # a little history of "waiting" before the starts
        for unit in UNITS.values():
            host.systemctl("start", unit)
        time.sleep(15 if quick else 100)
        host.systemctl("restart", "ok.service")  # a second start of the one that got ready
        time.sleep(5 if quick else 70)
        url = (f"http://127.0.0.1:{prom_port}/graph?" + urllib.parse.urlencode({
            "g0.expr": phase_query(), "g0.tab": "0", "g0.range_input": "3m", "g0.stacked": "0"},
            quote_via=urllib.parse.quote))  # %20, not "+": the classic UI does not read "+" as a space
        asyncio.run(photograph(url))
        print(f"written: {OUT}")
        return 0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        host.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
