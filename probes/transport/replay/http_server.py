"""The model server's HTTP API as a replayed host answers it: an ``httpx`` transport
(:func:`mock_transport`) that serves ``/health``, ``/v1/models`` and ``/v1/completions`` from the
simulated host's health timeline, in the shapes SGLang and vLLM give (SGLang's ``http_server.py``,
vLLM's ``api_server.py``: connection refused until the server binds, then ``GET /health`` with the
scenario's status and an empty body; ``GET /v1/models`` and ``POST /v1/completions`` in the OpenAI
shapes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from probes.transport.replay.host import SimulatedHost

if TYPE_CHECKING:
    # Imported where used, not at module load: httpx's ``__init__`` imports its CLI, which loads
    # ``rich`` when it is installed, and no probes module may load rich on import.
    import httpx


def mock_transport(host: SimulatedHost, forwards: Mapping[int, int]) -> httpx.MockTransport:
    """An ``httpx`` transport answering as ``host``'s server.

    Args:
        host: the simulated host. forwards: local port -> the host's port, as the runner's
            ``forward`` made them (read at each request, so later forwards count).

    A request to a forwarded port (or to the server's own port) gets:

    * nothing listening (``refused``), during an outage, after the host closed, or another port:
      ``httpx.ConnectError`` ``[Errno 111] Connection refused``;
    * ``GET /health``: the timeline's status, empty body (SGLang's 503 while starting, 200 once
      up; vLLM's 200);
    * ``GET /v1/models``: 200 with ``{"object":"list","data":[{...,"owned_by":"sglang"|"vllm"}]}``;
    * ``POST /v1/completions``: when ``/health`` is 200, a one-token OpenAI completion; else the
      ``/health`` status with an empty body;
    * another method on those paths: 405; anything else: 404 ``{"detail":"Not Found"}`` (FastAPI's).
    """
    import httpx

    def handle(request: httpx.Request) -> httpx.Response:
        return _answer(host, forwards, request)

    return httpx.MockTransport(handle)


def _answer(host: SimulatedHost, forwards: Mapping[int, int], request: httpx.Request) -> httpx.Response:
    import httpx

    t = host.now_s()
    port = request.url.port
    remote = forwards.get(port, port) if port is not None else host.scenario.port
    status = host.health_at(t)
    if host.closed or host.outage_at(t) is not None or remote != host.scenario.port or status == "refused":
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
    code = int(status)
    path = request.url.path
    method = request.method
    if path == "/health":
        if method not in ("GET", "HEAD"):
            return _json_response(405, {"detail": "Method Not Allowed"})
        return httpx.Response(code, content=b"")
    if path == "/v1/models":
        if method != "GET":
            return _json_response(405, {"detail": "Method Not Allowed"})
        return _json_response(200, _models_body(host))
    if path == "/v1/completions":
        if method != "POST":
            return _json_response(405, {"detail": "Method Not Allowed"})
        if code != 200:
            return httpx.Response(code, content=b"")
        return _json_response(200, _completion_body(host, request))
    return _json_response(404, {"detail": "Not Found"})


def _owner(host: SimulatedHost) -> str:
    return {"sglang": "sglang", "vllm": "vllm", "trtllm": "tensorrt_llm"}.get(host.scenario.engine,
                                                                              host.scenario.engine)


def _models_body(host: SimulatedHost) -> dict[str, Any]:
    s = host.scenario
    card: dict[str, Any] = {"id": s.model, "object": "model", "created": int(host.clock.now()),
                            "owned_by": _owner(host), "root": s.model, "parent": None,
                            "max_model_len": s.max_model_len}
    if s.engine == "vllm":
        card["permission"] = [{
            "id": "modelperm-" + hashlib.blake2b(s.host.encode(), digest_size=16).hexdigest(),
            "object": "model_permission", "created": int(host.clock.now()), "allow_create_engine": False,
            "allow_sampling": True, "allow_logprobs": True, "allow_search_indices": False,
            "allow_view": True, "allow_fine_tuning": False, "organization": "*", "group": None,
            "is_blocking": False}]
    return {"object": "list", "data": [card]}


def _completion_body(host: SimulatedHost, request: httpx.Request) -> dict[str, Any]:
    try:
        body = json.loads(request.content or b"{}")
    except ValueError:
        body = {}
    prompt = body.get("prompt", "") if isinstance(body, dict) else ""
    n_prompt = max(1, len(str(prompt).split()))
    rid = hashlib.blake2b(f"{host.name}{host.clock.now()}".encode(), digest_size=16).hexdigest()
    choice: dict[str, Any] = {"index": 0, "text": " Paris" if "France" in str(prompt) else " the",
                              "logprobs": None, "finish_reason": "length"}
    usage: dict[str, Any] = {"prompt_tokens": n_prompt, "total_tokens": n_prompt + 1, "completion_tokens": 1,
                             "prompt_tokens_details": None}
    out: dict[str, Any] = {"id": rid if host.scenario.engine == "sglang" else f"cmpl-{rid}",
                           "object": "text_completion", "created": int(host.clock.now()),
                           "model": host.scenario.model, "choices": [choice], "usage": usage}
    if host.scenario.engine == "sglang":
        choice["matched_stop"] = None
    else:
        choice["stop_reason"] = None
        choice["prompt_logprobs"] = None
        out["service_tier"] = None
        out["system_fingerprint"] = None
    return out


def _json_response(status: int, body: Any) -> httpx.Response:
    import httpx

    return httpx.Response(status, content=json.dumps(body, separators=(",", ":")).encode(),
                          headers={"content-type": "application/json"})
