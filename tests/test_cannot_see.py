"""What upwatch says when it cannot see: against the real sshd test host (tests/testhost.py) with
sudo missing (no ``sudo`` on the host's PATH: the shell's own "command not found"), sudo refusing
(a ``sudo`` that answers as sudo 1.9 does with ``-n``), systemd missing (the real
``/usr/bin/systemctl`` of this machine, whose PID 1 is not systemd), the journal unreadable (the
real ``journalctl`` as an unprivileged user on a root-only journal file), a unit that does not
exist, a host that cannot be reached and a host without ``nvidia-smi``.

Each case runs the real CLI (``status --json``, ``status``, ``wait``) and checks the verdict, the
knowledge, the exit codes and stderr; :func:`test_the_readme_table_is_what_upwatch_says` checks
README.md's table row by row against what the same runs measured.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_live_status import host_block, hosts_toml, setup_home
from testhost import TestHost
from waiting import until

from tui.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

README = Path(__file__).parent.parent / "README.md"
NOBODY = 65534


def _sudo_missing(host: TestHost, tmp: Path) -> str:
    host.remove_shim("sudo")  # no sudo anywhere on the remote PATH (this machine has none)
    return "sudo = true\n"


def _sudo_refused(host: TestHost, tmp: Path) -> str:
    # sudo 1.9's answer to -n when the sudoers entry wants a password (exit 1)
    (host.shims / "sudo").write_text('#!/bin/sh\necho "$*" >> "$UPWATCH_TEST_STATE/sudo.log"\n'
                                     'echo "sudo: a password is required" >&2\nexit 1\n')
    return "sudo = true\n"


def _no_systemd(host: TestHost, tmp: Path) -> str:
    host.remove_shim("systemctl")  # the real systemctl: this machine's PID 1 is not systemd
    assert shutil.which("systemctl") is not None
    return ""


def _journal_unreadable(host: TestHost, tmp: Path) -> str:
    # The real journalctl, as user nobody, on a journal directory whose file only root may read.
    jdir = Path(tempfile.mkdtemp(prefix="upwatch-journal-"))
    jdir.chmod(0o755)
    shutil.copyfile(host.journal, jdir / "system.journal")
    (jdir / "system.journal").chmod(0o640)
    (host.shims / "journalctl").write_text(
        f'#!/bin/sh\nexec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups '
        f'/usr/bin/journalctl --directory={jdir} "$@"\n')
    _cleanup.append(lambda: shutil.rmtree(jdir, ignore_errors=True))
    return ""


def _journal_broken(host: TestHost, tmp: Path) -> str:
    # journalctl fails with an error no access reason names (a journal file it cannot read, exit 1)
    (host.shims / "journalctl").write_text(
        "#!/bin/sh\necho 'Failed to open journal: Input/output error' >&2\nexit 1\n")
    return ""


def _not_found(host: TestHost, tmp: Path) -> str:
    host.set_systemctl_show(None)  # the real not-found capture (exit 0, LoadState=not-found)
    return ""


def _no_nvidia_smi(host: TestHost, tmp: Path) -> str:
    host.remove_shim("nvidia-smi")
    return ""


_cleanup: list[Callable[[], None]] = []

#: README table row id → how the test host is made to lack it.
CASES: dict[str, Callable[[TestHost, Path], str]] = {
    "sudo_missing": _sudo_missing, "sudo_refused": _sudo_refused, "no_systemd": _no_systemd,
    "no_journal_access": _journal_unreadable, "unreadable": _journal_broken, "not_found": _not_found,
    "no_nvidia_smi": _no_nvidia_smi,
}


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield
    while _cleanup:
        _cleanup.pop()()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    got = capsys.readouterr()
    return rc, got.out, got.err


def measure(case: str, host: TestHost | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> dict:
    """Set the case up, run ``status --json``, ``status`` and ``wait``; what each said."""
    if host is None:  # a host that cannot be reached: a bound port nobody listens on
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        _cleanup.append(sock.close)
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "config").write_text(f"Host gpu-a\n  HostName 127.0.0.1\n  Port {sock.getsockname()[1]}\n"
                                              "  User root\n")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
        monkeypatch.delenv("UPWATCH_CONFIG", raising=False)
        cfg = hosts_toml(tmp_path, host_block("gpu-a", 9))
    else:
        extra = CASES[case](host, tmp_path)
        host.seed_log("sglang-ok-01.log")
        setup_home(tmp_path, monkeypatch, host)
        assert host.health is not None
        cfg = hosts_toml(tmp_path, host_block("gpu-a", host.health.port, extra))
    rc_json, out, err_json = run_cli(capsys, "status", "--json", "--timeout", "20", "--config", cfg)
    item = json.loads(out)[0]
    rc_text, text, err_text = run_cli(capsys, "status", "--timeout", "20", "--config", cfg)
    began = time.monotonic()
    rc_wait, wait_out, wait_err = run_cli(capsys, "wait", "gpu-a", "--timeout", "20s", "--config", cfg)
    return {"json": item, "rc": rc_json, "err": err_json, "text": text, "rc_text": rc_text, "err_text": err_text,
            "wait_rc": rc_wait, "wait_out": wait_out, "wait_err": wait_err, "wait_s": time.monotonic() - began}


# --- each case --------------------------------------------------------------------------------------

def _blind_checks(m: dict, probes: str, reason: str, words: tuple[str, ...]) -> None:
    v = m["json"]["verdict"]
    assert (v["level"], v["kind"]) == ("warning", "cannot_see"), v
    assert v["sentence"].startswith(f"Cannot read {probes}: "), v
    for w in words:
        assert w in v["sentence"], (w, v["sentence"])
    for probe in probes.replace("the ", "").split(" or "):
        k = m["json"]["knowledge"][probe]
        assert (k["status"], k["reason"]) == ("failing", reason), k
        assert k["since"] is not None and k["why"]
    assert m["json"]["connection"] == "ok"
    assert m["rc"] == m["rc_text"] == 4
    assert m["err"] == f"upwatch status: gpu-a: {v['sentence']} (exit 4)\n"
    assert f"  verdict     {v['sentence']}" in m["text"] or v["sentence"] in m["text"]
    assert m["wait_rc"] == 4 and m["wait_s"] < 12, m["wait_s"]  # at once, not after its 20 s timeout
    # wait gives up as soon as one of the two is known unreadable (which comes first is a race)
    assert m["wait_err"].startswith("gpu-a: Cannot read the ") and m["wait_err"].count("\n") == 1, m["wait_err"]
    for w in words:
        assert w in m["wait_err"], (w, m["wait_err"])
    assert "Starting" not in m["wait_out"] and "Starting" not in m["text"]


def test_sudo_missing_is_said_with_its_own_fix(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    m = measure("sudo_missing", testhost, tmp_path, monkeypatch, capsys)
    _blind_checks(m, "the unit or the journal", "sudo_missing",
                  ("sudo is not installed on the host", "sudo: not found", "install sudo there"))
    assert "NOPASSWD" not in m["json"]["verdict"]["sentence"]  # not the fix for a sudo that is not there
    # The JSON said "waiting" (read as "no start yet") where the text said unknown (a fresh user).
    assert (m["json"]["state"], m["json"]["phase"]) == ("unknown", None)
    assert "unknown (cannot read the unit or journal)" in m["text"]


def test_sudo_refusing_is_said_with_nopasswd(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    m = measure("sudo_refused", testhost, tmp_path, monkeypatch, capsys)
    _blind_checks(m, "the unit or the journal", "sudo_refused",
                  ("sudo -n refused (sudo: a password is required)", "NOPASSWD"))
    assert "not installed" not in m["json"]["verdict"]["sentence"]


def test_a_host_without_systemd_is_said(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    m = measure("no_systemd", testhost, tmp_path, monkeypatch, capsys)
    _blind_checks(m, "the unit", "no_systemd",
                  ("systemd is not running on the host", "System has not been booted with systemd"))
    assert m["json"]["knowledge"]["journal"]["status"] == "read"  # the journal itself was readable


def test_an_unreadable_journal_is_said(testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    m = measure("no_journal_access", testhost, tmp_path, monkeypatch, capsys)
    _blind_checks(m, "the journal", "no_journal_access",
                  ("the SSH user may not read the system journal",
                   "No journal files were opened due to insufficient permissions", "systemd-journal"))
    assert m["json"]["knowledge"]["unit"]["status"] == "read"


def test_a_unit_that_does_not_exist_reads_as_such(testhost: TestHost, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    testhost.journal.unlink()  # nothing logged by a unit that does not exist
    testhost.append_log_lines(["other unit"], _SYSTEMD_UNIT="other.service")
    m = measure("not_found", testhost, tmp_path, monkeypatch, capsys)
    assert m["json"]["verdict"]["kind"] == "not_found"
    state_row = next(ln for ln in m["text"].splitlines() if ln.split()[:1] == ["state"])
    assert state_row.split(None, 1)[1] == "no such unit", m["text"]
    assert m["rc"] == 0 and m["err"] == ""
    assert m["wait_rc"] == 1 and m["wait_err"].startswith("gpu-a: Unit sglang.service does not exist")


def test_an_unreachable_host_reads_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    m = measure("unreachable", None, tmp_path, monkeypatch, capsys)
    state_row = next(ln for ln in m["text"].splitlines() if ln.split()[:1] == ["state"])
    assert state_row.split(None, 1)[1] == "unknown (not reached)", m["text"]
    assert m["rc"] == 4 and m["err"].startswith("upwatch status: gpu-a: ") and m["err"].endswith("(exit 4)\n")
    assert m["wait_rc"] == 4 and m["wait_err"].startswith("gpu-a: "), m
    assert {k["status"] for k in m["json"]["knowledge"].values()} <= {"failing", "never"}


def test_a_restart_with_no_new_start_says_why_it_timed_out(testhost: TestHost, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The test host's systemctl takes the restart (exit 0) but its unit never starts again: the
    # process systemctl show reports is the one from before (active-running, began 2025).
    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    cfg = hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port))
    rc, out, err = run_cli(capsys, "wait", "gpu-a", "--restart", "--timeout", "4s", "--config", cfg)
    assert rc == 3, (out, err)
    assert any(c.startswith("restart sglang.service") for c in testhost.log("systemctl.log"))
    lines = out.splitlines()
    assert lines and all(ln.endswith("(the process from before the restart)") for ln in lines), lines
    assert err.startswith("gpu-a: not ready after 4 s: no start after the restart was seen: the unit's process "
                          "(MainPID "), err
    assert err.count("\n") == 1 and "before the restart; systemd says active/running" in err, err


def test_status_watch_says_cannot_see_in_its_first_line(testhost: TestHost) -> None:
    import asyncio
    import io

    from probes.spec import HostSpec
    from tui.config import Config
    from tui.status import watch

    _no_systemd(testhost, Path())
    assert testhost.health is not None
    config = Config(hosts=(HostSpec("gpu-a", "sglang.service", ssh=testhost.target,
                                    health_url=f"{testhost.health.url}/health"),), unit_interval_s=0.2)
    out = io.StringIO()

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch(config, out, stop=stop, timeout_s=10,
                                         runner_factory=lambda s: testhost.runner(), history=None))
        try:
            await until("the first status line", out.getvalue, 15)
        finally:
            stop.set()
        await task

    asyncio.run(main())
    first = json.loads(out.getvalue().splitlines()[0])
    assert first["verdict"]["kind"] == "cannot_see", first["verdict"]
    assert first["verdict"]["sentence"].startswith("Cannot read the unit: systemd is not running on the host")
    assert first["knowledge"]["unit"]["reason"] == "no_systemd"


async def test_the_card_says_cannot_see_on_its_top_line(testhost: TestHost) -> None:
    from test_widgets import One, screen_text

    from probes.clock import WallClock
    from probes.spec import HostSpec
    from probes.watch.watcher import HostWatcher
    from widgets.host_card import HostCard

    _sudo_missing(testhost, Path())
    assert testhost.health is not None
    w = HostWatcher(HostSpec("gpu-a", "sglang.service", sudo=True, health_url=f"{testhost.health.url}/health"),
                    testhost.runner(), WallClock(), unit_interval_s=0.2)
    w.start()
    try:
        # both probes have tried once (each fails on its first try)
        await until("the unit and the journal failing",
                    lambda: all(w.state().known(p).status == "failing" for p in ("unit", "journal")), 10)
        s = w.state()
    finally:
        await w.stop()
    assert s.verdict is not None and s.verdict.kind == "cannot_see", s.verdict
    app = One(HostCard(s))
    async with app.run_test(size=(100, 14)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "CANNOT SEE" in text.splitlines()[1], text  # the top line under the border title
        assert "Cannot read the unit or the journal: sudo is not installed" in text and "WAITING" not in text


# --- the README table -----------------------------------------------------------------------------

def readme_rows() -> dict[str, list[str]]:
    """The rows of README.md's "When upwatch cannot see" table, by their id (the backticked
    word in the first cell's parentheses)."""
    text = README.read_text()
    start = text.index("### When upwatch cannot see")
    rows: dict[str, list[str]] = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        m = re.search(r"\(`(\w+)`\)", cells[0])
        if m:
            rows[m.group(1)] = cells
    return rows


