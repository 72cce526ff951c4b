"""widgets.log_pane and widgets.detail, mounted in small apps (Pilot)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from probes.data.events import GpuReading, GpuSample, ProbeFailure, UnitState
from probes.data.state import HostState, LogEntry, PhaseSpan
from widgets.detail import GpuHistory, PhaseTimeline, UnitPanel, spark
from widgets.log_pane import LogPane

T0 = 1_700_000_000.0  # 22:13:20 UTC
NASTY = ["[bold]", "[/]", "[/usr/bin/python3]", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "a\rb", "\x1b",
         "\x9b31m", "x\u202ey", "sur\ud800rogate", "z" * 5000]


def screen_text(app: App) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def entries(n: int, start: int = 1, word: str = "line") -> list[LogEntry]:
    return [LogEntry(seq, T0 + seq, f"INFO {word} {seq}" + (" ERROR boom" if seq % 10 == 0 else ""))
            for seq in range(start, start + n)]


class Pane(App):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.kw = kw

    def compose(self) -> ComposeResult:
        yield LogPane(**self.kw)


def visible_seqs(pane: LogPane) -> list[int]:
    shown = pane.shown
    top = int(pane.scroll_y)
    return [e.seq for e in shown[top:top + pane.scrollable_content_region.height]]


# --- log pane ------------------------------------------------------------------------------------------

async def test_lines_show_utc_time_and_host_text_literally() -> None:
    app = Pane()
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.append([LogEntry(i + 1, T0 + i, t) for i, t in enumerate(NASTY)] + [LogEntry(99, None, "no time")])
        pane.follow = False
        pane.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert lines[0].startswith("22:13:20 [bold]")
        assert lines[1].startswith("22:13:21 [/]")
        assert lines[2].startswith("22:13:22 [/usr/bin/python3]")
        assert lines[3].startswith("22:13:23 red")
        assert lines[5].startswith("22:13:25 b ")
        assert lines[8].startswith("22:13:28 xy")
        assert lines[9].startswith("22:13:29 sur\ufffdrogate")
        assert lines[10].startswith("22:13:30 zzzz")
        assert lines[11].startswith("         no time")
        text = screen_text(app)
        assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
        pane.scroll_to(x=4990, animate=False, immediate=True)  # far right of the long line
        await pilot.pause()
        assert "zzzz" in screen_text(app).splitlines()[10]


async def test_pane_caps_its_lines_dropping_the_oldest() -> None:
    app = Pane(max_lines=100)
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        for k in range(5):
            pane.append(entries(50, start=1 + 50 * k))
        await pilot.pause()
        assert len(pane.entries) == 100 and pane.entries[0].seq == 151 and pane.entries[-1].seq == 250
        pane.append(entries(1000, start=251))  # a batch bigger than the cap
        assert len(pane.entries) == 100 and pane.entries[0].seq == 1151
        assert pane.virtual_size.height == 100
        pane.max_lines = 10
        assert [e.seq for e in pane.entries] == list(range(1241, 1251))
        assert pane.line_count == 10


async def test_follow_keeps_the_tail_in_view_and_f_toggles_it() -> None:
    app = Pane()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.focus()
        pane.append(entries(200))
        await pilot.pause()
        assert pane.follow and pane.scroll_y == pane.max_scroll_y > 0
        assert "INFO line 200" in screen_text(app)
        await pilot.press("f")
        assert not pane.follow
        y = pane.scroll_y
        pane.append(entries(50, start=201))
        await pilot.pause()
        assert pane.scroll_y == y and "INFO line 250" not in screen_text(app)
        await pilot.press("f")
        await pilot.pause()
        assert pane.follow and pane.scroll_y == pane.max_scroll_y
        assert "INFO line 250" in screen_text(app)
        await pilot.press("pageup")
        assert not pane.follow
        await pilot.press("end")
        assert pane.follow


async def test_unfollowed_view_stays_on_its_lines_while_old_ones_are_dropped() -> None:
    app = Pane(max_lines=100, follow=False)
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.append(entries(100))
        await pilot.pause()
        pane.scroll_to(y=50, animate=False, immediate=True)
        await pilot.pause()
        top = visible_seqs(pane)[0]
        assert top == 51
        pane.append(entries(20, start=101))  # seqs 1-20 go
        await pilot.pause()
        assert visible_seqs(pane)[0] == top and pane.entries[0].seq == 21


async def test_filter_shows_only_matching_lines_case_insensitively() -> None:
    app = Pane()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.append(entries(100))
        pane.set_filter("error BOOM")
        await pilot.pause()
        assert pane.line_count == 10 and all(e.seq % 10 == 0 for e in pane.shown)
        lines = [ln for ln in screen_text(app).splitlines() if ln.strip()]
        assert lines and all("ERROR boom" in ln for ln in lines if ln[0].isdigit())
        pane.append(entries(20, start=101))
        assert pane.line_count == 12
        pane.set_filter("")
        assert pane.line_count == 120 and pane.filter is None
        pane.set_filter("[/usr")  # a pattern is never a regex nor markup
        assert pane.line_count == 0
        pane.append([LogEntry(500, None, "exec [/usr/bin/python3]")])
        assert [e.seq for e in pane.shown] == [500]
        pane.set_filter(None)
        assert pane.line_count == 121


async def test_n_and_shift_n_move_a_cursor_through_matches() -> None:
    app = Pane()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.focus()
        pane.append(entries(100))
        await pilot.pause()
        pane.follow = False
        pane.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        assert pane.search("error") == 10
        await pilot.press("n")
        assert pane.cursor_seq == 10
        await pilot.press("n", "n")
        assert pane.cursor_seq == 30
        await pilot.press("N")
        assert pane.cursor_seq == 20
        await pilot.pause()
        assert 20 in visible_seqs(pane)
        for _ in range(8):
            assert pane.next_match()
        assert pane.cursor_seq == 100
        assert pane.next_match() and pane.cursor_seq == 10  # wraps around
        assert pane.prev_match() and pane.cursor_seq == 100
        await pilot.pause()
        assert 100 in visible_seqs(pane) and not pane.follow
        # The cursor line and the matches are highlighted.
        strip = pane._row_strip(pane._rows[99], True)
        styles = {seg.text: seg.style for seg in strip}
        assert styles["ERROR"].bgcolor == pane.get_component_rich_style("log-pane--match", partial=True).bgcolor
        assert pane.get_component_rich_style("log-pane--cursor", partial=True).bgcolor in {
            seg.style.bgcolor for seg in strip}
        assert pane.search("no such thing") == 0 and not pane.next_match()
        pane.search(None)
        assert not pane.next_match()


async def test_jump_to_seq_highlights_the_line_and_stops_following() -> None:
    app = Pane(max_lines=500)
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.append(entries(600))
        await pilot.pause()
        assert pane.follow
        assert pane.jump_to_seq(250)
        await pilot.pause()
        assert pane.cursor_seq == 250 and not pane.follow and 250 in visible_seqs(pane)
        assert "INFO line 250 ERROR boom" in screen_text(app)
        assert not pane.jump_to_seq(50)  # dropped by the cap
        pane.set_filter("error")
        assert pane.jump_to_seq(251)  # hidden by the filter: the filter goes
        assert pane.filter is None and pane.cursor_seq == 251
        await pilot.pause()
        assert 251 in visible_seqs(pane)


async def test_systemd_lines_are_styled_apart_and_strips_are_cached_boundedly() -> None:
    app = Pane()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.append([LogEntry(1, T0, "Started sglang.service.", systemd=True), LogEntry(2, T0, "server line")])
        await pilot.pause()
        systemd = pane.get_component_rich_style("log-pane--systemd", partial=True)
        sys_strip = pane._row_strip(pane._rows[0], False)
        srv_strip = pane._row_strip(pane._rows[1], False)
        assert any(seg.style.italic and seg.style.color == systemd.color for seg in sys_strip)
        assert not any(seg.style.italic for seg in srv_strip)
        assert pane._strips.maxsize <= 4096
        pane.clear()
        assert pane.line_count == 0 and pane.entries == []


# --- detail widgets ------------------------------------------------------------------------------------

class Detail(App):
    def compose(self) -> ComposeResult:
        yield PhaseTimeline()
        yield GpuHistory()
        yield UnitPanel()


def detail_state(**kw) -> HostState:
    base = dict(
        host="gpu-a1", unit="sglang.service", engine="sglang", state="loading", phase="graph_capture",
        phases=(PhaseSpan("starting", T0, 12.0, "server_args=ServerArgs([bold])"),
                PhaseSpan("weights", T0 + 12, 95.0, "Load weight begin \x1b[31m[/]\x1b[0m"),
                PhaseSpan("graph_capture", T0 + 107, None, "Capture cuda graph begin")),
        start_began=T0, phase_began=T0 + 107,
        unit_state=UnitState(T0 + 200, "sglang.service", "loaded", "activating", "start", "success", 2, 4242,
                             T0, None, 12 * 2**30, 2, 9),
        gpus=GpuReading(T0 + 200, (GpuSample(0, "u", "H100", 40960, 81920, 90, 61, 300.0),
                                   GpuSample(1, "u", "H100", None, None, None))),
        gpu_history=(tuple((k / 10, k * 10) for k in range(11)), tuple((None, None) for _ in range(11))))
    base.update(kw)
    return HostState(**base)


def test_sparkline_scale_and_gaps() -> None:
    assert spark([0.0, 0.5, 1.0, None], 4, 1.0) == "▁▅█ "
    assert spark([50.0], 3, 100.0) == "  ▅"


async def test_detail_widgets_render_a_host() -> None:
    app = Detail()
    async with app.run_test(size=(100, 30)) as pilot:
        for w in (PhaseTimeline, GpuHistory, UnitPanel):
            app.query_one(w).update_state(detail_state(), now=T0 + 167)
        await pilot.pause()
        text = screen_text(app)
        assert "✓ Starting      22:13:20      12s  server_args=ServerArgs([bold])" in text
        assert "✓ Weight load   22:13:32    1m35s  Load weight begin [/]" in text
        assert "▸ Graph capture 22:15:07   1m00s…  Capture cuda graph begin" in text
        assert "2 × H100 · last sample 22:16:40" in text
        gpu0 = next(ln for ln in text.splitlines() if ln.startswith("GPU0"))
        assert "█" in gpu0 and "50%" in gpu0 and "90%" in gpu0 and "61°C" in gpu0
        gpu1 = next(ln for ln in text.splitlines() if ln.startswith("GPU1"))
        assert gpu1.count("n/a") == 4 and "0%" not in gpu1
        assert "sglang.service  activating (start)" in text
        for part in ("result     success", "restarts   2", "main PID   4242", "memory     12.0 GiB",
                     "started    22:13:20 (2m47s ago)", "last exit  killed by SIGKILL"):
            assert part in text, part
        assert "\x1b" not in text


async def test_unit_panel_not_found_missing_and_failing() -> None:
    app = Detail()
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(UnitPanel)
        panel.update_state(detail_state(unit_state=UnitState(T0, "nope.service", "not-found", "inactive", "dead")))
        await pilot.pause()
        assert "nope.service  NOT FOUND" in screen_text(app)
        panel.update_state(detail_state(unit="[/]x.service", unit_state=None))
        await pilot.pause()
        assert "unit [/]x.service: waiting for systemctl show" in screen_text(app)
        panel.update_state(detail_state(failures=(ProbeFailure(T0, "unit", "unreachable", "ssh: [bold]no route"),)))
        await pilot.pause()
        text = screen_text(app)
        assert "unit: n/a since 22:13:20 — ssh: [bold]no route" in text and "main PID   4242" in text


async def test_detail_widgets_survive_nasty_text_and_empty_states() -> None:
    app = Detail()
    async with app.run_test(size=(100, 40)) as pilot:
        for nasty in NASTY:
            state = detail_state(
                unit=nasty, phases=(PhaseSpan("starting", T0, None, nasty),),
                gpus=GpuReading(T0, (GpuSample(0, "u", nasty, 1, 2, 3, note=nasty or None),)),
                failures=(ProbeFailure(T0, "gpu", "x", nasty), ProbeFailure(T0, "unit", "x", nasty)))
            for w in (PhaseTimeline, GpuHistory, UnitPanel):
                app.query_one(w).update_state(state)
            await pilot.pause()
            text = screen_text(app)
            assert "\x1b" not in text and "\x9b" not in text
            if nasty.startswith("["):
                assert f"GPU: n/a since 22:13:20 — {nasty}" in text
        empty = HostState(host="h", unit="u.service")
        for w in (PhaseTimeline, GpuHistory, UnitPanel):
            app.query_one(w).update_state(empty)
        await pilot.pause()
        text = screen_text(app)
        assert "no phase yet" in text and "GPU: waiting for the first sample" in text
