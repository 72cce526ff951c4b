"""The compact overview (issue 17): one row per host, sorted, filtered, with a cursor; shown on its
own when the cards do not fit. The fleet is 128 real watchers (the demo's four scenarios, each 32
times under other names: tui.demo_app.fleet_scenarios) whose models are fed the scenarios' journals up to 400 s in, so the rows
are the real model's states; nothing of the table is mocked."""

from __future__ import annotations

import dataclasses
import json

from rich.style import Style
from textual import events
from textual.widgets import Input

from probes.clock import ManualClock
from probes.data.state import HostState, Verdict
from probes.logs.journal_json import parse_record
from tui.app import UpwatchApp
from tui.demo_app import fleet_scenarios, make_demo_app
from tui.detail_screen import DetailScreen
from tui.screens import OverviewScreen
from widgets.host_card import HostCard
from widgets.host_rows import SEVERITY, condition, header_text, matches, row_cells, row_text, sort_key
from widgets.host_table import HostTable
from waiting import until

T0 = 1_764_000_000.0
#: Markup, escapes (OSC title, CSI clear, 8-bit CSI), a bidi override and a bell, in one name.
HOSTILE = "[bold red]evil[/] \x1b]0;pwned\x07\x1b[2J\x9b31m\u202eeman"


def fleet_app(n: int = 128, hostile: bool = False) -> UpwatchApp:
    """``n`` hosts named ``gpu-000``...: host i runs the demo's scenario i % 4
    (:func:`tui.demo_app.fleet_scenarios`); its model has read that scenario's journal up to 400 s
    (watchers not started: the state is the model's, fixed). ``hostile``: host 1 (a failing one)
    is named :data:`HOSTILE` instead."""
    names = [f"gpu-{i:03d}" for i in range(n)]
    if hostile:
        names[1] = HOSTILE
    app = make_demo_app(clock=ManualClock(T0 + 400), start=T0, names=names, start_watchers=False)
    for sc in fleet_scenarios(T0, names):
        app.watchers[sc.host].model.apply_all(
            parse_record(json.dumps(dict(e.fields))) for e in sc.journal if e.offset_s <= 400)
    return app


def _screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def _send(app, pilot, *keys: str) -> None:
    """Post ``keys`` back to back, as a terminal delivers a held key (no turn of the event loop
    between them), then let the app handle them all."""
    for key in keys:
        app.simulate_key(key)
    await pilot.pause()
    await pilot.pause()


async def _settle(app, pilot) -> None:
    app.tick()
    app.flush()
    await pilot.pause()


# --- the rows, without an app -----------------------------------------------------------------------


def _style(_look: str) -> Style:
    return Style()


def test_a_row_lays_its_cells_out_in_columns_and_cuts_the_verdict_to_fit():
    s = HostState(host="gpu-node-7", unit="sglang.service", state="failed", phase="init", restart_counter=3,
                  restart_loop=True, readiness="inactive",
                  verdict=Verdict("error", "Restart loop: 3 starts failed in 2m44s, each CUDA out of memory during "
                                  "Init; lower --mem-fraction-static or free the GPUs. " * 2))
    cells = row_cells(s, T0)
    assert (cells.word, cells.word_look, cells.phase_label, cells.restarts, cells.level) == (
        "FAILED", "error", "Init", "3 loop", "error")
    row = row_text(cells, 160, _style).plain
    assert len(row) == 160 and row.endswith("…")
    assert row.startswith("gpu-node-7".ljust(21) + "FAILED".ljust(14) + "✗ Init")
    assert row.index("not running") == 21 + 14 + 17 + 7
    assert row.index("3 loop") == 21 + 14 + 17 + 7 + 15 + 10
    assert "Restart loop: 3 starts failed" in row
    # A narrow row drops the GPUs (then restarts, then the ETA) before the verdict gets too narrow.
    narrow = row_text(cells, 100, _style).plain
    assert len(narrow) == 100 and "3 loop" not in narrow and "Restart loop" in narrow


