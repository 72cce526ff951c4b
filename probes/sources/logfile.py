"""Read a saved log, whatever form the operator has it in, into a :class:`~probes.logs.reader.StartupReader`.

Forms, detected from the first bytes:

* plain text as the server printed it (any of the wrappers :mod:`probes.logs.logline` knows);
* ``journalctl -o json`` output (one JSON object per line);
* a binary journal file (``*.journal``, magic ``LPKSHHRH``): read through the real
  ``journalctl --file=PATH -o json -a`` when it is installed.

Lines are read as bytes, at most :data:`MAX_READ` at a time, so a 20 MB line costs no more memory
than that; invalid UTF-8 is replaced, never fatal. Every way a log can be unreadable raises
:class:`LogReadError` with one line that says why.
"""

from __future__ import annotations

import io
import itertools
import os
import stat
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, TypeVar

from probes.logs.journal_json import RecordError, is_journal_json, parse_record
from probes.data.reading import Reading
from probes.logs.reader import StartupReader

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

#: Bytes read per ``readline`` call; a longer line is read in pieces and only its start is kept.
MAX_READ = 1024 * 1024
#: Bytes read at a time by :func:`iter_blocks`. 64 KiB, not more: a serving log's block scan makes
#: two copies of each block (joined, made a template), and blocks of 256 KiB put the three above
#: glibc's heap trim threshold, so the heap was given back and faulted in again every block (61,000
#: page faults and 0.16-0.23 s of system time over 1,000,000 lines; with 64 KiB, 3,600 and 0.03 s).
_BLOCK = 64 * 1024
_JOURNAL_MAGIC = b"LPKSHHRH"
_SNIFF = 8192


class LogReadError(Exception):
    """The log could not be read at all; ``str()`` is one line for the operator."""


def iter_blocks(stream: IO[bytes]) -> Iterator[list[bytes]]:
    """Yield the physical lines of a binary stream without their ``\\n`` (``\\r`` is kept), as
    lists: the lines of each block read (:func:`iter_lines` yields them one by one).

    Memory stays bounded whatever the input:

    * a line longer than :data:`MAX_READ` bytes yields its first :data:`MAX_READ` bytes and, when
      it is a line of ``\\r`` frames (a long tqdm bar), its last frames too (joined by ``\\r``),
      so the last progress value survives; the middle is skipped;
    * a run of NUL bytes (the hole ``logrotate copytruncate`` leaves) is skipped, so the text after
      it starts the line.

    A last line without ``\\n`` is yielded too. Lines are cut from blocks of :data:`_BLOCK` bytes
    (a long line is read the line-by-line way, :func:`_readline_lines`).
    """
    read = getattr(stream, "read1", None) or stream.read
    pending = b""
    while True:
        block = read(_BLOCK)
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


