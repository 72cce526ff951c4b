"""``upwatch status [--json] [HOST...]``: connect, wait until every host answered once, print, exit;
``upwatch status --watch``: keep watching and print a JSON line per change (:func:`watch`).

The same engine as the dashboard (one :class:`~probes.watch.watcher.HostWatcher` per host), without a
screen. A host has answered when each probe delivered or failed once and its journal backlog has
been read (no new entry for :data:`tui.look.JOURNAL_QUIET_S`: :func:`tui.look.collect`); the wait is
bounded by ``--timeout``.

Exit status: 0 every host answered and its unit and journal could be read; 4 at least one could
not be reached (connection, login or host key), gave no answer, or was reached but its unit or
journal cannot be read (the ``cannot_see`` verdict: sudo missing or refusing, no systemd, no
journal access); each such host gets one line on stderr saying why. JSON (``--json``): a list with
one object per host; see :func:`host_json`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import IO, Any

from probes.clock import Clock, WallClock
from probes.fold.eta import eta_for, typical_words
from probes.fold.download import download_words
from probes.sources.nvml import NvmlSource
from probes.store.history import History
from probes.hosttext import json_text, one_line
from probes.data.events import CONNECTION_KINDS
from probes.fold.headline import headline, shown_hint, shown_verdict
from probes.fold.verdict import blind_failures, systemd_gave_up
from probes.transport.runner import Runner
from probes.data.state import HostState
from probes.spec import HostSpec
from tui.config import Config
from tui.look import JOURNAL_QUIET_S, Answered, collect, make_watchers

EXIT_OK = 0
EXIT_UNREACHABLE = 4



def iso_utc(t: float | None) -> str | None:
    """Epoch seconds → ISO 8601 UTC to the second (``2026-12-02T04:22:30Z``), or None: the one
    time format of the JSON forms (``status --json``, ``--watch``, the MCP tools)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if t is not None else None


def connection_text(s: HostState) -> str:
    """``ok``, or why the host could not be reached (the failure's message)."""
    f = next((f for f in s.failures if f.kind in CONNECTION_KINDS), None)
    return "ok" if f is None else f.message


