"""The demo's actions run against its simulated hosts (probes/transport/replay/systemctl.py emulating systemctl): a
restart replays the start from its beginning, stop stops it, kill ends it (then as Restart= says),
start starts it again, the start limit refuses as systemd does; and an action dialog that fails
closes and says what failed. ReplayRunner on a ManualClock, then the real demo app through Pilot."""

from __future__ import annotations

import asyncio
import json

from probes.clock import ManualClock
from probes.transport.replay.runner import ReplayRunner
from probes.transport.replay.scenario import UnitFrame
from probes.spec import HostSpec
from tui.actions import ConfirmScreen, SafeRestartScreen
from tui.app import make_app
from tui.config import Config
from tui.demo import demo_scenarios
from tui.demo_app import make_demo_app
from tui.screens import OverviewScreen
from widgets.host_card import HostCard

T0 = 1_764_460_800.0
PROPS = "ActiveState,SubState,MainPID,NRestarts,InvocationID,Result,ExecMainStartTimestamp"


def _scenario(host: str):
    return {s.host: s for s in demo_scenarios(T0)}[host]


async def _show(r: ReplayRunner) -> dict[str, str]:
    out = (await r.run(["systemctl", "show", "sglang.service", "-p", PROPS])).stdout.decode()
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


async def _follow(r: ReplayRunner, into: list[dict]) -> None:
    async for line in r.stream(["journalctl", "-u", r.scenario.unit, "-o", "json", "-f", "-n", "all"]):
        into.append(json.loads(line))


def _msg(f: dict) -> str:
    m = f.get("MESSAGE")
    return m if isinstance(m, str) else bytes(m).decode("utf-8", "replace")


async def test_restart_replays_the_start_from_its_beginning_as_a_new_invocation() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(_scenario("gpu-node-1"), clock, start=T0)
    seen: list[dict] = []
    task = asyncio.create_task(_follow(r, seen))
    await clock.advance(200)  # ready (at 158 s)
    before = await _show(r)
    assert (before["ActiveState"], before["SubState"], before["MainPID"]) == ("active", "running", "3207")
    old_cursors = [f["__CURSOR"] for f in seen]
    n_first = len(seen)
    done = await r.run(["sudo", "-n", "systemctl", "restart", "sglang.service"])
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    await clock.advance(30)
    after = await _show(r)
    assert after["ActiveState"] == "active" and after["MainPID"] not in ("0", "3207")
    assert after["InvocationID"] != before["InvocationID"] and after["NRestarts"] == "0"
    assert after["ExecMainStartTimestamp"] == "Sun 2025-11-30 00:03:20 UTC"  # T0 + 200 s
    new = seen[n_first:]
    assert [_msg(f) for f in new[:4]] == [
        "Stopping sglang.service - SGLang server...", "sglang.service: Deactivated successfully.",
        "Stopped sglang.service - SGLang server.", "Started sglang.service - SGLang server."]
    # The recording again, from its first line, under the new invocation; the journal's past unchanged.
    first_line = _msg(next(f for f in seen if f.get("_SYSTEMD_INVOCATION_ID")))
    again = [f for f in new if f.get("_SYSTEMD_INVOCATION_ID")]
    assert again and _msg(again[0]) == first_line
    assert {f["_SYSTEMD_INVOCATION_ID"] for f in again} == {after["InvocationID"]}
    assert [f["__CURSOR"] for f in seen[:n_first]] == old_cursors
    assert int(new[0]["__REALTIME_TIMESTAMP"]) > int(seen[n_first - 1]["__REALTIME_TIMESTAMP"])
    # While the new start loads, the port is closed and the GPUs hold what the recording says.
    assert r.health_at(r.now_s()) == "refused"
    await r.close()
    await task


