"""Notifications through the real app (Pilot) on the demo scenarios with a ManualClock: a webhook
to a real HTTP server on 127.0.0.1, failing webhooks that leave the dashboard alone, and notify-send
as a stand-in script on PATH. Every wait polls a condition with a deadline; no sleeps for luck."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from probes.clock import ManualClock
from probes.fold.notify import Notice
from probes.transport.replay.runner import ReplayRunner
from probes.spec import HostSpec
from tui.app import UpwatchApp, make_app
from tui.config import Config
from tui.demo import demo_scenarios
from tui.demo_app import advance_demo, make_demo_app
from tui.notify import Notifier
from tui.help_screen import HelpScreen
from tui.screens import OverviewScreen
from waiting import until

T0 = 1_764_000_000.0
READY_LINE = "gpu-node-1 sglang.service: ready after 2m38s"  # the demo's gpu-node-1 logs ready at 158 s
HOOK_PATH = "/services/T000/B000/s3cr3t"


class Hook:
    """A webhook receiver: a real HTTP server on 127.0.0.1 in a thread. ``mode``: ``ok`` (200),
    ``error`` (500 with a body), ``hang`` (reads the request, then never answers until closed)."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                hook.requests.append({"path": self.path, "type": self.headers.get("Content-Type"),
                                      "body": json.loads(body)})
                if hook.mode == "hang":
                    hook.release.wait(30)
                    return
                status, text = (200, b"ok") if hook.mode == "ok" else (500, b"boom\n")
                self.send_response(status)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def hook(request):
    h = Hook(getattr(request, "param", "ok"))
    yield h
    h.close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was just bound and let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}{HOOK_PATH}"


def demo_app(clock: ManualClock, channels: dict[str, dict[str, Any]]) -> UpwatchApp:
    """The demo's four hosts; each host's notify settings from ``channels`` (none when absent)."""
    scenarios = {s.host: s for s in demo_scenarios(T0)}
    hosts = tuple(HostSpec(s.host, s.unit, s.port, s.engine, **channels.get(s.host, {"notify": ()}))
                  for s in scenarios.values())
    return make_app(Config(hosts=hosts), lambda spec: ReplayRunner(scenarios[spec.name], clock, start=T0), clock,
                    audit=None)


