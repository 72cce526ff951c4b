"""A host reached over SSH: :class:`SshRunner`, the :class:`~probes.transport.runner.Runner` for live hosts.

One asyncssh connection per host carries everything: short commands (``run``), long-lived streams
(``stream``: ``journalctl -f``, ``nvidia-smi -l``) and port forwards (``forward``). The connection is
opened on first use and opened again on the next use after it dropped. Every failure of asyncssh, of
the socket or of a time limit leaves this module as a :class:`~probes.transport.runner.ProbeError`.

What OpenSSH does that shapes this module (OpenSSH ``serverloop.c``, ``session.c``, ``servconf.h``;
asyncssh's ``docs/api.rst``; checked against a real sshd by tests/test_ssh_runner.py):

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
* Trust and algorithms follow OpenSSH 9.2, not asyncssh's looser defaults: the connection is
  resolved by :mod:`probes.transport.ssh_config` and opened by :mod:`probes.transport.ssh_connect`
  (:mod:`probes.transport.openssh` holds OpenSSH's rules); failures are worded by
  :mod:`probes.transport.ssh_errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import asyncssh

from probes.transport.runner import Completed, ProbeError, StreamEnd, keep_stderr, split_batches
from probes.transport.ssh_config import SshSettings
from probes.transport.target import parse_target
from probes.transport.ssh_connect import connect
from probes.transport.ssh_errors import os_words, translate

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
        user, hostname, port = parse_target(target)
        self._settings = SshSettings(target, user, hostname, port, known_hosts, client_keys, config,
                                     connect_timeout, keepalive_interval, keepalive_count_max)
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
                self._conn = await connect(self._settings)
            except ProbeError as exc:
                raise self._failed(exc) from None
            self.attempts = 0
            self._last_error = None
            return self._conn

    def _failed(self, error: ProbeError) -> ProbeError:
        """Count a failed connect and schedule the next one (exponential backoff, capped)."""
        self.attempts += 1
        delay = min(self.reconnect_s * 2 ** (self.attempts - 1), self.reconnect_max_s)
        self._retry_at = time.monotonic() + delay
        self._last_error = error
        return error

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
        """Start ``argv`` on the host and yield its stdout line by line, as the lines come: the
        lines of :meth:`stream_batches`, one at a time (the same process handling, the same errors)."""
        async with contextlib.aclosing(self.stream_batches(argv)) as batches:
            async for batch in batches:
                for line in batch:
                    yield line

    #: :meth:`stream_batches` fills a :class:`~probes.transport.runner.StreamEnd`.
    tells_stream_end = True

    async def stream_batches(self, argv: Sequence[str], *,
                             ended: StreamEnd | None = None) -> AsyncGenerator[list[bytes], None]:
        """Start ``argv`` on the host and yield, after each read of its stdout, the lines it completed.

        Lines are bytes with the ``\\n`` removed (invalid UTF-8 stays as it is), each whole up to
        :data:`~probes.data.cutline.LINE_CAP` bytes, a :class:`~probes.data.cutline.CutLine` past it
        (:func:`~probes.transport.runner.split_batches`). stderr is discarded, or with ``ended`` read
        beside stdout and its start kept there, with the exit status, once the command ended
        (waiting up to ``grace_s`` for them). The iterator ends when the
        command ends. When it is closed or cancelled early, when the runner closes, or when the
        connection drops, the remote process is ended (see the module docstring). Holds one
        channel slot until the remote process has exited.

        Raises:
            ProbeError: ``closed`` when the connection drops mid-stream, or a connect failure's kind.
        """
        await self._slots.acquire()
        proc: asyncssh.SSHClientProcess[bytes] | None = None
        errors: asyncio.Task[None] | None = None
        try:
            conn = await self._connection()
            try:
                proc = await conn.create_process(remote_command(argv), encoding=None,
                                                 stderr=asyncssh.DEVNULL if ended is None else asyncssh.PIPE)
            except Exception as exc:
                raise translate(exc, self.host) from None
            self._live.add(proc)
            stdout = proc.stdout
            if ended is not None:
                errors = asyncio.ensure_future(keep_stderr(proc.stderr.read, ended))

            async def read(n: int) -> bytes:
                try:
                    return await stdout.read(n)
                except Exception as exc:
                    raise translate(exc, self.host) from None

            async with contextlib.aclosing(split_batches(read)) as batches:
                async for batch in batches:
                    yield batch
            if self._closed:
                raise ProbeError("closed", f"{self.host}: runner closed")
            if conn.is_closed():
                # The connection dropped: the channel ended without the command ending.
                raise ProbeError("closed", f"{self.host}: connection lost while {argv[0]} ran")
            if ended is not None and errors is not None:
                # stdout ended: the exit status and the rest of stderr come with the channel's close
                with contextlib.suppress(TimeoutError, OSError, asyncssh.Error):  # not closed, or the link went
                    await asyncio.wait_for(proc.wait_closed(), self.grace_s)
                with contextlib.suppress(TimeoutError):  # (keep_stderr ends quietly on a failed read)
                    await asyncio.wait_for(asyncio.shield(errors), self.grace_s)
                ended.returncode = proc.returncode
        finally:
            if errors is not None:
                errors.cancel()
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
        before any HTTP answer (httpx ``RemoteProtocolError``/``ReadError``).

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
                                            f"{remote_port}: {os_words(exc)}") from None
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
