"""``upwatch status --json``'s object of one host (tui/status.py ``host_json``), from a snapshot."""

from __future__ import annotations

from probes.data.reading import Progress
from probes.data.state import HostState
from probes.spec import HostSpec
from tui.status import host_json

SPEC = HostSpec("h", "vllm.service")


def test_progress_is_the_current_phases_bar_only() -> None:
    # A tester's agent read "phase init" with "progress weights 1/1" as init's progress.
    s = HostState(host="h", unit="vllm.service", state="loading", phase="init", progress=Progress("weights", 1, 1))
    assert host_json(SPEC, s)["progress"] is None
    s = HostState(host="h", unit="vllm.service", state="loading", phase="graph_capture",
                  progress=Progress("graph_capture", 3, 12))
    assert host_json(SPEC, s)["progress"] == {"phase": "graph_capture", "done": 3, "total": 12, "fraction": 0.25}
