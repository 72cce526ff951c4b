"""The dashboard's configuration: which hosts to watch, and how fast time runs.

Where the hosts come from (one entry point, :func:`load_config`):

* a TOML file, ``hosts.toml`` in ``platformdirs.user_config_dir("upwatch")``
  (``~/.config/upwatch/hosts.toml`` on Linux), overridden by the environment variable
  ``UPWATCH_CONFIG``, overridden by ``--config PATH``. A missing default file means no hosts; a
  missing file named by ``UPWATCH_CONFIG`` or ``--config`` is an error;
* or quick forms on the command line, ``[user@]host[:port]/unit`` (:func:`parse_quick`).

Every key, with its type, default, check and meaning, is declared once in
:mod:`tui.config_schema` (:data:`~tui.config_schema.HOST_SCHEMA`, ``[defaults]`` takes the same
keys but ``name``, and :data:`~tui.config_schema.SETTINGS_SCHEMA`); unknown keys are errors, and
every value is checked before anything connects. A file that sets every key (a test loads it)::

    [settings]
    unit_interval_s = 1.0
    health_interval_s = 2.0
    gpu_interval_s = 1.0
    read_only = false

    [defaults]
    sudo = true

    [[host]]
    name = "gpu-node-1"
    ssh = "gpu-node-1"
    unit = "sglang"
    engine = "sglang"
    port = 30000
    health_url = "http://127.0.0.1:30000/health"
    sudo = false
    user_unit = false
    backlog = 5000
    stall_after_s = { graph_capture = 600, init = 900, "*" = 180 }
    hf_cache = "/data/hf/hub"
    notify = ["bell", "toast", "webhook"]
    webhook_url = "https://hooks.example.com/upwatch"

Every effective value remembers where it came from (:attr:`Config.sources`), which is what
``upwatch config`` prints. A key's line in messages and provenance is found by
:func:`tui.toml_lines.scan`, and only where it can be placed surely (else the message names none).

This module chooses the file and builds the :class:`Config`; reading the file's text is
:mod:`tui.config_text`'s (TOML, every failure named, the line of each key), checking its tables
against the schema :mod:`tui.config_check`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.spec import UNIT_SUFFIXES, normalize_unit  # noqa: F401 (re-exported)
from probes.spec import HostSpec
from probes.transport.target import parse_target
from tui.config_check import (DEFAULT_KEYS, HOST_KEYS, SETTING_KEYS, check_defaults,  # noqa: F401 (re-exported)
                              check_settings, file_hosts, quick_host, quick_hosts, unknown_key)
from tui.config_schema import SETTINGS
from tui.config_text import ConfigError, KeyLines, parse_toml  # noqa: F401 (ConfigError re-exported)

#: The environment variable naming the configuration file.
ENV_VAR = "UPWATCH_CONFIG"
#: The configuration file's name inside the user's config folder.
FILE_NAME = "hosts.toml"
#: ``unit_interval_s`` of a loaded configuration when the file does not set it (live hosts are
#: polled faster than the :class:`Config` default the demo runs with).
LIVE_UNIT_INTERVAL_S: float = SETTINGS["unit_interval_s"].default

_TOP_KEYS = ("settings", "defaults", "host")


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """The configuration file that was looked for.

    Attributes:
        path: the file (absolute or as given).
        chosen_by: why this path: ``"--config"``, ``"env UPWATCH_CONFIG"`` or ``"default"``.
        exists: whether it was there (and read). Only a ``"default"`` file may be missing.
    """

    path: Path
    chosen_by: str
    exists: bool

    @property
    def shown(self) -> str:
        """The path as messages show it (home folder as ``~``)."""
        return display_path(self.path)


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
        read_only: the dashboard's actions (restart, stop, kill ...) are off (``[settings]
            read_only = true``, or ``--read-only``).
        file: the configuration file that was looked for; None when the config was built in code
            (demo, tests).
        sources: host name → key (every key of :data:`HOST_KEYS`) → where the effective value came
            from: ``"PATH:LINE"``, ``"[defaults] PATH:LINE"``, ``"quick form argument N"`` or
            ``"default"`` (``"default: the name"`` and the like when the default is derived).
            Empty for a config built in code. Not part of equality.
        setting_sources: settings key (:data:`SETTING_KEYS`) → ``"PATH:LINE"`` or ``"default"``.
    """

    hosts: tuple[HostSpec, ...]
    title: str = "upwatch"
    unit_interval_s: float = 2.0
    health_interval_s: float = 2.0
    gpu_interval_s: float = 1.0
    repaint_hz: float = 10.0
    overview_hz: float = 2.0
    read_only: bool = False
    file: ConfigFile | None = None
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)
    setting_sources: Mapping[str, str] = field(default_factory=dict, compare=False)


