"""The health probe: one HTTP look at the server → a rung of the readiness ladder (:class:`Health`).

Rungs, lowest first (docs/architecture.md's readiness ladder): ``port_closed`` (nothing answers HTTP) → ``http_unhealthy``
(HTTP answers, not 2xx, or no answer in time) → ``healthy`` (``GET /health`` 2xx) → ``serving``
(a one-token completion answered). ``inactive`` is the unit probe's business, not this one's.

What the servers do (SGLang's ``srt/entrypoints/http_server.py``, vLLM's
``vllm/entrypoints/openai/api_server.py``; SGLang 0.4.6 / 0.5.5 / 0.5.23 and vLLM 0.11.0 wheels):

* **Before the port opens** both refuse TCP connections for minutes: SGLang binds only after every
  scheduler has loaded its weights and captured its CUDA graphs; vLLM binds early but does not
  listen until the engine is built. Direct TCP gives ``httpx.ConnectError`` (``[Errno 111]
  Connection refused``). Through an SSH port forward the *local* listener accepts, the channel
  open fails, and asyncssh closes the socket: httpx raises ``RemoteProtocolError`` ("Server
  disconnected without sending a response.") or ``ReadError``, never ``ConnectError``. Both are
  ``port_closed``.
* **SGLang 0.5.x** answers ``/health`` **503 with an empty body** while ``server_status`` is
  Starting (bound, warm-up request not yet done), then 200; ``/v1/models`` already answers 200
  during warm-up. After Starting, ``/health`` generates one token and waits up to
  ``SGLANG_HEALTH_CHECK_TIMEOUT`` (20 s) for it; a busy or hung scheduler makes it slow, then
  503. A ``timeout_s`` shorter than 20 s reads a slow answer as ``http_unhealthy`` "no answer".
  0.4.6 answered 200 as soon as it was bound.
* **vLLM** answers ``/health`` **200 with an empty body** as soon as it listens (there is no warm-up
  state). A dead engine gives 503 from 0.11.0 (500 before), then the process exits and the port
  disappears.
* ``/v1/models`` is ``{"object": "list", "data": [{"id": …, "object": "model", …}]}`` on both.
  With ``--api-key`` SGLang answers 401 on everything but ``/health*`` and ``/metrics``; vLLM
  protects only ``/v1/*``. Give the client an ``Authorization`` header for the serving check.

Every probe shows up as an uvicorn access line in the unit's journal.

**The loop** (:class:`HealthSource`) is three pieces: where to look (:func:`health_target`, from the
spec and what the log says), the HTTP client with its port forward (:class:`HealthClient`: opened
for a target, dropped with the link or when the target changes), and, when nothing answers through
the tunnel, whether the link or the server is dead (:meth:`HealthSource.link_down`); the
serving-check cadence is :class:`ServingChecks`.
"""

from __future__ import annotations

import json
import time as _time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from probes.data.events import Health
from probes.hosttext import one_line
from probes.sources.context import SourceContext, wait_event
from probes.sources.health_target import HealthTarget, health_target
from probes.transport.runner import ProbeError, Runner

if TYPE_CHECKING:
    # Not imported at run time on purpose: httpx's package ``__init__`` imports its CLI
    # (``httpx._main``), which loads ``rich`` when it is installed, and no probes module may load
    # rich on import (tests/test_imports.py). The caller imports httpx to build the client; the
    # functions below import it when they need its exception classes.
    import httpx

HEALTH_PATH = "/health"
MODELS_PATH = "/v1/models"
COMPLETIONS_PATH = "/v1/completions"

#: What "not listening" looks like through an SSH port forward: the local end accepts the
#: connection, sshd cannot connect to the port and refuses the channel, and the local socket is
#: closed before any answer (tests/test_health_probe.py).
DETAIL_TUNNEL = "nothing listening behind the tunnel"
DETAIL_REFUSED = "connection refused"



