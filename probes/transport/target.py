"""``[user@]host[:port]``, the SSH target an operator writes, read without asyncssh: the commands
that never connect (``replay``, ``config``, the demo) check targets too, and importing asyncssh
costs them 0.15-0.25 s of start-up.
"""

from __future__ import annotations


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
    """``text`` as a port of SSH target ``target``. Raises ValueError when it is not 1..65535."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"bad port {text!r} in SSH target {target!r}")
    return int(text)
