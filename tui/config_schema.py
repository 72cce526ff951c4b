"""The keys of ``hosts.toml``, declared once: name, type, default, check and a one-line doc each.

:data:`HOST_SCHEMA` (a ``[[host]]`` table; ``[defaults]`` takes every key but ``name``) and
:data:`SETTINGS_SCHEMA` (``[settings]``) drive the checks of :func:`tui.config.load_config`, the
rows of ``upwatch config`` and the README's table of keys (:func:`markdown_table`; run ``python -m
tui.config_schema`` to print it, and a test holds the README to it). A host key's default is
:class:`probes.spec.HostSpec`'s (a test holds them equal). Values arrive as :mod:`tomllib` reads
TOML 1.0 (https://toml.io/en/v1.0.0): str, int, float, bool, list, dict.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probes.logs.engines import ENGINES
from probes.hosttext import unsafe_char
from probes.transport.target import parse_target
from probes.spec import CHANNELS, DEFAULT_CHANNELS, normalize_unit
from probes.spec import HostSpec
from probes.sources.health_target import health_target

#: The longest probe period ``[settings]`` takes, and the longest ``stall_after_s`` (a week).
MAX_PERIOD_S = 86400 * 7


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: The default of a key with no fixed default value (``name``, ``unit``): its ``default_doc`` says
#: what happens when it is not given.
NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True, slots=True)
class Key:
    """One key of ``hosts.toml``.

    Attributes:
        name: the key as written in the file.
        type: what the value must be, in words (``"integer 1..65535"``).
        default: the value used when the key is not given (for a host key, the default of the
            :class:`~probes.spec.HostSpec` field of the same name), or :data:`NO_DEFAULT`.
        check: the value as tomllib gives it → the value upwatch uses (normalised: ``"sglang"`` →
            ``"sglang.service"``). Raises ValueError whose message says what is wrong, starting with
            ``must``, ``is`` or a quoted value (``"must be true or false, not a string"``).
        doc: what the key means, one line.
        default_doc: the default in words where its value alone does not say it (``"the name"``);
            empty when the value says it.
    """

    name: str
    type: str
    default: Any
    check: Callable[[Any], Any]
    doc: str
    default_doc: str = ""

    @property
    def default_text(self) -> str:
        """The default as the table of keys shows it (TOML spelling of the value, or the words)."""
        if self.default_doc:
            return self.default_doc
        return _toml(self.default)


def _kind(value: Any) -> str:
    """A TOML value's kind as messages name it (``"an integer"``, ``"true/false"``, ``"a table"``)."""
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """A value as a message shows it; an integer too long to print (``0x`` + 5000 digits is valid
    TOML, and ``str()`` refuses past 4300 digits) by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


# --- checks ---------------------------------------------------------------------------------------

def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, not {_kind(value)}")
    return value


def _integer(hi: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be an integer 1..{hi}, not {_kind(value)}")
        if not 1 <= value <= hi:
            raise ValueError(f"must be 1..{hi}, not {_shown(value)}")
        return value
    return check


def _string(then: Callable[[str], Any] = str) -> Callable[[Any], Any]:
    """A non-empty string of printable characters, then ``then``'s own check."""
    def check(value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {_kind(value)}")
        if not value.strip():
            raise ValueError("must not be empty")
        if (bad := unsafe_char(value)) is not None:
            raise ValueError(f"must not hold control or invisible characters ({bad[1]} at character {bad[0] + 1})")
        return then(value)
    return check


def _engine(value: str) -> str:
    engine = value.lower()
    if engine not in ENGINES:
        raise ValueError(f'must be a known engine id ({", ".join(ENGINES)}), not "{value}"')
    return engine


def _ssh(value: str) -> str:
    if value != "local":
        if any(c.isspace() for c in value):
            raise ValueError(f'"{value}" is not an SSH target (no spaces allowed)')
        parse_target(value)  # raises ValueError with the reason
    return value


def _hf_cache(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f'must be an absolute folder on the host (what HF_HUB_CACHE names), not "{value}"')
    return value.rstrip("/") or "/"


def _webhook_url(value: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError(f'must be an http:// or https:// URL with a host, not "{value}"')
    return value


def _health_url(value: str) -> str:
    try:
        health_target(HostSpec("x", "x.service", health_url=value))
    except ValueError:
        raise ValueError(f'must be an http:// or https:// URL with a host, not "{value}"') from None
    return value


def _stall_after_s(value: Any) -> tuple[tuple[str, float], ...]:
    from probes.data.vocab import PHASES

    table = value if isinstance(value, dict) else {"*": value}
    out = []
    for phase, seconds in table.items():
        if phase != "*" and phase not in PHASES:
            raise ValueError(f'"{phase}" is not a phase id ({", ".join(PHASES)}, or "*")')
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < MAX_PERIOD_S:
            raise ValueError("must be seconds (a number above 0), or a table of them by phase, "
                             f"not {_shown(seconds)}")
        out.append((phase, float(seconds)))
    return tuple(out)


def _channels(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'must be an array of channel names ({", ".join(CHANNELS)}), not {_kind(value)}')
    for v in value:
        if v not in CHANNELS:
            close = difflib.get_close_matches(v, CHANNELS, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise ValueError(f'"{v}" is not a channel ({", ".join(CHANNELS)}){hint}')
    if len(set(value)) != len(value):
        raise ValueError("must not name a channel twice")
    return tuple(value)


def _period(value: Any) -> float:
    # An int is compared as it is: math.isfinite() or float() of 10**400 raises OverflowError.
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and math.isnan(value)) or value <= 0):
        what = _kind(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else _shown(value)
        raise ValueError(f"must be a positive number of seconds, not {what}")
    if value > MAX_PERIOD_S:
        raise ValueError(f"must be at most {MAX_PERIOD_S} seconds (a week), not {_shown(value)}")
    return float(value)


# --- the tables -----------------------------------------------------------------------------------

_URL = "http(s) URL with a host"

#: The keys of a ``[[host]]`` table, in the order ``upwatch config`` prints them.
HOST_SCHEMA: tuple[Key, ...] = (
    Key("name", "string", NO_DEFAULT, _string(), "the host's name on its card; unique",
        "the host part of `ssh`"),
    Key("ssh", "string", None, _string(_ssh),
        'how to reach the host: a `~/.ssh/config` alias, `[user@]host[:port]`, or `"local"` (no SSH)',
        "the name"),
    Key("unit", "string", NO_DEFAULT, _string(normalize_unit),
        "the server's systemd unit; `.service` is appended when it has no unit suffix", "required"),
    Key("engine", "string: " + ", ".join(ENGINES), None, _string(_engine),
        "the engine, when the log should not decide it", "detected from the log"),
    Key("port", "integer 1..65535", None, _integer(65535),
        "the server's HTTP port on the host (for `/health` when `health_url` is not given)",
        "the port the log names, else the engine's default; none is guessed"),
    Key("health_url", "string: " + _URL, None, _string(_health_url),
        "the health endpoint; a loopback address is the host's (through an SSH port forward), any other is asked from here",
        "`/health` on `port`, on the host"),
    Key("sudo", "true/false", False, _boolean, "run journalctl and systemctl as `sudo -n` (never prompts)"),
    Key("user_unit", "true/false", False, _boolean, "a `systemctl --user` unit"),
    Key("backlog", "integer 1..100000", 5000, _integer(100_000), "journal entries read on first connect"),
    Key("stall_after_s", "seconds, or a table of them by phase", (), _stall_after_s,
        'silence before a loading start counts as stalled; per phase: `{ graph_capture = 600, "*" = 180 }`',
        "120 s in every phase (the built-in per-phase limits)"),
    Key("hf_cache", "string: an absolute folder", None, _string(_hf_cache),
        "the host's Hugging Face hub cache (what `HF_HUB_CACHE` names)",
        "from the unit's `Environment=` (`HF_HUB_CACHE`, `HF_HOME`) and its user's home"),
    Key("notify", "array of " + ", ".join(f'"{c}"' for c in CHANNELS), DEFAULT_CHANNELS, _channels,
        "where ready, failed, restart loop and stalled notices go (`desktop`: notify-send); `[]` for none",
        '`["bell", "toast"]`, and `"webhook"` when `webhook_url` is set'),
    Key("webhook_url", "string: " + _URL, None, _string(_webhook_url),
        "where the `webhook` channel POSTs its JSON", "none"),
)

#: The keys of ``[settings]``.
SETTINGS_SCHEMA: tuple[Key, ...] = (
    Key("unit_interval_s", "seconds", 1.0, _period, "how often `systemctl show` runs"),
    Key("health_interval_s", "seconds", 2.0, _period, "how often `/health` is asked"),
    Key("gpu_interval_s", "seconds", 1.0, _period, "how often `nvidia-smi` samples"),
    Key("read_only", "true/false", False, _boolean, "no restart, stop or kill actions (as `--read-only`)"),
)

#: Key name → :class:`Key`, for :data:`HOST_SCHEMA` and :data:`SETTINGS_SCHEMA`.
HOST: dict[str, Key] = {k.name: k for k in HOST_SCHEMA}
SETTINGS: dict[str, Key] = {k.name: k for k in SETTINGS_SCHEMA}

#: The lines around the table of keys in the README (or in whichever docs/ file holds it).
TABLE_START = "<!-- hosts.toml keys: rendered from tui/config_schema.py by `python -m tui.config_schema` -->"
TABLE_END = "<!-- end of hosts.toml keys -->"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, tuple):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value}`"


def markdown_table() -> str:
    """The README's table of keys: a Markdown table for ``[[host]]`` and one for ``[settings]``,
    between :data:`TABLE_START` and :data:`TABLE_END`, ending with a newline."""
    def rows(keys: tuple[Key, ...]) -> list[str]:
        out = ["| key | type | default | what it is |", "|---|---|---|---|"]
        out += [f"| `{k.name}` | {k.type} | {k.default_text} | {k.doc} |" for k in keys]
        return out

    return "\n".join([
        TABLE_START,
        "Each `[[host]]` table takes these keys (`[defaults]` takes all but `name`, for every host):",
        "",
        *rows(HOST_SCHEMA),
        "",
        "`[settings]` (optional; periods in seconds, above 0, at most a week):",
        "",
        *rows(SETTINGS_SCHEMA),
        TABLE_END,
    ]) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(markdown_table())
