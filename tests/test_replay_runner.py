"""ReplayRunner answers upwatch's commands from a scenario, on a ManualClock (no real sleeps).

The expected formats are the real ones: ``tests/fixtures/systemctl-show/*.txt`` (systemd 252) and
``tests/fixtures/nvidia-smi/query-gpu.h100x8-sglang-tp8.loop.csv`` (the nvidia-smi loop format).
"""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest

from conftest import FIXTURES
from probes.clock import ManualClock
from probes.logs.journal_json import parse_record
from probes.transport.replay.runner import ReplayRunner
from probes.transport.replay.scenario import (Gpu, GpuFrame, HealthFrame, Scenario, UnitFrame, journal_value,
                                              stamp_journal)
from probes.transport.runner import ProbeError

T0 = 1_741_436_938.5
SEQ = "1f93c69c8de94b7986775fefdb6b47a4"
SHOW = FIXTURES / "systemctl-show"
LOOP = FIXTURES / "nvidia-smi" / "query-gpu.h100x8-sglang-tp8.loop.csv"
QUERY = "index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit"
SMI = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]
#: One row of the loop fixture: the nine fields in query order, ", " between them.
ROW_RE = re.compile(r"^\d+, GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, [^,]+, \d+, \d+, \d+, "
                    r"\d+, \d+\.\d\d, \d+\.\d\d$")
SHOW_P = ("Id,LoadState,ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStartTimestamp,"
          "ExecMainStartTimestampMonotonic,ExecMainCode,ExecMainStatus,ActiveEnterTimestamp,InactiveExitTimestamp,"
          "StateChangeTimestamp,Restart,RestartUSec,StartLimitBurst,StartLimitIntervalUSec,MemoryCurrent,ControlGroup")


def _rec(text: str | bytes, pid: str = "3207", unit: str = "x.service") -> dict:
    return {"_PID": pid, "_SYSTEMD_UNIT": unit, "_SYSTEMD_INVOCATION_ID": "c" * 32, "SYSLOG_IDENTIFIER": "python3",
            "PRIORITY": "6", "_TRANSPORT": "stdout", "_BOOT_ID": "b" * 32, "MESSAGE": journal_value(text)}


def _pid1(text: str, unit: str = "x.service") -> dict:
    return {"_PID": "1", "_SYSTEMD_UNIT": "init.scope", "UNIT": unit, "INVOCATION_ID": "c" * 32,
            "SYSLOG_IDENTIFIER": "systemd", "PRIORITY": "6", "_TRANSPORT": "journal", "_BOOT_ID": "b" * 32,
            "MESSAGE": text}


def scenario(start: float = T0, outages: tuple = ((20.0, 30.0),)) -> Scenario:
    """A small host: 7 records of x.service (one by PID 1), one of another unit, 2 GPUs."""
    recs = [
        (0.0, _pid1("Started x.service - X.")),
        (1.0, _rec("first line")),
        (2.0, _rec("\x1b[1;33mWARNING\x1b[0m coloured")),
        (2.0, _rec("other unit", unit="y.service")),
        (5.0, _rec("\rLoading 1/2 [00:01<00:01, 1.0it/s]")),
        (10.0, _rec("a" * 5000)),
        (25.0, _rec("written during the outage")),
        (40.0, _rec("after the outage")),
    ]
    gpus = tuple(Gpu(i, f"GPU-00000000-0000-0000-0000-0000000000a{i}", "NVIDIA H100 80GB HBM3", 81559, 700.0,
                     69.85, 631.95, 33, 59) for i in range(2))
    return Scenario(
        host="h1", unit="x.service", engine="sglang", port=30000, model="m", start=start, gpus=gpus,
        journal=stamp_journal(recs, start, seqnum_id=SEQ, monotonic_start_us=17_266_167_096),
        unit_timeline=(UnitFrame(-60.0, {"Restart": "on-failure", "RestartUSec": "10s"}),
                       UnitFrame(0.0, {"ActiveState": "active", "SubState": "running", "MainPID": 3207,
                                       "ExecMainStartTimestamp": 0.0, "ExecMainStartTimestampMonotonic": 0.0,
                                       "ActiveEnterTimestamp": 0.0, "InactiveExitTimestamp": 0.0,
                                       "StateChangeTimestamp": 0.0, "ControlGroup": "/system.slice/x.service",
                                       "MemoryCurrent": 71834742784})),
        gpu_timeline=(GpuFrame(0.0, (0, 0), (0, 0)), GpuFrame(10.0, (1000, 2000), (100, 50))),
        health=(HealthFrame(3.0, 503), HealthFrame(6.0, 200)),
        outages=outages, seqnum_id=SEQ, monotonic_start_us=17_266_167_096)


