"""How upwatch runs commands on a host: the :class:`Runner` protocol and our own error kinds.

A runner is the only thing a probe talks to. It runs a command to completion (``run``), streams a
long-lived command's output line by line (``stream``), and opens a way to the server's HTTP port
(``forward`` + ``http_transport``). Every failure of the transport reaches probes as a
:class:`ProbeError` with a ``kind`` the UI can name.

Implementations: :class:`probes.transport.replay.runner.ReplayRunner` (a recorded scenario; the demo and the
tests). ``SshRunner`` (asyncssh) and ``LocalRunner`` follow in the live-host work.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from probes.data.cutline import CUT_TAIL, LINE_CAP, CutLine
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
            :class:`~probes.data.events.ProbeFailure` kinds, set by the watcher).
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


#: Bytes of a stream's stderr kept for :class:`StreamEnd` (the rest is read and dropped): a
#: journalctl error is one line; more is not shown anyway (:func:`probes.hosttext.one_line`).
STDERR_KEEP = 4096


@dataclass(slots=True)
class StreamEnd:
    """How a stream's command ended on its own, filled by a runner that can tell
    (:func:`stream_batches` ``ended``) once its output ended: its exit status (negative signal
    number when killed; None when not known: the runner cannot tell, or the stream was closed
    early) and the first :data:`STDERR_KEEP` bytes of its stderr."""

    returncode: int | None = None
    stderr: bytes = b""


class BatchStreaming(Protocol):
    """A runner that can also hand a stream over as it reads it (SSH, local): the lines of each
    read at once, so a consumer pays its per-delivery costs once per read, not once per line."""

    def stream_batches(self, argv: Sequence[str]) -> AsyncIterator[list[bytes]]:
        """As :meth:`Runner.stream`, but yields, after each read of the output, the lines it
        completed (a non-empty list of lines, newline removed, in order)."""
        ...


def stream_batches(runner: Runner, argv: Sequence[str],
                   ended: StreamEnd | None = None) -> AsyncIterator[list[bytes]]:
    """``runner``'s output of ``argv`` in batches: its own :meth:`BatchStreaming.stream_batches`
    when it has one, else each line of :meth:`Runner.stream` as a batch of one. The same lines
    either way, in the same order; same errors (:class:`ProbeError`).

    Args:
        ended: filled with the command's exit status and stderr when its output ends, by a runner
            that can tell (one whose ``tells_stream_end`` is true: SSH, local); left as it is
            (returncode None) by the others, and when the stream is closed early.
    """
    own = getattr(runner, "stream_batches", None)
    if own is not None:
        if ended is not None and getattr(runner, "tells_stream_end", False) is True:
            return cast("AsyncIterator[list[bytes]]", own(argv, ended=ended))
        return cast("AsyncIterator[list[bytes]]", own(argv))
    return _one_line_batches(runner.stream(argv))


async def keep_stderr(read: Callable[[int], Awaitable[bytes]], ended: StreamEnd) -> None:
    """Read a stream's stderr to its end (so it never fills a buffer), keeping the first
    :data:`STDERR_KEEP` bytes in ``ended.stderr``; a read that fails ends it quietly."""
    kept = bytearray()
    try:
        while data := await read(READ_CHUNK):
            if len(kept) < STDERR_KEEP:
                kept += data[:STDERR_KEEP - len(kept)]
                ended.stderr = bytes(kept)
    except Exception:  # noqa: BLE001 - the stream's own errors are the stdout reader's to raise
        return


async def _one_line_batches(lines: AsyncIterator[bytes]) -> AsyncGenerator[list[bytes], None]:
    async with contextlib.aclosing(lines) as each:  # type: ignore[type-var]
        async for line in each:
            yield [line]


#: Bytes asked for per read of a stream.
READ_CHUNK = 256 * 1024


async def split_lines(read: Callable[[int], Awaitable[bytes]], *, cap: int = LINE_CAP,
                      tail: int = CUT_TAIL, chunk: int = READ_CHUNK) -> AsyncGenerator[bytes, None]:
    """Yield the ``\n``-separated lines of a byte stream, newline removed, each whole: the lines of
    :func:`split_batches`, one at a time (same arguments, same errors)."""
    async with contextlib.aclosing(split_batches(read, cap=cap, tail=tail, chunk=chunk)) as batches:
        async for batch in batches:
            for line in batch:
                yield line


async def split_batches(read: Callable[[int], Awaitable[bytes]], *, cap: int = LINE_CAP,
                        tail: int = CUT_TAIL, chunk: int = READ_CHUNK) -> AsyncGenerator[list[bytes], None]:
    """Yield, after each read of a byte stream, the ``\n``-separated lines it completed (newline
    removed, each whole, in order; a read that completes none yields nothing).

    Reading by chunks and splitting here (not ``readline``) is on purpose: asyncssh's
    ``readline`` hands over part of a line once its buffer reaches the channel window (2 MiB),
    asyncio's raises ``ValueError`` past 64 KiB. Memory stays under about ``cap + chunk`` bytes.
    A read whose lines cannot pass the cap (the common case by far) is split by one
    ``bytes.split``; a line that crosses reads is joined to its start.

    Args:
        read: ``read(n)`` returning up to ``n`` bytes, ``b""`` at end of stream (asyncssh's and
            asyncio's ``StreamReader.read``). Its exceptions pass through.
        cap: a line longer than this many bytes is yielded as a :class:`CutLine` keeping its first
            ``cap - tail`` and last ``tail`` bytes.
        tail, chunk: see above; bytes per ``read``.

    Yields:
        A non-empty list of lines per read that ended one (empty lines included); at the end of
        the stream a last line without a newline too (an empty one is not yielded).

    Raises:
        ValueError: unless ``0 < tail < cap``.
    """
    if not 0 < tail < cap:
        raise ValueError(f"need 0 < tail < cap, got tail={tail}, cap={cap}")
    buf = bytearray()
    cut: _Cutting | None = None
    while True:
        data = await read(chunk)
        if not data:
            if cut is not None:
                yield [cut.line()]
            elif buf:
                yield [bytes(buf)]
            return
        if cut is None and len(buf) + len(data) <= cap:
            # No line of this read can pass the cap: split it at C speed.
            if b"\n" not in data:
                buf += data
                continue
            parts = data.split(b"\n")
            if buf:
                buf += parts[0]
                parts[0] = bytes(buf)
                buf.clear()
            buf += parts.pop()
            yield parts
            continue
        lines: list[bytes] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            piece = data[start:] if nl < 0 else data[start:nl]
            if cut is not None:
                cut.add(piece)
            else:
                buf += piece
                if len(buf) > cap:
                    cut = _Cutting(buf, cap - tail, tail)
                    buf = bytearray()
            if nl < 0:
                break
            if cut is not None:
                lines.append(cut.line())
                cut = None
            else:
                lines.append(bytes(buf))
                buf.clear()
            start = nl + 1
        if lines:
            yield lines


class _Cutting:
    """A line past the cap while it is read: the head kept, a rolling window of its end."""

    def __init__(self, start: bytearray, head: int, tail: int) -> None:
        self.head = bytes(start[:head])
        self.keep = tail
        self.tail = bytearray(start[head:])
        self.size = len(start)
        self._trim()

    def add(self, piece: bytes) -> None:
        self.tail += piece
        self.size += len(piece)
        if len(self.tail) > 2 * self.keep:
            self._trim()

    def _trim(self) -> None:
        del self.tail[:-self.keep]

    def line(self) -> CutLine:
        return CutLine(self.head, bytes(self.tail[-self.keep:]), self.size)
