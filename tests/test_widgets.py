"""widgets: phase bar, GPU strip, host card and the card grid, mounted in small apps (Pilot)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import App, ComposeResult
from textual.color import Color

from probes.data.reading import ErrorLine, Progress
from probes.data.events import GpuReading, GpuSample, ProbeFailure, UnitState
from probes.data.state import HostState, PhaseSpan, Verdict
from widgets.fmt import duration, hms
from widgets.gpu_strip import GpuStrip, note_word
from widgets.host_card import HostCard
from widgets.overview import CardGrid
from widgets.phase_bar import PhaseBar, phase_cells, progress_label

T0 = 1_700_000_000.0  # 22:13:20 UTC
NASTY = ["[bold]", "[/]", "[/usr/bin/python3]", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "a\rb", "\x1b",
         "\x9b31m", "x\u202ey", "sur\ud800rogate", "z" * 5000]


def screen_text(app: App) -> str:
    """What the terminal shows, as plain text lines."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def gpus(n: int = 8, used: int | None = 72000, total: int | None = 81559, util: int | None = 99,
         **kw) -> GpuReading:
    return GpuReading(T0 + 100, tuple(GpuSample(i, f"GPU-{i}", "NVIDIA H100 80GB HBM3", used, total, util, **kw)
                                      for i in range(n)))


def loading_state(**kw) -> HostState:
    base = dict(
        host="gpu-a1", unit="sglang.service", engine="sglang", state="loading", phase="graph_capture",
        phases=(PhaseSpan("starting", T0, 20.0), PhaseSpan("weights", T0 + 20, 100.0),
                PhaseSpan("init", T0 + 120, 48.0), PhaseSpan("graph_capture", T0 + 168, None)),
        progress=Progress("graph_capture", 3, 13), start_began=T0, phase_began=T0 + 168,
        readiness="port_closed", restart_counter=2, gpus=gpus(),
        last_line="Capture cuda graph begin. This can take up to several minutes.",
        verdict=Verdict("info", "Capturing CUDA graphs."), updated=T0 + 200)
    base.update(kw)
    return HostState(**base)


