"""Read a saved log, whatever form the operator has it in, into a :class:`~probes.reader.StartupReader`.

Forms, detected from the first bytes:

* plain text as the server printed it (any of the wrappers :mod:`probes.logline` knows);
* ``journalctl -o json`` output (one JSON object per line);
* a binary journal file (``*.journal``, magic ``LPKSHHRH``): read through the real
  ``journalctl --file=PATH -o json -a`` when it is installed.

Lines are read as bytes, at most :data:`MAX_READ` at a time, so a 20 MB line costs no more memory
than that; invalid UTF-8 is replaced, never fatal. Every way a log can be unreadable raises
:class:`LogReadError` with one line that says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import BinaryIO

from probes.journal import RecordError, is_journal_json, parse_record
from probes.reader import Reading, StartupReader

#: Bytes read per ``readline`` call; a longer line is read in pieces and only its start is kept.
MAX_READ = 256 * 1024
_JOURNAL_MAGIC = b"LPKSHHRH"
_SNIFF = 8192


class LogReadError(Exception):
    """The log could not be read at all; ``str()`` is one line for the operator."""


def iter_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Yield the physical lines of a binary stream without their ``\\n`` (``\\r`` is kept).

    A line longer than :data:`MAX_READ` bytes yields its first :data:`MAX_READ` bytes; the rest is
    skipped, so memory stays bounded. A last line without ``\\n`` is yielded too.
    """
    readline = stream.readline
    while True:
        chunk = readline(MAX_READ)
        if not chunk:
            return
        if chunk[-1:] == b"\n":
            yield chunk[:-1]
            continue
        if len(chunk) < MAX_READ:
            yield chunk  # the last line, without a newline
            return
        rest = chunk
        while rest and rest[-1:] != b"\n":
            rest = readline(MAX_READ)
        yield chunk


def read_stream(stream: BinaryIO, engine: str | None = None, unit: str | None = None,
                on_line: Callable[[StartupReader], None] | None = None,
                *, name: str = "input") -> Reading:
    """Read a whole log from a binary stream and return the final reading.

    Args:
        stream: the log, opened in binary mode (a file, ``sys.stdin.buffer``, a pipe).
        engine: the engine id, or None to detect it from the log.
        unit: for journal input, keep only entries about this unit (``sglang.service``).
        on_line: called with the reader after every physical line (streaming consumers, tests).
        name: how to name the input in error messages.

    Raises:
        LogReadError: the input is empty... no: an empty input gives a reading; raised for a binary
            non-log file, or a binary journal with no ``journalctl`` to read it.
        ValueError: for an unknown engine id.
    """
    reader = StartupReader(engine)
    lines = iter_lines(stream)
    first = next(lines, None)
    if first is None:
        return reader.reading()
    if first.startswith(_JOURNAL_MAGIC):
        raise LogReadError(f"{name} is a binary journal file: read it with `journalctl --file=FILE -o json -a "
                           f"| upwatch replay -`")
    head = first[:_SNIFF]
    if b"\x00" in head:
        raise LogReadError(f"{name} is a binary file (NUL bytes in its first line), not a log")
    if is_journal_json(first):
        _feed_journal(reader, first, lines, unit, on_line)
    else:
        feed = reader.feed_bytes
        feed(first)
        if on_line is not None:
            on_line(reader)
            for raw in lines:
                feed(raw)
                on_line(reader)
        else:
            for raw in lines:
                feed(raw)
    return reader.reading()


def _feed_journal(reader: StartupReader, first: bytes, lines: Iterator[bytes], unit: str | None,
                  on_line: Callable[[StartupReader], None] | None) -> None:
    lineno = 0
    for raw in _chain(first, lines):
        lineno += 1
        if not raw.strip():
            reader.note_bad_line(lineno) if False else None
            reader.lines = lineno
            continue
        try:
            rec = parse_record(raw)
        except RecordError:
            if raw.startswith(b"-- "):
                reader.lines = lineno  # "-- cursor: s=...", "-- No entries --": journalctl's own notes
            else:
                reader.note_bad_line(lineno)
        else:
            if unit is None or rec.unit == unit:
                reader.feed(rec.text, lineno, stamp=rec.stamp, ident=rec.ident, systemd=rec.systemd,
                            invocation=rec.invocation)
            else:
                reader.lines = lineno
        if on_line is not None:
            on_line(reader)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def read_path(path: str, engine: str | None = None, unit: str | None = None,
              on_line: Callable[[StartupReader], None] | None = None) -> Reading:
    """Read a log file (``-`` for standard input) and return the final reading.

    A binary journal file is read through ``journalctl --file=PATH -o json -a``.

    Raises:
        LogReadError: the file does not exist, is a directory, cannot be read, is binary, or is a
            journal file and ``journalctl`` is missing or fails.
        ValueError: for an unknown engine id.
    """
    import sys

    if path == "-":
        return read_stream(sys.stdin.buffer, engine, unit, on_line, name="standard input")
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_JOURNAL_MAGIC))
            if magic == _JOURNAL_MAGIC:
                return _read_journal_file(path, engine, unit, on_line)
            f.seek(0)
            return read_stream(f, engine, unit, on_line, name=path)
    except FileNotFoundError:
        raise LogReadError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LogReadError(f"{path}: is a directory, not a log file") from None
    except PermissionError:
        raise LogReadError(f"{path}: permission denied") from None
    except OSError as exc:
        raise LogReadError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_journal_file(path: str, engine: str | None, unit: str | None,
                       on_line: Callable[[StartupReader], None] | None) -> Reading:
    exe = shutil.which("journalctl")
    if exe is None:
        raise LogReadError(f"{path} is a binary journal file and journalctl is not installed to read it")
    proc = subprocess.Popen([exe, f"--file={os.path.abspath(path)}", "-o", "json", "-a", "--no-pager"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        reading = read_stream(proc.stdout, engine, unit, on_line, name=path)
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
        rc = proc.wait()
    if rc != 0:
        raise LogReadError(f"{path}: journalctl could not read it: {err.splitlines()[-1] if err else f'exit {rc}'}")
    return reading
