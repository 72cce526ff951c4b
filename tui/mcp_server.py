"""``upwatch mcp [--config F] [--allow-actions] [HOST ...]``: upwatch's answers for a coding agent,
as a Model Context Protocol server on standard input/output (the official ``mcp`` SDK's
:class:`~mcp.server.mcpserver.MCPServer`).

Instead of ``sleep 120 && curl /health`` (which an old process may answer while the new one never
comes up), an agent calls ``wait_ready`` and gets ``upwatch wait``'s outcome, with progress
notifications while it waits. One :class:`~probes.watch.watcher.HostWatcher` per configured host
runs for the whole session (started with the server, stopped when the client closes the
connection: every remote process it started ends then).

The tools and what they return (JSON; every string from a host is sanitised,
:func:`probes.hosttext.one_line`):

* ``list_hosts()`` → ``{"hosts": [{"host", "unit", "ssh", "engine", "state", "headline",
  "readiness", "answered", "verdict": {"level", "sentence"}}]}``: ``host_status``'s fields
  (:func:`tui.status.look_json`), ``answered`` false for a host that did not answer in time or
  could not be reached at all.
* ``host_status(host)`` → the object ``upwatch status --json`` prints for the host
  (:func:`tui.status.host_json`), once the host answered (at most :data:`ANSWER_WAIT_S`).
* ``wait_ready(host, until="ready"|"healthy"|"serving", timeout_s=1800)`` → ``{"outcome"
  (ready, failed, restart_loop, timeout, unreachable), "exit_code" (upwatch wait's: 0, 1, 2, 3,
  4), "sentence" (the line wait ends with), "decisive_line" ({"text", "line", "time" (ISO 8601
  UTC or null), "cause", "hint"} or null)}``. The rules are ``upwatch wait``'s
  (:func:`tui.wait.settle`); ``healthy`` is ``ready``: the engine's ready line and ``/health`` OK
  from the current process. After this session's ``restart`` tool only a start that began after
  the restart counts. A progress notification is sent whenever the line ``wait`` would print
  changes (its message; ``progress``: seconds waited, ``total``: ``timeout_s``).
* ``log(host, lines=50, grep=None)`` → ``{"host", "lines": [{"line" (the journal entry's number
  in this session), "time" (ISO 8601 UTC or null), "text", "systemd"}], "kept"}``: the last
  ``lines`` journal entries kept (at most :data:`MAX_LOG_LINES`), with ``grep`` only those matching
  it (a Python regular expression, case-insensitive).
* ``report(host)`` → the Markdown report (:mod:`tui.report`), as ``c`` copies it.
* With ``--allow-actions`` only: ``restart(host)`` and ``stop(host)`` → ``{"host", "action",
  "command", "outcome" (ok, failed, error, refused), "exit_status", "output"}``; each is written
  to the audit log with ``actor`` ``mcp``. There is no kill. Without the flag these tools do not
  exist; with ``read_only = true`` in the configuration they are refused (and audited).

A tool given an unknown host, a bad ``until`` or ``grep``, returns an error result that says why.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from probes.clock import Clock, WallClock
from probes.data.state import HostState
from probes.hosttext import one_line
from probes.ops.actions import ActionRefused, execute, plan
from probes.sources.nvml import NvmlSource
from probes.spec import HostSpec
from probes.store.audit import AuditLog
from probes.store.history import History
from probes.transport.runner import Runner
from probes.watch.watcher import HostWatcher
from tui import __version__
from tui.config import Config
from tui.host_report import watcher_report
from tui.look import Answered, never_reached
from tui.status import iso_utc, look_json
from tui.wait import OUTCOMES, progress_line, read_backlog, settle

#: Real seconds ``host_status`` (and ``log``, ``report``) wait for a host's first full answer.
ANSWER_WAIT_S = 15.0
#: The most journal lines one ``log`` call returns.
MAX_LOG_LINES = 1000
#: The longest ``wait_ready`` timeout, seconds.
MAX_WAIT_S = 6 * 3600.0
#: The actions an agent may be given (``--allow-actions``); never kill.
AGENT_ACTIONS = ("restart", "stop")

_INSTRUCTIONS = (
    "upwatch watches LLM servers (SGLang, vLLM, ...) starting as systemd units on GPU hosts. To know "
    "whether a server is up, call wait_ready(host) instead of polling its /health with sleep: it "
    "returns when the unit's current process is ready (its engine's ready line and /health from that "
    "process), failed (with the decisive log line), is in a restart loop, or the timeout passed. "
    "host_status gives the whole state, log the journal lines, report a Markdown summary to show a person.")


class Session:
    """The hosts of one MCP session: a running :class:`HostWatcher` per host, and the events
    that tell waiters a host's model changed.

    Args:
        config: the hosts (and their poll intervals). allow_actions: offer restart and stop.
        runner_factory, gpu_source_factory: as :func:`tui.look.collect` (default: the live ones).
        clock: the clock (default: wall time). audit: the actions' audit log (default: the user's).
        history: the start history (typical durations; None: none).
    """

    def __init__(self, config: Config, *, allow_actions: bool = False,
                 runner_factory: Callable[[HostSpec], Runner] | None = None,
                 gpu_source_factory: Callable[[HostSpec], NvmlSource | None] | None = None,
                 clock: Clock | None = None, audit: AuditLog | None = None,
                 history: History | None = None) -> None:
        if runner_factory is None or gpu_source_factory is None:
            from tui.live import gpu_source_for, runner_for

            runner_factory = runner_factory or runner_for
            gpu_source_factory = gpu_source_factory or gpu_source_for
        self.config = config
        self.allow_actions = allow_actions
        self.clock = clock or WallClock()
        self.audit = audit if audit is not None else AuditLog()
        self._waiters: dict[str, set[asyncio.Event]] = {spec.name: set() for spec in config.hosts}
        self.watchers = {spec.name: HostWatcher(
            spec, runner_factory(spec), self.clock, self._changed,
            unit_interval_s=config.unit_interval_s, health_interval_s=config.health_interval_s,
            gpu_interval_s=config.gpu_interval_s, gpu_source=gpu_source_factory(spec), history=history)
            for spec in config.hosts}
        #: per host, ``(since, unit_after)`` of this session's last restart (see :func:`tui.wait_rules.outcome`)
        self.restarted: dict[str, tuple[float, float]] = {}
        self._answered = Answered()
        #: hosts that have answered once: later calls do not wait for a quiet journal again
        self._settled: set[str] = set()

    def _changed(self, w: HostWatcher) -> None:
        for event in self._waiters.get(w.name, ()):
            event.set()

    def start(self) -> None:
        """Start every watcher on the running loop."""
        for w in self.watchers.values():
            w.start()

    async def stop(self) -> None:
        """Stop every watcher (each ends the remote processes it started)."""
        await asyncio.gather(*(w.stop() for w in self.watchers.values()), return_exceptions=True)

    def watcher(self, host: str) -> HostWatcher:
        """The watcher of ``host``. Raises :class:`ToolError` (listing the hosts) for another name."""
        w = self.watchers.get(host)
        if w is None:
            raise ToolError(f"no host named {one_line(host, max_chars=80)!r}; the hosts are: "
                            f"{', '.join(self.watchers) or 'none'}")
        return w

    @asynccontextmanager
    async def changes(self, host: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever ``host``'s model changes, while the block runs."""
        event = asyncio.Event()
        self._waiters[host].add(event)
        try:
            yield event
        finally:
            self._waiters[host].discard(event)

    def _has_answered(self, w: HostWatcher) -> bool:
        """Whether ``w`` has answered once in this session (:class:`tui.look.Answered`: each
        probe delivered or failed, the journal backlog read); remembered, so a journal that never
        goes quiet (progress bars) delays only the first call."""
        if w.name not in self._settled and self._answered(w):
            self._settled.add(w.name)
        return w.name in self._settled

    async def answered(self, host: str, timeout_s: float = ANSWER_WAIT_S) -> tuple[HostWatcher, bool]:
        """``host``'s watcher once it has answered (:meth:`_has_answered`), or after ``timeout_s``;
        and whether it answered."""
        w = self.watcher(host)
        async with self.changes(host) as changed:
            await read_backlog(w, changed, timeout_s, self._has_answered)
        return w, self._has_answered(w)

    # --- the tools ------------------------------------------------------------------------------

    async def list_hosts(self) -> dict[str, Any]:
        """``list_hosts``: every host, its unit and a few words of its state, once each host has
        answered (or after :data:`ANSWER_WAIT_S`, as ``host_status``): a first call right after
        the server started must not read an empty log as "nothing wrong"."""
        looks = await asyncio.gather(*(self.answered(name) for name in self.watchers))
        out = []
        now = self.clock.now()
        for w, answered in looks:
            # the fields of host_status's object (one state: "unknown" for a host never reached)
            item = look_json(w.spec, w.state(now), answered, ANSWER_WAIT_S, now)
            v = item["verdict"]
            out.append({"host": w.name, "unit": item["unit"], "ssh": w.spec.target, "engine": item["engine"],
                        "state": item["state"], "headline": item["headline"], "readiness": item["readiness"],
                        # the wait for an answer also ends when the host could not be reached at all
                        "answered": answered and not never_reached(w),
                        "verdict": {"level": v["level"], "sentence": v["sentence"]}})
        return clean_obj({"hosts": out})

    async def host_status(self, host: str) -> dict[str, Any]:
        """``host_status``: ``upwatch status --json``'s object for ``host``."""
        w, answered = await self.answered(host)
        return clean_obj(look_json(w.spec, w.state(), answered, ANSWER_WAIT_S, self.clock.now()))

    async def wait_ready(self, host: str, until: str, timeout_s: float,
                         progress: Callable[[float, str], Any] | None = None) -> dict[str, Any]:
        """``wait_ready``: ``upwatch wait``'s rules (:func:`tui.wait.settle`) on the session's watcher.

        Args:
            progress: called (and awaited, when it returns an awaitable) with the seconds waited
                and ``wait``'s line whenever that line changes.
        """
        if until not in ("ready", "healthy", "serving"):
            raise ToolError(f"until is ready, healthy or serving, not {one_line(until, max_chars=40)!r}")
        if not 0 <= timeout_s <= MAX_WAIT_S:
            raise ToolError(f"timeout_s is 0 to {MAX_WAIT_S:g} seconds")
        w = self.watcher(host)
        since, unit_after = self.restarted.get(host, (0.0, 0.0))
        t0 = time.monotonic()
        lines: asyncio.Queue[str] = asyncio.Queue()
        last = ""

        def on_state(s: HostState, code: int | None) -> None:
            nonlocal last
            line = progress_line(s, since)
            if line != last:
                last = line
                lines.put_nowait(line)

        async def forward() -> None:
            while True:
                line = await lines.get()
                try:
                    if progress is not None:
                        sent = progress(time.monotonic() - t0, line)
                        if asyncio.iscoroutine(sent):
                            await sent
                finally:
                    lines.task_done()

        sender = asyncio.create_task(forward())
        try:
            async with self.changes(host) as changed:
                await read_backlog(w, changed, timeout_s, self._has_answered)
                end = await settle(w, changed, since=since, until="serving" if until == "serving" else "ready",
                                   unit_after=unit_after, timeout_s=timeout_s, started=t0, on_state=on_state)
            # the last lines' notifications go out before the answer (bounded: a stuck client)
            joined = asyncio.ensure_future(lines.join())
            await asyncio.wait([joined], timeout=5.0)
            joined.cancel()
        finally:
            sender.cancel()
        s = end.state
        err = s.error if end.code in (1, 2) else None
        return clean_obj({"outcome": OUTCOMES[end.code], "exit_code": end.code, "sentence": end.sentence,
                      "decisive_line": ({"text": err.text, "line": err.line,
                                         "time": iso_utc(s.failed_at), "cause": err.cause,
                                         # the start's hint (status --json's, wait's), not only the line's:
                                         # a start-limit loop adds its reset-failed
                                         "hint": s.hint or None} if err is not None else None)})

    async def log(self, host: str, lines: int = 50, grep: str | None = None) -> dict[str, Any]:
        """``log``: the last ``lines`` journal entries kept, or those matching ``grep``."""
        if not 1 <= lines <= MAX_LOG_LINES:
            raise ToolError(f"lines is 1 to {MAX_LOG_LINES}")
        try:
            pattern = re.compile(grep, re.IGNORECASE) if grep else None
        except re.error as exc:
            raise ToolError(f"grep is not a regular expression: {exc}") from None
        w, _ = await self.answered(host)
        kept = w.entries_after(0)
        shown = [(e, one_line(e.text)) for e in kept]
        if pattern is not None:
            shown = [(e, text) for e, text in shown if pattern.search(text)]
        return {"host": host, "kept": len(kept),
                "lines": [{"line": e.seq, "time": iso_utc(e.time), "text": text, "systemd": e.systemd}
                          for e, text in shown[-lines:]]}

    async def report(self, host: str) -> str:
        """``report``: the Markdown report of ``host``."""
        w, _ = await self.answered(host)
        return watcher_report(w, self.clock.now(), source=f"upwatch mcp, watching over {w.spec.target}")

    async def act(self, host: str, action: str) -> dict[str, Any]:
        """``restart`` / ``stop``: run the action on ``host``'s unit through its watcher's runner,
        audited with actor ``mcp``; refused (and audited) when the configuration is read-only."""
        if not self.allow_actions or action not in AGENT_ACTIONS:
            raise ToolError(f"{action} is not offered")  # the tools do not exist then; belt and braces
        w = self.watcher(host)
        if self.config.read_only:
            self.audit.refused(w.spec, action, "read-only (read_only = true in the configuration)", actor="mcp")
            return {"host": host, "action": action, "command": None, "outcome": "refused", "exit_status": None,
                    "output": "read-only: read_only = true in the configuration"}
        try:
            p = plan(w.spec, action)
        except ActionRefused as exc:
            self.audit.refused(w.spec, action, str(exc), actor="mcp")
            return clean_obj({"host": host, "action": action, "command": None, "outcome": "refused",
                          "exit_status": None, "output": str(exc)})
        since = self.clock.now()
        result = await execute(p, w.runner, self.audit, actor="mcp")
        if action == "restart" and result.ok:
            self.restarted[host] = (since, self.clock.now())
        elif action == "stop":
            self.restarted.pop(host, None)
        return clean_obj({"host": host, "action": action, "command": p.shown, "outcome": result.outcome,
                      "exit_status": result.exit_status, "output": result.output})


