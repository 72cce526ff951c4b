"""The command line as an operator meets it: what ``replay`` accepts as input (device files, NUL
bytes, a terminal, an empty log), the duration options, flags given where they do nothing, Ctrl-C
at any moment, and where the messages send a user. Run as subprocesses (``python -m tui``), stdin a
real pty where the test is about a terminal."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import pytest
from conftest import LOGS

from tui import cli
from tui.duration import MAX_DURATION_S, parse_duration

ROOT = Path(__file__).resolve().parent.parent
OOM_LOG = LOGS / "vllm-fail-oom-01.log"
PROMPT = "upwatch replay: reading standard input (Ctrl-D to end)\n"


def upwatch(*args: str, stdin: bytes | int | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m tui ARGS`` from the repository root; ``stdin`` bytes, or a file descriptor."""
    kw = {"input": stdin} if isinstance(stdin, bytes) or stdin is None else {"stdin": stdin}
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, cwd=ROOT, check=False,
                          timeout=timeout, **kw)


def refused(proc: subprocess.CompletedProcess, *words: str, code: int = 2) -> str:
    """Exit ``code``, no traceback, nothing on stdout, and stderr says why (naming ``words``)."""
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert proc.returncode == code, (proc.returncode, err)
    assert proc.stdout == b""
    for word in words:
        assert word in err, err
    return err


def one_line(err: str, prefix: str = "upwatch replay: ") -> None:
    assert err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1, repr(err)


# --- replay: what is not a log ------------------------------------------------------------------------


def test_dev_zero_is_refused_in_one_line_at_once() -> None:
    """It ran forever at 96% CPU: a character device gives NUL bytes without end."""
    proc = upwatch("replay", "/dev/zero", timeout=30)
    err = refused(proc, "/dev/zero", "character device", "NUL")
    one_line(err)
    proc = upwatch("replay", "-", stdin=os.open("/dev/zero", os.O_RDONLY), timeout=30)
    one_line(refused(proc, "standard input", "character device"))


def test_dev_urandom_is_refused_as_binary() -> None:
    one_line(refused(upwatch("replay", "/dev/urandom", timeout=30), "/dev/urandom", "binary"))


def test_a_file_of_nul_bytes_is_refused_as_bin_ls_is(tmp_path: Path) -> None:
    """A 3 MB file of NUL bytes was read as an empty log while /bin/ls was refused as binary."""
    nul = tmp_path / "zeros.log"
    nul.write_bytes(bytes(3_000_000))
    exe = tmp_path / "ls"
    exe.write_bytes(Path("/bin/ls").read_bytes())
    for path in (nul, exe):
        err = refused(upwatch("replay", str(path)), str(path), "binary")
        one_line(err)
        refused(upwatch("replay", "--json", str(path)), "binary")
    assert "NUL bytes and nothing else" in refused(upwatch("replay", "-", stdin=nul.read_bytes()), "binary")


def test_an_endless_pipe_of_nul_bytes_ends_with_a_refusal() -> None:
    """``cat /dev/zero | upwatch replay -``: the leading hole a pipe may give is bounded."""
    cat = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE)
    try:
        assert cat.stdout is not None
        proc = upwatch("replay", "-", stdin=cat.stdout.fileno(), timeout=60)
    finally:
        cat.kill()
        cat.wait()
    one_line(refused(proc, "standard input", "binary", "more than 256.0 MiB of NUL bytes"))


def test_a_log_after_a_nul_hole_through_a_pipe_is_still_read() -> None:
    """logrotate copytruncate's hole, then the log: read whole through a pipe too (the bytes read
    to test the input are not lost)."""
    proc = upwatch("replay", "--json", "-", stdin=bytes(1_000_000) + OOM_LOG.read_bytes())
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    out = json.loads(proc.stdout)
    assert (out["engine"], out["state"], out["cause"], out["phases"][0]["line"]) == ("vllm", "failed", "cuda_oom", 1)
    piped = json.loads(upwatch("replay", "--json", "-", stdin=OOM_LOG.read_bytes()).stdout)
    assert out == piped


