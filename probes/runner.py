"""How upwatch runs commands on a host: the :class:`Runner` protocol and our own error kinds.

A runner is the only thing a probe talks to. It runs a command to completion (``run``), streams a
long-lived command's output line by line (``stream``), and opens a way to the server's HTTP port
(``forward`` + ``http_transport``). Every failure of the transport reaches probes as a
:class:`ProbeError` with a ``kind`` the UI can name.

Implementations: :class:`probes.replay.ReplayRunner` (a recorded scenario; the demo and the
tests). ``SshRunner`` (asyncssh) and ``LocalRunner`` follow in the live-host work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from probes.hosttext import one_line

if TYPE_CHECKING:  # httpx imports rich when it is installed: probes must not load it at import
    import httpx

#: The kinds of :class:`ProbeError`, with the words the UI shows for each.
ERROR_KINDS = {
    "unreachable": "host unreachable",
    "auth": "SSH login refused",
    "host_key": "host key not trusted",
    "timeout": "timed out",
    "closed": "connection closed",
    "command": "command failed",
    "permission": "not allowed",
    "unparsable": "unparsable value",
    "crashed": "probe crashed",
}


class ProbeError(Exception):
    """A probe could not get its data.

    Args:
        kind: one of :data:`ERROR_KINDS` (``unreachable``, ``auth``, ``host_key``, ``timeout``,
            ``closed``, ``command``, ``permission``; ``unparsable`` and ``crashed`` are only
            :class:`~probes.state.ProbeFailure` kinds, set by the watcher).
        message: one line for an operator (host text; show it as plain text, never markup). It is
            passed through the one sanitiser (:func:`probes.hosttext.one_line`) here, so what a host
            sent (a disconnect reason, a command's stderr) carries no escape code to any output.
    """

    def __init__(self, kind: str, message: str) -> None:
        message = one_line(message)
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class Completed:
    """A finished command: its argv, exit status and raw output (bytes, not decoded)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes = b""


class Runner(Protocol):
    """Runs commands on one host. All methods may raise :class:`ProbeError`."""

    host: str

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        """Run ``argv`` to completion within ``timeout`` seconds (of real time)."""
        ...

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Start ``argv`` and yield each output line (bytes, newline removed) as it comes.

        The remote process is ended when the iterator is closed or the connection drops.
        """
        ...

    async def forward(self, remote_port: int) -> int:
        """Make the host's ``remote_port`` reachable locally; returns the local port."""
        ...

    def http_transport(self) -> httpx.AsyncBaseTransport | None:
        """A transport for HTTP to the forwarded port, or None for plain TCP."""
        ...

    async def close(self) -> None:
        """End every process this runner started and close its connection."""
        ...
