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
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from probes.hosttext import one_line
from probes.transport.target import parse_target
from probes.spec import UNIT_SUFFIXES, normalize_unit  # noqa: F401 (re-exported)
from probes.spec import HostSpec
from tui.config_schema import HOST, HOST_SCHEMA, SETTINGS, SETTINGS_SCHEMA
from tui.toml_lines import scan

#: The environment variable naming the configuration file.
ENV_VAR = "UPWATCH_CONFIG"
#: The configuration file's name inside the user's config folder.
FILE_NAME = "hosts.toml"
#: ``unit_interval_s`` of a loaded configuration when the file does not set it (live hosts are
#: polled faster than the :class:`Config` default the demo runs with).
LIVE_UNIT_INTERVAL_S: float = SETTINGS["unit_interval_s"].default

#: Keys of a ``[[host]]`` table (:data:`tui.config_schema.HOST_SCHEMA`), in the order ``upwatch
#: config`` prints them.
HOST_KEYS = tuple(k.name for k in HOST_SCHEMA)
#: Keys of ``[defaults]``: every host key but ``name``.
DEFAULT_KEYS = tuple(k for k in HOST_KEYS if k != "name")
#: Keys of ``[settings]`` (:data:`tui.config_schema.SETTINGS_SCHEMA`).
SETTING_KEYS = tuple(k.name for k in SETTINGS_SCHEMA)
_TOP_KEYS = ("settings", "defaults", "host")



class ConfigError(Exception):
    """The configuration cannot be used. The message is one line meant for the operator: it names
    the file and line (or the quick form argument) and the key, e.g.
    ``~/.config/upwatch/hosts.toml line 7: host "gpu-node-2": key "unti" is not known (did you
    mean "unit"?)``. Config text quoted in it goes through the one sanitiser
    (:func:`probes.hosttext.one_line`), so a hostile value cannot reach the terminal as escapes."""

    def __init__(self, message: object) -> None:
        super().__init__(one_line(message))


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
    lines = _Lines("", cfile.shown)
    if cfile.exists:
        try:
            text = cfile.path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{cfile.shown}: cannot be read: {exc}") from None
        doc = _parse_toml(text, cfile.shown)
        lines = _Lines(text, cfile.shown, doc)

    for key in doc:
        if key not in _TOP_KEYS:
            raise ConfigError(lines.where(("top", 0), key)
                              + _unknown("table" if isinstance(doc[key], dict) else "key", key, _TOP_KEYS))
    settings, setting_sources = _settings(doc.get("settings", {}), lines)
    defaults = _defaults(doc.get("defaults", {}), lines)

    # The file's hosts are checked even when quick forms replace them: a typo there is still a typo.
    file_hosts = _file_hosts(doc.get("host", []), defaults, lines)
    hosts = file_hosts if not quick else _quick_hosts(quick, defaults, lines)
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
    return _quick(arg, n)


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


# --- internals -------------------------------------------------------------------------------------

_Section = tuple[str, int]  # ("top", 0), ("settings", 0), ("defaults", 0), ("host", index)


class _Lines:
    """The lines of keys and tables in the file (:func:`tui.toml_lines.scan`), as messages and
    provenance name them: a key's line only where it can be placed surely, else none."""

    def __init__(self, text: str, shown: str, doc: Mapping[str, Any] | None = None) -> None:
        self.shown = shown
        self.found = scan(text, {} if doc is None else doc)

    def line_of(self, section: _Section | None, key: str | None) -> int | None:
        """The line of ``key`` in ``section``, or of the section's header when ``key`` is None;
        None when it cannot be placed surely (not written, written in several places, or the
        scan is unsure). A top-level key is placed at its first line: what it is is fixed there."""
        if self.found is None or section is None:
            return None
        kind, index = section
        path: tuple[str | int, ...] = () if kind == "top" else (kind, index) if kind == "host" else (kind,)
        if key is None:
            return self.found.header_of(path)
        return self.found.first_line_of(path, key) if kind == "top" else self.found.line_of(path, key)

    def where(self, section: _Section | None, key: str | None) -> str:
        """``"FILE line N: "`` for ``key`` in ``section`` (``"FILE: "`` when the line is unknown)."""
        line = self.line_of(section, key)
        return f"{self.shown} line {line}: " if line else f"{self.shown}: "

    def source(self, section: _Section, key: str) -> str:
        """``"FILE:LINE"`` (or ``"FILE"``) for provenance."""
        line = self.line_of(section, key)
        return f"{self.shown}:{line}" if line else self.shown


#: A run that may be an integer too long for ``int()``: a digit, then 999 or more digits, letters
#: (hex, ``0x``/``0o``/``0b``) or underscores, not inside a bare word.
_LONG_NUMBER = re.compile(r"(?<![A-Za-z0-9_])[+-]?[0-9][0-9A-Za-z_]{999,}")


