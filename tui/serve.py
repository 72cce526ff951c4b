"""``upwatch serve``: the dashboard in a browser, read-only, behind a token (textual-serve's parts).

textual-serve 1.1.3 runs one app process per browser websocket and relays its screen; as it comes
it has no authentication, no Origin check, lists its static folder, builds the websocket URL from
its own address (wrong behind a tunnel whose local port differs: textual-serve issue #42), takes
21 s to stop with a client connected and leaves orphans when killed (TESTBED.md section 7). This
module keeps its page, its scripts and its :class:`~textual_serve.app_service.AppService` relay,
and wraps them so that:

* the first stdout line is the URL with a random token (:func:`secrets.token_urlsafe`); it listens
  on 127.0.0.1 unless ``--listen`` names another address, and then says on stderr what that means;
* every request needs the token: ``?token=`` (the first page; it is compared with
  :func:`hmac.compare_digest`) or the cookie that page sets (HttpOnly, SameSite=Strict); without it
  403; the websocket's ``Origin`` must be the page's own (``http://`` + the request's Host);
* the static files are served without a directory listing; no download route;
* the page is textual-serve's with what it loaded from another origin taken out (Google Fonts:
  the font falls back to a local monospace one; ``serve_templates/index.html``), so a page served
  by upwatch loads nothing but this server's own files;
* the page's websocket URL is built from the request's Host header, so a tunnel's local port works;
* every app process runs the dashboard with ``--read-only`` (:mod:`tui.serve_app`), at most
  ``max_viewers`` at once (then 503);
* SIGTERM, SIGINT or SIGHUP: each app is asked to quit, TERMed after :data:`QUIT_GRACE_S`, KILLed
  after :data:`TERM_GRACE_S` more, and the server is gone within 5 s; when the server dies anyway
  (SIGKILL), each app sees its watch pipe end and quits (:mod:`tui.serve_app`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import os
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

import tui
from tui.listen import parse_listen
from tui.serve_app import WATCH_FD_ENV

#: The folder holding the ``tui`` package: the apps run there, so ``-m tui.serve_app`` is this code.
_PACKAGE_ROOT = str(Path(tui.__file__).resolve().parent.parent)
#: The page's template: textual-serve's, but loading nothing from another origin (no Google Fonts).
TEMPLATES = Path(__file__).resolve().parent / "serve_templates"
PAGE = "index.html"
#: ``--listen`` when not given.
DEFAULT_LISTEN = "127.0.0.1:8765"
#: ``--max-viewers`` when not given.
DEFAULT_MAX_VIEWERS = 4
#: Seconds the "quit" message may take to reach an app.
SEND_GRACE_S = 0.5
#: Seconds an app has to quit when asked (the "quit" message), before it is TERMed.
QUIT_GRACE_S = 2.0
#: Seconds a TERMed app has before it is KILLed.
TERM_GRACE_S = 1.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only: ``localhost`` or an address in 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any address


class ListenError(Exception):
    """The server cannot listen where asked; the message says where and why."""


class ViewerSession(AppService):
    """One browser's app: ``argv`` run without a shell, with the watch pipe's read end passed on, in
    ``cwd``; :meth:`stop` ends it within seconds whatever it does.

    The other arguments are :class:`~textual_serve.app_service.AppService`'s.
    """

    def __init__(self, argv: Sequence[str], watch_fd: int, cwd: str, **kwargs: Any) -> None:
        super().__init__(" ".join(argv), **kwargs)
        self.argv = list(argv)
        self.watch_fd = watch_fd
        self.cwd = cwd

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        env = self._build_environment(width=width, height=height)
        env[WATCH_FD_ENV] = str(self.watch_fd)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=self.cwd, pass_fds=(self.watch_fd,))
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        """Ask the app to quit; TERM it after ``QUIT_GRACE_S``, KILL it after ``TERM_GRACE_S``
        more; reap it (at most about ``SEND_GRACE_S + QUIT_GRACE_S + 2 * TERM_GRACE_S`` s in all).
        Safe to call more than once."""
        task, process = self._task, self._process
        self._task = None
        if task is None or process is None:
            return
        with contextlib.suppress(TimeoutError):  # an app that reads no input: its pipe may be full
            await asyncio.wait_for(self.send_meta({"type": "quit"}), SEND_GRACE_S)
        for grace_s, then in ((QUIT_GRACE_S, process.terminate), (TERM_GRACE_S, process.kill)):
            try:
                await asyncio.wait_for(process.wait(), grace_s)
                break
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    then()
        await process.wait()
        with contextlib.suppress(TimeoutError):  # the relay ends with the app's stdout
            await asyncio.wait_for(task, TERM_GRACE_S)


class ViewerServer(Server):
    """textual-serve's :class:`~textual_serve.server.Server`, made safe (see the module doc).

    Args:
        app_argv: the app command, run once per browser (:func:`app_command`).
        host, port: where to listen (port 0: any free port; :attr:`port` is the real one once
            :meth:`run` printed the URL).
        max_viewers: how many browsers at once (at least 1).
        title: the page's title.
        token: the secret (default: 32 random bytes, URL-safe text).
    """

    def __init__(self, app_argv: Sequence[str], host: str, port: int, max_viewers: int = DEFAULT_MAX_VIEWERS,
                 title: str = "upwatch", token: str | None = None) -> None:
        super().__init__(" ".join(app_argv), host=host, port=port, title=title)
        self.app_argv = list(app_argv)
        self.max_viewers = max_viewers
        self.token = token or secrets.token_urlsafe(32)
        # One cookie per server: two servers on one machine (other ports) do not overwrite each other's.
        self.cookie = "upwatch_" + hashlib.sha256(self.token.encode()).hexdigest()[:12]
        self.sessions: set[ViewerSession] = set()
        self._watch_r, self._watch_w = os.pipe()  # the write end is never inherited: it ends with us

    # --- the rules, for every request ----------------------------------------------------------------

    def _has_token(self, request: web.Request) -> bool:
        given = request.query.get("token") or request.cookies.get(self.cookie) or ""
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def _full(self) -> str:
        """Why one more browser is refused: ``4 viewers are on already`` (``1 viewer is``)."""
        n = self.max_viewers
        return f"{n} viewer is on already" if n == 1 else f"{n} viewers are on already"

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if not self._has_token(request):
            raise web.HTTPForbidden(text="upwatch serve: open the URL with its ?token= (printed when the server started)\n")
        response = await handler(request)
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Cache-Control"] = "no-store"
        return response

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True)
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page; the websocket URL from the request's Host (a tunnel's local port), the static
        files relative; sets the token cookie. 503 when ``max_viewers`` browsers are on."""
        if len(self.sessions) >= self.max_viewers:
            raise web.HTTPServiceUnavailable(text=f"upwatch serve: {self._full()} (--max-viewers)\n")
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{'wss' if request.secure else 'ws'}://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template(PAGE, request, context)
        # The browser itself refuses anything from another origin (the page's inline script and
        # styles are textual-serve's; the websocket is this server's).
        ws_origin = f"{'wss' if request.secure else 'ws'}://{request.host}"
        response.headers["Content-Security-Policy"] = (
            f"default-src 'self'; connect-src 'self' {ws_origin}; script-src 'self' 'unsafe-inline'; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        response.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict", path="/")
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """The terminal stream of one browser: its Origin must be the page's own; one
        :class:`ViewerSession` (a read-only app process) for its lifetime."""
        origin = request.headers.get("Origin", "")
        own = f"{'https' if request.secure else 'http'}://{request.host}"
        if origin != own:  # not a secret: a plain comparison
            raise web.HTTPForbidden(text="upwatch serve: websocket from another origin\n")
        if len(self.sessions) >= self.max_viewers:
            raise web.HTTPServiceUnavailable(text=f"upwatch serve: {self._full()}\n")
        websocket = web.WebSocketResponse(heartbeat=15)
        session = ViewerSession(self.app_argv, self._watch_r, _PACKAGE_ROOT,
                                write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                close=websocket.close, download_manager=self.download_manager)
        self.sessions.add(session)  # before the first await: the count is never passed
        try:
            await websocket.prepare(request)
            await session.start(to_int(request.query.get("width", "80"), 80),
                                to_int(request.query.get("height", "24"), 24))
            await self._process_messages(websocket, session)
        finally:
            await session.stop()
            self.sessions.discard(session)
            await websocket.close()
        return websocket

    # --- running -------------------------------------------------------------------------------------

    def url(self) -> str:
        """The URL to open, token included (after :meth:`run` bound the port)."""
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/?token={self.token}"

    async def run(self, out: TextIO, stop: asyncio.Event | None = None) -> None:
        """Serve until SIGTERM, SIGINT or SIGHUP (or ``stop`` is set); the URL is ``out``'s first
        line once listening. Then every app process is ended (see :meth:`ViewerSession.stop`).

        Raises:
            ListenError: the address cannot be bound (in use, not this machine's).
        """
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        runner = web.AppRunner(await self._make_app(), access_log=None, shutdown_timeout=TERM_GRACE_S)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            try:
                await site.start()
            except OSError as exc:
                raise ListenError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from exc
            self.port = runner.addresses[0][1]
            out.write(self.url() + "\n")
            out.flush()
            await stop.wait()
            await site.stop()
            await asyncio.gather(*(s.stop() for s in list(self.sessions)))
        finally:
            await runner.cleanup()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            os.close(self._watch_w)
            os.close(self._watch_r)


