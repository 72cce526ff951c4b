"""Render the README's screenshots to SVG and PNG.

* ``dashboard-overview``, ``dashboard-detail``, ``dashboard-failure``: the dashboard on the demo
  (``make_demo_app`` on a ManualClock, so every run draws the same picture), at 160x48;
  ``dashboard-compact``: 128 hosts running the demo's four scenarios in turn, one row each.
* ``replay-*``: ``upwatch replay`` on shipped real logs.

Run: ``python screenshots/make_screenshots.py [NAME...]`` (PNG needs ``rsvg-convert``, Debian package
librsvg2-bin; without it only the SVGs are written). Host text goes through ``rich.text.Text``, never
through markup.
"""

from __future__ import annotations

import asyncio
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

# This checkout's code, not whichever upwatch the interpreter has installed (an editable install
# of another checkout would silently draw its pictures).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.sources.logfile import read_path  # noqa: E402
from tui.replay import format_timeline  # noqa: E402

HERE = Path(__file__).resolve().parent
LOGS = HERE.parent / "tests" / "fixtures" / "logs"
SHOTS = {
    "replay-ready": "sglang-ok-03.log",
    "replay-failed": "sglang-fail-graphcapture-01.log",
    "replay-restart-loop": "vllm-restart-loop-02.log",
}
_STYLES = {"READY": "bold green", "FAILED": "bold red", "LOADING": "bold yellow", "STOPPED": "bold",
           "restart loop": "bold red", "hint:": "cyan", "decisive line": "red"}


_RUN_RE = re.compile(r'(<text [^>]*?x=")([\d.]+)("[^>]*?textLength=")([\d.]+)("[^>]*>)((?:&#160;)+)([^<]*</text>)')
_CHAR_W = 12.2  # rich's SVG cell width at its default font size


def _shift_run(m: re.Match[str]) -> str:
    n = m.group(6).count("&#160;")
    x, length = float(m.group(2)) + n * _CHAR_W, float(m.group(4)) - n * _CHAR_W
    return f"{m.group(1)}{x:g}{m.group(3)}{max(length, 0):g}{m.group(5)}{m.group(7)}"


def render(name: str, log: str) -> Path:
    path = LOGS / log
    text = format_timeline(read_path(str(path)), f"upwatch replay tests/fixtures/logs/{log}")
    console = Console(record=True, width=110, force_terminal=True, color_system="truecolor", file=io.StringIO())
    console.print(Text("$ upwatch replay tests/fixtures/logs/" + log, style="bold"))
    for line in text.splitlines():
        t = Text(line)
        for prefix, style in _STYLES.items():
            if line.startswith(prefix):
                t.stylize(style, 0, len(prefix))
        if line.startswith(">"):
            t.stylize("bold yellow")
        console.print(t)
    svg = HERE / f"{name}.svg"
    console.save_svg(str(svg), title="upwatch replay")
    return svg


#: Dashboard shots: name → (simulated seconds since the demo began, host to open or None, keys,
#: hosts: None for the demo's four, else a fleet of that many running the four scenarios in turn).
DASHBOARD: dict[str, tuple[float, str | None, tuple[str, ...], int | None]] = {
    "dashboard-overview": (125.0, None, (), None),
    "dashboard-detail": (400.0, "gpu-node-1", (), None),
    "dashboard-failure": (400.0, "gpu-node-2", ("e",), None),
    "dashboard-compact": (400.0, None, (), 128),
}


async def _dashboard(name: str, seconds: float, host: str | None, keys: tuple[str, ...],
                     hosts: int | None) -> Path:
    import tempfile

    from probes.clock import ManualClock
    from probes.store.history import History
    from tui.demo_app import advance_demo, make_demo_app

    clock = ManualClock(1_764_000_000.0)
    names = None if hosts is None else [f"gpu-{chr(97 + i // 32)}{i % 32 + 1:02d}" for i in range(hosts)]
    with tempfile.TemporaryDirectory() as folder:  # as `upwatch --demo` does: made-up earlier starts
        history = History(f"{folder}/history.sqlite3")
        app = make_demo_app(clock=clock, history=history, seed_history=True, names=names)
        async with app.run_test(size=(160, 48)) as pilot:
            await advance_demo(app, clock, pilot, seconds, host=host, keys=keys)
            app.save_screenshot(filename=f"{name}.svg", path=str(HERE))
        history.close()
    return HERE / f"{name}.svg"


def _png(svg: Path, rsvg: str) -> Path:
    """PNG of ``svg``; librsvg drops a run's leading spaces, so convert a copy with runs shifted."""
    fixed = svg.with_suffix(".rsvg.svg")
    fixed.write_text(_RUN_RE.sub(_shift_run, svg.read_text()))
    png = svg.with_suffix(".png")
    try:
        subprocess.run([rsvg, "-o", str(png), str(fixed)], check=True)
    finally:
        fixed.unlink()
    return png


def main(only: list[str] | None = None) -> None:
    """Render every shot, or those named in ``only`` (``python screenshots/make_screenshots.py
    dashboard-compact``)."""
    rsvg = shutil.which("rsvg-convert")
    svgs = [asyncio.run(_dashboard(name, *spec)) for name, spec in DASHBOARD.items() if not only or name in only]
    svgs += [render(name, log) for name, log in SHOTS.items() if not only or name in only]
    for svg in svgs:
        print(_png(svg, rsvg) if rsvg else svg)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