def texts(lines: list[bytes]) -> list[str]:
    return [parse_record(line).text for line in lines]


async def collect(runner: ReplayRunner, argv: list[str], into: list) -> None:
    async for line in runner.stream(argv):
        into.append(line)


# --- journalctl ---------------------------------------------------------------------------------

async def test_backlog_then_each_record_when_its_time_comes() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(2.5)
    got: list[bytes] = []
    argv = ["journalctl", "-u", "x.service", "-o", "json", "-a", "-f", "-n", "all"]
    task = asyncio.create_task(collect(r, argv, got))
    await clock.settle()
    assert texts(got) == ["Started x.service - X.", "first line", "\x1b[1;33mWARNING\x1b[0m coloured"]
    await clock.advance(2.4)  # t = 4.9
    assert len(got) == 3
    await clock.advance(0.1)  # t = 5.0
    assert texts(got)[3].startswith("\rLoading 1/2")
    await clock.advance(5.0)
    assert len(got) == 5 and parse_record(got[4]).text == "a" * 5000
    rec = json.loads(got[4])
    assert rec["__REALTIME_TIMESTAMP"] == str(int((T0 + 10.0) * 1_000_000))
    await r.close()
    await asyncio.wait_for(task, 1)  # close() ends the stream without an error


async def test_without_follow_the_stream_ends_after_the_backlog() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(6)
    got: list[bytes] = []
    await asyncio.wait_for(collect(r, ["journalctl", "-u", "x", "-o", "json", "--no-pager"], got), 1)
    assert len(got) == 4
    done = await r.run(["journalctl", "-u", "x.service", "-o", "json"])
    assert done.returncode == 0 and done.stdout.endswith(b"\n")
    assert done.stdout.splitlines() == got


async def test_n_keeps_the_last_records_and_follow_defaults_to_10() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(6)
    two = (await r.run(["journalctl", "-u", "x.service", "-o", "json", "-n", "2"])).stdout.splitlines()
    assert texts(two)[0].startswith("\x1b[1;33m") and texts(two)[1].startswith("\rLoading")
    assert (await r.run(["journalctl", "-u", "x.service", "-o", "json", "--lines=1"])).stdout.count(b"\n") == 1
    got: list[bytes] = []
    task = asyncio.create_task(collect(r, ["journalctl", "-u", "x.service", "-o", "json", "-n", "0", "-f"], got))
    await clock.advance(5)
    assert json.loads(got[0])["MESSAGE"] is None and len(got) == 1  # 5000 bytes, no -a: null
    task.cancel()
    got2: list[bytes] = []
    task2 = asyncio.create_task(collect(r, ["journalctl", "-u", "x.service", "-o", "json", "-f"], got2))
    await clock.settle()
    assert len(got2) == 5  # fewer than journalctl's default 10 exist
    task2.cancel()


async def test_unit_match_includes_pid1_records_about_the_unit_only() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(3)
    x = texts((await r.run(["journalctl", "-u", "x.service", "-o", "json"])).stdout.splitlines())
    assert "Started x.service - X." in x and "other unit" not in x
    y = texts((await r.run(["journalctl", "-u", "y", "-o", "json"])).stdout.splitlines())
    assert y == ["other unit"]
    everything = (await r.run(["journalctl", "-o", "json"])).stdout.splitlines()
    assert len(everything) == 4


async def test_records_have_the_real_json_shapes() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(11)
    plain = [json.loads(x) for x in (await r.run(["journalctl", "-u", "x", "-o", "json"])).stdout.splitlines()]
    full = [json.loads(x) for x in (await r.run(["journalctl", "-u", "x", "-o", "json", "-a"])).stdout.splitlines()]
    assert isinstance(plain[2]["MESSAGE"], list) and 27 in plain[2]["MESSAGE"]   # ESC: byte array
    assert isinstance(plain[3]["MESSAGE"], list) and plain[3]["MESSAGE"][0] == 13  # \r: byte array
    assert plain[4]["MESSAGE"] is None and full[4]["MESSAGE"] == "a" * 5000      # 4096+: null without -a
    cursor_re = re.compile(r"^s=[0-9a-f]{32};i=([0-9a-f]+);b=[0-9a-f]{32};m=[0-9a-f]+;t=[0-9a-f]+;x=[0-9a-f]{16}$")
    seqs = [int(cursor_re.match(rec["__CURSOR"]).group(1), 16) for rec in full]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for rec in full:
        assert all(isinstance(v, str) for k, v in rec.items() if k != "MESSAGE")
    line = (await r.run(["journalctl", "-u", "x", "-o", "json"])).stdout.splitlines()[0]
    parsed = parse_record(line)
    assert parsed.systemd and parsed.unit == "x.service" and parsed.realtime_us == int(T0 * 1_000_000)
    cat = (await r.run(["journalctl", "-u", "x", "-o", "cat"])).stdout.splitlines()
    assert cat[1] == b"first line"
    few = json.loads((await r.run(["journalctl", "-u", "x", "-o", "json", "--output-fields=MESSAGE"])).stdout
                     .splitlines()[1])
    assert set(few) == {"MESSAGE", "__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID"}


