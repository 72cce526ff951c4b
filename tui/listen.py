"""The one ``--listen`` rule of the commands that listen (``upwatch serve``, ``upwatch exporter``).

``PORT`` and ``:PORT`` mean ``127.0.0.1:PORT`` (this machine only; unlike Prometheus, where
``:PORT`` means every address); ``HOST:PORT`` (a name or an IPv4 address) and ``[IPv6]:PORT`` are
taken as written. The port is 0..65535 (0: any free port). Anything else is refused with a
message that shows the forms.
"""

from __future__ import annotations

import ipaddress

#: The host of ``PORT`` and ``:PORT``.
LOOPBACK = "127.0.0.1"
#: The forms, for error messages and ``--help``.
FORMS = "PORT or :PORT (127.0.0.1:PORT), HOST:PORT or [IPv6]:PORT"


def parse_listen(text: str) -> tuple[str, int]:
    """A ``--listen`` value → ``(host, port)``: ``8765`` and ``:8765`` → ``("127.0.0.1", 8765)``,
    ``0.0.0.0:9464`` → ``("0.0.0.0", 9464)``, ``[::1]:9464`` → ``("::1", 9464)`` (the host
    without brackets).

    Raises:
        ValueError: no port, a port that is not a number in 0..65535, an empty host in brackets,
            an IPv6 address without brackets, or a bracketed host that is not an IPv6 address;
            the message names the forms (:data:`FORMS`) and the value.
    """
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    bad = ValueError(f"--listen takes {FORMS}, not {text!r}")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise bad
    if host.startswith("[") and host.endswith("]"):
        inner = host[1:-1]
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise bad from None
        return inner, int(port)
    if ":" in host or "[" in host or "]" in host or any(c.isspace() for c in host):
        raise bad  # ::1:9464 is ambiguous: an IPv6 address goes in brackets
    return host or LOOPBACK, int(port)


def shown_address(host: str, port: int) -> str:
    """``host:port`` as a URL writes it: ``[::1]:9464`` for an IPv6 address."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
