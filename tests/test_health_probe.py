"""The health probe climbs the readiness ladder from real server answers (FORMATS.md 3.1-3.3).

Most tests answer through ``httpx.MockTransport`` with what SGLang 0.5.x and vLLM 0.11.0 send (status,
empty bodies, ``/v1/models`` JSON); the transport errors are the ones httpx raises for a refused
connection and for a port forward with nothing behind it. The last tests use a real socket on
127.0.0.1: a tiny server driven by state (no sleeps), an accept-and-close listener (what an SSH
forward does when nothing listens on the host) and a closed port.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from probes.sources.health import (COMPLETIONS_PATH, DETAIL_REFUSED, DETAIL_TUNNEL, HEALTH_PATH, MAX_BODY,
                                   MODELS_PATH, probe_health)
from probes.data.state import RUNGS
from probes.data.events import Health

NOW = 1_741_436_938.0
BASE = "http://gpu-node-1:30000"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# /v1/models as SGLang answers it (FORMATS.md 3.1).
SGLANG_MODELS = {"object": "list", "data": [{
    "id": MODEL, "object": "model", "created": 1741436938, "owned_by": "sglang", "root": MODEL,
    "parent": None, "max_model_len": 131072}]}
# /v1/models as vLLM 0.11.0 answers it (FORMATS.md 3.2): adds "permission".
VLLM_MODELS = {"object": "list", "data": [{
    "id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "created": 1730776976, "owned_by": "vllm",
    "root": "Qwen/Qwen2.5-7B-Instruct", "parent": None, "max_model_len": 32768,
    "permission": [{"id": "modelperm-5b1d6e2f", "object": "model_permission", "created": 1730776976,
                    "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                    "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                    "organization": "*", "group": None, "is_blocking": False}]}]}
# A one-token /v1/completions answer (OpenAI shape, as both servers give it).
COMPLETION = {"id": "cmpl-1", "object": "text_completion", "created": 1741436940, "model": MODEL,
              "choices": [{"index": 0, "text": " there", "logprobs": None, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 2, "total_tokens": 3, "completion_tokens": 1}}

Handler = Callable[[httpx.Request], httpx.Response]


def client_for(handler: Handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url=BASE)


class Server:
    """A fake server: ``/health`` answers from a list of statuses (the last one repeats)."""

    def __init__(self, health: list[int], models: dict | None = None, completion: tuple[int, dict | bytes] | None = None,
                 models_status: int = 200) -> None:
        self.health = list(health)
        self.models = models
        self.models_status = models_status
        self.completion = completion or (200, COMPLETION)
        self.requests: list[tuple[str, str, bytes]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path, request.content))
        if request.url.path == HEALTH_PATH:
            status = self.health.pop(0) if len(self.health) > 1 else self.health[0]
            return httpx.Response(status, content=b"")        # both servers: empty body
        if request.url.path == MODELS_PATH and self.models is not None:
            return httpx.Response(self.models_status, json=self.models)
        if request.url.path == COMPLETIONS_PATH:
            status, body = self.completion
            return httpx.Response(status, json=body) if isinstance(body, dict) else httpx.Response(status, content=body)
        return httpx.Response(404, json={"detail": "Not Found"})

    @property
    def paths(self) -> list[str]:
        return [path for _, path, _ in self.requests]


def raising(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc
    return handler


# --- /health -------------------------------------------------------------------------------------------


async def test_sglang_starting_503_then_200() -> None:
    server = Server(health=[503, 200])
    async with client_for(server) as client:
        starting = await probe_health(client, NOW)
        ready = await probe_health(client, NOW + 5)
    assert starting.rung == "http_unhealthy" and starting.status == 503 and starting.detail == "HTTP 503"
    assert starting.time == NOW and starting.latency_s is not None and starting.latency_s >= 0
    assert ready.rung == "healthy" and ready.status == 200 and ready.time == NOW + 5
    assert ready.detail.startswith("200 in ") and ready.detail.endswith(" ms")
    assert server.paths == [HEALTH_PATH, HEALTH_PATH]


async def test_vllm_200_with_an_empty_body_is_healthy() -> None:
    async with client_for(Server(health=[200])) as client:
        health = await probe_health(client, NOW)
    assert (health.rung, health.status) == ("healthy", 200)
    assert health.rung in RUNGS


@pytest.mark.parametrize("status", [503, 500])      # vLLM engine dead: 503 from 0.11.0, 500 before
async def test_vllm_dead_engine_is_http_unhealthy(status: int) -> None:
    async with client_for(Server(health=[status])) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health == Health(NOW, "http_unhealthy", status, f"HTTP {status}", health.latency_s)


async def test_the_timeout_is_passed_to_the_request() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200)

    async with client_for(handler) as client:
        await probe_health(client, NOW, timeout_s=2.5)
    assert seen[0]["read"] == 2.5 and seen[0]["connect"] == 2.5


# --- transport failures ----------------------------------------------------------------------------------


async def test_connection_refused_is_port_closed() -> None:
    async with client_for(raising(httpx.ConnectError("[Errno 111] Connection refused"))) as client:
        health = await probe_health(client, NOW)
    assert health == Health(NOW, "port_closed", None, DETAIL_REFUSED, None)
    assert DETAIL_REFUSED == "connection refused"


@pytest.mark.parametrize("exc", [
    httpx.RemoteProtocolError("Server disconnected without sending a response."),
    httpx.ReadError(""),
    httpx.WriteError("[Errno 32] Broken pipe"),
])
async def test_ssh_forward_with_nothing_behind_is_port_closed(exc: Exception) -> None:
    async with client_for(raising(exc)) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health == Health(NOW, "port_closed", None, "nothing listening behind the tunnel", None)


async def test_read_timeout_is_http_unhealthy_no_answer() -> None:
    async with client_for(raising(httpx.ReadTimeout("timed out"))) as client:
        health = await probe_health(client, NOW)
        slow = await probe_health(client, NOW, timeout_s=2.5)
    assert health == Health(NOW, "http_unhealthy", None, "no answer in 5 s", None)
    assert slow.detail == "no answer in 2.5 s"


async def test_connect_timeout_is_port_closed() -> None:
    async with client_for(raising(httpx.ConnectTimeout("timed out"))) as client:
        health = await probe_health(client, NOW)
    assert health == Health(NOW, "port_closed", None, "no connection in 5 s", None)


async def test_a_connect_error_that_is_not_a_refusal_says_what_it_is() -> None:
    async with client_for(raising(httpx.ConnectError("[Errno -2] Name or service not known"))) as client:
        health = await probe_health(client, NOW)
    assert health.rung == "port_closed" and health.detail == "cannot connect: [Errno -2] Name or service not known"


@pytest.mark.parametrize(("exc", "rung", "detail"), [
    (httpx.CloseError("close failed"), "port_closed", "CloseError: close failed"),
    (httpx.LocalProtocolError("bad"), "port_closed", "LocalProtocolError: bad"),
    (ConnectionResetError(104, "Connection reset by peer"), "port_closed",
     "ConnectionResetError: [Errno 104] Connection reset by peer"),
    (RuntimeError("boom\n\x1b[31mred"), "http_unhealthy", "RuntimeError: boom red"),  # the escape goes whole
    (ValueError(), "http_unhealthy", "ValueError"),
    (TimeoutError(), "http_unhealthy", "no answer in 5 s"),          # asyncio.wait_for in a wrapper
    (httpx.DecodingError("bad gzip"), "http_unhealthy", "DecodingError: bad gzip"),
])
async def test_unexpected_exceptions_never_escape(exc: Exception, rung: str, detail: str) -> None:
    async with client_for(raising(exc)) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health == Health(NOW, rung, None, detail, None)
    assert "\n" not in health.detail and "\x1b" not in health.detail


# --- serving check --------------------------------------------------------------------------------------


@pytest.mark.parametrize("models", [SGLANG_MODELS, VLLM_MODELS])
async def test_serving_check_generates_one_token_from_the_first_model(models: dict) -> None:
    server = Server(health=[200], models=models)
    async with client_for(server) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health.rung == "serving" and health.status == 200
    assert " ms; 1 token in " in health.detail
    assert server.paths == [HEALTH_PATH, MODELS_PATH, COMPLETIONS_PATH]
    method, _, body = server.requests[2]
    assert method == "POST"
    assert json.loads(body) == {"model": models["data"][0]["id"], "prompt": "Hi", "max_tokens": 1, "temperature": 0}


async def test_no_serving_check_unless_asked() -> None:
    server = Server(health=[200], models=SGLANG_MODELS)
    async with client_for(server) as client:
        health = await probe_health(client, NOW)
    assert health.rung == "healthy" and server.paths == [HEALTH_PATH]


async def test_no_serving_check_while_unhealthy() -> None:
    server = Server(health=[503], models=SGLANG_MODELS)      # SGLang warming up: /v1/models would answer
    async with client_for(server) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health.rung == "http_unhealthy" and server.paths == [HEALTH_PATH]


async def test_completion_500_stays_healthy_with_the_reason() -> None:
    server = Server(health=[200], models=VLLM_MODELS, completion=(500, {"error": "EngineDeadError"}))
    async with client_for(server) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health.rung == "healthy" and health.status == 200
    assert health.detail.endswith("; not serving: /v1/completions HTTP 500")


@pytest.mark.parametrize(("server", "reason"), [
    (Server(health=[200], models={"error": "Unauthorized"}, models_status=401), "/v1/models HTTP 401"),  # SGLang --api-key
    (Server(health=[200], models={"object": "list", "data": []}), "/v1/models lists no model"),
    (Server(health=[200], models={"object": "list", "data": [{"object": "model"}]}), "/v1/models lists no model"),
    (Server(health=[200], models=None), "/v1/models HTTP 404"),
    (Server(health=[200], models=SGLANG_MODELS, completion=(200, {"object": "text_completion", "choices": []})),
     "/v1/completions answered without choices"),
    (Server(health=[200], models=SGLANG_MODELS, completion=(200, b"not json")),
     "/v1/completions answered without choices"),
])
async def test_serving_check_failures_stay_healthy(server: Server, reason: str) -> None:
    async with client_for(server) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health.rung == "healthy" and health.detail.endswith("; not serving: " + reason)


async def test_models_body_that_is_not_json_stays_healthy() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"" if request.url.path == HEALTH_PATH else b"<html>[bold]")

    async with client_for(handler) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health.rung == "healthy" and health.detail.endswith("/v1/models lists no model")


@pytest.mark.parametrize(("exc", "reason"), [
    (httpx.ReadTimeout("timed out"), "no answer in 5 s"),
    (httpx.RemoteProtocolError("Server disconnected without sending a response."), "connection closed without an answer"),
    (RuntimeError("boom"), "RuntimeError: boom"),
])
async def test_completion_transport_failure_stays_healthy(exc: Exception, reason: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == COMPLETIONS_PATH:
            raise exc
        return Server(health=[200], models=SGLANG_MODELS)(request)

    async with client_for(handler) as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health.rung == "healthy" and health.detail.endswith(f"; not serving: {COMPLETIONS_PATH} {reason}")


# --- real sockets -----------------------------------------------------------------------------------------


@asynccontextmanager
async def tiny_server(health: list[int]) -> AsyncIterator[tuple[str, list[str]]]:
    """An HTTP/1.1 server on 127.0.0.1 that answers ``/health`` with the next status of ``health``
    (the last repeats), ``/v1/models`` and ``/v1/completions`` like SGLang. Yields (base_url, paths)."""
    paths: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        method, path, _ = head.split("\r\n", 1)[0].split(" ", 2)
        length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                       if line.lower().startswith("content-length:")), 0)
        body = await reader.readexactly(length) if length else b""
        paths.append(f"{method} {path}")
        if path == HEALTH_PATH:
            status, payload = (health.pop(0) if len(health) > 1 else health[0]), b""
        elif path == MODELS_PATH:
            status, payload = 200, json.dumps(SGLANG_MODELS).encode()
        elif path == COMPLETIONS_PATH and json.loads(body)["model"] == MODEL:
            status, payload = 200, json.dumps(COMPLETION).encode()
        else:
            status, payload = 404, b""
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: {len(payload)}\r\n"
                     f"content-type: application/json\r\nconnection: close\r\n\r\n".encode() + payload)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", paths
    finally:
        server.close()
        await server.wait_closed()


async def test_real_server_503_then_200_then_serving() -> None:
    async with tiny_server([503, 200]) as (base, paths), httpx.AsyncClient(base_url=base) as client:
        starting = await probe_health(client, NOW)
        healthy = await probe_health(client, NOW + 1)
        serving = await probe_health(client, NOW + 2, serving_check=True)
    assert (starting.rung, starting.status, starting.detail) == ("http_unhealthy", 503, "HTTP 503")
    assert (healthy.rung, healthy.status) == ("healthy", 200)
    assert serving.rung == "serving" and serving.time == NOW + 2
    assert paths == ["GET /health", "GET /health", "GET /health", "GET /v1/models", "POST /v1/completions"]


async def test_real_listener_that_accepts_and_closes_is_port_closed() -> None:
    """What asyncssh's local forward does when nothing listens on the host (FORMATS.md 3.3)."""
    async def accept_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept_and_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            health = await probe_health(client, NOW)
    finally:
        server.close()
        await server.wait_closed()
    assert health == Health(NOW, "port_closed", None, DETAIL_TUNNEL, None)


