"""Hostile host text never reaches the operator's terminal as escapes (issue 13).

The real app (``python -m tui``) runs in a real tmux against two real test hosts (sshd on loopback,
tests/testhost.py) whose log lines, unit properties, GPU names, process names, action output and
error messages carry OSC 52 (clipboard), OSC 8 (hyperlinks), CSI screen/cursor/report codes, 8-bit
C1 forms, DCS/APC/PM/SOS strings, bidi overrides, zero-width characters and NUL. ``tmux pipe-pane``
records every byte the app wrote to its terminal; the test checks that each escape in it is one
Textual writes itself (SGR, cursor position, private modes, its keyboard/pointer settings), that
no C1, bidi, zero-width or NUL character is in it, that tmux made no paste buffer (OSC 52 with
``set-clipboard on``), and that the visible parts of every hostile text were on the screen (so the
hostile text was really shown).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import running_testhost
from waiting import until_sync
from testhost import TestHost, _replace, _write_script

ROOT = Path(__file__).resolve().parent.parent

#: Every kind of control sequence a host may send, in one string (no comma: it goes into CSV cells).
HOSTILE = ("\x1b]52;c;UFdORUQ=\x07" "\x1b]52;c;UFdORUQ=\x1b\\"             # OSC 52: "PWNED" to the clipboard
           "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\"          # OSC 8 hyperlink
           "\x1b]0;title\x07"                                               # OSC 0 window title
           "\x1b[2J\x1b[3J\x1b[6n\x1b[21t\x1b[?1049l\x1b[1;1H\x1b[?25l"    # CSI: clear, report, alt screen, cursor
           "\u009b2J\u009d52;c;UFdORUQ=\u009c\u0090q\u009c"                 # 8-bit CSI, OSC, DCS (as UTF-8)
           "\x1bPq#0;2;0;0;0\x1b\\\x1b_Gf=100;QUFB\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\"  # DCS, APC, PM, SOS
           "\x1b(0\x1b7\x1bc"                                               # charset, save cursor, reset
           "|\u202eRTL\u202c\u2066iso\u2069\u200b\u200f\ufeff|"             # bidi overrides, isolates, zero-width
           "\x00\x07\x08END")                                               # NUL, BEL, BS
#: What must be on the screen where the hostile text is shown (its visible characters).
SHOWN = "link|RTLiso|"

#: The escapes Textual writes itself (measured: tmux pipe-pane of this app, Textual 8.2).
TEXTUAL_ESCAPE_RE = re.compile(
    r"\x1b\[[0-9;:]*m"          # SGR
    r"|\x1b\[\d+;\d+H"          # cursor position
    r"|\x1b\[\?[\d;]+[hl]"      # private modes (alternate screen, mouse, bracketed paste, cursor)
    r"|\x1b\[\?\d+\$p"          # DECRQM (asks whether a mode is supported)
    r"|\x1b\[[<=>]\d*u"         # kitty keyboard protocol
    r"|\x1b\]22;[a-z-]*\x07"    # OSC 22: the mouse pointer shape
)
INVISIBLE_RE = re.compile("[\x00\x80-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


class Tmux:
    """A private tmux server (its own socket) running one session."""

    def __init__(self, sock: Path) -> None:
        self.sock = sock

    def __call__(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", str(self.sock), *args], capture_output=True, text=True, check=False,
                              timeout=10)
        if done.returncode != 0 and args[0] != "list-buffers":
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "t")

    def wait_for(self, *needles: str, deadline_s: float = 15.0) -> str:
        """The screen once it shows every one of ``needles``; fail with the last screen after ``deadline_s``."""
        seen = [""]

        def shown() -> str:
            seen[0] = self.screen()
            return seen[0] if all(n in seen[0] for n in needles) else ""

        try:
            return until_sync(f"{needles} on the screen", shown, deadline_s)  # type: ignore[return-value]
        except AssertionError as exc:
            raise AssertionError(f"{exc}; tmux paste buffers: {self('list-buffers')!r}; the screen was:\n"
                                 f"{seen[0]}") from None

    def alive(self) -> bool:
        """Whether the session still runs (it ends with the app: the pane ``exec``s it)."""
        return subprocess.run(["tmux", "-S", str(self.sock), "has-session", "-t", "t"], capture_output=True,
                              check=False, timeout=10).returncode == 0

    def keys(self, *keys: str) -> None:
        for key in keys:
            self("send-keys", "-t", "t", key)


@pytest.fixture
def second_host(tmp_path: Path) -> Iterator[TestHost]:
    with running_testhost(tmp_path / "host-b", "the second test host", hostname="gpu-node-2") as host:
        yield host


def _make_hostile(a: TestHost, b: TestHost) -> None:
    """Host text with every kind of control sequence, in every place a host writes text."""
    a.append_log_lines([f"LOGMARK {HOSTILE}"])
    show = (a.state / "systemctl-show.txt").read_text()
    _replace(a.state / "systemctl-show.txt", re.sub(r"(?m)^Result=.*$", lambda _: f"Result=UNITMARK{HOSTILE}",
                                                    show).encode())
    rows = (a.state / "query-gpu.csv").read_text().splitlines()
    a.set_gpus([re.sub(r"NVIDIA [^,]+", lambda _: f"NVIDIA GPUMARK{HOSTILE}", rows[0])] + rows[1:])
    a.set_compute_apps([f"51873, PROCMARK{HOSTILE}, 73072, GPU-00000000-0000-0000-0000-0000000000a0"])
    # The action's command fails and says why in hostile text (systemctl restart's own stderr).
    (a.state / "restart.out").write_bytes(f"Job failed.\nACTMARK {HOSTILE}\n".encode())
    orig = a.shims / "systemctl"
    orig.rename(a.shims / "systemctl.orig")
    _write_script(orig, '#!/bin/sh\nfor x in "$@"; do [ "$x" = restart ] && { cat "$UPWATCH_TEST_STATE/restart.out" >&2; '
                        'exit 1; }; done\nexec /bin/sh "$(dirname "$0")/systemctl.orig" "$@"\n')
    # The second host's nvidia-smi fails with a hostile error message.
    _replace(b.state / "nvidia-smi.error", f"ERRMARK {HOSTILE}\n".encode())
    _replace(b.state / "nvidia-smi.rc", b"42\n")


def _home(tmp_path: Path, hosts: dict[str, TestHost]) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("".join(
        f"Host {name}\n  HostName 127.0.0.1\n  Port {h.sshd.port}\n  User root\n  IdentityFile {h.sshd.client_key}\n"
        f"  UserKnownHostsFile {h.sshd.known_hosts}\n" for name, h in hosts.items()))
    (tmp_path / "hosts.toml").write_text("[settings]\ngpu_interval_s = 1\nunit_interval_s = 1\n" + "".join(
        f'[[host]]\nname = "{name}"\nunit = "sglang.service"\nhealth_url = "http://127.0.0.1:{h.health.port}/health"\n'
        for name, h in hosts.items() if h.health is not None))
    return home


def test_hostile_host_text_reaches_the_terminal_as_plain_characters_only(
        testhost: TestHost, second_host: TestHost, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing: apt-get install -y tmux", pytrace=False)
    _make_hostile(testhost, second_host)
    home = _home(tmp_path, {"gpu-a": testhost, "gpu-b": second_host})
    app = " ".join(shlex.quote(x) for x in (
        "env", "-u", "SSH_AUTH_SOCK", "-u", "UPWATCH_CONFIG", "-u", "COLUMNS", "-u", "LINES", f"HOME={home}", f"UPWATCH_DATA_DIR={tmp_path / 'data'}",
        sys.executable, "-m", "tui", "--config", str(tmp_path / "hosts.toml")))
    tmux = Tmux(tmp_path / "tmux.sock")
    pane_bytes = tmp_path / "pane.bytes"
    recorded = tmp_path / "pane.done"
    # The app waits for a line on its terminal, so that recording starts before its first byte.
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50", "-c", str(ROOT),
         f"read go; exec {app}")
    try:
        tmux("set-option", "-g", "set-clipboard", "on")  # an OSC 52 that gets through makes a buffer
        # (The recorder says when it has written its last byte: it outlives the tmux server by the
        # bytes still in its pipe, which a read right after kill-server missed now and then.)
        tmux("pipe-pane", "-O", "-t", "t",
             f"cat > {shlex.quote(str(pane_bytes))}; touch {shlex.quote(str(recorded))}")
        tmux.keys("go", "Enter")

        tmux.wait_for("LOGMARK " + SHOWN, "ERRMARK " + SHOWN)           # log line, error message
        tmux.keys("Tab", "r")                                            # restart the focused card's host
        if "on gpu-b?" in tmux.wait_for("restart sglang.service on gpu-"):  # cards are ordered by state
            tmux.keys("Escape")
            until_sync("the dialog closed", lambda: "restart sglang.service on" not in tmux.screen())
            tmux.keys("Tab", "r")
            tmux.wait_for("restart sglang.service on gpu-a?")
        tmux.keys("Tab", "Enter")                                        # Confirm
        toast = tmux.wait_for("ACTMARK")                                  # the action-result toast ...
        assert any("\u258c" in ln and SHOWN in ln for ln in toast.splitlines()), toast  # ... wraps in its box
        tmux.keys("Enter")                                               # its detail screen
        tmux.wait_for("UNITMARK" + SHOWN, "GPUMARK" + SHOWN)             # unit property, GPU name
        tmux.keys("R")                                                   # safe restart
        tmux.wait_for("safe restart of sglang.service on gpu-a?")
        tmux.keys("Tab", "Enter")
        tmux.wait_for("PROCMARK" + SHOWN)                                # the GPU-release wait screen
        cells = tmux("capture-pane", "-e", "-p", "-t", "t")
        buffers = tmux("list-buffers")
        # The app quits by itself, so that its last write is whole: a kill-server while it was drawing
        # cut a colour escape in two at the recording's end (a clean-clone CI run: '\x1b[38;5;214;48;5').
        tmux.keys("C-c")
        until_sync("the app quit and its pane closed", lambda: not tmux.alive())
    finally:
        subprocess.run(["tmux", "-S", str(tmp_path / "tmux.sock"), "kill-server"], capture_output=True, timeout=10,
                       check=False)

    assert buffers == "", f"tmux paste buffers were written: {buffers!r}"
    assert "PWNED" not in buffers
    assert set(re.findall(r"\x1b[^\[]", cells)) == set(), "capture-pane holds an escape other than CSI"
    assert all(m.endswith("m") for m in re.findall(r"\x1b\[[0-?]*[ -/]*[@-~]", cells))  # colours only
    until_sync("the pane's recorder wrote its last byte", recorded.exists)
    raw = pane_bytes.read_bytes()
    assert len(raw) > 10_000, "nothing recorded from the app's terminal"
    text = raw.decode("utf-8", "replace")
    assert "\ufffd" not in text, "the app wrote bytes that are not UTF-8"
    strays = [text[i:i + 24] for i in (m.start() for m in re.finditer("\x1b", text))
              if not TEXTUAL_ESCAPE_RE.match(text, i)]
    assert strays == [], f"escapes upwatch did not write itself: {strays[:5]!r}"
    assert INVISIBLE_RE.findall(text) == []
    assert {c for c in text if c < " " and c not in "\r\n\x1b"} <= {"\x07"}  # BEL only in OSC 22
    assert text.count("\x07") == len(re.findall(r"\x1b\]22;[a-z-]*\x07", text))
    assert "UFdORUQ" not in text and "evil.example" not in text
    assert os.path.getsize(pane_bytes) == len(raw)


# --- names from the configuration, and text the app itself is handed -----------------------------------

def test_a_config_name_with_bidi_or_zero_width_characters_is_refused_and_said_cleanly(tmp_path: Path) -> None:
    from tui.config import ConfigError, load_config

    for bad, code in (("gpu\u202e-a", "U+202E"), ("gpu\u200b-a", "U+200B"), ("gpu\u2066-a", "U+2066"),
                      ("gpu\x1b]52;c;eA==\x07", "U+001B")):
        path = tmp_path / "hosts.toml"
        path.write_text(f'[[host]]\nname = {json.dumps(bad)}\nunit = "sglang.service"\n'
                        'ssh = "root@10.0.0.1"\n')
        with pytest.raises(ConfigError) as exc:
            load_config(str(path), [], {}, default_path=tmp_path / "none.toml")
        message = str(exc.value)
        assert code in message and "invisible" in message, message
        assert INVISIBLE_RE.search(message) is None and "\x1b" not in message


async def test_every_toast_and_action_modal_shows_host_text_clean(tmp_path: Path) -> None:
    """Toasts (``UpwatchApp.notify``) and the action modals clean what they are handed, whoever
    hands it: a host name that did not come through the config checks, a command's output."""
    from probes.clock import WallClock
    from probes.transport.local import LocalRunner
    from probes.spec import HostSpec
    from tui.actions import ConfirmScreen, SafeRestartScreen
    from tui.app import make_app
    from tui.config import Config

    name = "gpu\u202e-a\x1b]52;c;UFdORUQ=\x07"
    spec = HostSpec(name, "sglang.service", ssh="root@10.0.0.1")
    app = make_app(Config(hosts=(spec,)), lambda s: LocalRunner(), WallClock(), start_watchers=False,
                   audit=None, history=None)
    async with app.run_test(size=(160, 48)) as pilot:
        app.notify(f"{name}: restart: exit 1: {HOSTILE}", title=f"{name}\x9b2J", markup=True)
        await pilot.pause()
        [note] = list(app._notifications)
        assert note.message == "gpu-a: restart: exit 1: link|RTLiso|END" and note.title == "gpu-a"
        modal = ConfirmScreen(f"kill on {name}?", [f"51873  PROC{HOSTILE}  10 MiB"])
        assert modal.title_text == "kill on gpu-a?" and modal.command_text == "51873  PROClink|RTLiso|END  10 MiB"
        wait = SafeRestartScreen(name, "sglang.service")
        wait.step(f"stopping on {name}")
        assert wait.steps == ["stopping on gpu-a"]
