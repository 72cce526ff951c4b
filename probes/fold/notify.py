"""Notifications: which changes of a host are worth telling someone about. Pure, no I/O, no UI.

Four kinds of notice, each found by comparing two snapshots of one host
(:func:`notices`), and each timed by the event's own time in the state, never by when the snapshot
arrived:

* ``ready``: the current start logged ready (once per start, keyed by the time of its ready line,
  which is the notice's time).
* ``failed``: the start's state became ``failed``, or a new decisive error line came (a start that
  failed and was restarted between two snapshots); once per failure. Its time is the decisive
  line's, when that line belongs to the current start, else the last log line's (systemd writes
  ``Failed with result ...`` when a unit fails). Inside a restart loop a failed start is not told
  again (the loop notice said it), except when systemd gives up (the start limit).
* ``restart_loop``: ``restart_loop`` became true, or a loop that was already there when watching
  began failed again (once per loop, keyed by the loop's first failed start); its time is the
  latest failure's, as for ``failed``.
* ``stalled``: the verdict's kind became ``stalled`` (once per silence); its time is the last sign
  of life (log line or GPU memory change) plus the phase's stall limit.

An event that happened before ``since`` (when the dashboard connected) is not told: the journal
backlog of a server that was ready yesterday, or failed an hour ago, is history, not news. An event
whose time is unknown is not told either (it cannot be told apart from history), except a failure
seen live: the unit was running in the previous snapshot and is failed in this one.

:class:`NoticeTracker` keeps the previous snapshot per host and the notices already given, so a
repeated or flickering snapshot never tells the same thing twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from probes.hosttext import one_line
from probes.data.state import HostState
from probes.data.durations import fmt_span
from probes.fold.verdict import failed_words, stall_limit

#: Notice kinds.
KINDS = ("ready", "failed", "restart_loop", "stalled")
#: Where a notice can go, and where it goes by default: :data:`probes.spec.CHANNELS`.



@dataclass(frozen=True, slots=True)
class Notice:
    """One thing worth telling.

    Attributes:
        host: the host's configured name. unit: the systemd unit.
        kind: one of :data:`KINDS`.
        sentence: what happened, one plain line (``ready after 4m12s``, or the verdict's sentence).
        time: when it happened at the source, epoch seconds.
        key: what makes it the same notice again (kind plus the start, loop or silence it is about).
    """

    host: str
    unit: str
    kind: str
    sentence: str
    time: float
    key: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """One plain line: ``gpu-node-3 sglang.service: ready after 4m12s`` (no control characters,
        so a chat message, a toast or a terminal shows it as it is)."""
        return one_line(f"{self.host} {self.unit}: {self.sentence}")

    def to_json(self) -> dict[str, object]:
        """The webhook body: ``text`` (the plain line, so Slack-style incoming webhooks show it),
        ``host``, ``unit``, ``kind``, ``sentence``, ``time`` (epoch seconds)."""
        return {"text": self.text, "host": self.host, "unit": self.unit, "kind": self.kind,
                "sentence": one_line(self.sentence), "time": self.time}


def _ready_at(s: HostState) -> float | None:
    for span in s.phases:
        if span.phase == "ready":
            return span.began
    return s.phase_began if s.phase == "ready" else None


def _failed_time(s: HostState) -> float | None:
    """When the current failure was logged: the decisive line when it belongs to the current
    start, else the last log line (epoch seconds), or None when the log has neither."""
    if s.failed_at is not None and (s.start_began is None or s.failed_at >= s.start_began):
        return s.failed_at
    return s.last_log_at


def _seen_failing(prev: HostState | None, cur: HostState) -> float | None:
    """The time of the unit poll that saw the unit fail, when the previous snapshot saw it running."""
    if prev is None or prev.unit_state is None or cur.unit_state is None:
        return None
    if prev.unit_state.running and cur.unit_state.active_state == "failed":
        return cur.unit_state.time
    return None


def _gave_up(s: HostState) -> bool:
    """systemd stopped restarting the unit (as :func:`probes.fold.verdict.verdict_for` judges it)."""
    u = s.unit_state
    return u.active_state == "failed" if u is not None else (s.gave_up and s.state == "failed")


def _loop_key(s: HostState) -> str:
    first = s.failed_starts[0].began if s.failed_starts else None
    return f"restart_loop:{first or s.start_began}"


def _verdict_sentence(s: HostState, kinds: tuple[str, ...]) -> str | None:
    v = s.verdict
    return v.sentence if v is not None and v.kind in kinds else None


def notices(prev: HostState | None, cur: HostState, since: float,
            stall_after: Mapping[str, float] | None = None) -> list[Notice]:
    """What changed between two snapshots of one host that is worth telling (see the module
    docstring for the rules).

    Args:
        prev: the previous snapshot of the host, or None for the first.
        cur: the new snapshot (with its verdict judged).
        since: when watching began (epoch seconds); events before it are not told.
        stall_after: the host's stall limits by phase id (``"*"``: every phase), seconds, as the
            model was given them; None: the built-in ones.

    Returns:
        the notices, in the order ``ready``, ``failed``, ``restart_loop``, ``stalled`` (usually
        none, seldom more than one).
    """
    out: list[Notice] = []

    def add(kind: str, sentence: str, at: float | None, key: str) -> None:
        if at is not None and at >= since:
            out.append(Notice(cur.host, cur.unit, kind, sentence, at, key))

    # A start is ready once, at the time of its ready line (its start time may still move: the
    # unit's ExecMainStartTimestamp can arrive after the journal).
    at = _ready_at(cur) if cur.state == "ready" else None
    if at is not None and not (prev is not None and prev.state == "ready" and _ready_at(prev) == at):
        took = f" after {fmt_span(at - cur.start_began)}" if cur.start_began is not None else ""
        add("ready", f"ready{took}", at, f"ready:{at}")

    # A new decisive line is a failure even when the snapshots never showed the start failed (it
    # was restarted in between); a state that became failed is one even without such a line.
    new_line = cur.failed_at is not None and (prev is None or prev.failed_at != cur.failed_at)
    became = cur.state == "failed" and not (prev is not None and prev.state == "failed")
    if (new_line or became) and not cur.restart_loop:
        at = cur.failed_at if new_line else _failed_time(cur)
        seen = _seen_failing(prev, cur)
        if at is None or (seen is not None and at < since):
            at = seen
        sentence = _verdict_sentence(cur, ("failed", "unit_failed")) if cur.state == "failed" else None
        if sentence is None:
            phase = cur.failed_starts[-1].phase if cur.failed_starts and cur.state != "failed" else cur.phase
            sentence = failed_words(phase, cur.cause or (cur.error.cause if cur.error is not None else None))
        current = cur.failed_at is not None and (new_line or at == cur.failed_at)
        add("failed", sentence, at, f"failed:{cur.failed_at}" if current else f"failed:start:{cur.start_began}")

    # A loop is told when it begins, or, when it was already there (and older than ``since``) at
    # the first snapshot, at its first failure after that: it is live again (the tracker's key
    # keeps it to once per loop).
    old_loop = (prev is not None and prev.restart_loop and new_line
                and (_failed_time(prev) is None or _failed_time(prev) < since))  # type: ignore[operator]
    if cur.restart_loop and (not (prev is not None and prev.restart_loop) or old_loop):
        sentence = _verdict_sentence(cur, ("restart_loop",)) or (
            f"Restart loop: {max(2, len(cur.failed_starts))} starts failed with no ready between them.")
        add("restart_loop", sentence, _failed_time(cur), _loop_key(cur))
    elif cur.restart_loop and _gave_up(cur) and not (prev is not None and prev.restart_loop and _gave_up(prev)):
        at = _failed_time(cur)
        seen = _seen_failing(prev, cur)
        if at is None or (seen is not None and at < since):
            at = seen
        sentence = _verdict_sentence(cur, ("restart_loop",)) or "Restart loop: systemd gave up (start limit)."
        add("failed", sentence, at, "failed:gave_up:" + _loop_key(cur))

    kind = cur.verdict.kind if cur.verdict is not None else ""
    was = prev.verdict.kind if prev is not None and prev.verdict is not None else ""
    if kind == "stalled" and was != "stalled" and cur.last_log_at is not None:
        last = max(t for t in (cur.last_log_at, cur.gpu_changed_at) if t is not None)
        limit = stall_limit(cur.phase, stall_after)
        add("stalled", cur.verdict.sentence, last + limit if limit is not None else None,  # type: ignore[union-attr]
            f"stalled:{last}")
    return out


class NoticeTracker:
    """Turns a stream of snapshots (any hosts, any rate) into notices, each told once.

    Args:
        since: when watching began (epoch seconds); earlier events are not told.
        stall_after: host name → that host's stall limits by phase (see :func:`notices`).
        keep: notice keys remembered per host (oldest forgotten first).
    """

    def __init__(self, since: float, stall_after: Mapping[str, Mapping[str, float]] | None = None,
                 keep: int = 64) -> None:
        self.since = since
        self.stall_after = dict(stall_after or {})
        self._prev: dict[str, HostState] = {}
        self._told: dict[str, deque[str]] = {}
        self._keep = keep

    def update(self, cur: HostState) -> list[Notice]:
        """The notices ``cur`` brings since the host's previous snapshot, none told before."""
        prev = self._prev.get(cur.host)
        self._prev[cur.host] = cur
        if prev is cur:
            return []
        told = self._told.setdefault(cur.host, deque(maxlen=self._keep))
        out = []
        for n in notices(prev, cur, self.since, self.stall_after.get(cur.host)):
            if n.key in told:
                continue
            told.append(n.key)
            out.append(n)
        return out


def url_label(url: str) -> str:
    """A webhook URL as messages show it: scheme, host and port only, the rest (often a secret
    token, as in Slack's ``/services/T000/B000/XXXX``) hidden: ``https://hooks.slack.com/…``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(a malformed URL)"
    host = f"[{host}]" if ":" in host else host
    rest = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return one_line(f"{parts.scheme}://{host}{port}{rest}")
