"""The GPU probe: ``nvidia-smi --query-gpu`` CSV (over SSH) or NVML (locally) → :class:`GpuReading`.

Two sources, one model (:class:`~probes.data.events.GpuSample`); a value a board cannot give is ``None``,
never ``0``.

**nvidia-smi** (nvidia-smi documentation, https://docs.nvidia.com/deploy/nvidia-smi/; rows captured on drivers
590.48.01 / 595.80 in ``tests/fixtures/nvidia-smi``). :func:`query_argv` asks for
``--format=csv,noheader,nounits``: one line per GPU, fields separated by ``", "``, in the order
asked for (parse by position; the header, when present, prints canonical names). Cells may read
``[N/A]``, ``N/A``, ``[Not Supported]``, ``[Unknown Error]``, ``[Insufficient Permissions]``,
``[Requested functionality has been deprecated]``, ``[GPU requires reset]`` or be empty; all are "no
value". Whole-command failures are printed on **stdout** instead of CSV (driver not loaded,
driver/library mismatch, no devices, ``Unable to determine the device handle for GPU…``) with a
non-zero exit status; :func:`classify_error` turns them into one line for an operator. In loop mode
(``-lms``) the kernel's Xid lines may be interleaved with the rows; :func:`parse_query_line` raises
``ValueError`` for them so the caller can skip them.

**Bad values.** A row that is a row (index and uuid read) but holds a value no board prints (not a
number, ``inf``/``nan``, a 309-digit number, a negative memory size, a utilisation over 100 %) is not
a crash and not a silent ``None``: :func:`parse_query_row` gives the sample with that value None and
an :class:`Unparsable` naming the column, so the caller can say "unparsable value in column
memory.used" while the other values keep updating. A row whose key cell (the index, a process's
pid) is unusable raises :class:`UnparsableValue` (a ``ValueError``) with the same description.

The cells (what means "no value", each column's range, a numeric cell read) are
:mod:`probes.sources.gpu_cells`, shared with the process list. A row is read by one regex when it
is plain (:func:`read_plain_row`: the rows drivers print), else cell by cell
(:func:`read_row_cells`, every rule); both read a line the same.

**NVML** (locally): :class:`probes.sources.nvml.NvmlSource`, sampled by the same loop
(:class:`GpuSource`). The processes holding GPU memory: :mod:`probes.sources.gpu_apps`.

**The loop** (:class:`GpuSource`): one ``nvidia-smi --query-gpu … -lms`` stream per connection;
its rows are grouped into samples (a sample ends when the index goes down, or once it has as many
rows as the last whole sample); the first sample, whose GPU count is not known until the next one
begins, is shown :data:`EARLY_GPU_S` real seconds after its last row.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Protocol

from probes.data.events import GpuReading, GpuSample, Unparsable
from probes.sources.gpu_cells import (COLUMN_RANGES, MAX_GPU_INDEX, RESET_TOKEN, UnparsableValue, as_int,
                                     cell_text, is_no_value, numeric_cell)
from probes.sources.gpu_errors import GpuError, classify, classify_error
from probes.sources.context import SourceContext
from probes.transport.runner import ProbeError

#: The ``--query-gpu`` fields, in the order :class:`GpuSample` is read from.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)

_UUID_RE = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z-]+")


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One ``--query-gpu`` row read: the sample (an unparsable value is None in it) and the
    values that could not be read, in column order."""

    sample: GpuSample
    bad: tuple[Unparsable, ...] = ()


#: :data:`COLUMN_RANGES` of the six value columns of :data:`QUERY_FIELDS`, in order.
_VALUE_RANGES: tuple[tuple[float, float], ...] = tuple(COLUMN_RANGES[c] for c in QUERY_FIELDS[3:])


