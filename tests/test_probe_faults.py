"""Every probe contains its own failures (issue 13).

A value a probe cannot parse degrades that probe's cell (a failure of kind ``unparsable`` naming
the column), never the host; a probe task that raises anyway is shown as what it is (kind
``crashed``, the exception's type and message) and started again with a capped backoff while the
host's other probes keep running. Measured before the fix: a ``--query-gpu`` row with a 309-digit
number raised OverflowError in ``int(float(cell))``, ``HostWatcher.run``'s gather stopped every
probe of the host, and its card kept its last state for good.

The host tests run on the real sshd test host (tests/testhost.py) with the fake ``nvidia-smi``
printing the bad row; the unit tests feed the parsers the inputs that once crashed them (several
found by ``bench/fuzz.py``).
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from test_live_watch import FAST, Recorder, batch, texts
from waiting import until
from testhost import FIXTURES, TestHost

from probes.sources import gpu_apps as gpu_apps_probe
from probes.sources import unit as unit_probe
from probes.clock import WallClock
from probes.sources.gpu import QUERY_FIELDS, parse_query, parse_query_line, parse_query_row
from probes.sources.gpu_cells import UnparsableValue
from probes.sources.gpu_apps import COMPUTE_FIELDS, parse_compute_apps, read_compute_apps
from probes.data.events import Unparsable
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher

UUID = "GPU-00000000-0000-0000-0000-0000000000a0"
#: The measured crash: 309 digits read as float are inf, and int(inf) raised OverflowError.
BIG = "1" + "0" * 308
GOOD = f"0, {UUID}, NVIDIA H100 80GB HBM3, 19818, 81559, 100, 59, 631.95, 700.00"


def row(**cells: str) -> str:
    """:data:`GOOD` with some cells replaced, by field name (``memory.used`` as ``memory_used``)."""
    values = dict(zip(QUERY_FIELDS, [c.strip() for c in GOOD.split(",")]))
    for key, value in cells.items():
        values[key.replace("_", ".")] = value
    return ", ".join(values[f] for f in QUERY_FIELDS)


# --- nvidia-smi --query-gpu ------------------------------------------------------------------------


@pytest.mark.parametrize(("column", "cell", "why"), ids=lambda v: v[:12] if isinstance(v, str) else v, argvalues=[
    ("memory.used", BIG, "309 digits"),            # the measured OverflowError
    ("memory.used", "9" * 5000, "5000 digits"),    # int() would raise ValueError (4300-digit limit)
    ("memory.total", "inf", "not a number"),
    ("memory.total", "nan", "not a number"),
    ("memory.used", "-5", "out of range 0..1099511627776"),
    ("utilization.gpu", "101", "out of range 0..100"),
    ("temperature.gpu", "1e3", "not a number"),
    ("power.draw", "12abc", "not a number"),
    ("power.limit", "-0.5 W", "out of range 0..100000"),
])
def test_a_bad_value_is_none_in_the_sample_and_named_by_its_column(column: str, cell: str, why: str) -> None:
    got = parse_query_row(row(**{column.replace(".", "_"): cell}))
    assert got.bad == (Unparsable(column, cell[:39] + "…" if len(cell) > 40 else cell, why, 0),)
    assert got.bad[0].message.startswith(f"unparsable value in column {column} of GPU 0: ")
    field = {"memory.used": "mem_used_mib", "memory.total": "mem_total_mib", "utilization.gpu": "util_pct",
             "temperature.gpu": "temp_c", "power.draw": "power_w", "power.limit": "power_limit_w"}[column]
    assert getattr(got.sample, field) is None
    # The other values are read as usual.
    good = parse_query_line(GOOD)
    others = {k: v for k, v in vars_of(got.sample).items() if k != field}
    assert others == {k: v for k, v in vars_of(good).items() if k != field}


def vars_of(sample: object) -> dict[str, object]:
    return {name: getattr(sample, name) for name in sample.__slots__}  # type: ignore[attr-defined]


def test_no_value_cells_are_not_unparsable() -> None:
    got = parse_query_row(row(memory_used="[N/A]", utilization_gpu="[Not Supported]",
                              power_draw="[Some note of a newer driver]", temperature_gpu=""))
    assert got.bad == ()
    assert (got.sample.mem_used_mib, got.sample.util_pct, got.sample.power_w, got.sample.temp_c) == (None,) * 4


def test_every_value_of_the_real_fixtures_reads_without_a_bad_cell() -> None:
    for path in sorted((FIXTURES / "nvidia-smi").glob("query-gpu.*.csv")):
        for line in path.read_text().splitlines():
            try:
                got = parse_query_row(line)
            except ValueError:
                continue  # the header
            assert got.bad == (), (path.name, line)


def test_an_index_that_is_no_gpu_index_raises_unparsable_value() -> None:
    for index in ("9" * 5000, BIG, "4097"):
        with pytest.raises(UnparsableValue) as info:
            parse_query_row(row(index=index))
        assert info.value.problem.column == "index"
        assert "unparsable value in column index" in str(info.value)


def test_parse_query_skips_rows_it_cannot_use_and_keeps_the_others() -> None:
    text = "\n".join([GOOD, row(index="9" * 5000), row(index="1", memory_used=BIG)])
    reading = parse_query(text, 0.0)
    assert [g.index for g in reading.gpus] == [0, 1]
    assert reading.gpus[1].mem_used_mib is None and reading.gpus[1].mem_total_mib == 81559


# --- nvidia-smi --query-compute-apps ---------------------------------------------------------------


def test_compute_apps_bad_memory_is_none_and_named() -> None:
    got = read_compute_apps(f"51873, sglang::scheduler_TP0, {BIG}, {UUID}\n51874, x, 10, {UUID}\n")
    assert [(a.pid, a.mem_mib) for a in got.apps] == [(51873, None), (51874, 10)]
    assert [(b.column, b.why) for b in got.bad] == [("used_memory", "309 digits")]
    assert got.bad[0].message.startswith("unparsable value in column used_memory: ")
    assert COMPUTE_FIELDS[2] == "used_memory"


@pytest.mark.parametrize("pid", ["9" * 5000, BIG, "0", str(2**22 + 1)], ids=["5000-digits", "309-digits", "0", "2**22+1"])
def test_compute_apps_row_without_a_process_id_is_left_out_and_named(pid: str) -> None:
    # 5000 digits raised ValueError from int() (the 4300-digit limit) and killed the task.
    got = read_compute_apps(f"{pid}, python3, 10, {UUID}\n51874, x, 10, {UUID}\n")
    assert [a.pid for a in got.apps] == [51874]
    assert [b.column for b in got.bad] == ["pid"]
    assert parse_compute_apps(f"{pid}, python3, 10, {UUID}\n") == ()


# --- the watcher: the host keeps going ----------------------------------------------------------------


def watch(host: TestHost, rec: Recorder) -> HostWatcher:
    assert host.health is not None
    spec = HostSpec("gpu-node-1", host.unit, port=host.health.port, ssh=host.target)
    return HostWatcher(spec, host.runner(), WallClock(), rec, **FAST)


async def test_one_bad_gpu_row_degrades_the_gpu_cell_and_the_journal_keeps_coming(testhost: TestHost) -> None:
    # The measured failure: this row stopped every probe of the host for good.
    rec = Recorder()
    testhost.set_gpus_from_fixture()
    lines = (FIXTURES / "nvidia-smi" / "query-gpu.h100x8-sglang-tp8.loop.csv").read_text().splitlines()[:8]
    cells = lines[3].split(", ")
    cells[3] = BIG  # GPU 3's memory.used
    index_cells = lines[7].split(", ")
    index_cells[0] = "9" * 5000  # and a row whose index cannot be read: left out, named
    testhost.set_gpus([", ".join(index_cells)] + lines[:3] + [", ".join(cells)] + lines[4:])
    w = watch(testhost, rec)
    w.start()
    try:
        await until("the GPU cell fails", lambda: w.state().failure("gpu") is not None)
        f = w.state().failure("gpu")
        assert f is not None and f.kind == "unparsable"
        assert f.message.startswith("unparsable value in column memory.used of GPU 3: '1000000000")
        # The row without a usable index is named with the sample it came before (once the
        # number of GPUs is known, from the second sample on).
        await until("both bad rows named",
                    lambda: w.state().failure("gpu").message.endswith("(309 digits) (and 1 more)"))
        first_gpus = w.state().gpus
        assert first_gpus is not None and len(first_gpus.gpus) == 8
        assert first_gpus.gpus[3].mem_used_mib is None and first_gpus.gpus[4].mem_used_mib is not None
        # Journal lines keep arriving after the bad row, batch after batch.
        for n in range(3):
            lines_now = batch(f"after the bad row {n}", 5)
            testhost.append_log_lines(lines_now)
            await until(f"batch {n} of journal lines", lambda want=lines_now: texts(w)[-5:] == want)
        # ... and the other cells keep updating: new GPU samples (the bad value stays n/a) and
        # process lists, and the health probe.
        seen = w.state().gpus
        await until("a newer GPU sample", lambda: w.state().gpus is not None and w.state().gpus.time > seen.time)
        testhost.set_compute_apps([f"51873, sglang::scheduler_TP0, 73072, {UUID}"])
        await until("the process list", lambda: w.state().gpu_apps is not None and len(w.state().gpu_apps.apps) == 1)
        assert w.state().health is not None
        assert w.state().failure("gpu") is not None and w.state().failure("gpu").time == f.time
        assert w.crashes == {}
        assert not any(t.done() for t in w._tasks)
        # A good row again: the GPU cell is read whole.
        testhost.set_gpus_from_fixture()
        await until("the GPU cell recovers", lambda: w.state().failure("gpu") is None)
        assert w.state().gpus.gpus[3].mem_used_mib is not None
    finally:
        await w.stop()


async def test_a_probe_task_that_raises_is_named_restarted_and_the_others_keep_going(
        testhost: TestHost, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bug no input path catches (here: the process-list parser raising twice) is shown as what
    # it is, the task restarts with a doubling delay, and the journal never stops.
    rec = Recorder()
    real = gpu_apps_probe.read_compute_apps
    calls = {"n": 0}

    def broken(*args: object, **kw: object) -> object:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise OverflowError("cannot convert float infinity to integer")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(gpu_apps_probe, "read_compute_apps", broken)
    w = watch(testhost, rec)
    w.start()
    try:
        await until("the first crash", lambda: w.crashes.get("gpu_apps", 0) >= 1)
        f = w.state().failure("gpu_apps")
        assert f is not None and f.kind == "crashed"
        assert f.message == ("the gpu_apps probe crashed (OverflowError: cannot convert float infinity to "
                             "integer); restart 1 in 0.2 s")
        lines_now = batch("while crashed", 3)
        testhost.append_log_lines(lines_now)
        await until("journal lines while the process list crashes", lambda: texts(w)[-3:] == lines_now)
        await until("the restarted probe delivers",
                    lambda: w.state().gpu_apps is not None and w.state().failure("gpu_apps") is None, 15.0)
        assert w.crashes == {"gpu_apps": 2}
        assert rec.ever(lambda s: s.failure("gpu_apps") is not None
                        and s.failure("gpu_apps").message.endswith("restart 2 in 0.4 s"))
        assert not any(t.done() for t in w._tasks)
    finally:
        await w.stop()


async def test_supervision_backoff_is_capped_and_cancel_goes_through() -> None:
    # The delays double from retry_s up to retry_max_s; stop() cancels a task while it waits.
    class Clock:
        def __init__(self) -> None:
            self.t = 0.0
            self.sleeps: list[float] = []

        def now(self) -> float:
            return self.t

        async def sleep(self, seconds: float) -> None:
            self.sleeps.append(seconds)
            self.t += seconds
            await asyncio.sleep(0)

    class NoRunner:
        attempts = 0

        async def close(self) -> None:
            return None

    clock = Clock()
    w = HostWatcher(HostSpec("h", "u.service"), NoRunner(), clock, retry_s=1.0, retry_max_s=8.0)  # type: ignore[arg-type]

    async def bug() -> None:
        raise KeyError("gpu")

    task = asyncio.create_task(w._supervise("gpu", bug))
    while len(clock.sleeps) < 7:
        await asyncio.sleep(0)
    assert clock.sleeps[:7] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]
    f = w.state().failure("gpu")
    assert f is not None and f.kind == "crashed" and f.message.startswith("the gpu probe crashed (KeyError: 'gpu')")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert math.isfinite(f.time)


# --- systemctl show --------------------------------------------------------------------------------


SHOW = (FIXTURES / "systemctl-show" / "active-running.txt").read_text()


def show_with(name: str, value: str) -> str:
    lines = [f"{name}={value}" if line.startswith(f"{name}=") else line for line in SHOW.splitlines()]
    assert any(line.startswith(f"{name}=") for line in SHOW.splitlines())
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("name", "value", "why"), ids=lambda v: v[:16] if isinstance(v, str) else v, argvalues=[
    ("NRestarts", "-1", "out of range 0..4294967295"),
    ("NRestarts", "9" * 5000, "5000 digits"),    # int() raised ValueError past 4300 digits
    ("MainPID", BIG, "309 digits"),
    ("MainPID", str(2**22 + 1), "out of range 0..4194304"),
    ("ExecMainCode", "exited", "not an integer"),
    ("MemoryCurrent", "lots", "not an integer"),
    ("ExecMainStartTimestamp", "@" + "9" * 400, "400 digits"),   # int + 0.0 raised OverflowError
    ("ActiveEnterTimestamp", "yesterday", "not a timestamp"),
])
def test_a_bad_unit_property_is_none_and_named(name: str, value: str, why: str) -> None:
    got = unit_probe.read_show(show_with(name, value), 0.0)
    assert [(b.column, b.why) for b in got.bad] == [(name, why)]
    assert got.bad[0].message.startswith(f"unparsable value in column {name}: ")
    good = unit_probe.parse_show(SHOW, 0.0)
    field = {"NRestarts": "n_restarts", "MainPID": "main_pid", "ExecMainCode": "exec_main_code",
             "MemoryCurrent": "memory_bytes", "ExecMainStartTimestamp": "started_at",
             "ActiveEnterTimestamp": "active_since"}[name]
    assert getattr(got.state, field) is None
    assert getattr(good, field) is not None or name == "MemoryCurrent"  # [not set] in the fixture
    assert got.state.active_state == good.active_state and got.state.unit == good.unit


def test_unit_values_that_mean_no_value_are_not_unparsable() -> None:
    for name, value in (("MemoryCurrent", "[not set]"), ("MemoryCurrent", "infinity"), ("MainPID", "0"),
                        ("ExecMainStartTimestamp", ""), ("ActiveEnterTimestamp", "Tue 2024-03-05 14:03:11 CST")):
        assert unit_probe.read_show(show_with(name, value), 0.0).bad == (), (name, value)


def test_every_real_systemctl_show_fixture_reads_without_a_bad_value() -> None:
    for path in sorted((FIXTURES / "systemctl-show").glob("*.txt")):
        assert unit_probe.read_show(path.read_text(), 0.0).bad == (), path.name


async def test_a_bad_unit_property_degrades_the_unit_cell_and_the_journal_keeps_coming(
        testhost: TestHost, tmp_path: Path) -> None:
    rec = Recorder()
    bad = tmp_path / "show.txt"
    bad.write_text(show_with("NRestarts", "9" * 5000))
    testhost.set_systemctl_show(bad)
    w = watch(testhost, rec)
    w.start()
    try:
        await until("the unit cell fails", lambda: w.state().failure("unit") is not None)
        f = w.state().failure("unit")
        assert f is not None and f.kind == "unparsable"
        assert f.message.startswith("unparsable value in column NRestarts: '999")
        assert w.state().unit_state is not None and w.state().unit_state.active_state == "active"
        lines_now = batch("after the bad property", 5)
        testhost.append_log_lines(lines_now)
        await until("journal lines after the bad property", lambda: texts(w)[-5:] == lines_now)
        assert w.crashes == {} and not any(t.done() for t in w._tasks)
        testhost.set_systemctl_show("active-running.txt")
        await until("the unit cell recovers", lambda: w.state().failure("unit") is None)
    finally:
        await w.stop()