async def probe_health(
    client: httpx.AsyncClient,
    time: float,
    *,
    serving_check: bool = False,
    timeout_s: float = 5.0,
    path: str = HEALTH_PATH,
    built: dict[tuple[str, float], httpx.Request] | None = None,
) -> Health:
    """Probe the server once. Never raises for an HTTP or transport failure.

    Args:
        client: a client whose ``base_url`` is the server (``http://127.0.0.1:30000``, or the local
            end of a port forward), carrying any auth headers the server needs.
        time: when the probe is taken (epoch seconds; the injected clock's "now").
        serving_check: when ``/health`` is 2xx, also list ``/v1/models`` and ask the first model
            for one token (``POST /v1/completions``, ``max_tokens`` 1, temperature 0).
        timeout_s: limit in seconds for each request.
        path: the health endpoint's path (``/health``; a configured ``health_url``'s path).
        built: this ``client``'s requests built so far, by (path, timeout_s)
            (:attr:`HealthClient.built`): the ``GET path`` request is built once, kept there and
            sent again on every probe (building one is most of what httpx spends on a request),
            except while the client holds cookies (then built every time, so a cookie a server
            set is sent back). None: built every time.

    Returns:
        The rung reached, with the ``/health`` status, a one-line ``detail`` and ``latency_s``
        (seconds the ``/health`` request took; None when nothing answered).
    """
    began = _time.perf_counter()
    try:
        # Only the status is read: the body is never downloaded (a host could send gigabytes).
        # (``client.stream("GET", ...)`` is these steps, with the request built every time.)
        request = built.get((path, timeout_s)) if built is not None and not client.cookies else None
        if request is None:
            request = client.build_request("GET", path, timeout=timeout_s)
            if built is not None:
                built[(path, timeout_s)] = request
        response = await client.send(request, stream=True)
        try:
            status = response.status_code
        finally:
            await response.aclose()
    except Exception as exc:  # every failure is a rung, never a crash
        rung, detail = _failure(exc, timeout_s)
        return Health(time=time, rung=rung, detail=detail)
    latency_s = _time.perf_counter() - began
    if not (200 <= status < 300):
        return Health(time=time, rung="http_unhealthy", status=status, detail=f"HTTP {status}", latency_s=latency_s)
    detail = f"{status} in {_ms(latency_s)}"
    if not serving_check:
        return Health(time=time, rung="healthy", status=status, detail=detail, latency_s=latency_s)
    served, why = await _serving(client, timeout_s)
    return Health(time=time, rung="serving" if served else "healthy", status=status,
                  detail=f"{detail}; {why}", latency_s=latency_s)


async def _serving(client: httpx.AsyncClient, timeout_s: float) -> tuple[bool, str]:
    """Ask the first listed model for one token. Returns (answered, a few words on what happened)."""
    try:
        models = await _bounded(client, "GET", MODELS_PATH, timeout_s)
    except Exception as exc:
        return False, f"not serving: {MODELS_PATH} {_reason(exc, timeout_s)}"
    if not models.is_success:
        return False, f"not serving: {MODELS_PATH} HTTP {models.status_code}"
    model = _first_model_id(models)
    if model is None:
        return False, f"not serving: {MODELS_PATH} lists no model"
    body = {"model": model, "prompt": "Hi", "max_tokens": 1, "temperature": 0}
    began = _time.perf_counter()
    try:
        answer = await _bounded(client, "POST", COMPLETIONS_PATH, timeout_s, json=body)
    except Exception as exc:
        return False, f"not serving: {COMPLETIONS_PATH} {_reason(exc, timeout_s)}"
    elapsed_s = _time.perf_counter() - began
    if not answer.is_success:
        return False, f"not serving: {COMPLETIONS_PATH} HTTP {answer.status_code}"
    reply = _json_object(answer)
    choices = reply.get("choices") if reply is not None else None
    if not isinstance(choices, list) or not choices:
        return False, f"not serving: {COMPLETIONS_PATH} answered without choices"
    return True, f"1 token in {_ms(elapsed_s)}"


#: The most bytes of an answer's body that are read (``/v1/models``, a one-token completion): a
#: body past it is not read further and counts as no JSON object.
MAX_BODY = 1024 * 1024


async def _bounded(client: httpx.AsyncClient, method: str, path: str, timeout_s: float,
                   **kwargs: object) -> _Answer:
    """One request whose body is read up to :data:`MAX_BODY` bytes (decoded; a server that sends
    more gets its answer cut there, and the cut body is no JSON). Raises what ``httpx`` raises."""
    async with client.stream(method, path, timeout=timeout_s, **kwargs) as response:  # type: ignore[arg-type]
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BODY:
                return _Answer(response.status_code, None)
        return _Answer(response.status_code, b"".join(chunks))


@dataclass(frozen=True, slots=True)
class _Answer:
    """An HTTP answer: its status and its body (None when it was longer than :data:`MAX_BODY`)."""

    status_code: int
    body: bytes | None

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300


def _json_object(answer: _Answer) -> dict[str, object] | None:
    """The answer's body as a JSON object, or None when it is not one: too long (not read whole),
    not JSON or not UTF-8 (``ValueError``), nested too deeply for the parser (``RecursionError``,
    e.g. 100,000 ``[``), or JSON that is not an object."""
    if answer.body is None:
        return None
    try:
        body = json.loads(answer.body)
    except ValueError:
        return None
    except RecursionError:
        return None
    return body if isinstance(body, dict) else None