async def test_after_cursor_resumes_with_no_loss_and_no_duplicate() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(outages=()), clock)
    await clock.advance(3)
    first: list[bytes] = []
    task = asyncio.create_task(collect(r, ["journalctl", "-u", "x.service", "-o", "json", "-f", "-n", "all"], first))
    await clock.advance(3)
    task.cancel()  # the connection drops after 4 records
    last = json.loads(first[-1])["__CURSOR"]
    await clock.advance(50)  # records at 10, 25, 40 are written meanwhile
    second: list[bytes] = []
    task = asyncio.create_task(collect(r, ["journalctl", "-u", "x.service", "-o", "json", "-f",
                                           "--after-cursor", last], second))
    await clock.settle()
    task.cancel()
    both = [json.loads(x)["__CURSOR"] for x in first + second]
    everything = [json.loads(x)["__CURSOR"] for x in
                  (await r.run(["journalctl", "-u", "x.service", "-o", "json"])).stdout.splitlines()]
    assert both == everything and len(set(both)) == len(both) == 7
    # --after-cursor=C (one argument) and --cursor (inclusive)
    tail = (await r.run(["journalctl", "-u", "x.service", "-o", "json", f"--after-cursor={last}"])).stdout
    assert tail.splitlines() == second
    incl = (await r.run(["journalctl", "-u", "x.service", "-o", "json", f"--cursor={last}"])).stdout.splitlines()
    assert json.loads(incl[0])["__CURSOR"] == last and incl[1:] == second


async def test_a_malformed_cursor_fails_like_journalctl() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    done = await r.run(["journalctl", "-u", "x", "-o", "json", "--after-cursor", "nonsense"])
    assert done.returncode == 1 and b"Failed to seek to cursor" in done.stderr
    with pytest.raises(ProbeError) as err:
        async for _ in r.stream(["journalctl", "-u", "x", "-o", "json", "-f", "--after-cursor=nonsense"]):
            pass
    assert err.value.kind == "command"


async def test_show_cursor_appends_the_non_json_line() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(2)
    out = (await r.run(["journalctl", "-u", "x", "-o", "json", "--show-cursor"])).stdout.splitlines()
    assert out[-1] == b"-- cursor: " + json.loads(out[-2])["__CURSOR"].encode()


# --- outages ------------------------------------------------------------------------------------

async def test_outage_ends_open_streams_and_refuses_calls_then_resume_loses_nothing() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    got: list[bytes] = []
    errors: list[ProbeError] = []

    async def follow(argv: list[str]) -> None:
        try:
            await collect(r, argv, got)
        except ProbeError as exc:
            errors.append(exc)

    task = asyncio.create_task(follow(["journalctl", "-u", "x.service", "-o", "json", "-f", "-n", "all"]))
    gpu_lines: list[bytes] = []
    gpu_errors: list[ProbeError] = []

    async def gpu() -> None:
        try:
            await collect(r, SMI + ["-lms", "1000"], gpu_lines)
        except ProbeError as exc:
            gpu_errors.append(exc)

    gtask = asyncio.create_task(gpu())
    await clock.advance(20)
    await asyncio.wait_for(task, 1)
    await asyncio.wait_for(gtask, 1)
    assert [e.kind for e in errors] == ["closed"] and [e.kind for e in gpu_errors] == ["closed"]
    assert len(got) == 5 and len(gpu_lines) == 2 * 20  # samples at 0..19 s
    for call in (r.run(["systemctl", "show", "x.service"]), r.run(SMI), r.forward(30000)):
        with pytest.raises(ProbeError) as err:
            await call
        assert err.value.kind == "unreachable"
    with pytest.raises(ProbeError) as err:
        async for _ in r.stream(["journalctl", "-u", "x.service", "-o", "json", "-f"]):
            pass
    assert err.value.kind == "unreachable"
    async with httpx.AsyncClient(transport=r.http_transport(), base_url="http://127.0.0.1:30000") as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")
    await clock.advance(15)  # t = 35: reachable again
    done = await r.run(["journalctl", "-u", "x.service", "-o", "json",
                        "--after-cursor", json.loads(got[-1])["__CURSOR"]])
    assert texts(done.stdout.splitlines()) == ["written during the outage"]


