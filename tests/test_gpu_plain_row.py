"""The fast path of the GPU row parser (:func:`probes.sources.gpu.read_plain_row`) reads a row
exactly as the cell-by-cell reader (:func:`probes.sources.gpu.read_row_cells`) does, or not at all.

Every row of every ``tests/fixtures/nvidia-smi/query-gpu.*.csv`` fixture, and rows built from
the cells drivers print and the cells they do not (signs, units, odd spacing, commas in the name,
notes, values out of range, too many digits), are read both ways: where the fast path gives a row
it is equal to the other's (sample and unparsable values), and it gives one for the plain rows a
driver prints (so the fast path is taken at all).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.sources.gpu import GpuRow, parse_query_row, read_plain_row, read_row_cells

SMI = Path(__file__).resolve().parent / "fixtures" / "nvidia-smi"
ROWS = [(p.name, row) for p in sorted(SMI.glob("query-gpu.*.csv"))
        for row in p.read_text(encoding="utf-8").splitlines() if row.strip()]


def cells_reading(line: str) -> GpuRow | BaseException:
    """What the cell-by-cell reader gives for ``line``: the row, or the ValueError it raises."""
    try:
        return read_row_cells(line)
    except ValueError as exc:
        return exc


def assert_same(line: str) -> GpuRow | None:
    fast = read_plain_row(line)
    slow = cells_reading(line)
    if fast is not None:
        assert not isinstance(slow, BaseException), f"{line!r}: fast path read a line the reader refuses ({slow})"
        assert fast == slow, line
        assert parse_query_row(line) == slow
    elif isinstance(slow, BaseException):
        with pytest.raises(type(slow)):
            parse_query_row(line)
    else:
        assert parse_query_row(line) == slow
    return fast


@pytest.mark.parametrize(("fixture", "line"), ROWS, ids=[f"{n}:{i}" for i, (n, _) in enumerate(ROWS)])
def test_fixture_rows_read_the_same(fixture: str, line: str) -> None:
    assert_same(line)
    assert_same(line + "\n")


def test_plain_rows_take_the_fast_path() -> None:
    loop = (SMI / "query-gpu.h100x8-sglang-tp8.loop.csv").read_text(encoding="utf-8").splitlines()
    assert all(read_plain_row(row) is not None for row in loop)
    na = (SMI / "query-gpu.single-gb10-na.csv").read_text(encoding="utf-8").splitlines()
    row = read_plain_row(na[0])
    assert row is not None and row.sample.mem_used_mib is None and row.sample.power_limit_w is None


@pytest.mark.parametrize("line", [
    "0, GPU-a1, NVIDIA H100, 0, 81559, 101, 33, 69.80, 700.00",        # utilisation over 100 %
    "0, GPU-a1, NVIDIA H100, 0, 1099511627777, 0, 33, 69.80, 700.00",  # memory over 2**40 MiB
    "4097, GPU-a1, NVIDIA H100, 0, 81559, 0, 33, 69.80, 700.00",       # index over MAX_GPU_INDEX
    "0, GPU-a1, [GPU requires reset], 0, 81559, 0, 33, 69.80, 700.00",  # the note in the name cell
    "0, GPU-a1, NVIDIA, H100, 0, 81559, 0, 33, 69.80, 700.00",          # a comma in the name
    "0, [N/A], NVIDIA H100, 0, 81559, 0, 33, 69.80, 700.00",            # no uuid
    "0, GPU-a1, NVIDIA H100, 0, 81559, 0, -5, 69.80, 700.00",           # a sign
    "0, GPU-a1, NVIDIA H100, 0 MiB, 81559 MiB, 0 %, 33, 69.80 W, 700.00 W",
    "0,GPU-a1,NVIDIA H100,0,81559,0,33,69.80,700.00",
    "0, GPU-a1,  NVIDIA H100  , 0, 81559, 0, 33, 69.80, 700.00",
    "0, GPU-a1, NVIDIA H100, 0, 81559, 0, 33, 69.80",                   # truncated
    "٣, GPU-a1, NVIDIA H100, 0, 81559, 0, 33, 69.80, 700.00",           # a non-ASCII digit
    "0, GPU-a1, NVIDIA H100, 0, 81559, 0, 33, 1234567890123.5, 700.00",  # 13 digits
])
def test_edge_rows_read_the_same(line: str) -> None:
    assert_same(line)


_number = st.one_of(
    st.integers(0, 10**6).map(str),
    st.floats(0, 2e5, allow_nan=False).map(lambda f: f"{f:.2f}"),
    st.integers(0, 10**14).map(str),
    st.sampled_from(["101", "-1", "+3", "1e3", "inf", "nan", "1.", ".5", "0x10", "12 MiB", "7 %", "3 W",
                     "1" * 13, "1" * 41, "00", "[N/A]", "N/A", "[n/a]", "[Not Supported]", "[Unknown Error]",
                     "[GPU requires reset]", "ERR!", "", " 5", "5 ", "٣"]),
)
_name = st.one_of(st.sampled_from(["NVIDIA H100 80GB HBM3", "NVIDIA GB10", "", " padded ", "a, b",
                                   "[GPU requires reset]", "[gpu requires RESET]", "[N/A]"]),
                  st.text(max_size=12))
_index = st.one_of(st.integers(0, 5000).map(str), st.sampled_from(["", "-1", "00007", "1234567", "x", "٣"]))
_uuid = st.one_of(st.just("GPU-00000000-0000-0000-0000-0000000000a0"), st.just("MIG-1a2b"),
                  st.sampled_from(["[N/A]", "GPU-", "gpu-1", "GPU-1_2", "MIG-a b"]))
_sep = st.sampled_from([", ", ", ", ", ", ",", " , ", ",  "])


@settings(max_examples=600, deadline=None)
@given(_index, _uuid, _name, st.lists(_number, min_size=6, max_size=6), st.lists(_sep, min_size=8, max_size=8),
       st.sampled_from(["", "\n", "\r\n", " "]))
def test_built_rows_read_the_same(index: str, uuid: str, name: str, values: list[str], seps: list[str],
                                  end: str) -> None:
    cells = [index, uuid, name, *values]
    line = cells[0] + "".join(sep + cell for sep, cell in zip(seps, cells[1:])) + end
    assert_same(line)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_reads_the_same(line: str) -> None:
    assert_same(line)
