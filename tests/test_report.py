"""The Markdown report (tui/report.py): exact expected files for the demo's ready and failed hosts
(copied with ``c`` in the dashboard, through Pilot: the clipboard text and the toast) and for a
replayed journal (``upwatch replay LOG --markdown``); hostile host text stays inert Markdown.

Update the expected files after a deliberate change: ``UPWATCH_UPDATE_REPORTS=1 pytest
tests/test_report.py``, then read the diff and commit ``tests/fixtures/report``.
"""

from __future__ import annotations

import calendar
import io
import os
import re
import sys
import time
from dataclasses import replace
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
from waiting import until

T0 = 1_764_000_000.0
HERE = Path(__file__).parent
EXPECTED = HERE / "fixtures" / "report"


#: The line under the title ends with the real wall-clock time the report was made.
_MADE_RE = re.compile(r"made (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC_$", re.M)


def made_at(text: str) -> float:
    """The epoch seconds of the report's "made ... UTC" (its one such line)."""
    (stamp,) = _MADE_RE.findall(text)
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))


def _matches(name: str, text: str) -> None:
    """``text`` is the expected file ``name``, but for the time it was made (the wall clock's)."""
    text = _MADE_RE.sub("made (the wall clock) UTC_", text)
    path = EXPECTED / name
    if os.environ.get("UPWATCH_UPDATE_REPORTS"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"report differs from {path}"


async def test_c_copies_the_report_of_the_focused_card_and_of_the_detail_screen() -> None:
    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    began = time.time()
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
    # made at the real time (the wall clock's, not the demo clock's 2025-11-24 16:10), and from the demo
    for text in (ready, failed):
        assert int(began) <= made_at(text) <= time.time()
        assert text.splitlines()[2].startswith("_copied from the upwatch demo: simulated hosts, not real ones; its "
                                              "times are the demo's own clock, which read 2025-11-24 16:10:00 UTC; made ")
    _matches("demo-ready.md", ready)
    _matches("demo-failed.md", failed)
    assert "- **State:** ready, phase Ready" in ready and "Restart loop: 3 starts failed" in failed
    # the decisive line with the 10 lines before it, in one fenced block
    block = _fenced(failed)
    assert len(block) == 11 and "CUDA out of memory" in block[-1]


def test_replay_markdown_prints_the_report_of_a_saved_journal(capsys) -> None:
    log = HERE / "fixtures" / "journal" / "vllm-restart-loop.jsonl"
    began = time.time()
    assert cli.main(["replay", str(log), "--markdown"]) == 0
    out = capsys.readouterr().out.replace(str(log), "LOG")
    assert int(began) <= made_at(out) <= time.time()  # not the log's time: when it was read
    _matches("replay-vllm-restart-loop.md", out)
    assert "- unit state (systemctl show): never answered" in out  # a saved log has no unit state
    assert "Verdict (ok)" not in out


def test_replay_markdown_reads_standard_input_too(capsys, monkeypatch) -> None:
    log = HERE / "fixtures" / "journal" / "vllm-restart-loop.jsonl"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    assert cli.main(["replay", "-", "--markdown"]) == 0
    out = capsys.readouterr().out
    expected = (EXPECTED / "replay-vllm-restart-loop.md").read_text(encoding="utf-8")
    assert _MADE_RE.sub("made (the wall clock) UTC_", out) == expected.replace("LOG", "standard input")


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
    md = markdown_report(s, entries, now=T0 + 20, made_at=T0 + 30, source="test")
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


def test_the_decisive_line_is_whole_in_the_fence_and_a_shortened_context_line_is_named() -> None:
    """The decisive line is the evidence: all of it (sanitised) stands in the fence, however long;
    a context line stays bounded (LINE_CHARS), and the sentence under the block says which was cut."""
    from tui.report import LINE_CHARS

    decisive = "torch.OutOfMemoryError: CUDA out of memory. " + "x" * 1200 + " \x1b[31mEND\x1b[0m"
    long_context = "INFO warming up " + "y" * 900
    s = replace(_hostile_state(), error=ErrorLine(line=12, text=decisive, cause="cuda_oom", hint=""))
    entries = [LogEntry(i, T0 + i, long_context if i == 5 else f"line {i}") for i in range(1, 12)]
    entries.append(LogEntry(12, T0 + 12, decisive))
    md = markdown_report(s, entries, now=T0 + 20, made_at=T0 + 30, source="test")
    block = _fenced(md)
    assert block[-1].split("  ", 1)[1] == decisive.replace("\x1b[31m", "").replace("\x1b[0m", "")
    cut = next(line for line in block if "INFO warming up" in line)
    assert len(cut.split("  ", 1)[1]) == LINE_CHARS and cut.endswith("…")
    assert f"log line 5 ({len(long_context)} characters). The decisive line is whole." in md
    # with no line before it at hand, the line is still whole, in a fence of its own
    alone = _fenced(markdown_report(s, [], now=T0 + 20, made_at=T0 + 30, source="test"))
    assert alone == [decisive.replace("\x1b[31m", "").replace("\x1b[0m", "")]


def _replay_markdown(capsys, name: str) -> str:
    log = HERE / "fixtures" / "logs" / name
    assert cli.main(["replay", str(log), "--markdown"]) == 0
    return capsys.readouterr().out.replace(str(log), "LOG")


def _timeline_rows(md: str) -> list[list[str]]:
    part = md.split("### Phase timeline", 1)[1].split("###", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines()
            if line.startswith("| ") and not line.startswith("| Phase")]


def test_replay_markdown_of_a_text_log_shows_the_times_its_prefixes_give(capsys) -> None:
    """A plain vLLM log (``INFO 11-05 03:21:41``: no year, no zone): the phases' starts and the fenced
    lines' times are the ones the reader read, and what they lack is said once, in words."""
    md = _replay_markdown(capsys, "vllm-fail-oom-01.log")
    _matches("replay-vllm-fail-oom-text.md", md)
    assert _timeline_rows(md) == [["Weight load", "Nov 05 03:21:41", "0s"], ["Init", "Nov 05 03:21:41", "11s"]]
    assert "| Phase | Start (the log's clock) | Duration |" in md
    assert md.count("it gives no time zone (they are the host's local time, which may not be UTC) and no year.") == 1
    block = _fenced(md)
    assert [line[:10] for line in block] == ["03:21:41  "] * 4 + ["03:21:52  "]
    assert "--:--:--" not in md and " ? " not in md


def test_replay_markdown_says_once_which_times_a_log_lacks(capsys) -> None:
    # SGLang's full dates with no zone: the log's clock, with its year
    sglang = _replay_markdown(capsys, "sglang-ok-01.log")
    assert _timeline_rows(sglang)[0] == ["Starting", "2025-05-02 16:13:35", "7s"]
    assert "it gives no time zone (they are the host's local time, which may not be UTC)." in sglang
    # TGI's times end in Z: UTC, and nothing to say about them
    tgi = _replay_markdown(capsys, "tgi-fail-oom-01.log")
    assert "| Phase | Start (UTC) | Duration |" in tgi and "Times are as the log wrote them" not in tgi
    assert _timeline_rows(tgi) == [["Weight load", "2024-06-17 13:18:04", "26s"]]
    # a phase whose first line has no time: an empty cell, and one sentence (no column of ?)
    python_h = _replay_markdown(capsys, "vllm-fail-pythonh-01.log")
    assert _timeline_rows(python_h) == [["Weight load", "Feb 18 06:48:31", ""], ["Init", "", ""]]
    assert python_h.count("No start time for Init: the log line that began it carries none") == 1
    assert "a line with no time of its own shows none" in python_h
    assert _fenced(python_h)[-1].startswith(" " * 10 + "/tmp/")  # the compiler's line has no time
    # a log with no times at all: said once; the fence has no time column
    llama = _replay_markdown(capsys, "llamacpp-fail-oom-01.log")
    assert "No phase has a start time or a duration: the log's lines carry no times." in llama
    assert "(the lines carry no times)" in llama and _fenced(llama)[0].startswith("print_info:")
    for md in (sglang, tgi, python_h, llama):
        assert "--:--:--" not in md and " ? " not in md


async def test_the_footer_shows_c_copy_report_on_the_overview_and_the_detail_screen() -> None:
    from textual.widgets._footer import FooterKey

    clock = ManualClock(T0)
    app = make_demo_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await advance_demo(app, clock, pilot, 30)

        def shown() -> bool:  # the footer is composed again when the bindings change: look until it is
            return ("c", "Copy report") in {(k.key, k.description) for k in app.screen.query(FooterKey)}

        await until("c Copy report in the overview's footer", shown, pilot=pilot)
        app.open_detail("gpu-node-1")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        await until("c Copy report in the detail screen's footer", shown, pilot=pilot)


def test_a_host_never_reached_is_reported_unreachable_not_waiting() -> None:
    # A fresh user copied the report of a host whose row said UNREACHABLE: it said "State: waiting".
    never = HostState("gpu-9", "sglang.service", stale_since=T0, updated=None,
                      verdict=Verdict("warning", kind="stale", sentence="Cannot reach gpu-9 since 00:00:00."))
    assert "- **State:** unreachable\n" in markdown_report(never, [], now=T0 + 5, made_at=T0 + 5)
    lost = replace(never, updated=T0 - 60, state="loading", phase="weights")
    assert "- **State:** stale; the last known state: loading, phase Weight load\n" in \
        markdown_report(lost, [], now=T0 + 5, made_at=T0 + 5)