def _first_model_id(response: _Answer) -> str | None:
    """``data[0].id`` of a ``/v1/models`` answer, or None when the body is not that."""
    body = _json_object(response)
    data = body.get("data") if body is not None else None
    first = data[0] if isinstance(data, list) and data else None
    model = first.get("id") if isinstance(first, dict) else None
    return model if isinstance(model, str) and model else None


def _failure(exc: BaseException, timeout_s: float) -> tuple[str, str]:
    """The rung and detail for a ``/health`` request that got no HTTP answer.

    A read timeout means something accepted the connection but did not answer in time
    (``http_unhealthy``); every other transport failure (refused, closed before any answer, a
    connect that timed out) means nothing answers HTTP (``port_closed``). Anything else (not a
    transport error) is named by its class and read as ``http_unhealthy``.
    """
    import httpx  # already loaded by the caller (see the note at the imports)

    transport = isinstance(exc, (httpx.TransportError, OSError))
    rung = "port_closed" if transport and not _is_read_timeout(exc) else "http_unhealthy"
    return rung, _reason(exc, timeout_s, tunnel=True)


def _is_read_timeout(exc: BaseException) -> bool:
    """A request sent (or a connection made) that got no answer in time; not a connect timeout."""
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return False
    return isinstance(exc, (httpx.TimeoutException, TimeoutError))


def _reason(exc: BaseException, timeout_s: float, *, tunnel: bool = False) -> str:
    """A few words on why a request got no answer.

    Args:
        exc: what the request raised.
        timeout_s: the request's limit in seconds.
        tunnel: the request was the first one (``/health``): a connection closed before any answer
            (``RemoteProtocolError``, ``ReadError``, or ``WriteError`` when the close wins the race
            with the request) is then the SSH forward's "nothing listening" (see :data:`DETAIL_TUNNEL`).
    """
    import httpx  # already loaded by the caller (see the note at the imports)

    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection in {_seconds(timeout_s)}"
    if _is_read_timeout(exc):
        return f"no answer in {_seconds(timeout_s)}"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc)
        markers = ("refused", "connect call failed", "all connection attempts failed")
        plain = not text or any(m in text.lower() for m in markers)
        return DETAIL_REFUSED if plain else f"cannot connect: {_clean(text)}"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return DETAIL_TUNNEL if tunnel else "connection closed without an answer"
    text = _clean(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)} ms"


def _seconds(seconds: float) -> str:
    return f"{seconds:g} s"


def _clean(text: str, limit: int = 160) -> str:
    """Exception text made one plain line by the one sanitiser (:func:`probes.hosttext.one_line`), cut to ``limit``."""
    return one_line(" ".join(text.split()), max_chars=limit)


# --- the loop ---------------------------------------------------------------------------------------

#: With no port or health URL configured, the first health look waits at most this many (real)
#: seconds for the log to name the port (or the engine) and, once the backlog is quiet, no longer.
LOG_KNOWN_WAIT_S = 5.0