def query_argv(loop_ms: int | None = None) -> list[str]:
    """The ``nvidia-smi`` command for :data:`QUERY_FIELDS`.

    Args:
        loop_ms: when given, nvidia-smi keeps running and prints every GPU again every ``loop_ms``
            milliseconds (``-lms``): one long-lived process instead of one per poll.

    Returns:
        ``["nvidia-smi", "--query-gpu=index,uuid,…", "--format=csv,noheader,nounits"]`` (+ ``-lms N``).
    """
    argv = ["nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
    if loop_ms is not None:
        argv += ["-lms", str(loop_ms)]
    return argv


def parse_query_line(line: str) -> GpuSample:
    """Parse one row of the :func:`query_argv` query into its sample (see :func:`parse_query_row`;
    an unparsable value is None here, and :func:`parse_query_row` says which).

    Raises:
        ValueError: as :func:`parse_query_row` (:class:`UnparsableValue` among them).
    """
    return parse_query_row(line).sample


def parse_query_row(line: str) -> GpuRow:
    """Parse one row of the :func:`query_argv` query: :func:`read_plain_row` when the row is plain
    (nearly every row a driver prints), else :func:`read_row_cells`; both give the same row for
    the same line, and every rule is :func:`read_row_cells`'s.

    Returns:
        The GPU's sample and the values that could not be read.

    Raises:
        ValueError, UnparsableValue: as :func:`read_row_cells`.
    """
    return read_plain_row(line) or read_row_cells(line)


#: A plain value cell: a number of at most 12 + 12 digits, no sign and no unit, or the two
#: bracketed "no value" notes drivers print in place of a number.
_PLAIN_VALUE = r"(\d{1,12}(?:\.\d{1,12})?|\[N/A\]|\[Not Supported\])"
#: A plain row: index (at most 4 digits), a GPU/MIG uuid, a name without a comma, six plain
#: values, every separator exactly ", " (``--format=csv,noheader,nounits`` as drivers print it).
_PLAIN_ROW_RE = re.compile(r"(\d{1,4}), ((?:GPU|MIG)-[0-9A-Za-z-]+), ([^,]*), " + ", ".join([_PLAIN_VALUE] * 6),
                           re.ASCII)
_RESET_LOWER = RESET_TOKEN.lower()


def read_plain_row(line: str) -> GpuRow | None:
    """The fast path of :func:`parse_query_row`: a row of the plain shape (:data:`_PLAIN_ROW_RE`)
    whose values are all in their columns' ranges, read with one regex match; None for any other
    line (a row with units, odd spacing, a comma in the name, another note, a value out of range,
    or not a row at all), which :func:`read_row_cells` then reads with every rule. For the lines it
    reads, the row is equal to :func:`read_row_cells`'s (tests/test_gpu_plain_row.py).

    Args:
        line: one line of stdout, with or without its line end.
    """
    m = _PLAIN_ROW_RE.fullmatch(line.strip())
    if m is None:
        return None
    index_cell, uuid, name_cell, *cells = m.groups()
    index = int(index_cell)
    if index > MAX_GPU_INDEX:
        return None
    values: list[float | None] = []
    for cell, (lo, hi) in zip(cells, _VALUE_RANGES):
        if cell[0] == "[":
            values.append(None)
            continue
        value = float(cell)
        if not lo <= value <= hi:
            return None  # read_row_cells names it
        values.append(value)
    used, total, util, temp, power, limit = values
    name = name_cell.strip()
    return GpuRow(GpuSample(
        index=index,
        uuid=uuid,
        name=name,
        mem_used_mib=None if used is None else int(used),
        mem_total_mib=None if total is None else int(total),
        util_pct=None if util is None else int(util),
        temp_c=None if temp is None else int(temp),
        power_w=power,
        power_limit_w=limit,
        note=RESET_TOKEN if name.lower() == _RESET_LOWER else None,
    ))


def read_row_cells(line: str) -> GpuRow:
    """Parse one row of the :func:`query_argv` query, cell by cell (every rule).

    Format of ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits`` (nvidia-smi docs; drivers
    590/595): nine cells joined by ``", "``. Cells with units (``19818 MiB``, ``100 %``,
    ``69.85 W``, from ``--format=csv``) are read too. A "no value" cell (:data:`NA_TOKENS`, or any
    other bracketed note such as ``[Not Supported]``) is None; ``[GPU requires reset]`` also sets
    ``note``. Any other value that is not a number in its column's range (:data:`COLUMN_RANGES`) is
    None in the sample and an :class:`Unparsable` in ``bad``. The row is read outside-in (index and
    uuid from the left, six values from the right, the name between), so a comma inside a name
    cannot shift the numbers.

    Args:
        line: one line of stdout, with or without its line end.

    Returns:
        The GPU's sample and the values that could not be read.

    Raises:
        ValueError: the line is not a row of this query (a header, an Xid line, an error message,
            a truncated row).
        UnparsableValue: the uuid reads but the index is not a GPU index (too many digits, over
            :data:`MAX_GPU_INDEX`).
    """
    cells = [c.strip() for c in line.strip().split(",")]
    if len(cells) < len(QUERY_FIELDS):
        raise ValueError(f"not a --query-gpu row ({len(cells)} of {len(QUERY_FIELDS)} cells): {line.strip()[:80]!r}")
    index_cell, uuid_cell, *middle = cells[: len(cells) - 6]
    values = cells[len(cells) - 6:]
    if not (_UUID_RE.fullmatch(uuid_cell) or is_no_value(uuid_cell)):
        raise ValueError(f"not a --query-gpu row (uuid {uuid_cell[:40]!r}): {line.strip()[:80]!r}")
    if not (index_cell.isascii() and index_cell.isdigit()):
        raise ValueError(f"not a --query-gpu row (index {index_cell[:20]!r}): {line.strip()[:80]!r}")
    if len(index_cell) > 6 or int(index_cell) > MAX_GPU_INDEX:
        raise UnparsableValue(Unparsable("index", cell_text(index_cell), f"not a GPU index (0..{MAX_GPU_INDEX})"))
    index = int(index_cell)
    note = RESET_TOKEN if any(c.lower() == RESET_TOKEN.lower() for c in cells) else None
    bad: list[Unparsable] = []
    read = [numeric_cell(cell, column, bad, index) for cell, column in zip(values, QUERY_FIELDS[3:])]
    used, total, util, temp, power, limit = read
    sample = GpuSample(
        index=index,
        uuid=uuid_cell if _UUID_RE.fullmatch(uuid_cell) else "",
        name=", ".join(middle),
        mem_used_mib=as_int(used),
        mem_total_mib=as_int(total),
        util_pct=as_int(util),
        temp_c=as_int(temp),
        power_w=power,
        power_limit_w=limit,
        note=note,
    )
    return GpuRow(sample, tuple(bad))


def parse_query(text: str, time: float, *, returncode: int = 0) -> GpuReading:
    """Parse one complete output of the :func:`query_argv` query (one iteration).

    Blank lines and lines that are not rows (a header, ``WARNING: infoROM is corrupted …``, Xid
    lines) are skipped. GPUs are returned in index order.

    Args:
        text: stdout of nvidia-smi (decoded).
        time: when the sample was taken (epoch seconds).
        returncode: nvidia-smi's exit status, used only to word the error when no row parses.

    Returns:
        Every GPU that has a row.

    Raises:
        GpuError: no line is a row; carries :func:`classify_error`'s message.
    """
    gpus: list[GpuSample] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            gpus.append(parse_query_line(line))
        except ValueError:
            continue
    if not gpus:
        message, fatal = classify(text, returncode)
        raise GpuError(message, fatal)
    return GpuReading(time=time, gpus=tuple(sorted(gpus, key=lambda g: g.index)))


# --- the loop ---------------------------------------------------------------------------------------

#: Real seconds after a GPU row with no further row before the first sample is shown as it is.
EARLY_GPU_S = 0.3


class GpuSampler(Protocol):
    """A local way to read every GPU at once (:class:`probes.sources.nvml.NvmlSource`)."""

    def sample(self, time: float) -> GpuReading:
        """One reading stamped ``time`` (epoch seconds); raises :class:`GpuError`. Blocks."""
        ...

    def close(self) -> None:
        """Release the library; safe twice."""
        ...


class _Sample:
    """The rows of the GPU sample being read, and those of their values that could not be read."""

    def __init__(self) -> None:
        self.rows: list[GpuSample] = []
        self.bad: list[Unparsable] = []

    def clear(self) -> None:
        self.rows.clear()
        self.bad.clear()


class GpuSource:
    """The GPU probe's loop: ``nvidia-smi --query-gpu … -lms`` streamed through the runner (one row
    per GPU every ``gpu_interval_s``), or, with a ``sampler``, that read every ``gpu_interval_s``
    in a thread. Each sample becomes a :class:`~probes.data.events.GpuReading`; a stream that ends or
    fails is the ``gpu`` cell's failure (nvidia-smi's own words when it printed any), retried with
    backoff. Keeps ``signals.uuid_index`` (GPU uuid → index) for the process list.

    Args:
        context: the host's :class:`~probes.sources.context.SourceContext`.
        sampler: sample locally with this instead of running nvidia-smi; None: nvidia-smi.
    """

    def __init__(self, context: SourceContext, sampler: GpuSampler | None = None) -> None:
        self.context = context
        self.sampler = sampler
        #: GPUs per sample, learnt from whole samples (0 until one is known to be whole)
        self.gpu_count = 0

    async def run(self) -> None:
        """Sample until cancelled."""
        if self.sampler is not None:
            await self._sample_locally(self.sampler)
        else:
            await self._stream()

    def deliver(self, rows: list[GpuSample], *, learn: bool = True, bad: tuple[Unparsable, ...] = ()) -> None:
        """Deliver one GPU sample; values that could not be read (``bad``) are None in it, and
        make the GPU cell fail with kind ``unparsable`` (the first one named) until a sample
        reads whole. ``learn``: the sample is known to be whole (its size is the GPU count)."""
        ctx = self.context
        if learn:
            self.gpu_count = max(self.gpu_count, len(rows))
        for g in rows:
            if g.uuid:
                ctx.signals.uuid_index[g.uuid] = g.index
        ctx.emit(GpuReading(ctx.clock.now(), tuple(rows)))
        ctx.delivered("gpu", bad)

    def _show_early(self, sample: _Sample) -> None:
        """The first sample: how many GPUs there are is not known until the next sample begins
        (one interval later); show what came, without learning a count from it."""
        if sample.rows and not self.gpu_count:
            self.deliver(list(sample.rows), learn=False, bad=tuple(sample.bad))

    async def _sample_locally(self, sampler: GpuSampler) -> None:
        ctx = self.context
        delay = ctx.cadence.retry_s
        while True:
            try:
                reading = await asyncio.to_thread(sampler.sample, ctx.clock.now())
            except GpuError as exc:
                ctx.fail("gpu", "command", str(exc))
                delay = await ctx.retry(delay)
                continue
            self.deliver(list(reading.gpus))
            delay = ctx.cadence.retry_s
            await ctx.clock.sleep(ctx.cadence.gpu_interval_s)

    async def _stream(self) -> None:
        ctx = self.context
        delay = ctx.cadence.retry_s
        argv = query_argv(loop_ms=int(ctx.cadence.gpu_interval_s * 1000))
        loop = asyncio.get_running_loop()
        while True:
            kind = "command"
            early: list[asyncio.TimerHandle] = []  # the pending early showing of the first sample
            try:
                message = await self._read_stream(argv, loop, early)
                ctx.fail("gpu", "command", message)
            except ProbeError as exc:
                kind = "command" if exc.kind == "timeout" else exc.kind  # a slow nvidia-smi, not the link
                ctx.fail("gpu", kind, exc.message)
            finally:
                for handle in early:
                    handle.cancel()
            delay = await ctx.retry(delay, kind)

    async def _read_stream(self, argv: list[str], loop: asyncio.AbstractEventLoop,
                           early: list[asyncio.TimerHandle]) -> str:
        """Read one stream into samples until it ends; returns why it ended (one line).

        Raises:
            ProbeError: the stream failed.
        """
        runner = self.context.runner
        sample = _Sample()
        junk: list[str] = []
        rows = 0
        async with contextlib.aclosing(runner.stream(argv)) as stream:  # type: ignore[type-var]
            async for raw in stream:
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                try:
                    row = parse_query_row(line)
                except UnparsableValue as exc:
                    sample.bad.append(exc.problem)  # a row, but its index cannot be read
                    continue
                except ValueError:
                    junk.append(line)  # Xid notes between samples, or an error message
                    continue
                g = row.sample
                rows += 1
                for handle in early:
                    handle.cancel()
                early.clear()
                if sample.rows and g.index <= sample.rows[-1].index:
                    self.deliver(list(sample.rows), bad=tuple(sample.bad))
                    sample.clear()
                sample.rows.append(g)
                sample.bad.extend(row.bad)
                if self.gpu_count and len(sample.rows) == self.gpu_count:
                    self.deliver(list(sample.rows), bad=tuple(sample.bad))
                    sample.clear()
                elif not self.gpu_count:
                    early.append(loop.call_later(EARLY_GPU_S, self._show_early, sample))
        for handle in early:
            handle.cancel()
        early.clear()
        if sample.rows:
            self.deliver(list(sample.rows), bad=tuple(sample.bad))
        if rows == 0:
            # No row at all: ask once more without the loop, for the exit status and stderr the
            # stream does not carry (missing binary, driver mismatch, ...).
            done = await runner.run(query_argv(), timeout=60.0)
            return classify_error((done.stdout + b"\n" + done.stderr).decode("utf-8", "replace"), done.returncode)
        return classify_error("\n".join(junk[-5:]), 1) if junk else "nvidia-smi ended"
