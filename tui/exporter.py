"""``upwatch exporter [--listen 127.0.0.1:9464] [--config F | HOST...]``: the hosts' watchers,
headless, with their state served as Prometheus metrics.

The same engine as ``upwatch status --watch`` (one :class:`~probes.watch.watcher.HostWatcher` per
host, built by :func:`tui.look.make_watchers`, with the start history for the ETA), and the
metrics of :mod:`tui.metrics` plus the exporter's own process metrics (``process_*``,
``python_*``). The HTTP server runs on the watchers' asyncio loop, so a scrape reads the models
between two events, never while one is applied: ``GET /metrics`` answers the Prometheus text
format, or OpenMetrics when the ``Accept`` header asks for it (``application/openmetrics-text``);
``GET /`` a line naming ``/metrics``; anything else 404 (a method other than GET or HEAD: 405).

It listens on 127.0.0.1 unless ``--listen`` names another address (:func:`tui.listen.parse_listen`:
``PORT`` and ``:PORT`` are 127.0.0.1 too). It runs until SIGINT or
SIGTERM and then ends every remote process it started. On stderr (the journal, under systemd) it
says, one line per change and not per retry, when a host cannot be reached or a probe cannot read,
and when it can again (:class:`SightNotes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from typing import IO

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder

from probes.clock import Clock, WallClock
from probes.data.events import CONNECTION_KINDS
from probes.data.state import KNOWN_PROBES, HostState
from probes.fold.model import HostModel
from probes.hosttext import one_line
from probes.sources.nvml import NvmlSource
from probes.spec import HostSpec
from probes.store.history import History
from probes.transport.runner import Runner
from probes.watch.watcher import HostWatcher
from tui.config import Config
from tui.listen import parse_listen, shown_address
from tui.metrics import HostsCollector
from tui.look import make_watchers

#: The default ``--listen``: loopback only (9464 is the port OpenTelemetry's Prometheus exporter uses).
DEFAULT_LISTEN = "127.0.0.1:9464"

#: Longest request head read, bytes; a client that sends more, or takes longer than
#: :data:`REQUEST_TIMEOUT_S` for it, is answered 400/408 and dropped.
MAX_REQUEST_BYTES = 16384
REQUEST_TIMEOUT_S = 10.0


class ListenError(Exception):
    """The exporter's address cannot be bound; the message says which and why."""


#: Longest reason in a :class:`SightNotes` line, in characters (a longer one is cut with "…").
NOTE_MAX_CHARS = 300


class SightNotes:
    """One line on ``out`` per change of what the exporter can see of a host, never one per retry:
    ``host gpu-a: cannot reach: <why>`` and ``host gpu-a: reachable again`` for the connection;
    ``host gpu-a: cannot read journal: <why>`` and ``host gpu-a: journal readable again`` for a
    probe of :data:`~probes.data.state.KNOWN_PROBES` that fails on the host (named as the
    ``probe`` label of ``upwatch_probe_up``). A failure counts as a change when its kind or
    reason changes, not its message (which may count attempts). Host text is one safe line.

    Args:
        out: where the lines go (the exporter's stderr: the journal, under systemd).
        prefix: put before each line.
    """

    def __init__(self, out: IO[str], prefix: str = "upwatch exporter: ") -> None:
        self._out = out
        self._prefix = prefix
        #: hosts told unreachable (not yet told reachable again)
        self._unreachable: set[str] = set()
        #: per host, the probes told failing: probe -> (kind, reason) told
        self._blind: dict[str, dict[str, tuple[str, str]]] = {}

    def _say(self, host: str, words: str) -> None:
        print(f"{self._prefix}host {one_line(host, max_chars=120)}: {words}", file=self._out, flush=True)

    def check(self, host: str, model: HostModel) -> None:
        """Compare ``model`` (the watcher's, read between two events) with what was last told of
        ``host``, and tell what changed."""
        fails = {p: f for p in KNOWN_PROBES if (f := model.failure(p)) is not None}
        lost = next((f for f in fails.values() if f.kind in CONNECTION_KINDS), None)
        if lost is not None and host not in self._unreachable:
            self._unreachable.add(host)
            self._say(host, f"cannot reach: {one_line(lost.message, max_chars=NOTE_MAX_CHARS) or lost.kind}")
        elif lost is None and host in self._unreachable:
            self._unreachable.discard(host)
            self._say(host, "reachable again")
        told = self._blind.setdefault(host, {})
        for probe in KNOWN_PROBES:
            f = fails.get(probe)
            if f is not None and f.kind in CONNECTION_KINDS:
                continue  # said as "cannot reach"; what the probe reads once back is told then
            if f is not None:
                key = (f.kind, f.reason)
                if told.get(probe) != key:
                    told[probe] = key
                    self._say(host, f"cannot read {probe}: {one_line(f.message, max_chars=NOTE_MAX_CHARS) or f.kind}")
            elif probe in told and model.has_read(probe):
                del told[probe]
                self._say(host, f"{probe} readable again")


async def tell_sight(watchers: Sequence[HostWatcher], changed: asyncio.Event, notes: SightNotes) -> None:
    """Run :meth:`SightNotes.check` on every watcher each time ``changed`` is set (forever;
    cancel it to end)."""
    while True:
        await changed.wait()
        changed.clear()
        for w in watchers:
            notes.check(w.spec.name, w.model)


