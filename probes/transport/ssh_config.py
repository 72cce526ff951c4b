"""Where an SSH connection goes and how, resolved before it is made: :func:`~probes.transport.target.parse_target`
reads ``[user@]host[:port]``, :class:`SshSettings` holds what the operator gave, and :func:`resolve_plan`
reads the SSH config (asyncssh's parser) and the known_hosts files into a :class:`Plan` for one
:class:`Hop` (the target, or a ProxyJump host on the way): its algorithms and trust by OpenSSH
9.2's rules (:mod:`probes.transport.openssh`), its login keys and user, and the jump hosts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from probes.transport import openssh


@dataclass(frozen=True)
class Plan:
    """One connection attempt, resolved before it is made: the target and its known_hosts, the
    algorithms (:mod:`probes.transport.openssh`), the login keys tried, the user, and the ProxyJump hosts
    to go through (``[user@]host[:port]`` each, in order)."""

    target: openssh.Target
    known: openssh.KnownHosts
    host_key_algs: list[str]
    algs: dict[str, list[str]]
    identities: tuple[str, ...]
    explicit_keys: bool
    user: str
    jumps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hop:
    """A host one connection goes to: the target, or a ProxyJump host on the way.

    Attributes:
        name: the name or alias to resolve by the config; port, user: given ones, or None.
        label: how messages name it (the target as the operator named it, plus the jump host).
        proxied: reached through another hop (OpenSSH then skips the CheckHostIP check).
    """

    name: str
    port: int | None
    user: str | None
    label: str
    proxied: bool


@dataclass(frozen=True)
class SshSettings:
    """What the operator gave for one host (see :class:`~probes.transport.ssh.SshRunner`'s
    arguments): the target, parsed, and the files and time limits every connection to it uses.

    Attributes:
        label: the target as the operator named it (starts every message).
        user, hostname, port: :func:`~probes.transport.target.parse_target` of it (user and port None when not given).
        known_hosts, client_keys, config: as given to the runner (None: the config's or OpenSSH's
            defaults; ``config=[]`` reads no config).
        connect_timeout: seconds for TCP connect + SSH handshake + login.
        keepalive_interval: seconds of silence before a keepalive; keepalive_count_max: unanswered
            keepalives before the connection counts as dropped.
    """

    label: str
    user: str | None
    hostname: str
    port: int | None
    known_hosts: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None
    client_keys: Sequence[str | os.PathLike[str]] | None
    config: Sequence[str | os.PathLike[str]] | None
    connect_timeout: float
    keepalive_interval: float
    keepalive_count_max: int

    def target_hop(self, *, proxied: bool) -> Hop:
        """The target itself as a :class:`Hop` (``proxied``: reached through jump hosts)."""
        return Hop(self.hostname, self.port, self.user, self.label, proxied=proxied)


def connect_args(settings: SshSettings, hop: Hop | None = None) -> dict[str, Any]:
    """asyncssh's ``port``, ``username`` and ``config`` keywords for ``hop`` (default: the target),
    only those that were given."""
    port, user = (settings.port, settings.user) if hop is None else (hop.port, hop.user)
    kw: dict[str, Any] = {}
    if port is not None:
        kw["port"] = port
    if user is not None:
        kw["username"] = user
    if settings.config is not None:
        kw["config"] = [os.fspath(p) for p in settings.config]
    return kw


def resolve_plan(settings: SshSettings, hop: Hop) -> Plan:
    """Resolve ``hop`` by the SSH config (asyncssh's parser) and read its known_hosts files.
    Blocking (file reads): run it in a thread.

    Raises:
        ValueError: a config value asyncssh or :func:`probes.transport.openssh.choose_algs` refuses.
    """
    kw = connect_args(settings, hop)
    if "config" not in kw:
        # connect() reads ~/.ssh/config by default; say so here too: the same files must
        # decide both.
        default = os.path.expanduser("~/.ssh/config")
        kw["config"] = [default] if os.access(default, os.R_OK) else []
    opts = asyncssh.SSHClientConnectionOptions(host=hop.name, known_hosts=None,
                                               client_keys=None, **kw)
    config = opts.config
    host, port = str(opts.host), int(opts.port)
    jumps = opts.tunnel if isinstance(opts.tunnel, str) and opts.tunnel.lower() != "none" else ""
    target = openssh.Target(host.lower(), port, openssh.lookup_name(host, port, opts.host_key_alias),
                            bool(config.get("CheckHostIP", False)),
                            hop.proxied or bool(jumps or opts.proxy_command))
    if settings.known_hosts is not None:
        kh = settings.known_hosts
        files = [os.fspath(kh)] if isinstance(kh, (str, os.PathLike)) else [os.fspath(p) for p in kh]
    else:
        user = config.get("UserKnownHostsFile", None)
        user = openssh.DEFAULT_USER_KNOWN_HOSTS if user is None else user
        glob = config.get("GlobalKnownHostsFile", None)
        glob = openssh.DEFAULT_GLOBAL_KNOWN_HOSTS if glob is None else glob
        files = [str(f) for f in (*user, *glob)]  # type: ignore[misc]  # asyncssh types config values as object; these are lists of str
    known = openssh.KnownHosts(files)
    mine = known.match(target.lookup)
    algs = openssh.host_key_algs(config.get("HostKeyAlgorithms", None), mine.keys, bool(mine.cas))
    if settings.client_keys is not None:
        identities, explicit = [os.fspath(p) for p in settings.client_keys], True
    else:
        named = config.get("IdentityFile", None)
        identities = [str(f) for f in named] if named else list(openssh.DEFAULT_IDENTITIES)  # type: ignore[attr-defined]  # as above: IdentityFile is a list of str
        explicit = bool(named)
    # A hop's own ProxyJump is not followed (the chain is the target's); the target's is.
    hops = tuple(j.strip() for j in jumps.split(",") if j.strip()) if not hop.proxied else ()
    return Plan(target, known, algs, openssh.other_algs(config), tuple(identities), explicit,
                str(opts.username), hops)