async def test_real_closed_port_is_port_closed() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        health = await probe_health(client, NOW, serving_check=True)
    assert health == Health(NOW, "port_closed", None, "connection refused", None)


async def test_a_server_that_sends_an_endless_body_is_never_read_whole() -> None:
    """Nothing a host sends can hurt the operator: ``/health`` answered with a body that never ends
    is read for its status only, and ``/v1/models`` is read up to MAX_BODY bytes, then dropped as
    no JSON (before, each read ran until the timeout and the host read ``no answer``)."""
    written = {"/health": 0, "/v1/models": 0}
    chunk = b"[" * 65536

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        path = line.split()[1].decode()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            while written[path] < 64 * MAX_BODY:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                written[path] += len(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the client hung up: what it does once it has read enough
        finally:
            writer.close()

    server = await asyncio.start_server(endless, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            health = await probe_health(client, NOW, serving_check=True, timeout_s=3)
    finally:
        server.close()
        await server.wait_closed()
    assert health.rung == "healthy" and health.status == 200
    assert health.detail.endswith("; not serving: /v1/models lists no model")
    assert written["/v1/models"] < 64 * MAX_BODY  # it hung up long before the server's own end


async def test_the_health_request_is_built_once_per_client_and_answers_the_same() -> None:
    # Each look sends the request it built the first time (building is most of httpx's cost),
    # over a real socket, and reads the same rungs as requests built every time.
    built: dict = {}
    async with tiny_server([503, 200, 200]) as (base, paths), httpx.AsyncClient(base_url=base) as client:
        looks = [await probe_health(client, NOW + i, built=built) for i in range(3)]
        kept = dict(built)
        again = await probe_health(client, NOW + 3, built=built)
    assert [(h.rung, h.status) for h in looks + [again]] == [("http_unhealthy", 503), ("healthy", 200),
                                                             ("healthy", 200), ("healthy", 200)]
    assert list(kept) == [(HEALTH_PATH, 5.0)] and built[(HEALTH_PATH, 5.0)] is kept[(HEALTH_PATH, 5.0)]
    assert paths == ["GET /health"] * 4


async def test_a_cookie_the_server_sets_is_sent_back_with_a_kept_request() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return httpx.Response(200, headers={"set-cookie": "route=b7; Path=/"})

    built: dict = {}
    async with client_for(handler) as client:
        for i in range(3):
            assert (await probe_health(client, NOW + i, built=built)).rung == "healthy"
    assert seen == [None, "route=b7", "route=b7"]
