"""This machine as a host: :class:`LocalRunner`, the :class:`~probes.transport.runner.Runner` for ``ssh = "local"``.

Commands run as child processes (no shell: argv is passed as it is), each in its own session, so
ending one (``TERM`` to its process group, ``KILL`` after ``grace_s``) also ends its children.
Output is read as bytes. The server's HTTP port is on this machine's loopback, so
:meth:`LocalRunner.forward` returns the port itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING

from probes.transport.runner import Completed, ProbeError, StreamEnd, keep_stderr, split_batches

if TYPE_CHECKING:  # httpx loads rich at import: never at module load in probes
    import httpx


class LocalRunner:
    """Runs commands on this machine.

    Args:
        host: the host's name as shown (for messages).
        grace_s: seconds a process gets to exit after ``TERM`` before it gets ``KILL``.

    Every method raises :class:`~probes.transport.runner.ProbeError`: ``command`` when a program cannot be
    started (exit status 127 is returned by :meth:`run` instead, as a shell would), ``timeout``,
    ``closed`` after :meth:`close`.
    """

    def __init__(self, host: str = "local", *, grace_s: float = 2.0) -> None:
        self.host = host
        self.grace_s = grace_s
        self.attempts = 0
        self._live: set[asyncio.subprocess.Process] = set()
        self._closed = False

    async def _spawn(self, argv: Sequence[str], stderr: int) -> asyncio.subprocess.Process:
        if self._closed:
            raise ProbeError("closed", f"{self.host}: runner is closed")
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            start_new_session=True)
        self._live.add(proc)
        return proc

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        """Run ``argv`` and wait for it (at most ``timeout`` seconds, then it is ended).

        Returns:
            Exit status (127 when the program does not exist, negative signal number when killed)
            and raw stdout/stderr.

        Raises:
            ProbeError: ``timeout``; ``command`` when it cannot be started for another reason.
        """
        try:
            proc = await self._spawn(argv, asyncio.subprocess.PIPE)
        except FileNotFoundError:
            return Completed(tuple(argv), 127, b"", f"{argv[0]}: command not found\n".encode())
        except OSError as exc:
            raise ProbeError("command", f"{self.host}: cannot start {argv[0]}: {exc.strerror or exc}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            await self._end(proc)
            raise ProbeError("timeout", f"{self.host}: {argv[0]} took more than {timeout:g} s") from None
        finally:
            if proc.returncode is None:
                await self._end(proc)
            self._live.discard(proc)
        return Completed(tuple(argv), proc.returncode if proc.returncode is not None else -1, out, err)

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Start ``argv`` and yield its stdout lines as they come: the lines of
        :meth:`stream_batches`, one at a time (the same process handling, the same errors)."""
        async with contextlib.aclosing(self.stream_batches(argv)) as batches:
            async for batch in batches:
                for line in batch:
                    yield line

    #: :meth:`stream_batches` fills a :class:`~probes.transport.runner.StreamEnd`.
    tells_stream_end = True

    async def stream_batches(self, argv: Sequence[str], *,
                             ended: StreamEnd | None = None) -> AsyncGenerator[list[bytes], None]:
        """Start ``argv`` and yield, after each read of its stdout, the lines it completed (a list of
        bytes, newline removed; whole up to :data:`~probes.data.cutline.LINE_CAP`, then a
        :class:`~probes.data.cutline.CutLine`; :func:`~probes.transport.runner.split_batches`); the
        process is ended when the iterator is closed or cancelled. stderr is discarded, or with
        ``ended`` read beside stdout and its start kept there, with the exit status, once the
        program ended (waiting up to ``grace_s``). A program that does not exist gives an empty
        stream (as a remote shell would; :meth:`run` says 127; ``ended`` gets 127 and the shell's words).

        Raises:
            ProbeError: ``command`` when the program cannot be started.
        """
        try:
            proc = await self._spawn(argv, asyncio.subprocess.DEVNULL if ended is None else asyncio.subprocess.PIPE)
        except FileNotFoundError:
            if ended is not None:
                ended.returncode, ended.stderr = 127, f"{argv[0]}: command not found\n".encode()
            return  # as over SSH: the command "ends" at once; run() then reports exit 127
        except OSError as exc:
            raise ProbeError("command", f"{self.host}: cannot start {argv[0]}: {exc.strerror or exc}") from None
        errors: asyncio.Task[None] | None = None
        try:
            assert proc.stdout is not None
            if ended is not None:
                assert proc.stderr is not None
                errors = asyncio.ensure_future(keep_stderr(proc.stderr.read, ended))
            async with contextlib.aclosing(split_batches(proc.stdout.read)) as batches:
                async for batch in batches:
                    yield batch
            if ended is not None and errors is not None:
                with contextlib.suppress(TimeoutError):  # still running: no exit status to give
                    await asyncio.wait_for(proc.wait(), self.grace_s)
                with contextlib.suppress(TimeoutError):  # (keep_stderr ends quietly on a failed read)
                    await asyncio.wait_for(asyncio.shield(errors), self.grace_s)
                ended.returncode = proc.returncode
        finally:
            if errors is not None:
                errors.cancel()
            await self._end(proc)

    async def _end(self, proc: asyncio.subprocess.Process) -> None:
        """TERM the process group, KILL it after ``grace_s``, and reap it."""
        self._live.discard(proc)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), self.grace_s)

    async def forward(self, remote_port: int) -> int:
        """The port is on this machine already: returns ``remote_port``."""
        if self._closed:
            raise ProbeError("closed", f"{self.host}: runner is closed")
        return remote_port

    def http_transport(self) -> httpx.AsyncBaseTransport | None:
        """None: plain TCP."""
        return None

    async def close(self) -> None:
        """End every process this runner started. Never raises."""
        self._closed = True
        await asyncio.gather(*(self._end(p) for p in list(self._live)), return_exceptions=True)
