"""Read a saved log, whatever form the operator has it in, into a :class:`~probes.logs.reader.StartupReader`.

Forms, detected from the first bytes:

* plain text as the server printed it (any of the wrappers :mod:`probes.logs.logline` knows);
* ``journalctl -o json`` output (one JSON object per line);
* a binary journal file (``*.journal``, magic ``LPKSHHRH``): read through the real
  ``journalctl --file=PATH -o json -a`` when it is installed.

Lines are read as bytes, at most :data:`MAX_READ` at a time, so a 20 MB line costs no more memory
than that; invalid UTF-8 is replaced, never fatal. Every way a log can be unreadable raises
:class:`LogReadError` with one line that says why (what the input is, and whether it is a text log
at all, is checked by :mod:`probes.sources.logfile_input`; this module feeds the reader).
"""

from __future__ import annotations

import codecs
import io
import itertools
import os
from collections.abc import Callable, Iterator
from typing import IO

from probes.logs.journal_json import RecordError, is_journal_json, parse_record
from probes.data.reading import Reading
from probes.logs.reader import StartupReader
from probes.sources.logfile_input import BLOCK, JOURNAL_MAGIC, SNIFF, LogReadError, checked_head, checked_input

__all__ = ["LogReadError", "MAX_READ", "iter_blocks", "iter_lines", "read_stream", "read_path"]

#: Bytes read per ``readline`` call; a longer line is read in pieces and only its start is kept.
MAX_READ = 1024 * 1024


def iter_blocks(stream: IO[bytes]) -> Iterator[list[bytes]]:
    """Yield the physical lines of a binary stream without their ``\\n`` (``\\r`` is kept), as
    lists: the lines of each block read (:func:`iter_lines` yields them one by one).

    Memory stays bounded whatever the input:

    * a line longer than :data:`MAX_READ` bytes yields its first :data:`MAX_READ` bytes and, when
      it is a line of ``\\r`` frames (a long tqdm bar), its last frames too (joined by ``\\r``),
      so the last progress value survives; the middle is skipped;
    * a run of NUL bytes (the hole ``logrotate copytruncate`` leaves) is skipped, so the text after
      it starts the line.

    A last line without ``\\n`` is yielded too. Lines are cut from blocks of :data:`BLOCK` bytes
    (a long line is read the line-by-line way, :func:`_readline_lines`).
    """
    read = getattr(stream, "read1", None) or stream.read
    pending = b""
    while True:
        block = read(BLOCK)
        if not block:
            if pending:
                yield [pending]  # the last line, without a newline
            return
        data = pending + block if pending else block
        lines = data.split(b"\n")
        pending = lines.pop()  # the line not ended yet
        if len(data) >= MAX_READ:
            lines = [next(_readline_lines(io.BytesIO(line + b"\n").readline)) if len(line) >= MAX_READ else line
                     for line in lines]
        if len(pending) >= MAX_READ:
            # A line longer than the reading bound, its end not yet read: the rest of it is read
            # line-by-line, from what was read of it, then the stream.
            lines.append(next(_readline_lines(_Prefixed(pending, stream).readline), b""))
            pending = b""
        if lines:
            yield lines


def iter_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of :func:`iter_blocks`, one by one."""
    for lines in iter_blocks(stream):
        yield from lines


class _Prefixed:
    """``readline`` over bytes already read, then the stream they came from."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self._head = head
        self._stream = stream

    def readline(self, size: int) -> bytes:
        head = self._head
        if not head:
            return self._stream.readline(size)
        nl = head.find(b"\n", 0, size)
        if nl >= 0:
            self._head = head[nl + 1:]
            return head[:nl + 1]
        if len(head) >= size:
            self._head = head[size:]
            return head[:size]
        self._head = b""
        return head + self._stream.readline(size - len(head))


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class _Utf16AsUtf8(io.RawIOBase):
    """A UTF-16 text stream (byte-order mark first, as PowerShell 5's ``>`` and ``Out-File`` write
    it) read as UTF-8 bytes; bytes that are no UTF-16 become U+FFFD. Wrapped in
    :class:`io.BufferedReader` by :func:`as_utf8`, so ``read``, ``read1`` and ``readline`` work."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-16")("replace")
        self._out = self._decoder.decode(head).encode()

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._out:
            chunk = self._stream.read(BLOCK)
            if not chunk:
                self._out = self._decoder.decode(b"", final=True).encode()
                if not self._out:
                    return 0
                break
            self._out = self._decoder.decode(chunk).encode()
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


class _Head(io.RawIOBase):
    """Bytes already read from a stream that can neither seek nor peek, then the stream."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        super().__init__()
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if not self._head:
            data = self._stream.read(len(b))
        else:
            data, self._head = self._head[:len(b)], self._head[len(b):]
        b[:len(data)] = data
        return len(data)


