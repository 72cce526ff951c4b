"""A host that replays a recorded scenario: :class:`ReplayRunner`, the
:class:`~probes.transport.runner.Runner` whose host is a
:class:`~probes.transport.replay.scenario.Scenario` playing on an injected
:class:`~probes.clock.Clock`. The demo and the tests use it; nothing here touches a network.

It hands each command to the module that emulates the tool (``sudo``/``sudo -n`` in front is
ignored): :mod:`~probes.transport.replay.journalctl`, :mod:`~probes.transport.replay.systemctl`,
:mod:`~probes.transport.replay.nvidia_smi`; HTTP goes through
:mod:`~probes.transport.replay.http_server`. The host they all read and change is a
:class:`~probes.transport.replay.host.SimulatedHost`.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from probes.clock import Clock
from probes.transport.replay.command_line import strip_sudo
from probes.transport.replay.host import SimulatedHost
from probes.transport.replay.http_server import mock_transport
from probes.transport.replay.journalctl import run_journalctl, stream_journalctl
from probes.transport.replay.nvidia_smi import run_nvidia_smi, stream_nvidia_smi
from probes.transport.replay.scenario import Scenario
from probes.transport.replay.systemctl import run_systemctl
from probes.transport.runner import Completed, ProbeError

if TYPE_CHECKING:
    # Imported where used, not at module load: httpx's ``__init__`` imports its CLI, which loads
    # ``rich`` when it is installed, and no probes module may load rich on import.
    import httpx


class ReplayRunner:
    """A :class:`~probes.transport.runner.Runner` whose host is a
    :class:`~probes.transport.replay.scenario.Scenario`.

    Args:
        scenario: the host to play.
        clock: the clock; scenario time is ``clock.now() - start`` and every wait is
            ``clock.sleep`` (a :class:`~probes.clock.ManualClock` makes tests exact).
        start: epoch seconds of scenario offset 0 (default: ``clock.now()`` now). The scenario is
            rebased to it, so its journal timestamps agree with the clock.

    Attributes:
        clock, start: as given. scenario: the rebased scenario. host: its host name.

    Accepted commands (``sudo``/``sudo -n`` in front is ignored): the ``journalctl``,
    ``systemctl`` and ``nvidia-smi`` forms their modules list; the ``systemctl`` actions change the
    simulated host. ``stream`` takes the journalctl and nvidia-smi forms (``-f``/``-l`` keep the
    stream open); ``run`` takes every form without ``-f``/``-l``. Any other command: ``run`` answers
    like a shell that cannot find it (exit 127), ``stream`` raises ``ProbeError("command")``.

    Outages: during ``Scenario.outages`` every call raises ``ProbeError("unreachable")`` and a
    stream that is open when one begins ends with ``ProbeError("closed")``, as an SSH connection
    that drops.
    """

    def __init__(self, scenario: Scenario, clock: Clock, *, start: float | None = None) -> None:
        self.clock = clock
        self.start = clock.now() if start is None else float(start)
        self._simulated = SimulatedHost(scenario, clock, self.start)
        self.scenario = self._simulated.scenario
        self.host = scenario.host
        self._forwards: dict[int, int] = {}
        self._next_port = 41_000 + (int(hashlib.blake2b(self.host.encode(), digest_size=2).hexdigest(), 16) % 1000) * 10

    def now_s(self) -> float:
        """Scenario time: seconds since offset 0."""
        return self._simulated.now_s()

    def unit_props(self, offset_s: float) -> dict[str, Any]:
        """The unit's properties (typed as in :class:`~probes.transport.replay.scenario.UnitFrame`,
        timestamps as offsets from this runner's start) at ``offset_s``: the recording's, as the
        actions since have made them."""
        return self._simulated.unit_props(offset_s)

    def gpu_at(self, offset_s: float) -> list[tuple[int | None, int | None]]:
        """Per GPU ``(memory.used MiB, utilization.gpu %)`` at ``offset_s``: the recording's while it
        plays, 0 and 0 while the unit is down."""
        return self._simulated.gpu_at(offset_s)

    def health_at(self, offset_s: float) -> str | int:
        """``"refused"`` or the ``/health`` status at ``offset_s`` (refused while the unit is down)."""
        return self._simulated.health_at(offset_s)

    # --- Runner protocol ------------------------------------------------------------------------

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        """Run a command to completion (see the class docstring for the forms).

        Raises:
            ProbeError: ``unreachable`` during an outage, ``closed`` after :meth:`close`,
                ``command`` for a follow/loop form that would never end.
        """
        argv = tuple(argv)
        self._simulated.check(argv[0] if argv else "")
        cmd = strip_sudo(argv)
        if not cmd:
            return Completed(argv, 0, b"")
        name = cmd[0].rsplit("/", 1)[-1]
        if name == "journalctl":
            return run_journalctl(self._simulated, argv, cmd[1:])
        if name == "systemctl":
            return run_systemctl(self._simulated, argv, cmd[1:])
        if name == "nvidia-smi":
            return run_nvidia_smi(self._simulated, argv, cmd[1:])
        return Completed(argv, 127, b"", f"sh: 1: {cmd[0]}: not found".encode())

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Yield the output lines (bytes, no newline) of ``journalctl …`` or ``nvidia-smi …`` as they
        come on the scenario clock.

        Raises (on the first ``__anext__``):
            ProbeError: ``unreachable`` during an outage; ``closed`` when an outage begins while the
                stream is open; ``command`` for an unknown command or bad options.
        """
        return self._stream(tuple(argv))

    async def _stream(self, argv: tuple[str, ...]) -> AsyncIterator[bytes]:
        self._simulated.check(argv[0] if argv else "")
        cmd = strip_sudo(argv)
        name = cmd[0].rsplit("/", 1)[-1] if cmd else ""
        if name == "journalctl":
            lines = stream_journalctl(self._simulated, cmd[1:])
        elif name == "nvidia-smi":
            lines = stream_nvidia_smi(self._simulated, cmd[1:])
        else:
            raise ProbeError("command", f"sh: 1: {cmd[0] if cmd else ''}: not found (exit 127)")
        async for line in lines:
            yield line

    async def forward(self, remote_port: int) -> int:
        """A fake local port standing for the host's ``remote_port`` (only meaningful with
        :meth:`http_transport`).

        Raises:
            ProbeError: ``unreachable`` during an outage, ``closed`` after :meth:`close`.
        """
        self._simulated.check(f"forward {remote_port}")
        for local, remote in self._forwards.items():
            if remote == remote_port:
                return local
        local = self._next_port + len(self._forwards)
        self._forwards[local] = remote_port
        return local

    def http_transport(self) -> httpx.MockTransport:
        """An ``httpx`` transport answering from the scenario's health timeline, for the ports
        :meth:`forward` returned (or the server's own port): see
        :func:`~probes.transport.replay.http_server.mock_transport`."""
        return mock_transport(self._simulated, self._forwards)

    async def close(self) -> None:
        """End every open stream (they stop without error); later calls raise ``closed``."""
        self._simulated.close()