async def test_unknown_commands() -> None:
    r = ReplayRunner(scenario(), ManualClock(T0))
    done = await r.run(["vllm", "serve"])
    assert done.returncode == 127 and done.stderr == b"sh: 1: vllm: not found"
    with pytest.raises(ProbeError) as err:
        async for _ in r.stream(["tail", "-f", "/var/log/x"]):
            pass
    assert err.value.kind == "command"
    with pytest.raises(ProbeError):
        await r.run(["journalctl", "-u", "x", "-o", "json", "-f"])  # never ends: only stream() may


async def test_close_ends_streams_quietly_and_refuses_later_calls() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    got: list[bytes] = []
    task = asyncio.create_task(collect(r, SMI + ["-l", "1"], got))
    await clock.advance(2)
    assert len(got) == 6
    await r.close()
    await asyncio.wait_for(task, 1)
    with pytest.raises(ProbeError) as err:
        await r.run(SMI)
    assert err.value.kind == "closed"


# --- systemctl show -----------------------------------------------------------------------------

def _keys(text: str) -> list[str]:
    return [line.split("=", 1)[0] for line in text.splitlines()]


@pytest.mark.parametrize("real", sorted(SHOW.glob("*.txt")), ids=lambda p: p.stem)
def test_show_prints_properties_in_the_real_files_order(real) -> None:
    async def go() -> str:
        r = ReplayRunner(scenario(), ManualClock(T0))
        return (await r.run(["systemctl", "show", "x.service", "-p", SHOW_P, "--no-pager"])).stdout.decode()
    assert _keys(asyncio.run(go())) == _keys(real.read_text())


async def test_show_is_byte_exact_for_a_never_started_unit_and_a_missing_one() -> None:
    sc = scenario()
    old = Scenario(**{**sc.__dict__, "unit": "sglang-old.service", "unit_timeline": ()})
    r = ReplayRunner(old, ManualClock(T0))
    done = await r.run(["systemctl", "show", "sglang-old.service", "-p", SHOW_P, "--no-pager"])
    assert done.returncode == 0 and done.stdout == (SHOW / "inactive-dead-never-started.txt").read_bytes()
    missing = await r.run(["systemctl", "show", "nosuch.service", "-p", SHOW_P, "--no-pager"])
    assert missing.returncode == 0 and missing.stdout == (SHOW / "not-found.txt").read_bytes()


async def test_show_values_follow_the_unit_timeline() -> None:
    clock = ManualClock(T0 - 5)
    r = ReplayRunner(scenario(), clock, start=T0)
    before = dict(line.split("=", 1) for line in
                  (await r.run(["systemctl", "show", "x.service", "-p", SHOW_P, "--no-pager"])).stdout.decode()
                  .splitlines())
    assert before["ActiveState"] == "inactive" and before["ExecMainStartTimestamp"] == ""
    assert before["ExecMainStartTimestampMonotonic"] == "0" and before["MemoryCurrent"] == "[not set]"
    assert before["RestartUSec"] == "10s"
    await clock.advance(10)
    out = (await r.run(["systemctl", "show", "x.service", "-p", "MainPID,ActiveState,ExecMainStartTimestamp",
                        "-p", "ExecMainStartTimestampMonotonic,MemoryCurrent,NoSuchProperty", "--no-pager"])).stdout
    assert out.decode() == ("MainPID=3207\nExecMainStartTimestamp=Sat 2025-03-08 12:28:58 UTC\n"
                            "ExecMainStartTimestampMonotonic=17266167096\nMemoryCurrent=71834742784\n"
                            "ActiveState=active\n")
    value = await r.run(["systemctl", "show", "x.service", "-p", "SubState", "--value"])
    assert value.stdout == b"running\n"
    active = await r.run(["systemctl", "is-active", "x.service"])
    assert (active.returncode, active.stdout) == (0, b"active\n")


# --- nvidia-smi ---------------------------------------------------------------------------------

def test_the_row_pattern_is_the_fixture_format() -> None:
    rows = LOOP.read_text().splitlines()
    assert len(rows) == 24 * 8 and all(ROW_RE.match(row) for row in rows)


