"""The dashboard's configuration: which hosts to watch, and how fast time runs.

The live-host configuration file (TOML, SSH options) arrives with the live-host work; for now a
:class:`Config` is built by the CLI (``--demo``) or by tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.watch import HostSpec


@dataclass(frozen=True, slots=True)
class Config:
    """What the app watches.

    Attributes:
        hosts: the hosts, in the order their cards are shown.
        title: the window title.
        unit_interval_s, health_interval_s, gpu_interval_s: probe periods (clock seconds).
        repaint_hz: how often the detail screen takes new snapshots and log lines (real time, at
            most 10).
        overview_hz: how often the overview takes new snapshots (real time; a glance view: 2 is
            plenty, and it keeps a flood of 32 hosts cheap).
    """

    hosts: tuple[HostSpec, ...]
    title: str = "upwatch"
    unit_interval_s: float = 2.0
    health_interval_s: float = 2.0
    gpu_interval_s: float = 1.0
    repaint_hz: float = 10.0
    overview_hz: float = 2.0
