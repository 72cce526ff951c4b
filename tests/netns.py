"""Network namespaces as extra hosts (shared/TESTBED.md section 2).

:func:`start_netns_host` makes a namespace ``uw<pid%1000><letter>`` joined to this machine by a veth
pair (``<ns>-h`` here, ``<ns>-n`` inside; at most 15 characters), gives them ``10.200.N.1/24`` and
``10.200.N.2/24`` (N: the first /24 from a pid-derived start that no interface here uses yet),
and starts a :class:`~testhost.TestHost` whose sshd listens on ``10.200.N.2:22`` inside the
namespace with its own host name (UTS namespace). The shims, state folder and journal work as on
the loopback test host; only the HTTP health server is absent (it would live in our namespace,
not the host's).

:meth:`NetnsHost.link_down` / :meth:`NetnsHost.link_up` take the host-side veth down and up: the
host is then unreachable (no route) and back. :meth:`NetnsHost.stop` always kills the sshd by PID,
deletes the namespace and the veth. Setup first removes leftovers with the same names (a crashed
earlier run), killing the processes still in that namespace by PID (``ip netns pids``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sshd import SshdError
from testhost import TestHost, start_testhost


# --- namespace plumbing, shared with tests/systemd_host.py ---------------------------------------


def ip(*args: str, check: bool = True, error: type[Exception] = SshdError) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS``; with ``check``, a non-zero exit raises ``error`` with ip's stderr."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise error(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def namespace_name(prefix: str, index: int) -> str:
    """``<prefix><pid%1000><a+index>``: unique per test run, short enough for ``<name>-h`` (at most
    15 characters with a prefix of up to 6)."""
    return f"{prefix}{os.getpid() % 1000}{chr(ord('a') + index)}"


def free_subnet(net: str, start: int, error: type[Exception] = SshdError) -> int:
    """The first N from ``start`` (wrapping in 0..249) with no ``<net>.N.x`` address on this
    machine (``net``: e.g. ``10.200``); raises ``error`` when all are taken."""
    used = ip("-4", "-o", "addr", "show").stdout
    for i in range(250):
        n = (start + i) % 250
        if f" {net}.{n}." not in used:
            return n
    raise error(f"no free {net}.N.0/24 subnet")


def add_namespace(name: str, net: str, subnet: int, error: type[Exception] = SshdError) -> None:
    """Make network namespace ``name`` joined to this machine by a veth pair: ``<name>-h`` here
    with ``<net>.<subnet>.1/24``, ``<name>-n`` inside with ``.2/24``; both ends and the inside
    loopback up. On a failure, removes what it made and raises ``error`` (ip's words)."""
    try:
        ip("netns", "add", name, error=error)
        ip("link", "add", f"{name}-h", "type", "veth", "peer", "name", f"{name}-n", error=error)
        ip("link", "set", f"{name}-n", "netns", name, error=error)
        ip("addr", "add", f"{net}.{subnet}.1/24", "dev", f"{name}-h", error=error)
        ip("link", "set", f"{name}-h", "up", error=error)
        ip("-n", name, "addr", "add", f"{net}.{subnet}.2/24", "dev", f"{name}-n", error=error)
        ip("-n", name, "link", "set", f"{name}-n", "up", error=error)
        ip("-n", name, "link", "set", "lo", "up", error=error)
    except BaseException:
        remove_namespace(name)
        raise


def remove_namespace(name: str) -> None:
    """Remove namespace ``name`` and veth ``<name>-h``: kill what still runs inside (by PID,
    ``ip netns pids``). Never raises for what is already gone."""
    if ip("netns", "list", check=False).stdout.split().count(name):
        for pid in ip("netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        ip("netns", "del", name, check=False)
    ip("link", "del", f"{name}-h", check=False)  # gone with the namespace already, usually


# --- a test host in a namespace -------------------------------------------------------------------


@dataclass
class NetnsHost:
    """A test host inside its own network namespace.

    Attributes:
        name: the namespace (also the veth prefix).
        subnet: N of ``10.200.N.0/24``.
        host: the :class:`~testhost.TestHost` (its sshd listens on :attr:`address`, port 22).
    """

    name: str
    subnet: int
    host: TestHost

    @property
    def address(self) -> str:
        """The host's address inside the namespace: ``10.200.N.2``."""
        return f"10.200.{self.subnet}.2"

    @property
    def veth_host(self) -> str:
        """The veth end on this machine (``<name>-h``): :meth:`link_down` takes it down."""
        return f"{self.name}-h"

    @property
    def target(self) -> str:
        """``root@10.200.N.2`` (port 22) for :class:`~probes.transport.ssh.SshRunner` with ``config=[]``."""
        return f"root@{self.address}"

    def runner(self, **kw: object) -> object:
        """A new :class:`~probes.transport.ssh.SshRunner` on ``root@10.200.N.2`` with this host's keys."""
        from probes.transport.ssh import SshRunner

        return SshRunner(self.target, **{**self.host.runner_kwargs(), **kw})  # type: ignore[arg-type]

    def link_down(self) -> None:
        """``ip link set <name>-h down``: packets to the host go nowhere (no route)."""
        ip("link", "set", self.veth_host, "down")

    def link_up(self) -> None:
        """``ip link set <name>-h up`` (and the address's route comes back)."""
        ip("link", "set", self.veth_host, "up")

    def stop(self) -> None:
        """Kill the sshd, then delete the namespace and the veth pair. Never raises."""
        try:
            self.host.stop()
        finally:
            remove_namespace(self.name)


def start_netns_host(base: Path, index: int, *, hostname: str | None = None,
                     unit: str = "sglang.service") -> NetnsHost:
    """Make namespace ``uw<pid%1000><a+index>`` (:func:`namespace_name`) with a veth pair and a test host's sshd inside.

    Args:
        base: folder for the host's files. index: 0, 1 ... (the namespace's letter).
        hostname: the UTS host name inside; default ``gpu-node-<index+1>``.
        unit: the watched unit.

    Raises:
        SshdError: ``ip`` failed or the sshd did not start (the message says which).
    """
    name = namespace_name("uw", index)
    remove_namespace(name)  # leftovers of a crashed earlier run with the same name
    subnet = free_subnet("10.200", (os.getpid() * 2 + index * 7) % 250)
    add_namespace(name, "10.200", subnet)
    try:
        host = start_testhost(base, unit=unit, hostname=hostname or f"gpu-node-{index + 1}",
                              health=False, listen=f"10.200.{subnet}.2", port=22, netns=name)
    except BaseException:
        remove_namespace(name)
        raise
    return NetnsHost(name, subnet, host)
