"""The configuration's tables checked against the schema: settings, ``[defaults]``, hosts.

Every key's type, default and check is declared once in :mod:`tui.config_schema`; here the
tables of a parsed file (:func:`tui.config_text.parse_toml`) and the quick forms become
:class:`~probes.spec.HostSpec` values, each value with where it came from, and every rule broken is
one :class:`~tui.config_text.ConfigError` naming the file, the line where it is sure
(:class:`~tui.config_text.KeyLines`), the host and the key. The entry point is
:func:`tui.config.load_config`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from probes.spec import HostSpec
from probes.transport.target import parse_target
from tui.config_schema import HOST, HOST_SCHEMA, SETTINGS, SETTINGS_SCHEMA
from tui.config_text import ConfigError, KeyLines, Section

#: Keys of a ``[[host]]`` table (:data:`tui.config_schema.HOST_SCHEMA`), in the order ``upwatch
#: config`` prints them.
HOST_KEYS = tuple(k.name for k in HOST_SCHEMA)
#: Keys of ``[defaults]``: every host key but ``name``.
DEFAULT_KEYS = tuple(k for k in HOST_KEYS if k != "name")
#: Keys of ``[settings]`` (:data:`tui.config_schema.SETTINGS_SCHEMA`).
SETTING_KEYS = tuple(k.name for k in SETTINGS_SCHEMA)


def unknown_key(what: str, key: str, known: Sequence[str]) -> str:
    """``'{what} "{key}" is not known'`` with the closest of ``known`` as a guess (difflib), or the
    list of ``known`` when none is close: the message for an unknown key or table."""
    close = difflib.get_close_matches(key, known, n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else f" (known: {', '.join(known)})"
    return f'{what} "{key}" is not known{hint}'


def _check(key: str, value: Any) -> Any:
    """Validate (and normalise) one host value by its schema key; ValueError says what is wrong."""
    return HOST[key].check(value)


def check_settings(table: Any, lines: KeyLines) -> tuple[dict[str, Any], dict[str, str]]:
    """``[settings]`` checked against :data:`~tui.config_schema.SETTINGS_SCHEMA`.

    Returns:
        (key → value, every key of :data:`SETTING_KEYS`, defaults filled in; key → ``"PATH:LINE"``
        or ``"default"``).

    Raises:
        ConfigError: ``settings`` is not a table, a key is not known, or a value fails its check.
    """
    values: dict[str, Any] = {k.name: k.default for k in SETTINGS_SCHEMA}
    sources = {k: "default" for k in SETTING_KEYS}
    sec: Section = ("settings", 0)
    if not isinstance(table, dict):
        raise ConfigError(lines.where(("top", 0), "settings") + '"settings" must be a table: [settings]')
    for key, value in table.items():
        if key not in SETTING_KEYS:
            raise ConfigError(lines.where(sec, key) + "[settings]: " + unknown_key("key", key, SETTING_KEYS))
        try:
            values[key] = SETTINGS[key].check(value)
        except ValueError as exc:
            raise ConfigError(lines.where(sec, key) + f'[settings]: key "{key}" {_msg(exc)}') from None
        sources[key] = lines.source(sec, key)
    return values, sources


def check_defaults(table: Any, lines: KeyLines) -> dict[str, tuple[Any, str]]:
    """``[defaults]`` checked against the host schema (every host key but ``name``): key → (value,
    ``"[defaults] PATH:LINE"``).

    Raises:
        ConfigError: ``defaults`` is not a table, it sets ``name``, a key is not known, or a value
            fails its check.
    """
    sec: Section = ("defaults", 0)
    if not isinstance(table, dict):
        raise ConfigError(lines.where(("top", 0), "defaults") + '"defaults" must be a table: [defaults]')
    out: dict[str, tuple[Any, str]] = {}
    for key, value in table.items():
        if key == "name":
            raise ConfigError(lines.where(sec, key) + '[defaults]: key "name" cannot have a default '
                              "(every host needs its own)")
        if key not in DEFAULT_KEYS:
            raise ConfigError(lines.where(sec, key) + "[defaults]: " + unknown_key("key", key, DEFAULT_KEYS))
        try:
            out[key] = (_check(key, value), "[defaults] " + lines.source(sec, key))
        except ValueError as exc:
            raise ConfigError(lines.where(sec, key) + f'[defaults]: key "{key}" {_msg(exc)}') from None
    return out


def _msg(exc: ValueError) -> str:
    text = str(exc)
    return text if text.startswith(("must", "is ", '"')) else f"is wrong: {text}"


def file_hosts(tables: Any, defaults: dict[str, tuple[Any, str]],
                lines: KeyLines) -> list[tuple[HostSpec, dict[str, str]]]:
    """The file's ``[[host]]`` tables checked and merged over ``defaults``: (spec, key → source)
    per host, in the file's order.

    Raises:
        ConfigError: ``host`` is not an array of tables, a host breaks a rule of the schema, or
            two hosts share a name.
    """
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


def quick_hosts(quick: Sequence[str], defaults: dict[str, tuple[Any, str]],
                 lines: KeyLines) -> list[tuple[HostSpec, dict[str, str]]]:
    """The quick forms (:func:`quick_host`) merged over ``defaults``: (spec, key → source) per host,
    in the order given.

    Raises:
        ConfigError: a quick form is malformed, or two name the same host.
    """
    out: list[tuple[HostSpec, dict[str, str]]] = []
    seen: dict[str, str] = {}
    for n, arg in enumerate(quick, 1):
        where = f"quick form argument {n}"
        spec = quick_host(arg, n)
        given = {"name": spec.name, "ssh": spec.ssh, "unit": spec.unit}
        spec, src = _build(given, {k: where for k in given}, defaults, lines, context=f'{where} "{arg}": ')
        if spec.name in seen:
            raise ConfigError(f'{where} "{arg}": host "{spec.name}" is given twice (also {seen[spec.name]})')
        seen[spec.name] = where
        out.append((spec, src))
    return out


def _host(table: dict[str, Any], i: int, defaults: dict[str, tuple[Any, str]],
          lines: KeyLines) -> tuple[HostSpec, dict[str, str]]:
    sec: Section = ("host", i)
    label = f'host "{table["name"]}"' if isinstance(table.get("name"), str) else f"host #{i + 1}"
    for key in table:
        if key not in HOST_KEYS:
            raise ConfigError(lines.where(sec, key) + f"{label}: " + unknown_key("key", key, HOST_KEYS))
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
           lines: KeyLines, *, context: str, section: Section | None = None) -> tuple[HostSpec, dict[str, str]]:
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


def quick_host(arg: str, n: int) -> HostSpec:
    """One quick form ``[user@]host[:port]/unit`` (argument ``n``, 1-based) as a :class:`HostSpec`,
    no defaults applied (see :func:`tui.config.parse_quick`).

    Raises:
        ConfigError: no ``/``, no host, no unit, more than one ``/``, or a unit or SSH target the
            schema refuses; the message names ``quick form argument N`` and the argument.
    """
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
