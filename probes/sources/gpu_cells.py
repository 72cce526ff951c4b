"""The cells of ``nvidia-smi``'s CSV (``--format=csv,noheader,nounits``), shared by the
``--query-gpu`` reader (:mod:`probes.sources.gpu`) and the ``--query-compute-apps`` reader
(:mod:`probes.sources.gpu_apps`): which cells mean "no value", the plausible range of each numeric
column, and a numeric cell read into a number, None, or an :class:`~probes.data.events.Unparsable`
(see :mod:`probes.sources.gpu` for the rules and the drivers they were read from)."""

from __future__ import annotations

import re

from probes.data.events import Unparsable
from probes.hosttext import one_line


#: Cells that mean "no value" (compared without case). ``[GPU requires reset]`` is kept apart: it
#: also sets the sample's note.
NA_TOKENS = frozenset(
    t.lower()
    for t in (
        "",
        "N/A",
        "[N/A]",
        "[Not Supported]",
        "[Unknown Error]",
        "[Insufficient Permissions]",
        "[Requested functionality has been deprecated]",
        "ERR!",
    )
)
#: The cell nvidia-smi prints in every device field of a GPU in a fault state (after an Xid).
RESET_TOKEN = "[GPU requires reset]"

_NUMBER_RE = re.compile(r"([-+]?\d+(?:\.\d+)?)(?:\s*(?:MiB|%|W|C|MHz))?", re.ASCII)
#: A cell nvidia-smi writes instead of a value: a bracketed note (``[N/A]``, ``[Not Supported]``,
#: and notes of drivers not seen yet).
_BRACKET_RE = re.compile(r"\[[^\]]*\]")


class UnparsableValue(ValueError):
    """A row whose key cell (``index``, ``pid``) holds a value no board prints: the row cannot be
    used. ``problem`` (a :class:`~probes.data.events.Unparsable`) says which column and why."""

    def __init__(self, problem: Unparsable) -> None:
        super().__init__(problem.message)
        self.problem = problem


#: Plausible ranges per numeric column (inclusive): a value outside is unparsable, not data.
#: Memory: up to 2**40 MiB (an exbibyte); power: up to 100 kW; temperature: -100..300 °C.
COLUMN_RANGES: dict[str, tuple[float, float]] = {
    "memory.used": (0, 2**40),
    "memory.total": (0, 2**40),
    "utilization.gpu": (0, 100),
    "temperature.gpu": (-100, 300),
    "power.draw": (0, 100_000),
    "power.limit": (0, 100_000),
    "used_memory": (0, 2**40),
}
#: Largest GPU index read (nvidia-smi numbers boards from 0; no host has thousands).
MAX_GPU_INDEX = 4096
#: Largest PID read: Linux's ``PID_MAX_LIMIT`` (2**22).
MAX_PID = 2**22


def is_no_value(cell: str) -> bool:
    """A "no value" cell (``[N/A]``, ``[GPU requires reset]``, …)."""
    return cell.lower() in NA_TOKENS or cell.lower() == RESET_TOKEN.lower()


def numeric_cell(cell: str, column: str, bad: list[Unparsable], gpu: int | None = None) -> float | None:
    """A numeric cell of ``column``: the number (units allowed), None for a "no value" cell; a value
    that is not a finite number in :data:`COLUMN_RANGES` is None and appended to ``bad``."""
    if is_no_value(cell) or _BRACKET_RE.fullmatch(cell):
        return None
    m = _NUMBER_RE.fullmatch(cell)
    why = None
    value = None
    if m is None:
        why = "not a number"
    elif len(m.group(1)) > 40:  # float() would give inf past 309 digits, int() raise past 4300
        why = f"{len(m.group(1))} digits"
    else:
        value = float(m.group(1))
        lo, hi = COLUMN_RANGES[column]
        if not lo <= value <= hi:
            why = f"out of range {_num(lo)}..{_num(hi)}"
    if why is not None:
        bad.append(Unparsable(column, cell_text(cell), why, gpu))
        return None
    return value


def _num(x: float) -> str:
    """A range bound as written: ``0``, ``100``, ``1099511627776``, ``-0.5``."""
    return str(int(x)) if float(x).is_integer() else str(x)


def as_int(value: float | None) -> int | None:
    """A checked cell as an int (the values are finite and in range: no OverflowError)."""
    return None if value is None else int(value)


def cell_text(cell: str, limit: int = 40) -> str:
    """A cell as shown in a message: control characters dropped, cut to ``limit`` characters."""
    return one_line(cell.strip(), max_chars=limit)
