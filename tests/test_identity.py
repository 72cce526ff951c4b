"""The start's identity (model, argument hash) from the engines' own lines (probes/logs/identity.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.identity import Identity, args_hash, identify, listen_port
from probes.sources.logfile import read_path
from probes.logs.reader import StartupReader

LOGS = Path(__file__).parent / "fixtures" / "logs"


def _reading(name: str):
    r = read_path(str(LOGS / name))
    return r if hasattr(r, "model") else r[0]


@pytest.mark.parametrize(("name", "model", "digest"), [
    ("sglang-ok-01.log", "/mnt/d/user/Desktop/Model/Qwen3-0___6B", "2bf9931d2fa7"),
    ("sglang-ok-03.log", "/home/user/Qwen/QwQ-32B", "6398c4073e9a"),
    ("vllm-ok-01.log", "openai/whisper-large-v3", "4b13c5426ccf"),
    ("vllm-fail-silent-01.log", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "64f2db6639cc"),
    ("vllm-ok-03.log", "Meta-Llama-3-8B-Instruct", "0635d30d4991"),
    ("vllm-hang-download-01.log", "unsloth/Qwen3-VL-32B-Instruct-bnb-4bit", None),
    ("tgi-ok-01.log", "/models/gemma-3-27b-it", None),
    ("trtllm-ok-01.log", "openai/gpt-oss-120b", None),
    ("llamacpp-ok-01.log", "../models/qwen/model.gguf", None),
    ("vllm-fail-oom-01.log", None, None),       # the poster cut the start of the log
])
def test_fixture_logs_name_their_model(name: str, model: str | None, digest: str | None) -> None:
    r = _reading(name)
    assert (r.model, r.args_hash) == (model, digest)


SG = ("[2025-03-08 12:28:58] server_args=ServerArgs(model_path='/m/Qwen', tokenizer_path='/m/Qwen', "
      "tp_size={tp}, random_seed={seed}, port=30000)")


def test_sglang_random_seed_is_not_part_of_the_hash() -> None:
    a, b, c = (identify(SG.format(tp=tp, seed=seed)) for tp, seed in ((1, 159989863), (1, 811642422), (2, 1)))
    assert a == b == Identity("/m/Qwen", a.args_hash)
    assert c.args_hash != a.args_hash and c.model == "/m/Qwen"


def test_vllm_lines() -> None:
    line = ("(APIServer pid=1) INFO 02-12 19:34:50 [utils.py:325] non-default args: {'model_tag': 'org/m', "
            "'host': '0.0.0.0', 'model': 'org/m', 'gpu_memory_utilization': 0.85}")
    assert identify(line) == Identity("org/m", args_hash(line[line.index("{"):]))
    assert identify("(EngineCore pid=115) Starting to load model org/m-4bit...") == Identity("org/m-4bit")
    assert identify("INFO 05-04 14:43:16 llm_engine.py:98] Initializing an LLM engine (v0.4.1) with config: "
                    "model='x/y', speculative_config=None") == Identity("x/y")


@pytest.mark.parametrize("text", [
    "", "model", "server_args=ServerArgs(model_path='/m'",  # cut before its end: no hash from half a dump
    "non-default args: {'model': 'a'", "Loading model weights took 10.07 GB",
    "Starting to load model ...", "Starting to load model ", "load_model: loading model ''",
])
def test_lines_that_name_nothing(text: str) -> None:
    assert identify(text) is None


def test_each_start_has_its_own_identity() -> None:
    r = StartupReader("sglang")
    r.feed(SG.format(tp=1, seed=5))
    first = r.reading()
    r.feed("[2025-03-08 12:29:00] The server is fired up and ready to roll!")
    r.feed("[2025-03-08 12:30:00] server_args=ServerArgs(model_path='/m/Other', tp_size=4)")
    second = r.reading()
    assert first.model == "/m/Qwen" and second.model == "/m/Other"
    assert second.args_hash == args_hash("model_path='/m/Other', tp_size=4")
    assert second.starts == 2


def test_host_state_carries_the_identity() -> None:
    from probes.logs.journal_json import Record
    from probes.fold.model import HostModel

    m = HostModel("gpu-node-1", "sglang.service", "sglang")
    m.apply(Record(texts=(SG.format(tp=1, seed=5)[22:],), cursor="c1", realtime_us=1741436938_000000,
                   pid=7, ident="python3", unit="sglang.service", invocation=None, systemd=False))
    s = m.state(1741436940.0)
    assert (s.model, s.args_hash) == ("/m/Qwen", identify(SG.format(tp=1, seed=9)).args_hash)


@pytest.mark.parametrize(("text", "port"), [
    ("[2025-05-02 16:13:35] server_args=ServerArgs(model_path='/m', host='127.0.0.1', port=30006, "
     "nccl_port=None, metrics_port=9)", 30006),
    ("[2025-05-02 16:14:59] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", 30000),
    ("(APIServer pid=1) INFO 02-12 19:34:50 [utils.py:325] non-default args: {'model_tag': 'x', 'port': 8001}", 8001),
    ("(APIServer pid=1) INFO 05-12 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000", 8000),
    ("main: server is listening on http://127.0.0.1:8080 - starting the main loop", 8080),
    ("Starting trtllm-serve for model openai/gpt-oss-120b on port 8355...", 8355),
    ("nccl_port=29500", None), ("INFO:     127.0.0.1:48030 - \"GET /get_model_info HTTP/1.1\" 200 OK", None),
    ("server_args=ServerArgs(port=99999)", None),
])
def test_the_port_a_line_names(text: str, port: int | None) -> None:
    assert listen_port(text) == port


def test_the_reading_carries_the_port_of_the_last_start() -> None:
    assert _reading("sglang-ok-01.log").port == 30000
    assert _reading("trtllm-ok-01.log").port == 8355
    assert _reading("vllm-fail-oom-01.log").port is None