def _field(item: dict, path: str):
    for part in path.split("."):
        item = item[part]
    return item


# every case but "unreachable" asks for the testhost fixture while it runs: those are host tests
@pytest.mark.parametrize("case", [*(pytest.param(c, marks=pytest.mark.host) for c in CASES), "unreachable"])
def test_the_readme_table_is_what_upwatch_says(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], request) -> None:
    rows = readme_rows()
    assert case in rows, f"README.md's table has no row for {case}"
    _, card, js, status_rc, wait_rc, wait_err = rows[case]
    host = None if case == "unreachable" else request.getfixturevalue("testhost")
    m = measure(case, host, tmp_path, monkeypatch, capsys)
    # card: its top line's word is the state's headline (probes.fold.headline.headline), upper-case
    word = re.findall(r"`([^`]+)`", card)[0]
    assert m["json"]["headline"].upper() == word, (case, m["json"]["verdict"])
    # status --json: `field` `value` pairs
    pairs = re.findall(r"`([\w.]+)` `([^`]*)`", js)
    assert pairs, js
    for path, value in pairs:
        got = _field(m["json"], path)
        assert (got if got is not None else "null") == value, (case, path, got)
    assert str(m["rc"]) == status_rc.strip("*")
    assert str(m["wait_rc"]) == wait_rc.strip("*")
    said = [w.replace("HOST", "gpu-a").replace("UNIT", "sglang.service") for w in re.findall(r"`([^`]*)`", wait_err)]
    if said:  # the first begins stderr; the others are in it
        assert m["wait_err"].startswith(said[0]), (case, m["wait_err"])
        for w in said[1:]:
            assert w in m["wait_err"], (case, w, m["wait_err"])
    else:
        assert m["wait_err"] == "" and wait_err == "nothing", (case, m["wait_err"])