def as_utf8(stream: IO[bytes]) -> IO[bytes]:
    """The stream itself, or, for UTF-16 text (it begins with a UTF-16 byte-order mark), the same
    text as UTF-8 bytes: a log saved by PowerShell's ``>`` reads as the log itself. The first two
    bytes are looked at without losing them (peek, or read and seek back, or read and given again)."""
    peek = getattr(stream, "peek", None)
    if peek is not None:
        if peek(2)[:2] not in _UTF16_BOMS:
            return stream
        head = stream.read(2)
    elif stream.seekable():
        head = stream.read(2)
        if head not in _UTF16_BOMS:
            stream.seek(-len(head), io.SEEK_CUR)
            return stream
    else:
        head = stream.read(2)
        if head not in _UTF16_BOMS:
            return io.BufferedReader(_Head(head, stream))
    return io.BufferedReader(_Utf16AsUtf8(head, stream))


def _readline_lines(readline: Callable[[int], bytes]) -> Iterator[bytes]:
    """:func:`iter_lines` the line-by-line way, over ``readline(size)``."""
    while True:
        chunk = readline(MAX_READ)
        while len(chunk) == MAX_READ and chunk[-1:] != b"\n" and not chunk.strip(b"\x00"):
            chunk = readline(MAX_READ)  # inside a hole of NULs
        if not chunk:
            return
        if chunk[-1:] == b"\n":
            yield chunk[:-1]
            continue
        if len(chunk) < MAX_READ:
            yield chunk  # the last line, without a newline
            return
        head, tail = chunk, b""
        while True:
            rest = readline(MAX_READ)
            if not rest:
                break
            tail = (tail + rest)[-MAX_READ:]
            if rest[-1:] == b"\n":
                tail = tail[:-1]
                break
        cr = tail.find(b"\r")
        yield head + tail[cr:] if cr >= 0 and b"\r" in head else head


def read_stream(stream: IO[bytes], engine: str | None = None, unit: str | None = None,
                on_line: Callable[[StartupReader], None] | None = None,
                *, name: str = "input", info: dict[str, object] | None = None) -> Reading:
    """Read a whole log from a binary stream and return the final reading (of a log that has
    ended: ``StartupReader.reading(ended=True)``).

    The form is decided from the first lines: ``journalctl -o json`` when one of the first three
    non-empty lines is a journal record (a copy may begin inside a record), else plain text.

    Args:
        stream: the log, opened in binary mode (a file, ``sys.stdin.buffer``, a pipe).
        engine: the engine id, or None to detect it from the log.
        unit: for journal input, keep only entries about this unit (``sglang.service``).
        on_line: called with the reader after every physical line (streaming consumers, tests).
        name: how to name the input in error messages.
        info: when given, filled with what was learnt about the input: ``form`` (``text`` or
            ``journal``) and, for journal input, ``units`` (the units its entries are about).

    Raises:
        LogReadError: for a binary file that is not a log (an empty input gives a reading), a
            binary journal, compressed text, ``journalctl -o json-pretty`` output, or a
            ``unit`` no journal entry is about.
        ValueError: for an unknown engine id.
    """
    if unit is not None and "." not in unit:
        unit += ".service"  # as journalctl -u does
    reader = StartupReader(engine)
    blocks = iter_blocks(as_utf8(stream))
    head: list[bytes] = []
    rest: list[bytes] = []  # the lines of the last block read after the head
    size = 0
    for block in blocks:  # the first lines, up to 8 KiB and at least 3 that are not blank
        for k, raw in enumerate(block):
            head.append(raw)
            size += len(raw) + 1
            if size >= SNIFF and sum(1 for h in head if h.strip()) >= 3:
                rest = block[k + 1:]
                break
        else:
            continue
        break
    if not head:
        return reader.reading()
    head = checked_head(head, name)
    nonblank = [h for h in head if h.strip()]
    all_lines = itertools.chain(head, rest, itertools.chain.from_iterable(blocks))
    form = "journal" if any(is_journal_json(h) for h in nonblank) else "text"
    if info is not None:
        info["form"] = form
    if form == "journal":
        units: set[str] = set()
        fed = _feed_journal(reader, all_lines, unit, on_line, units)
        if info is not None:
            info["units"] = sorted(units)
        if unit is not None and not fed:
            present = ", ".join(sorted(units)) or "none"
            raise LogReadError(f"{name}: no journal entries about {unit} (units in it: {present})")
    elif on_line is not None:
        feed = reader.feed_bytes
        for raw in all_lines:
            feed(raw)
            on_line(reader)
    else:  # a block at a time: the reader's block scan (StartupReader.feed_lines)
        reader.feed_lines(head)
        reader.feed_lines(rest)
        for block in blocks:
            reader.feed_lines(block)
    return reader.reading(ended=True)  # the log ends here: a suspect nothing recovered is a failure


