"""A :class:`~probes.transport.runner.Runner` that answers with canned values, for driving one
source's loop alone on a :class:`~probes.clock.ManualClock` (tests/test_source_*.py).

Answers are chosen by argv prefix, the longest matching prefix first; tests change them while the
loop runs (``runner.answer(...)``) to make a command fail and recover. Nothing here sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import httpx

from probes.transport.runner import Completed, ProbeError


@dataclass
class Stream:
    """A canned ``stream``: ``lines`` (bytes, no newline), then it ends, raises ``then``, or, with
    ``hold``, stays open (no more lines) until closed or cancelled. ``reads``: how many lines each
    read of ``stream_batches`` brings (the rest one a read); by default one line a read."""

    lines: list[bytes] = field(default_factory=list)
    then: ProbeError | None = None
    hold: bool = False
    reads: tuple[int, ...] = ()


class CannedRunner:
    """Runs nothing: ``run`` returns (or raises) the answer set for the argv's prefix, ``stream``
    plays the :class:`Stream` set for it. An argv with no answer is a test bug (AssertionError).

    Args:
        transport: what :meth:`http_transport` returns (an ``httpx.MockTransport`` for the health
            source), or None.
    """

    host = "canned"

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.streams_opened: list[tuple[str, ...]] = []
        self._answers: dict[tuple[str, ...], Completed | ProbeError] = {}
        self._streams: dict[tuple[str, ...], list[Stream]] = {}
        self.transport = transport
        self.forward_error: ProbeError | None = None
        self.forwarded: list[int] = []
        #: what ``connected()`` says (the SSH runner's own check of its link)
        self.link_up = True
        self.closed = False

    def answer(self, prefix: Sequence[str], reply: Completed | ProbeError | bytes, returncode: int = 0,
               stderr: bytes = b"") -> None:
        """Answer ``run`` of an argv starting with ``prefix``: a :class:`Completed` (``bytes`` is its
        stdout, with ``returncode`` and ``stderr``), or a :class:`ProbeError` raised."""
        if isinstance(reply, bytes):
            reply = Completed(tuple(prefix), returncode, reply, stderr)
        self._answers[tuple(prefix)] = reply

    def answer_stream(self, prefix: Sequence[str], *streams: Stream) -> None:
        """Play ``streams`` for the next ``stream`` calls of an argv starting with ``prefix``, one
        each, in order; the last one for every call after."""
        assert streams
        self._streams[tuple(prefix)] = list(streams)

    def ran(self, prefix: Sequence[str]) -> int:
        """How many ``run`` calls began with ``prefix``."""
        p = tuple(prefix)
        return sum(1 for c in self.calls if c[:len(p)] == p)

    @staticmethod
    def _match(argv: tuple[str, ...], table: dict[tuple[str, ...], object]) -> tuple[str, ...]:
        found = [p for p in table if argv[:len(p)] == p]
        assert found, f"no canned answer for {argv}"
        return max(found, key=len)

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        key = tuple(argv)
        self.calls.append(key)
        reply = self._answers[self._match(key, self._answers)]
        if isinstance(reply, ProbeError):
            raise reply
        return Completed(key, reply.returncode, reply.stdout, reply.stderr)

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        key = tuple(argv)
        self.streams_opened.append(key)
        queue = self._streams[self._match(key, self._streams)]
        return self._play(queue.pop(0) if len(queue) > 1 else queue[0])

    def stream_batches(self, argv: Sequence[str]) -> AsyncIterator[list[bytes]]:
        """As :meth:`stream`, the lines in batches of :attr:`Stream.reads` (one read each)."""
        key = tuple(argv)
        self.streams_opened.append(key)
        queue = self._streams[self._match(key, self._streams)]
        return self._play_batches(queue.pop(0) if len(queue) > 1 else queue[0])

    async def _play_batches(self, canned: Stream) -> AsyncIterator[list[bytes]]:
        lines = list(canned.lines)
        sizes = list(canned.reads)
        while lines:
            n = sizes.pop(0) if sizes else 1
            batch, lines = lines[:n], lines[n:]
            await asyncio.sleep(0)
            yield batch
        if canned.then is not None:
            raise canned.then
        if canned.hold:
            await asyncio.Event().wait()  # until cancelled

    async def _play(self, canned: Stream) -> AsyncIterator[bytes]:
        for line in canned.lines:
            await asyncio.sleep(0)
            yield line
        if canned.then is not None:
            raise canned.then
        if canned.hold:
            await asyncio.Event().wait()  # until cancelled

    async def forward(self, remote_port: int) -> int:
        if self.forward_error is not None:
            raise self.forward_error
        self.forwarded.append(remote_port)
        return 40000 + len(self.forwarded)

    def http_transport(self) -> httpx.AsyncBaseTransport | None:
        return self.transport

    def connected(self) -> bool:
        return self.link_up

    async def close(self) -> None:
        self.closed = True
