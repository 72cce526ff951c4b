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


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SshdError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


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
        _ip("link", "set", self.veth_host, "down")

    def link_up(self) -> None:
        """``ip link set <name>-h up`` (and the address's route comes back)."""
        _ip("link", "set", self.veth_host, "up")

    def stop(self) -> None:
        """Kill the sshd, then delete the namespace and the veth pair. Never raises."""
        try:
            self.host.stop()
        finally:
            _remove(self.name)


def _remove(name: str) -> None:
    """Remove namespace ``name`` and veth ``<name>-h``: kill what still runs inside (by PID)."""
    if _ip("netns", "list", check=False).stdout.split().count(name):
        for pid in _ip("netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _ip("netns", "del", name, check=False)
    _ip("link", "del", f"{name}-h", check=False)  # gone with the namespace already, usually


def _free_subnet(start: int) -> int:
    """The first N from ``start`` (wrapping in 0..249) with no ``10.200.N.x`` address here."""
    used = _ip("-4", "-o", "addr", "show").stdout
    for i in range(250):
        n = (start + i) % 250
        if f" 10.200.{n}." not in used:
            return n
    raise SshdError("no free 10.200.N.0/24 subnet")


def netns_name(index: int) -> str:
    """``uw<pid%1000><a+index>``: unique per test run, short enough for ``<name>-h``."""
    return f"uw{os.getpid() % 1000}{chr(ord('a') + index)}"


def start_netns_host(base: Path, index: int, *, hostname: str | None = None,
                     unit: str = "sglang.service") -> NetnsHost:
    """Make namespace :func:`netns_name` (``index``) with a veth pair and a test host's sshd inside.

    Args:
        base: folder for the host's files. index: 0, 1 ... (the namespace's letter).
        hostname: the UTS host name inside; default ``gpu-node-<index+1>``.
        unit: the watched unit.

    Raises:
        SshdError: ``ip`` failed or the sshd did not start (the message says which).
    """
    name = netns_name(index)
    _remove(name)
    subnet = _free_subnet((os.getpid() * 2 + index * 7) % 250)
    host_if, ns_if = f"{name}-h", f"{name}-n"
    try:
        _ip("netns", "add", name)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", name)
        _ip("addr", "add", f"10.200.{subnet}.1/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", f"10.200.{subnet}.2/24", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        host = start_testhost(base, unit=unit, hostname=hostname or f"gpu-node-{index + 1}",
                              health=False, listen=f"10.200.{subnet}.2", port=22, netns=name)
    except BaseException:
        _remove(name)
        raise
    return NetnsHost(name, subnet, host)