class One(App):
    """Mounts one widget."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


class Grid(App):
    CSS = "Screen { layout: vertical; } #top, #bottom { height: 1; }"

    def __init__(self, states: list[HostState], now: float = 0.0) -> None:
        super().__init__()
        self.states, self.now = states, now
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        from textual.widgets import Static
        yield Static("header", id="top")
        yield CardGrid()
        yield Static("footer", id="bottom")

    def on_mount(self) -> None:
        grid = self.query_one(CardGrid)
        for s in self.states:
            grid.update_host(s)
        grid.set_now(self.now)

    def on_host_card_selected(self, event: HostCard.Selected) -> None:
        self.selected.append(event.host)


def var_color(app: App, name: str):
    return Color.parse(app.get_css_variables()[name]).rich_color


# --- formatting helpers ------------------------------------------------------------------------------

def test_times_and_durations() -> None:
    assert hms(T0) == "22:13:20" and hms(None) == "--:--:--" and hms(float("nan")) == "--:--:--"
    assert [duration(x) for x in (0, 59.9, 72, 243, 3600 * 2 + 300, 86400 * 3 + 3600, -5, None)] == [
        "0s", "59s", "1m12s", "4m03s", "2h05m", "3d01h", "0s", "?"]


def test_progress_labels() -> None:
    assert progress_label(Progress("weights", 14, 14)) == "shards 14/14"
    assert progress_label(Progress("graph_capture", 3, 13)) == "batches 3/13"
    assert progress_label(Progress("download", 1.2e9, 3.4e9)) == "1.2/3.4 GB"
    assert progress_label(Progress("download", 5e5, 9e5)) == "500.0/900.0 kB"
    assert progress_label(Progress("init", 2, 5)) == "2/5"
    assert progress_label(None) == ""


# --- phase bar -----------------------------------------------------------------------------------------

def test_phase_cells_past_current_future_and_skipped() -> None:
    cells = dict(phase_cells("init", "loading", frozenset({"starting", "weights", "init"})))
    assert cells == {"starting": "done", "download": "skipped", "weights": "done", "init": "current",
                     "graph_capture": "future", "warmup": "future", "ready": "future"}
    assert dict(phase_cells("starting", "loading", frozenset({"starting", "download"})))["download"] == "done"
    assert dict(phase_cells("init", "failed"))["init"] == "failed"
    assert set(dict(phase_cells("ready", "ready")).values()) == {"done", "ready"}
    assert set(dict(phase_cells("starting", "waiting")).values()) == {"future"}


async def test_phase_bar_shows_all_seven_phases_in_76_columns_with_a_progress_fill() -> None:
    bar = PhaseBar()
    app = One(bar)
    async with app.run_test(size=(76, 3)) as pilot:
        bar.update_state(loading_state(phase="weights", progress=Progress("weights", 7, 14),
                                       phases=(PhaseSpan("starting", T0, 1.0), PhaseSpan("weights", T0 + 1, None))))
        await pilot.pause()
        line = screen_text(app).splitlines()[0]
        for label in ("Start", "Dl", "Weights", "Init", "Graph", "Warm", "Ready"):
            assert label in line
        assert "✓ Start" in line and "– Dl" in line and "▸ Weights" in line
        t = bar.render_text(76, "weights", "loading", Progress("weights", 7, 14))
        assert cell_len(t.plain) <= 76
        fill = bar.get_component_rich_style("phase-bar--fill", partial=True)
        filled = [t.plain[s.start:s.end] for s in t.spans if s.style == fill]
        assert filled and 4 <= len(filled[0]) <= 6  # half of a ~10-cell segment
        # A progress of another phase is not drawn inside the current one.
        t2 = bar.render_text(76, "weights", "loading", Progress("download", 1, 2))
        assert not [s for s in t2.spans if s.style == fill]


async def test_phase_bar_marks_the_phase_a_failed_start_died_in_as_an_error() -> None:
    bar = PhaseBar()
    app = One(bar)
    async with app.run_test(size=(80, 3)) as pilot:
        bar.show("init", "failed")
        await pilot.pause()
        assert "✗ Init" in screen_text(app)
        t = bar.render_text(76, "init", "failed")
        style = next(s.style for s in t.spans if "Init" in t.plain[s.start:s.end])
        assert style.color == var_color(app, "text-error")
        assert style.bgcolor == var_color(app, "error-muted")


async def test_phase_bar_narrow_stays_on_one_line() -> None:
    bar = PhaseBar("init", "loading")
    app = One(bar)
    async with app.run_test(size=(40, 3)):
        for w in (40, 20, 7):
            t = bar.render_text(w, "init", "loading", Progress("init", 1, 2))
            assert "\n" not in t.plain and cell_len(t.plain) <= w


# --- GPU strip -----------------------------------------------------------------------------------------

async def test_eight_h200_gpus_fit_in_76_columns_in_two_lines() -> None:
    strip = GpuStrip()
    app = One(strip)
    async with app.run_test(size=(76, 4)) as pilot:
        strip.show(gpus(8, used=140000, total=143771, util=100))
        await pilot.pause()
        t = strip.render_text(76, gpus(8, used=140000, total=143771, util=100))
        lines = t.plain.split("\n")
        assert len(lines) == 2 and all(cell_len(x) <= 76 for x in lines)
        assert all(f"{i} " in t.plain for i in range(8))
        assert t.plain.count("137G") == 8 and t.plain.count("100%") == 8
        shown = screen_text(app).splitlines()[:2]
        assert shown[0].rstrip() == lines[0].rstrip()


async def test_gpu_values_a_board_cannot_give_read_na_never_zero() -> None:
    strip = GpuStrip()
    app = One(strip)
    async with app.run_test(size=(76, 4)) as pilot:
        reading = GpuReading(T0, (GpuSample(0, "u", "A100 MIG", None, None, None),
                                  GpuSample(1, "u", "A100", 40960, None, None)))
        strip.show(reading)
        await pilot.pause()
        text = screen_text(app)
        assert text.count("n/a") >= 4
        assert "0%" not in text and " 0G" not in text and "0.0G" not in text
        assert "40G" in text


async def test_gpu_with_a_note_shows_a_short_word_in_the_error_colour() -> None:
    strip = GpuStrip()
    app = One(strip)
    async with app.run_test(size=(76, 4)) as pilot:
        reading = GpuReading(T0, (GpuSample(0, "u", "H100", 1, 2, 3),
                                  GpuSample(1, "u", "H100", None, None, None, note="[GPU requires reset]")))
        strip.show(reading)
        await pilot.pause()
        assert "✗ reset" in screen_text(app)
        t = strip.render_text(76, reading)
        style = next(s.style for s in t.spans if "reset" in t.plain[s.start:s.end])
        assert style.color == var_color(app, "text-error")
    assert note_word("[Unknown Error]") == "error" and note_word("GPU is lost") == "lost"


async def test_gpu_strip_waiting_and_failing_probe_keeps_the_last_sample_dimmed() -> None:
    strip = GpuStrip()
    app = One(strip)
    async with app.run_test(size=(76, 4)) as pilot:
        await pilot.pause()
        assert "GPU: waiting" in screen_text(app)
        failure = ProbeFailure(T0 + 60, "gpu", "timeout", "nvidia-smi [/] timed out\x1b[2J")
        strip.update_state(loading_state(gpus=gpus(8), failures=(failure,)))
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert lines[0].startswith("GPU: n/a since 22:14:20 — nvidia-smi [/] timed out")
        assert "99%" in lines[1] and "7" in lines[1]  # all 8 GPUs, one line, still there
        t = strip.render_text(76, gpus(8), failure)
        assert any(s.style.dim for s in t.spans)
        strip.update_state(loading_state(gpus=None, failures=(failure,)))
        await pilot.pause()
        assert "GPU: n/a since 22:14:20" in screen_text(app)


async def test_sixteen_gpus_still_fit_two_lines() -> None:
    strip = GpuStrip()
    app = One(strip)
    async with app.run_test(size=(76, 4)):
        t = strip.render_text(76, gpus(16))
        lines = t.plain.split("\n")
        assert len(lines) == 2 and all(cell_len(x) <= 76 for x in lines)
        assert "15" in lines[1]


# --- host card ---------------------------------------------------------------------------------------

async def test_card_shows_every_line_of_a_loading_host() -> None:
    card = HostCard(loading_state(), now=T0 + 243)
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "gpu-a1" in text.splitlines()[0]  # the border title
        for part in ("LOADING", "sglang.service", "sglang", "port closed", "restarts 2", "✓ Weights", "▸ Graph",
                     "batches 3/13 (23%)", "in Graph capture 1m15s", "since start 4m03s", "70G",
                     "99%", "Capture cuda graph begin.", "Capturing CUDA graphs."):
            assert part in text, part
        assert card.outer_size.height == 9  # as tall as it says: 7 lines (2 of GPUs) and the border
        assert card.has_class("-loading") and not card.has_class("-ready")


async def test_card_clock_ticks_from_now_without_touching_state() -> None:
    state = loading_state()
    card = HostCard(state, now=T0 + 240)
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        applied = []
        original = card._apply
        card._apply = lambda s: (applied.append(s), original(s))
        card.now = T0 + 241
        await pilot.pause()
        assert "since start 4m01s" in screen_text(app)
        assert card.state is state and applied == []
        card.state = loading_state()  # equal snapshot: nothing to do
        await pilot.pause()
        assert applied == []
        card.state = loading_state(progress=Progress("graph_capture", 4, 13))
        await pilot.pause()
        assert len(applied) == 1 and "batches 4/13" in screen_text(app)


async def test_card_states_as_classes() -> None:
    card = HostCard(loading_state())
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        card.state = loading_state(state="ready", phase="ready", readiness="serving", verdict=None)
        await pilot.pause()
        assert card.has_class("-ready") and "serving" in screen_text(app) and "● Ready" in screen_text(app)
        card.state = loading_state(state="failed", phase="init", readiness="inactive", cause="cuda_oom",
                                   error=ErrorLine(7, "torch.OutOfMemoryError: CUDA out of memory", "cuda_oom",
                                                   "Lower the memory fraction."),
                                   hint="Lower the memory fraction.", last_log_at=T0 + 180,
                                   verdict=Verdict("error", "CUDA ran out of memory in Init."))
        await pilot.pause()
        text = screen_text(app)
        assert card.has_class("-failed") and not card.has_class("-ready")
        assert "FAILED" in text and "✗ Init" in text and "not running" in text
        assert "✗ torch.OutOfMemoryError: CUDA out of memory" in text
        assert "Hint: Lower the memory fraction." in text
        assert card.query_one("#hc-verdict").has_class("-error")
        card.state = loading_state(verdict=Verdict("warning", "Init is slow."))
        await pilot.pause()
        assert card.has_class("-warning") and card.query_one("#hc-verdict").has_class("-warning")


async def test_stale_card_says_so_and_keeps_the_last_known_values() -> None:
    card = HostCard(loading_state(), now=T0 + 400)
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        await pilot.pause()
        before = screen_text(app)
        card.state = loading_state(stale_since=T0 + 300, updated=T0 + 290, reconnect_attempt=3)
        await pilot.pause()
        text = screen_text(app)
        assert card.has_class("-stale")
        assert "STALE · reconnecting (attempt 3), last data 22:18:10" in text and "STALE 1m40s" in text.splitlines()[1]
        for kept in ("70G", "99%", "batches 3/13", "Capture cuda graph begin.", "port closed"):
            assert kept in before and kept in text, kept
        assert " 0%" not in text and "0.0G" not in text


async def test_nasty_host_text_renders_literally_on_a_card() -> None:
    card = HostCard(loading_state(), now=T0 + 10)
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        for nasty in NASTY:
            card.state = loading_state(
                host=f"h{nasty}"[:60], unit=f"u{nasty}"[:80], engine=nasty[:20], last_line=nasty,
                verdict=Verdict("warning", f"v {nasty}"),
                failures=(ProbeFailure(T0, "gpu", "timeout", nasty),))
            await pilot.pause()
            text = screen_text(app)
            assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
            if nasty.startswith("["):
                assert f"h{nasty}" in text and f"u{nasty}" in text and f"› {nasty}" in text
                assert f"v {nasty}" in text and f"— {nasty}" in text
        card.state = loading_state(state="failed", error=ErrorLine(1, "[/] \x1b[31mboom\x1b[0m", "unknown", ""))
        await pilot.pause()
        assert "✗ [/] boom" in screen_text(app)


async def test_card_with_gpu_values_missing_shows_na() -> None:
    card = HostCard(loading_state(gpus=gpus(2, used=None, total=None, util=None)))
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        await pilot.pause()
        gpu_lines = [ln for ln in screen_text(app).splitlines() if "0 ┄" in ln or "1 ┄" in ln]
        assert gpu_lines and all("n/a" in ln and "0%" not in ln for ln in gpu_lines)


async def test_card_is_focusable_and_selected_by_enter_or_click() -> None:
    app = Grid([loading_state(), loading_state(host="gpu-a2")])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        cards = list(app.query(HostCard))
        assert all(c.can_focus for c in cards)
        cards[1].focus()
        await pilot.pause()
        assert cards[1].styles.border.top[0] == "heavy" and cards[0].styles.border.top[0] == "round"
        await pilot.press("enter")
        await pilot.click(cards[0])
        await pilot.pause()
        assert app.selected == ["gpu-a2", "gpu-a1"]
        assert app.focused is cards[0]


# --- the grid ------------------------------------------------------------------------------------------

def eight_states() -> list[HostState]:
    out = []
    for i in range(8):
        out.append(loading_state(host=f"gpu-{i}", stale_since=T0 if i == 3 else None,
                                 state=("loading", "ready", "failed", "loading")[i % 4]))
    return out


async def test_eight_cards_fit_a_160x48_terminal_in_two_columns() -> None:
    app = Grid(eight_states(), now=T0 + 60)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        grid = app.query_one(CardGrid)
        cards = list(grid.cards.values())
        assert grid.columns == 2 and len(cards) == 8
        for c in cards:
            r = c.region
            assert r.height >= 11 and r.width == 80  # the 46 free rows shared out: 12, 12, 11, 11
            assert r.y >= 1 and r.bottom <= 47, r
        assert {c.region.x for c in cards} == {0, 80}
        assert grid.max_scroll_y == 0 and max(c.region.bottom for c in cards) == 47
        text = screen_text(app)
        assert all(f"gpu-{i}" in text for i in range(8)) and "STALE · " in text


async def test_grid_columns_follow_the_width_and_it_scrolls_when_the_rows_do_not_fit() -> None:
    app = Grid(eight_states()[:4], now=T0 + 60)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        grid = app.query_one(CardGrid)
        assert grid.columns == 1 and grid.has_class("-one-column")
        assert {c.region.x for c in grid.cards.values()} == {0}
        assert grid.max_scroll_y > 0
        for size, columns in (((160, 48), 2), ((119, 48), 1), ((120, 48), 2), ((180, 48), 3), ((300, 48), 4)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert grid.columns == columns, size  # cards at least 60 wide, never more columns than cards
            assert grid.has_class("-one-column") == (columns == 1)
        await pilot.resize_terminal(160, 16)  # two rows of cards that need 9 rows each: it scrolls
        await pilot.pause()
        assert grid.columns == 2 and grid.max_scroll_y > 0
        assert all(c.region.height >= c.get_content_height(c.size, app.size, c.content_size.width) + 2
                   for c in grid.cards.values())  # no card is squeezed under what it says


async def test_grid_updates_cards_in_place_and_sets_their_clock() -> None:
    app = Grid([loading_state()], now=T0 + 200)
    async with app.run_test(size=(160, 48)) as pilot:
        grid = app.query_one(CardGrid)
        card = grid.card("gpu-a1")
        assert grid.update_host(loading_state(phase="warmup", progress=None)) is card
        grid.update_host(loading_state(host="gpu-z"))
        grid.set_now(T0 + 300)
        await pilot.pause()
        assert len(app.query(HostCard)) == 2 and card.state.phase == "warmup"
        assert all(c.now == T0 + 300 for c in grid.cards.values())
        assert "since start 5m00s" in screen_text(app)
        card.focus()
        await pilot.press("right")
        assert app.focused is grid.card("gpu-z")
        grid.remove_host("gpu-z")
        await pilot.pause()
        assert len(app.query(HostCard)) == 1


async def test_card_repaints_in_the_new_theme_colours() -> None:
    card = HostCard(loading_state())
    app = One(card)
    async with app.run_test(size=(80, 13)) as pilot:
        def colour_of(word: str):
            for strip in app.screen._compositor.render_strips():
                for seg in strip:
                    if seg.text == word:
                        return seg.style.color
            raise AssertionError(word)

        await pilot.pause()
        assert colour_of("port closed") == var_color(app, "text-warning")
        app.theme = "textual-light"
        await pilot.pause()
        assert colour_of("port closed") == var_color(app, "text-warning")
        assert colour_of("sglang") == var_color(app, "foreground-muted")


async def test_unit_state_is_not_needed_for_the_card() -> None:
    state = loading_state(unit_state=UnitState(T0, "sglang.service", "loaded", "active", "running"),
                          restart_counter=None, restart_loop=True, readiness="weird")
    app = One(HostCard(state))
    async with app.run_test(size=(80, 13)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "restart loop" in text and "no health data" in text
        assert isinstance(app.widget.header_text(state), Text)
