"""The demo's four hosts read the way they are meant to, through the real parsers, on a ManualClock.

Each scenario's journal goes through ReplayRunner's ``journalctl -o json`` and then through
``probes.logs.journal_json.parse_record`` + ``StartupReader.feed`` exactly as ``probes/sources/logfile.py``
``_feed_journal`` does; the GPU, unit and health timelines are read through the runner's commands.
"""

from __future__ import annotations

import asyncio
import io
import json

import httpx
import pytest

from probes.clock import ManualClock
from probes.logs.journal_json import parse_record
from probes.sources.logfile import read_stream
from probes.data.reading import Reading
from probes.logs.reader import StartupReader
from probes.transport.replay.runner import ReplayRunner
from probes.transport.replay.scenario import Scenario
from tui import demo
from tui.demo import SCENARIO_FILES, demo_scenarios, read_scenario_file

T0 = 1_750_000_000.0
SMI = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,"
       "power.draw,power.limit", "--format=csv,noheader,nounits"]
SHOW = ["systemctl", "show", "-p", "Id,ActiveState,SubState,Result,NRestarts,MainPID,MemoryCurrent", "--no-pager"]


@pytest.fixture(scope="module")
def scenarios() -> dict[str, Scenario]:
    return {s.host: s for s in demo_scenarios(T0)}


def feed_journal(lines: list[bytes]) -> Reading:
    """``probes/sources/logfile.py`` ``_feed_journal``, line for line."""
    reader = StartupReader(None)
    for lineno, raw in enumerate(lines, 1):
        rec = parse_record(raw)
        for text in rec.texts:
            reader.feed(text, lineno, stamp=rec.stamp, ident=rec.ident, systemd=rec.systemd,
                        invocation=rec.invocation)
    return reader.reading()


async def journal_at(sc: Scenario, t: float, *flags: str) -> list[bytes]:
    clock = ManualClock(T0)
    r = ReplayRunner(sc, clock, start=T0)
    await clock.advance(t)
    return (await r.run(["journalctl", "-u", sc.unit, "-o", "json", "--no-pager", *flags])).stdout.splitlines()


async def final_reading(sc: Scenario) -> Reading:
    lines = await journal_at(sc, 3600, "-a")
    reading = feed_journal(lines)
    # Without -a (null MESSAGEs) and through the file reader, the verdict is the same.
    plain = await journal_at(sc, 3600)
    assert read_stream(io.BytesIO(b"\n".join(plain) + b"\n"), unit=sc.unit).state == reading.state
    return reading


def offset_of(sc: Scenario, needle: str) -> float:
    for e in sc.journal:
        if needle in parse_record(json.dumps(e.fields)).text:
            return e.offset_s
    raise AssertionError(f"{needle!r} not in {sc.host}'s journal")


# --- the four readings ------------------------------------------------------------------------------

def test_four_hosts(scenarios) -> None:
    assert [(s.host, s.unit, s.engine) for s in scenarios.values()] == [
        ("gpu-node-1", "sglang.service", "sglang"), ("gpu-node-2", "vllm.service", "vllm"),
        ("gpu-node-3", "sglang.service", "sglang"), ("gpu-node-4", "trtllm.service", "trtllm")]


async def test_a_sglang_reaches_ready(scenarios) -> None:
    reading = await final_reading(scenarios["gpu-node-1"])
    assert (reading.engine, reading.state, reading.phase) == ("sglang", "ready", "ready")
    assert reading.phases_seen == ["starting", "weights", "init", "graph_capture", "warmup", "ready"]


async def test_b_vllm_restart_loop_fails_with_cuda_oom(scenarios) -> None:
    reading = await final_reading(scenarios["gpu-node-2"])
    assert (reading.engine, reading.state) == ("vllm", "failed")
    assert reading.restart_loop and reading.cause == "cuda_oom" and reading.starts == 3
    assert reading.gave_up and reading.restart_counter == 3
    assert "CUDA out of memory" in reading.error.text


async def test_c_sglang_stalls_in_graph_capture(scenarios) -> None:
    reading = await final_reading(scenarios["gpu-node-3"])
    assert (reading.engine, reading.state, reading.phase) == ("sglang", "loading", "graph_capture")
    assert reading.progress is not None and (reading.progress.done, reading.progress.total) == (0, 34)
    assert reading.phases_seen[0] == "starting" and "weights" in reading.phases_seen


async def test_d_downloads_then_becomes_ready(scenarios) -> None:
    reading = await final_reading(scenarios["gpu-node-4"])
    assert (reading.state, reading.phase) == ("ready", "ready")
    assert "download" in reading.phases_seen
    assert reading.phases_seen.index("download") < reading.phases_seen.index("weights")


