"""A host reached over SSH: :class:`SshRunner`, the :class:`~probes.transport.runner.Runner` for live hosts.

One asyncssh connection per host carries everything: short commands (``run``), long-lived streams
(``stream``: ``journalctl -f``, ``nvidia-smi -l``) and port forwards (``forward``). The connection is
opened on first use and opened again on the next use after it dropped. Every failure of asyncssh, of
the socket or of a time limit leaves this module as a :class:`~probes.transport.runner.ProbeError`.

What OpenSSH does that shapes this module (``shared/reference/FORMATS.md`` section 4, measured
against OpenSSH 9.2 in ``shared/TESTBED.md`` section 1):

* Each command is one *session* channel; sshd allows ``MaxSessions`` (default 10) at once per
  connection, and a slot stays taken while the remote process lives, even after the client closed
  the channel. A semaphore (``max_channels``) keeps us under that; a slot is given back only when the
  remote process has exited (or the connection is gone). Port forwards do not count.
* Closing a channel does **not** end the remote process. Two measures end it:

  1. a ``signal`` request (``TERM``, then ``KILL`` after ``grace_s``): OpenSSH >= 7.9 delivers it
     with ``killpg`` to the session's process group, so the command and its children die;
  2. for streams, a wrapper that ends the command when the channel's stdin closes, which also
     covers a dropped connection, where no signal can be sent: ``sh -c`` keeps the channel's stdin
     on fd 3 for a background ``cat``; when ``cat`` sees end-of-file (the client closed the channel,
     or sshd's session ended because the connection dropped) it sends ``TERM`` to the command,
     which was ``exec``-ed in the shell's place and so has the shell's PID (``$$``).

* Output is read as bytes (``encoding=None``): one invalid UTF-8 byte on a text channel makes
  asyncssh close the whole connection.
* Trust and algorithms follow OpenSSH 9.2, not asyncssh's looser defaults: :mod:`probes.transport.openssh`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncssh

from probes.transport import openssh
from probes.transport.runner import Completed, ProbeError, split_lines

if TYPE_CHECKING:  # httpx loads rich at import: never at module load in probes (tests/test_imports.py)
    import httpx

#: The wrapper around every remote command (see the module docstring). ``$@`` is the command; after
#: ``exec`` it has the shell's PID ``$$``, which sshd made a session and process-group leader, so
#: ``kill -TERM -$$`` ends the command, its children and the watcher itself. ``cat``'s output goes to
#: /dev/null so the channel still closes as soon as the command ends; the group's ID cannot be
#: reused while the watcher, a member, lives.
_WRAPPER = ('exec 3<&0 </dev/null; '
            '(cat <&3 >/dev/null 2>&1; kill -TERM -$$ 2>/dev/null || kill -TERM $$) >/dev/null 2>&1 & '
            'exec "$@" 3<&-')


def remote_command(argv: Sequence[str]) -> str:
    """The remote command line :class:`SshRunner` sends for ``argv``.

    Every argument is ``shlex.quote``-d; the command runs under :data:`_WRAPPER`, so it and its
    process group get ``TERM`` when the channel's stdin closes. Its own stdin is /dev/null.
    """
    return shlex.join(["sh", "-c", _WRAPPER, "sh", *argv])


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """Split ``[user@]host[:port]`` (IPv6 as ``[addr]:port``) into (user, host, port).

    A bare name may be a ``Host`` alias of the SSH config; user and port are None when not given, so
    the config (or asyncssh's defaults: the local user, port 22) decides.

    Raises:
        ValueError: empty host, a name longer than DNS allows (253 characters, 63 a label), or a
            port that is not a number in 1..65535.
    """
    user: str | None = None
    rest = target
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        user = user or None
    port: int | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep:
            raise ValueError(f"unclosed '[' in SSH target {target!r}")
        if tail:
            if not tail.startswith(":"):
                raise ValueError(f"unexpected text after ']' in SSH target {target!r}")
            port = _port(tail[1:], target)
    elif rest.count(":") == 1:
        host, tail = rest.split(":")
        port = _port(tail, target)
    else:
        host = rest  # a name, an IPv4 address, or a bare IPv6 address
    if not host:
        raise ValueError(f"no host in SSH target {target!r}")
    if ":" not in host and (len(host) > 253 or any(len(label) > 63 for label in host.split("."))):
        # RFC 1035 2.3.4: no name that long resolves (it failed later, as an IDNA codec error).
        raise ValueError(f"{host[:40]}... is not a host name: a name has at most 253 characters and each "
                         f"dot-separated part at most 63 (RFC 1035)")
    return user, host, port


def _port(text: str, target: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"bad port {text!r} in SSH target {target!r}")
    return int(text)


@dataclass(frozen=True)
class _Plan:
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
class _Hop:
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


def _auth_message(label: str, plan: _Plan, exc: Exception) -> str:
    """Why login failed: each key that cannot be used and why, else the server's refusal."""
    problems = openssh.key_problems(plan.identities, explicit=plan.explicit_keys)
    agent = "" if os.environ.get("SSH_AUTH_SOCK") else " (no ssh-agent: SSH_AUTH_SOCK is not set)"
    if problems:
        return f"{label}: login as {plan.user} refused: " + "; ".join(problems) + agent
    reason = exc.reason if isinstance(exc, asyncssh.Error) else str(exc)
    return (f"{label}: {reason} (the server refused every key: check User ({plan.user}), "
            f"IdentityFile ({', '.join(plan.identities)}) or the agent{agent})")


class SshRunner:
    """Runs commands on one host over one asyncssh connection (lazy; reconnects after a drop).

    Args:
        target: an SSH config ``Host`` alias, or ``[user@]host[:port]``.
        known_hosts: known_hosts file(s); None means the config's ``UserKnownHostsFile`` and
            ``GlobalKnownHostsFile`` (OpenSSH's defaults when unset). Host keys are checked by
            OpenSSH's rules (:mod:`probes.transport.openssh`: the name looked up, ``HostKeyAlias``,
            ``CheckHostIP``), always strictly: no key is ever added, checking cannot be turned off.
        client_keys: private key files; None means the config's ``IdentityFile``, else the default
            ``~/.ssh/id_*`` keys (and the agent).
        config: SSH client config file(s); None means ``~/.ssh/config`` (asyncssh reads it itself:
            ``Hostname``, ``Port``, ``User``, ``IdentityFile``, ``ProxyJump`` ...). ``[]`` reads none.
        connect_timeout: seconds for TCP connect + SSH handshake + login.
        keepalive_interval: seconds of silence from the server before a keepalive is sent.
        keepalive_count_max: unanswered keepalives before the connection counts as dropped (so a
            dead host is noticed after about ``interval * (count_max + 1)`` seconds).
        max_channels: session channels (``run`` + ``stream``) open at once; keep it under the
            server's ``MaxSessions`` (OpenSSH default 10). Further calls wait for a free slot.
        grace_s: seconds a process gets to exit after ``TERM`` before it gets ``KILL``.
        reconnect_s, reconnect_max_s: after a failed connect, the next one waits ``reconnect_s``
            seconds, doubling per failure up to ``reconnect_max_s`` (30 s); calls in between fail
            at once with the last error. :attr:`attempts` counts failed connects in a row.

    Algorithms are OpenSSH 9.2's defaults, edited by the config's options by OpenSSH's rules
    (:func:`probes.transport.openssh.choose_algs`): no ``ssh-rsa`` (SHA-1) unless the config asks for it.

    Every method raises :class:`~probes.transport.runner.ProbeError`: ``host_key`` (key unknown, changed,
    revoked, or no host key algorithm in common, e.g. a server signing only with SHA-1; the
    message says which and how to fix it), ``auth`` (login refused; a key that is protected by a
    passphrase, unreadable or DSA is named, with the fix), ``unreachable`` (DNS, refused, no
    route, a config upwatch cannot use), ``timeout`` (no answer in time), ``closed`` (the
    connection dropped), ``command`` (the server refused a channel).
    """

    def __init__(
        self,
        target: str,
        *,
        known_hosts: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        client_keys: Sequence[str | os.PathLike[str]] | None = None,
        config: Sequence[str | os.PathLike[str]] | None = None,
        connect_timeout: float = 10.0,
        keepalive_interval: float = 3.0,
        keepalive_count_max: int = 3,
        max_channels: int = 6,
        grace_s: float = 2.0,
        reconnect_s: float = 1.0,
        reconnect_max_s: float = 30.0,
    ) -> None:
        self.host = target
        self._user, self._hostname, self._port = parse_target(target)
        self._known_hosts = known_hosts
        self._client_keys = client_keys
        self._config = config
        self.connect_timeout = connect_timeout
        self.keepalive_interval = keepalive_interval
        self.keepalive_count_max = keepalive_count_max
        self.grace_s = grace_s
        self._slots = asyncio.Semaphore(max_channels)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connect_lock = asyncio.Lock()
        self._listeners: dict[int, asyncssh.SSHListener] = {}
        self._live: set[asyncssh.SSHClientProcess[Any]] = set()
        self._reapers: set[asyncio.Task[None]] = set()
        self._closed = False
        self.reconnect_s = reconnect_s
        self.reconnect_max_s = reconnect_max_s
        #: Failed connection attempts in a row (0 once connected). Shown as "attempt N".
        self.attempts = 0
        self._retry_at = 0.0
        self._last_error: ProbeError | None = None

    # --- the connection ----------------------------------------------------------------------------

    def _connect_args(self, hop: _Hop | None = None) -> dict[str, Any]:
        """asyncssh's ``port``, ``username`` and ``config`` for ``hop`` (default: the target)."""
        port, user = (self._port, self._user) if hop is None else (hop.port, hop.user)
        kw: dict[str, Any] = {}
        if port is not None:
            kw["port"] = port
        if user is not None:
            kw["username"] = user
        if self._config is not None:
            kw["config"] = [os.fspath(p) for p in self._config]
        return kw

    async def _connection(self) -> asyncssh.SSHClientConnection:
        """The open connection, connecting first if there is none or it dropped."""
        if self._closed:
            raise ProbeError("closed", f"{self.host}: runner is closed")
        async with self._connect_lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._forget_connection()
            if self._last_error is not None and time.monotonic() < self._retry_at:
                # Backing off: every probe asks, only one connect per interval goes out.
                raise ProbeError(self._last_error.kind, self._last_error.message)
            try:
                self._conn = await self._connect()
            except ProbeError as exc:
                raise self._failed(exc) from None
            self.attempts = 0
            self._last_error = None
            return self._conn

    async def _connect(self) -> asyncssh.SSHClientConnection:
        """Open the connection by OpenSSH's rules (:mod:`probes.transport.openssh`), through the config's
        ``ProxyJump`` hosts when it names any: each hop is opened here by the same rules (asyncssh
        would open them with its own, looser ones).

        Raises:
            ProbeError: every failure, translated; a hop's message names the jump host.
        """
        target = _Hop(self._hostname, self._port, self._user, self.host, proxied=False)
        plan = await self._plan_for(target)
        via: asyncssh.SSHClientConnection | None = None
        try:
            for spec in plan.jumps:
                try:
                    user, host, port = parse_target(spec)
                except ValueError as exc:
                    raise ProbeError("unreachable", f"{self.host}: cannot use ProxyJump {spec!r}: {exc}") from None
                hop = _Hop(host, port, user, f"{self.host} (jump host {spec})", proxied=via is not None)
                nxt = await self._open(hop, await self._plan_for(hop), via)
                if via is not None:
                    nxt.set_tunnel(via)  # closing the last hop closes the ones before it
                via = nxt
            if via is not None:
                target = _Hop(self._hostname, self._port, self._user, self.host, proxied=True)
                plan = await self._plan_for(target)
            conn = await self._open(target, plan, via)
        except BaseException:
            if via is not None:
                via.close()
            raise
        if via is not None:
            conn.set_tunnel(via)
        return conn

    async def _plan_for(self, hop: _Hop) -> _Plan:
        try:
            return await asyncio.to_thread(self._plan, hop)
        except (ValueError, OSError, asyncssh.Error) as exc:  # a bad config value or file
            raise ProbeError("unreachable", f"{hop.label}: cannot use the SSH config: {exc}") from None

    async def _open(self, hop: _Hop, plan: _Plan,
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

        kw = self._connect_args(hop)
        if self._client_keys is not None:
            kw["client_keys"] = [os.fspath(p) for p in self._client_keys]
        try:
            return await asyncssh.connect(
                hop.name, connect_timeout=self.connect_timeout,
                keepalive_interval=self.keepalive_interval,
                keepalive_count_max=self.keepalive_count_max, known_hosts=known_hosts,
                server_host_key_algs=plan.host_key_algs, tunnel=via, **plan.algs, **kw)
        except asyncssh.HostKeyNotVerifiable as exc:
            key = await self._presented_key(hop, plan, via)
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
            words = await self._handshake_trouble(hop, plan, via) if seen else None
            if words is not None:
                raise ProbeError("host_key", words) from None
            raise translate(exc, hop.label, connecting=True) from None
        except Exception as exc:
            raise translate(exc, hop.label, connecting=True) from None

    def _failed(self, error: ProbeError) -> ProbeError:
        """Count a failed connect and schedule the next one (exponential backoff, capped)."""
        self.attempts += 1
        delay = min(self.reconnect_s * 2 ** (self.attempts - 1), self.reconnect_max_s)
        self._retry_at = time.monotonic() + delay
        self._last_error = error
        return error

    def _plan(self, hop: _Hop) -> _Plan:
        """Resolve ``hop`` by the SSH config (asyncssh's parser) and read its known_hosts files.
        Blocking (file reads): run in a thread.

        Raises:
            ValueError: a config value asyncssh or :func:`probes.transport.openssh.choose_algs` refuses.
        """
        kw = self._connect_args(hop)
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
        if self._known_hosts is not None:
            kh = self._known_hosts
            files = [os.fspath(kh)] if isinstance(kh, (str, os.PathLike)) else [os.fspath(p) for p in kh]
        else:
            user = config.get("UserKnownHostsFile", None)
            user = openssh.DEFAULT_USER_KNOWN_HOSTS if user is None else user
            glob = config.get("GlobalKnownHostsFile", None)
            glob = openssh.DEFAULT_GLOBAL_KNOWN_HOSTS if glob is None else glob
            files = [str(f) for f in (*user, *glob)]  # type: ignore[misc]
        known = openssh.KnownHosts(files)
        mine = known.match(target.lookup)
        algs = openssh.host_key_algs(config.get("HostKeyAlgorithms", None), mine.keys, bool(mine.cas))
        if self._client_keys is not None:
            identities, explicit = [os.fspath(p) for p in self._client_keys], True
        else:
            named = config.get("IdentityFile", None)
            identities = [str(f) for f in named] if named else list(openssh.DEFAULT_IDENTITIES)  # type: ignore[attr-defined]
            explicit = bool(named)
        # A hop's own ProxyJump is not followed (the chain is the target's); the target's is.
        hops = tuple(j.strip() for j in jumps.split(",") if j.strip()) if not hop.proxied else ()
        return _Plan(target, known, algs, openssh.other_algs(config), tuple(identities), explicit,
                     str(opts.username), hops)

    async def _presented_key(self, hop: _Hop, plan: _Plan,
                             via: asyncssh.SSHClientConnection | None) -> asyncssh.SSHKey | None:
        """The host key the server presents to the same offer (a second handshake, only after a
        refusal, for the message); None when it cannot be had."""
        kw = self._connect_args(hop)
        kw.pop("username", None)
        try:
            return await asyncio.wait_for(asyncssh.get_server_host_key(
                hop.name, server_host_key_algs=plan.host_key_algs, tunnel=via,
                kex_algs=plan.algs["kex_algs"], **kw), self.connect_timeout)
        except (asyncssh.Error, OSError, TimeoutError, ValueError):
            return None

    async def _handshake_trouble(self, hop: _Hop, plan: _Plan,
                                 via: asyncssh.SSHClientConnection | None) -> str | None:
        """After the server hung up during a connect: whether it is the algorithms (one more
        handshake with ours, then with ``ssh-rsa`` only), and the words for it; None when the
        handshake works with ours, or not even with ``ssh-rsa`` (something else is wrong)."""
        kw = self._connect_args(hop)
        kw.pop("username", None)

        async def works(host_key_algs: list[str]) -> bool:
            try:
                await asyncio.wait_for(asyncssh.get_server_host_key(
                    hop.name, server_host_key_algs=host_key_algs, tunnel=via,
                    kex_algs=plan.algs["kex_algs"], **kw), self.connect_timeout)
            except (asyncssh.Error, OSError, TimeoutError, ValueError):
                return False
            return True
        if await works(plan.host_key_algs) or not await works(["ssh-rsa"]):
            return None
        return openssh.no_common_alg_message(
            hop.label, hop.name, "No matching host key algorithm found, sent "
            f"{','.join(plan.host_key_algs)} and received ssh-rsa")

    def connected(self) -> bool:
        """Whether the connection is open now (a frozen link counts as open until keepalives
        give up)."""
        return self._conn is not None and not self._conn.is_closed()

    def _forget_connection(self) -> None:
        """Drop what belonged to a connection that is gone (its listeners died with it)."""
        self._conn = None
        self._listeners.clear()

    # --- run -----------------------------------------------------------------------------------

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        """Run ``argv`` on the host (see :func:`remote_command`) and wait for it.

        Args:
            argv: the command and its arguments.
            timeout: seconds for everything: a free channel slot, connecting, the command itself. A
                command still running then gets ``TERM`` (then ``KILL``).

        Returns:
            The exit status (negative signal number when killed by a signal) and raw stdout/stderr.

        Raises:
            ProbeError: ``timeout``, ``closed`` (dropped while it ran), or a connect failure's kind.
        """
        proc: asyncssh.SSHClientProcess[bytes] | None = None
        holding = False
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire()
                holding = True
                conn = await self._connection()
                proc = await conn.create_process(remote_command(argv), encoding=None)
                self._live.add(proc)
                done = await proc.wait()
        except TimeoutError:
            raise ProbeError("timeout", f"{self.host}: {argv[0] if argv else 'command'} "
                                        f"took more than {timeout:g} s") from None
        except ProbeError:
            raise
        except Exception as exc:
            raise translate(exc, self.host) from None
        finally:
            if proc is not None:
                self._end(proc)
            elif holding:
                self._slots.release()
        if done.exit_status is None and done.exit_signal is None:
            raise ProbeError("closed", f"{self.host}: connection closed while {argv[0]} ran")
        out = done.stdout if isinstance(done.stdout, bytes) else b""
        err = done.stderr if isinstance(done.stderr, bytes) else b""
        return Completed(tuple(argv), done.returncode if done.returncode is not None else -1, out, err)

    # --- stream --------------------------------------------------------------------------------

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Start ``argv`` on the host and yield its stdout line by line, as the lines come.

        Lines are bytes with the ``\\n`` removed (invalid UTF-8 stays as it is), each whole up to
        :data:`~probes.data.cutline.LINE_CAP` bytes, a :class:`~probes.data.cutline.CutLine` past it
        (:func:`~probes.transport.runner.split_lines`); stderr is discarded. The iterator ends when the
        command ends. When it is closed or cancelled early, when the runner closes, or when the
        connection drops, the remote process is ended (see the module docstring). Holds one
        channel slot until the remote process has exited.

        Raises:
            ProbeError: ``closed`` when the connection drops mid-stream, or a connect failure's kind.
        """
        await self._slots.acquire()
        proc: asyncssh.SSHClientProcess[bytes] | None = None
        try:
            conn = await self._connection()
            try:
                proc = await conn.create_process(remote_command(argv), encoding=None,
                                                 stderr=asyncssh.DEVNULL)
            except Exception as exc:
                raise translate(exc, self.host) from None
            self._live.add(proc)
            stdout = proc.stdout

            async def read(n: int) -> bytes:
                try:
                    return await stdout.read(n)
                except Exception as exc:
                    raise translate(exc, self.host) from None

            async with contextlib.aclosing(split_lines(read)) as lines:
                async for line in lines:
                    yield line
            if self._closed:
                raise ProbeError("closed", f"{self.host}: runner closed")
            if conn.is_closed():
                # The connection dropped: the channel ended without the command ending.
                raise ProbeError("closed", f"{self.host}: connection lost while {argv[0]} ran")
        finally:
            if proc is not None:
                self._end(proc)
            else:
                self._slots.release()

    # --- ending remote processes ------------------------------------------------------------------

    def _end(self, proc: asyncssh.SSHClientProcess[Any]) -> None:
        """End ``proc`` remotely (TERM now, KILL after ``grace_s``) and free its slot when it is gone.

        Synchronous on purpose: it runs in ``finally`` blocks of cancelled tasks and closed
        generators; the waiting happens in a task that :meth:`close` awaits.
        """
        if proc not in self._live:
            return  # already being ended (close() and the stream's own finally both get here)
        self._live.discard(proc)
        running = proc.exit_status is None and proc.exit_signal is None and not proc.is_closing()
        if running:
            with contextlib.suppress(Exception):
                proc.send_signal("TERM")
            with contextlib.suppress(Exception):
                proc.stdin.write_eof()  # the stream wrapper's cat sees EOF
        task = asyncio.get_running_loop().create_task(self._reap(proc, running))
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)

    async def _reap(self, proc: asyncssh.SSHClientProcess[Any], running: bool) -> None:
        try:
            if running:
                try:
                    await proc.wait(timeout=self.grace_s)  # drains output so sshd can close
                except asyncssh.TimeoutError:
                    with contextlib.suppress(Exception):
                        proc.send_signal("KILL")
                    with contextlib.suppress(Exception):
                        await proc.wait(timeout=self.grace_s)
                except Exception:
                    pass  # connection gone: the wrapper ends streams; nothing more to do here
            proc.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait_closed(), self.grace_s)
        finally:
            self._slots.release()

    # --- forward -------------------------------------------------------------------------------

    async def forward(self, remote_port: int) -> int:
        """Listen on ``127.0.0.1:<free port>`` and tunnel each connection to the host's
        ``127.0.0.1:remote_port``. One listener per remote port, reused while the connection lives.

        Nothing listening remotely shows up per connection, not here: the local socket is closed
        before any HTTP answer (httpx ``RemoteProtocolError``/``ReadError``; FORMATS 3.3).

        Returns:
            The local port.

        Raises:
            ProbeError: a connect failure's kind, or ``command`` when the local listen fails.
        """
        conn = await self._connection()
        listener = self._listeners.get(remote_port)
        if listener is None:
            try:
                listener = await conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", remote_port)
            except OSError as exc:
                raise ProbeError("command", f"{self.host}: cannot listen locally for port "
                                            f"{remote_port}: {_os_words(exc)}") from None
            except Exception as exc:
                raise translate(exc, self.host) from None
            self._listeners[remote_port] = listener
        return listener.get_port()

    def http_transport(self) -> httpx.AsyncBaseTransport | None:
        """None: HTTP goes over plain TCP to the port :meth:`forward` returned."""
        return None

    # --- close ---------------------------------------------------------------------------------

    async def close(self) -> None:
        """End every remote process this runner started, stop its forwards, close the connection.

        Waits at most about ``2 * grace_s`` seconds for remote processes to exit. Never raises.
        """
        self._closed = True
        for proc in list(self._live):
            self._end(proc)
        if self._reapers:
            await asyncio.wait(set(self._reapers), timeout=3 * self.grace_s)
        for listener in self._listeners.values():
            listener.close()
        conn, self._conn = self._conn, None
        self._listeners.clear()
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), self.grace_s)


def _os_words(exc: OSError) -> str:
    """A few words for an OSError: ``Connection refused``, ``Name or service not known`` ..."""
    if isinstance(exc, socket.gaierror) or not exc.errno or exc.errno < 0:
        return exc.strerror or str(exc) or type(exc).__name__
    return os.strerror(exc.errno)  # asyncio's strerror is "Connect call failed (addr)"


def translate(exc: BaseException, target: str, *, connecting: bool = False) -> ProbeError:
    """Turn an asyncssh, socket or time-limit failure into a :class:`ProbeError`.

    Args:
        exc: what was raised. target: the host as the operator named it (starts the message).
        connecting: True while opening the connection: an ``OSError`` then means ``unreachable``;
            later it means the connection broke (``closed``).
    """
    if isinstance(exc, ProbeError):
        return exc
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return ProbeError("host_key", f"{target}: {exc.reason}")
    if isinstance(exc, asyncssh.PermissionDenied):
        return ProbeError("auth", f"{target}: {exc.reason} (check User, IdentityFile or the agent)")
    if isinstance(exc, asyncssh.ChannelOpenError):
        if "connection closed" in exc.reason.lower():
            return ProbeError("closed", f"{target}: {exc.reason}")
        return ProbeError("command", f"{target}: the server refused a new channel ({exc.reason}; "
                                     f"is MaxSessions lower than max_channels?)")
    if isinstance(exc, (asyncssh.ConnectionLost, asyncssh.DisconnectError)):
        # While connecting, a lost connection is a host we cannot reach (no route: the link is
        # down, measured in TESTBED section 2), not a drop.
        return ProbeError("unreachable" if connecting else "closed", f"{target}: {exc.reason}")
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError since 3.11
        return ProbeError("timeout", f"{target}: no answer in time" + (" (connect)" if connecting else ""))
    if isinstance(exc, OSError):
        words = _os_words(exc)
        if connecting:
            return ProbeError("unreachable", f"{target}: {words}")
        return ProbeError("closed", f"{target}: {words}")
    if isinstance(exc, asyncssh.Error):
        return ProbeError("closed", f"{target}: {exc.reason}")
    return ProbeError("closed", f"{target}: {type(exc).__name__}: {exc}")