def test_the_header_row_keeps_the_filter_and_the_count_however_narrow():
    # A fresh user kept a filter at 120 and 80 columns and saw no sign of it: the titles took the
    # row and the order, count and filter were dropped.
    for width in (200, 160, 120, 80, 40):
        head = header_text(width, "severity", 7, 30, "gpu-a1", lambda look: Style()).plain
        assert len(head) == width
        assert "7 of 30" in head and "filter: gpu-a1" in head, (width, head)
    assert "order: severity · 30 hosts" in header_text(160, "severity", 30, 30, "", lambda look: Style()).plain


def test_a_host_with_no_start_seen_shows_no_phase():
    # A never-reached host's row said "· Start": the default phase, which nothing had shown.
    cells = row_cells(HostState("gpu-9", "sglang.service", stale_since=T0, updated=None), T0)
    assert (cells.phase_icon, cells.phase_label) == ("·", "—")


def test_hostile_host_name_and_verdict_stay_inert_text_in_a_row():
    s = HostState(host=HOSTILE, unit="u", state="failed", verdict=Verdict("error", "[link=x]boom[/link] " + HOSTILE))
    row = row_text(row_cells(s, T0), 160, _style).plain
    assert "[bold red]evil[/]" in row and "[link=x]boom[/link]" in row  # markup stays characters
    assert not any(c in row for c in "\x1b\x07\x9b\u202e")  # no escape, bell, C1 or bidi control


def test_severity_puts_broken_and_stuck_hosts_first_then_starts_then_ready():
    mk = dataclasses.replace
    base = HostState(host="h", unit="u")
    states = {
        "ready": mk(base, host="a-ready", state="ready", readiness="serving"),
        "unhealthy": mk(base, host="b-unhealthy", state="ready", readiness="http_unhealthy"),
        "loading": mk(base, host="c-loading", state="loading"),
        "waiting": mk(base, host="d-waiting"),
        "stale": mk(base, host="e-stale", state="loading", stale_since=T0, updated=T0 - 5),
        "failed": mk(base, host="f-failed", state="failed"),
        "stalled": mk(base, host="g-stalled", state="loading", verdict=Verdict("warning", "no line", kind="stalled")),
        "judged unhealthy": mk(base, host="i-unhealthy", state="ready", readiness="port_closed",
                               verdict=Verdict("warning", "not healthy", kind="unhealthy")),
        "stopped": mk(base, host="h-stopped", state="stopped"),
    }
    order = sorted(states.values(), key=lambda s: sort_key("severity", s, 0))
    assert [s.host for s in order] == ["f-failed", "g-stalled", "i-unhealthy", "b-unhealthy", "e-stale", "c-loading",
                                       "d-waiting", "h-stopped", "a-ready"]
    assert [condition(s) for s in order] == sorted((condition(s) for s in order), key=SEVERITY.index)
    assert matches(states["failed"], "FAIL") and matches(states["stale"], "stale")
    assert matches(states["ready"], "a-re") and not matches(states["ready"], "fail")


# --- the compact view in the app ------------------------------------------------------------------------


async def test_128_hosts_at_160x48_show_one_row_each_worst_first_and_no_card():
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen) and screen.compact
        table = screen.query_one(HostTable)
        assert app.focused is table and table.total == 128 and len(table.rows) == 128
        assert not screen.query(HostCard)  # the cards are made only when shown
        text = _screen_text(app)
        assert "128 hosts: 32 failed · 32 stalled · 64 ready" in text  # the header counts every host
        assert "order: severity · 128 hosts" in text and "View: auto (compact)" in text
        conds = [condition(table.state(h)) for h in table.rows]
        assert conds == sorted(conds, key=SEVERITY.index) and conds[0] == "failed" and conds[-1] == "ready"
        lines = text.splitlines()
        first = lines[2]  # under the app's header and the table's
        assert first.startswith("gpu-001") and "FAILED" in first and "Restart loop: 3 starts failed" in first
        assert sum(1 for ln in lines if ln.startswith("gpu-")) == 48 - 3  # header, titles, footer


async def test_down_ten_times_at_once_moves_ten_rows_and_scrolls_with_the_cursor():
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        await _send(app, pilot, *["down"] * 10)
        assert table.cursor == 10
        await _send(app, pilot, *["down"] * 50)
        assert table.cursor == 60 and table.scroll_y > 0
        shown = _screen_text(app)
        assert table.cursor_host in shown  # the cursor's row is on screen
        await pilot.press("end")
        assert table.cursor == 127
        await pilot.press("home", "pagedown")
        assert table.cursor == 48 - 3