async def test_readings_while_playing(scenarios) -> None:
    a = scenarios["gpu-node-1"]
    assert feed_journal(await journal_at(a, 70, "-a")).phase == "weights"
    assert feed_journal(await journal_at(a, 110, "-a")).phase == "graph_capture"
    assert feed_journal(await journal_at(a, 150, "-a")).phase == "warmup"
    d = scenarios["gpu-node-4"]
    assert feed_journal(await journal_at(d, 10, "-a")).phase == "download"
    assert feed_journal(await journal_at(d, 80, "-a")).phase == "weights"


# --- timing: each plays out within a few simulated minutes -------------------------------------------

def test_durations(scenarios) -> None:
    a, b, c, d = scenarios.values()
    assert 120 <= offset_of(a, "fired up and ready to roll") <= 240
    assert 120 <= offset_of(b, "Failed to start vllm.service") <= 240
    assert 30 <= c.journal[-1].offset_s <= 120
    assert 120 <= offset_of(d, "Uvicorn running on") <= 240
    for sc in (a, b, c, d):
        assert max(e.offset_s for e in sc.journal) <= 300


# --- GPU, unit and health timelines -------------------------------------------------------------------

async def gpu_rows(sc: Scenario, times: list[float]) -> list[list[list[str]]]:
    clock = ManualClock(T0)
    r = ReplayRunner(sc, clock, start=T0)
    out = []
    for t in times:
        await clock.advance(t - (clock.now() - T0))
        rows = (await r.run(SMI)).stdout.decode().splitlines()
        out.append([row.split(", ") for row in rows])
    return out


async def test_a_gpu_memory_climbs_through_weight_load(scenarios) -> None:
    a = scenarios["gpu-node-1"]
    begin, end = offset_of(a, "Load weight begin"), offset_of(a, "Load weight end")
    times = [begin + k * 0.5 for k in range(int((end - begin) / 0.5) + 1)]
    samples = await gpu_rows(a, times)
    for gpu in range(4):
        mem = [int(s[gpu][3]) for s in samples]
        assert mem == sorted(mem), f"GPU {gpu} memory went down during weight load"
        assert mem[-1] - mem[0] > 15000  # ~15.5 GB of weights per rank
    before_kv, after_kv = await gpu_rows(a, [offset_of(a, "KV Cache is allocated") - 0.5,
                                             offset_of(a, "KV Cache is allocated") + 0.5])
    assert int(after_kv[0][3]) - int(before_kv[0][3]) > 40000  # the KV pool jump
    context, idle = await gpu_rows(a, [45.0, 600.0])
    assert 400 <= int(context[0][3]) <= 1100 and int(idle[0][5]) <= 5


async def test_a_health_goes_refused_then_503_then_200(scenarios) -> None:
    a = scenarios["gpu-node-1"]
    clock = ManualClock(T0)
    r = ReplayRunner(a, clock, start=T0)
    port = await r.forward(a.port)
    seen: list[tuple[float, str | int]] = []
    async with httpx.AsyncClient(transport=r.http_transport(), base_url=f"http://127.0.0.1:{port}") as client:
        for _ in range(200):
            try:
                status: str | int = (await client.get("/health")).status_code
            except httpx.ConnectError:
                status = "refused"
            if not seen or seen[-1][1] != status:
                seen.append((clock.now() - T0, status))
            await clock.advance(1)
    assert [s for _, s in seen] == ["refused", 503, 200]
    assert seen[1][0] >= offset_of(a, "Uvicorn running on") and seen[1][0] < offset_of(a, "Uvicorn running on") + 1
    assert seen[2][0] >= offset_of(a, "fired up and ready") and seen[2][0] < offset_of(a, "fired up and ready") + 1


async def test_b_unit_states_and_gpu_memory_through_the_loop(scenarios) -> None:
    b = scenarios["gpu-node-2"]
    clock = ManualClock(T0)
    r = ReplayRunner(b, clock, start=T0)
    states = []
    for _ in range(200):
        out = (await r.run(SHOW[:2] + [b.unit] + SHOW[2:])).stdout.decode()
        props = dict(line.split("=", 1) for line in out.splitlines())
        key = (props["ActiveState"], props["SubState"], props["NRestarts"])
        if not states or states[-1] != key:
            states.append(key)
        await clock.advance(1)
    assert states == [("active", "running", "0"), ("activating", "auto-restart", "0"),
                      ("active", "running", "1"), ("activating", "auto-restart", "1"),
                      ("active", "running", "2"), ("activating", "auto-restart", "2"), ("failed", "failed", "3")]
    assert props["Result"] == "exit-code" and props["MainPID"] == "0" and props["MemoryCurrent"] == "[not set]"
    crashes = [e.offset_s for e in b.journal if "Main process exited" in parse_record(json.dumps(e.fields)).text]
    assert len(crashes) == 3
    for t in crashes:
        before, after = await gpu_rows(b, [t - 3, t + 1])
        assert all(int(row[3]) > 15000 for row in before) and all(int(row[3]) <= 100 for row in after)
    for rows in await gpu_rows(b, [100.0, 130.0]):
        assert [row[2] for row in rows] == ["NVIDIA A10"] * 2 and all(row[4] == "23028" for row in rows)
    async with httpx.AsyncClient(transport=r.http_transport(), base_url=f"http://127.0.0.1:{b.port}") as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")