def host_json(spec: HostSpec, s: HostState, now: float | None = None) -> dict[str, Any]:
    """One host's snapshot as a JSON-ready dict.

    Keys: ``host``, ``unit``, ``engine``, ``state`` (``waiting``: read, no start yet; ``loading``,
    ``ready``, ``failed``, ``stopped``; ``unknown``: never reached, or nothing could be read:
    :func:`known_state`), ``headline`` (the card's word: :func:`probes.fold.headline.headline`), ``phase``
    (phase id of docs/architecture.md; null before a log line was read), ``progress`` (``{"phase", "done",
    "total", "fraction"}`` of the current phase's bar, or null), ``readiness`` (docs/architecture.md's ladder: ``inactive``,
    ``port_closed``, ``http_unhealthy``, ``healthy``, ``serving``, or ``unknown``), ``restarts``
    (NRestarts, or null), ``restart_loop`` (null, or ``{"starts", "causes", "gave_up"}``), ``gpus`` (list of ``index``, ``name``,
    ``mem_used_mib``, ``mem_total_mib``, ``util_pct``; null where not available), ``gpu_error``
    (why there are no GPU values, or null), ``error`` (``{"text", "time"}`` of the decisive line,
    time ISO 8601 UTC, :func:`iso_utc`, as every time here; or null), ``cause``, ``hint``,
    ``last_line``, ``verdict`` (``{"level"
    (ok, info, warning, error), "kind", "sentence", "evidence"}``; kind ``waiting``, level ``info``
    while a probe has not answered yet: :func:`probes.fold.headline.shown_verdict`), ``gpu_orphans`` (``pid``,
    ``command``, ``mem_mib``, ``gpu_index`` of processes holding GPU memory outside the unit's
    cgroup; null before a look), ``connection`` (``ok`` or the reason), ``probe_errors`` (probe → message),
    ``typical`` (earlier comparable starts, see :func:`typical_json`; ``now``: the clock's, for the ETA).
    ``knowledge`` (``unit``, ``journal``, ``gpu``, ``health`` → ``{"status" (read, failing, never),
    "since" (ISO 8601: last delivered, or failing since; null for never), "why" (the failure's
    message, or null), "reason" (why the unit or journal cannot be read: ``sudo_missing``,
    ``sudo_refused``, ``no_systemd``, ``no_journal_access``; null otherwise)}``).
    ``download`` (``{"bytes", "expected_bytes", "rate_bps", "eta_s"}`` while a start downloads into
    the hub cache, the folder measured; ``expected_bytes``, ``rate_bps``, ``eta_s`` null when
    unknown; null otherwise).
    """
    gpus = []
    if s.gpus is not None:
        gpus = [{"index": g.index, "name": g.name or None, "mem_used_mib": g.mem_used_mib,
                 "mem_total_mib": g.mem_total_mib, "util_pct": g.util_pct} for g in s.gpus.gpus]
    gf = s.failure("gpu")
    gf = gf if gf is not None and gf.kind not in CONNECTION_KINDS else None  # said in "connection"
    p = s.progress
    state, phase = known_state(s)
    return {
        "host": spec.name,
        "unit": s.unit,
        "engine": s.engine,
        "state": state,
        "headline": headline(s),
        "phase": phase,
        # The current phase's bar only: a finished bar of an earlier phase ("weights 1/1" in init)
        # read as this phase's progress.
        "progress": ({"phase": p.phase, "done": p.done, "total": p.total, "fraction": round(p.fraction, 4)}
                     if p is not None and p.phase == s.phase else None),
        "readiness": s.readiness,
        "restarts": s.restart_counter,
        "restart_loop": ({"starts": max(len(s.failed_starts), 2),
                          "causes": [f.cause for f in s.failed_starts],
                          "gave_up": systemd_gave_up(s)}
                         if s.restart_loop else None),
        "gpus": gpus,
        "gpu_error": gf.message if gf is not None else None,
        "gpu_processes": ([{"pid": a.pid, "name": a.name, "mem_mib": a.mem_mib, "gpu_index": a.gpu_index}
                           for a in s.gpu_apps.apps] if s.gpu_apps is not None else None),
        "error": {"text": s.error.text, "time": iso_utc(s.failed_at)} if s.error is not None else None,
        "cause": s.cause,
        "hint": s.hint or None,
        "last_line": s.last_line or None,
        "verdict": ({"level": v.level, "kind": v.kind, "sentence": v.sentence,
                     "evidence": list(v.evidence)} if (v := shown_verdict(s)) is not None else
                    {"level": "ok", "kind": "", "sentence": _ok_sentence(s), "evidence": []}),
        "gpu_orphans": ([{"pid": o.pid, "command": o.command, "mem_mib": o.mem_mib, "gpu_index": o.gpu_index}
                         for o in s.gpu_orphans] if s.gpu_orphans is not None else None),
        "connection": connection_text(s),
        "probe_errors": {f.probe: f.message for f in s.failures},
        "knowledge": {k.probe: {"status": k.status, "since": iso_utc(k.since), "why": k.why or None,
                                "reason": k.reason or None} for k in s.knowledge},
        "typical": typical_json(s, now),
        "download": ({"bytes": d.bytes, "expected_bytes": d.expected_bytes,
                      "rate_bps": round(d.rate_bps, 1) if d.rate_bps is not None else None,
                      "eta_s": round(d.eta_s, 1) if d.eta_s is not None else None}
                     if (d := s.download) is not None else None),
    }


def typical_json(s: HostState, now: float | None) -> dict[str, Any] | None:
    """How earlier comparable starts went, for ``--json``: ``{"starts", "total_s", "phases"
    (phase id → median seconds), "eta_s" (seconds to ready, loading only, or null), "slower"}``,
    or null without history."""
    t = s.typical
    if t is None:
        return None
    e = eta_for(s, now) if now is not None else None
    return {"starts": t.n, "total_s": t.total_s, "phases": {p: med for p, med, _ in t.phases},
            "eta_s": None if e is None or e.remaining_s is None else round(e.remaining_s, 1),
            "slower": bool(e is not None and e.slower)}


def _ok_sentence(s: HostState) -> str:
    """What an ``ok`` verdict says: the state in a few words."""
    if s.state == "ready":
        return "Ready and " + ("serving." if s.readiness == "serving" else f"{s.readiness.replace('_', ' ')}.")
    return f"{s.state.capitalize()}, nothing wrong seen."


