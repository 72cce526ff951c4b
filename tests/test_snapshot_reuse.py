"""What a snapshot re-uses between builds (issue 17, the dashboard's own cost): the reader's reading
is made once per line read, the GPU history once per GPU reading, and the start history's look
takes no snapshot while neither the log nor the unit moved. Real journal records, a real reader,
a real SQLite history; each test counts what was made, and checks the snapshots are the same as
ones built with nothing re-used."""

from __future__ import annotations

from pathlib import Path

from canned_runner import CannedRunner
from conftest import JOURNAL
from probes.clock import ManualClock
from probes.data.events import GpuReading, GpuSample, Health, UnitState
from probes.fold.model import HostModel
from probes.logs.journal_json import parse_record
from probes.spec import HostSpec
from probes.store.history import History
from probes.watch.watcher import HostWatcher

T0 = 1741437200.0


def _records() -> list[object]:
    return [parse_record(raw) for raw in (JOURNAL / "sglang-startup.jsonl").read_bytes().splitlines()]


def _gpu(t: float, used: int) -> GpuReading:
    return GpuReading(t, tuple(GpuSample(i, f"GPU-{i}", "NVIDIA H100 80GB HBM3", used + i, 81559, 40 + i)
                               for i in range(8)))


def _unit(t: float, active: str = "active", sub: str = "running") -> UnitState:
    return UnitState(time=t, unit="sglang.service", load_state="loaded", active_state=active, sub_state=sub,
                     main_pid=3207)


def _events() -> list[object]:
    """The journal, then looks that are not the log (GPU, health, unit), a line, the unit gone."""
    looks: list[object] = [_gpu(T0 + i, 1000 * i) for i in range(5)]
    looks[2:2] = [_unit(T0 + 2), Health(T0 + 2.5, "serving", 200)]
    return [*_records()[:-1], *looks, _records()[-1], _gpu(T0 + 6, 9000), _unit(T0 + 7, "inactive", "dead"),
            _gpu(T0 + 8, 0)]


def test_the_reading_is_made_once_per_line_read_and_the_snapshots_are_the_same() -> None:
    events = _events()
    m = HostModel("gpu-node-1", "sglang.service")
    readings = 0
    real = m.reader.reading

    def counted(ended: bool = False):  # type: ignore[no-untyped-def]
        nonlocal readings
        readings += 1
        return real(ended)

    m.reader.reading = counted  # type: ignore[method-assign]
    records = sum(1 for e in events if not isinstance(e, (GpuReading, UnitState, Health)))
    for i, e in enumerate(events):
        m.apply(e)
        got = m.state(T0 + 10)
        # The same snapshot as a model fed the same events and built once, with nothing re-used.
        fresh = HostModel("gpu-node-1", "sglang.service")
        fresh.apply_all(events[:i + 1])
        assert got == fresh.state(T0 + 10), f"after event {i}"
    # One reading per record read, and one more when the unit stopped (the start read as ended);
    # none for the 7 GPU, unit and health looks in between.
    assert readings == records + 1
    assert m.state(T0 + 10).state == "stopped"


def test_the_gpu_history_is_made_once_per_gpu_reading() -> None:
    m = HostModel("gpu-node-1", "sglang.service")
    m.apply_all(_records())
    m.apply(_gpu(T0, 1000))
    first = m.state(T0 + 1)
    m.apply(_unit(T0 + 1))  # a new snapshot, the same GPU history
    second = m.state(T0 + 2)
    assert second is not first and second.gpu_history is first.gpu_history
    m.apply(_gpu(T0 + 2, 2000))
    third = m.state(T0 + 3)
    assert third.gpu_history is not first.gpu_history
    assert [len(h) for h in third.gpu_history] == [2] * 8 and third.gpu_history[3][1] == (2003 / 81559, 43)


async def test_the_history_look_takes_no_snapshot_while_the_log_and_the_unit_stand(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    h = History(tmp_path / "history.sqlite3")
    w = HostWatcher(HostSpec("gpu-node-1", "sglang.service", 30000, "sglang"), CannedRunner(), clock,
                    history=h)  # not started: this test alone feeds the model
    records = _records()
    ready = next(i for i, r in enumerate(records) if "ready to roll" in r.text)  # type: ignore[attr-defined]
    w.model.apply_all(records[:ready])
    w.model.apply(_unit(T0))
    await w.sync_history()
    assert w.history_looks == 1
    for i in range(5):  # GPU and health looks change the snapshot, not what the history reads
        w.model.apply(_gpu(T0 + i, 1000 * i))
        w.model.apply(Health(T0 + i, "serving", 200))
        await w.sync_history()
    assert w.history_looks == 1 and h.starts() == []
    w.model.apply(records[ready])  # the ready line: the look runs and writes the start
    await w.sync_history()
    await w.sync_history()
    assert w.history_looks == 2 and [r.outcome for r in h.starts()] == ["ready"]
    w.model.apply(_unit(T0 + 9))  # a new unit look: one more look, nothing written twice
    await w.sync_history()
    assert w.history_looks == 3 and [r.outcome for r in h.starts()] == ["ready"]
