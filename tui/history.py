"""``upwatch history [HOST ...] [--json]``: the start history, one block per comparable kind of start.

A kind is (host, unit, model, engine-argument hash): the starts whose durations
:meth:`probes.store.history.History.typical` compares. Each block says how many starts were ready and
failed, the median of each phase and of the whole start over the last
:data:`probes.store.history.TYPICAL_STARTS` ready ones, and when the newest began. Plain text; recorded host text
goes through the one sanitiser (:mod:`probes.hosttext`); nothing is interpreted as markup.

Exit status: 0 (an empty history says so), 2 when the history file cannot be read.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from probes.fold.eta import PHASE_WORDS
from probes.store.history import History, SummaryRow, default_history_path
from probes.hosttext import json_text, one_line
from probes.data.durations import fmt_span

EXIT_OK = 0
EXIT_UNREADABLE = 2


def _local(t: float) -> str:
    """Epoch seconds → ``2025-11-24 16:00`` in local time."""
    return datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M")


def _plain(text: str) -> str:
    """Recorded host text on one line, made safe by the one sanitiser (:func:`probes.hosttext.one_line`)."""
    return one_line(text)


def row_json(r: SummaryRow) -> dict[str, Any]:
    """One kind of start as a JSON-ready dict: ``host``, ``unit``, ``model`` and ``args_hash``
    (null when the engine printed none), ``engine``, ``ready``, ``failed``, ``typical_starts``
    (ready starts the medians are over), ``median_total_s`` (to ready, or null),
    ``median_phases_s`` (phase id → median seconds, in phase order), ``last_start`` (ISO 8601
    with the local offset) and ``last_outcome`` (``ready`` or ``failed``)."""
    t = r.typical
    return {"host": r.host, "unit": r.unit, "model": r.model, "args_hash": r.args_hash, "engine": r.engine,
            "ready": r.ready, "failed": r.failed, "typical_starts": t.n if t is not None else 0,
            "median_total_s": t.total_s if t is not None else None,
            "median_phases_s": {p: med for p, med, _ in t.phases} if t is not None else {},
            "last_start": datetime.fromtimestamp(r.last_began).astimezone().isoformat(timespec="seconds"),
            "last_outcome": r.last_outcome}


def format_row(r: SummaryRow) -> str:
    """One kind of start as a few aligned lines of plain text."""
    rows: list[tuple[str, str]] = [("model", _plain(r.model) if r.model else "(not printed by the engine)"),
                                   ("arguments", r.args_hash or "(no argument dump)")]
    starts = f"{r.ready} ready, {r.failed} failed; last began {_local(r.last_began)} ({r.last_outcome})"
    rows.append(("starts", starts))
    t = r.typical
    if t is not None:
        total = f"ready in {fmt_span(t.total_s)}" if t.total_s is not None else "ready (total unknown)"
        rows.append(("median", f"{total}, over the last {t.n} ready start{'s' if t.n != 1 else ''}"))
        if t.phases:
            rows.append(("phases", " · ".join(f"{PHASE_WORDS.get(p, _plain(p))} {fmt_span(med)}"
                                              for p, med, _ in t.phases)))
    else:
        rows.append(("median", "no ready start yet"))
    head = f"{_plain(r.host)}  {_plain(r.unit)} · {_plain(r.engine)}"
    width = max(len(k) for k, _ in rows)
    return "\n".join([head] + [f"  {k.ljust(width)}  {v}" for k, v in rows]) + "\n"


def run_history(hosts: Sequence[str], *, as_json: bool, out: IO[str], err: IO[str],
                path: Path | None = None) -> int:
    """Print the history of ``hosts`` (all when empty) and return the exit status.

    Args:
        hosts: host names as recorded (the configured names). as_json: print a JSON list of
            :func:`row_json` objects. out, err: where to write. path: the history file (default:
            :func:`probes.store.history.default_history_path`).

    Returns:
        0, or 2 when the file cannot be read (one line on ``err`` says why).
    """
    path = path or default_history_path()
    rows: list[SummaryRow] = []
    if path.exists():
        h = History(path)
        try:
            rows = h.summary(hosts)
            if h.problem:
                print(f"upwatch history: {h.problem}", file=err)
                return EXIT_UNREADABLE
        finally:
            h.close()
    if as_json:
        out.write(json_text([row_json(r) for r in rows], indent=2))
        out.write("\n")
    elif not rows:
        which = f" for {', '.join(_plain(h) for h in hosts)}" if hosts else ""
        out.write(f"No starts recorded{which} yet in {path}.\n"
                  "upwatch writes each start that ends ready or failed while it watches the host\n"
                  "(the dashboard, status, wait, report, mcp, the exporter).\n")
    else:
        out.write("\n".join(format_row(r) for r in rows))
    out.flush()
    return EXIT_OK