def format_host(spec: HostSpec, s: HostState, connection: str | None = None, now: float | None = None) -> str:
    """One host's snapshot as a few aligned lines of plain text (host text is not interpreted);
    ``connection`` overrides :func:`connection_text` (e.g. "no answer within 15 s"); ``now`` (epoch
    seconds) adds how earlier comparable starts went (``graph capture 1:12 of ~1:40 · ready in ~2m``)."""
    from widgets.fmt import RUNG_WORDS  # a plain dict; no widget is built

    rows: list[tuple[str, str]] = []
    rows.append(("state", state_text(s)))
    usual = typical_words(s, now) if now is not None else ""
    if usual:
        rows.append(("usually", usual))
    if s.download is not None and s.state == "loading":
        rows.append(("download", download_words(s)))
    rows.append(("readiness", RUNG_WORDS.get(s.readiness, s.readiness)))
    rows.append(("restarts", "?" if s.restart_counter is None else str(s.restart_counter)
                 + (" (restart loop)" if s.restart_loop else "")))
    gf = s.failure("gpu")
    gf = gf if gf is not None and gf.kind not in CONNECTION_KINDS else None
    if s.gpus is not None and s.gpus.gpus:
        cells = []
        for g in s.gpus.gpus:
            used = "?" if g.mem_used_mib is None else str(g.mem_used_mib)
            total = "?" if g.mem_total_mib is None else str(g.mem_total_mib)
            util = "" if g.util_pct is None else f" {g.util_pct}%"
            cells.append(f"{g.index}: {used}/{total} MiB{util}")
        rows.append(("GPUs", " · ".join(cells)))
    if gf is not None:
        rows.append(("GPU error", gf.message))
    if s.error is not None:
        rows.append(("error", s.error.text))
        if hint := shown_hint(s):  # what the verdict row below does not say already
            rows.append(("hint", hint))
    if s.last_line:
        rows.append(("last line", s.last_line))
    if (v := shown_verdict(s)) is not None:
        rows.append(("verdict", v.sentence))
    for f in s.failures:
        if f.probe != "gpu" and f.kind not in CONNECTION_KINDS:
            rows.append((f"{f.probe} error", f.message))
    rows.append(("connection", connection or connection_text(s)))
    head = one_line(f"{spec.name}  {s.unit} · {s.engine}")
    width = max(len(k) for k, _ in rows)
    return "\n".join([head] + [f"  {k.ljust(width)}  {one_line(v)}" for k, v in rows]) + "\n"


def _unread(s: HostState) -> str | None:
    """Why nothing about the start is known, in a few words (``not reached``; ``cannot read the
    unit or journal`` while nothing was read; ``cannot read the journal`` while it fails and no
    line of it was read: "no start seen yet" would be a guess), or None: the one rule of
    :func:`known_state` and :func:`state_text`."""
    kind = s.verdict.kind if s.verdict is not None else ""
    if kind == "ssh" or (s.stale_since is not None and s.updated is None):
        return "not reached"
    if kind == "cannot_see" and s.state == "waiting":
        if s.unit_state is None:
            return "cannot read the unit or journal"
        if any(f.probe == "journal" for f in blind_failures(s)):
            return "cannot read the journal"
    return None


def known_state(s: HostState) -> tuple[str, str | None]:
    """``(state, phase)`` as the JSON forms give them (``status --json``, ``--watch``, the MCP
    tools): ``unknown`` where :func:`state_text` says it (never reached; the unit and journal
    cannot be read and nothing was), not the model's ``waiting``, which reads as "no start yet"; and
    no phase (null) before a log line was read: a default phase is not a fact."""
    if s.state != "waiting":
        return s.state, s.phase
    return ("unknown" if _unread(s) is not None else "waiting"), None


def state_text(s: HostState) -> str:
    """The start's state in the text forms (``status``, ``wait``): ``loading · Graph capture 12/34
    (35%)``; the phase only once a log line was read (a default phase is not a fact); ``unknown``
    when the host was never reached or its unit and journal cannot be read and nothing was;
    ``no such unit`` for ``LoadState=not-found``."""
    why = _unread(s)
    if why is not None:
        return f"unknown ({why})"
    nothing = s.state == "waiting"  # the model's word for "no log line and no start seen yet"
    if s.unit_state is not None and s.unit_state.load_state == "not-found":
        return "no such unit"
    if nothing:
        return s.state
    from widgets.fmt import PHASE_LABELS  # a plain dict; no widget is built

    phase = PHASE_LABELS.get(s.phase, s.phase)
    if s.progress is not None and s.progress.total and s.progress.phase == s.phase:
        p = s.progress
        phase += f" {p.done:g}/{p.total:g} ({p.fraction:.0%})"
    return s.state if phase.lower() == s.state else f"{s.state} · {phase}"



