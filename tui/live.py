"""The live dashboard: real hosts over SSH (or this machine), as configured in ``hosts.toml``.

:func:`runner_for` picks the transport for a host: :class:`~probes.transport.ssh.SshRunner` (asyncssh, with
``~/.ssh/config``, the agent and strict host key checking against ``known_hosts``; keepalives every
3 s, 3 misses) or, for ``ssh = "local"``, :class:`~probes.transport.local.LocalRunner` with NVML for the GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from probes.clock import Clock, WallClock
from probes.sources.gpu_errors import GpuError
from probes.sources.nvml import NvmlSource
from probes.transport.local import LocalRunner
from probes.transport.runner import Runner
from probes.transport.ssh import SshRunner
from probes.spec import HostSpec
from tui.config import Config

if TYPE_CHECKING:  # the app (Textual) is imported only to build it: the headless exporter uses runner_for alone
    from tui.app import UpwatchApp


def runner_for(spec: HostSpec) -> Runner:
    """The runner for ``spec``: local for ``ssh = "local"``, else one SSH connection to
    ``spec.target`` (a ``~/.ssh/config`` alias or ``[user@]host[:port]``)."""
    if spec.is_local:
        return LocalRunner(spec.name)
    return SshRunner(spec.target)


def gpu_source_for(spec: HostSpec) -> NvmlSource | None:
    """NVML for a local host when it starts (pynvml); None otherwise (then ``nvidia-smi`` runs
    through the runner, which also reports why NVML is missing, e.g. no driver)."""
    if not spec.is_local:
        return None
    try:
        return NvmlSource.open()
    except (GpuError, ImportError, OSError):
        return None


def make_live_app(config: Config, clock: Clock | None = None) -> UpwatchApp:
    """The dashboard on ``config.hosts``, each watched through :func:`runner_for`."""
    from tui.app import make_app

    return make_app(config, runner_for, clock or WallClock(), gpu_source_factory=gpu_source_for)