def app_command(*, demo: bool, speed: float | None, config_path: str | None, hosts: Sequence[str]) -> list[str]:
    """The argv of one browser's app: the dashboard, always ``--read-only``, under
    :mod:`tui.serve_app` (which ends it when the server dies)."""
    argv = [sys.executable, "-m", "tui.serve_app", "--read-only"]
    if demo:
        return argv + ["--demo"] + ([] if speed is None else ["--speed", f"{speed:g}"])
    return argv + (["--config", os.path.abspath(config_path)] if config_path else []) + list(hosts)


def run_serve(*, listen: str, max_viewers: int, demo: bool, speed: float | None, config_path: str | None,
              hosts: Sequence[str], out: TextIO, err: TextIO) -> int:
    """``upwatch serve``: check the hosts here (the apps would only fail one by one), serve until a
    signal. Returns the exit status: 0, or 2 when there is no host or the address cannot be bound.

    Raises:
        tui.config.ConfigError: the configuration is wrong (``tui.cli`` prints it, exit 2).
    """
    host, port = parse_listen(listen)
    if not demo:
        from tui.cli import select_hosts

        if not select_hosts(hosts, config_path).hosts:
            err.write("upwatch serve: no hosts to show: give HOST/UNIT quick forms, --config, or --demo\n")
            return 2
    if not is_loopback(host):
        err.write(f"upwatch serve: warning: listening on {host}, not loopback: whoever can reach it and has "
                  "the URL sees the dashboard, and the token crosses the network unencrypted (plain HTTP). "
                  "An SSH tunnel to 127.0.0.1 is safer (docs/sharing.md).\n")
    server = ViewerServer(app_command(demo=demo, speed=speed, config_path=config_path, hosts=hosts), host, port,
                          max_viewers=max_viewers, title="upwatch demo" if demo else "upwatch")
    try:
        asyncio.run(server.run(out))
    except ListenError as exc:
        err.write(f"upwatch serve: {exc}\n")
        return 2
    return 0