def _feed_journal(reader: StartupReader, lines: Iterator[bytes], unit: str | None,
                  on_line: Callable[[StartupReader], None] | None, units: set[str]) -> int:
    """Feed journal records; returns how many were fed (those about ``unit`` when given)."""
    fed = 0
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip() or raw.startswith(b"-- "):
            # Blank lines and journalctl's own notes ("-- cursor: s=...", "-- No entries --").
            reader.lines = lineno
        else:
            try:
                rec = parse_record(raw)
            except RecordError:
                reader.note_bad_line(lineno)
            else:
                if rec.unit is not None:
                    units.add(rec.unit)
                if unit is None or rec.unit == unit:
                    fed += 1
                    stamp = rec.stamp
                    for text in rec.texts:
                        reader.feed(text, lineno, stamp=stamp, ident=rec.ident, systemd=rec.systemd,
                                    invocation=rec.invocation)
                else:
                    reader.lines = lineno
        if on_line is not None:
            on_line(reader)
    return fed


def read_path(path: str, engine: str | None = None, unit: str | None = None,
              on_line: Callable[[StartupReader], None] | None = None, *, info: dict[str, object] | None = None,
              on_terminal: Callable[[str], None] | None = None) -> Reading:
    """Read a log file (``-`` for standard input) and return the final reading.

    A binary journal file is read through ``journalctl --file=PATH -o json -a``. Whatever the input
    (a file, standard input, a pipe, a character device), a leading run of NUL bytes (``logrotate
    copytruncate``'s hole) is skipped and the first block after it gets :func:`read_stream`'s
    binary test (:func:`~probes.sources.logfile_input.checked_head`, the test that refuses
    ``/bin/ls``); input of NUL bytes only is binary. From a character device that is not a terminal
    (``/dev/zero``, ``/dev/urandom``) no hole is skipped and at most
    :data:`~probes.sources.logfile_input.MAX_DEVICE_READ` bytes are read; from a pipe, a hole of at
    most :data:`~probes.sources.logfile_input.MAX_HOLE` bytes. A block device is refused (the
    checks: :mod:`probes.sources.logfile_input`).

    Args:
        on_terminal: called with the input's name before reading when the input is a terminal (the
            operator types the log, or has forgotten to give one): the CLI says how to end it.

    Raises:
        LogReadError: the file does not exist, is a directory or a block device, cannot be read, is
            binary (NUL bytes only included), a character device that does not end within
            ``MAX_DEVICE_READ`` bytes, or is a journal file and ``journalctl`` is missing or fails.
        ValueError: for an unknown engine id.
    """
    import sys

    if path == "-":
        name = "standard input"
        if sys.stdin is None:
            raise LogReadError("standard input is closed: give a PATH, or pipe the log in")
        try:
            stdin = checked_input(sys.stdin.buffer, name, on_terminal)
        except OSError as exc:
            raise LogReadError(f"{name}: cannot read: {exc.strerror or exc}") from None
        return read_stream(stdin, engine, unit, on_line, name=name, info=info)
    try:
        with open(path, "rb") as f:
            stream = checked_input(f, path, on_terminal)
            # peek, not read and seek: PATH may be a pipe (`upwatch replay <(ssh gpu journalctl ...)`)
            if stream.peek(len(JOURNAL_MAGIC))[:len(JOURNAL_MAGIC)] == JOURNAL_MAGIC:
                return _read_journal_file(path, engine, unit, on_line, info)
            return read_stream(stream, engine, unit, on_line, name=path, info=info)
    except FileNotFoundError:
        raise LogReadError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LogReadError(f"{path}: is a directory, not a log file") from None
    except PermissionError:
        raise LogReadError(f"{path}: permission denied") from None
    except OSError as exc:
        raise LogReadError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_journal_file(path: str, engine: str | None, unit: str | None,
                       on_line: Callable[[StartupReader], None] | None, info: dict[str, object] | None) -> Reading:
    import shutil  # only a binary journal needs them (a text log is read without)
    import subprocess

    exe = shutil.which("journalctl")
    if exe is None:
        raise LogReadError(f"{path} is a binary journal file and journalctl is not installed to read it")
    proc = subprocess.Popen([exe, f"--file={os.path.abspath(path)}", "-o", "json", "-a", "--no-pager"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        reading = read_stream(proc.stdout, engine, unit, on_line, name=path, info=info)
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
        rc = proc.wait()
    if rc != 0:
        raise LogReadError(f"{path}: journalctl could not read it: {err.splitlines()[-1] if err else f'exit {rc}'}")
    return reading