def make_registry(snapshots: Callable[[], Sequence[tuple[str, HostState]]], clock: Callable[[], float]) -> CollectorRegistry:
    """A registry with the hosts' metrics (:class:`tui.metrics.HostsCollector`) and this process's
    own (``process_*``: CPU seconds, resident memory, open fds; ``python_*``: GC, version)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HostsCollector(snapshots, clock))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry, accept: str) -> tuple[bytes, str]:
    """One scrape of ``registry``: ``(body, content type)``, OpenMetrics when ``accept`` asks for
    it, else the Prometheus text format 0.0.4."""
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


async def _respond(writer: asyncio.StreamWriter, status: str, body: bytes, content_type: str,
                   head_only: bool = False) -> None:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")
    writer.write(head if head_only else head + body)
    await writer.drain()


async def _serve_one(registry: CollectorRegistry, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
    """Answer one HTTP request (one per connection: ``Connection: close``)."""
    try:
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
        except TimeoutError:
            await _respond(writer, "408 Request Timeout", b"request timeout\n", "text/plain")
            return
        except asyncio.LimitOverrunError:
            await _respond(writer, "400 Bad Request", b"request head too long\n", "text/plain")
            return
        except asyncio.IncompleteReadError:
            return  # the client went away before a whole request head
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3:
            await _respond(writer, "400 Bad Request", b"bad request line\n", "text/plain")
            return
        method, target, _version = parts
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if method not in ("GET", "HEAD"):
            await _respond(writer, "405 Method Not Allowed", b"GET /metrics\n", "text/plain")
            return
        path = target.split("?", 1)[0]
        if path == "/metrics":
            body, ctype = render(registry, headers.get("accept", ""))
            await _respond(writer, "200 OK", body, ctype, head_only=method == "HEAD")
        elif path == "/":
            await _respond(writer, "200 OK", b"upwatch exporter: metrics at /metrics\n", "text/plain; charset=utf-8",
                           head_only=method == "HEAD")
        else:
            await _respond(writer, "404 Not Found", b"not found: try /metrics\n", "text/plain")
    except (ConnectionError, OSError):
        pass  # the scraper hung up mid-answer: nothing to tell it
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def serve(config: Config, host: str, port: int, *, stop: asyncio.Event,
                runner_factory: Callable[[HostSpec], Runner] | None = None,
                gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
                clock: Clock | None = None, history: History | None = None,
                on_listening: Callable[[int], None] | None = None, notes: IO[str] | None = None) -> None:
    """Watch every host of ``config`` and serve their metrics on ``host:port`` until ``stop``.

    Args:
        config: the hosts and poll intervals. host, port: where to listen (port 0: any free one).
        stop: set it to end; the server closes, then every watcher stops (remote processes end).
        runner_factory, gpu_source_factory: as :func:`tui.look.make_watchers` (default: live).
        clock: the watchers' and the ETA's clock (default: wall time).
        history: the start history (finished starts written, typical durations read), or None.
        on_listening: called with the bound port once the server listens.
        notes: where :class:`SightNotes` tells, one line per change, that a host cannot be reached
            or a probe cannot read (and when it can again); None: nowhere.

    Raises:
        ListenError: the address cannot be bound (in use, not an address of this machine).
    """
    clock = clock or WallClock()
    watchers: list[HostWatcher] = []  # made once the address is bound: nothing to undo before
    teller: asyncio.Task[None] | None = None

    def snapshots() -> list[tuple[str, HostState]]:
        now = clock.now()
        return [(w.spec.name, w.state(now)) for w in watchers]

    registry = make_registry(snapshots, clock.now)
    try:
        server = await asyncio.start_server(lambda r, w: _serve_one(registry, r, w), host, port,
                                            limit=MAX_REQUEST_BYTES)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    try:
        changed = asyncio.Event()  # metrics are read on demand; only the sight notes wait on changes
        watchers.extend(make_watchers(config, changed, clock, runner_factory, gpu_source_factory, history))
        for w in watchers:
            w.start()
        if notes is not None:
            teller = asyncio.create_task(tell_sight(watchers, changed, SightNotes(notes)))
        if on_listening is not None:
            on_listening(server.sockets[0].getsockname()[1])
        await stop.wait()
    finally:
        if teller is not None:
            teller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await teller
        server.close()
        await server.wait_closed()
        await asyncio.gather(*(w.stop() for w in watchers), return_exceptions=True)


def run_exporter(config: Config, listen: str, *, err: IO[str] | None = None) -> int:
    """``upwatch exporter``: serve until SIGINT or SIGTERM; returns 0, or 2 when ``listen`` cannot
    be bound (one line on ``err``, default stderr, says why)."""
    err = err or sys.stderr
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        print(f"upwatch exporter: {exc}", file=err)
        return 2

    def listening(bound: int) -> None:
        print(f"upwatch exporter: {len(config.hosts)} host(s), metrics at http://{shown_address(host, bound)}/metrics",
              file=err, flush=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread (tests)
                loop.add_signal_handler(sig, stop.set)
        await serve(config, host, port, stop=stop, history=hist, on_listening=listening, notes=err)

    hist = History()
    if hist.problem:
        print(f"upwatch exporter: {hist.problem}", file=err)
    try:
        asyncio.run(main())
    except ListenError as exc:
        print(f"upwatch exporter: {exc}", file=err)
        return 2
    finally:
        hist.close()
    return 0
