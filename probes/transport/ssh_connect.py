"""Opening an SSH connection by OpenSSH's rules (:mod:`probes.transport.openssh`), not asyncssh's
looser defaults: :func:`connect` goes through the config's ``ProxyJump`` hosts, each hop opened
here by the same rules (asyncssh would open them with its own), checks host keys strictly against
the known_hosts files, and turns every failure into a :class:`~probes.transport.runner.ProbeError`
whose message says what is wrong and how to fix it (an unknown or changed host key with the key
the server presented, no algorithm in common, a login key that cannot be used).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncssh

from probes.transport import openssh
from probes.transport.runner import ProbeError
from probes.transport.ssh_config import Hop, Plan, SshSettings, connect_args, resolve_plan
from probes.transport.target import parse_target
from probes.transport.ssh_errors import translate


async def connect(settings: SshSettings) -> asyncssh.SSHClientConnection:
    """Open the connection to ``settings``' target, through the config's ``ProxyJump`` hosts when
    it names any (closing the last hop closes the ones before it).

    Raises:
        ProbeError: every failure, translated (``host_key``, ``auth``, ``unreachable``,
            ``timeout``, ``closed``); a hop's message names the jump host.
    """
    target = settings.target_hop(proxied=False)
    plan = await _plan_for(settings, target)
    via: asyncssh.SSHClientConnection | None = None
    try:
        for spec in plan.jumps:
            try:
                user, host, port = parse_target(spec)
            except ValueError as exc:
                raise ProbeError("unreachable", f"{settings.label}: cannot use ProxyJump {spec!r}: {exc}") from None
            hop = Hop(host, port, user, f"{settings.label} (jump host {spec})", proxied=via is not None)
            nxt = await _open(settings, hop, await _plan_for(settings, hop), via)
            if via is not None:
                nxt.set_tunnel(via)  # closing the last hop closes the ones before it
            via = nxt
        if via is not None:
            target = settings.target_hop(proxied=True)
            plan = await _plan_for(settings, target)
        conn = await _open(settings, target, plan, via)
    except BaseException:
        if via is not None:
            via.close()
        raise
    if via is not None:
        conn.set_tunnel(via)
    return conn


async def _plan_for(settings: SshSettings, hop: Hop) -> Plan:
    """:func:`~probes.transport.ssh_config.resolve_plan` in a thread.

    Raises:
        ProbeError: ``unreachable`` for a config value or file that cannot be used.
    """
    try:
        return await asyncio.to_thread(resolve_plan, settings, hop)
    except (ValueError, OSError, asyncssh.Error) as exc:  # a bad config value or file
        raise ProbeError("unreachable", f"{hop.label}: cannot use the SSH config: {exc}") from None


async def _open(settings: SshSettings, hop: Hop, plan: Plan,
                via: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
    """One SSH connection to ``hop`` (over ``via``, a jump host's connection, when given).

    Raises:
        ProbeError: every failure, translated.
    """
    seen: list[str] = []

    def known_hosts(_host: str, addr: str, _port: int | None) -> tuple[Any, ...]:
        seen.append(addr)
        got = openssh.trusted(plan.target, plan.known, addr)
        return list(got.keys), list(got.cas), list(got.revoked)

    kw = connect_args(settings, hop)
    if settings.client_keys is not None:
        kw["client_keys"] = [os.fspath(p) for p in settings.client_keys]
    try:
        return await asyncssh.connect(
            hop.name, connect_timeout=settings.connect_timeout,
            keepalive_interval=settings.keepalive_interval,
            keepalive_count_max=settings.keepalive_count_max, known_hosts=known_hosts,
            server_host_key_algs=plan.host_key_algs, tunnel=via, **plan.algs, **kw)
    except asyncssh.HostKeyNotVerifiable as exc:
        key = await _presented_key(settings, hop, plan, via)
        raise ProbeError("host_key", openssh.host_key_message(
            hop.label, plan.target, plan.known, key, seen[-1] if seen else "", exc.reason)) from None
    except asyncssh.KeyExchangeFailed as exc:
        raise ProbeError("host_key" if "host key" in exc.reason else "unreachable",
                         openssh.no_common_alg_message(hop.label, hop.name, exc.reason)) from None
    except (asyncssh.PermissionDenied, asyncssh.KeyImportError) as exc:
        raise ProbeError("auth", _auth_message(hop.label, plan, exc)) from None
    except (asyncssh.ConnectionLost, ConnectionResetError) as exc:
        # sshd hangs up when no algorithm is in common, often before asyncssh can say so.
        # Only a server that accepted the TCP connection (``seen``: asyncssh asked for the
        # known hosts) is asked again; no route is a ConnectionLost too, and stays quick.
        words = await _handshake_trouble(settings, hop, plan, via) if seen else None
        if words is not None:
            raise ProbeError("host_key", words) from None
        raise translate(exc, hop.label, connecting=True) from None
    except Exception as exc:
        raise translate(exc, hop.label, connecting=True) from None


async def _presented_key(settings: SshSettings, hop: Hop, plan: Plan,
                         via: asyncssh.SSHClientConnection | None) -> asyncssh.SSHKey | None:
    """The host key the server presents to the same offer (a second handshake, only after a
    refusal, for the message); None when it cannot be had."""
    kw = connect_args(settings, hop)
    kw.pop("username", None)
    try:
        return await asyncio.wait_for(asyncssh.get_server_host_key(
            hop.name, server_host_key_algs=plan.host_key_algs, tunnel=via,
            kex_algs=plan.algs["kex_algs"], **kw), settings.connect_timeout)
    except (asyncssh.Error, OSError, TimeoutError, ValueError):
        return None


async def _handshake_trouble(settings: SshSettings, hop: Hop, plan: Plan,
                             via: asyncssh.SSHClientConnection | None) -> str | None:
    """After the server hung up during a connect: whether it is the algorithms (one more
    handshake with ours, then with ``ssh-rsa`` only), and the words for it; None when the
    handshake works with ours, or not even with ``ssh-rsa`` (something else is wrong)."""
    kw = connect_args(settings, hop)
    kw.pop("username", None)

    async def works(host_key_algs: list[str]) -> bool:
        try:
            await asyncio.wait_for(asyncssh.get_server_host_key(
                hop.name, server_host_key_algs=host_key_algs, tunnel=via,
                kex_algs=plan.algs["kex_algs"], **kw), settings.connect_timeout)
        except (asyncssh.Error, OSError, TimeoutError, ValueError):
            return False
        return True
    if await works(plan.host_key_algs) or not await works(["ssh-rsa"]):
        return None
    return openssh.no_common_alg_message(
        hop.label, hop.name, "No matching host key algorithm found, sent "
        f"{','.join(plan.host_key_algs)} and received ssh-rsa")


def _auth_message(label: str, plan: Plan, exc: Exception) -> str:
    """Why login failed: each key that cannot be used and why, else the server's refusal."""
    problems = openssh.key_problems(plan.identities, explicit=plan.explicit_keys)
    agent = "" if os.environ.get("SSH_AUTH_SOCK") else " (no ssh-agent: SSH_AUTH_SOCK is not set)"
    if problems:
        return f"{label}: login as {plan.user} refused: " + "; ".join(problems) + agent
    reason = exc.reason if isinstance(exc, asyncssh.Error) else str(exc)
    return (f"{label}: {reason} (the server refused every key: check User ({plan.user}), "
            f"IdentityFile ({', '.join(plan.identities)}) or the agent{agent})")
