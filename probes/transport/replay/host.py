"""The simulated host behind a :class:`~probes.transport.replay.runner.ReplayRunner`: a
:class:`~probes.transport.replay.scenario.Scenario` playing on an injected
:class:`~probes.clock.Clock`, its outages, and what the demo's actions have made of it since.

Scenario time is ``clock.now() - start`` seconds. Every timeline in a scenario is keyed by an offset
in seconds from the scenario's start, so the same scenario plays at any wall time and any speed.

:class:`SimulatedHost` is the one state every emulated tool reads (``journalctl``, ``systemctl``,
``nvidia-smi``, HTTP): the clock and its waits, the outages, and the host's life as
segments (the recording playing, or the unit down) with the journal they write.
``systemctl`` (:mod:`probes.transport.replay.systemctl`) decides what an action does; the changes
themselves (:meth:`SimulatedHost.down`, :meth:`~SimulatedHost.play`,
:meth:`~SimulatedHost.reschedule`) are here.

Outages: during ``Scenario.outages`` every call raises ``ProbeError("unreachable")``
(:meth:`SimulatedHost.check`) and a stream that is open when one begins ends with
``ProbeError("closed")`` (:meth:`SimulatedHost.check_open`), as an SSH connection that drops.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probes.clock import Clock
from probes.transport.replay.scenario import EPS_S, JournalEntry, Scenario, stamp_journal
from probes.transport.runner import ProbeError


@dataclass(frozen=True)
class _Segment:
    """A stretch of the simulated host's life, from ``begin`` (offset from the host's start) to
    the next segment's: the recording playing with its offset 0 at ``shift`` (``epoch`` 0: as
    given; 1, 2 ...: replays begun by actions, ``restarts_base`` added to its ``NRestarts``), or,
    with ``shift`` None, the unit down with fixed ``props``."""

    begin: float
    shift: float | None
    epoch: int
    props: Mapping[str, Any] | None = None
    restarts_base: int = 0


class SimulatedHost:
    """A scenario's host as it plays: time, outages, and the unit's life as actions change it.

    Args:
        scenario: the host to play (rebased to ``start``, so its journal's timestamps agree with
            the clock).
        clock: the clock; scenario time is ``clock.now() - start``, every wait ``clock.sleep``.
        start: epoch seconds of scenario offset 0.

    Attributes:
        clock, start: as given. scenario: the rebased scenario. name: its host name.
        closed: True once :meth:`close` ran. journal: the whole journal, past and scheduled (the
        recording, cut and extended by the actions), in write order; cursor_index: each entry's
        index in it, by cursor. limit_reset_at: scenario time of the last ``systemctl reset-failed``.
    """

    def __init__(self, scenario: Scenario, clock: Clock, start: float) -> None:
        self.clock = clock
        self.start = start
        self.scenario = scenario.rebased(start)
        self.name = scenario.host
        self.closed = False
        self._close_event = asyncio.Event()
        #: What the host does, in order: the recording as given, then what each action made of it.
        self._segments: list[_Segment] = [_Segment(begin=-math.inf, shift=0.0, epoch=0)]
        self._epochs = 0
        self.limit_reset_at = -math.inf
        self.journal: tuple[JournalEntry, ...] = self.scenario.journal
        self.cursor_index = {e.cursor: i for i, e in enumerate(self.journal)}
        self._changed = asyncio.Event()  # set (and replaced) when an action changes what is scheduled

    # --- time ---------------------------------------------------------------------------------

    def now_s(self) -> float:
        """Scenario time: seconds since offset 0."""
        return self.clock.now() - self.start

    def outage_at(self, t: float) -> tuple[float, float] | None:
        """The outage ``(start_s, end_s)`` scenario time ``t`` falls in, or None."""
        for a, b in self.scenario.outages:
            if a <= t + EPS_S and t < b - EPS_S:
                return (a, b)
        return None

    def _next_outage(self, t: float) -> float:
        later = [a for a, _ in self.scenario.outages if a > t + EPS_S]
        return min(later) if later else math.inf

    def check(self, what: str) -> None:
        """Before a call: raises ``ProbeError`` ``closed`` after :meth:`close`, ``unreachable``
        during an outage (``what`` names the call in the message)."""
        if self.closed:
            raise ProbeError("closed", f"{self.name}: connection closed")
        t = self.now_s()
        if self.outage_at(t) is not None:
            raise ProbeError("unreachable", f"{self.name}: connect failed: [Errno 113] No route to host ({what})")

    async def _sleep(self, seconds: float) -> None:
        """Sleep on the clock, waking early when the host is closed."""
        if self.closed:
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        closer = asyncio.ensure_future(self._close_event.wait())
        changed = asyncio.ensure_future(self._changed.wait())  # an action rescheduled what comes
        try:
            await asyncio.wait({sleeper, closer, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, closer, changed):
                if not task.done():
                    task.cancel()

    async def wait_until(self, offset_s: float) -> None:
        """Sleep until scenario time ``offset_s`` or the next outage, whichever comes first
        (at most an hour at a time; sooner when an action changes what is scheduled or the host is
        closed)."""
        t = self.now_s()
        until = min(offset_s, self._next_outage(t))
        await self._sleep(min(3600.0, max(0.0, until - t)))

    def check_open(self, name: str) -> bool:
        """For an open stream of command ``name``: False when the host was closed (end quietly).

        Raises:
            ProbeError: ``closed`` when an outage began (the connection dropped).
        """
        if self.closed:
            return False
        if self.outage_at(self.now_s()) is not None:
            raise ProbeError("closed", f"{self.name}: connection lost while {name} was running")
        return True

    def close(self) -> None:
        """End every wait now; :meth:`check` raises ``closed`` from now on."""
        self.closed = True
        self._close_event.set()

    # --- the unit's life ------------------------------------------------------------------------

    def segment_at(self, t: float) -> _Segment:
        """The segment of the host's life scenario time ``t`` falls in."""
        seg = self._segments[0]
        for s in self._segments:
            if s.begin > t + EPS_S:
                break
            seg = s
        return seg

    def unit_props(self, offset_s: float) -> dict[str, Any]:
        """The unit's properties (typed as in
        :class:`~probes.transport.replay.scenario.UnitFrame`, timestamps as offsets from this host's
        start) at ``offset_s``: the recording's, as the actions since have made them."""
        seg = self.segment_at(offset_s)
        if seg.shift is None:
            return dict(seg.props or {})
        props = self.scenario.unit_props(offset_s - seg.shift)
        if seg.epoch:
            for k, v in props.items():
                if k.endswith(("Timestamp", "TimestampMonotonic")) and isinstance(v, (int, float)):
                    props[k] = v + seg.shift
            for k in ("MainPID", "ExecMainPID"):
                props[k] = self.epoch_pid(props[k], seg.epoch)
            if props.get("InvocationID"):
                props["InvocationID"] = self.epoch_invocation(str(props["InvocationID"]), seg.epoch)
            props["NRestarts"] = int(props.get("NRestarts") or 0) + seg.restarts_base
        return props

    def gpu_at(self, offset_s: float) -> list[tuple[int | None, int | None]]:
        """Per GPU ``(memory.used MiB, utilization.gpu %)`` at ``offset_s``: the recording's while it
        plays, 0 and 0 while the unit is down."""
        seg = self.segment_at(offset_s)
        if seg.shift is None:
            return [(0, 0) for _ in self.scenario.gpus]
        return self.scenario.gpu_at(offset_s - seg.shift)

    def health_at(self, offset_s: float) -> str | int:
        """``"refused"`` or the ``/health`` status at ``offset_s`` (refused while the unit is down)."""
        seg = self.segment_at(offset_s)
        if seg.shift is None:
            return "refused"
        return self.scenario.health_at(offset_s - seg.shift)

    @staticmethod
    def epoch_pid(pid: Any, epoch: int) -> Any:
        """The recording's PID ``pid`` as replay ``epoch`` shows it (100 000 per epoch added to a
        positive int; epoch 0 and anything else unchanged)."""
        return pid + 100_000 * epoch if isinstance(pid, int) and pid > 0 and epoch else pid

    def epoch_invocation(self, inv: str, epoch: int) -> str:
        """The recording's invocation id ``inv`` as replay ``epoch`` shows it (32 hex digits, new
        per epoch; epoch 0: ``inv``)."""
        if not epoch:
            return inv
        return hashlib.blake2b(f"{self.name}|{epoch}|{inv}".encode(), digest_size=16).hexdigest()

    # --- what the actions change ----------------------------------------------------------------

    def down(self, t: float, props: Mapping[str, Any], active: str, sub: str, *, result: str, code: int,
             status: int) -> None:
        """From ``t`` the unit's process is gone: ``props`` (its properties until then) fixed as
        systemd leaves them, with ``ActiveState``/``SubState`` ``active``/``sub``, ``Result``
        ``result``, ``ExecMainCode``/``ExecMainStatus`` ``code``/``status``."""
        down = dict(props)
        down.update({"ActiveState": active, "SubState": sub, "MainPID": 0, "ControlPID": 0, "Result": result,
                     "ExecMainExitTimestamp": t, "ExecMainExitTimestampMonotonic": t,
                     "ExecMainCode": code, "ExecMainStatus": status, "StateChangeTimestamp": t,
                     "StateChangeTimestampMonotonic": t, "ActiveExitTimestamp": t,
                     "ActiveExitTimestampMonotonic": t, "ControlGroup": None, "MemoryCurrent": None})
        if active != "activating":
            down.update({"InactiveEnterTimestamp": t, "InactiveEnterTimestampMonotonic": t})
        self.hold(t, down)

    def hold(self, t: float, props: Mapping[str, Any]) -> None:
        """From ``t`` the unit stays as ``props`` say (typed as in ``unit_props``); nothing
        scheduled after ``t`` happens."""
        self._cut(t)
        self._segments.append(_Segment(begin=t, shift=None, epoch=self.segment_at(t).epoch, props=props))

    def play(self, t: float, restarts_base: int) -> None:
        """From ``t`` the recording plays again from its beginning, as a new invocation."""
        self._cut(t)
        self._epochs += 1
        self._segments.append(_Segment(begin=t, shift=t, epoch=self._epochs, restarts_base=restarts_base))

    def _cut(self, t: float) -> None:
        """Nothing scheduled after ``t`` happens any more."""
        self._segments = [s for s in self._segments if s.begin <= t + EPS_S]

    def reschedule(self, t: float, lines: list[tuple[float, str]], props: Mapping[str, Any]) -> None:
        """The journal after an action at ``t``: what already happened (up to ``t``), ``lines``
        (``(offset_s, message)`` of systemd about the unit, whose properties were ``props``), then
        the recording's journal for each replay begun since; followers are woken."""
        kept = [(e.offset_s, e.fields) for e in self.journal if e.offset_s <= t + EPS_S]
        inv = props.get("InvocationID")
        new: list[tuple[float, Mapping[str, Any]]] = [(at, self._systemd_fields(text, inv)) for at, text in lines]
        for seg in self._segments:
            if seg.shift is None or not seg.epoch or seg.begin < t - EPS_S:
                continue  # only the replays this action began: what began earlier is cut at ``t``
            for e in self.scenario.journal:
                fields = dict(e.fields)
                for k in ("_SYSTEMD_INVOCATION_ID", "INVOCATION_ID"):
                    if fields.get(k):
                        fields[k] = self.epoch_invocation(str(fields[k]), seg.epoch)
                if fields.get("_PID") and fields["_PID"] != "1" and str(fields["_PID"]).isdigit():
                    fields["_PID"] = str(self.epoch_pid(int(fields["_PID"]), seg.epoch))
                new.append((e.offset_s + seg.shift, fields))
        self.journal = stamp_journal([*kept, *sorted(new, key=lambda r: r[0])], self.start,
                                     seqnum_id=self.scenario.seqnum_id,
                                     monotonic_start_us=self.scenario.monotonic_start_us)
        self.cursor_index = {e.cursor: i for i, e in enumerate(self.journal)}
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _systemd_fields(self, text: str, invocation: Any) -> dict[str, Any]:
        """A message of PID 1 about the unit, with the fields of the recording's own (its first
        ``Started ...`` line) or systemd's usual ones."""
        template = next((e.fields for e in self.scenario.journal if e.fields.get("_PID") == "1"
                         and e.fields.get("UNIT") == self.scenario.unit), None)
        keep = ("_BOOT_ID", "_MACHINE_ID", "_HOSTNAME", "_UID", "_GID", "_COMM", "_EXE", "_CMDLINE",
                "_CAP_EFFECTIVE", "_SYSTEMD_CGROUP", "_SYSTEMD_SLICE", "_RUNTIME_SCOPE", "TID")
        fields: dict[str, Any] = {k: template[k] for k in keep if template is not None and k in template}
        fields.update({"_TRANSPORT": "journal", "_PID": "1", "_SYSTEMD_UNIT": "init.scope", "PRIORITY": "6",
                       "SYSLOG_FACILITY": "3", "SYSLOG_IDENTIFIER": "systemd", "UNIT": self.scenario.unit,
                       "MESSAGE": text})
        if invocation:
            fields["INVOCATION_ID"] = str(invocation)
        return fields
