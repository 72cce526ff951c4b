"""The download source alone on a ManualClock, on a context whose model is fed a vLLM start that
fetches its model silently (a captured log): where the hub cache is (the unit's real captured
``Environment=``; a user unit's own ``$HOME``), a look becomes a sample, a slow ``du`` is this
cell's failure, and an answer clears it. (tests/test_download.py has the watcher-level rules.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path


from canned_runner import CannedRunner
from probes.clock import ManualClock
from probes.fold.model import HostModel
from probes.logs.journal_json import parse_record
from probes.sources.context import SourceContext
from probes.sources.download import SAMPLE_SCRIPT, DownloadSource
from probes.spec import HostSpec
from probes.transport.runner import ProbeError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VLLM_LINES = (FIXTURES / "logs" / "vllm-hang-download-01.log").read_text().splitlines()[:3]  # loading, no bar
ENV = (FIXTURES / "systemctl-show-env" / "environment-user.txt").read_bytes()
T0 = 1_700_000_000.0
REPO = "models--unsloth--Qwen3-VL-32B-Instruct-bnb-4bit"


def downloading(spec: HostSpec, clock: ManualClock) -> HostModel:
    """A model of ``spec`` whose vLLM start is loading a hub model with no shard bar yet."""
    model = HostModel(spec.name, spec.unit, spec.engine)
    for text in VLLM_LINES:
        model.apply(parse_record(json.dumps({"MESSAGE": text, "__REALTIME_TIMESTAMP": str(int(clock.now() * 1e6)),
                                             "SYSLOG_IDENTIFIER": "vllm", "_PID": "115", "_TRANSPORT": "stdout"})))
    return model


async def test_the_cache_from_the_units_environment_is_sampled_and_a_slow_du_fails_then_clears(running) -> None:
    clock, runner = ManualClock(T0), CannedRunner()
    spec = HostSpec("gpu-node-1", "vllm.service", ssh="gpu-node-1", engine="vllm")
    model = downloading(spec, clock)
    path = f"/data/my cache/hub/{REPO}"
    runner.answer(["systemctl", "show", "vllm.service", "-p", "Environment,User"], ENV)
    runner.answer(["getent", "passwd", "nobody"], b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    runner.answer(["sh", "-c", SAMPLE_SCRIPT, "sh", path], b"ref main\ndu 1073741824\t.\n")
    source = DownloadSource(SourceContext(spec, runner, clock, model))
    running.append(asyncio.create_task(source.run()))
    await clock.settle()
    assert runner.ran(["sh", "-c", SAMPLE_SCRIPT]) == 1
    assert [s.bytes for s in model.download_samples()] == [2**30] and model.download_samples()[0].path == path
    runner.answer(["sh", "-c", SAMPLE_SCRIPT, "sh", path], ProbeError("timeout", "gpu-node-1: timed out after 30 s"))
    await clock.advance(5)
    f = model.state(clock.now()).failure("download")
    assert f is not None and (f.kind, f.message) == ("command", f"du of {path} took more than 30 s")
    runner.answer(["sh", "-c", SAMPLE_SCRIPT, "sh", path], b"ref main\ndu 2147483648\t.\n")
    await clock.advance(5)  # the next look, download_interval_s later (no backoff: one look at a time)
    assert model.state(clock.now()).failure("download") is None
    assert [s.bytes for s in model.download_samples()] == [2**30, 2**31]
    assert runner.ran(["systemctl"]) == 1  # the cache is looked up once per process


async def test_a_user_units_cache_is_under_the_ssh_users_home(running) -> None:
    clock, runner = ManualClock(T0), CannedRunner()
    spec = HostSpec("gpu-node-1", "vllm.service", ssh="gpu-node-1", engine="vllm", user_unit=True)
    model = downloading(spec, clock)
    runner.answer(["systemctl", "--user", "show", "vllm.service"], b"Environment=\nUser=\n")
    runner.answer(["sh", "-c", 'printf "%s\\n" "$HOME"'], b"/home/llm\n")
    runner.answer(["sh", "-c", SAMPLE_SCRIPT, "sh", f"/home/llm/.cache/huggingface/hub/{REPO}"], b"missing\n")
    running.append(asyncio.create_task(DownloadSource(SourceContext(spec, runner, clock, model)).run()))
    await clock.settle()
    assert runner.ran(["getent"]) == 0
    [sample] = model.download_samples()
    assert sample.status == "missing" and sample.path == f"/home/llm/.cache/huggingface/hub/{REPO}"


async def test_the_download_look_judges_no_verdict(running, monkeypatch) -> None:
    # The look asks whether a download is wanted (state, phase, progress, model) every few
    # seconds per host; it judged the host's verdict each time, which nothing here reads.
    import probes.fold.model as model_module

    clock, runner = ManualClock(T0), CannedRunner()
    spec = HostSpec("gpu-node-1", "vllm.service", ssh="gpu-node-1", engine="vllm", user_unit=True)
    model = downloading(spec, clock)
    model.apply(parse_record(json.dumps({"MESSAGE": "INFO 03-08 12:29:11 [api_server.py:1] Application startup complete.",
                                         "__REALTIME_TIMESTAMP": str(int(clock.now() * 1e6)),
                                         "SYSLOG_IDENTIFIER": "vllm", "_PID": "115", "_TRANSPORT": "stdout"})))
    judged: list[float] = []
    real = model_module.verdict_for
    monkeypatch.setattr(model_module, "verdict_for", lambda base, now, stall: judged.append(now) or real(base, now, stall))
    running.append(asyncio.create_task(DownloadSource(SourceContext(spec, runner, clock, model)).run()))
    await clock.settle()
    for _ in range(3):
        await clock.advance(5)
    assert runner.ran(["sh"]) == 0  # not wanted: the looks only asked the snapshot
    assert judged == []
    assert model.state(clock.now()) is not None and judged  # the snapshot itself still judges