def _parse_toml(text: str, shown: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, every failure a :class:`ConfigError` naming ``shown``.

    tomllib (Python 3.11) raises its ``TOMLDecodeError`` (with line and column) for text that is
    not TOML, but a plain ``ValueError`` without a position for an integer of more digits than
    ``int()`` reads (``sys.get_int_max_str_digits()``, 4300; hex too), and ``RecursionError`` for
    arrays or inline tables nested some hundreds deep. Both are named here, the integer with its
    line (found by :func:`_long_integer_line`).

    Raises:
        ConfigError: the text cannot be read as TOML.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: not valid TOML: arrays or inline tables nested too deeply") from None
    except ValueError:  # int() past sys.get_int_max_str_digits() digits
        found = _long_integer_line(text)
        limit = sys.get_int_max_str_digits()
        if found is None:
            raise ConfigError(f"{shown}: not valid TOML: an integer has more than {limit} digits") from None
        line, digits = found
        raise ConfigError(f"{shown} line {line}: not valid TOML: an integer of {digits} digits "
                          f"(at most {limit})") from None


def _too_long_integer(text: str) -> bool:
    """Whether tomllib fails on ``text`` because an integer is too long (its plain ValueError)."""
    try:
        tomllib.loads(text)
    except RecursionError:
        return False
    except ValueError as exc:
        return not isinstance(exc, tomllib.TOMLDecodeError)
    return False


def _long_integer_line(text: str) -> tuple[int, int] | None:
    """The line (1-based) and digit count of the integer that tomllib could not read, or None.

    Each long run of :data:`_LONG_NUMBER` is tried alone, the others replaced by ``0``: the first
    that still fails is the integer value (a run inside a string or a comment never fails)."""
    runs = list(_LONG_NUMBER.finditer(text))
    for run in runs:
        trial, end = [], 0
        for other in runs:
            trial.append(text[end:other.start()])
            trial.append(other.group() if other is run else "0")
            end = other.end()
        trial.append(text[end:])
        if _too_long_integer("".join(trial)):
            digits = sum(c.isalnum() for c in run.group().removeprefix("+").removeprefix("-"))
            if run.group().lstrip("+-")[1:2] in ("x", "o", "b"):
                digits -= 2
            return text.count("\n", 0, run.start()) + 1, digits
    return None


def _unknown(what: str, key: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else f" (known: {', '.join(known)})"
    return f'{what} "{key}" is not known{hint}'


def _check(key: str, value: Any) -> Any:
    """Validate (and normalise) one host value by its schema key; ValueError says what is wrong."""
    return HOST[key].check(value)


def _settings(table: Any, lines: _Lines) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {k.name: k.default for k in SETTINGS_SCHEMA}
    sources = {k: "default" for k in SETTING_KEYS}
    sec: _Section = ("settings", 0)
    if not isinstance(table, dict):
        raise ConfigError(lines.where(("top", 0), "settings") + '"settings" must be a table: [settings]')
    for key, value in table.items():
        if key not in SETTING_KEYS:
            raise ConfigError(lines.where(sec, key) + "[settings]: " + _unknown("key", key, SETTING_KEYS))
        try:
            values[key] = SETTINGS[key].check(value)
        except ValueError as exc:
            raise ConfigError(lines.where(sec, key) + f'[settings]: key "{key}" {_msg(exc)}') from None
        sources[key] = lines.source(sec, key)
    return values, sources


def _defaults(table: Any, lines: _Lines) -> dict[str, tuple[Any, str]]:
    """``[defaults]`` checked: key → (value, source)."""
    sec: _Section = ("defaults", 0)
    if not isinstance(table, dict):
        raise ConfigError(lines.where(("top", 0), "defaults") + '"defaults" must be a table: [defaults]')
    out: dict[str, tuple[Any, str]] = {}
    for key, value in table.items():
        if key == "name":
            raise ConfigError(lines.where(sec, key) + '[defaults]: key "name" cannot have a default '
                              "(every host needs its own)")
        if key not in DEFAULT_KEYS:
            raise ConfigError(lines.where(sec, key) + "[defaults]: " + _unknown("key", key, DEFAULT_KEYS))
        try:
            out[key] = (_check(key, value), "[defaults] " + lines.source(sec, key))
        except ValueError as exc:
            raise ConfigError(lines.where(sec, key) + f'[defaults]: key "{key}" {_msg(exc)}') from None
    return out


def _msg(exc: ValueError) -> str:
    text = str(exc)
    return text if text.startswith(("must", "is ", '"')) else f"is wrong: {text}"


def _file_hosts(tables: Any, defaults: dict[str, tuple[Any, str]],
                lines: _Lines) -> list[tuple[HostSpec, dict[str, str]]]:
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(lines.where(("top", 0), "host")
                          + '"host" must be an array of tables: write each host as [[host]]')
    out: list[tuple[HostSpec, dict[str, str]]] = []
    seen: dict[str, str] = {}
    for i, table in enumerate(tables):
        spec, src = _host(table, i, defaults, lines)
        if spec.name in seen:
            raise ConfigError(lines.where(("host", i), "name" if "name" in table else None)
                              + f'host "{spec.name}": the name is already used by the host {seen[spec.name]}')
        line = lines.line_of(("host", i), None)
        seen[spec.name] = f"on line {line}" if line else "before"
        out.append((spec, src))
    return out


def _quick_hosts(quick: Sequence[str], defaults: dict[str, tuple[Any, str]],
                 lines: _Lines) -> list[tuple[HostSpec, dict[str, str]]]:
    out: list[tuple[HostSpec, dict[str, str]]] = []
    seen: dict[str, str] = {}
    for n, arg in enumerate(quick, 1):
        where = f"quick form argument {n}"
        spec = _quick(arg, n)
        given = {"name": spec.name, "ssh": spec.ssh, "unit": spec.unit}
        spec, src = _build(given, {k: where for k in given}, defaults, lines, context=f'{where} "{arg}": ')
        if spec.name in seen:
            raise ConfigError(f'{where} "{arg}": host "{spec.name}" is given twice (also {seen[spec.name]})')
        seen[spec.name] = where
        out.append((spec, src))
    return out


def _host(table: dict[str, Any], i: int, defaults: dict[str, tuple[Any, str]],
          lines: _Lines) -> tuple[HostSpec, dict[str, str]]:
    sec: _Section = ("host", i)
    label = f'host "{table["name"]}"' if isinstance(table.get("name"), str) else f"host #{i + 1}"
    for key in table:
        if key not in HOST_KEYS:
            raise ConfigError(lines.where(sec, key) + f"{label}: " + _unknown("key", key, HOST_KEYS))
    given: dict[str, Any] = {}
    src: dict[str, str] = {}
    for key, value in table.items():
        try:
            given[key] = _check(key, value)
        except ValueError as exc:
            raise ConfigError(lines.where(sec, key) + f'{label}: key "{key}" {_msg(exc)}') from None
        src[key] = lines.source(sec, key)
    return _build(given, src, defaults, lines, context=f"{label}: ", section=sec)


def _build(given: dict[str, Any], src: dict[str, str], defaults: dict[str, tuple[Any, str]],
           lines: _Lines, *, context: str, section: _Section | None = None) -> tuple[HostSpec, dict[str, str]]:
    """Merge a host's own values over ``[defaults]`` over the built-in defaults."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in HOST_KEYS:
        if key in given:
            values[key], sources[key] = given[key], src[key]
        elif key in defaults:
            values[key], sources[key] = defaults[key]
    where = lines.where(section, None) if section else ""
    if "name" not in values and "ssh" not in values:
        raise ConfigError(where + f'{context}give "name" or "ssh" (or both)')
    if "unit" not in values:
        raise ConfigError(where + f'{context}key "unit" is required (e.g. unit = "sglang.service")')
    if "name" not in values:
        ssh = values["ssh"]
        values["name"] = "local" if ssh == "local" else parse_target(ssh)[1]
        sources["name"] = "default: the host part of ssh"
    if "ssh" not in values:
        values["ssh"] = None
        sources["ssh"] = "default: the name"
    if "notify" not in values:
        values["notify"] = HOST["notify"].default + (("webhook",) if values.get("webhook_url") else ())
        sources["notify"] = "default (with webhook: webhook_url is set)" if values.get("webhook_url") else "default"
    if "webhook" in values["notify"] and not values.get("webhook_url"):
        key = "notify" if "notify" in given else None
        raise ConfigError((lines.where(section, key) if section else "") + f'{context}key "notify" names '
                          f'"webhook" ({sources["notify"]}) but no webhook_url is set (here or in [defaults])')
    spec = HostSpec(**values)
    if "ssh" not in given and "ssh" not in defaults and spec.target != "local":
        try:  # the name is the SSH target: it must be one
            _check("ssh", spec.target)
        except ValueError as exc:
            key = "name" if "name" in given else None
            raise ConfigError((lines.where(section, key) if section else "") + f'{context}key "name" is '
                              f'used as the SSH target (no "ssh" given) and {_msg(exc)}') from None
    for f in fields(HostSpec):
        sources.setdefault(f.name, "default")
    return spec, {k: sources[k] for k in HOST_KEYS}


def _quick(arg: str, n: int) -> HostSpec:
    where = f'quick form argument {n} "{arg}"'
    target, slash, unit = arg.partition("/")
    if not slash:
        raise ConfigError(f"{where}: write HOST/UNIT, e.g. gpu-node-2/vllm.service")
    if not target:
        raise ConfigError(f"{where}: no host before the '/' (write HOST/UNIT, e.g. gpu-node-2/vllm)")
    if not unit:
        raise ConfigError(f"{where}: no unit after the '/' (write HOST/UNIT, e.g. {target}/vllm.service)")
    if "/" in unit:
        raise ConfigError(f"{where}: more than one '/' (write HOST/UNIT)")
    try:
        unit = _check("unit", unit)
        ssh = _check("ssh", target)
        name = "local" if ssh == "local" else parse_target(ssh)[1]
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return HostSpec(name=name, unit=unit, ssh=ssh)
