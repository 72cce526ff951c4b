"""The unit source alone: ``systemctl show`` answers (real captures) on a ManualClock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from canned_runner import CannedRunner
from probes.clock import ManualClock
from probes.fold.model import HostModel
from probes.sources.context import SourceContext
from probes.sources.unit import UnitSource
from probes.spec import HostSpec
from probes.transport.runner import ProbeError

SHOW = Path(__file__).resolve().parent / "fixtures" / "systemctl-show"
T0 = 1_764_460_800.0


@pytest.fixture
async def unit_loop() -> AsyncIterator[tuple[UnitSource, CannedRunner, ManualClock, HostModel]]:
    """A unit source for ``sglang.service`` (sudo on) running on its own, cancelled at the end."""
    clock, runner = ManualClock(T0), CannedRunner()
    spec = HostSpec("gpu-node-1", "sglang.service", ssh="gpu-node-1", sudo=True)
    model = HostModel(spec.name, spec.unit)
    source = UnitSource(SourceContext(spec, runner, clock, model))
    runner.answer(["sudo", "-n", "systemctl", "show"], (SHOW / "active-running.txt").read_bytes())
    task = asyncio.create_task(source.run())
    yield source, runner, clock, model
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_good_answer_becomes_the_unit_state_every_interval(unit_loop) -> None:
    source, runner, clock, model = unit_loop
    await clock.settle()
    u = model.state(clock.now()).unit_state
    assert u is not None and (u.active_state, u.sub_state, u.main_pid) == ("active", "running", 72)
    assert source.context.signals.unit_seen.is_set()
    assert runner.calls[0][:5] == ("sudo", "-n", "systemctl", "show", "sglang.service")
    await clock.advance(3)  # unit_interval_s 1.0
    assert runner.ran(["sudo"]) == 4 and not model.failing("unit")


async def test_a_failing_command_fails_the_cell_with_backoff_and_recovery_clears_it(unit_loop) -> None:
    source, runner, clock, model = unit_loop
    await clock.settle()
    # systemd not running: not properties, and the access rules name the reason.
    runner.answer(["sudo", "-n", "systemctl", "show"], b"",
                  returncode=1, stderr=b"System has not been booted with systemd as init system (PID 1). "
                                       b"Can't operate.\nFailed to connect to bus: Host is down\n")
    await clock.advance(1)
    f = model.state(clock.now()).failure("unit")
    assert f is not None and f.kind == "command" and f.reason == "no_systemd"
    assert f.message.startswith("systemctl show: systemd is not running on the host")
    n = runner.ran(["sudo"])
    await clock.advance(1.9)
    assert runner.ran(["sudo"]) == n  # the first retry waits retry_s (2 s) ...
    await clock.advance(0.1)
    assert runner.ran(["sudo"]) == n + 1
    await clock.advance(3.9)
    assert runner.ran(["sudo"]) == n + 1  # ... the next twice that
    await clock.advance(0.1)
    assert runner.ran(["sudo"]) == n + 2
    runner.answer(["sudo", "-n", "systemctl", "show"], (SHOW / "inactive-dead-stopped.txt").read_bytes())
    await clock.advance(8)
    s = model.state(clock.now())
    assert s.failure("unit") is None and s.unit_state is not None and s.unit_state.active_state == "inactive"


async def test_a_lost_connection_is_retried_every_retry_s_without_doubling(unit_loop) -> None:
    source, runner, clock, model = unit_loop
    await clock.settle()
    runner.answer(["sudo", "-n", "systemctl", "show"], ProbeError("closed", "gpu-node-1: connection lost"))
    await clock.advance(1)
    n = runner.ran(["sudo"])
    f = model.state(clock.now()).failure("unit")
    assert f is not None and f.kind == "closed"
    await clock.advance(6)
    assert runner.ran(["sudo"]) == n + 3  # every 2 s: the runner paces its reconnects


def test_a_user_unit_is_asked_of_the_users_manager_without_sudo() -> None:
    spec = HostSpec("h", "llm.service", ssh="h", sudo=True, user_unit=True)
    source = UnitSource(SourceContext(spec, CannedRunner(), ManualClock(T0), HostModel("h", "llm.service")))
    assert source.argv()[:4] == ["systemctl", "--user", "show", "llm.service"]
