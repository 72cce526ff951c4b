"""One clock for a card, on the real demo app (Pilot, a ManualClock): a card's times ("in Graph
capture 3m56s"), its ETA and "slower than usual" and its verdict ("No log line for 3m54s") read the
same ``now`` and cannot contradict each other; and the README's words on the demo's made-up history
hold for the history the demo writes."""

from __future__ import annotations

import re
from pathlib import Path

from probes.clock import ManualClock
from probes.store.history import History, phase_durations
from probes.data.durations import fmt_span
from tui.demo_app import make_demo_app
from widgets.fmt import PHASE_LABELS
from widgets.host_card import HostCard

REPO = Path(__file__).resolve().parents[1]
T0 = 1_764_460_800.0
_SPAN = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def _seconds(span: str) -> int:
    """``3m56s`` → 236 (the inverse of fmt_span below a day)."""
    m = _SPAN.fullmatch(span)
    assert m and span, span
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return 3600 * h + 60 * mi + s


def test_span_parser_reads_what_fmt_span_writes() -> None:
    for s in (0, 9, 59, 60, 236, 3599, 3600 * 5 + 60 * 7):
        assert _seconds(fmt_span(s)) == (s if s < 3600 else s - s % 60)


def _card_words(card: HostCard) -> tuple[str, str]:
    s = card.state
    return card.times_text(s, card.now).plain, (s.verdict.sentence if s.verdict is not None else "")


async def test_a_card_and_its_verdict_read_one_clock(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    history = History(tmp_path / "h.sqlite3")
    app = make_demo_app(clock=clock, history=history, seed_history=True)
    checked = {"silence": 0, "slower": 0}
    async with app.run_test(size=(160, 48)) as pilot:
        for step in range(100):  # 400 demo seconds: the hung host goes silent, then slower
            await clock.advance(4)
            if step % 3 == 0:
                app.tick()  # the screen's clock moves ...
            app.flush()  # ... and between ticks, new events are judged at it (the repaint timer)
            await pilot.pause()
            for card in app.screen.query(HostCard):
                s = card.state
                times, verdict = _card_words(card)
                label = PHASE_LABELS.get(s.phase, s.phase)
                m_ph = re.search(rf"in {re.escape(label)} (\S+?)(?: of|$| ·)", times)
                m_quiet = re.match(r"No log line for (\S+?)(?: in| and|,)", verdict)
                if m_ph and m_quiet and s.last_log_at is not None and s.phase_began is not None \
                        and s.last_log_at >= s.phase_began:
                    checked["silence"] += 1
                    assert _seconds(m_quiet.group(1)) <= _seconds(m_ph.group(1)), (s.host, times, verdict)
                if s.verdict is not None and s.verdict.kind == "slower":
                    checked["slower"] += 1
                    assert "slower than usual" in times, (s.host, times, verdict)
                if "slower than usual" in times:
                    checked["slower"] += 1
                    assert s.verdict is not None and s.verdict.kind in ("slower", "stalled"), (s.host, times, verdict)
    history.close()
    assert checked["silence"] > 20 and checked["slower"] > 20, checked


def _readme_demo_claims() -> tuple[int, float]:
    """From README.md's demo section: how many earlier starts it makes up, and the ± percentage."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"The demo also makes up (\w+) earlier starts for each host that does not fail \(each phase "
                  r"within ±(\d+)%\s+of this start's\)", text)
    assert m, "README.md's demo section no longer says how many earlier starts it makes up"
    words = {"five": 5, "six": 6, "seven": 7, "eight": 8}
    return words[m.group(1)], float(m.group(2))


async def test_the_demo_history_is_what_the_readme_says(tmp_path: Path) -> None:
    n_claim, pct = _readme_demo_claims()
    clock = ManualClock(T0)
    history = History(tmp_path / "h.sqlite3")
    app = make_demo_app(clock=clock, history=history, seed_history=True)
    earlier: dict[str, set[int]] = {}
    slower: set[str] = set()
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(80):  # 400 demo seconds: gpu-node-1 and -4 get ready, gpu-node-3 hangs
            await clock.advance(5)
            app.tick()
            app.flush()
            await pilot.pause()
            cards = {c.state.host: c for c in app.screen.query(HostCard)}
            for name, w in app.watchers.items():
                s = w.state(app.now)
                if s.typical is not None:
                    earlier.setdefault(name, set()).add(s.typical.n)
                if (s.verdict is not None and s.verdict.kind == "slower") or "slower than usual" in _card_words(
                        cards[name])[0]:
                    slower.add(name)
        states = {name: w.state(app.now) for name, w in app.watchers.items()}
    starts = history.starts()
    history.close()
    by_host: dict[str, list] = {}
    for r in starts:
        by_host.setdefault(r.host, []).append(r)
    # Six made-up earlier starts per host that does not fail (not the crash-looping gpu-node-2) ...
    seeded = {h: [r for r in rs if r.began < T0] for h, rs in by_host.items()}
    assert {h: len(rs) for h, rs in seeded.items() if rs} == {"gpu-node-1": n_claim, "gpu-node-3": n_claim,
                                                            "gpu-node-4": n_claim}
    # ... and the cards say so, before and after their own start is written (never "7").
    assert earlier == {"gpu-node-1": {n_claim}, "gpu-node-3": {n_claim}, "gpu-node-4": {n_claim}}
    # Each phase of each made-up start within ±12 % of the demo's own start, as the history measured it.
    for host in ("gpu-node-1", "gpu-node-4"):
        assert states[host].state == "ready"
        [own] = [r for r in by_host[host] if r.began >= T0]  # the demo's own start, written once ready
        assert dict(own.phases) == dict(phase_durations(states[host].phases))
        for r in seeded[host]:
            assert [p for p, _ in r.phases] == [p for p, _ in own.phases], (host, r.phases, own.phases)
            for (p, d), (_, mine) in zip(r.phases, own.phases):
                assert abs(d - mine) <= pct / 100 * mine + 0.05, (host, p, d, mine)  # 0.05: rounded to 0.1 s
    # A normal start (SGLang on gpu-node-1, TensorRT-LLM on gpu-node-4) is never slower than usual;
    # the hung one is.
    assert slower == {"gpu-node-3"}, slower
