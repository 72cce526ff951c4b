"""Render the README's screenshots: ``upwatch replay`` on shipped real logs, to SVG and PNG.

Run: ``python screenshots/make_screenshots.py`` (PNG needs ``rsvg-convert``, Debian package
librsvg2-bin; without it only the SVGs are written). Host text goes through ``rich.text.Text``, never
through markup.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

from rich.console import Console
from rich.text import Text

from probes.logfile import read_path
from tui.replay import format_timeline

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
    # librsvg drops the leading (non-breaking) spaces of a <text> run: move the run right instead.
    svg.write_text(_RUN_RE.sub(_shift_run, svg.read_text()))
    return svg


def main() -> None:
    rsvg = shutil.which("rsvg-convert")
    for name, log in SHOTS.items():
        svg = render(name, log)
        if rsvg:
            subprocess.run([rsvg, "-o", str(svg.with_suffix(".png")), str(svg)], check=True)
        print(svg.with_suffix(".png" if rsvg else ".svg"))


if __name__ == "__main__":
    main()
