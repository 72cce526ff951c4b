"""Opening and checking a saved log before :mod:`probes.sources.logfile` reads it: what kind of
input it is (a file, a pipe, a terminal, a character or block device), the leading run of NUL bytes
``logrotate copytruncate`` leaves (skipped), and the tests of its first bytes that refuse what is
not a text log (a binary journal, gzip, UTF-16, ``journalctl -o json-pretty``, a binary file).

Each refusal raises :class:`LogReadError` with one line that says why. A pipe or a device cannot
seek back, so the bytes read to check it are given again (``_Replayed``); a character device's
input is bounded (:data:`MAX_DEVICE_READ`).
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["LogReadError", "checked_input", "checked_head", "BLOCK", "SNIFF", "JOURNAL_MAGIC", "MAX_HOLE",
           "MAX_DEVICE_READ"]

#: Bytes read at a time, here and by :func:`probes.sources.logfile.iter_blocks`. 64 KiB, not more:
#: a serving log's block scan makes two copies of each block (joined, made a template), and blocks
#: of 256 KiB put the three above glibc's heap trim threshold, so the heap was given back and
#: faulted in again every block (61,000 page faults and 0.16-0.23 s of system time over 1,000,000
#: lines; with 64 KiB, 3,600 and 0.03 s).
BLOCK = 64 * 1024
#: The first bytes of a binary journal file (``*.journal``).
JOURNAL_MAGIC = b"LPKSHHRH"
#: Bytes of a log's beginning (at least) that its form is told from and the binary test is made on.
SNIFF = 8192


class LogReadError(Exception):
    """The log could not be read at all; ``str()`` is one line for the operator."""


def _utf16_order(blob: bytes) -> str | None:
    """``"LE"`` or ``"BE"`` for text that is UTF-16 without its byte-order mark (every other byte
    NUL, the others mostly printable ASCII: a log in English), else None."""
    if len(blob) < 16:
        return None
    even, odd = blob[0::2], blob[1::2]
    for text, zeros, order in ((even, odd, "LE"), (odd, even, "BE")):
        printable = sum(1 for b in text if 32 <= b < 127 or b in (9, 10, 13))
        if zeros.count(0) * 10 >= len(zeros) * 9 and printable * 10 >= len(text) * 9:
            return order
    return None


def checked_head(head: list[bytes], name: str) -> list[bytes]:
    """The first lines of a log (up to :data:`SNIFF` bytes), refused if they are not a text log.

    Returns:
        ``head`` with its first line's leading NUL bytes gone (``logrotate copytruncate`` leaves a
        hole of NUL bytes where the old content was, and the server keeps writing after it: the
        text after the hole is the log).

    Raises:
        LogReadError: a binary journal file, gzip-compressed or UTF-16 text, a binary file
            (:func:`_is_binary`), or ``journalctl -o json-pretty`` output; each says what to do.
    """
    first = head[0]
    if first.startswith(JOURNAL_MAGIC):
        raise LogReadError(f"{name} is a binary journal file: read it with `journalctl --file=FILE -o json -a "
                           f"| upwatch replay -`")
    head = [first.lstrip(b"\x00"), *head[1:]]
    first = head[0]
    if first.startswith(b"\x1f\x8b"):
        raise LogReadError(f"{name} is gzip-compressed: read it with `zcat FILE | upwatch replay -`")
    if first.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LogReadError(f"{name} is UTF-16 text: convert it with `iconv -f UTF-16 -t UTF-8 FILE | upwatch replay -`")
    blob = b"\n".join(head)[:SNIFF]
    order = _utf16_order(blob)
    if order is not None:
        raise LogReadError(f"{name} looks like UTF-16 text without a byte-order mark: convert it with "
                           f"`iconv -f UTF-16{order} -t UTF-8 FILE | upwatch replay -`")
    if _is_binary(blob):
        raise LogReadError(f"{name} is a binary file, not a log")
    nonblank = [h for h in head if h.strip()]
    if nonblank[:1] == [b"{"] and len(nonblank) > 1 and b'"__' in nonblank[1]:
        raise LogReadError(f"{name} is `journalctl -o json-pretty` output: use `journalctl -o json` (one entry "
                           f"a line)")
    return head


#: A leading hole of NUL bytes longer than this, in input that may never end (a pipe), is refused
#: as binary (``cat /dev/zero | upwatch replay -``); a regular file's hole is skipped whole.
MAX_HOLE = 256 * 1024 * 1024
#: Bytes read at most from a character device that is not a terminal (``/dev/zero`` never ends).
MAX_DEVICE_READ = 64 * 1024 * 1024
_MIB = 1024 * 1024
#: The stream :func:`checked_input` is given, which it can give back as it is.
_S = TypeVar("_S", bound=IO[bytes])


def checked_input(stream: _S, name: str, on_terminal: Callable[[str], None] | None) -> _S | _Replayed:
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
    that are not NUL; the binary test of what follows is :func:`checked_head`'s (:func:`_is_binary`,
    with the messages for gzip, UTF-16 and journal files).

    Returns:
        (the first block's bytes after the hole, at most :data:`BLOCK`; the hole's length in
        bytes). ``(b"", 0)`` for an empty input.

    Raises:
        LogReadError: only NUL bytes up to the end (binary: the NUL bytes that are the hole of a
            copied log are followed by its text), or a hole longer than ``hole_cap`` bytes (None:
            no bound).
    """
    read = getattr(stream, "read1", None) or stream.read
    hole = 0
    while True:
        block = read(BLOCK)
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
        data: bytes = self._stream.read1(size if size > 0 else BLOCK)  # type: ignore[attr-defined]
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
        super().__init__(_HeadThen(head, stream), buffer_size=BLOCK)


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


def _is_binary(sample: bytes) -> bool:
    """True for data that is not a text log: more than 1 in 20 characters are control characters a
    log does not hold (NUL included) or invalid UTF-8 (an executable, an archive, a database)."""
    text = sample.decode("utf-8", "replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b\x0c\x08\x07"))
    return odd > max(8, len(text) // 20)
