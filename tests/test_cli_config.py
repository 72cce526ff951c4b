"""`upwatch`, `upwatch config`, `upwatch status`: argument dispatch, config errors, provenance output."""

from __future__ import annotations

from pathlib import Path

import pytest

import tui.live
import tui.status
from tui import cli
from tui.config import Config

HOSTS = """\
[settings]
health_interval_s = 3

[defaults]
sudo = true

[[host]]
name = "gpu-node-1"
ssh = "gpu1"
unit = "sglang"
engine = "sglang"

[[host]]
ssh = "ops@10.0.0.5:2222"
unit = "vllm.service"
health_url = "http://10.0.0.5:8000/health"
sudo = false
"""


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake home (no real ~/.config or ~/.ssh is read) with an SSH config for the alias gpu1."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host gpu1\n  HostName 10.0.0.7\n  User ops\n  Port 2200\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USER", "me")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("UPWATCH_CONFIG", raising=False)
    return home


@pytest.fixture
def hosts_file(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text(HOSTS)
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    seen: list = []

    def run_status(config, *, as_json, timeout_s, out):
        seen.append(("status", config, as_json, timeout_s, out))
        return 4

    class App:
        def __init__(self, config: Config) -> None:
            seen.append(("live", config))

        def run(self) -> None:
            seen.append(("run",))

    monkeypatch.setattr(tui.status, "run_status", run_status)
    monkeypatch.setattr(tui.live, "make_live_app", App)
    return seen


def test_command_dispatch() -> None:
    assert cli._command_index(["--demo"]) is None
    assert cli._command_index(["replay", "x.log"]) == 0
    assert cli._command_index(["status", "--json", "a"]) == 0
    assert cli._command_index(["gpu-node-2/vllm"]) is None
    assert cli._command_index(["--config", "status", "config"]) == 2   # "status" is --config's value
    assert cli._command_index(["--speed", "5", "--demo"]) is None


def test_config_prints_every_value_and_its_source(hosts_file: Path, capsys) -> None:
    assert cli.main(["config", "--config", str(hosts_file)]) == 0
    out = capsys.readouterr().out
    f = str(hosts_file)
    assert f"config file: {f}" in out and "chosen because: named by --config" in out
    lines = out.splitlines()
    i = lines.index("host gpu-node-1")
    host1 = [line.split() for line in lines[i + 1:i + 15]]
    assert host1 == [
        ["name", "gpu-node-1", f"{f}:8"],
        ["ssh", "gpu1", f"{f}:9"],
        ["unit", "sglang.service", f"{f}:10"],
        ["engine", "sglang", f"{f}:11"],
        ["port", "30000", "(the", "engine's)", "default"],
        ["health_url", "(GET", "/health", "on", "the", "port,", "on", "the", "host)", "default"],
        ["sudo", "true", "[defaults]", f"{f}:5"],
        ["user_unit", "false", "default"],
        ["backlog", "5000", "default"],
        ["stall_after_s", "120", "s", "in", "every", "phase", "default"],
        ["hf_cache", "(from", "the", "unit's", "Environment=", "and", "user)", "default"],
        ["notify", "bell,", "toast", "default"],
        ["webhook_url", "-", "default"],
        ["(connects", "to)", "ops@10.0.0.7:2200", "as", "~/.ssh/config", "resolves", "it", "(asyncssh)"],
    ]
    i = lines.index("host 10.0.0.5")
    assert lines[i + 1].split() == ["name", "10.0.0.5", "default:", "the", "host", "part", "of", "ssh"]
    assert lines[i + 8].split() == ["user_unit", "false", "default"]
    i = lines.index("settings")
    assert [line.split() for line in lines[i + 1:i + 5]] == [
        ["unit_interval_s", "1.0", "default"], ["health_interval_s", "3.0", f"{f}:2"],
        ["gpu_interval_s", "1.0", "default"], ["read_only", "false", "default"]]
    # aligned: every value starts in the same column
    rows = [line for line in lines if line.startswith("  ") and not line.startswith("  chosen")][1:]
    cols = {line.index(line.split()[1], len(line.split()[0]) + 2) for line in rows if line.split()[0] != "(connects"}
    assert len(rows) == 32 and cols == {len("  health_interval_s  ")}


def test_config_with_env_and_quick_forms(hosts_file: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("UPWATCH_CONFIG", str(hosts_file))
    assert cli.main(["config", "local/sglang"]) == 0
    out = capsys.readouterr().out
    assert "chosen because: named by $UPWATCH_CONFIG" in out
    assert "hosts: the quick forms given (the file's [defaults] and [settings] apply)" in out
    row = next(line for line in out.splitlines() if line.startswith("  unit "))
    assert row.split() == ["unit", "sglang.service", "quick", "form", "argument", "1"]
    row = next(line for line in out.splitlines() if line.startswith("  sudo "))
    assert row.split() == ["sudo", "true", "[defaults]", f"{hosts_file}:5"]
    assert "gpu-node-1" not in out


def test_config_default_location_missing(capsys, _env: Path) -> None:
    assert cli.main(["config"]) == 0
    out = capsys.readouterr().out
    assert "config file: ~/.config/upwatch/hosts.toml" in out
    assert "chosen because: the default location (neither --config nor $UPWATCH_CONFIG given)" in out
    assert "not found: no hosts from a file" in out and "hosts: none" in out


def test_config_error_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[host]]\nname = "gpu-node-2"\nunti = "x"\n')
    assert cli.main(["config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f'upwatch: {path} line 3: host "gpu-node-2": key "unti" is not known (did you mean "unit"?)\n'
    assert cli.main(["--config", str(tmp_path / "none.toml"), "config"]) == 2
    assert capsys.readouterr().err == f"upwatch: {tmp_path / 'none.toml'} does not exist (named by --config)\n"


def test_status_calls_run_status_with_the_named_hosts(hosts_file: Path, calls: list, capsys) -> None:
    import sys

    assert cli.main(["status", "--json", "--timeout", "2.5", "--config", str(hosts_file), "10.0.0.5"]) == 4
    (kind, config, as_json, timeout_s, out), = calls
    assert (kind, as_json, timeout_s, out) == ("status", True, 2.5, sys.stdout)
    assert [h.name for h in config.hosts] == ["10.0.0.5"] and list(config.sources) == ["10.0.0.5"]
    calls.clear()
    assert cli.main(["--config", str(hosts_file), "status"]) == 4
    assert [h.name for h in calls[0][1].hosts] == ["gpu-node-1", "10.0.0.5"]
    assert (calls[0][2], calls[0][3]) == (False, 15.0)


def test_status_quick_form(calls: list) -> None:
    assert cli.main(["status", "root@[::1]:22/x"]) == 4
    assert [(h.name, h.ssh, h.unit) for h in calls[0][1].hosts] == [("::1", "root@[::1]:22", "x.service")]


def test_status_argument_errors_exit_2(hosts_file: Path, calls: list, capsys) -> None:
    assert cli.main(["status", "--config", str(hosts_file), "gpu-node-9"]) == 2
    assert capsys.readouterr().err == (f"upwatch: no host named 'gpu-node-9'; the hosts in {hosts_file} are: "
                                       "gpu-node-1, 10.0.0.5\n")
    assert cli.main(["status", "host/bad unit"]) == 2
    assert "quick form argument 1" in capsys.readouterr().err
    for bad in (["status", "--timeout", "0"], ["status", "--timeout", "x"], ["status", "--nope"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(bad)
        assert exc.value.code == 2
    assert calls == []


def test_dashboard_with_quick_forms_and_names(hosts_file: Path, calls: list) -> None:
    assert cli.main(["gpu-node-2/vllm"]) == 0
    assert calls[0][0] == "live" and calls[1] == ("run",)
    assert [(h.name, h.unit) for h in calls[0][1].hosts] == [("gpu-node-2", "vllm.service")]
    calls.clear()
    assert cli.main(["--config", str(hosts_file), "gpu-node-1"]) == 0
    assert [h.name for h in calls[0][1].hosts] == ["gpu-node-1"]


def test_no_hosts_prints_help_and_where_it_looked(calls: list, capsys) -> None:
    assert cli.main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: upwatch") and "[user@]host[:port]/unit" in out
    assert "looked for ~/.config/upwatch/hosts.toml (not found)" in err and "upwatch --demo" in err
    assert calls == []


def test_demo_refuses_hosts_and_help_texts(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--demo", "a/b"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(["status", "--help"])
    out = capsys.readouterr().out
    assert "0 every host answered and its unit and journal were read, 4 at least one" in out
    assert "its unit or journal cannot be read" in out.replace("\n", " ")
    assert "~/.config/upwatch/hosts.toml" in out and "[user@]host[:port]/unit" in out


def test_status_with_no_hosts_is_a_usage_error(tmp_path, capsys, monkeypatch) -> None:
    empty = tmp_path / "hosts.toml"
    empty.write_text("# nothing yet\n")
    monkeypatch.delenv("UPWATCH_CONFIG", raising=False)
    assert cli.main(["status", "--config", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no hosts to look at" in err and "no [[host]] tables in it" in err


def test_config_shows_notify_and_hides_the_webhook_token(tmp_path: Path, capsys) -> None:
    path = tmp_path / "notify.toml"
    path.write_text('[defaults]\nwebhook_url = "https://hooks.slack.com/services/T0/B0/s3cr3t"\n\n'
                    '[[host]]\nname = "a"\nssh = "local"\nunit = "x"\n\n'
                    '[[host]]\nname = "b"\nssh = "local"\nunit = "x"\nnotify = []\n')
    assert cli.main(["config", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "s3cr3t" not in out and "services" not in out
    lines = out.splitlines()
    i = lines.index("host a")
    assert [line.split() for line in lines[i + 12:i + 14]] == [
        ["notify", "bell,", "toast,", "webhook", "default", "(with", "webhook:", "webhook_url", "is", "set)"],
        ["webhook_url", "https://hooks.slack.com/…", "[defaults]", f"{path}:2"]]
    i = lines.index("host b")
    assert lines[i + 12].split() == ["notify", "(none)", f"{path}:13"]
