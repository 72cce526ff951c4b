"""A real OpenSSH server on 127.0.0.1 for the tests (shared/TESTBED.md section 1).

:func:`start_sshd` makes a throwaway host key and client key, writes an ``sshd_config`` that accepts
only that client key, checks it with ``sshd -t``, starts ``/usr/sbin/sshd -D -e`` on a free port and
waits (with a deadline, by polling the socket) until the port accepts; optionally on another address
and inside a network namespace (tests/netns.py). ``SetEnv PATH=<shims>:...``
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
    ``dir/ssh_config`` (``Host testhost`` → this server, with key, known_hosts and ``BatchMode``, so
    ``ssh -F dir/ssh_config testhost CMD`` works), ``dir/sshd.log``; ``shims`` is first on PATH.
    ``listen``:``port`` is where it accepts."""

    dir: Path
    port: int
    proc: subprocess.Popen[bytes]
    shims: Path
    listen: str = "127.0.0.1"

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
        return [pid for pid, name in descendants(self.proc.pid) if name == "sshd"]

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


def descendants(root: int) -> list[tuple[int, str]]:
    """Every process below ``root`` (children, grandchildren ...) as ``(pid, comm)``, read from /proc.

    ``comm`` is the kernel's short name (at most 15 characters, e.g. ``sshd``, ``journalctl``).
    Processes that exit while /proc is read are left out.
    """
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
    found: list[tuple[int, str]] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append((pid, comm.get(pid, "?")))
        todo.extend(children.get(pid, []))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path, comment: str, kind: str = "ed25519") -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path), "-C", comment],
                   check=True, capture_output=True)


#: The PATH sshd gives root's sessions without PAM (TESTBED section 5); the shims go in front.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def write_sshd_files(base: Path, *, listen: str, port: int, user: str, pid_file: Path | str,
                     env: dict[str, str], host_key_type: str = "ed25519", extra_config: str = "") -> Path:
    """Write a test sshd's files into ``base`` (which exists): a throwaway host key
    (``host_<type>``) and client key (``client_ed25519``), ``authorized_keys`` (only that client
    key), ``sshd_config`` (key-only login, no PAM, ``SetEnv`` of ``env``), ``known_hosts`` (the
    host key for ``listen``, ``[listen]:port`` unless port 22) and ``ssh_config`` (``Host testhost``
    for the OpenSSH client). Used by :func:`start_sshd` and tests/systemd_host.py.

    Args:
        listen, port: where the sshd listens. user: the ``User`` of ``ssh_config``.
        pid_file: sshd's ``PidFile``. env: ``SetEnv`` variables for every session (no spaces).
        host_key_type: ``ssh-keygen -t`` of the host key. extra_config: more ``sshd_config`` lines.

    Returns:
        The ``sshd_config`` path.

    Raises:
        SshdError: a name or value of ``env`` contains a space.
        subprocess.CalledProcessError: ssh-keygen failed.
    """
    if any(any(c.isspace() for c in f"{k}{v}") for k, v in env.items()):
        raise SshdError(f"SetEnv names and values must not contain spaces: {env!r}")
    host_key = base / f"host_{host_key_type}"
    _keygen(host_key, "upwatch-test-host", host_key_type)
    _keygen(base / "client_ed25519", "upwatch-test-client")
    auth = base / "authorized_keys"
    auth.write_bytes((base / "client_ed25519.pub").read_bytes())
    auth.chmod(0o600)
    cfg = base / "sshd_config"
    setenv = " ".join(f"{k}={v}" for k, v in env.items())
    cfg.write_text(f"""ListenAddress {listen}
Port {port}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {auth}
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
LogLevel VERBOSE
SetEnv {setenv}
{extra_config}""")
    host_pub = (base / f"host_{host_key_type}.pub").read_text().split()
    entry = listen if port == 22 else f"[{listen}]:{port}"
    (base / "known_hosts").write_text(f"{entry} {host_pub[0]} {host_pub[1]}\n")
    (base / "ssh_config").write_text(f"""Host testhost
    Hostname {listen}
    Port {port}
    User {user}
    IdentityFile {base}/client_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile {base}/known_hosts
    StrictHostKeyChecking yes
    BatchMode yes
""")
    return cfg


def check_sshd_config(cfg: Path, error: type[SshdError] = SshdError) -> None:
    """``sshd -t -f cfg``; raises ``error`` with sshd's words when it rejects the config."""
    check = subprocess.run([SSHD, "-t", "-f", str(cfg)], capture_output=True, text=True)
    if check.returncode != 0:
        raise error(f"sshd -t rejected the test config: {check.stderr.strip() or check.stdout.strip()}")


def start_sshd(base: Path, *, deadline_s: float = 10.0, listen: str = "127.0.0.1",
               port: int | None = None, env: dict[str, str] | None = None,
               netns: str | None = None, hostname: str | None = None,
               host_key_type: str = "ed25519", extra_config: str = "") -> Sshd:
    """Start a real sshd with its files under ``base``.

    Args:
        base: folder for keys, config, log and ``shims/`` (created).
        deadline_s: seconds to wait for the port to accept.
        listen: the address sshd listens on (IPv4).
        port: the port; None picks a free one on 127.0.0.1 (only sensible with the default
            ``listen``).
        env: extra ``SetEnv`` variables for every session (values without spaces); PATH is always
            ``<shims>:`` + :data:`SYSTEM_PATH`.
        netns: run sshd inside this network namespace (``ip netns exec``); it must exist.
        hostname: with ``netns``, give sshd its own UTS namespace with this host name.
        host_key_type: ``ssh-keygen -t`` of the host key (file ``host_<type>``; known_hosts holds it).
        extra_config: more ``sshd_config`` lines (e.g. ``HostKeyAlgorithms ssh-rsa``).

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
    if port is None:
        port = _free_port()
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True,
                                                     text=True).stdout.strip()
    cfg = write_sshd_files(base, listen=listen, port=port, user=user, pid_file=base / "sshd.pid",
                           env={"PATH": f"{shims}:{SYSTEM_PATH}", **(env or {})},
                           host_key_type=host_key_type, extra_config=extra_config)
    try:
        os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir; sshd refuses without it
    except OSError as exc:
        raise SshdError(f"cannot create /run/sshd ({exc.strerror}); the sshd tests need root") from None
    check_sshd_config(cfg)
    log = open(base / "sshd.log", "wb")  # noqa: SIM115 - sshd writes it for its whole life
    argv = [SSHD, "-D", "-e", "-f", str(cfg)]
    if netns is not None and hostname is not None:  # unshare and sh exec: the PID stays sshd's
        argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv]
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, *argv]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    server = Sshd(base, port, proc, shims, listen)
    until = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise SshdError(f"sshd exited with {proc.returncode}: {server.log.strip()[-500:]}")
        try:
            with socket.create_connection((listen, port), timeout=0.5):
                return server
        except OSError:
            pass
        if time.monotonic() > until:
            server.stop()
            raise SshdError(f"sshd did not accept on {listen}:{port} within {deadline_s:g} s: "
                            f"{server.log.strip()[-500:]}")
        time.sleep(0.02)  # polling interval, not a wait for an outcome
