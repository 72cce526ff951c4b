"""HostState → Prometheus metric families: the pure mapping behind ``upwatch exporter``.

No I/O here: :func:`host_families` turns one host's frozen snapshot (and the clock's now, for the
ETA) into ``prometheus_client`` metric families, and :class:`HostsCollector` asks a callable for
the current snapshots at each scrape. :mod:`tui.exporter` does the wiring (watchers, HTTP).

Names follow Prometheus's "Metric and label naming" guide: one ``upwatch_`` prefix, base units
(seconds, bytes) named as a plural suffix, ``_total`` only on the counter, ``_ratio`` for the
0..1 fraction, ``_info`` for the constant-1 metadata metric, no colons (reserved for recording
rules). Every label value comes from a fixed list (:data:`START_PHASES`, :data:`READINESS_RUNGS`,
:data:`VERDICT_KINDS` with ``waiting``, ``none`` and ``other``, :data:`LEVELS`, :data:`CAUSES`, :data:`KNOWN_PROBES`) or names the host,
its unit, engine and model (cut to :data:`LABEL_MAX_CHARS`, made one safe line); the decisive
line and every sentence stay in the logs and the TUI. Enumerations follow kube-state-metrics'
``kube_pod_status_phase``: one series per value, 1 for the current one, 0 for the others.

Unknown values are **absent**, not NaN: a series with no sample in a scrape (no ETA without
earlier starts, no progress bar, no start time before a start was seen, no ``NRestarts`` before
``systemctl show`` answered, no orphan figure before the first look at the GPU processes).
PromQL then returns nothing for the host (``absent()`` can test it), where a NaN would compare
false everywhere and plot as a gap that looks like data.

Series per host (:data:`SERIES_PER_HOST`, the most at once): info 1, phase 10, readiness 6,
ready 1, progress 1, ETA 1, start time 1, restart loop 1, failed starts 1, unit restarts 1,
verdict 1, failure cause 1, orphan memory 1, probe up 4, journal lines 1 = 32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from probes.data.state import KNOWN_PROBES, LEVELS, RUNGS, HostState
from probes.data.vocab import CAUSES, PHASES
from probes.fold.eta import eta_for
from probes.fold.headline import WAITING_KIND, shown_verdict
from probes.fold.verdict import VERDICT_KINDS
from probes.hosttext import one_line

#: The ``phase`` label's values of ``upwatch_start_phase``: the phase ids in order, then the
#: terminal states ``failed`` and ``stopped``, and ``waiting`` (no start seen yet: the default
#: phase is not a fact, so no phase id is 1 then).
START_PHASES: tuple[str, ...] = (*PHASES, "failed", "stopped", "waiting")

#: The ``rung`` label's values of ``upwatch_readiness``: the ladder, and ``unknown`` before any
#: health data.
READINESS_RUNGS: tuple[str, ...] = (*RUNGS, "unknown")

#: ``kind`` of ``upwatch_verdict`` when nothing is wrong (level ``ok``), and for a rule id that is
#: not in :data:`VERDICT_KINDS` (a label never takes a value outside the fixed lists).
KIND_NONE = "none"
KIND_OTHER = "other"

#: Longest host, unit, engine or model label value, in characters (a longer one is cut with "…").
LABEL_MAX_CHARS = 120

#: The metrics with one series per host: info, ready, progress, ETA, start time, restart loop,
#: failed starts, unit restarts, verdict, failure cause, orphan memory, journal lines.
_SINGLE_SERIES = 12
#: The most series one host can have in one scrape (see the module docstring).
SERIES_PER_HOST = _SINGLE_SERIES + len(START_PHASES) + len(READINESS_RUNGS) + len(KNOWN_PROBES)

_HOST_LABELS = ["host", "unit"]


def label_text(text: object) -> str:
    """A label value from host text: one safe line (:func:`probes.hosttext.one_line`), at most
    :data:`LABEL_MAX_CHARS` characters; ``""`` for None."""
    return "" if text is None else one_line(text, max_chars=LABEL_MAX_CHARS)


def start_phase(s: HostState) -> str:
    """The value of ``s`` in :data:`START_PHASES`: the phase id while loading or ready, else the
    state (``failed``, ``stopped``, ``waiting``)."""
    if s.state == "loading":
        return s.phase if s.phase in PHASES else "starting"
    if s.state == "ready":
        return "ready"
    return s.state if s.state in ("failed", "stopped") else "waiting"


def is_ready(s: HostState) -> bool:
    """Ready as ``upwatch wait`` means it: the log says ready and ``/health`` is OK from the
    current process (rung ``healthy`` or ``serving``)."""
    return s.state == "ready" and s.readiness in ("healthy", "serving")


def verdict_labels(s: HostState) -> tuple[str, str]:
    """``(kind, level)`` of the current verdict (:func:`probes.fold.headline.shown_verdict`), each
    from its fixed list: ``(waiting, info)`` while a probe has not answered yet (never ``ok`` for
    what was not read), ``(none, ok)`` when nothing is wrong and every probe answered; a kind
    outside :data:`VERDICT_KINDS` is ``other``."""
    v = shown_verdict(s)
    if v is None:
        return KIND_NONE, "ok"
    kind = v.kind if v.kind in VERDICT_KINDS or v.kind == WAITING_KIND else KIND_OTHER
    return kind, v.level if v.level in LEVELS else "error"


def failure_cause(s: HostState) -> str | None:
    """The failed start's cause id (from :data:`CAUSES`; ``unknown`` when none is known), or None
    while the start has not failed."""
    if s.state != "failed":
        return None
    cause = s.cause or (s.error.cause if s.error is not None else None)
    return cause if cause in CAUSES else "unknown"


def orphan_bytes(s: HostState) -> int | None:
    """Bytes of GPU memory held by processes outside the unit's cgroup (a process whose amount is
    not available counts 0), or None before the first look."""
    if s.gpu_orphans is None:
        return None
    return sum((o.mem_mib or 0) for o in s.gpu_orphans) * 1024 * 1024


class _Families:
    """The metric families of one scrape, filled host by host."""

    def __init__(self) -> None:
        g = GaugeMetricFamily
        self.info = InfoMetricFamily("upwatch_host", "The host's unit, engine and model (value 1).",
                                     labels=_HOST_LABELS)
        self.phase = g("upwatch_start_phase", "1 for the current start's phase (or failed, stopped, waiting), "
                       "0 for the others.", labels=[*_HOST_LABELS, "phase"])
        self.rung = g("upwatch_readiness", "1 for the current readiness rung, 0 for the others.",
                      labels=[*_HOST_LABELS, "rung"])
        self.ready = g("upwatch_ready", "1 when the log says ready and /health is OK from the current process.",
                       labels=_HOST_LABELS)
        self.progress = g("upwatch_phase_progress_ratio", "The current phase's progress bar, done/total (0..1); "
                          "absent without a bar.", labels=_HOST_LABELS)
        self.eta = g("upwatch_ready_eta_seconds", "Seconds to ready from earlier comparable starts; absent when "
                     "unknown or the start looks hung.", labels=_HOST_LABELS)
        self.start_time = g("upwatch_start_time_seconds", "When the current start began (Unix time); absent "
                            "before a start was seen.", labels=_HOST_LABELS)
        self.loop = g("upwatch_restart_loop", "1 while two or more starts failed with no ready between them.",
                      labels=_HOST_LABELS)
        self.failed_starts = g("upwatch_failed_starts", "Failed starts of the current restart loop (since the "
                               "last ready).", labels=_HOST_LABELS)
        self.restarts = g("upwatch_unit_restarts", "systemd's NRestarts of the unit (reset by a manual start, so "
                          "a gauge); absent when unknown.", labels=_HOST_LABELS)
        self.verdict = g("upwatch_verdict", "1 for the current verdict's kind and level (kind waiting, level "
                         "info until every probe answered once; kind none, level ok when nothing is wrong).",
                         labels=[*_HOST_LABELS, "kind", "level"])
        self.cause = g("upwatch_failure_cause", "1 for the failed start's cause id while the start is failed.",
                       labels=[*_HOST_LABELS, "cause"])
        self.orphans = g("upwatch_gpu_orphan_memory_bytes", "GPU memory held by processes outside the unit's "
                         "cgroup; absent before the first look.", labels=_HOST_LABELS)
        self.probe_up = g("upwatch_probe_up", "1 when the probe read its source and is not failing now, 0 when it "
                          "is failing or never answered.", labels=[*_HOST_LABELS, "probe"])
        self.lines = CounterMetricFamily("upwatch_journal_lines", "Journal entries of the unit read since the "
                                         "exporter started.", labels=_HOST_LABELS)

    def all(self) -> list[Metric]:
        return [self.info, self.phase, self.rung, self.ready, self.progress, self.eta, self.start_time, self.loop,
                self.failed_starts, self.restarts, self.verdict, self.cause, self.orphans, self.probe_up,
                self.lines]

    def add(self, host: str, s: HostState, now: float) -> None:
        key = [label_text(host), label_text(s.unit)]
        self.info.add_metric(key, {"engine": label_text(s.engine), "model": label_text(s.model)})
        current = start_phase(s)
        for p in START_PHASES:
            self.phase.add_metric([*key, p], 1.0 if p == current else 0.0)
        rung = s.readiness if s.readiness in READINESS_RUNGS else "unknown"
        for r in READINESS_RUNGS:
            self.rung.add_metric([*key, r], 1.0 if r == rung else 0.0)
        self.ready.add_metric(key, 1.0 if is_ready(s) else 0.0)
        bar = s.progress
        if s.state == "loading" and bar is not None and bar.phase == s.phase and bar.total:
            self.progress.add_metric(key, max(0.0, min(1.0, bar.fraction)))
        e = eta_for(s, now)
        if e is not None and e.remaining_s is not None:
            self.eta.add_metric(key, e.remaining_s)
        if s.start_began is not None:
            self.start_time.add_metric(key, s.start_began)
        if s.known("journal").status == "read":  # both come from the log: unknown until it is read
            self.loop.add_metric(key, 1.0 if s.restart_loop else 0.0)
            self.failed_starts.add_metric(key, float(len(s.failed_starts)))
        if s.restart_counter is not None:
            self.restarts.add_metric(key, float(s.restart_counter))
        kind, level = verdict_labels(s)
        self.verdict.add_metric([*key, kind, level], 1.0)
        cause = failure_cause(s)
        if cause is not None:
            self.cause.add_metric([*key, cause], 1.0)
        held = orphan_bytes(s)
        if held is not None:
            self.orphans.add_metric(key, float(held))
        for probe in KNOWN_PROBES:
            self.probe_up.add_metric([*key, probe], 1.0 if s.known(probe).status == "read" else 0.0)
        self.lines.add_metric(key, float(s.log_count))


def host_families(hosts: Iterable[tuple[str, HostState]], now: float) -> list[Metric]:
    """The metric families for ``hosts`` (``(configured name, snapshot)`` pairs) at ``now``
    (epoch seconds: the ETA's clock). Families are returned even when empty, so every metric's
    HELP and TYPE are always exposed."""
    fams = _Families()
    for host, s in hosts:
        fams.add(host, s, now)
    return fams.all()


class HostsCollector(Collector):
    """A ``prometheus_client`` collector that reads the snapshots at each scrape.

    Args:
        snapshots: returns ``(configured name, HostState)`` per host, judged now (called once per
            scrape, on the thread that serves the scrape).
        clock: returns now in epoch seconds (the ETA's clock).
    """

    def __init__(self, snapshots: Callable[[], Sequence[tuple[str, HostState]]], clock: Callable[[], float]) -> None:
        self._snapshots = snapshots
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        """The families of :func:`host_families` for the current snapshots."""
        yield from host_families(self._snapshots(), self._clock())