def look_json(spec: HostSpec, s: HostState, answered: bool, timeout_s: float, now: float | None) -> dict[str, Any]:
    """:func:`host_json` of one look (``status --json``, ``--watch``'s first line, the MCP tools):
    a host that gave no answer at all within ``timeout_s`` (``answered`` false, the connection
    not failing, no unit state, the unit and journal not failing either) says so (:func:`no_answer`)."""
    item = host_json(spec, s, now)
    if not answered and item["connection"] == "ok" and s.unit_state is None and not blind_failures(s):
        no_answer(item, timeout_s)
    return item


def no_answer(item: dict[str, Any], timeout_s: float) -> None:
    """A host that gave no answer at all within the timeout: say so in ``connection`` and as the
    verdict, instead of "nothing wrong seen"."""
    item["connection"] = f"no answer within {timeout_s:g} s"
    item["verdict"] = {"level": "error", "kind": "no_answer",
                       "sentence": f"No answer from the host within {timeout_s:g} s.",
                       "evidence": [f"{k}: {v}" for k, v in item["probe_errors"].items()]}


def change_key(s: HostState) -> dict[str, Any]:
    """What ``status --watch`` prints a new line for when it changes: ``state``, ``phase``,
    ``progress`` (the step, ``[done, total]``, or null), ``download`` (whole percent of the
    expected size, or whole GiB without one; null when no download is measured), ``readiness`` (rung), ``verdict``
    (``[level, kind]``: the sentence's ticking durations are not changes) and ``connection``
    (``ok``, ``stale`` or ``unreachable``)."""
    p = s.progress
    conn = "ok" if s.stale_since is None else ("unreachable" if s.updated is None else "stale")
    d = s.download
    state, phase = known_state(s)
    return {
        "state": state,
        "phase": phase,
        "progress": [p.done, p.total] if p is not None and p.phase == s.phase else None,
        "download": (int(100 * d.bytes / d.expected_bytes) if d.expected_bytes else d.bytes >> 30)
                    if d is not None else None,
        "readiness": s.readiness,
        "verdict": [v.level, v.kind] if (v := shown_verdict(s)) is not None else ["ok", ""],
        "connection": conn,
    }


