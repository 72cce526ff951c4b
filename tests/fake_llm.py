#!/usr/bin/env python3
"""A stand-in LLM server: replays a real startup log and answers HTTP like SGLang.

Standalone and stdlib-only (it runs as a systemd unit's ``ExecStart`` inside the test host of
tests/systemd_host.py; it imports nothing from the repository).

Replay
    The lines of ``--log`` go to stdout one by one, each flushed. The pause before a line is the
    time between its timestamp and the previous timestamped line, divided by ``--speed`` and capped
    at ``--max-gap`` seconds (never negative). Timestamps understood: SGLang's ``[YYYY-MM-DD
    HH:MM:SS]`` / ``[YYYY-MM-DD HH:MM:SS TP0]`` prefix and Python logging's ``YYYY-MM-DD HH:MM:SS,mmm``
    prefix. Lines without one (tqdm bars, vLLM's year-less ``INFO 03-07 12:29:02``, blank lines)
    follow after ``--line-gap`` seconds. Lines are split on ``\\n`` only; a ``\\r`` inside a line is
    kept (journald keeps it too).

HTTP (``--host``:``--port``, default ``0.0.0.0:30000``; the port the recorded log names in its
``server_args`` and Uvicorn lines is replaced by ``--port``, as a real server prints its own)
    * Nothing listens (connections are refused) until the first line matching ``--bind-at``
      (default: ``Uvicorn running on|fired up and ready to roll``): the port is bound just before
      that line is printed (uvicorn prints it after binding).
    * Then ``GET /health`` (and ``/health_generate``) answers 503 with an empty body, until the first
      line matching ``--ready-at`` (default: ``The server is fired up and ready to roll!``); from
      just before that line is printed it answers 200 with an empty body (SGLang 0.5.x; FORMATS 3.1).
    * ``GET /v1/models``: ``{"object":"list","data":[{"id":MODEL,"object":"model",...}]}`` (also while
      starting, as SGLang). MODEL is ``--model``, else ``served_model_name='...'`` from the log's
      ``server_args`` line, else ``default``.
    * ``POST /v1/completions``: a one-token text completion (JSON). Anything else: 404 JSON.
    * With ``--access-log``, every request prints an uvicorn access line
      (``[time] INFO:     ADDR:PORT - "GET /health HTTP/1.1" 503 Service Unavailable``).
    The server keeps serving after the log ends (the process stays up).

Faults
    * ``--crash-at REGEX``: after printing the first line matching it, print ``--crash-line`` (if
      given) to stderr and exit with ``--exit-code`` (default 1).
    * ``--hang-at REGEX``: after printing the first line matching it, print nothing more (the HTTP
      side stays as it is) and sleep until killed.

SIGTERM (and SIGINT) end the process at once with exit status 0, like a server shutting down.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SGLANG_TS = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: [^\]]*)?\]")
LOGGING_TS = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3} ")
SERVED_NAME = re.compile(rb"served_model_name='([^']*)'")

DEFAULT_BIND_AT = r"Uvicorn running on|fired up and ready to roll"
DEFAULT_READY_AT = r"The server is fired up and ready to roll!"


def timestamp(line: bytes) -> dt.datetime | None:
    """The time a log line carries at its start, or None."""
    for pattern in (SGLANG_TS, LOGGING_TS):
        m = pattern.match(line)
        if m:
            try:
                return dt.datetime.strptime(m.group(1).decode(), "%Y-%m-%d %H:%M:%S")
            except ValueError:
                return None
    return None


class State:
    """What the HTTP side shows; changed by the replay thread, read by request threads."""

    def __init__(self, model: str, access_log: bool) -> None:
        self.model = model
        self.ready = False
        self.access_log = access_log
        self.lock = threading.Lock()  # one writer of stdout at a time


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            pass  # the default writes to stderr; --access-log prints our own line instead

        def _send(self, code: int, body: bytes = b"", ctype: str | None = None) -> None:
            self.send_response(code)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body and self.command != "HEAD":
                self.wfile.write(body)
            if state.access_log:
                now = time.strftime("%Y-%m-%d %H:%M:%S")
                phrase = self.responses.get(code, ("",))[0]
                line = (f'[{now}] INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                        f'"{self.command} {self.path} HTTP/1.1" {code} {phrase}\n')
                with state.lock:
                    sys.stdout.write(line)
                    sys.stdout.flush()

        def _json(self, code: int, obj: object) -> None:
            self._send(code, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/health_generate"):
                self._send(200 if state.ready else 503)
            elif path == "/v1/models":
                self._json(200, {"object": "list", "data": [{
                    "id": state.model, "object": "model", "created": int(time.time()),
                    "owned_by": "sglang", "root": state.model, "parent": None}]})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if path != "/v1/completions":
                self._json(404, {"detail": "Not Found"})
                return
            try:
                req = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, {"object": "error", "message": "invalid JSON", "code": 400})
                return
            prompt = req.get("prompt", "") if isinstance(req, dict) else ""
            prompt_tokens = max(1, len(str(prompt).split()))
            self._json(200, {
                "id": f"cmpl-{os.getpid()}-{int(time.time() * 1000)}", "object": "text_completion",
                "created": int(time.time()), "model": state.model,
                "choices": [{"index": 0, "text": " Paris", "logprobs": None, "finish_reason": "length",
                             "matched_stop": None}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1,
                          "total_tokens": prompt_tokens + 1}})

    return Handler


def serve(state: State, host: str, port: int) -> ThreadingHTTPServer:
    """Bind now and serve from a daemon thread."""
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer((host, port), make_handler(state))
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log", required=True, help="the startup log to replay")
    p.add_argument("--speed", type=float, default=20.0, help="time compression (default 20)")
    p.add_argument("--max-gap", type=float, default=2.0, help="longest pause between lines, s")
    p.add_argument("--line-gap", type=float, default=0.005, help="pause before a line without timestamp, s")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--model", default=None)
    p.add_argument("--bind-at", default=DEFAULT_BIND_AT, help="regex: bind the port at this line")
    p.add_argument("--ready-at", default=DEFAULT_READY_AT, help="regex: /health 200 from this line")
    p.add_argument("--crash-at", default=None, help="regex: exit after printing this line")
    p.add_argument("--crash-line", default=None, help="text printed to stderr before the crash exit")
    p.add_argument("--exit-code", type=int, default=1)
    p.add_argument("--hang-at", default=None, help="regex: stop printing after this line")
    p.add_argument("--access-log", action="store_true", help="print an uvicorn access line per request")
    return p.parse_args(argv)


#: The port a recorded log says its server used: SGLang's ``server_args=… port=N``, or Uvicorn's line.
LOG_PORT = re.compile(rb"[ (,]port=(\d+)\b|Uvicorn running on https?://[^\s/]*:(\d+) \(Press CTRL")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.speed <= 0:
        print("--speed must be > 0", file=sys.stderr)
        return 2

    # SIGTERM/SIGINT are blocked in every thread and taken by one sigwait() thread: a handler of the
    # main thread would miss a signal the kernel gives to another thread (the HTTP thread), which
    # happened at systemd-shutdown's broadcast SIGTERM and left the process running.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

    def stop() -> None:
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
        try:
            sys.stdout.flush()
        finally:
            os._exit(0)

    threading.Thread(target=stop, name="signals", daemon=True).start()

    with open(args.log, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    model = args.model
    if model is None:
        m = SERVED_NAME.search(data)
        model = m.group(1).decode(errors="replace") if m else "default"

    # A real server prints the port it serves on: the recorded log's port (its server_args or
    # Uvicorn line) becomes --port, so the log and the listening socket agree.
    m = LOG_PORT.search(data)
    if m is not None and int(m.group(1) or m.group(2)) != args.port:
        recorded = (m.group(1) or m.group(2))
        port_re = re.compile(rb"(?<=[ (,]port=)" + recorded + rb"\b|(?<=:)" + recorded + rb"(?= \(Press CTRL)")
        lines = [port_re.sub(str(args.port).encode(), line) for line in lines]

    bind_at = re.compile(args.bind_at.encode())
    ready_at = re.compile(args.ready_at.encode())
    crash_at = re.compile(args.crash_at.encode()) if args.crash_at else None
    hang_at = re.compile(args.hang_at.encode()) if args.hang_at else None
    state = State(model, args.access_log)
    server: ThreadingHTTPServer | None = None
    out = sys.stdout.buffer
    last_ts: dt.datetime | None = None

    for line in lines:
        ts = timestamp(line)
        if ts is not None and last_ts is not None:
            gap = min(args.max_gap, max(0.0, (ts - last_ts).total_seconds() / args.speed))
        else:
            gap = args.line_gap
        if ts is not None:
            last_ts = ts
        if gap > 0:
            time.sleep(gap)
        if server is None and bind_at.search(line):
            server = serve(state, args.host, args.port)
        if not state.ready and ready_at.search(line):
            if server is None:
                server = serve(state, args.host, args.port)
            state.ready = True
        with state.lock:
            out.write(line + b"\n")
            out.flush()
        if crash_at is not None and crash_at.search(line):
            if args.crash_line is not None:
                sys.stderr.write(args.crash_line + "\n")
                sys.stderr.flush()
            os._exit(args.exit_code)  # like a dying server: no cleanup, threads and all
        if hang_at is not None and hang_at.search(line):
            break
    while True:  # a server stays up (and a hung one stays silent)
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
