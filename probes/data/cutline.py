"""A stream line too long to keep whole (:class:`CutLine`) and the caps that make one.
"""

from __future__ import annotations

from typing import Self

#: The longest line a stream hands over whole, in bytes (16 MiB). A ``journalctl -o json`` record is
#: one line: a plain-text ``MESSAGE`` of up to about 16 MiB fits, a byte-array one (about 3-4
#: characters per byte: colours, ``\r``) up to about 4 MiB. A longer line arrives as a
#: :class:`CutLine`.
LINE_CAP = 16 * 1024 * 1024
#: Of a line longer than :data:`LINE_CAP`, how many of its last bytes are kept (1 MiB), so what
#: follows the long value (the journal's other fields) is not lost.
CUT_TAIL = 1024 * 1024

class CutLine(bytes):
    """A line longer than :data:`LINE_CAP`: its first ``LINE_CAP - CUT_TAIL`` bytes (the bytes
    themselves) and its last :data:`CUT_TAIL` bytes (:attr:`tail`); the middle was dropped.

    Attributes:
        tail: the line's last bytes (at most :data:`CUT_TAIL`).
        size: the whole line's length in bytes (newline not counted).
    """

    tail: bytes
    size: int

    def __new__(cls, head: bytes, tail: bytes, size: int) -> Self:
        line = super().__new__(cls, head)
        line.tail = tail
        line.size = size
        return line

    @property
    def dropped(self) -> int:
        """Bytes of the line that were not kept."""
        return self.size - len(self) - len(self.tail)
