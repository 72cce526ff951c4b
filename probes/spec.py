"""systemd unit names: the one check every piece that names a unit goes through.

Used by the configuration (``tui.config`` re-exports :func:`normalize_unit`) and by the actions
(:mod:`probes.ops.actions`), which refuse to send a command for a unit name systemd would not accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: systemd's unit type suffixes (systemd.unit(5)).
UNIT_SUFFIXES = ("service", "socket", "device", "mount", "automount", "swap", "target", "path",
                 "timer", "slice", "scope")
_UNIT_CHARS = re.compile(r"[A-Za-z0-9:\-_.\\@]+")
_UNIT_MAX = 255


def normalize_unit(unit: str) -> str:
    """``unit`` with ``.service`` appended when it has no systemd unit suffix (:data:`UNIT_SUFFIXES`).

    Raises:
        ValueError: the result is not a valid systemd unit name (systemd.unit(5): letters, digits
            and ``:-_.\\@``, at most 255 characters, a prefix before the suffix, at most one ``@``,
            not a template like ``x@.service``), or it starts with ``-`` (``journalctl -u`` would
            read it as an option).
    """
    if not unit:
        raise ValueError("the unit name is empty")
    stem, dot, suffix = unit.rpartition(".")
    if not (dot and suffix in UNIT_SUFFIXES):
        unit += ".service"
        stem, _, suffix = unit.rpartition(".")
    bad = "".join(sorted({c for c in unit if not _UNIT_CHARS.fullmatch(c)}))
    if bad:
        raise ValueError(f"{unit!r} is not a systemd unit name: {bad!r} is not allowed "
                         "(letters, digits and :-_.\\@ only)")
    if len(unit) > _UNIT_MAX:
        raise ValueError(f"the unit name is {len(unit)} characters long; systemd allows {_UNIT_MAX}")
    if not stem or stem.startswith("@"):
        raise ValueError(f"{unit!r} is not a systemd unit name: nothing before the suffix")
    if stem.startswith("-"):
        raise ValueError(f"{unit!r}: a unit name starting with '-' is not supported")
    if stem.count("@") > 1:
        raise ValueError(f"{unit!r} is not a systemd unit name: more than one '@'")
    if stem.endswith("@"):
        raise ValueError(f"{unit!r} is a template; name an instance, e.g. {stem}1.{suffix}")
    return unit


#: Where a notice can go: the terminal bell, a toast in the dashboard, a desktop notification
#: (``notify-send``), a webhook (HTTP POST of JSON) (:mod:`probes.fold.notify` sends them; here, with
#: the host's settings, so that reading the configuration does not import the notices).
CHANNELS = ("bell", "toast", "desktop", "webhook")
#: Channels of a host whose configuration names none.
DEFAULT_CHANNELS = ("bell", "toast")

#: Default HTTP port per engine id of ``probes.logs.engines.ENGINES`` (the servers' own defaults);
#: every engine has one (tests/test_engine_lists.py), so the health probe never guesses a port.
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000, "tgi": 80, "llamacpp": 8080, "trtllm": 8000, "ollama": 11434}


@dataclass(frozen=True, slots=True)
class HostSpec:
    """What to watch on one host (one ``[[host]]`` table of ``hosts.toml``, or one quick form).

    Attributes:
        name: the host's name as shown on its card (unique among the hosts).
        unit: the systemd unit of the server, e.g. ``sglang.service``.
        port: the server's HTTP port on the host when ``health_url`` is not given; None means the
            port the start's log names, else the engine's default (:data:`DEFAULT_PORTS`, from
            ``engine`` or the one detected in the log); with none of these known the health probe
            does not guess a port: it fails with "no port known" until one is. That holds for an
            engine only while it has an entry in :data:`DEFAULT_PORTS` (one missing from it gets
            8000, the fallback of ``probes.sources.health_target.health_target``); every engine has one,
            which tests/test_engine_lists.py checks.
        engine: force the engine id; None detects it from the log.
        backlog: most journal entries read on first connect (the current start should fit).
        ssh: how to reach the host: an alias of ``~/.ssh/config``, ``[user@]host[:port]``, or
            ``"local"`` (this machine, no SSH). None means ``name``.
        health_url: the server's health endpoint, e.g. ``http://127.0.0.1:30000/health``. A
            loopback address means loopback *on the host* and goes through an SSH port forward;
            any other address is fetched directly from here. None: ``/health`` on ``port``.
        sudo: run ``journalctl`` and ``systemctl`` as ``sudo -n …`` (never prompts).
        user_unit: a ``systemctl --user`` unit: ``journalctl --user-unit``, ``systemctl --user show``.
        stall_after_s: seconds of silence (no log line, no GPU memory change) before a loading
            start counts as stalled, as ``(phase id or "*", seconds)`` pairs over the built-in
            per-phase defaults.
        hf_cache: the Hugging Face hub cache folder on the host (what ``HF_HUB_CACHE`` names, e.g.
            ``/data/hf/hub``); None: found from the unit's ``Environment=`` and ``User=``.
        notify: where this host's notices go (:data:`CHANNELS`: ``bell``,
            ``toast``, ``desktop``, ``webhook``).
        webhook_url: the ``http(s)`` URL the ``webhook`` channel POSTs to, or None.
    """

    name: str
    unit: str
    port: int | None = None
    engine: str | None = None
    backlog: int = 5000
    ssh: str | None = None
    health_url: str | None = None
    sudo: bool = False
    user_unit: bool = False
    stall_after_s: tuple[tuple[str, float], ...] = ()
    hf_cache: str | None = None
    notify: tuple[str, ...] = ("bell", "toast")
    webhook_url: str | None = None

    @property
    def target(self) -> str:
        """The SSH target (``ssh`` or else ``name``); ``"local"`` for this machine."""
        return self.ssh or self.name

    @property
    def is_local(self) -> bool:
        """True when the host is this machine (no SSH)."""
        return self.target == "local"