def _is_binary(sample: bytes) -> bool:
    """True for data that is not a text log: more than 1 in 20 characters are control characters a
    log does not hold (NUL included) or invalid UTF-8 (an executable, an archive, a database)."""
    text = sample.decode("utf-8", "replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b\x0c\x08\x07"))
    return odd > max(8, len(text) // 20)


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
            binary journal, compressed or UTF-16 text, ``journalctl -o json-pretty`` output, or a
            ``unit`` no journal entry is about.
        ValueError: for an unknown engine id.
    """
    if unit is not None and "." not in unit:
        unit += ".service"  # as journalctl -u does
    reader = StartupReader(engine)
    blocks = iter_blocks(stream)
    head: list[bytes] = []
    rest: list[bytes] = []  # the lines of the last block read after the head
    size = 0
    for block in blocks:  # the first lines, up to 8 KiB and at least 3 that are not blank
        for k, raw in enumerate(block):
            head.append(raw)
            size += len(raw) + 1
            if size >= _SNIFF and sum(1 for h in head if h.strip()) >= 3:
                rest = block[k + 1:]
                break
        else:
            continue
        break
    if not head:
        return reader.reading()
    first = head[0]
    if first.startswith(_JOURNAL_MAGIC):
        raise LogReadError(f"{name} is a binary journal file: read it with `journalctl --file=FILE -o json -a "
                           f"| upwatch replay -`")
    # `logrotate copytruncate` leaves a hole of NUL bytes where the old content was, and the server
    # keeps writing after it: the text after the hole is the log.
    head[0] = first = first.lstrip(b"\x00")
    if first.startswith(b"\x1f\x8b"):
        raise LogReadError(f"{name} is gzip-compressed: read it with `zcat FILE | upwatch replay -`")
    if first.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LogReadError(f"{name} is UTF-16 text: convert it with `iconv -f UTF-16 -t UTF-8 FILE | upwatch replay -`")
    if _is_binary(b"\n".join(head)[:_SNIFF]):
        raise LogReadError(f"{name} is a binary file, not a log")
    nonblank = [h for h in head if h.strip()]
    if nonblank[:1] == [b"{"] and len(nonblank) > 1 and b'"__' in nonblank[1]:
        raise LogReadError(f"{name} is `journalctl -o json-pretty` output: use `journalctl -o json` (one entry "
                           f"a line)")
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
    copytruncate``'s hole) is skipped (:func:`_check_first_block`) and the first block after it
    gets :func:`read_stream`'s binary test (:func:`_is_binary`, the test that refuses ``/bin/ls``);
    input of NUL bytes only is binary. From a character device that is not a terminal
    (``/dev/zero``, ``/dev/urandom``) no hole is skipped and at most :data:`MAX_DEVICE_READ` bytes
    are read; from a pipe, a hole of at most :data:`MAX_HOLE` bytes. A block device is refused.

    Args:
        on_terminal: called with the input's name before reading when the input is a terminal (the
            operator types the log, or has forgotten to give one): the CLI says how to end it.

    Raises:
        LogReadError: the file does not exist, is a directory or a block device, cannot be read, is
            binary (NUL bytes only included), a character device that does not end within
            :data:`MAX_DEVICE_READ` bytes, or is a journal file and ``journalctl`` is missing or fails.
        ValueError: for an unknown engine id.
    """
    import sys

    if path == "-":
        name = "standard input"
        if sys.stdin is None:
            raise LogReadError("standard input is closed: give a PATH, or pipe the log in")
        try:
            stdin = _checked_input(sys.stdin.buffer, name, on_terminal)
        except OSError as exc:
            raise LogReadError(f"{name}: cannot read: {exc.strerror or exc}") from None
        return read_stream(stdin, engine, unit, on_line, name=name, info=info)
    try:
        with open(path, "rb") as f:
            stream = _checked_input(f, path, on_terminal)
            # peek, not read and seek: PATH may be a pipe (`upwatch replay <(ssh gpu journalctl ...)`)
            if stream.peek(len(_JOURNAL_MAGIC))[:len(_JOURNAL_MAGIC)] == _JOURNAL_MAGIC:
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


#: A leading hole of NUL bytes longer than this, in input that may never end (a pipe), is refused
#: as binary (``cat /dev/zero | upwatch replay -``); a regular file's hole is skipped whole.
MAX_HOLE = 256 * 1024 * 1024
#: Bytes read at most from a character device that is not a terminal (``/dev/zero`` never ends).
MAX_DEVICE_READ = 64 * 1024 * 1024
_MIB = 1024 * 1024
#: The stream :func:`_checked_input` is given, which it can give back as it is.
_S = TypeVar("_S", bound=IO[bytes])


def _checked_input(stream: _S, name: str, on_terminal: Callable[[str], None] | None) -> _S | _Replayed:
    """``stream`` after its kind and first block were checked, positioned at the first byte that is
    not a leading NUL: the stream itself (a seekable file, a terminal) or a stream that gives the
    bytes read for the check and then the rest (a pipe, a character device; bounded for a device).
    Either can ``peek`` (the journal file test).

    Raises:
        LogReadError: a block device, or NUL bytes only (:func:`_check_first_block`).
        OSError: from ``fstat`` or reading.
    """
    mode = os.fstat(stream.fileno()).st_mode
    if stat.S_ISBLK(mode):
        raise LogReadError(f"{name} is a block device (a disk), not a log file")
    if stat.S_ISCHR(mode) and stream.isatty():
        if on_terminal is not None:
            on_terminal(name)
        return stream  # typed or pasted by the operator: read as it comes, until Ctrl-D
    if stat.S_ISREG(mode) and stream.seekable():
        start = stream.tell()
        head, hole = _check_first_block(stream, name, hole_cap=None)
        stream.seek(start + hole)  # the lines as read_stream reads them, the hole skipped
        return stream
    device = stat.S_ISCHR(mode)
    source: IO[bytes] | _Bounded = _Bounded(stream, name) if device else stream
    head, _hole = _check_first_block(source, name, hole_cap=0 if device else MAX_HOLE)
    return _Replayed(head, source)


def _check_first_block(stream: IO[bytes] | _Bounded, name: str, hole_cap: int | None) -> tuple[bytes, int]:
    """Read past a leading run of NUL bytes (``logrotate copytruncate``'s hole) to the first bytes
    that are not NUL; the binary test of what follows is :func:`read_stream`'s (:func:`_is_binary`,
    with the messages for gzip, UTF-16 and journal files).

    Returns:
        (the first block's bytes after the hole, at most :data:`_BLOCK`; the hole's length in
        bytes). ``(b"", 0)`` for an empty input.

    Raises:
        LogReadError: only NUL bytes up to the end (binary: the NUL bytes that are the hole of a
            copied log are followed by its text), or a hole longer than ``hole_cap`` bytes (None:
            no bound).
    """
    read = getattr(stream, "read1", None) or stream.read
    hole = 0
    while True:
        block = read(_BLOCK)
        if not block:
            if hole:
                raise LogReadError(f"{name} is a binary file, not a log: {_size(hole)} of NUL bytes and nothing else")
            return b"", 0
        head = block.lstrip(b"\x00")
        hole += len(block) - len(head)
        if head:
            return head, hole
        if hole_cap is not None and hole > hole_cap:
            what = "a character device that gives NUL bytes" if hole_cap == 0 else \
                f"binary: more than {_size(hole_cap)} of NUL bytes and no text"
            raise LogReadError(f"{name} is {what}, not a log")


def _size(n: int) -> str:
    return f"{n / _MIB:.1f} MiB" if n >= _MIB else f"{n} bytes"


class _Bounded(io.RawIOBase):
    """A character device's stream that raises :class:`LogReadError` once more than
    :data:`MAX_DEVICE_READ` bytes were read from it."""

    def __init__(self, stream: IO[bytes], name: str) -> None:
        super().__init__()
        self._stream = stream
        self._name = name
        self._read = 0

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        # A device opened "rb" (or standard input's buffer) is a BufferedReader; IO[bytes] does not declare read1.
        data: bytes = self._stream.read1(size if size > 0 else _BLOCK)  # type: ignore[attr-defined]
        self._read += len(data)
        if self._read > MAX_DEVICE_READ:
            raise LogReadError(f"{self._name} is a character device that did not end after "
                               f"{MAX_DEVICE_READ // _MIB} MiB: not a log file")
        return data

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b)
        data = self.read1(len(view))
        view[:len(data)] = data
        return len(data)


class _Replayed(io.BufferedReader):
    """The bytes already read from a stream (``head``), then the rest of the stream: what was read
    to test the input is not lost (a pipe cannot seek back)."""

    def __init__(self, head: bytes, stream: IO[bytes] | _Bounded) -> None:
        super().__init__(_HeadThen(head, stream), buffer_size=_BLOCK)


class _HeadThen(io.RawIOBase):
    def __init__(self, head: bytes, stream: IO[bytes] | _Bounded) -> None:
        super().__init__()
        self._head = head
        self._read1 = getattr(stream, "read1", None) or stream.read

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b)
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._read1(len(view))
        view[:len(data)] = data
        return len(data)


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