async def test_stop_start_and_kill_as_systemd_does() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(_scenario("gpu-node-1"), clock, start=T0)
    await clock.advance(200)
    assert (await r.run(["systemctl", "stop", "sglang.service"])).returncode == 0
    await clock.advance(1)
    st = await _show(r)
    assert (st["ActiveState"], st["SubState"], st["MainPID"], st["Result"]) == ("inactive", "dead", "0", "success")
    assert r.health_at(r.now_s()) == "refused" and r.gpu_at(r.now_s()) == [(0, 0)] * len(r.scenario.gpus)
    await clock.advance(600)  # nothing of the recording happens any more
    assert (await _show(r))["ActiveState"] == "inactive"
    assert (await r.run(["systemctl", "stop", "sglang.service"])).returncode == 0  # already stopped
    kill = await r.run(["systemctl", "kill", "-s", "SIGKILL", "sglang.service"])
    assert (kill.returncode, kill.stderr) == (1, b"Failed to kill unit sglang.service: No matching processes to kill\n")
    assert (await r.run(["systemctl", "start", "sglang.service"])).returncode == 0
    await clock.advance(5)
    st = await _show(r)
    assert (st["ActiveState"], st["NRestarts"]) == ("active", "0")
    assert (await r.run(["systemctl", "start", "sglang.service"])).returncode == 0  # runs already: nothing
    assert (await _show(r))["InvocationID"] == st["InvocationID"]
    # kill: Restart=on-failure, RestartUSec=10s: auto-restart for 10 s, then the recording again.
    assert (await r.run(["systemctl", "kill", "-s", "SIGKILL", "sglang.service"])).returncode == 0
    await clock.advance(1)
    st2 = await _show(r)
    assert (st2["ActiveState"], st2["SubState"], st2["Result"], st2["MainPID"]) == (
        "activating", "auto-restart", "signal", "0")
    await clock.advance(10)
    st3 = await _show(r)
    assert (st3["ActiveState"], st3["NRestarts"]) == ("active", "1") and st3["InvocationID"] != st["InvocationID"]
    other = await r.run(["systemctl", "restart", "other.service"])
    assert (other.returncode, other.stderr) == (5, b"Failed to restart other.service: Unit other.service not loaded.\n")
    await r.close()


async def test_kill_without_restart_leaves_the_unit_failed() -> None:
    sc = _scenario("gpu-node-3")
    sc = type(sc)(**{**sc.__dict__, "unit_timeline": (*sc.unit_timeline, UnitFrame(-29.0, {"Restart": "no"}))})
    sc = type(sc)(**{**sc.__dict__, "unit_timeline": tuple(sorted(sc.unit_timeline, key=lambda f: f.offset_s))})
    clock = ManualClock(T0)
    r = ReplayRunner(sc, clock, start=T0)
    await clock.advance(60)
    assert (await r.run(["systemctl", "kill", "-s", "SIGKILL", "sglang.service"])).returncode == 0
    await clock.advance(60)
    st = await _show(r)
    assert (st["ActiveState"], st["SubState"], st["Result"]) == ("failed", "failed", "signal")
    await r.close()


async def test_the_start_limit_refuses_a_start_until_reset_failed() -> None:
    clock = ManualClock(T0)
    r = ReplayRunner(_scenario("gpu-node-2"), clock, start=T0)  # 3 starts in 5 min, StartLimitBurst=3
    await clock.advance(200)
    no = await r.run(["systemctl", "restart", "vllm.service"])
    assert no.returncode == 1
    assert no.stderr.decode().splitlines()[0] == ("Job for vllm.service failed because start of the service was "
                                                  "attempted too often.")
    assert (await r.run(["systemctl", "reset-failed", "vllm.service"])).returncode == 0
    out = (await r.run(["systemctl", "show", "vllm.service", "-p", "ActiveState,NRestarts"])).stdout
    assert out == b"NRestarts=0\nActiveState=inactive\n"
    assert (await r.run(["systemctl", "start", "vllm.service"])).returncode == 0
    await clock.advance(5)
    out = (await r.run(["systemctl", "show", "vllm.service", "-p", "ActiveState"])).stdout
    assert out == b"ActiveState=active\n"
    await r.close()


# --- the demo app: every key does what it says ------------------------------------------------------


def _card(app, host: str) -> HostCard:
    return next(c for c in app.screen.query(HostCard) if c.state.host == host)


async def _run(pilot, clock, seconds: float, step: float = 1.0) -> None:
    for _ in range(int(seconds / step)):
        await clock.advance(step)
        pilot.app.tick()
        pilot.app.flush()  # the tick's own flush is stepwise: have it all now
        await pilot.pause()


async def _key_and_confirm(pilot, key: str) -> None:
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(pilot.app.screen, ConfirmScreen), (key, pilot.app.screen)
    await pilot.press("tab")
    assert pilot.app.screen.focused.id == "confirm"
    await pilot.press("enter")
    await pilot.pause()


def _notes(app) -> list[str]:
    """Every notification the app gave since the last clear (a toast expires after a few real
    seconds; this list does not)."""
    if not hasattr(app, "_said"):
        app._said = []
        notify = app.notify

        def said(message, *args, **kw):
            app._said.append(message)
            return notify(message, *args, **kw)

        app.notify = said
    return app._said


