"""tui.config: hosts.toml, quick forms, provenance, and errors that name file, line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from probes.spec import HostSpec
from tui.config import (ConfigError, choose_config_file, load_config, normalize_unit, parse_quick,
                        resolve_ssh)


@pytest.fixture(autouse=True)
def _no_real_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may read the real user's ~/.config or ~/.ssh."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("UPWATCH_CONFIG", raising=False)


def write(tmp_path: Path, text: str, name: str = "hosts.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load(path: Path | None, *quick: str, env: dict[str, str] | None = None, default: Path | None = None):
    return load_config(None if path is None else str(path), list(quick), env or {},
                       default_path=default or Path("/nonexistent/upwatch/hosts.toml"))


def error(path: Path | None, *quick: str, **kw) -> str:
    with pytest.raises(ConfigError) as exc:
        load(path, *quick, **kw)
    return str(exc.value)


EXAMPLE = """
    # hosts
    [settings]
    health_interval_s = 3
    gpu_interval_s = 0.5

    [defaults]
    sudo = true
    engine = "sglang"

    [[host]]
    name = "gpu-node-1"
    unit = "sglang"

    [[host]]
    ssh = "ops@10.0.0.5:2222"
    unit = "vllm.service"
    engine = "vllm"
    health_url = "http://10.0.0.5:8000/health"
    sudo = false
    backlog = 200
