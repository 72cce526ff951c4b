"""The GPU sources alone on a ManualClock: the ``nvidia-smi -lms`` stream (rows captured on an
8×H100 host) and the process list with its cgroup orphan check."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path


from canned_runner import CannedRunner, Stream
from probes.clock import ManualClock
from probes.fold.model import HostModel
from probes.sources.context import SourceContext
from probes.sources.gpu import GpuSource, parse_query_line, query_argv
from probes.sources.gpu_errors import MSG_MISMATCH
from probes.sources.gpu_apps import CGROUP_PIDS_SCRIPT, GpuAppsSource, compute_apps_argv
from probes.sources.unit import read_show
from probes.spec import HostSpec
from probes.transport.runner import ProbeError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOOP_ROWS = (FIXTURES / "nvidia-smi" / "query-gpu.h100x8-sglang-tp8.loop.csv").read_bytes().splitlines()
APPS = (FIXTURES / "nvidia-smi" / "compute-apps.sglang-tp8.csv").read_bytes()
T0 = 1_764_460_800.0
SMI_LOOP = query_argv(loop_ms=1000)


def context() -> tuple[SourceContext, CannedRunner, ManualClock, HostModel]:
    clock, runner = ManualClock(T0), CannedRunner()
    spec = HostSpec("gpu-node-1", "sglang.service", ssh="gpu-node-1")
    model = HostModel(spec.name, spec.unit)
    return SourceContext(spec, runner, clock, model), runner, clock, model


async def test_stream_rows_become_samples_and_a_stream_that_ends_fails_until_one_delivers(running) -> None:
    ctx, runner, clock, model = context()
    runner.answer_stream(SMI_LOOP, Stream(LOOP_ROWS[:16]))  # two samples of 8 GPUs, then it ends
    source = GpuSource(ctx)
    running.append(asyncio.create_task(source.run()))
    await clock.settle()
    s = model.state(clock.now())
    assert s.gpus is not None and [g.index for g in s.gpus.gpus] == list(range(8))
    assert source.gpu_count == 8
    assert ctx.signals.uuid_index["GPU-00000000-0000-0000-0000-0000000000a7"] == 7
    f = s.failure("gpu")
    assert f is not None and (f.kind, f.message) == ("command", "nvidia-smi ended")
    runner.answer_stream(SMI_LOOP, Stream(LOOP_ROWS[16:24], hold=True))
    await clock.advance(1.9)
    assert len(runner.streams_opened) == 1  # retried after retry_s (2 s)
    await clock.advance(0.1)
    assert len(runner.streams_opened) == 2
    assert model.state(clock.now()).failure("gpu") is None


async def test_a_stream_with_no_row_says_what_nvidia_smi_says_and_backs_off(running) -> None:
    ctx, runner, clock, model = context()
    runner.answer_stream(SMI_LOOP, Stream([]))
    runner.answer(query_argv(), (FIXTURES / "nvidia-smi" / "error.driver-library-mismatch.txt").read_bytes(),
                  returncode=18)
    running.append(asyncio.create_task(GpuSource(ctx).run()))
    await clock.settle()
    f = model.state(clock.now()).failure("gpu")
    assert f is not None and f.kind == "command" and f.message.startswith(MSG_MISMATCH)
    await clock.advance(2 + 4)
    assert len(runner.streams_opened) == 3  # 2 s, then 4 s


async def test_a_slow_nvidia_smi_is_a_command_failure_not_a_lost_link(running) -> None:
    ctx, runner, clock, model = context()
    runner.answer_stream(SMI_LOOP, Stream([], then=ProbeError("timeout", "nvidia-smi timed out")))
    running.append(asyncio.create_task(GpuSource(ctx).run()))
    await clock.settle()
    f = model.state(clock.now()).failure("gpu")
    assert f is not None and (f.kind, f.message) == ("command", "nvidia-smi timed out")
    assert not model.unreachable()


async def test_the_process_list_names_gpus_and_orphans_and_recovers_from_a_failure(running) -> None:
    ctx, runner, clock, model = context()
    source = GpuSource(ctx)
    source.deliver([parse_query_line(r.decode()) for r in LOOP_ROWS[:8]])  # a GPU reading: something to attribute
    unit = read_show((FIXTURES / "systemctl-show" / "active-running.txt").read_text(), T0).state
    ctx.emit(replace(unit, control_group="/system.slice/sglang.service"))
    runner.answer(compute_apps_argv(), APPS)
    # The unit's cgroup holds the eight schedulers; the ninth holder (nvidia-smi: "[Not Found]",
    # as in the capture) is outside, and ps knows its command line.
    inside = b"\n".join(str(p).encode() for p in range(51873, 51881))
    runner.answer(["sh", "-c", CGROUP_PIDS_SCRIPT, "sh", "/system.slice/sglang.service"], inside)
    runner.answer(["ps", "-o", "pid=,args=", "-p", "50112"], b"  50112 python3 stray.py\n")
    running.append(asyncio.create_task(GpuAppsSource(ctx).run()))
    await clock.settle()
    s = model.state(clock.now())
    assert s.gpu_apps is not None
    assert [a.gpu_index for a in s.gpu_apps.apps] == [*range(8), 7]  # named by the sample's uuids
    assert s.gpu_orphans is not None
    assert [(o.pid, o.command, o.mem_mib, o.gpu_index) for o in s.gpu_orphans] == [
        (50112, "python3 stray.py", 1536, 7)]
    runner.answer(compute_apps_argv(), (FIXTURES / "nvidia-smi" / "error.driver-library-mismatch.txt").read_bytes(),
                  returncode=18)
    await clock.advance(5)  # apps_interval_s
    f = model.state(clock.now()).failure("gpu_apps")
    assert f is not None and f.kind == "command" and f.message.startswith(MSG_MISMATCH)
    runner.answer(compute_apps_argv(), APPS)
    await clock.advance(2)  # retry_s
    assert model.state(clock.now()).failure("gpu_apps") is None


async def test_no_gpu_reading_means_no_process_list(running) -> None:
    ctx, runner, clock, model = context()
    running.append(asyncio.create_task(GpuAppsSource(ctx).run()))
    await clock.advance(10)
    assert runner.calls == [] and model.state(clock.now()).gpu_apps is None