def _forget(app) -> None:
    _notes(app).clear()


async def test_every_action_key_works_in_the_demo() -> None:
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    _notes(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await _run(pilot, clock, 200, 5)
        assert _card(app, "gpu-node-1").state.state == "ready"
        first_inv = _card(app, "gpu-node-1").state.unit_state.invocation_id
        assert app.screen.focused is _card(app, "gpu-node-1")

        await _key_and_confirm(pilot, "r")
        await _run(pilot, clock, 20)
        s = _card(app, "gpu-node-1").state
        assert (s.state, s.unit_state.n_restarts) == ("loading", 0), s.state
        assert s.unit_state.invocation_id != first_inv and s.start_began >= T0 + 200
        assert "gpu-node-1: restart sglang.service: done" in _notes(app)
        await _run(pilot, clock, 200, 5)
        assert _card(app, "gpu-node-1").state.state == "ready"  # the replayed start got ready again

        await _key_and_confirm(pilot, "s")
        await _run(pilot, clock, 10)
        s = _card(app, "gpu-node-1").state
        assert (s.state, s.readiness) == ("stopped", "inactive")

        await _key_and_confirm(pilot, "S")
        await _run(pilot, clock, 20)
        assert _card(app, "gpu-node-1").state.state == "loading"

        await _key_and_confirm(pilot, "k")
        await _run(pilot, clock, 5)
        assert _card(app, "gpu-node-1").state.unit_state.sub_state == "auto-restart"
        await _run(pilot, clock, 20)  # RestartUSec=10s, then the recording again
        s = _card(app, "gpu-node-1").state
        assert (s.state, s.unit_state.n_restarts) == ("loading", 1)

        _forget(app)
        inv = s.unit_state.invocation_id
        await _key_and_confirm(pilot, "R")
        await _run(pilot, clock, 30)
        assert isinstance(app.screen, OverviewScreen)  # stopped, GPUs freed, started: closed
        assert _notes(app) == ["gpu-node-1: start sglang.service: done"]
        s = _card(app, "gpu-node-1").state
        assert (s.state, s.unit_state.n_restarts) == ("loading", 0) and s.unit_state.invocation_id != inv

        await pilot.press("K")  # no process list in the demo: says why there is nothing to kill
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        assert _notes(app)[-1].startswith("gpu-node-1: not known which processes hold GPU memory outside")
        assert not [n for n in _notes(app) if "not replayed" in n or "failed" in n.split(":")[1:2]]


async def test_a_failed_safe_restart_closes_its_dialog_and_says_what_failed() -> None:
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    _notes(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await _run(pilot, clock, 200, 5)  # gpu-node-2 looped three times: systemd's start limit
        await pilot.press("right")
        assert app.screen.focused.state.host == "gpu-node-2"
        await _key_and_confirm(pilot, "R")
        await _run(pilot, clock, 10)
        assert isinstance(app.screen, OverviewScreen)
        assert _notes(app)[-1] == ("gpu-node-2: start vllm.service: exit 1: Job for vllm.service failed because start "
                                   "of the service was attempted too often.\n"
                                   "safe restart: the start failed, vllm.service is not running")
        await _key_and_confirm(pilot, "r")  # a plain restart says the same
        await _run(pilot, clock, 3)
        assert _notes(app)[-1].startswith("gpu-node-2: restart vllm.service: exit 1: Job for vllm.service failed")


async def test_a_safe_restart_whose_stop_fails_closes_and_says_so() -> None:
    clock = ManualClock(T0)
    sc = _scenario("gpu-node-1")
    spec = HostSpec("gpu-node-1", "missing.service", sc.port, sc.engine)  # systemctl: not loaded
    app = make_app(Config(hosts=(spec,)), lambda s: ReplayRunner(sc, clock, start=T0), clock, audit=None, history=None)
    _notes(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await _run(pilot, clock, 5)
        await _key_and_confirm(pilot, "R")
        await _run(pilot, clock, 3)
        assert isinstance(app.screen, OverviewScreen), app.screen  # closed, not left open and empty
        assert not [s for s in app.screen_stack if isinstance(s, SafeRestartScreen)]
        assert _notes(app)[-1] == ("gpu-node-1: stop missing.service: exit 5: Failed to stop missing.service: Unit "
                                   "missing.service not loaded.\n"
                                   "safe restart stopped: the stop failed, missing.service was not started")