"""


def test_file_hosts_defaults_and_settings(tmp_path: Path) -> None:
    path = write(tmp_path, EXAMPLE)
    cfg = load(path)
    assert cfg.hosts == (
        HostSpec("gpu-node-1", "sglang.service", engine="sglang", sudo=True),
        HostSpec("10.0.0.5", "vllm.service", engine="vllm", backlog=200, ssh="ops@10.0.0.5:2222",
                 health_url="http://10.0.0.5:8000/health", sudo=False),
    )
    assert (cfg.unit_interval_s, cfg.health_interval_s, cfg.gpu_interval_s) == (1.0, 3.0, 0.5)
    assert cfg.file is not None and cfg.file.path == path and cfg.file.chosen_by == "--config"
    assert cfg.file.exists


def test_provenance_names_file_lines_defaults_and_derived_values(tmp_path: Path) -> None:
    path = write(tmp_path, EXAMPLE)
    cfg = load(path)
    one = cfg.sources["gpu-node-1"]
    assert one == {"name": f"{path}:11", "ssh": "default: the name", "unit": f"{path}:12",
                   "engine": f"[defaults] {path}:8", "port": "default", "health_url": "default",
                   "sudo": f"[defaults] {path}:7", "user_unit": "default", "backlog": "default",
                   "stall_after_s": "default", "hf_cache": "default", "notify": "default", "webhook_url": "default"}
    two = cfg.sources["10.0.0.5"]
    assert two["name"] == "default: the host part of ssh"
    assert (two["ssh"], two["engine"], two["sudo"], two["backlog"]) == (
        f"{path}:15", f"{path}:17", f"{path}:19", f"{path}:20")
    assert cfg.setting_sources == {"unit_interval_s": "default", "health_interval_s": f"{path}:3",
                                   "gpu_interval_s": f"{path}:4", "read_only": "default"}


def test_home_is_shown_as_tilde(tmp_path: Path) -> None:
    path = write(tmp_path / "home", '[[host]]\nname = "a"\nunit = "unti"\nunti = 1\n')
    assert error(path) == '~/hosts.toml line 4: host "a": key "unti" is not known (did you mean "unit"?)'


@pytest.mark.parametrize("unit, expected", [
    ("sglang", "sglang.service"), ("sglang.service", "sglang.service"), ("vllm@0", "vllm@0.service"),
    ("llm.target", "llm.target"), ("model.v2", "model.v2.service"), ("a:b-c_d\\x2d.service", "a:b-c_d\\x2d.service"),
])
def test_unit_suffix_is_added_when_missing(unit: str, expected: str) -> None:
    assert normalize_unit(unit) == expected


@pytest.mark.parametrize("unit, words", [
    ("bad unit", "' ' is not allowed"), ("x/y", "'/' is not allowed"), (".service", "nothing before"),
    ("tmpl@.service", "is a template"), ("-x", "starting with '-'"), ("a@b@c", "more than one '@'"),
    ("u" * 250, "systemd allows 255"), ("", "empty"),
])
def test_bad_unit_names_are_refused(unit: str, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        normalize_unit(unit)


def test_bad_unit_in_file_names_line_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[[host]]\nname = "n1"\nunit = "sglang server"\n')
    msg = error(path)
    assert msg.startswith(f'{path} line 3: host "n1": key "unit" is wrong: ')
    assert "' ' is not allowed" in msg


def test_unknown_key_names_line_host_and_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, """
        [[host]]
        name = "gpu-node-1"
        unit = "a"

        [[host]]
        name = "gpu-node-2"
        unti = "vllm"
    """)
    assert error(path) == f'{path} line 7: host "gpu-node-2": key "unti" is not known (did you mean "unit"?)'


def test_unknown_keys_elsewhere(tmp_path: Path) -> None:
    path = write(tmp_path, '[settings]\nunit_interval = 2\n')
    assert error(path) == (f'{path} line 2: [settings]: key "unit_interval" is not known '
                           '(did you mean "unit_interval_s"?)')
    path = write(tmp_path, '[defaults]\nname = "x"\n')
    assert error(path).startswith(f'{path} line 2: [defaults]: key "name" cannot have a default')
    path = write(tmp_path, '[defaults]\nsduo = true\n')
    assert error(path) == f'{path} line 2: [defaults]: key "sduo" is not known (did you mean "sudo"?)'
    path = write(tmp_path, 'title = 1\n[hosts]\nname = "x"\n')
    assert error(path) == f'{path} line 1: key "title" is not known (known: settings, defaults, host)'
    path = write(tmp_path, '# x\n[hosts]\nname = "x"\n')
    assert error(path) == f'{path} line 2: table "hosts" is not known (did you mean "host"?)'
    path = write(tmp_path, '# x\n# y\n[host]\nname = "x"\n')
    assert error(path) == f'{path} line 3: "host" must be an array of tables: write each host as [[host]]'


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, """
        [[host]]
        name = "a"
        unit = "x"

        [[host]]
        ssh = "root@a"
        unit = "y"
    """)
    assert error(path) == f'{path} line 5: host "a": the name is already used by the host on line 1'


@pytest.mark.parametrize("line, message", [
    ("sudo = \"yes\"", 'key "sudo" must be true or false, not a string'),
    ("port = \"30000\"", 'key "port" must be an integer 1..65535, not a string'),
    ("port = 70000", 'key "port" must be 1..65535, not 70000'),
    ("port = true", 'key "port" must be an integer 1..65535, not true/false'),
    ("backlog = 0", 'key "backlog" must be 1..100000, not 0'),
    ("user_unit = 1", 'key "user_unit" must be true or false, not an integer'),
    ("engine = \"sglng\"", 'key "engine" must be a known engine id (sglang, vllm, tgi, llamacpp, trtllm, '
                           'ollama), not "sglng"'),
    ("health_url = \"localhost:30000/health\"", 'key "health_url" must be an http:// or https:// URL with '
                                                'a host, not "localhost:30000/health"'),
    ("health_url = \"ftp://h/x\"", 'key "health_url" must be an http:// or https:// URL'),
    ("ssh = \"root@h:99999\"", 'key "ssh" is wrong: bad port \'99999\''),
    ("ssh = \"gpu node\"", 'key "ssh" "gpu node" is not an SSH target'),
])
def test_wrong_values_name_line_and_key(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, f'[[host]]\nname = "h1"\nunit = "x"\n{line}\n')
    assert error(path).startswith(f'{path} line 4: host "h1": {message}')


def test_engine_is_case_insensitive(tmp_path: Path) -> None:
    path = write(tmp_path, '[[host]]\nname = "h1"\nunit = "x"\nengine = "vLLM"\n')
    assert load(path).hosts[0].engine == "vllm"


def test_missing_unit_and_missing_name(tmp_path: Path) -> None:
    path = write(tmp_path, '[settings]\ngpu_interval_s = 1\n\n[[host]]\nname = "h1"\n')
    assert error(path) == f'{path} line 4: host "h1": key "unit" is required (e.g. unit = "sglang.service")'
    path = write(tmp_path, '[[host]]\nunit = "x"\n')
    assert error(path) == f'{path} line 1: host #1: give "name" or "ssh" (or both)'


def test_unit_from_defaults_and_name_without_ssh(tmp_path: Path) -> None:
    path = write(tmp_path, '[defaults]\nunit = "sglang"\n[[host]]\nname = "a"\n[[host]]\nname = "b"\n')
    assert [(h.name, h.unit, h.target) for h in load(path).hosts] == [
        ("a", "sglang.service", "a"), ("b", "sglang.service", "b")]
    path = write(tmp_path, '[[host]]\nname = "my box"\nunit = "x"\n')
    assert "used as the SSH target" in error(path)
    path = write(tmp_path, '[[host]]\nname = "my box"\nssh = "local"\nunit = "x"\n')
    assert load(path).hosts[0].is_local


@pytest.mark.parametrize("key, value, words", [
    ("unit_interval_s", "0", "must be a positive number of seconds, not 0"),
    ("health_interval_s", "-1.5", "not -1.5"),
    ("gpu_interval_s", '"1"', "not a string"),
    ("gpu_interval_s", "nan", "not nan"),
    ("gpu_interval_s", "true", "not true/false"),
])
def test_settings_must_be_positive_numbers(tmp_path: Path, key: str, value: str, words: str) -> None:
    path = write(tmp_path, f"# x\n[settings]\n{key} = {value}\n")
    msg = error(path)
    assert msg.startswith(f'{path} line 3: [settings]: key "{key}"') and msg.endswith(words)


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[[host]]\nname = "a"\nunit = "x\n')
    assert error(path) == f"{path}: not valid TOML: Illegal character '\\n' (at line 3, column 10)"


def test_missing_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert error(missing) == f"{missing} does not exist (named by --config)"
    assert error(None, env={"UPWATCH_CONFIG": str(missing)}) == \
        f"{missing} does not exist (named by env UPWATCH_CONFIG)"
    assert error(tmp_path) == f"{tmp_path} is not a file (named by --config)"
    cfg = load(None, default=missing)  # the default file may be missing: no hosts
    assert cfg.hosts == () and cfg.file is not None
    assert (cfg.file.path, cfg.file.chosen_by, cfg.file.exists) == (missing, "default", False)
    assert cfg.unit_interval_s == 1.0 and cfg.setting_sources["unit_interval_s"] == "default"


def test_precedence_config_over_env_over_default(tmp_path: Path) -> None:
    a = write(tmp_path, '[[host]]\nname = "from-a"\nunit = "x"\n', "a.toml")
    b = write(tmp_path, '[[host]]\nname = "from-b"\nunit = "x"\n', "b.toml")
    c = write(tmp_path, '[[host]]\nname = "from-c"\nunit = "x"\n', "c.toml")
    env = {"UPWATCH_CONFIG": str(b)}
    assert load(a, env=env, default=c).hosts[0].name == "from-a"
    cfg = load(None, env=env, default=c)
    assert (cfg.hosts[0].name, cfg.file.chosen_by) == ("from-b", "env UPWATCH_CONFIG")
    cfg = load(None, env={"UPWATCH_CONFIG": ""}, default=c)
    assert (cfg.hosts[0].name, cfg.file.chosen_by) == ("from-c", "default")


def test_default_path_is_the_platformdirs_config_folder(tmp_path: Path) -> None:
    chosen = choose_config_file(None, {})
    assert chosen.path == tmp_path / "home" / ".config" / "upwatch" / "hosts.toml"
    assert (chosen.chosen_by, chosen.exists, chosen.shown) == ("default", False, "~/.config/upwatch/hosts.toml")


@pytest.mark.parametrize("arg, name, ssh, unit", [
    ("root@10.0.0.5/sglang.service", "10.0.0.5", "root@10.0.0.5", "sglang.service"),
    ("gpu-node-2/vllm.service", "gpu-node-2", "gpu-node-2", "vllm.service"),
    ("gpu-node-2:2222/vllm", "gpu-node-2", "gpu-node-2:2222", "vllm.service"),
    ("[::1]:22/x", "::1", "[::1]:22", "x.service"),
    ("local/sglang.service", "local", "local", "sglang.service"),
])
def test_quick_forms(arg: str, name: str, ssh: str, unit: str) -> None:
    assert parse_quick(arg) == HostSpec(name=name, unit=unit, ssh=ssh)


@pytest.mark.parametrize("arg, words", [
    ("/x", "no host before the '/'"),
    ("host/", "no unit after the '/'"),
    ("host", "write HOST/UNIT"),
    ("host/bad unit", "' ' is not allowed"),
    ("host/a/b", "more than one '/'"),
    ("host:0/x", "bad port '0'"),
    ("[::1/x", "unclosed '['"),
])
def test_bad_quick_forms_name_the_argument(arg: str, words: str) -> None:
    msg = error(None, "ok/x", arg)
    assert msg.startswith(f'quick form argument 2 "{arg}": ') and words in msg


def test_quick_forms_replace_file_hosts_but_keep_defaults_and_settings(tmp_path: Path) -> None:
    path = write(tmp_path, EXAMPLE)
    cfg = load(path, "root@10.0.0.5/vllm", "local/sglang")
    assert cfg.hosts == (HostSpec("10.0.0.5", "vllm.service", engine="sglang", ssh="root@10.0.0.5", sudo=True),
                         HostSpec("local", "sglang.service", engine="sglang", ssh="local", sudo=True))
    assert cfg.health_interval_s == 3.0
    src = cfg.sources["local"]
    assert (src["name"], src["ssh"], src["unit"], src["sudo"], src["port"]) == (
        "quick form argument 2", "quick form argument 2", "quick form argument 2", f"[defaults] {path}:7",
        "default")


def test_quick_forms_still_check_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[[host]]\nname = "a"\nunit = "x"\nprot = 1\n')
    assert error(path, "b/y").startswith(f'{path} line 4: host "a": key "prot" is not known')


def test_duplicate_quick_forms(tmp_path: Path) -> None:
    assert error(None, "a/x", "root@a/y") == \
        'quick form argument 2 "root@a/y": host "a" is given twice (also quick form argument 1)'


def test_resolve_ssh_uses_the_ssh_config(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host gpu1\n  HostName 10.0.0.7\n  User ops\n  Port 2222\n")
    assert resolve_ssh("gpu1", [cfg], "me") == ("ops", "10.0.0.7", 2222)
    assert resolve_ssh("root@gpu1:22", [cfg], "me") == ("root", "10.0.0.7", 22)
    assert resolve_ssh("other", [cfg], "me") == ("me", "other", 22)
    assert resolve_ssh("local", [cfg], "me") is None


def test_stall_after_s_as_a_number_or_per_phase(tmp_path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text('[[host]]\nname = "a"\nunit = "x"\nstall_after_s = 90\n\n'
                    '[[host]]\nname = "b"\nunit = "x"\nstall_after_s = { graph_capture = 600, "*" = 200 }\n')
    config = load_config(str(path), (), {}, default_path=tmp_path / "none.toml")
    a, b = config.hosts
    assert a.stall_after_s == (("*", 90.0),)
    assert b.stall_after_s == (("graph_capture", 600.0), ("*", 200.0))
    path.write_text('[[host]]\nname = "a"\nunit = "x"\nstall_after_s = { graph = 600 }\n')
    with pytest.raises(ConfigError) as err:
        load_config(str(path), (), {}, default_path=tmp_path / "none.toml")
    assert 'line 4' in str(err.value) and '"graph" is not a phase id' in str(err.value)


def test_hf_cache_per_host_or_in_defaults_must_be_absolute(tmp_path: Path) -> None:
    path = write(tmp_path, """
        [defaults]
        hf_cache = "/data/hf/hub/"

        [[host]]
        name = "a"
        unit = "x"

        [[host]]
        name = "b"
        unit = "x"
        hf_cache = "/srv/models cache/hub"
        """)
    cfg = load(path)
    a, b = cfg.hosts
    assert (a.hf_cache, b.hf_cache) == ("/data/hf/hub", "/srv/models cache/hub")
    assert cfg.sources["a"]["hf_cache"] == f"[defaults] {path}:2"
    assert cfg.sources["b"]["hf_cache"] == f"{path}:11"
    assert load(write(tmp_path, '[[host]]\nname = "a"\nunit = "x"\n')).hosts[0].hf_cache is None
    path = write(tmp_path, '[[host]]\nname = "a"\nunit = "x"\nhf_cache = "~/.cache/huggingface/hub"\n')
    assert error(path) == (f'{path} line 4: host "a": key "hf_cache" must be an absolute folder on the host '
                           '(what HF_HUB_CACHE names), not "~/.cache/huggingface/hub"')
    path = write(tmp_path, '[[host]]\nname = "a"\nunit = "x"\nhf_cache = 3\n')
    assert error(path) == f'{path} line 4: host "a": key "hf_cache" must be a string, not an integer'


def test_notify_channels_and_webhook_per_host_and_in_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, """
        [defaults]
        webhook_url = "https://hooks.example.com/services/T0/B0/secret"

        [[host]]
        name = "a"
        unit = "x"

        [[host]]
        name = "b"
        unit = "x"
        notify = ["desktop"]

        [[host]]
        name = "c"
        unit = "x"
        notify = []
        webhook_url = "http://127.0.0.1:9/hook"
    """)
    cfg = load(path)
    a, b, c = cfg.hosts
    # webhook_url set (here from [defaults]) and notify not given: the webhook joins the default.
    assert (a.notify, a.webhook_url) == (("bell", "toast", "webhook"), "https://hooks.example.com/services/T0/B0/secret")
    assert cfg.sources["a"]["notify"] == "default (with webhook: webhook_url is set)"
    assert cfg.sources["a"]["webhook_url"] == f"[defaults] {path}:2"
    assert (b.notify, cfg.sources["b"]["notify"]) == (("desktop",), f"{path}:11")
    assert (c.notify, c.webhook_url) == ((), "http://127.0.0.1:9/hook")
    assert cfg.sources["c"]["webhook_url"] == f"{path}:17"
    # Without any webhook_url the default is the bell and a toast.
    plain = load(write(tmp_path, '[[host]]\nname = "d"\nunit = "x"\n', "plain.toml"))
    assert plain.hosts[0].notify == ("bell", "toast") and plain.hosts[0].webhook_url is None
    # [defaults] notify holds for every host that does not set its own.
    glob = load(write(tmp_path, '[defaults]\nnotify = ["bell"]\n[[host]]\nname = "d"\nunit = "x"\n', "g.toml"))
    assert glob.hosts[0].notify == ("bell",)
    assert glob.sources["d"]["notify"] == f"[defaults] {tmp_path / 'g.toml'}:2"


@pytest.mark.parametrize("line, message", [
    ('notify = "bell"', 'key "notify" must be an array of channel names (bell, toast, desktop, webhook), not a string'),
    ('notify = ["bel"]', 'key "notify" "bel" is not a channel (bell, toast, desktop, webhook) (did you mean "bell"?)'),
    ('notify = [1]', 'key "notify" must be an array of channel names'),
    ('notify = ["bell", "bell"]', 'key "notify" must not name a channel twice'),
    ('webhook_url = "hooks.slack.com/x"', 'key "webhook_url" must be an http:// or https:// URL with a host, '
                                          'not "hooks.slack.com/x"'),
    ('webhook_url = 5', 'key "webhook_url" must be a string, not an integer'),
])
def test_wrong_notify_values_name_line_and_key(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, f'[[host]]\nname = "h1"\nunit = "x"\n{line}\n')
    assert error(path).startswith(f'{path} line 4: host "h1": {message}')


def test_webhook_channel_needs_a_url(tmp_path: Path) -> None:
    path = write(tmp_path, '[[host]]\nname = "h1"\nunit = "x"\nnotify = ["toast", "webhook"]\n')
    assert error(path) == (f'{path} line 4: host "h1": key "notify" names "webhook" ({path}:4) but no '
                           f'webhook_url is set (here or in [defaults])')
    path = write(tmp_path, '[defaults]\nnotify = ["webhook"]\n[[host]]\nname = "h1"\nunit = "x"\n', "d.toml")
    assert error(path).startswith(f'{path} line 3: host "h1": key "notify" names "webhook" ([defaults] {path}:2)')
    path = write(tmp_path, '[defaults]\nnotify = ["bel"]\n', "e.toml")
    assert error(path).startswith(f'{path} line 2: [defaults]: key "notify" "bel" is not a channel')
