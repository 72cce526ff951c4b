"""asyncssh's, the socket's and the time limits' failures as :class:`~probes.transport.runner.ProbeError`
s (:func:`translate`), worded as the operator needs them (:func:`os_words`). Every failure leaves
the SSH transport through here or as a ProbeError made where it happened."""

from __future__ import annotations

import os
import socket

import asyncssh

from probes.transport.runner import ProbeError


def os_words(exc: OSError) -> str:
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
        # down, as tests/test_netns.py takes it down), not a drop.
        return ProbeError("unreachable" if connecting else "closed", f"{target}: {exc.reason}")
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError since 3.11
        return ProbeError("timeout", f"{target}: no answer in time" + (" (connect)" if connecting else ""))
    if isinstance(exc, OSError):
        words = os_words(exc)
        if connecting:
            return ProbeError("unreachable", f"{target}: {words}")
        return ProbeError("closed", f"{target}: {words}")
    if isinstance(exc, asyncssh.Error):
        return ProbeError("closed", f"{target}: {exc.reason}")
    return ProbeError("closed", f"{target}: {type(exc).__name__}: {exc}")