async def test_nvidia_smi_rows_match_the_real_format_and_interpolate() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(), clock)
    await clock.advance(5)
    done = await r.run(SMI)
    rows = done.stdout.decode().splitlines()
    assert done.stdout.endswith(b"\n") and len(rows) == 2 and all(ROW_RE.match(row) for row in rows)
    assert rows[0] == ("0, GPU-00000000-0000-0000-0000-0000000000a0, NVIDIA H100 80GB HBM3, 500, 81559, 50, 46, "
                       "350.90, 700.00")
    assert rows[1].split(", ")[3:6] == ["1000", "81559", "25"]
    picked = (await r.run(["nvidia-smi", "--query-gpu=memory.used,index,gpu_name", "--format=csv,noheader,nounits",
                           "-i", "1"])).stdout
    assert picked == b"1000, 1, NVIDIA H100 80GB HBM3\n"
    units = (await r.run(["nvidia-smi", "--query-gpu=index,memory.used,utilization.gpu,power.draw",
                          "--format=csv"])).stdout.decode().splitlines()
    assert units[0] == "index, memory.used [MiB], utilization.gpu [%], power.draw [W]"
    assert units[1] == "0, 500 MiB, 50 %, 350.90 W"
    bad = await r.run(["nvidia-smi", "--query-gpu=index,bogus", "--format=csv,noheader,nounits"])
    assert bad.returncode == 2 and bad.stdout == b'Field "bogus" is not a valid field to query.\n'


async def test_nvidia_smi_loop_yields_every_gpu_every_interval() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(outages=()), clock)
    got: list[bytes] = []
    task = asyncio.create_task(collect(r, SMI + ["-lms", "500"], got))
    await clock.settle()
    assert len(got) == 2
    await clock.advance(10)
    assert len(got) == 2 * 21
    mem0 = [int(line.decode().split(", ")[3]) for line in got[0::2]]
    assert mem0 == sorted(mem0) and mem0[0] == 0 and mem0[-1] == 1000
    assert all(ROW_RE.match(line.decode()) for line in got)
    task.cancel()
    got5: list[bytes] = []
    task = asyncio.create_task(collect(r, SMI + ["-l"], got5))  # -l alone: every 5 s
    await clock.advance(10)
    assert len(got5) == 2 * 3
    task.cancel()


# --- HTTP ---------------------------------------------------------------------------------------

async def test_http_refused_then_503_then_200_and_the_serving_answers() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(scenario(outages=()), clock)
    port = await r.forward(30000)
    assert port != 30000 and await r.forward(30000) == port
    async with httpx.AsyncClient(transport=r.http_transport(), base_url=f"http://127.0.0.1:{port}") as client:
        with pytest.raises(httpx.ConnectError, match="Connection refused"):
            await client.get("/health")
        await clock.advance(3)
        health = await client.get("/health")
        assert (health.status_code, health.content) == (503, b"")
        models = await client.get("/v1/models")
        assert models.status_code == 200
        card = models.json()["data"][0]
        assert models.json()["object"] == "list" and card["owned_by"] == "sglang" and card["id"] == "m"
        assert (await client.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 1})
                ).status_code == 503
        await clock.advance(3)
        assert (await client.get("/health")).status_code == 200
        comp = await client.post("/v1/completions", json={"model": "m", "prompt": "The capital of France is",
                                                          "max_tokens": 1})
        body = comp.json()
        assert comp.status_code == 200 and body["object"] == "text_completion"
        assert body["usage"]["completion_tokens"] == 1 and len(body["choices"]) == 1
        assert (await client.get("/metrics")).status_code == 404
    async with httpx.AsyncClient(transport=r.http_transport(), base_url="http://127.0.0.1:1") as other:
        with pytest.raises(httpx.ConnectError):
            await other.get("/health")  # a port that was never forwarded


async def test_vllm_models_card_and_rebased_timestamps() -> None:
    sc = scenario(outages=())
    vllm = Scenario(**{**sc.__dict__, "engine": "vllm"})
    clock = ManualClock(T0 + 1000)
    r = ReplayRunner(vllm, clock)  # offset 0 = now: the journal moves with it
    await clock.advance(7)
    async with httpx.AsyncClient(transport=r.http_transport(), base_url="http://127.0.0.1:30000") as client:
        card = (await client.get("/v1/models")).json()["data"][0]
    assert card["owned_by"] == "vllm" and "permission" in card
    first = json.loads((await r.run(["journalctl", "-u", "x", "-o", "json"])).stdout.splitlines()[0])
    assert first["__REALTIME_TIMESTAMP"] == str(int((T0 + 1000) * 1_000_000))
