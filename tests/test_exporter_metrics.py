"""``upwatch exporter``'s metrics without a real host: the HostState → metric mapping
(tui/metrics.py), the HTTP server of tui/exporter.py on the demo's recorded starts (ReplayRunners,
a ManualClock), ``promtool check metrics`` on both exposition formats, and the cardinality bound
(50 hosts with every label set filled stay under :data:`SERIES_50_HOSTS`)."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from probes.clock import ManualClock
from probes.data.reading import ErrorLine, FailedStart, Progress
from probes.data.events import GpuOrphan
from probes.data.state import HostState, Knowledge, Typical, Verdict
from probes.fold import verdict as verdict_module
from probes.fold.verdict import VERDICT_KINDS
from probes.spec import HostSpec
from probes.transport.replay.runner import ReplayRunner
from tui.config import Config
from tui.demo import demo_scenarios
from tui.exporter import serve
from tui.metrics import LABEL_MAX_CHARS, READINESS_RUNGS, SERIES_PER_HOST, START_PHASES, host_families

T0 = 1_764_000_000.0
ROOT = Path(__file__).resolve().parent.parent

#: The documented bound (docs/fleets.md): 50 hosts with every label set filled, plus the
#: exporter's own process metrics, stay under this many series.
SERIES_50_HOSTS = 1700


def series(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text exposition, keyed by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(text: str, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``, or None when there is none."""
    found = [v for (n, ls), v in series(text).items() if n == name and labels.items() <= dict(ls).items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def exposition(hosts: list[tuple[str, HostState]], now: float = T0) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    class One:
        def collect(self):  # noqa: ANN202 - the Collector protocol
            return host_families(hosts, now)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(One())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


# --- the fixed lists ------------------------------------------------------------------------------

def test_every_verdict_rule_id_is_in_the_fixed_list() -> None:
    source = Path(verdict_module.__file__).read_text()
    kinds = set(re.findall(r'kind="([a-z_]+)"', source))
    assert kinds and kinds == set(VERDICT_KINDS)


def test_an_unknown_verdict_kind_or_cause_never_becomes_a_label() -> None:
    s = HostState("h", "u.service", state="failed", cause="a cause from the future",
                  verdict=Verdict("error", "x", kind="new_rule_id"))
    text = exposition([("h", s)])
    assert value(text, "upwatch_verdict", kind="other", level="error") == 1
    assert value(text, "upwatch_failure_cause", cause="unknown") == 1


# --- one host's states ---------------------------------------------------------------------------

LOADING = HostState("gpu-a", "sglang.service", engine="sglang", state="loading", phase="graph_capture",
                    progress=Progress("graph_capture", 12, 48), start_began=T0 - 100, phase_began=T0 - 10,
                    readiness="port_closed", restart_counter=3, gpu_orphans=(),
                    knowledge=(Knowledge("unit", "read", T0), Knowledge("journal", "read", T0),
                               Knowledge("gpu", "failing", T0, "nvidia-smi: not found"), Knowledge("health", "never")),
                    log_count=812, model="Qwen/Qwen3-8B")


def test_a_loading_start_is_its_phase_with_progress_and_no_eta_without_history() -> None:
    text = exposition([("gpu-a", LOADING)])
    key = {"host": "gpu-a", "unit": "sglang.service"}
    assert value(text, "upwatch_host_info", **key) == 1
    assert value(text, "upwatch_host_info", engine="sglang", model="Qwen/Qwen3-8B") == 1
    assert {p: value(text, "upwatch_start_phase", phase=p, **key) for p in START_PHASES} == \
        {p: (1.0 if p == "graph_capture" else 0.0) for p in START_PHASES}
    assert {r: value(text, "upwatch_readiness", rung=r) for r in READINESS_RUNGS} == \
        {r: (1.0 if r == "port_closed" else 0.0) for r in READINESS_RUNGS}
    assert value(text, "upwatch_ready") == 0
    assert value(text, "upwatch_phase_progress_ratio") == 0.25
    assert value(text, "upwatch_start_time_seconds") == T0 - 100
    assert value(text, "upwatch_unit_restarts") == 3
    assert value(text, "upwatch_gpu_orphan_memory_bytes") == 0
    assert value(text, "upwatch_verdict", kind="waiting", level="info") == 1  # the health probe never answered
    assert value(text, "upwatch_failure_cause") is None  # not failed
    assert [value(text, "upwatch_probe_up", probe=p) for p in ("unit", "journal", "gpu", "health")] == [1, 1, 0, 0]
    assert value(text, "upwatch_journal_lines_total") == 812
    # Unknown is absent, never NaN: no history, so no ETA series at all.
    assert value(text, "upwatch_ready_eta_seconds") is None
    assert "NaN" not in text


def test_the_eta_comes_from_earlier_starts() -> None:
    typical = Typical("gpu-a", "sglang.service", "Qwen/Qwen3-8B", None, n=5, total_s=300.0,
                      phases=(("graph_capture", 40.0, 5), ("warmup", 20.0, 5)))
    text = exposition([("gpu-a", replace(LOADING, typical=typical))])
    assert value(text, "upwatch_ready_eta_seconds") == pytest.approx(40.0 * 0.75 + 20.0)


def test_a_failed_start_in_a_loop_says_its_cause_and_the_loop() -> None:
    s = HostState("gpu-b", "vllm.service", engine="vllm", state="failed", phase="weights", readiness="inactive",
                  restart_loop=True, cause="cuda_oom", error=ErrorLine(40, "torch.OutOfMemoryError: ...", "cuda_oom", ""),
                  failed_starts=(FailedStart("cuda_oom", "weights", None),) * 3, restart_counter=2,
                  gpu_orphans=(GpuOrphan(77, "python x", 1536, 0), GpuOrphan(78, "y", None, 1)),
                  verdict=Verdict("error", "Restart loop: ...", kind="restart_loop"),
                  knowledge=(Knowledge("journal", "read", T0),))
    text = exposition([("gpu-b", s)])
    assert value(text, "upwatch_start_phase", phase="failed") == 1
    assert value(text, "upwatch_restart_loop") == 1 and value(text, "upwatch_failed_starts") == 3
    assert value(text, "upwatch_failure_cause", cause="cuda_oom") == 1
    assert value(text, "upwatch_verdict", kind="restart_loop", level="error") == 1
    assert value(text, "upwatch_gpu_orphan_memory_bytes") == 1536 * 1024 * 1024
    assert value(text, "upwatch_phase_progress_ratio") is None and value(text, "upwatch_start_time_seconds") is None
    # The decisive line never becomes a label or a value.
    assert "OutOfMemoryError" not in text and "Restart loop:" not in text


def test_a_host_whose_log_was_never_read_has_no_restart_loop_value() -> None:
    # Unknown is absent (docs/fleets.md): a host never reached served upwatch_restart_loop 0 and
    # upwatch_failed_starts 0, values nobody read (fresh-user check).
    s = HostState("gpu-c", "vllm.service", knowledge=(Knowledge("journal", "never"),))
    text = exposition([("gpu-c", s)])
    assert value(text, "upwatch_restart_loop") is None and value(text, "upwatch_failed_starts") is None
    failing = HostState("gpu-c", "vllm.service", knowledge=(Knowledge("journal", "failing", T0, "ssh: refused"),))
    assert value(exposition([("gpu-c", failing)]), "upwatch_restart_loop") is None


def test_a_probe_that_has_not_answered_is_waiting_never_ok() -> None:
    # Fresh-user check: for ~3 s after the exporter started, a host served (none, ok) while
    # upwatch_probe_up{probe="journal"} was 0. Never "ok" for what was not read, in every view.
    from probes.spec import HostSpec
    from tui.report import markdown_report
    from tui.status import change_key, format_host, host_json

    read = (Knowledge("unit", "read", T0), Knowledge("gpu", "read", T0), Knowledge("health", "read", T0))
    early = HostState("h", "u.service", readiness="healthy", knowledge=(*read, Knowledge("journal", "never")))
    text = exposition([("h", early)])
    assert value(text, "upwatch_verdict", kind="waiting", level="info") == 1
    assert value(text, "upwatch_verdict", kind="none") is None
    item = host_json(HostSpec("h", "u.service"), early)
    assert (item["verdict"]["level"], item["verdict"]["kind"]) == ("info", "waiting")
    assert item["verdict"]["sentence"] == "Waiting for the first answer of the journal; nothing is judged before it."
    assert change_key(early)["verdict"] == ["info", "waiting"]
    assert "Waiting for the first answer of the journal" in format_host(HostSpec("h", "u.service"), early)
    # The report names what was not read instead (a saved log's will never be: upwatch replay).
    assert "**Verdict (ok):** nothing wrong seen in what was read; not read: journal" in \
        markdown_report(early, [], now=T0, made_at=T0)
    # Each probe answered (the journal failing counts: the verdict says so): no more waiting.
    answered = replace(early, knowledge=(*read, Knowledge("journal", "read", T0)))
    assert value(exposition([("h", answered)]), "upwatch_verdict", kind="none", level="ok") == 1
    assert host_json(HostSpec("h", "u.service"), answered)["verdict"]["level"] == "ok"
    failing = replace(early, knowledge=(*read, Knowledge("journal", "failing", T0, "refused")))
    assert value(exposition([("h", failing)]), "upwatch_verdict", kind="waiting") is None


def test_ready_means_the_log_and_health_agree() -> None:
    base = HostState("h", "u.service", state="ready", phase="ready")
    assert value(exposition([("h", replace(base, readiness="serving"))]), "upwatch_ready") == 1
    assert value(exposition([("h", replace(base, readiness="healthy"))]), "upwatch_ready") == 1
    assert value(exposition([("h", replace(base, readiness="port_closed"))]), "upwatch_ready") == 0
    waiting = exposition([("h", HostState("h", "u.service"))])
    assert value(waiting, "upwatch_start_phase", phase="waiting") == 1
    assert value(waiting, "upwatch_readiness", rung="unknown") == 1
    assert value(waiting, "upwatch_unit_restarts") is None and value(waiting, "upwatch_gpu_orphan_memory_bytes") is None


def test_host_text_in_labels_is_one_safe_cut_line() -> None:
    s = HostState("h", "u.service", model="evil\x1b]0;title\x07\nmodel" + "x" * 500)
    text = exposition([("h\x1b[31m", s)])
    [(labels, _)] = [(dict(ls), v) for (n, ls), v in series(text).items() if n == "upwatch_host_info"]
    assert "\x1b" not in labels["model"] + labels["host"] and "\n" not in labels["model"]
    assert len(labels["model"]) <= LABEL_MAX_CHARS and labels["model"].endswith("…")


# --- promtool and cardinality ---------------------------------------------------------------------

def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


def full_state(i: int) -> HostState:
    """A host with every optional series present (loading with a bar, an ETA, restarts, orphans,
    a verdict), and a long hostile name."""
    typical = Typical(f"gpu-{i}", "sglang.service", None, None, n=3, total_s=200.0, phases=(("weights", 60.0, 3),))
    return replace(LOADING, host=f"gpu-{i}", phase="weights", progress=Progress("weights", 3, 8), typical=typical,
                   gpu_orphans=(GpuOrphan(5, "p", 100, 0),), verdict=Verdict("warning", "s", kind="suspect"))


def test_promtool_accepts_the_output_and_50_hosts_stay_under_the_bound() -> None:
    from prometheus_client import generate_latest

    from tui.exporter import make_registry

    hosts = [(f"gpu-node-{i:02d}-" + "n" * 40, full_state(i)) for i in range(50)]
    one = series(exposition(hosts[:1]))
    assert len(one) == SERIES_PER_HOST - 1  # every series but the failure cause (not failed)
    failed = replace(full_state(0), state="failed", cause="nccl")
    assert len(series(exposition([("x", failed)]))) <= SERIES_PER_HOST
    # The exporter's own registry: the hosts' metrics and its process, GC and platform metrics.
    text = generate_latest(make_registry(lambda: hosts, lambda: T0)).decode()
    total = len(series(text))
    own = total - len(series(exposition(hosts)))
    assert 0 < own < 50
    assert total < SERIES_50_HOSTS, total  # measured: 50 x 31 + 16 = 1566
    assert SERIES_PER_HOST * 50 + own < SERIES_50_HOSTS  # even if every host were failed at once
    done = promtool_check(text)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the server, on the demo's recorded starts ---------------------------------------------------

@pytest.fixture
async def demo_exporter() -> AsyncIterator[tuple[ManualClock, str]]:
    clock = ManualClock(T0)
    scenarios = {sc.host: sc for sc in demo_scenarios(T0)}
    config = Config(hosts=tuple(HostSpec(sc.host, sc.unit, sc.port, sc.engine) for sc in scenarios.values()))
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(config, "127.0.0.1", 0, stop=stop, clock=clock,
                                     runner_factory=lambda spec: ReplayRunner(scenarios[spec.name], clock, start=T0),
                                     gpu_source_factory=lambda spec: None, on_listening=bound.set_result))
    port = await asyncio.wait_for(bound, 10)
    try:
        yield clock, f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_the_exporter_serves_the_demo_hosts_in_both_formats(demo_exporter: tuple[ManualClock, str]) -> None:
    clock, url = demo_exporter
    for _ in range(60 * 10 // 5):  # ten simulated minutes
        await clock.advance(5)
    async with httpx.AsyncClient() as client:
        r = await client.get(url + "/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = r.text
        om = await client.get(url + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["content-type"].startswith("application/openmetrics-text")
        assert om.text.endswith("# EOF\n") and "# TYPE upwatch_host info" in om.text
        assert (await client.get(url + "/nothing")).status_code == 404
        assert (await client.post(url + "/metrics")).status_code == 405
        assert (await client.get(url + "/")).status_code == 200
    assert value(text, "upwatch_start_phase", host="gpu-node-1", phase="ready") == 1
    assert value(text, "upwatch_ready", host="gpu-node-1") == 1
    assert value(text, "upwatch_readiness", host="gpu-node-1", rung="serving") == 1
    assert value(text, "upwatch_restart_loop", host="gpu-node-2") == 1
    assert (value(text, "upwatch_failed_starts", host="gpu-node-2") or 0) >= 2
    assert value(text, "upwatch_verdict", host="gpu-node-2", kind="restart_loop", level="error") == 1
    assert value(text, "upwatch_verdict", host="gpu-node-3", kind="stalled", level="warning") == 1
    assert (value(text, "upwatch_journal_lines_total", host="gpu-node-1") or 0) >= 40
    assert value(text, "process_resident_memory_bytes") is not None
    done = promtool_check(text)  # promtool 2.42 lints the text format only
    assert done.returncode == 0, done.stdout + done.stderr
    # OpenMetrics: prometheus_client's strict parser (it refuses what the spec forbids).
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics

    fams = {f.name: f for f in openmetrics(om.text)}
    assert fams["upwatch_host"].type == "info" and fams["upwatch_journal_lines"].type == "counter"


# --- the command line -----------------------------------------------------------------------------

def test_the_command_refuses_a_bad_address_and_no_hosts(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import socket

    from tui.cli import main

    (tmp_path / "hosts.toml").write_text("# no hosts\n")
    monkeypatch.setenv("UPWATCH_CONFIG", str(tmp_path / "hosts.toml"))
    with pytest.raises(SystemExit) as usage:  # argparse's exit 2, as serve's
        main(["exporter", "--listen", "nowhere", "local/sglang"])
    assert usage.value.code == 2
    assert "--listen takes PORT or :PORT (127.0.0.1:PORT), HOST:PORT or [IPv6]:PORT, not 'nowhere'" in \
        capsys.readouterr().err
    assert main(["exporter"]) == 2
    assert "upwatch exporter: no hosts to watch: looked for " in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["exporter", "--listen", f"127.0.0.1:{port}", "local/sglang"]) == 2
    err = capsys.readouterr().err
    assert f"upwatch exporter: cannot listen on 127.0.0.1:{port}: " in err and "in use" in err