async def test_the_filter_narrows_the_rows_as_you_type_and_escape_clears_it():
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        await pilot.press("slash", *"gpu-01")
        await pilot.pause()
        assert sorted(table.rows) == [f"gpu-{i:03d}" for i in range(10, 20)]
        assert "10 of 128 hosts · filter: gpu-01" in _screen_text(app)
        await pilot.press("2")
        await pilot.pause()
        assert table.rows == ["gpu-012"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(table.rows) == 128 and app.focused is table
        # By state: enter keeps the filter and gives the keys back to the rows.
        await pilot.press("slash", *"fail", "enter")
        await pilot.pause()
        assert len(table.rows) == 32 and all(condition(table.state(h)) == "failed" for h in table.rows)
        assert app.focused is table and "32 of 128" in _screen_text(app)


async def test_keys_sent_in_one_read_with_the_slash_reach_the_filter():
    # `tmux send-keys "/gpu-01" Enter` (an agent, a paste) puts every key in one read: the app
    # routes each to the focused widget as it arrives, so the letters went to the rows before "/"
    # had focused the box, and the enter opened a host's detail screen.
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        for key, char in [("slash", "/"), *((c, c) for c in "gpu"), ("minus", "-"), ("0", "0"), ("1", "1"),
                          ("enter", "\r")]:
            app.post_message(events.Key(key, char))  # all queued before the first is handled
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen) and app.focused is table
        assert app.screen.query_one("#filter", Input).value == "gpu-01"
        assert sorted(table.rows) == [f"gpu-{i:03d}" for i in range(10, 20)]
        # A "/" typed in the box is a letter of the filter, not a new "/".
        await pilot.press("slash", "a", "slash", "b")
        assert app.screen.query_one("#filter", Input).value == "a/b"


async def test_the_footer_over_the_rows_ends_with_help_at_80_columns():
    # It was cut at "q Qu": below 100 columns the keys take their short words and the theme key
    # (in the command palette too) is left out; wider, the long words come back.
    app = fleet_app(40)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot)
        footer = _screen_text(app).splitlines()[-1]
        assert footer.startswith("⏎ Open c Copy / Filter o Order v auto (compact) q Quit ? Help "), footer
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        footer = _screen_text(app).splitlines()[-1]
        assert "⏎ Details  c Copy report" in footer and "View: auto (compact)" in footer and "t Theme" in footer


async def test_o_cycles_the_order_and_the_header_says_it():
    app = fleet_app(24)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        assert app.screen.compact  # 10 of 24 cards would be on a 160x48 screen
        await pilot.press("o")
        await pilot.pause()
        assert table.order == "name" and table.rows == sorted(table.rows) and "order: name" in _screen_text(app)
        await pilot.press("o")
        await pilot.pause()
        assert table.order == "arrival" and table.rows == list(app.watchers)
        await pilot.press("o")
        assert table.order == "severity"


async def test_enter_opens_the_detail_of_the_row_under_the_cursor_and_keys_act_on_it():
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        await pilot.press("down", "down", "down")
        host = table.cursor_host
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.watcher.name == host
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen) and table.cursor_host == host and app.focused is table
        copied = []
        app.copy_report = copied.append  # type: ignore[method-assign]  # c asks the app for this host's report
        await pilot.press("c")
        assert copied == [host]


async def test_a_state_change_redraws_only_its_row_and_off_screen_changes_draw_nothing():
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        table = screen.query_one(HostTable)
        await pilot.pause()
        visible, hidden = table.rows[5], table.rows[100]
        for host, sentence in ((visible, "A new sentence."), (hidden, "Another one.")):
            before = table.rows_drawn
            st = table.state(host)
            kind = st.verdict.kind if st.verdict is not None else ""  # the same condition: no re-sort
            screen.update_host(dataclasses.replace(st, verdict=Verdict("info", sentence, kind=kind)))
            await pilot.pause()
            assert table.rows_drawn - before == (1 if host == visible else 0)
        assert "A new sentence." in _screen_text(app)
        before = table.rows_drawn
        screen.update_host(dataclasses.replace(table.state(visible), last_line="a line no cell shows"))
        app.tick()
        app.flush()
        await pilot.pause()
        assert table.rows_drawn == before  # a tick that changes no visible cell draws no row