def default_config_path() -> Path:
    """``hosts.toml`` in ``platformdirs.user_config_dir("upwatch")`` (``$XDG_CONFIG_HOME/upwatch``
    or ``~/.config/upwatch`` on Linux, ``~/Library/Application Support/upwatch`` on macOS)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("upwatch")) / FILE_NAME


def display_path(path: str | os.PathLike[str]) -> str:
    """``path`` with the home folder written as ``~`` (for messages)."""
    text = os.fspath(path)
    home = os.path.expanduser("~")
    if home not in ("", "/") and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")):]
    return text


def choose_config_file(config_path: str | os.PathLike[str] | None, env: Mapping[str, str],
                       default_path: Path | None = None) -> ConfigFile:
    """Which file to read: ``config_path`` (from ``--config``), else ``env["UPWATCH_CONFIG"]`` when
    set and non-empty, else ``default_path`` (default :func:`default_config_path`).

    Raises:
        ConfigError: a file named by ``--config`` or ``UPWATCH_CONFIG`` does not exist or is not a
            file.
    """
    if config_path is not None and os.fspath(config_path) != "":
        path, why = Path(os.path.expanduser(os.fspath(config_path))), "--config"
    elif env.get(ENV_VAR):
        path, why = Path(os.path.expanduser(env[ENV_VAR])), f"env {ENV_VAR}"
    else:
        path, why = (default_path or default_config_path()), "default"
    if path.is_file():
        return ConfigFile(path, why, True)
    if why != "default" or path.exists():
        problem = "is not a file" if path.exists() else "does not exist"
        raise ConfigError(f"{display_path(path)} {problem} (named by {why})")
    return ConfigFile(path, why, False)


def load_config(config_path: str | os.PathLike[str] | None = None, quick: Sequence[str] = (),
                env: Mapping[str, str] | None = None, *, default_path: Path | None = None) -> Config:
    """Build the :class:`Config` the CLI runs with.

    The file is chosen by :func:`choose_config_file`. Its ``[settings]`` always apply. When
    ``quick`` forms are given they are the hosts (the file's ``[[host]]`` tables are not used, but
    its ``[defaults]`` apply to the quick hosts, so ``sudo = true`` there holds for
    ``upwatch gpu-node-2/vllm`` too); otherwise the file's ``[[host]]`` tables are.

    Args:
        config_path: ``--config PATH``, or None.
        quick: quick forms, ``[user@]host[:port]/unit`` (see :func:`parse_quick`).
        env: the environment (default ``os.environ``); only ``UPWATCH_CONFIG`` is read.
        default_path: the default file (default :func:`default_config_path`; tests pass their own).

    Returns:
        the configuration, with :attr:`Config.file`, :attr:`Config.sources` and
        :attr:`Config.setting_sources` filled in. ``unit_interval_s`` defaults to
        :data:`LIVE_UNIT_INTERVAL_S`.

    Raises:
        ConfigError: the file is missing (when named explicitly), unreadable, not valid TOML
            (message: file, line, column, as :mod:`tomllib` reports them; an integer of more
            digits than Python reads, 4300, names its line), or breaks a rule of the
            schema (:mod:`tui.config_schema`; message: file, line where it is sure, host and key);
            or a quick form is malformed; or two hosts share a name.
    """
    env = os.environ if env is None else env
    cfile = choose_config_file(config_path, env, default_path)
    doc: dict[str, Any] = {}
    lines = KeyLines("", cfile.shown)
    if cfile.exists:
        try:
            text = cfile.path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{cfile.shown}: cannot be read: {exc}") from None
        doc = parse_toml(text, cfile.shown)
        lines = KeyLines(text, cfile.shown, doc)

    for key in doc:
        if key not in _TOP_KEYS:
            raise ConfigError(lines.where(("top", 0), key)
                              + unknown_key("table" if isinstance(doc[key], dict) else "key", key, _TOP_KEYS))
    settings, setting_sources = check_settings(doc.get("settings", {}), lines)
    defaults = check_defaults(doc.get("defaults", {}), lines)

    # The file's hosts are checked even when quick forms replace them: a typo there is still a typo.
    from_file = file_hosts(doc.get("host", []), defaults, lines)
    hosts = from_file if not quick else quick_hosts(quick, defaults, lines)
    sources = {spec.name: src for spec, src in hosts}
    return Config(hosts=tuple(spec for spec, _ in hosts), file=cfile, sources=sources, setting_sources=setting_sources,
                  **settings)


def parse_quick(arg: str, n: int = 1) -> HostSpec:
    """Parse one quick form ``[user@]host[:port]/unit`` into a :class:`HostSpec`.

    ``name`` is the host part (``root@10.0.0.5:2222/x`` → ``10.0.0.5``; ``[::1]:22/x`` → ``::1``),
    ``ssh`` everything before the ``/`` (``local`` for this machine), ``unit`` what follows it with
    ``.service`` appended when it has no unit suffix. No ``[defaults]`` are applied here (that is
    :func:`load_config`'s job).

    Args:
        arg: the argument as typed. n: its position among the quick forms (for messages).

    Raises:
        ConfigError: no ``/``, no host, a bad port, no unit, or a unit name systemd would refuse;
            the message names ``quick form argument N`` and the argument.
    """
    return quick_host(arg, n)


def looks_like_quick_form(arg: str) -> bool:
    """True when a command-line HOST argument is a quick form (it holds a ``/``) rather than the
    name of a configured host."""
    return "/" in arg


def resolve_ssh(target: str, ssh_config: Sequence[str | os.PathLike[str]] | None = None,
                local_user: str | None = None) -> tuple[str, str, int] | None:
    """Where ``target`` leads by the SSH client config, parsed by asyncssh (no connection made).

    Args:
        target: ``[user@]host[:port]`` or an alias; ``"local"`` gives None.
        ssh_config: config files (default ``~/.ssh/config`` when it exists, else none).
        local_user: the user when neither target nor config names one (default: ``$USER`` or
            ``getpass.getuser()``).

    Returns:
        (user, host name, port), or None for ``"local"`` or a target :func:`~probes.transport.ssh_config.parse_target`
        refuses.
    """
    from asyncssh.config import SSHClientConfig

    if target == "local":
        return None
    try:
        user, host, port = parse_target(target)
    except ValueError:
        return None
    if ssh_config is None:
        default = Path(os.path.expanduser("~/.ssh/config"))
        ssh_config = [default] if default.is_file() else []
    if local_user is None:
        import getpass

        local_user = getpass.getuser()
    paths = [Path(p) for p in ssh_config]
    try:
        cfg = SSHClientConfig.load(None, paths, False, False, False, local_user,
                                   user if user else (), host, port if port else ())
    except Exception:  # a broken ~/.ssh/config is for the SSH runner to report, not us
        return user or local_user, host, port or 22
    return (str(cfg.get("User") or local_user), str(cfg.get("Hostname") or host),
            int(cfg.get("Port") or 22))
