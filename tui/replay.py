"""Text rendering of a :class:`~probes.data.reading.Reading` for ``upwatch replay``.

Plain text with fixed columns, so it reads the same in a terminal, a CI log or an e-mail. Every
piece of host text in it has already had escape codes and control characters removed by the reader.
"""

from __future__ import annotations

from probes.logs.engines import ENGINES
from probes.data.durations import fmt_span
from probes.data.reading import Reading
from probes.logs.why import explain

_LABELS = {"starting": "Starting", "download": "Download", "weights": "Weight load", "init": "Init",
           "graph_capture": "Graph capture", "warmup": "Warm-up", "ready": "Ready"}
_TEXT_WIDTH = 100


def duration(seconds: float | None) -> str:
    """``75.0`` -> ``"1m15s"``, ``3725`` -> ``"1h02m"`` (the cards' and reports' :func:`fmt_span`),
    None -> ``"-"``."""
    return "-" if seconds is None else fmt_span(seconds)


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


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: Said under the timeline when a time in it has no year.
NO_YEAR_NOTE = "The log gives no year: times are its month, day and clock, as it wrote them."


def shown_time(iso: str | None) -> str:
    """A phase's time for the text timeline: the ISO text of :func:`probes.logs.timeline.resolve`
    as it is (``2025-05-02T16:13:35``), but a date with no year anywhere in the log, ISO's
    ``--02-12T19:33:39``, as ``Feb 12 19:33:39``; ``-`` for none."""
    if not iso:
        return "-"
    if iso.startswith("--") and iso[4:5] == "-" and iso[7:8] == "T" and iso[2:4].isdigit() \
            and 1 <= int(iso[2:4]) <= 12:
        return f"{_MONTHS[int(iso[2:4]) - 1]} {iso[5:7]} {iso[8:]}"
    return iso


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


#: ``state`` in ``upwatch replay --json`` for a log with no server start in it (an empty file, blank
#: lines, or lines that are not from a server start): the text form's "NO SERVER START FOUND".
NO_START = "none"


def found_start(reading: Reading) -> bool:
    """Whether a saved log holds a server start: a start the reader counted (``starts``) that
    something names as one: an engine, a phase past ``starting``, a failure or suspect, a ready line,
    or progress. Any text is a start to the reader (a live unit's first lines are one before they
    name anything), but ``/etc/passwd`` is not a server loading."""
    if reading.starts == 0:
        return False
    if reading.engine not in (None, "unknown") or reading.state != "loading":
        return True
    return bool(reading.error or reading.suspects or reading.progress is not None or reading.starts > 1
                or any(p.phase != "starting" for p in reading.phases))


def replay_json(reading: Reading) -> dict:
    """The object ``upwatch replay --json`` prints: :meth:`Reading.to_json` and ``why``
    (:func:`probes.logs.why.explain`), with ``state``
    :data:`NO_START` (and ``phase`` null) when the log holds no server start (:func:`found_start`),
    which the text form reports as "NO SERVER START FOUND"; the reader itself calls such a log a
    start not yet begun (``loading``, ``starting``), which is true for a live journal but not for a
    saved log that has ended."""
    out = reading.to_json()
    # What read the state, the phase and the decisive line: the rule and the engine's own message
    # (probes/logs/engines/messages/, with its version range and source location).
    out["why"] = explain(reading) if found_start(reading) else {"state": None, "phase": None, "error": None}
    if not found_start(reading):
        out["state"] = NO_START
        out["starts"] = 0
        out["phases"] = []
        if "phases_seen" in out:
            out["phases_seen"] = []
        out["phase"] = None
    return out


def format_timeline(reading: Reading, name: str) -> str:
    """The replay report: header, one row per phase of the last start, then the outcome."""
    engine = ENGINES[reading.engine].label if reading.engine in ENGINES else "unknown engine"
    found = found_start(reading)
    head = f"{name}: {engine}, {_plural(reading.lines, 'line')}, {_plural(reading.starts if found else 0, 'start')}"
    if reading.bad_lines:
        head += f", {_plural(reading.bad_lines, 'unreadable record')}"
    if reading.service is not None:
        head += f", service {reading.service}"
        if reading.engine_services > 1:
            head += f" (the worst of {reading.engine_services} engine services)"
    out = [head, ""]
    if not found:
        out.append("NO SERVER START FOUND: nothing in this log comes from a server start (is it the right file?)")
        return "\n".join(out) + "\n"
    prog = reading.progress
    rows = []
    for mark in reading.phases:
        progress = ""
        if prog is not None and prog.phase == mark.phase:
            progress = _progress(prog)
        current = mark.phase == reading.phase and reading.state in ("loading", "failed")
        if current and prog is not None and not any(m.phase == prog.phase for m in reading.phases):
            # e.g. a hub download inside weight loading: the bar belongs to a phase not in the table
            progress = f"{_LABELS.get(prog.phase, prog.phase).lower()} {_progress(prog)}"
        # Ready is where the start ends: its "duration" would only be the rest of the log.
        dur = "" if mark.phase == "ready" else duration(mark.duration_s)
        rows.append((">" if current else " ", _LABELS.get(mark.phase, mark.phase), str(mark.line),
                     shown_time(mark.time), dur, progress))
    w_line = max([4] + [len(r[2]) for r in rows])
    w_time = max([4] + [len(r[3]) for r in rows])
    out.append(f"  {'PHASE':<14}{'LINE':>{w_line}}  {'TIME':<{w_time}}  {'DURATION':>8}  PROGRESS")
    for cur, label, line, time, dur, progress in rows:
        out.append(f"{cur} {label:<14}{line:>{w_line}}  {time:<{w_time}}  {dur:>8}  {progress}".rstrip())
    if any(m.time and m.time.startswith("--") for m in reading.phases):
        out.append(f"  {NO_YEAR_NOTE}")
    out.append("")
    label = _LABELS.get(reading.phase, reading.phase)
    if reading.state == "failed":
        # A start that failed after ready crashed while serving: "during Ready" read as a start.
        where = "while serving (after Ready)" if reading.phase == "ready" else f"during {label}"
        out.append(f"FAILED {where}: {reading.cause}")
    elif reading.state == "ready":
        spans = [m.duration_s for m in reading.phases if m.phase != "ready"]
        first = reading.phases[0].phase if reading.phases else "ready"
        if first not in ("starting", "ready"):
            # The log begins inside the start (an excerpt): its length is not in it ("after 0s" was).
            took = f" (the log begins in {_LABELS.get(first, first)}: how long the start took is not in it)"
        else:
            took = f" after {duration(sum(spans))}" if spans and None not in spans else ""
        out.append(f"READY{took}")
    elif reading.state == "stopped":
        out.append(f"STOPPED after {label}" if reading.phase == "ready" else f"STOPPED during {label}")
    else:
        out.append(f"LOADING: {label} (the log ends here)")
    if reading.restart_loop:
        counter = f", systemd restart counter {reading.restart_counter}" if reading.restart_counter else ""
        out.append(f"restart loop: {_plural(reading.starts, 'start')} in this log{counter}")
    if reading.gave_up:
        out.append("systemd gave up restarting the unit (start limit hit)")
    if reading.error is not None:
        which = "decisive line" if reading.state == "failed" else "latest failure (an earlier start)"
        out.append(f"{which}, line {reading.error.line}: {_clip(reading.error.text, 1000)}")
    if reading.hint:
        out.append(f"hint: {reading.hint}")
    return "\n".join(out) + "\n"


def _progress(prog) -> str:
    return f"{_count(prog.done)}/{_count(prog.total)} ({prog.fraction:.0%})"