async def test_v_cycles_auto_cards_compact_and_a_few_hosts_show_cards_in_auto():
    from probes.clock import ManualClock as Clock

    app = make_demo_app(clock=Clock(T0))
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert not screen.compact and len(screen.query(HostCard)) == 4 and "View: auto (cards)" in _screen_text(app)
        await pilot.press("down")  # the card below: gpu-node-3
        await pilot.press("v")
        assert screen.view == "cards" and not screen.compact
        await pilot.press("v")
        await pilot.pause()
        table = screen.query_one(HostTable)
        assert screen.view == "compact" and screen.compact and app.focused is table
        assert table.cursor_host == "gpu-node-3" and "View: compact" in _screen_text(app)  # the same host
        await pilot.press("v")
        await pilot.pause()
        assert screen.view == "auto" and not screen.compact
        assert isinstance(app.focused, HostCard) and app.focused.state.host == "gpu-node-3"


async def test_a_hostile_host_name_is_shown_as_its_characters():
    app = fleet_app(24, hostile=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        assert table.rows[0] == HOSTILE  # a failed host, named first of the failed
        row = _screen_text(app).splitlines()[2]
        assert row.startswith("[bold red]evil[/] ") and "FAILED" in row
        assert not any(c in row for c in "\x1b\x07\x9b\u202e")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.watcher.name == HOSTILE


def test_auto_shows_the_cards_while_half_of_them_are_on_the_screen():
    from widgets.overview import cards_on_screen

    assert cards_on_screen(20, 160, 46) == 10 and cards_on_screen(128, 160, 46) == 10  # 2 columns x 5 rows
    assert cards_on_screen(4, 80, 22) == 2 and cards_on_screen(1, 80, 5) == 1


async def test_auto_looks_again_when_the_terminal_is_resized():
    app = fleet_app(24)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert screen.compact and not screen.query(HostCard)
        await pilot.resize_terminal(200, 80)  # 3 columns of 8 cards: all 24 on the screen
        await pilot.pause()
        assert not screen.compact and len(screen.query(HostCard)) == 24
        assert "View: auto (cards)" in _screen_text(app)
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert screen.compact and app.focused is screen.query_one(HostTable)


async def test_switching_from_the_rows_to_the_cards_shows_the_focused_host_card():
    # A fresh user moved the rows' cursor to a host far down, pressed v, and saw the first cards,
    # the focus on a card off the screen.
    app = fleet_app(30)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        table = screen.query_one(HostTable)
        assert screen.compact and app.focused is table
        await _send(app, pilot, *["down"] * 20)
        host = table.cursor_host
        await pilot.press("v")  # auto (compact) -> cards
        await pilot.pause()
        await pilot.pause()
        assert screen.view == "cards"
        card = app.focused
        assert isinstance(card, HostCard) and card.state.host == host
        assert screen.grid.region.contains_region(card.region), (screen.grid.region, card.region)


async def test_a_host_that_moves_in_the_order_costs_its_own_sort_key_and_the_filter_stays_exact(monkeypatch):
    """A re-sort sorts the keys the table keeps (each made when its host's state changed), not
    128 keys made anew for every host that moved (the 128-host profile's lead in the table); the
    filter still reads each host's latest condition and headline."""
    import widgets.host_table as host_table

    made: list[str] = []

    def counted_sort_key(order, s, arrival):
        made.append(s.host)
        return sort_key(order, s, arrival)

    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        table = screen.query_one(HostTable)
        monkeypatch.setattr(host_table, "sort_key", counted_sort_key)
        host = table.rows[-1]  # a ready host, sorted last
        assert condition(table.state(host)) == "ready"
        screen.update_host(dataclasses.replace(table.state(host), state="failed"))
        assert made == [host]  # one key made, not one per host
        assert table.rows.index(host) < 33 and condition(table.state(table.rows[32])) == "failed"  # among the failed
        await pilot.press("slash", *"stale", "enter")
        await pilot.pause()
        assert table.rows == []  # no host is stale
        screen.update_host(dataclasses.replace(table.state(host), stale_since=T0, updated=T0 - 5))
        assert table.rows == [host]  # the filter reads its new condition at once ...
        screen.update_host(dataclasses.replace(table.state(host), stale_since=None))
        assert table.rows == []  # ... and again when it answers


async def test_a_changed_row_makes_its_cells_once_to_tell_the_change_and_draw_it(monkeypatch):
    import widgets.host_table as host_table
    from widgets.host_rows import row_cells

    made: list[str] = []

    def counted_row_cells(s, now=0.0):
        made.append(s.host)
        return row_cells(s, now)

    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        table = screen.query_one(HostTable)
        await pilot.pause()
        monkeypatch.setattr(host_table, "row_cells", counted_row_cells)
        host = table.rows[5]
        st = table.state(host)
        kind = st.verdict.kind if st.verdict is not None else ""  # the same condition: no re-sort
        before = table.rows_drawn
        screen.update_host(dataclasses.replace(st, verdict=Verdict("info", "A new sentence.", kind=kind)))
        await pilot.pause()
        assert table.rows_drawn - before == 1 and "A new sentence." in _screen_text(app)
        assert made == [host]  # told and drawn from the same cells


async def test_a_row_drawn_from_its_pieces_is_the_row_text_cell_for_cell():
    """The table draws a row from :func:`~widgets.host_rows.row_pieces` straight to segments;
    every cell (character and style) is what rendering :func:`~widgets.host_rows.row_text` gives,
    for every host of the fleet, at widths that drop columns and cut the row, under the cursor too."""
    from widgets.host_rows import row_cells

    def cells_of(strip):
        return [(ch, seg.style) for seg in strip for ch in seg.text]

    app = fleet_app(64, hostile=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        base = table.rich_style
        n = 0
        for host in table.rows:
            state = table.state(host)
            long = dataclasses.replace(state, verdict=Verdict("error", "a verdict longer than any row " * 12))
            for s in (state, long):
                cells = row_cells(s, T0 + 400)
                for width in (200, 160, 120, 90, 80, 60, 40, 12):
                    for look in (base, base + table._style("cursor")):
                        want = table._strip(row_text(cells, width, table._style), width, look)
                        got = table._row_strip(cells, width, look)
                        assert got.cell_length == width and cells_of(got) == cells_of(want), (host, width)
                        n += 1
        assert n == 64 * 2 * 8 * 2


def _fleet_at(offset_s: float, n: int = 128) -> tuple[UpwatchApp, ManualClock, dict[str, list]]:
    """:func:`fleet_app` ``offset_s`` seconds into the scenarios (at 60 s every host is loading);
    also returns each host's journal entries still to come."""
    names = [f"gpu-{i:03d}" for i in range(n)]
    clock = ManualClock(T0 + offset_s)
    app = make_demo_app(clock=clock, start=T0, names=names, start_watchers=False)
    later = {}
    for sc in fleet_scenarios(T0, names):
        app.watchers[sc.host].model.apply_all(
            parse_record(json.dumps(dict(e.fields))) for e in sc.journal if e.offset_s <= offset_s)
        later[sc.host] = [e for e in sc.journal if e.offset_s > offset_s]
    return app, clock, later


async def test_between_ticks_only_the_rows_shown_are_snapshotted_and_a_stall_off_screen_is_told_at_the_tick():
    """The repaint timer between two ticks takes new snapshots of the hosts shown only; the tick
    takes every host that changed, and judges every host at its new ``now``: a host off screen
    that goes silent is counted in the header and told as stalled at the first tick after."""
    app, clock, later = _fleet_at(60)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        table = screen.query_one(HostTable)
        assert screen.compact and "128 hosts: 128 loading" in _screen_text(app)
        shown = table.hosts_in_view()
        assert len(shown) == 48 - 3 and screen.shown_hosts() == set(shown)
        on, off = shown[0], table.rows[-1]
        assert off not in shown
        before = {h: table.state(h) for h in (on, off)}
        for host in (on, off):  # one more journal line each, through the real model, told as a probe tells it
            watcher = app.watchers[host]
            watcher.model.apply(parse_record(json.dumps(dict(later[host][0].fields))))
            watcher.on_change(watcher)
        await app._flush_stepwise()  # the repaint timer's flush, between two ticks
        assert table.state(on) is not before[on]  # shown: snapshotted now
        assert table.state(off) is before[off]  # off screen: it waits for the tick
        app.tick()
        await app._flush_stepwise()
        assert table.state(off) is not before[off]  # the tick takes it
        # Silence, 15 minutes: every start is judged stalled at the tick, on screen or not.
        told_before = len(app.notifier.told)
        clock._now += 900
        app.tick()
        await app._flush_stepwise()
        await pilot.pause()
        stalled = {n.host for n in list(app.notifier.told)[told_before:] if n.kind == "stalled"}
        assert off in stalled and on in stalled and len(stalled) == 128
        assert "128 hosts: 128 stalled" in _screen_text(app)
        assert condition(table.state(off)) == "stalled"


def test_the_header_gives_the_order_and_count_a_line_of_their_own_where_the_titles_need_the_row():
    # A fresh user at 80x24: `order: severity · 9 of 128 hosts · filter: gpu-12` was drawn over
    # the titles, so PHASE, READINESS and VERDICT had no heading.
    from widgets.host_rows import _TITLES, columns_for, header_lines

    for width in (200, 160, 120, 100, 90, 80):  # narrower, the rows are cut too
        lines = [t.plain for t in header_lines(width, "severity", 9, 128, "gpu-12", lambda look: Style())]
        assert all(len(line) == width for line in lines)
        joined = "\n".join(lines)
        assert "9 of 128" in joined and "filter: gpu-12" in joined, (width, lines)
        for col in columns_for(width):
            assert _TITLES[col] in lines[-1], (width, col, lines)
    assert len(header_lines(160, "severity", 9, 128, "gpu-12", lambda look: Style())) == 1
    assert len(header_lines(80, "severity", 128, 128, "", lambda look: Style())) == 2


async def test_at_80_columns_every_column_has_its_heading_and_the_rows_stay_under_it():
    app = fleet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot)
        table = app.screen.query_one(HostTable)
        await pilot.press("slash", *"gpu-12", "enter")
        await pilot.pause()
        assert sorted(table.rows) == [f"gpu-{i:03d}" for i in range(120, 128)]
        lines = _screen_text(app).splitlines()
        top = table.region.y
        assert "order: severity · 8 of 128 hosts · filter: gpu-12" in lines[top]
        assert lines[top + 1].split() == ["HOST", "STATE", "PHASE", "READINESS", "VERDICT"], lines[top + 1]
        assert lines[top + 2].startswith(table.rows[0])
        # The rows are where the table says: a click on the third row opens its host.
        third = table.rows[2]
        await pilot.click(HostTable, offset=(3, 2 + 2))
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.watcher.name == third


async def test_the_first_switch_to_cards_mounts_a_screenful_first_and_the_rest_after_the_first_picture():
    # `--demo --fleet 128` at 160x48, v: the body stayed blank ~3 s, 128 cards composed, mounted
    # and each restyled at mount (its state's classes set after it was born) before the first
    # picture; 20 of them fit the screen.
    app = fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        grid = screen.grid
        top = screen.table.cursor_host  # the row under the cursor: its card gets the focus
        assert app.focused is screen.table and top is not None
        restyled: list[HostCard] = []
        real = HostCard.set_classes

        def spy(card, classes):
            restyled.append(card)
            return real(card, classes)

        HostCard.set_classes = spy  # type: ignore[method-assign]
        try:
            screen.set_view("cards")
            assert len(grid.cards) == 128 and len(grid.children) == 20 and grid.mounting == 108
            await pilot.pause()
            await until("the other cards", lambda: len(grid.children) == 128 and not grid.mounting, pilot=pilot)
        finally:
            HostCard.set_classes = real  # type: ignore[method-assign]
        assert restyled == []  # born with its state's classes
        assert [c.state.host for c in grid.query_children(HostCard)] == [f"gpu-{i:03d}" for i in range(128)]
        card = grid.card("gpu-001")
        assert card is not None and card.has_class("-failed") and card.on_screen
        assert "gpu-001" in _screen_text(app) and app.focused is grid.card(top)
        # A card mounted later catches up with the states it was given meanwhile.
        last = grid.card("gpu-127")
        assert last is not None and not last.on_screen and last.state is table_state(screen, "gpu-127")


def table_state(screen: OverviewScreen, host: str) -> HostState | None:
    return screen.table.state(host)
