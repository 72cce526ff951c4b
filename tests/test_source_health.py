"""The health source alone on a ManualClock: the port forward (a canned runner), the server behind
it (``httpx.MockTransport`` answering as SGLang 0.5.x does), the serving-check cadence, and telling a
dead link from a dead server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from canned_runner import CannedRunner
from probes.clock import ManualClock
from probes.fold.model import HostModel
from probes.sources.context import SourceContext
from probes.sources.health import COMPLETIONS_PATH, HEALTH_PATH, MODELS_PATH, HealthSource
from probes.spec import HostSpec
from probes.transport.runner import ProbeError

T0 = 1_764_460_800.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MODELS = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "sglang", "root": MODEL}]}
COMPLETION = {"id": "cmpl-1", "object": "text_completion", "model": MODEL,
              "choices": [{"index": 0, "text": " there", "logprobs": None, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 2, "total_tokens": 3, "completion_tokens": 1}}


class Server:
    """SGLang behind the forward: ``/health`` 200 (empty body), ``/v1/models``, one-token completions;
    ``fail`` makes every request raise it instead (what httpx raises for that transport failure)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.hosts: set[str] = set()
        self.fail: Exception | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.fail is not None:
            raise self.fail
        self.paths.append(request.url.path)
        self.hosts.add(f"{request.url.host}:{request.url.port}")
        if request.url.path == HEALTH_PATH:
            return httpx.Response(200, content=b"")
        if request.url.path == MODELS_PATH:
            return httpx.Response(200, json=MODELS)
        if request.url.path == COMPLETIONS_PATH:
            return httpx.Response(200, json=COMPLETION)
        return httpx.Response(404, json={"detail": "Not Found"})


Rig = tuple[Server, CannedRunner, ManualClock, HostModel, Callable[[], None]]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    """A health source for a host whose server listens on its port 30000 (configured); the test
    starts it (the last item), it is cancelled at the end."""
    server = Server()
    clock, runner = ManualClock(T0), CannedRunner(httpx.MockTransport(server))
    spec = HostSpec("gpu-node-1", "sglang.service", ssh="gpu-node-1", port=30000)
    model = HostModel(spec.name, spec.unit)
    source = HealthSource(SourceContext(spec, runner, clock, model))
    tasks: list[asyncio.Task[None]] = []
    yield server, runner, clock, model, lambda: tasks.append(asyncio.create_task(source.run()))
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_healthy_then_serving_through_the_forward_with_a_generation_every_30_s(rig: Rig) -> None:
    server, runner, clock, model, start = rig
    start()
    await clock.settle()
    h = model.state(clock.now()).health
    assert h is not None and (h.rung, h.status) == ("healthy", 200)
    assert runner.forwarded == [30000] and server.hosts == {"127.0.0.1:40001"}
    await clock.advance(2)  # healthy before: this look asks for one token
    h = model.state(clock.now()).health
    assert h is not None and h.rung == "serving" and server.paths.count(COMPLETIONS_PATH) == 1
    await clock.advance(26)  # between checks the rung it proved is kept, without generating
    h = model.state(clock.now()).health
    assert h is not None and h.rung == "serving" and server.paths.count(COMPLETIONS_PATH) == 1
    await clock.advance(4)
    assert server.paths.count(COMPLETIONS_PATH) == 2
    assert runner.forwarded == [30000]  # one forward all along


async def test_a_forward_that_fails_is_the_health_cells_failure_until_it_opens(rig: Rig) -> None:
    server, runner, clock, model, start = rig
    runner.forward_error = ProbeError("command", "gpu-node-1: port forward to 30000 refused")
    start()
    await clock.settle()
    f = model.state(clock.now()).failure("health")
    assert f is not None and f.kind == "command" and "refused" in f.message
    assert model.state(clock.now()).health is None
    await clock.advance(2 + 3.9)
    assert server.paths == []  # retried at 2 s, next at 2 + 4 s
    runner.forward_error = None
    await clock.advance(0.1)
    s = model.state(clock.now())
    assert s.failure("health") is None and s.health is not None and s.health.rung == "healthy"


async def test_a_refused_forward_while_the_link_is_down_says_nothing_of_the_server(rig: Rig) -> None:
    server, runner, clock, model, start = rig
    server.fail = httpx.RemoteProtocolError("Server disconnected without sending a response.")
    runner.link_up = False  # the SSH connection dropped: the forward's local end refuses
    start()
    await clock.settle()
    await clock.advance(6)
    s = model.state(clock.now())
    assert s.health is None and s.failure("health") is None
    runner.link_up = True  # reconnected: now a refusal is the server's
    await clock.advance(2)
    h = model.state(clock.now()).health
    assert h is not None and h.rung == "port_closed"


async def test_no_answer_through_a_frozen_link_is_the_links_failure(rig: Rig) -> None:
    server, runner, clock, model, start = rig
    server.fail = httpx.ReadTimeout("timed out")
    runner.answer(["true"], ProbeError("timeout", "gpu-node-1: command timed out after 5 s"))
    start()
    await clock.settle()
    s = model.state(clock.now())
    f = s.failure("health")
    assert s.health is None and f is not None and f.kind == "timeout"
    runner.answer(["true"], b"")  # the link carries commands: the server itself does not answer
    await clock.advance(2)
    h = model.state(clock.now()).health
    assert h is not None and h.rung == "http_unhealthy" and model.state(clock.now()).failure("health") is None


async def test_with_no_port_known_it_does_not_guess() -> None:
    clock, runner = ManualClock(T0), CannedRunner(httpx.MockTransport(Server()))
    spec = HostSpec("gpu-node-1", "llm.service", ssh="gpu-node-1")  # no port, no engine, no log
    model = HostModel(spec.name, spec.unit)
    ctx = SourceContext(spec, runner, clock, model)
    ctx.signals.log_known.set()  # the journal has said all it can
    task = asyncio.create_task(HealthSource(ctx).run())
    try:
        await clock.settle()
        f = model.state(clock.now()).failure("health")
        assert f is not None and f.message.startswith("gpu-node-1: no port known for the server")
        assert f.kind == "config"  # nothing was asked of the host: no word on the connection
        assert runner.forwarded == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("port", [30000, None])
@pytest.mark.parametrize("health_url", [None, "http://127.0.0.1:8080/ready?x=1"])
@pytest.mark.parametrize("engine", ["sglang", None])
def test_the_target_reads_the_log_only_when_it_needs_its_port(port: int | None, health_url: str | None,
                                                              engine: str | None) -> None:
    # A configured port or health URL makes the log's port moot: the look builds no reading of
    # the log for it (the reader is the real one; its reading() is only counted), and the target is
    # the one health_target gives with the log's port.
    from probes.sources.health_target import health_target

    clock, runner = ManualClock(1_741_436_938.0), CannedRunner()
    spec = HostSpec("gpu-node-1", "sglang.service", ssh="gpu-node-1", port=port, health_url=health_url,
                    engine=engine)
    model = HostModel(spec.name, spec.unit, spec.engine)
    source = HealthSource(SourceContext(spec, runner, clock, model))
    readings = 0
    real = model.reader.reading

    def counted(ended: bool = False):  # type: ignore[no-untyped-def]
        nonlocal readings
        readings += 1
        return real(ended)

    model.reader.reading = counted  # type: ignore[method-assign]
    target = source.target()
    log_port = real().port
    if port is None and health_url is None and engine is None:
        assert target is None
    else:
        assert target == health_target(spec, model.log_engine() if engine is None else None, log_port)
    assert readings == (0 if port is not None or health_url is not None else 1)