def test_a_journal_follow_that_ends_on_the_host_is_not_a_lost_connection(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # journalctl reads the journal (the access check passes) but its follow (-f) ends at once:
    # the SSH link is up, so the host is not stale; its journal is not being read, and it says so.
    real = testhost.shims / "journalctl"
    real.rename(testhost.shims / "journalctl.real")
    real.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = "-f" ] && exit 1; done\n'
                    f'exec {testhost.shims / "journalctl.real"} "$@"\n')
    real.chmod(0o755)
    _cleanup.append(lambda: (testhost.shims / "journalctl.real").replace(real))
    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    assert testhost.health is not None
    cfg = hosts_toml(tmp_path, host_block("gpu-a", testhost.health.port))
    rc, out, err = run_cli(capsys, "status", "--json", "--timeout", "20", "--config", cfg)
    item = json.loads(out)[0]
    assert item["connection"] == "ok" and item["verdict"]["kind"] != "stale", item["verdict"]
    journal = item["knowledge"]["journal"]
    assert journal["status"] == "failing" and "journalctl -f ended on the host" in journal["why"], journal
    assert item["verdict"]["kind"] == "cannot_see" and rc == 4 and "journalctl -f ended" in err


def test_no_port_is_guessed_for_a_host_whose_log_cannot_be_read(
        testhost: TestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # No port, engine or health_url configured, and the journal cannot be read (sudo missing), so
    # nothing names the port: readiness read "port closed" for a probe of the fallback 8000, a port
    # that was never the server's (fresh-user check). Now the health probe says why it cannot look.
    extra = _sudo_missing(testhost, tmp_path)
    testhost.seed_log("sglang-ok-01.log")
    setup_home(tmp_path, monkeypatch, testhost)
    cfg = hosts_toml(tmp_path, f'[[host]]\nname = "gpu-a"\nunit = "sglang.service"\n{extra}')
    rc, out, err = run_cli(capsys, "status", "--json", "--timeout", "20", "--config", cfg)
    item = json.loads(out)[0]
    assert item["verdict"]["kind"] == "cannot_see" and item["readiness"] != "port_closed", item["readiness"]
    health = item["knowledge"]["health"]
    assert health["status"] == "failing" and "no port known for the server" in health["why"], health


def test_a_refused_host_with_no_port_known_is_unreachable_not_ok(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A quick form names no port and no engine, so the health probe fails at once with "no port
    # known" without asking the host anything. That failure used to end the unit's and journal's
    # connection failure ("the command ran, so the link works"): `upwatch status 127.0.0.1:2/sglang`
    # printed "connection ok", "Waiting, nothing wrong seen." and exited 0 (fresh-user check).
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("UPWATCH_DATA_DIR", str(tmp_path / "data"))
    with socket.socket() as s:  # a port nothing listens on: connecting is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, out, err = run_cli(capsys, "status", "--json", "--timeout", "20", f"127.0.0.1:{port}/sglang")
    item = json.loads(out)[0]
    assert rc == 4 and "(exit 4)" in err, (rc, err)
    assert item["connection"] != "ok" and item["verdict"]["level"] != "ok", item
    assert item["knowledge"]["unit"]["status"] == "failing", item["knowledge"]