def clean_obj(obj: dict[str, Any]) -> dict[str, Any]:
    """A JSON object with every string in it through :func:`clean`."""
    return {k: clean(v) for k, v in obj.items()}


def clean(value: Any) -> Any:
    """``value`` (JSON-ready: dicts, lists, strings, numbers) with every string through the one
    sanitiser (:func:`probes.hosttext.one_line`): what an agent reads holds no escape code."""
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def build_server(session: Session) -> MCPServer[None]:
    """The MCP server offering ``session``'s tools (see the module doc); its lifespan starts and
    stops the session's watchers."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer[None]) -> AsyncIterator[None]:
        session.start()
        try:
            yield None
        finally:
            await session.stop()

    server: MCPServer[None] = MCPServer("upwatch", version=__version__, instructions=_INSTRUCTIONS,
                                        lifespan=lifespan, log_level="WARNING")

    @server.tool()
    async def list_hosts() -> dict[str, Any]:
        """The hosts upwatch watches, once each has answered (at most a few seconds): {"hosts":
        [{"host", "unit", "ssh", "engine", "state" (waiting: read, no start seen yet; loading,
        ready, failed, stopped; unknown: never reached, or nothing could be read),
        "headline" (the card's first word), "readiness" (inactive, port_closed, http_unhealthy,
        healthy, serving, unknown), "answered" (false: the host did not answer in time or could
        not be reached, and the verdict says so), "verdict": {"level" (ok, info, warning, error), "sentence"}}]}."""
        return await session.list_hosts()

    @server.tool()
    async def host_status(host: str) -> dict[str, Any]:
        """One host's whole state: the object `upwatch status --json` prints for it (host, unit,
        engine, state, phase, progress, readiness, restarts, restart_loop, gpus, error, cause,
        hint, last_line, verdict {level, kind, sentence, evidence}, connection, knowledge (what
        could and could not be read), typical, download ...)."""
        return await session.host_status(host)

    @server.tool()
    async def wait_ready(host: str, ctx: Context, until: Literal["ready", "healthy", "serving"] = "ready",
                         timeout_s: float = 1800.0) -> dict[str, Any]:
        """Block until the unit's current process is ready, has failed, is in a restart loop, or
        timeout_s seconds passed: the rules and outcomes of `upwatch wait`. Call this instead of
        polling /health with sleep. until: ready or healthy (the engine's ready line and /health
        OK from the current process, not an earlier one), serving (also a one-token generation).
        After this session's restart tool, only a start that began after it counts. Progress
        notifications say the phase while it waits. Returns {"outcome" (ready, failed,
        restart_loop, timeout, unreachable), "exit_code" (0, 1, 2, 3, 4 as upwatch wait),
        "sentence", "decisive_line" ({"text", "line", "time", "cause", "hint"} or null)}."""
        return await session.wait_ready(host, until, timeout_s,
                                        lambda waited, line: ctx.report_progress(waited, timeout_s, line))

    @server.tool()
    async def log(host: str, lines: int = 50, grep: str | None = None) -> dict[str, Any]:
        """The unit's journal lines upwatch has read (sanitised), newest last: the last `lines`
        (1-1000), only those matching `grep` (a case-insensitive regular expression) when given.
        Returns {"host", "kept" (entries kept), "lines": [{"line", "time" (ISO 8601 UTC or null),
        "text", "systemd" (written by systemd about the unit)}]}."""
        return await session.log(host, lines, grep)

    @server.tool()
    async def report(host: str) -> str:
        """A Markdown report of the host to show a person: state and phase timeline, verdict
        with evidence, the decisive line with the 10 lines before it, unit state, GPUs,
        readiness, and what upwatch could not read."""
        return await session.report(host)

    if session.allow_actions:
        @server.tool()
        async def restart(host: str) -> dict[str, Any]:
            """systemctl restart the host's unit (written to the audit log, actor mcp). Then call
            wait_ready: only the new start counts. Returns {"host", "action", "command", "outcome"
            (ok, failed, error, refused), "exit_status", "output"}."""
            return await session.act(host, "restart")

        @server.tool()
        async def stop(host: str) -> dict[str, Any]:
            """systemctl stop the host's unit (written to the audit log, actor mcp). Returns
            {"host", "action", "command", "outcome" (ok, failed, error, refused), "exit_status",
            "output"}."""
            return await session.act(host, "stop")

    return server


#: The SDK's logger that debug-logs what its stdio transport could not read (mcp 2.x:
#: ``JSONRPCDispatcher._dispatch``, "transport yielded exception: %r").
_SDK_DISPATCH_LOGGER = "mcp.shared.jsonrpc_dispatcher"


class _SayUnreadableInput(logging.Filter):
    """Says on stderr a line of standard input that is not a JSON-RPC message. The SDK's stdio
    transport hands its parse failure to the dispatcher, which has no hook reachable from
    :meth:`MCPServer.run` (``on_stream_exception`` is not passed on the server side) and only
    debug-logs it: no parse error (-32700) goes back, and without this nothing is said. This
    filter takes that log record (its other debug records stay dropped)."""

    def filter(self, record: logging.LogRecord) -> bool:
        import sys

        if str(record.msg).startswith("transport yielded exception") and record.args:
            exc = record.args[0] if isinstance(record.args, tuple) else record.args
            print(f"upwatch mcp: a line on standard input is not a JSON-RPC message (ignored): "
                  f"{one_line(str(exc), max_chars=300)}", file=sys.stderr, flush=True)
            return False
        return record.levelno >= logging.WARNING


def run_mcp(config: Config, *, allow_actions: bool) -> int:
    """Serve ``config``'s hosts over stdio until the client closes the connection; returns 0.
    Nothing but the protocol is written to stdout (a history problem, or a line of input that is
    not JSON-RPC, goes to stderr)."""
    import sys

    sdk = logging.getLogger(_SDK_DISPATCH_LOGGER)
    sdk.setLevel(logging.DEBUG)
    sdk.addFilter(_SayUnreadableInput())
    history = History()
    if history.problem:
        print(f"upwatch mcp: {history.problem}", file=sys.stderr)
    try:
        build_server(Session(config, allow_actions=allow_actions, history=history)).run("stdio")
    finally:
        history.close()
    return 0
