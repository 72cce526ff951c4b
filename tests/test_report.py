"""The Markdown report (tui/report.py): exact expected files for the demo's ready and failed hosts
(copied with ``c`` in the dashboard, through Pilot: the clipboard text and the toast) and for a
replayed journal (``upwatch replay LOG --markdown``); hostile host text stays inert Markdown.

Update the expected files after a deliberate change: ``UPWATCH_UPDATE_REPORTS=1 pytest
tests/test_report.py``, then read the diff and commit ``tests/fixtures/report``.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

from markdown_it import MarkdownIt

from probes.clock import ManualClock
from probes.data.reading import ErrorLine, Progress
from probes.data.events import GpuReading, GpuSample, UnitState
from probes.data.state import HostState, Knowledge, LogEntry, PhaseSpan, Verdict
from tui import cli
from tui.demo_app import advance_demo, make_demo_app
from tui.report import fence_for, markdown_report, md_code, md_text
from tui.detail_screen import DetailScreen

T0 = 1_764_000_000.0
HERE = Path(__file__).parent
EXPECTED = HERE / "fixtures" / "report"


def _matches(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPWATCH_UPDATE_REPORTS"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"report differs from {path}"


async def test_c_copies_the_report_of_the_focused_card_and_of_the_detail_screen() -> None:
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 600)
        await pilot.press("c")  # the first card has the focus: gpu-node-1, ready
        await pilot.pause()
        ready = app.clipboard
        toasts = [n.message for n in app._notifications]
        assert any(m.startswith("Copied the report of gpu-node-1 to the clipboard (Markdown, ") for m in toasts)
        app.open_detail("gpu-node-2")  # the restart loop
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("c")
        await pilot.pause()
        failed = app.clipboard
        assert any("report of gpu-node-2" in n.message for n in app._notifications)
    _matches("demo-ready.md", ready)
    _matches("demo-failed.md", failed)
    assert "- **State:** ready, phase Ready" in ready and "Restart loop: 3 starts failed" in failed
    # the decisive line with the 10 lines before it, in one fenced block
    block = _fenced(failed)
    assert len(block) == 11 and "CUDA out of memory" in block[-1]


def test_replay_markdown_prints_the_report_of_a_saved_journal(capsys) -> None:
    log = HERE / "fixtures" / "journal" / "vllm-restart-loop.jsonl"
    assert cli.main(["replay", str(log), "--markdown"]) == 0
    out = capsys.readouterr().out.replace(str(log), "LOG")
    _matches("replay-vllm-restart-loop.md", out)
    assert "- unit state (systemctl show): never answered" in out  # a saved log has no unit state
    assert "Verdict (ok)" not in out


def test_replay_markdown_reads_standard_input_too(capsys, monkeypatch) -> None:
    log = HERE / "fixtures" / "journal" / "vllm-restart-loop.jsonl"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    assert cli.main(["replay", "-", "--markdown"]) == 0
    out = capsys.readouterr().out
    expected = (EXPECTED / "replay-vllm-restart-loop.md").read_text(encoding="utf-8")
    assert out == expected.replace("LOG", "standard input")


def test_replay_refuses_json_with_markdown(capsys) -> None:
    assert cli.main(["replay", "x.log", "--json", "--markdown"]) == 2
    assert "give one" in capsys.readouterr().err


# --- hostile text ---------------------------------------------------------------------------------

HOSTILE = ("[bold red]x[/] <script>alert(1)</script> [click](javascript:alert(1)) ![i](http://e/i.png) "
           "**b** _i_ `code` ```` fence ```` \x1b]0;title\x07 \x1b[31mred\x1b[0m \u202eevil @someone $x$ | a |")


def _hostile_state() -> HostState:
    err = ErrorLine(line=12, text="RuntimeError: " + HOSTILE, cause="cuda_oom", hint="fix " + HOSTILE)
    return HostState(
        host="h[1](x)", unit="u`nit`.service", engine="vllm", state="failed", phase="init",
        phases=(PhaseSpan("starting", T0, 5.0), PhaseSpan("init", T0 + 5, None)),
        progress=Progress("init", 1, 2), error=err, failed_at=T0 + 9, cause="cuda_oom", hint=err.hint,
        unit_state=UnitState(T0 + 10, "u.service", "loaded", "failed", "failed", "exit-code", n_restarts=2,
                             exec_main_code=1, exec_main_status=1),
        gpus=GpuReading(T0 + 10, (GpuSample(0, "GPU-0", "NVIDIA <b>|H100|</b> ``x``", 100, 200, 5),)),
        verdict=Verdict("error", "Start failed: " + HOSTILE, "failed", ("decisive line: " + HOSTILE,)),
        knowledge=(Knowledge("unit", "read", T0), Knowledge("journal", "read", T0),
                   Knowledge("gpu", "failing", T0, "nvidia-smi: " + HOSTILE, ""), Knowledge("health", "never")),
    )


def _fenced(md: str) -> list[str]:
    tokens = [t for t in MarkdownIt("commonmark").enable("table").parse(md) if t.type == "fence"]
    assert len(tokens) == 1
    return tokens[0].content.splitlines()


def test_hostile_host_text_stays_inert() -> None:
    s = _hostile_state()
    entries = [LogEntry(i, T0 + i / 10, f"line {i} " + ("`" * i) + HOSTILE) for i in range(1, 13)]
    md = markdown_report(s, entries, now=T0 + 20, source="test")
    # no escape code, control or format character reaches the text
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", md)
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(md)
    inline = [c for t in tokens if t.children for c in t.children]
    kinds = {c.type for c in inline} | {t.type for t in tokens}
    # nothing a host wrote became a link, an image, HTML, emphasis or strikethrough (the one
    # emphasis is the report's own line under the title: where the data came from)
    assert not kinds & {"link_open", "image", "html_inline", "html_block", "s_open"}
    assert [c.type for c in inline].count("em_open") == 1
    strong = [c for t in tokens if t.children for c in t.children if c.type == "strong_open"]
    assert strong  # only the report's own labels are bold: each label is followed by ":**"
    assert len(strong) == len(re.findall(r"^- \*\*[A-Z][^*]*:\*\* ", md, re.M))
    # the fence survives backticks: 10 lines before the decisive one, then it, all in one block
    block = _fenced(md)
    assert len(block) == 11
    assert [line.split("  ", 1)[1].split(" ")[1] for line in block] == [str(i) for i in range(2, 13)]
    assert fence_for(["a ``` b", "````"]) == "`````"
    # the host's name and unit are code spans holding exactly their text
    codes = [c.content for c in inline if c.type == "code_inline"]
    assert "h[1](x)" in codes and "u`nit`.service" in codes
    assert "NVIDIA <b>\\|H100\\|</b> ``x``" in codes or "NVIDIA <b>|H100|</b> ``x``" in codes


def test_md_text_and_md_code_round_trip_through_a_markdown_renderer() -> None:
    html = MarkdownIt("commonmark").render(md_text(HOSTILE))
    assert "<a " not in html and "<img" not in html and "<script" not in html and "<em>" not in html
    assert "&lt;script&gt;" in html
    code = md_code("a ``` b `")
    assert MarkdownIt("commonmark").renderInline(code) == "<code>a ``` b `</code>"


def test_upwatch_report_looks_once_and_prints_the_report() -> None:
    from probes.clock import WallClock
    from probes.spec import HostSpec
    from probes.transport.replay.runner import ReplayRunner
    from tui.config import Config
    from tui.demo import demo_scenarios
    from tui.host_report import run_report

    clock = WallClock()
    t0 = clock.now() - 600  # the recorded restart loop has played out
    sc = {s.host: s for s in demo_scenarios(t0)}["gpu-node-2"]
    config = Config(hosts=(HostSpec(sc.host, sc.unit, sc.port, sc.engine),))
    out, err = io.StringIO(), io.StringIO()
    code = run_report(config, timeout_s=10, out=out, err=err,
                      runner_factory=lambda spec: ReplayRunner(sc, clock, start=t0))
    text = out.getvalue()
    assert code == 0 and err.getvalue() == ""
    assert text.startswith("## upwatch report: gpu-node-2\n")
    assert "Restart loop: 3 starts failed" in text and "### Decisive line (log line" in text
    assert len(_fenced(text)) == 11


def test_upwatch_report_names_exactly_one_host(capsys, tmp_path) -> None:
    assert cli.main(["report", "--config", str(tmp_path / "none.toml")]) == 2
    assert "exactly one HOST" in capsys.readouterr().err


def test_upwatch_report_of_a_real_host(testhost, tmp_path, monkeypatch, capsys) -> None:
    """``upwatch report`` over a real sshd (tests/testhost.py): the host's journal, unit state and
    GPUs are in the report, and nothing is listed as unread but what was."""
    from test_live_status import host_block, hosts_toml, setup_home

    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    config = hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port))
    assert cli.main(["report", "gpu-a", "--config", config, "--timeout", "20"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## upwatch report: gpu-a\n") and "- **State:** ready, phase Ready" in out
    assert "NRestarts 0" in out and "GPU 0 `NVIDIA H100 80GB HBM3`" in out
    assert "| Weight load | " in out
    assert out.endswith("Nothing: the unit, the journal, the GPUs and health were all read.\n\nupwatch 0.1.0\n")
