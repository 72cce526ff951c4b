"""One direction of a TCP relay for the tests that stand in for ``ssh -L`` (a tunnel whose local
port is another: tests/test_serve.py; a link that comes and goes: tests/test_exporter_sight.py)."""

from __future__ import annotations

import asyncio
import contextlib


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until the end of the stream (or a reset), then close ``writer``."""
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()
