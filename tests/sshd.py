"""A real OpenSSH server on 127.0.0.1 for the tests (shared/TESTBED.md section 1).

:func:`start_sshd` makes a throwaway host key and client key, writes an ``sshd_config`` that accepts
only that client key, checks it with ``sshd -t``, starts ``/usr/sbin/sshd -D -e`` on a free port and
waits (with a deadline, by polling the socket) until the port accepts. ``SetEnv PATH=<shims>:...``
puts the ``shims`` folder first on the remote PATH, so scripts there stand in for ``nvidia-smi``,
``systemctl`` and friends (TESTBED section 5). :meth:`Sshd.stop` ends the server by its PID.

Anything that keeps the server from starting raises :class:`SshdError` with the reason (the tests
fail with it; they never skip).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"  # sshd re-execs itself and insists on an absolute path


class SshdError(RuntimeError):
    """The test sshd could not be started; the message says why."""


@dataclass
class Sshd:
    """A running test sshd. Files: ``dir/host_ed25519``, ``dir/client_ed25519``, ``dir/known_hosts``,
    ``dir/ssh_config`` (``Host testhost`` → this server), ``dir/sshd.log``; ``shims`` is first on PATH."""

    dir: Path
    port: int
    proc: subprocess.Popen[bytes]
    shims: Path

    @property
    def client_key(self) -> Path:
        return self.dir / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def log(self) -> str:
        return (self.dir / "sshd.log").read_text(errors="replace")

    def session_pids(self) -> list[int]:
        """PIDs of the per-connection sshd processes (the ``[priv]`` monitor and its
        ``user@notty`` child): every ``sshd`` process below the listener."""
        children: dict[int, list[int]] = {}
        comm: dict[int, str] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
            comm[int(entry)] = name
        found: list[int] = []
        todo = list(children.get(self.proc.pid, []))
        while todo:
            pid = todo.pop()
            if comm.get(pid) == "sshd":
                found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def stop(self) -> None:
        """SIGTERM the listener by PID (then SIGKILL), and SIGKILL any session process left."""
        leftovers = self.session_pids()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path), "-C", comment],
                   check=True, capture_output=True)


def start_sshd(base: Path, *, deadline_s: float = 10.0) -> Sshd:
    """Start a real sshd on 127.0.0.1 with its files under ``base``.

    Raises:
        SshdError: sshd or ssh-keygen missing, a bad config, or the port never accepted.
    """
    if not os.path.exists(SSHD):
        raise SshdError(f"{SSHD} is missing: install the Debian package openssh-server "
                        "(.ci/run does: apt-get install openssh-server)")
    if shutil.which("ssh-keygen") is None:
        raise SshdError("ssh-keygen is missing: install openssh-client")
    base.mkdir(parents=True, exist_ok=True)
    shims = base / "shims"
    shims.mkdir(exist_ok=True)
    _keygen(base / "host_ed25519", "upwatch-test-host")
    _keygen(base / "client_ed25519", "upwatch-test-client")
    auth = base / "authorized_keys"
    auth.write_bytes((base / "client_ed25519.pub").read_bytes())
    auth.chmod(0o600)
    port = _free_port()
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True,
                                                     text=True).stdout.strip()
    cfg = base / "sshd_config"
    cfg.write_text(f"""ListenAddress 127.0.0.1
Port {port}
HostKey {base}/host_ed25519
PidFile {base}/sshd.pid
AuthorizedKeysFile {auth}
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
LogLevel VERBOSE
SetEnv PATH={shims}:/usr/bin:/bin
""")
    host_pub = (base / "host_ed25519.pub").read_text().split()
    (base / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (base / "ssh_config").write_text(f"""Host testhost
    Hostname 127.0.0.1
    Port {port}
    User {user}
""")
    try:
        os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir; sshd refuses without it
    except OSError as exc:
        raise SshdError(f"cannot create /run/sshd ({exc.strerror}); the sshd tests need root") from None
    check = subprocess.run([SSHD, "-t", "-f", str(cfg)], capture_output=True, text=True)
    if check.returncode != 0:
        raise SshdError(f"sshd -t rejected the test config: {check.stderr.strip() or check.stdout.strip()}")
    log = open(base / "sshd.log", "wb")  # noqa: SIM115 - sshd writes it for its whole life
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    server = Sshd(base, port, proc, shims)
    until = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise SshdError(f"sshd exited with {proc.returncode}: {server.log.strip()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            pass
        if time.monotonic() > until:
            server.stop()
            raise SshdError(f"sshd did not accept on 127.0.0.1:{port} within {deadline_s:g} s: "
                            f"{server.log.strip()[-500:]}")
        time.sleep(0.02)  # polling interval, not a wait for an outcome