async def test_c_nothing_more_ever_and_gpus_stuck(scenarios) -> None:
    c = scenarios["gpu-node-3"]
    clock = ManualClock(T0)
    r = ReplayRunner(c, clock, start=T0)
    got: list[bytes] = []

    async def follow() -> None:
        async for line in r.stream(["journalctl", "-u", c.unit, "-o", "json", "-a", "-f", "-n", "all"]):
            got.append(line)

    task = asyncio.create_task(follow())
    await clock.advance(c.journal[-1].offset_s + 1)
    n = len(got)
    assert n == len(c.journal)
    await clock.advance(3 * 3600)
    assert len(got) == n
    task.cancel()
    props = dict(line.split("=", 1) for line in
                 (await r.run(SHOW[:2] + [c.unit] + SHOW[2:])).stdout.decode().splitlines())
    assert (props["ActiveState"], props["SubState"]) == ("active", "running")
    (rows,) = await gpu_rows(c, [3600.0])
    assert len(rows) == 8 and all(row[2] == "NVIDIA H200" for row in rows)
    assert all(int(row[3]) > 100000 for row in rows)
    utils = [int(row[5]) for row in rows]
    assert 100 in utils and 0 in utils
    async with httpx.AsyncClient(transport=r.http_transport(), base_url=f"http://127.0.0.1:{c.port}") as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")


async def test_d_gpu_memory_climbs_through_weight_loading(scenarios) -> None:
    d = scenarios["gpu-node-4"]
    early, mid, late = await gpu_rows(d, [40.0, 80.0, 200.0])
    assert early[0][2] == "NVIDIA H100 80GB HBM3" and early[0][4] == "81559"
    assert int(early[0][3]) < int(mid[0][3]) < int(late[0][3]) <= 81559


# --- the data -------------------------------------------------------------------------------------------

def test_journal_records_are_real_journalctl_json(scenarios) -> None:
    for sc in scenarios.values():
        cursors = [e.cursor for e in sc.journal]
        assert len(set(cursors)) == len(cursors)
        seqs = [int(c.split(";i=")[1].split(";")[0], 16) for c in cursors]
        assert seqs == sorted(seqs)
        offsets = [e.offset_s for e in sc.journal]
        assert offsets == sorted(offsets) and offsets[0] == 0.0
        for e in sc.journal:
            f = e.fields
            assert f["__REALTIME_TIMESTAMP"] == str(int(round((T0 + e.offset_s) * 1_000_000)))
            assert all(isinstance(v, str) for k, v in f.items() if k != "MESSAGE")
            msg = f["MESSAGE"]
            text = bytes(msg).decode("utf-8", "replace") if isinstance(msg, list) else msg
            if "\r" in text or "\x1b" in text:
                assert isinstance(msg, list), f"{sc.host}: a control character in a string MESSAGE"
            assert f["_PID"] and f["SYSLOG_IDENTIFIER"] and f["PRIORITY"] and f["_TRANSPORT"]
            if f["_PID"] == "1":
                assert f["UNIT"] == sc.unit and f["INVOCATION_ID"] and f["_SYSTEMD_UNIT"] == "init.scope"
            else:
                assert f["_SYSTEMD_UNIT"] == sc.unit and f["_SYSTEMD_INVOCATION_ID"]


def test_the_traps_of_the_sglang_fixture_are_kept(scenarios) -> None:
    texts = [parse_record(json.dumps(e.fields)).text for e in scenarios["gpu-node-1"].journal]
    assert any("\x1b[1;33mWARNING" in t for t in texts)
    assert any("\ufffd" in t for t in texts)
    assert any(len(t) > 4900 for t in texts)
    assert any("[bold]x[/]" in t for t in texts)


def test_scenario_files_ship_with_the_package() -> None:
    for name in SCENARIO_FILES:
        assert read_scenario_file(name)
    readme = (demo.resources.files("tui") / "scenarios" / "README.md").read_text()
    for name in SCENARIO_FILES:
        assert name in readme


def test_deterministic() -> None:
    assert demo_scenarios(T0) == demo_scenarios(T0)
    assert demo_scenarios(T0 + 60)[0].journal[0].fields["__REALTIME_TIMESTAMP"] == str(int((T0 + 60) * 1_000_000))
