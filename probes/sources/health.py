"""The health probe: one HTTP look at the server → a rung of the readiness ladder (:class:`Health`).

Rungs, lowest first (DESIGN.md): ``port_closed`` (nothing answers HTTP) → ``http_unhealthy``
(HTTP answers, not 2xx, or no answer in time) → ``healthy`` (``GET /health`` 2xx) → ``serving``
(a one-token completion answered). ``inactive`` is the unit probe's business, not this one's.

What the servers do (FORMATS.md 3.1-3.3; SGLang 0.4.6 / 0.5.5 / 0.5.23 and vLLM 0.11.0 wheels):

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
"""

from __future__ import annotations

import json
import time as _time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from probes.hosttext import one_line
from probes.data.state import Health

if TYPE_CHECKING:
    # Not imported at run time on purpose: httpx's package ``__init__`` imports its CLI
    # (``httpx._main``), which loads ``rich`` when it is installed, and no probes module may load
    # rich on import (tests/test_imports.py). The caller imports httpx to build the client; the
    # functions below import it when they need its exception classes.
    import httpx

HEALTH_PATH = "/health"
MODELS_PATH = "/v1/models"
COMPLETIONS_PATH = "/v1/completions"

#: What "not listening" looks like through an SSH port forward (FORMATS.md 3.3).
DETAIL_TUNNEL = "nothing listening behind the tunnel"
DETAIL_REFUSED = "connection refused"



async def probe_health(
    client: httpx.AsyncClient,
    time: float,
    *,
    serving_check: bool = False,
    timeout_s: float = 5.0,
    path: str = HEALTH_PATH,
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

    Returns:
        The rung reached, with the ``/health`` status, a one-line ``detail`` and ``latency_s``
        (seconds the ``/health`` request took; None when nothing answered).
    """
    began = _time.perf_counter()
    try:
        # Only the status is read: the body is never downloaded (a host could send gigabytes).
        async with client.stream("GET", path, timeout=timeout_s) as response:
            status = response.status_code
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
            with the request) is then the SSH forward's "nothing listening" (FORMATS.md 3.3).
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
