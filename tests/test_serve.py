"""``upwatch serve`` (tui/serve.py) against the real thing: ``python -m tui serve --demo`` as a
subprocess, aiohttp as the client that does what a hostile page or a careless one would, Chromium
(Debian's /usr/bin/chromium driven by Playwright, no browser download) as the browser, and a tiny
TCP proxy as the SSH tunnel whose local port differs from the remote one.

The terminal is drawn by xterm.js on a canvas, so the screen's text is read from the websocket
stream instead (the same bytes xterm.js gets; in the browser, a wrapper around ``WebSocket``
installed before the page's scripts keeps a copy).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from tcp_relay import pipe

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
DEMO_HOSTS = ("gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4")
#: The dashboard's answer to an action key in read-only mode (tui.actions.READ_ONLY_MESSAGE).
READ_ONLY = "read-only: actions are off"
#: Terminal control sequences (CSI, OSC, DCS/APC/PM/SOS strings, two-byte escapes).
_CONTROL = re.compile(r"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)")


def screen_text(stream: str) -> str:
    """The text of a terminal byte stream (decoded), control sequences removed."""
    return _CONTROL.sub("", stream)


# --- the process tree ---------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgid, start time in clock ticks) of ``pid``, None when it is gone (or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[2]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live process below ``root`` by the parent chain, with its start time: {pid: start}."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p))) is not None}
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _, start) in stats.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def alive(processes: dict[int, int]) -> list[int]:
    """Those of ``processes`` ({pid: start time}) that still run (the same process, not a reused pid)."""
    return [pid for pid, start in processes.items() if (s := _stat(pid)) is not None and s[2] == start]


def in_group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p))) is not None and s[1] == pgid]


# --- the server -----------------------------------------------------------------------------------------

@dataclass
class Served:
    """A running ``upwatch serve``: its process (leader of its own process group), its URL."""

    proc: subprocess.Popen[bytes]
    url: str

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    def ws_url(self, base: str | None = None, token: bool = True) -> str:
        query = f"token={self.token}&" if token else ""
        return (base or self.base).replace("http://", "ws://") + f"/ws?{query}width=120&height=40"

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode()


def start_server(*args: str) -> Served:
    """``python -m tui serve ARGS`` in a new session; returns once its first line (the URL) came."""
    proc = subprocess.Popen([sys.executable, "-m", "tui", "serve", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()  # the server's first line, or "" when it died
    assert line, f"no URL: exit {proc.wait()}, stderr {proc.stderr.read().decode() if proc.stderr else ''}"
    return Served(proc, line)


def end_server(served: Served) -> None:
    """Teardown: whatever is left of the server's tree is killed."""
    left = descendants(served.proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(served.proc.pid, signal.SIGKILL)
    for pid in alive(left):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    served.proc.wait()


@pytest.fixture
def served() -> AsyncIterator[Served]:
    s = start_server("--demo", "--listen", "127.0.0.1:0")
    yield s
    end_server(s)


class Viewer:
    """One websocket session as a browser holds it: the screen's text so far, keys to send."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.stream = ""
        self._decoder = io.IncrementalNewlineDecoder(None, False)

    async def until(self, *needles: str, timeout_s: float = 20.0) -> str:
        """Read the stream until each of ``needles`` was on the screen; the screen's text.

        Raises:
            AssertionError: not within ``timeout_s``, or the session ended first.
        """
        deadline = time.monotonic() + timeout_s
        while not all(n in (text := screen_text(self.stream)) for n in needles):
            left = deadline - time.monotonic()
            assert left > 0, f"not on the screen after {timeout_s} s: {[n for n in needles if n not in text]}"
            try:
                message = await asyncio.wait_for(self.ws.receive(), left)
            except TimeoutError:
                continue
            assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), f"ended: {message}"
            if message.type == aiohttp.WSMsgType.BINARY:
                self.stream += message.data.decode("utf-8", "replace")
        return text

    async def press(self, keys: str) -> None:
        await self.ws.send_json(["stdin", keys])


@contextlib.asynccontextmanager
async def viewer(session: aiohttp.ClientSession, served: Served, *, origin: str | None = None,
                 base: str | None = None) -> AsyncIterator[Viewer]:
    """A websocket session with the page's own Origin (or ``origin``), through ``base`` (a tunnel)."""
    base = base or served.base
    async with session.ws_connect(served.ws_url(base), headers={"Origin": origin or base}) as ws:
        yield Viewer(ws)


# --- the rules, one by one ---------------------------------------------------------------------------------

async def test_first_line_is_the_url_with_a_token_and_every_request_needs_it(served: Served) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{43}", served.url), served.url
    # unsafe: the jar keeps cookies of an IP address (as browsers do)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        for path in ("/", "/?token=", f"/?token={served.token[:-1]}x", "/static/js/textual.js", "/ws"):
            async with http.get(served.base + path) as r:
                assert r.status == 403, path
        async with http.get(served.url) as r:
            assert r.status == 200
            page = await r.text()
            cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
        # the cookie the first page set is enough from then on (the page's scripts, its websocket)
        async with http.get(served.base + "/static/js/textual.js") as r:
            assert r.status == 200
        async with http.get(served.base + "/static/js/") as r:
            assert r.status in (403, 404)  # no listing
        assert "data-session-websocket-url" in page and "/static/js/textual.js" in page
    async with aiohttp.ClientSession() as http:  # a client without the cookie, and a forged one
        async with http.get(served.base + "/static/css/xterm.css") as r:
            assert r.status == 403
        async with http.get(served.base + "/", headers={"Cookie": "upwatch_0=" + served.token[:-1] + "x"}) as r:
            assert r.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(served.ws_url(token=False), headers={"Origin": served.base})
        assert refused.value.status == 403


#: A URL with a scheme and a host, as a page could load from (``src=``, ``href=``, ``url(...)``, ``@import``).
_URL_RE = re.compile(r"\b(?:https?|wss?):(?://|\\/\\/)([^/\s\"'<>)\\]+)", re.I)


async def test_the_page_loads_nothing_from_another_origin(served: Served) -> None:
    """The page names no URL of another host (stock textual-serve's linked Google Fonts), and the
    scripts and styles it loads are this server's own."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(served.url) as r:
            assert r.status == 200
            page = await r.text()
        own_host = served.base.removeprefix("http://")
        assert set(_URL_RE.findall(page)) == {own_host}, _URL_RE.findall(page)  # only the websocket's
        assert "fonts.googleapis.com" not in page and "<title>upwatch demo</title>" in page
        assert "default-src 'self'" in r.headers["Content-Security-Policy"]  # and the browser enforces it
        loads = re.findall(r'(?:src|href)="([^"]*)"', page)
        assert loads and all(u.startswith("/static/") for u in loads), loads
        for url in loads:
            async with http.get(served.base + url) as r:
                assert r.status == 200, url


async def test_a_websocket_from_another_origin_is_refused(served: Served) -> None:
    async with aiohttp.ClientSession() as http:
        for origin in ("https://evil.example", "null", served.base.replace("127.0.0.1", "localhost"),
                       served.base + "0"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(served.ws_url(), headers={"Origin": origin})
            assert refused.value.status == 403, origin
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:  # no Origin at all
            await http.ws_connect(served.ws_url())
        assert refused.value.status == 403
        async with viewer(http, served) as v:  # the page's own origin is served
            await v.until(*DEMO_HOSTS)


async def test_an_action_key_does_nothing_and_says_read_only(served: Served) -> None:
    async with aiohttp.ClientSession() as http, viewer(http, served) as v:
        text = await v.until(*DEMO_HOSTS, "read-only")  # the footer says so before any key
        assert READ_ONLY not in text
        for key in ("r", "s", "k", "K", "R", "S"):
            v.stream = ""
            await v.press(key)
            text = await v.until(READ_ONLY)
            assert "Confirm" not in text and "Cancel" not in text, key  # no confirmation opened


async def test_the_help_in_a_browser_offers_no_action(served: Served) -> None:
    """``?`` in a browser session: no restart/stop/kill key, but that actions are off in this view
    and how to get them (the app knows it runs on textual's web driver)."""
    async with aiohttp.ClientSession() as http, viewer(http, served) as v:
        await v.until(*DEMO_HOSTS)
        v.stream = ""
        await v.press("?")
        text = await v.until("Actions are off in this view", "run upwatch in a terminal")
        for line in ("restart the unit", "stop the unit", "SIGKILL"):
            assert line not in text, line


async def test_at_most_max_viewers_at_once() -> None:
    served = start_server("--demo", "--listen", "127.0.0.1:0", "--max-viewers", "2")
    try:
        async with aiohttp.ClientSession() as http:
            async with viewer(http, served) as one, viewer(http, served) as two:
                await one.until("gpu-node-1")
                await two.until("gpu-node-1")
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await http.ws_connect(served.ws_url(), headers={"Origin": served.base})
                assert refused.value.status == 503
                async with http.get(served.url) as r:
                    assert r.status == 503
            # both closed: their places are free again once the server ended their apps
            deadline = time.monotonic() + 10
            while True:
                async with http.get(served.url) as r:
                    if r.status == 200:
                        break
                assert time.monotonic() < deadline, "the places were not given back"
                await asyncio.sleep(0.1)
            async with viewer(http, served) as three:
                await three.until("gpu-node-1")
    finally:
        end_server(served)


@pytest.mark.parametrize(("signum", "group"), [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "SIGINT", "ctrl-c"])
async def test_a_signal_ends_every_process_within_5_s(signum: int, group: bool) -> None:
    """SIGTERM or SIGINT to the server, or SIGINT to its whole process group (Ctrl-C on its terminal:
    the apps get it too), with two viewers on."""
    served = start_server("--demo", "--listen", "127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http, viewer(http, served) as one, viewer(http, served) as two:
            await one.until("gpu-node-1")
            await two.until("gpu-node-1")
            tree = descendants(served.proc.pid)
            assert len(tree) >= 2, tree  # one app process per viewer
            began = time.monotonic()
            if group:
                os.killpg(served.proc.pid, signum)
            else:
                served.proc.send_signal(signum)
            exit_code = await asyncio.to_thread(served.proc.wait, 10)
            took = time.monotonic() - began
        assert exit_code == 0, served.stderr()
        assert took < 5.0, f"{took:.2f} s"
        assert alive(tree) == [] and in_group(served.proc.pid) == []
        print(f"\n{signal.Signals(signum).name}{' to the group' if group else ''} with 2 viewers: exit in {took:.2f} s, {len(tree)} processes ended")
    finally:
        end_server(served)


async def test_apps_end_when_the_server_is_killed() -> None:
    served = start_server("--demo", "--listen", "127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http, viewer(http, served) as one:
            await one.until("gpu-node-1")
            tree = descendants(served.proc.pid)
            assert tree
            began = time.monotonic()
            served.proc.kill()
            served.proc.wait()
            while alive(tree):
                assert time.monotonic() - began < 6.0, f"left after the server's SIGKILL: {alive(tree)}"
                await asyncio.sleep(0.05)
            print(f"\nserver SIGKILLed: its {len(tree)} app process(es) gone after {time.monotonic() - began:.2f} s")
    finally:
        end_server(served)


def test_another_listen_address_is_warned_about() -> None:
    served = start_server("--demo", "--listen", "0.0.0.0:0")
    try:
        served.proc.terminate()
        assert served.proc.wait(10) == 0
        assert "not loopback" in served.stderr()
    finally:
        end_server(served)
    quiet = start_server("--demo", "--listen", "127.0.0.1:0")
    try:
        quiet.proc.terminate()
        assert quiet.proc.wait(10) == 0
        assert "warning" not in quiet.stderr()
    finally:
        end_server(quiet)


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    taken = socket.create_server(("127.0.0.1", 0))  # a port something else listens on
    with taken:
        for args in (["--listen", "nowhere"], ["--max-viewers", "0"], ["--speed", "5"], ["--demo", "gpu/x"],
                     ["--config", str(tmp_path / "missing.toml")],
                     ["--demo", "--listen", f"127.0.0.1:{taken.getsockname()[1]}"]):
            done = subprocess.run([sys.executable, "-m", "tui", "serve", *args], cwd=ROOT, capture_output=True,
                                  timeout=30)
            assert done.returncode == 2 and done.stdout == b"", (args, done)


# --- through a tunnel whose local port is another ----------------------------------------------------------

@contextlib.asynccontextmanager
async def tunnel(port: int) -> AsyncIterator[str]:
    """A TCP forwarder on a free local port to 127.0.0.1:``port`` (as ``ssh -L`` is); its base URL."""
    async def forward(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

    listener = await asyncio.start_server(forward, "127.0.0.1", 0)
    local = listener.sockets[0].getsockname()[1]
    assert local != port
    try:
        yield f"http://127.0.0.1:{local}"
    finally:
        listener.close()


async def test_through_a_tunnel_on_another_port(served: Served) -> None:
    remote = int(served.base.rsplit(":", 1)[1])
    async with tunnel(remote) as local, aiohttp.ClientSession() as http:
        async with http.get(f"{local}/?token={served.token}") as r:
            assert r.status == 200
            page = await r.text()
        assert f'data-session-websocket-url="{local.replace("http", "ws")}/ws"' in page
        async with viewer(http, served, base=local) as v:
            await v.until(*DEMO_HOSTS)


# --- in a browser -----------------------------------------------------------------------------------------

#: Keeps a copy of what the page's websocket receives (window.__screen), before the page's scripts run.
_TAP = """
(() => {
  const Original = window.WebSocket; const decoder = new TextDecoder();
  window.__screen = "";
  window.WebSocket = function (url, protocols) {
    const ws = new Original(url, protocols);
    ws.addEventListener("message", (e) => {
      if (e.data instanceof ArrayBuffer) window.__screen += decoder.decode(e.data, {stream: true});
    });
    return ws;
  };
  window.WebSocket.prototype = Original.prototype;
})();
"""
_CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"]


async def _page_until(page, *needles: str, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = screen_text(await page.evaluate("window.__screen"))
        if all(n in text for n in needles):
            return text
        assert time.monotonic() < deadline, f"not on the page: {[n for n in needles if n not in text]}"
        await page.wait_for_timeout(100)


def _bright(png: bytes) -> float:
    """The share of a screenshot's pixels that are bright (luminance at least 128 of 255): text and
    borders. textual-serve's splash screen is dark but for its logo and the app's name."""
    from PIL import Image

    grey = Image.open(io.BytesIO(png)).convert("L")
    return sum(grey.histogram()[128:]) / (grey.width * grey.height)


async def test_in_a_browser_through_a_tunnel(served: Served) -> None:
    """Two pages (two browser contexts) through a tunnel on another port: each renders the cards
    (pixels unlike the splash screen), sees the same hosts; an action key says read-only."""
    from playwright.async_api import async_playwright

    remote = int(served.base.rsplit(":", 1)[1])
    async with tunnel(remote) as local, async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=_CHROMIUM_ARGS)
        try:
            pages = []
            requested: list[str] = []  # every URL the pages asked for (the page, its files, the websocket)
            for _ in range(2):
                context = await browser.new_context(viewport={"width": 1280, "height": 800})
                page = await context.new_page()
                page.on("request", lambda request: requested.append(request.url))
                page.on("websocket", lambda ws: requested.append(ws.url))
                page.on("console", lambda m: requested.append("console: " + m.text) if "Content Security" in m.text else None)
                await page.add_init_script(_TAP)
                await page.goto(f"{local}/?token={served.token}")
                pages.append(page)
            texts = [await _page_until(page, *DEMO_HOSTS, "read-only") for page in pages]
            assert all(all(h in t for h in DEMO_HOSTS) for t in texts)
            own = (local + "/", local.replace("http://", "ws://") + "/")
            assert requested and [u for u in requested if not u.startswith(own)] == [], requested
            await pages[0].wait_for_selector("body.-first-byte")
            await pages[0].wait_for_timeout(500)  # the terminal's 0.3 s fade-in
            rendered = await pages[0].screenshot()
            # the splash: the same page whose websocket never opens
            splash_context = await browser.new_context(viewport={"width": 1280, "height": 800})
            splash_page = await splash_context.new_page()
            await splash_page.add_init_script("window.WebSocket = function () { return {addEventListener() {}}; };")
            await splash_page.goto(f"{local}/?token={served.token}")
            splash = await splash_page.screenshot()
            # measured: 2.2 % of the rendered cards' pixels are bright, 0.06 % of the splash's
            assert _bright(splash) < 0.002 and _bright(rendered) > 0.01, (_bright(splash), _bright(rendered))
            await pages[1].click("#terminal")
            await pages[1].keyboard.press("r")
            await _page_until(pages[1], READ_ONLY)
            if os.environ.get("UPWATCH_SAVE_SCREENSHOT"):  # screenshots/serve-browser.png (README)
                await pages[1].wait_for_timeout(500)
                await pages[1].screenshot(path=os.environ["UPWATCH_SAVE_SCREENSHOT"])
        finally:
            await browser.close()


# --- a live host: no remote process outlives the server -------------------------------------------------

@pytest.mark.parametrize("end", ["SIGTERM", "SIGKILL"])
async def test_no_remote_process_outlives_the_server(testhost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     end: str) -> None:
    """``upwatch serve --config`` on a real sshd test host: each viewer's app streams the journal
    there; once the server ended (SIGTERM) or was killed (SIGKILL), nothing runs on the host."""
    from test_live_status import host_block, hosts_toml, setup_home

    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    config = hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port))
    served = start_server("--config", config, "--listen", "127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http, viewer(http, served) as one:
            await one.until("gpu-a", "READY")
            assert testhost.remote_processes(), "the viewer's app watches the host"
            tree = descendants(served.proc.pid)
            began = time.monotonic()
            os.kill(served.proc.pid, getattr(signal, end))
            served.proc.wait(10)
            while alive(tree) or testhost.remote_processes():
                assert time.monotonic() - began < 8.0, (alive(tree), testhost.remote_processes())
                await asyncio.sleep(0.05)
        print(f"\n{end}: the server's tree and the host's processes gone after {time.monotonic() - began:.2f} s")
    finally:
        end_server(served)
