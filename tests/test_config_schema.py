"""tui.config_schema: the keys of hosts.toml declared once, and everything that must agree with it:
HostSpec's defaults, Config's, the checks, `upwatch config`, the README's table of keys and the
example in tui.config's docstring."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

import tui.config
from probes.spec import HostSpec
from tui.cli import format_config
from tui.config import (
    HOST_KEYS,
    LIVE_UNIT_INTERVAL_S,
    SETTING_KEYS,
    Config,
    ConfigError,
    load_config,
)
from tui.config_schema import (
    HOST_SCHEMA,
    NO_DEFAULT,
    SETTINGS_SCHEMA,
    TABLE_END,
    TABLE_START,
    markdown_table,
)

ROOT = Path(__file__).resolve().parent.parent


def test_every_hostspec_field_is_a_key_with_the_same_default() -> None:
    specs = {f.name: f for f in dataclasses.fields(HostSpec)}
    assert [k.name for k in HOST_SCHEMA] == list(HOST_KEYS) and set(HOST_KEYS) == set(specs)
    for key in HOST_SCHEMA:
        field = specs[key.name]
        if field.default is dataclasses.MISSING:
            assert key.default is NO_DEFAULT and key.default_doc, key.name
        else:
            assert key.default == field.default, key.name
    assert {k.name for k in HOST_SCHEMA if k.default is NO_DEFAULT} == {"name", "unit"}


def test_settings_defaults_are_what_a_loaded_config_runs_with(tmp_path: Path) -> None:
    assert [k.name for k in SETTINGS_SCHEMA] == list(SETTING_KEYS)
    cfg = load_config(None, (), {}, default_path=tmp_path / "none.toml")
    for key in SETTINGS_SCHEMA:
        assert getattr(cfg, key.name) == key.default and cfg.setting_sources[key.name] == "default"
    # Config's own defaults (the demo's) differ only in the live unit period.
    plain = Config(hosts=())
    assert [k.name for k in SETTINGS_SCHEMA if getattr(plain, k.name) != k.default] == ["unit_interval_s"]
    assert LIVE_UNIT_INTERVAL_S == SETTINGS_SCHEMA[0].default


def test_every_key_has_a_type_and_a_one_line_doc() -> None:
    for key in HOST_SCHEMA + SETTINGS_SCHEMA:
        assert key.type and key.doc and "\n" not in key.doc + key.default_doc + key.type, key.name
        assert "|" not in key.doc + key.default_doc + key.type, key.name  # a Markdown table cell


def test_the_readme_table_is_the_schemas_rendering() -> None:
    # Wherever the table lives (README.md, or a docs/ page once the README is split), it is rendered
    # from the schema: `python -m tui.config_schema` prints it.
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    holding = [p for p in pages if p.is_file() and TABLE_START in p.read_text()]
    assert len(holding) == 1, f"one page holds {TABLE_START!r}: {holding}"
    text = holding[0].read_text()
    start = text.index(TABLE_START)
    end = text.index(TABLE_END, start) + len(TABLE_END) + 1
    assert text[start:end] == markdown_table(), "run: python -m tui.config_schema, and paste it there"


def test_the_docstring_example_sets_every_key_and_loads(tmp_path: Path) -> None:
    doc = tui.config.__doc__
    assert doc is not None
    example = textwrap.dedent(doc.split("::\n\n", 1)[1].split("\n\nEvery effective", 1)[0])  # as bench/fuzz.py reads it
    path = tmp_path / "hosts.toml"
    path.write_text(example)
    cfg = load_config(str(path), (), {}, default_path=tmp_path / "none.toml")
    src = cfg.sources["gpu-node-1"]
    assert sorted(k for k, v in src.items() if v.startswith(str(path))) == sorted(HOST_KEYS)
    assert sorted(cfg.setting_sources) == sorted(SETTING_KEYS)
    assert all(v.startswith(str(path)) for v in cfg.setting_sources.values())


def test_upwatch_config_prints_the_schemas_keys_in_its_order(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text('[[host]]\nname = "a"\nssh = "local"\nunit = "x"\n')
    out = format_config(load_config(str(path), (), {}, default_path=tmp_path / "none.toml")).splitlines()
    i = out.index("host a")
    assert [line.split()[0] for line in out[i + 1:i + 1 + len(HOST_KEYS)]] == list(HOST_KEYS)
    i = out.index("settings")
    assert [line.split()[0] for line in out[i + 1:]] == list(SETTING_KEYS)


@pytest.mark.parametrize("key", HOST_SCHEMA, ids=lambda k: k.name)
def test_a_wrong_type_is_refused_by_every_host_check(key, tmp_path: Path) -> None:
    # A value of the wrong kind (an inline table, where stall_after_s takes one: a wrong phase) is
    # always a ValueError the message can carry, never another exception.
    with pytest.raises(ValueError) as exc:
        key.check({"nope": 1})
    assert str(exc.value).startswith(("must", "is ", '"'))
    values = {"name": '"a"', "ssh": '"local"', "unit": '"x"', key.name: "{ nope = 1 }"}
    path = tmp_path / "hosts.toml"
    path.write_text("[[host]]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()))
    with pytest.raises(ConfigError) as err:
        load_config(str(path), (), {}, default_path=tmp_path / "none.toml")
    line = 2 + list(values).index(key.name)
    label = "host #1" if key.name == "name" else 'host "a"'
    assert str(err.value).startswith(f'{path} line {line}: {label}: key "{key.name}" ')