def test_what_is_read_from_a_character_device_is_bounded() -> None:
    """A character device that gives text without end (none standard does: /dev/urandom is made to
    pass the binary test here) ends with a refusal after MAX_DEVICE_READ bytes (1 MiB here)."""
    code = textwrap.dedent("""
        import probes.sources.logfile as lf
        import probes.sources.logfile_input as checks
        checks._is_binary = lambda sample: False
        checks.MAX_DEVICE_READ = 1024 * 1024
        try:
            lf.read_path("/dev/urandom")
        except lf.LogReadError as exc:
            print(exc)
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "/dev/urandom is a character device that did not end after 1 MiB: not a log file\n"


def _block_device(tmp_path: Path) -> str:
    for name in sorted(os.listdir("/dev")):
        path = f"/dev/{name}"
        if stat.S_ISBLK(os.lstat(path).st_mode) and os.access(path, os.R_OK):
            return path
    node = tmp_path / "disk"
    try:
        os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except OSError as exc:
        pytest.fail(f"no readable block device in /dev and mknod failed: {exc}", pytrace=False)
    return str(node)


def test_a_block_device_is_refused(tmp_path: Path) -> None:
    disk = _block_device(tmp_path)
    one_line(refused(upwatch("replay", disk), disk, "block device"))


# --- replay: an empty log, text and JSON agree ------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\n \n\r\n", b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/sh\n",
                                     b"hello world\n", b"{\n", b"foo: bar\n"],
                         ids=["empty", "blank-lines", "passwd", "hello", "brace", "yaml"])
def test_a_log_without_a_start_is_none_in_json_as_in_text(tmp_path: Path, content: bytes) -> None:
    """The text said "NO SERVER START FOUND", --json said "state": "loading"; and text that names no
    engine, phase, failure or progress (/etc/passwd, a word) read "LOADING: Starting", 1 start."""
    path = tmp_path / "x.log"
    path.write_bytes(content)
    text = upwatch("replay", str(path))
    assert text.returncode == 0 and b"NO SERVER START FOUND" in text.stdout
    proc = upwatch("replay", "--json", str(path))
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    assert (out["state"], out["phase"], out["starts"], out["error"], out["phases"]) == ("none", None, 0, None, [])
    assert json.loads(upwatch("replay", "--json", "-", stdin=content).stdout) == out


def test_a_log_with_a_start_keeps_its_state() -> None:
    out = json.loads(upwatch("replay", "--json", str(LOGS / "sglang-ok-01.log")).stdout)
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_none_is_documented() -> None:
    readme = (ROOT / "docs" / "scripting.md").read_text()  # replay --json's key table
    row = next(line for line in readme.splitlines() if line.startswith("| `state` |"))
    assert "`none`" in row and "NO SERVER START FOUND" in row
    assert "none" in upwatch("replay", "--help").stdout.decode()


# --- replay: a terminal on stdin -----------------------------------------------------------------------


def _pty() -> tuple[int, int]:
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO  # the test reads nothing back from the master
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    return master, slave


def _read_line(fd: int, within_s: float = 30.0) -> str:
    """One line from ``fd``, read a byte at a time (a buffered read could take what follows);
    fails when none comes within ``within_s`` seconds."""
    import select
    import time

    line, deadline = b"", time.monotonic() + within_s
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no line within {within_s:g} s (so far {line!r})"
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line.decode()


def test_a_terminal_on_stdin_is_told_how_to_end_the_input() -> None:
    """`replay -` on a terminal waited with no prompt."""
    master, slave = _pty()
    proc = subprocess.Popen([sys.executable, "-m", "tui", "replay", "--json", "-"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(slave)
    try:
        assert proc.stderr is not None
        assert _read_line(proc.stderr.fileno()) == PROMPT  # before anything is typed
        os.write(master, OOM_LOG.read_bytes() + b"\x04")  # the lines, then Ctrl-D
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    assert proc.returncode == 0, err
    assert err == b""
    assert json.loads(out)["cause"] == "cuda_oom"


def test_a_closed_stdin_is_refused_in_one_line() -> None:
    proc = subprocess.run(["sh", "-c", 'exec "$0" -m tui replay - <&-', sys.executable], capture_output=True,
                          cwd=ROOT, timeout=60, check=False)
    one_line(refused(proc, "standard input is closed"))


def test_a_pipe_on_stdin_gets_no_prompt() -> None:
    proc = upwatch("replay", "-", stdin=OOM_LOG.read_bytes())
    assert proc.returncode == 0 and proc.stderr == b""


# --- Ctrl-C from the first instant ------------------------------------------------------------------------

#: Runs ``python -m tui ARGV`` the way runpy does, with SIGINT sent to itself the moment MODULE is
#: first imported: an interrupt at a chosen point of upwatch's imports, every time.
_INTERRUPT_AT_IMPORT = textwrap.dedent("""
    import os, runpy, signal, sys
    MODULE = sys.argv.pop(1)
    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == MODULE:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None
    sys.meta_path.insert(0, Interrupt())
    sys.argv[0] = "upwatch"
    runpy.run_module("tui", run_name="__main__", alter_sys=True)
    """)


@pytest.mark.parametrize("module", ["argparse", "probes.logs.logline", "probes.logs.reader", "tui.config", "tui.replay"])
def test_ctrl_c_during_the_imports_is_one_line_and_130(module: str) -> None:
    """Ctrl-C in the first ~0.3 s printed a KeyboardInterrupt traceback (the imports of tui.cli)."""
    assert module not in sys.builtin_module_names
    proc = subprocess.run([sys.executable, "-c", _INTERRUPT_AT_IMPORT, module, "replay", "-"], input=b"",
                          capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert proc.stderr.decode() == "upwatch: interrupted\n"
    assert proc.returncode == 130


def test_ctrl_c_after_the_first_output_is_one_line_and_130() -> None:
    master, slave = _pty()
    proc = subprocess.Popen([sys.executable, "-m", "tui", "replay", "-"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(slave)
    try:
        assert proc.stderr is not None
        first = _read_line(proc.stderr.fileno())  # the first output, the prompt: upwatch is running
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    assert (first, err.decode()) == (PROMPT, "upwatch: interrupted\n")
    assert (proc.returncode, out) == (130, b"")


def test_ctrl_c_while_reading_a_pipe_is_one_line_and_130(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "tui", "replay", str(fifo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        with open(fifo, "wb") as writer:  # returns once upwatch opened the pipe: it is reading
            writer.write(OOM_LOG.read_bytes()[:200])
            writer.flush()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (err.decode(), proc.returncode, out) == ("upwatch: interrupted\n", 130, b"")


def test_the_upwatch_script_runs_what_python_m_tui_runs() -> None:
    """The installed ``upwatch`` script calls tui.__main__.run, so it has the same Ctrl-C handling."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"upwatch": "tui.__main__:run"}
    script = "import sys; from tui.__main__ import run; sys.argv[0] = 'upwatch'; sys.exit(run())"
    proc = subprocess.run([sys.executable, "-c", script, "replay", "--help"], capture_output=True, cwd=ROOT,
                          timeout=60, check=False)
    assert proc.returncode == 0 and b"usage: upwatch replay" in proc.stdout


# --- one duration parser --------------------------------------------------------------------------------


def test_parse_duration_reads_seconds_minutes_hours() -> None:
    assert [parse_duration(t) for t in ("90", "90s", "15s", "5m", "1h", "1h30m", "1.5m", " 2M ")] == \
        [90, 90, 15, 300, 3600, 5400, 90, 120]
    assert parse_duration("0", allow_zero=True) == 0.0
    assert parse_duration("0s", allow_zero=True) == 0.0
    for bad in ("", "0", "-5", "5x", "m", "nan", "inf", "1e3", "5 m", "9" * 400 + "h", "8d"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert parse_duration(f"{MAX_DURATION_S:g}") == MAX_DURATION_S
    with pytest.raises(ValueError, match="more than 7 days"):
        parse_duration(f"{MAX_DURATION_S + 1:g}")


@pytest.mark.parametrize("command", ["status", "wait"])
def test_every_timeout_option_reads_the_same_durations(command: str) -> None:
    """`status --timeout 15s` was refused ("not a number") while `wait --timeout 15s` worked."""
    parser = cli.build_parser()
    for text, seconds in (("15s", 15), ("5m", 300), ("1h", 3600), ("90", 90), ("1m30s", 90)):
        assert parser.parse_args([command, "--timeout", text, "h/u"]).timeout == seconds


def test_wait_timeout_0_looks_once_and_status_timeout_0_is_refused() -> None:
    """`wait --timeout 0` was "not a duration"; for status (which looks once anyway) 0 would wait for
    no answer at all."""
    assert cli.build_parser().parse_args(["wait", "--timeout", "0", "h/u"]).timeout == 0.0
    err = refused(upwatch("status", "--timeout", "0", "h/u"), "--timeout", "more than 0")
    assert "usage: upwatch status" in err


def test_a_bad_duration_is_refused_alike_by_both_with_each_ones_exit_status() -> None:
    s = refused(upwatch("status", "--timeout", "15x", "h/u"), "not a duration: '15x'")
    w = refused(upwatch("wait", "--timeout", "15x", "h/u"), "not a duration: '15x'", code=cli.EXIT_WAIT_USAGE)
    assert s.splitlines()[-1].split(": ", 1)[1] == w.splitlines()[-1].split(": ", 1)[1]
    refused(upwatch("status", "--timeout", "2h", "h/u"), "at most 3600 s")


def test_wait_timeout_0_looks_once_on_a_real_host(systemd_host) -> None:
    """With --timeout 0, wait reads the unit, journal and /health once they answer and says what it
    saw: a server that is up is ready (0), not "not ready after 0 s" (it gave up before the first
    answer)."""
    import asyncio

    from test_wait import _running, wait_on

    from tui.wait import EXIT_READY

    asyncio.run(_running(systemd_host, "fake-llm.service"))
    code, out = wait_on(systemd_host, "fake-llm.service", 30000, restart=False, until="ready", timeout_s=60,
                        history=None)
    assert code == EXIT_READY, out  # it is up now
    code, out = wait_on(systemd_host, "fake-llm.service", 30000, restart=False, until="ready", timeout_s=0,
                        history=None)
    assert code == EXIT_READY, out
    assert out.splitlines()[-1].startswith("gpu-node-3: ready ("), out


# --- flags that apply to one mode only --------------------------------------------------------------------


@pytest.mark.parametrize("argv, words", [
    (["--speed", "5"], ["--speed", "--demo only"]),
    (["--speed", "5", "local/sglang"], ["--speed", "--demo only"]),
    (["--speed", "5", "status", "h/u"], ["--speed", "--demo only"]),
    (["--demo", "status"], ["--demo", "no command"]),
    (["--demo", "replay", "x.log"], ["--demo", "no command"]),
    (["--demo", "--config", "hosts.toml"], ["--demo", "--config"]),
    (["--demo", "gpu-node-1"], ["--demo", "no HOST"]),
    (["--fleet", "128"], ["--fleet", "--demo only"]),
    (["--demo", "--fleet", "1"], ["--fleet", "2 to 1000"]),
    (["--demo", "--fleet", "many"], ["--fleet", "not a whole number"]),
    (["--demo", "--fleet", "8", "serve"], ["--fleet", "without a command"]),
    # 300 hosts at the default 10x froze the dashboard (a fresh user): like 3,000 real hosts.
    (["--demo", "--fleet", "300"], ["--fleet 300 at --speed 10", "3,000 real hosts", "--fleet 300 --speed 4"]),
    (["--demo", "--fleet", "129"], ["--fleet 129 at --speed 10"]),
    (["--config", "hosts.toml", "replay", "x.log"], ["replay", "--config does not apply"]),
    (["--config", "hosts.toml", "history"], ["history", "--config does not apply"]),
], ids=lambda v: " ".join(v) if isinstance(v, list) and v and v[0].startswith("-") else "")
def test_a_flag_given_where_it_does_nothing_is_refused(argv: list[str], words: list[str]) -> None:
    """`--speed 5` without `--demo` was silently ignored (and opened the live dashboard)."""
    err = refused(upwatch(*argv), *words)
    assert err.splitlines()[-1].startswith("upwatch: error: ")


def test_wait_refuses_a_demo_flag_with_its_usage_status() -> None:
    refused(upwatch("--speed", "5", "wait", "h/u"), "--demo only", code=cli.EXIT_WAIT_USAGE)


def test_the_demo_flags_together_still_parse() -> None:
    parser = cli.build_dashboard_parser()
    for argv, speed in ((["--demo", "--speed", "5"], 5.0), (["--demo"], None), (["--demo", "--read-only"], None)):
        args = parser.parse_args(argv)
        cli._check_mode_flags(parser, args)
        assert (args.demo, args.speed) == (True, speed)
    assert cli.DEMO_SPEED == 10.0
    args = parser.parse_args(["--demo", "--fleet", "128", "--speed", "5"])
    cli._check_mode_flags(parser, args)
    assert (args.fleet, args.speed) == (128, 5.0)
    for argv in (["--demo", "--fleet", "128"], ["--demo", "--fleet", "1000", "--speed", "1"]):
        cli._check_mode_flags(parser, parser.parse_args(argv))  # at most 1,280 host-seconds: taken


# --- messages send a pip-installed user to --help, not to a file ------------------------------------------


def test_the_no_hosts_messages_name_help_and_its_example_is_a_working_file(tmp_path: Path) -> None:
    empty = tmp_path / "hosts.toml"
    empty.write_text("# nothing yet\n")
    dash = upwatch("--config", str(empty))
    status = upwatch("status", "--config", str(empty))
    assert dash.returncode == 0
    assert status.returncode == 2
    for err in (dash.stderr.decode(), status.stderr.decode()):
        assert "`upwatch --help`" in err and "README" not in err, err
    help_text = upwatch("--help").stdout.decode()
    example = help_text.split("An example hosts.toml:\n", 1)[1].split("\nA [[host]] takes", 1)[0]
    path = tmp_path / "example.toml"
    path.write_text(textwrap.dedent(example) + "\n")
    from tui.config import load_config

    config = load_config(str(path), [], {})
    assert [(h.name, h.unit, h.engine, h.port, h.sudo) for h in config.hosts] == \
        [("gpu-node-1", "sglang.service", "sglang", 30000, True)]