async def watch(config: Config, out: IO[str], *, timeout_s: float = 15.0, tick_s: float = 1.0,
                stop: asyncio.Event | None = None,
                runner_factory: Callable[[HostSpec], Runner] | None = None,
                gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
                clock: Clock | None = None, history: History | None = None) -> None:
    """``status --watch``: keep watching every host and write one JSON line per change until
    ``stop`` is set (or the task is cancelled, e.g. by Ctrl-C).

    Each line is :func:`host_json` plus ``"time"`` (ISO 8601 UTC), ``"phases"`` (the
    current start's phases so far: ``{"phase", "began" (ISO 8601), "duration_s"}``, null duration
    for the current one; log lines arrive in batches, so a short phase can pass between two lines)
    and ``"changed"`` (the :func:`change_key` fields that differ from this host's previous line;
    ``["first"]`` for its first line, written once the host answered, or after ``timeout_s`` seconds). The verdict
    sentence is in every line. Verdicts that depend on time passing (a stall) are re-evaluated
    every ``tick_s`` seconds even when no data arrives.

    Raises:
        BrokenPipeError: the reader of ``out`` went away (``| head``); the watchers are stopped first.
    """
    clock = clock or WallClock()
    changed = asyncio.Event()
    watchers = make_watchers(config, changed, clock, runner_factory, gpu_source_factory, history)
    done = Answered()
    last: dict[int, dict[str, Any]] = {}
    stop = stop or asyncio.Event()
    for w in watchers:
        w.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            changed.clear()
            for w in watchers:
                prev = last.get(id(w))
                if prev is None and not done(w) and time.monotonic() < deadline:
                    continue
                s = w.state()
                key = change_key(s)
                if key == prev:
                    continue
                item = look_json(w.spec, s, prev is not None or done(w), timeout_s, clock.now())
                item["time"] = iso_utc(clock.now())
                item["phases"] = [{"phase": sp.phase, "began": iso_utc(sp.began),
                                   "duration_s": round(sp.duration_s, 3) if sp.duration_s is not None else None}
                                  for sp in s.phases]
                item["changed"] = ["first"] if prev is None else [k for k in key if key[k] != prev[k]]
                last[id(w)] = key
                out.write(json_text(item) + "\n")
                out.flush()
            waiters = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(stop.wait())]
            try:
                await asyncio.wait(waiters, timeout=tick_s if last.keys() >= {id(w) for w in watchers}
                                   else JOURNAL_QUIET_S / 2, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for f in waiters:
                    f.cancel()
    finally:
        await asyncio.gather(*(w.stop() for w in watchers), return_exceptions=True)


def run_status_watch(config: Config, *, timeout_s: float, out: IO[str],
                     runner_factory: Callable[[HostSpec], Runner] | None = None,
                     gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None) -> int:
    """Run :func:`watch` until Ctrl-C, SIGTERM or a closed pipe; every remote process is ended
    first. Returns 0."""
    import signal

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # not the main thread (tests)
                pass
        await watch(config, out, timeout_s=timeout_s, stop=stop, runner_factory=runner_factory,
                    gpu_source_factory=gpu_source_factory, history=hist)

    hist = History()
    if hist.problem:
        import sys

        print(f"upwatch status: {hist.problem}", file=sys.stderr)
    try:
        asyncio.run(main())
    except BrokenPipeError:
        quiet_stdout()
    finally:
        hist.close()
    return EXIT_OK


def quiet_stdout() -> None:
    """After ``| head`` closed the pipe: point stdout at /dev/null so the exit flush is silent."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def not_seen(s: HostState, answered: bool, timeout_s: float) -> str | None:
    """Why ``status`` exits 4 for this host (one line: what could not be seen and why), or None
    when it was reached and its unit and journal were read."""
    if s.stale_since is not None:
        return s.verdict.sentence if s.verdict is not None else f"unreachable: {connection_text(s)}"
    if not answered and s.unit_state is None and not blind_failures(s):
        return f"no answer from the host within {timeout_s:g} s"
    if s.verdict is not None and s.verdict.kind == "cannot_see":
        return s.verdict.sentence
    return None


def run_status(config: Config, *, as_json: bool, timeout_s: float, out: IO[str],
               runner_factory: Callable[[HostSpec], Runner] | None = None,
               gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
               history: History | None | str = "default", err: IO[str] | None = None) -> int:
    """Print one snapshot per host of ``config`` and return the exit status: 0, or 4 when a host
    could not be reached, gave no answer, or its unit or journal cannot be read (:func:`not_seen`;
    one line per such host on ``err``, default stderr). ``as_json`` prints a JSON list
    (:func:`host_json`) instead of text. ``history``: the start history (``"default"``: the user
    data folder's; None: none)."""
    import sys

    err = err or sys.stderr
    hist = History() if history == "default" else history
    try:
        results = asyncio.run(collect(config, timeout_s, runner_factory=runner_factory,
                                      gpu_source_factory=gpu_source_factory,
                                      history=hist))  # type: ignore[arg-type]
    finally:
        if isinstance(hist, History):
            hist.close()
    if isinstance(hist, History) and hist.problem:
        print(f"upwatch status: {hist.problem}", file=err)
    why = [(spec, w) for spec, s, answered in results if (w := not_seen(s, answered, timeout_s)) is not None]
    try:
        _print(results, as_json=as_json, timeout_s=timeout_s, out=out)
    except BrokenPipeError:
        quiet_stdout()  # `upwatch status | head`: the reader went away; the exit status still tells
    for spec, w in why:
        print(f"upwatch status: {one_line(spec.name)}: {one_line(w)} (exit 4)", file=err)
    err.flush()
    return EXIT_UNREACHABLE if why else EXIT_OK


def _print(results: list[tuple[HostSpec, HostState, bool]], *, as_json: bool, timeout_s: float,
           out: IO[str]) -> None:
    if as_json:
        items = []
        for spec, s, answered in results:
            items.append(look_json(spec, s, answered, timeout_s, time.time()))
        out.write(json_text(items, indent=2))
        out.write("\n")
    else:
        for i, (spec, s, answered) in enumerate(results):
            if i:
                out.write("\n")
            conn = None
            if not answered and connection_text(s) == "ok" and not blind_failures(s):
                conn = (f"no answer within {timeout_s:g} s" if s.unit_state is None
                        else f"ok, but not every probe answered within {timeout_s:g} s")
            out.write(format_host(spec, s, conn, time.time()))
    out.flush()