def record_toasts(app: UpwatchApp) -> list[tuple[str, dict[str, Any]]]:
    """Every App.notify call, with its keywords (toasts expire by real time; this list does not)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    real = app.notify

    def notify(message: str, **kw: Any) -> None:
        seen.append((message, kw))
        real(message, **kw)

    app.notify = notify  # type: ignore[method-assign]
    return seen




async def run_for(app: UpwatchApp, clock: ManualClock, pilot, seconds: float, step_s: float = 10.0) -> None:
    """Move the clock ``seconds`` on, with the app's snapshot after every ``step_s`` (the repaint
    timer may take more in between; the notices do not depend on how many)."""
    for _ in range(round(seconds / step_s)):
        await advance_demo(app, clock, pilot, step_s, step_s=step_s)


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


# --- the demo with the default channels ----------------------------------------------------------

async def test_demo_rings_and_toasts_each_event_once() -> None:
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    rings: list[float] = []
    app.bell = lambda: rings.append(clock.now())  # type: ignore[method-assign]
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await run_for(app, clock, pilot, 190)
        told = [(n.host, n.kind, round(n.time - T0, 1)) for n in app.notifier.told]
        assert sorted(told, key=lambda t: t[2]) == [
                        ("gpu-node-2", "failed", 50.5), ("gpu-node-2", "restart_loop", 107.5),
                        ("gpu-node-4", "ready", 150.0), ("gpu-node-1", "ready", 158.0),
                        ("gpu-node-2", "failed", 164.5), ("gpu-node-3", "stalled", 176.0)]
        assert len(rings) == 6 and rings[0] >= T0 + 50.5  # one per host per snapshot, none before an event
        toasts.sort(key=lambda t: app.notifier.told[[n.text for n in app.notifier.told].index(t[0])].time)
        assert [(kw["title"], kw["severity"], kw["markup"]) for _, kw in toasts] == [
            ("failed", "error", False), ("restart loop", "error", False), ("ready", "information", False),
            ("ready", "information", False), ("failed", "error", False), ("stalled", "warning", False)]
        # Spans in a verdict are judged when the snapshot is taken: the step decides the seconds.
        patterns = [
            r"gpu-node-2 vllm\.service: Start failed in Init: CUDA out of memory\.",
            r"gpu-node-2 vllm\.service: Restart loop: 2 starts failed in 1m4\ds, each CUDA out of memory "
            r"during init(; starting again)?\.",  # judged while failed, or once restarted
            r"gpu-node-4 trtllm\.service: ready after 2m30s",
            re.escape(READY_LINE),
            r"gpu-node-2 vllm\.service: Restart loop: 3 starts failed in 2m44s, each CUDA out of memory during "
            r"init; systemd gave up \(start limit\): fix it, then systemctl reset-failed\.",
            r"gpu-node-3 sglang\.service: No log line for 2m0\ds in CUDA graph capture at 0/34: the start looks "
            r"hung\."]
        assert len(toasts) == len(patterns)
        for (message, _), pattern in zip(toasts, patterns):
            assert re.fullmatch(pattern, message), message
        assert app.notifier.failures == {}


async def test_a_fleet_failing_at_once_gets_three_toasts_and_one_that_gathers_the_rest() -> None:
    # `upwatch --demo --fleet 128`: 32 hosts failing at the same second gave 32 toasts, which
    # covered the right half of the screen. Every notice is still told (bell, desktop, webhook).
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock, names=[f"gpu-{i:03d}" for i in range(1, 41)])
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await run_for(app, clock, pilot, 60)
        failed = [n.host for n in app.notifier.told if n.kind == "failed"]
        assert len(failed) == 10  # every fourth host runs the failing start
        await until("the toast that gathers the burst", lambda: len(toasts) == 4, pilot=pilot)
        assert [kw["title"] for _, kw in toasts[:3]] == ["failed"] * 3
        message, kw = toasts[3]
        assert kw["title"] == "7 more hosts changed" and kw["severity"] == "error"
        rest = [h for h in failed if not any(m.startswith(f"{h} ") for m, _ in toasts[:3])]
        assert message == f"7 failed: {', '.join(rest[:4])} and 3 more."


async def test_at_80x24_a_burst_is_one_short_toast_at_a_time() -> None:
    # `upwatch --demo --fleet 128` at 80x24: the start-up toasts (three, then the one that gathers
    # the burst, each 10 s, six rows high) covered over half the rows for 15-20 s.
    from textual.widgets._toast import Toast

    from tui.notify import SMALL_TOAST_S

    clock = ManualClock(T0)
    app = make_demo_app(clock=clock, names=[f"gpu-{i:03d}" for i in range(1, 41)])
    toasts = record_toasts(app)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await run_for(app, clock, pilot, 50)
        assert toasts == []
        await advance_demo(app, clock, pilot, 10, step_s=10, toasts=True)  # the burst, its toasts kept
        failed = [n.host for n in app.notifier.told if n.kind == "failed"]
        assert len(failed) == 10  # every notice is still told (bell, desktop, webhook)
        assert [kw["title"] for _, kw in toasts] == ["failed", "9 more hosts changed"]
        shown = list(app._notifications)
        assert len(shown) == 1 and shown[0].title == "9 more hosts changed" and shown[0].timeout <= SMALL_TOAST_S
        on_screen = await until("the toast on the screen", lambda: list(app.screen.query(Toast)), pilot=pilot)
        assert len(on_screen) == 1 and on_screen[0].region.height <= 4, on_screen[0].region  # no blank rows
        # Any toast, not only the notices': short, and it takes the place of the one shown.
        app.notify("copied", timeout=10)
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["copied"]
        assert next(iter(app._notifications)).timeout == SMALL_TOAST_S
        # A roomy terminal keeps them as they were.
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        app.notify("one", timeout=10)
        app.notify("two", timeout=10)
        await pilot.pause()
        assert [(n.message, n.timeout) for n in app._notifications] == [("copied", SMALL_TOAST_S), ("one", 10), ("two", 10)]


async def test_a_fixed_picture_has_no_gathered_toast_still_to_come() -> None:
    # The snapshot tests failed in CI (one in two runs here): the toast that gathers a burst waits
    # a real second on a timer, so on a slow run it came up after advance_demo had cleared the
    # toasts, and the picture had "1 more hosts changed" over the log. Ten hosts failing at the
    # same second make a burst whatever the real time.
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock, names=[f"gpu-{i:03d}" for i in range(1, 41)])
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 60)
        assert [kw["title"] for _, kw in toasts][3:] == ["7 more hosts changed"]  # at once, not on a timer
        told = len(toasts)
        app.notifier.toast_held()  # what the timer does, however late it runs
        await pilot.pause()
        assert len(toasts) == told and len(app._notifications) == 0


# --- webhook ---------------------------------------------------------------------------------------

async def test_webhook_posts_the_notice_as_json_to_a_real_server(hook: Hook) -> None:
    clock = ManualClock(T0)
    app = demo_app(clock, {"gpu-node-1": {"notify": ("webhook",), "webhook_url": hook.url}})
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 150)
        assert hook.requests == []
        await advance_demo(app, clock, pilot, 10)
        await until("the POST", lambda: hook.requests, pilot=pilot)
        label = f"webhook http://127.0.0.1:{hook.server.server_address[1]}/…"
        await until("delivered", lambda: app.notifier.delivered.get(label), pilot=pilot)
        assert hook.requests == [{"path": HOOK_PATH, "type": "application/json", "body": {
            "text": READY_LINE, "host": "gpu-node-1", "unit": "sglang.service", "kind": "ready",
            "sentence": "ready after 2m38s", "time": T0 + 158.0}}]
        assert app.notifier.delivered == {label: 1} and app.notifier.failures == {}
        assert toasts == []  # the host's channels are the webhook alone
        await advance_demo(app, clock, pilot, 100)  # the other hosts' events go nowhere; no repeat
        assert len(hook.requests) == 1


@pytest.mark.parametrize("hook, reason", [("error", "HTTP 500: boom"), ("hang", "no answer within 0.5 s"),
                                          ("refused", "cannot connect (")], indirect=["hook"])
async def test_a_failing_webhook_is_shown_and_the_dashboard_goes_on(hook: Hook, reason: str) -> None:
    url = closed_port_url() if hook.mode == "refused" else hook.url
    clock = ManualClock(T0)
    app = demo_app(clock, {"gpu-node-1": {"notify": ("toast", "webhook"), "webhook_url": url},
                           "gpu-node-2": {"notify": ("toast",)}})
    # Short only where the server never answers; a loaded machine may take a while to say 500.
    app.notifier.webhook_timeout_s = 0.5 if hook.mode == "hang" else 15.0
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 60)) as pilot:
        await advance_demo(app, clock, pilot, 160)
        label = f"webhook http://127.0.0.1:{url.split(':')[2].split('/')[0]}/…"
        failure = await until("the failure", lambda: app.notifier.failures.get(label), pilot=pilot)
        assert failure.reason.startswith(reason) and failure.notice == READY_LINE
        warning = [(m, kw) for m, kw in toasts if kw.get("title") == "notification not sent"]
        assert warning == [(f"{label}: {failure.reason} (not sent: {READY_LINE})",
                            {"title": "notification not sent", "severity": "warning", "markup": False,
                             "timeout": 10})]
        # The dashboard goes on: later events of other hosts still come, the cards still change.
        await advance_demo(app, clock, pilot, 240)
        assert isinstance(app.screen, OverviewScreen)
        assert "4 hosts: 1 failed · 1 stalled · 2 ready" in screen_text(app)
        assert any(m.startswith("gpu-node-2 vllm.service: Restart loop: 3 starts failed") for m, _ in toasts)
        # The help screen names the last failure.
        await pilot.press("question_mark")
        await until("the help screen", lambda: isinstance(app.screen, HelpScreen), pilot=pilot)
        await until("the failure on the help screen", lambda: f"{label}: failed at" in screen_text(app), pilot=pilot)
        assert reason.rstrip(" (") in screen_text(app)
        await pilot.press("escape")
        await until("back", lambda: isinstance(app.screen, OverviewScreen), pilot=pilot)
        assert app.notifier.delivered == {}


@pytest.mark.parametrize("hook", ["hang"], indirect=True)
async def test_a_webhook_that_never_answers_holds_nothing(hook: Hook) -> None:
    """The POST hangs (60 s allowed); meanwhile the clock runs 4 simulated minutes, the cards
    change, keys work, and quitting does not wait for it."""
    clock = ManualClock(T0)
    app = demo_app(clock, {"gpu-node-1": {"notify": ("webhook",), "webhook_url": hook.url},
                           "gpu-node-2": {"notify": ("webhook",), "webhook_url": hook.url}})
    app.notifier.webhook_timeout_s = 60.0  # far longer than this test runs
    async with app.run_test(size=(160, 48)) as pilot:
        await run_for(app, clock, pilot, 160)
        await until("the POST", lambda: hook.requests, pilot=pilot)
        await advance_demo(app, clock, pilot, 240)
        assert "4 hosts: 1 failed · 1 stalled · 2 ready" in screen_text(app)
        await pilot.press("question_mark")
        await until("the help screen", lambda: isinstance(app.screen, HelpScreen), pilot=pilot)
        await pilot.press("escape")
        # Still one request, unanswered: the lane sends one at a time; the rest wait in line.
        assert app.notifier.failures == {} and app.notifier.delivered == {}
        assert [r["body"]["text"] for r in hook.requests] == [
            "gpu-node-2 vllm.service: Start failed in Init: CUDA out of memory."]
        started = time.monotonic()
        await pilot.press("q")
    assert time.monotonic() - started < 20.0  # not the 60 s the POST is allowed


# --- notify-send ---------------------------------------------------------------------------------

def stand_in(bin_dir: Path, log: Path, exit_status: int = 0) -> Path:
    """A ``notify-send`` that appends its argv (a JSON list) to ``log`` and exits ``exit_status``."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "notify-send"
    exe.write_text(f"#!{sys.executable}\nimport json, sys\n"
                   f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                   f"if {exit_status}: sys.stderr.write('Cannot autolaunch D-Bus without X11 $DISPLAY\\n')\n"
                   f"sys.exit({exit_status})\n")
    exe.chmod(0o755)
    return exe