class HealthClient:
    """The HTTP client to the current :class:`HealthTarget`, through the runner's port forward when
    the target needs one (the tunnel's lifecycle).

    Args:
        runner: the host's runner (``forward``, ``http_transport``).
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.client: httpx.AsyncClient | None = None
        self.target: HealthTarget | None = None
        #: the open client's requests built so far (:func:`probe_health`'s ``built``)
        self.built: dict[tuple[str, float], httpx.Request] = {}

    async def open(self, target: HealthTarget) -> httpx.AsyncClient:
        """The client for ``target``: the open one, or a new one (the old one closed when the
        target changed: the engine or the start's own port became known).

        Raises:
            ProbeError: the port forward could not be opened.
        """
        import httpx

        if self.client is not None and target != self.target:
            await self.close()
        if self.client is None:
            base_url = target.base_url
            if target.tunnel:
                base_url = f"http://127.0.0.1:{await self.runner.forward(target.port)}"
            self.client = httpx.AsyncClient(base_url=base_url, transport=self.runner.http_transport())
            self.target = target
        return self.client

    async def drop_tunnel(self) -> None:
        """The connection dropped: its port forward went with it; the next :meth:`open` forwards
        again (once the runner has reconnected). A direct client is kept."""
        if self.target is not None and self.target.tunnel:
            await self.close()

    async def close(self) -> None:
        """Close the client (if any)."""
        client, self.client, self.target = self.client, None, None
        self.built = {}
        if client is not None:
            await client.aclose()


class ServingChecks:
    """When a healthy server is asked for a one-token generation (the ``serving`` rung): on the
    first look after it turned healthy, then every ``serving_every_s``; in between, a server that
    proved ``serving`` keeps the rung while it stays healthy."""

    def __init__(self) -> None:
        self.last_at: float | None = None  # clock time of the last generation asked

    def due(self, now: float, previous: Health | None, every_s: float) -> bool:
        """Whether this look (at ``now``, the last answer ``previous``) asks for a generation."""
        healthy = previous is not None and previous.rung in ("healthy", "serving")
        return healthy and (self.last_at is None or now - self.last_at >= every_s)

    def answered(self, h: Health, *, checked: bool, now: float, previous: Health | None) -> Health:
        """``h`` as shown: note the check, start over when the server is not healthy, and keep
        ``serving`` between checks."""
        if checked:
            self.last_at = now
        if h.rung not in ("healthy", "serving"):
            self.last_at = None
        elif not checked and previous is not None and previous.rung == "serving":
            h = replace(h, rung="serving")
        return h


class HealthSource:
    """The health probe's loop: ``GET`` the :class:`HealthTarget` every ``health_interval_s`` (and
    a one-token generation now and then once healthy); each answer is the host's
    :class:`~probes.data.events.Health`. With no port known (none configured, no engine, none in the
    log) it does not guess: the ``health`` cell says so.

    Args:
        context: the host's :class:`~probes.sources.context.SourceContext`.
    """

    def __init__(self, context: SourceContext) -> None:
        self.context = context
        self.serving = ServingChecks()

    def target(self) -> HealthTarget | None:
        """Where to look now, or None when no port is known."""
        ctx = self.context
        spec = ctx.spec
        engine = ctx.log_engine() if spec.engine is None else None
        if spec.port or spec.health_url is not None:
            # health_target does not read the log's port then: no reading is built for it
            # (one a look a host, most of what this look cost before its request).
            return health_target(spec, engine, None)
        log_port = ctx.log_reading().port
        if (spec.port is None and spec.health_url is None and spec.engine is None
                and engine is None and log_port is None):
            return None
        return health_target(spec, engine, log_port)

    async def link_down(self, h: Health) -> bool:
        """No HTTP answer through the tunnel (``h``): is it the server's port, or the SSH link? A
        dropped link refuses the local end of the forward: True when the runner says it is not
        connected (it reconnects; nothing to say). A frozen link looks like a server that does not
        answer until keepalives give up (about 12 s): a ``true`` through the link tells.

        Raises:
            ProbeError: the link does not carry a command.
        """
        runner = self.context.runner
        if h.rung == "port_closed":
            connected = getattr(runner, "connected", None)
            return connected is not None and not connected()
        await runner.run(["true"], timeout=5.0)
        return False

    async def run(self) -> None:
        """Look until cancelled (the client closed at the end)."""
        ctx = self.context
        spec = ctx.spec
        delay = ctx.cadence.retry_s
        link = HealthClient(ctx.runner)
        if spec.port is None and spec.health_url is None:
            # The port comes from the log (the engine's default, or the port the start names):
            # a first look before the log is read would ask the wrong port.
            await wait_event(ctx.signals.log_known, LOG_KNOWN_WAIT_S)
        try:
            while True:
                if ctx.unreachable():
                    await link.drop_tunnel()
                target = self.target()
                if target is None:
                    await link.close()
                    ctx.fail("health", "config", f"{spec.name}: no port known for the server (no port or "
                             "engine configured, none named in the log): set port = in hosts.toml")
                    await ctx.clock.sleep(ctx.cadence.health_interval_s)
                    continue
                try:
                    client = await link.open(target)
                except ProbeError as exc:
                    ctx.fail("health", exc.kind, exc.message)
                    delay = await ctx.retry(delay, exc.kind)
                    continue
                now = ctx.clock.now()
                previous = ctx.health()
                check = self.serving.due(now, previous, ctx.cadence.serving_every_s)
                h = await probe_health(client, now, serving_check=check, path=target.path, built=link.built)
                if target.tunnel and h.status is None:
                    try:
                        if await self.link_down(h):
                            await ctx.clock.sleep(ctx.cadence.health_interval_s)
                            continue
                    except ProbeError as exc:
                        ctx.fail("health", exc.kind, exc.message)
                        delay = await ctx.retry(delay, exc.kind)
                        continue
                h = self.serving.answered(h, checked=check, now=now, previous=previous)
                ctx.ok("health")
                ctx.emit(h)
                delay = ctx.cadence.retry_s
                await ctx.clock.sleep(ctx.cadence.health_interval_s)
        finally:
            await link.close()
