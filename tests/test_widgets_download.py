"""Download progress on the card, the phase bar, the detail timeline and ``upwatch status``
(widgets mounted in small apps; the snapshot is a real-shaped HostState of vLLM's silent fetch)."""

from __future__ import annotations


from probes.data.download import DownloadProgress
from probes.data.reading import Progress
from probes.data.state import HostState, PhaseSpan
from probes.data.events import ProbeFailure
from probes.spec import HostSpec
from tui.status import format_host, host_json
from widgets.detail import PhaseTimeline
from widgets.host_card import HostCard
from widgets.phase_bar import PhaseBar
from test_widgets import One, screen_text

T0 = 1_700_000_000.0  # 22:13:20 UTC
GIB = 2**30
PATH = "/root/.cache/huggingface/hub/models--Qwen--Qwen3-32B"


def downloading(download: DownloadProgress | None, **kw) -> HostState:
    base = dict(host="gpu-b2", unit="vllm.service", engine="vllm", state="loading", phase="weights",
                phases=(PhaseSpan("starting", T0, 12.0), PhaseSpan("weights", T0 + 12, None)),
                start_began=T0, phase_began=T0 + 12, readiness="port_closed", model="Qwen/Qwen3-32B",
                last_line="(EngineCore pid=115) Starting to load model Qwen/Qwen3-32B...", download=download,
                updated=T0 + 170)
    base.update(kw)
    return HostState(**base)


D = DownloadProgress(PATH, int(12.4 * GIB), 61 * GIB, 310 * 2**20, 157.0, T0 + 170, T0 + 170)


async def test_card_says_bytes_rate_and_eta_and_fills_the_phase_with_the_fraction() -> None:
    card = HostCard(downloading(D), now=T0 + 172)
    app = One(card)
    async with app.run_test(size=(100, 13)) as pilot:
        await pilot.pause()
        assert card.times_text(card.state, T0 + 172).plain == (
            "Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37 · in Weight load 2m40s · since start 2m52s")
        assert "Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37" in screen_text(app)
        bar = card.query_one(PhaseBar)
        fill = bar.get_component_rich_style("phase-bar--fill", partial=True)
        t = bar.render_text(96, *bar._view)
        filled = "".join(t.plain[s.start:s.end] for s in t.spans if s.style == fill)
        assert bar._view[2] == Progress("weights", int(12.4 * GIB), 61 * GIB)
        assert filled == "▸ "  # 20% of a 12-cell segment: round(0.203 * 12) = 2 cells
    # Without an expected total: bytes and rate, and the bar is not filled.
    d = DownloadProgress(PATH, int(0.5 * GIB), None, 3.25 * 2**20, None, T0 + 170, T0 + 170)
    card = HostCard(downloading(d), now=T0 + 172)
    app = One(card)
    async with app.run_test(size=(100, 13)) as pilot:
        await pilot.pause()
        assert card.times_text(card.state).plain == "Download 0.5 GiB · 3.2 MiB/s · in Weight load"
        assert card.query_one(PhaseBar)._view[2] is None


async def test_card_moves_on_when_the_download_goes() -> None:
    card = HostCard(downloading(D), now=T0 + 172)
    app = One(card)
    async with app.run_test(size=(100, 13)) as pilot:
        await pilot.pause()
        card.state = downloading(None, progress=Progress("weights", 1, 4))
        await pilot.pause()
        assert "Download" not in screen_text(app) and "shards 1/4 (25%)" in screen_text(app)
        assert card.query_one(PhaseBar)._view[2] == Progress("weights", 1, 4)


async def test_detail_timeline_shows_the_download_its_folder_and_a_failure() -> None:
    tl = PhaseTimeline()
    app = One(tl)
    async with app.run_test(size=(100, 10)) as pilot:
        tl.update_state(downloading(D), T0 + 172)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert lines[2].rstrip() == "  ↓ Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37"
        assert lines[3].rstrip() == f"    {PATH} · measured 22:16:10"
        fail = ProbeFailure(T0 + 160, "download", "permission",
                            f"{PATH}: the SSH user may not read it (set sudo = true for this host, or hf_cache)")
        tl.update_state(downloading(None, failures=(fail,)), T0 + 172)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert lines[2].startswith(f"  download: n/a since 22:16:00 — {PATH}: the SSH user")
        assert len(lines) == 3 or not lines[3].strip()  # one line, cut at the pane's width


def test_status_json_and_text() -> None:
    spec = HostSpec("gpu-b2", "vllm.service")
    h = host_json(spec, downloading(D))
    assert h["download"] == {"bytes": int(12.4 * GIB), "expected_bytes": 61 * GIB, "rate_bps": 325058560.0,
                             "eta_s": 157.0}
    assert host_json(spec, downloading(None))["download"] is None
    d = DownloadProgress(PATH, 5, None, None, None, T0, T0)
    assert host_json(spec, downloading(d))["download"] == {"bytes": 5, "expected_bytes": None, "rate_bps": None,
                                                          "eta_s": None}
    text = format_host(spec, downloading(D))
    assert "  download    Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37\n" in text