async def test_desktop_runs_notify_send_with_an_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv.jsonl"
    stand_in(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    clock = ManualClock(T0)
    app = demo_app(clock, {"gpu-node-1": {"notify": ("desktop",)}})
    app.notifier.desktop_timeout_s = 30.0  # a loaded machine may be slow to start the stand-in
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 160)
        await until("delivered", lambda: app.notifier.delivered.get("desktop (notify-send)"), pilot=pilot)
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["--app-name=upwatch", "--urgency=normal", "gpu-node-1: ready", READY_LINE]]
    assert app.notifier.failures == {}


@pytest.mark.parametrize("case", ["missing", "exit"])
async def test_desktop_failures_are_shown(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv.jsonl"
    if case == "exit":
        stand_in(tmp_path / "bin", log, exit_status=1)
    else:
        (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # the only place it may be
    clock = ManualClock(T0)
    app = demo_app(clock, {"gpu-node-1": {"notify": ("toast", "desktop")}})
    app.notifier.desktop_timeout_s = 30.0
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 160)
        failure = await until("the failure", lambda: app.notifier.failures.get("desktop (notify-send)"), pilot=pilot)
        await advance_demo(app, clock, pilot, 5)
        assert [m for m, _ in toasts] == [READY_LINE,
                                          f"desktop (notify-send): {failure.reason} (not sent: {READY_LINE})"]
    assert failure.reason == {
        "missing": "notify-send is not installed (not on PATH)",
        "exit": "notify-send exited with status 1: Cannot autolaunch D-Bus without X11 $DISPLAY"}[case]
    assert log.exists() == (case == "exit")


async def test_desktop_body_is_escaped_and_a_slow_notify_send_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "argv.jsonl"
    exe = stand_in(tmp_path / "bin", log)
    notifier = Notifier(None, (), since=0.0, now=lambda: 0.0, desktop_timeout_s=30.0,  # type: ignore[arg-type]
                        which=lambda name: str(exe) if name == "notify-send" else None)
    n = Notice("h", "u.service", "failed", "bad <b>line</b> & more", 1.0)
    assert await notifier._desktop(n) is None
    assert json.loads(log.read_text()) == ["--app-name=upwatch", "--urgency=critical", "h: failed",
                                           "h u.service: bad &lt;b&gt;line&lt;/b&gt; &amp; more"]
    slow = tmp_path / "slow"
    slow.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    slow.chmod(0o755)
    notifier.which = lambda name: str(slow)
    notifier.desktop_timeout_s = 0.3
    started = time.monotonic()
    assert await notifier._desktop(n) == "notify-send did not finish within 0.3 s"
    assert time.monotonic() - started < 20.0


async def test_a_bug_in_the_rules_is_shown_once_and_the_dashboard_goes_on() -> None:
    clock = ManualClock(T0)
    app = demo_app(clock, {})
    toasts = record_toasts(app)

    def broken(state):
        raise KeyError("phase")

    app.notifier.tracker.update = broken  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await run_for(app, clock, pilot, 200, step_s=20)
        assert "4 hosts: 1 failed · 1 stalled · 2 ready" in screen_text(app)
    assert [m for m, kw in toasts if kw["title"] == "notification not sent"] == [
        "notices: cannot judge gpu-node-1: KeyError: 'phase' (not sent: gpu-node-1 sglang.service: (not judged))"]
