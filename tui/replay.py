"""Text rendering of a :class:`~probes.reader.Reading` for ``upwatch replay``.

Plain text with fixed columns, so it reads the same in a terminal, a CI log or an e-mail. Every
piece of host text in it has already had escape codes and control characters removed by the reader.
"""

from __future__ import annotations

from probes.engines import ENGINES
from probes.reader import Reading

_LABELS = {"starting": "Starting", "download": "Download", "weights": "Weight load", "init": "Init",
           "graph_capture": "Graph capture", "warmup": "Warm-up", "ready": "Ready"}
_TEXT_WIDTH = 100


def duration(seconds: float | None) -> str:
    """``75.0`` -> ``"1m15s"``, ``3725`` -> ``"1h02m05s"``, None -> ``"-"``."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s"


def _count(x: float) -> str:
    if x >= 1e9:
        return f"{x / 1e9:.1f}G"
    if x >= 1e6:
        return f"{x / 1e6:.1f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _clip(text: str, width: int = _TEXT_WIDTH) -> str:
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def format_timeline(reading: Reading, name: str) -> str:
    """The replay report: header, one row per phase of the last start, then the outcome."""
    engine = ENGINES[reading.engine].label if reading.engine in ENGINES else "unknown engine"
    out = [f"{name}: {engine}, {reading.lines} lines, {reading.starts} start"
           f"{'s' if reading.starts != 1 else ''}"
           f"{f', {reading.bad_lines} unreadable records' if reading.bad_lines else ''}", ""]
    out.append(f"  {'PHASE':<14}{'LINE':>7}  {'TIME':<22}{'DURATION':>9}  PROGRESS")
    prog = reading.progress
    for mark in reading.phases:
        progress = ""
        if prog is not None and prog.phase == mark.phase:
            progress = f"{_count(prog.done)}/{_count(prog.total)} ({prog.fraction:.0%})"
        current = mark.phase == reading.phase and reading.state in ("loading", "failed")
        out.append(f"{'>' if current else ' '} {_LABELS.get(mark.phase, mark.phase):<14}{mark.line:>7}  "
                   f"{mark.time or '-':<22}{duration(mark.duration_s):>9}  {progress}")
    out.append("")
    label = _LABELS.get(reading.phase, reading.phase)
    if reading.state == "failed":
        out.append(f"FAILED during {label}: {reading.cause}")
    elif reading.state == "ready":
        out.append("READY")
    elif reading.state == "stopped":
        out.append(f"STOPPED during {label}")
    else:
        out.append(f"LOADING: {label} (the log ends here)")
    if reading.restart_loop:
        counter = f", systemd restart counter {reading.restart_counter}" if reading.restart_counter else ""
        out.append(f"restart loop: {reading.starts} starts in this log{counter}")
    if reading.gave_up:
        out.append("systemd gave up restarting the unit (start limit hit)")
    if reading.error is not None:
        which = "decisive line" if reading.state == "failed" else "latest failure (an earlier start)"
        out.append(f"{which}, line {reading.error.line}: {_clip(reading.error.text, 1000)}")
    if reading.hint:
        out.append(f"hint: {reading.hint}")
    return "\n".join(out) + "\n"
