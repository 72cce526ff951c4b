"""Where the health probe asks: a host's ``health_url`` or port resolved into a
:class:`HealthTarget` (a loopback address is the host's own, reached through the runner's port
forward; any other is asked directly from here).
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.spec import DEFAULT_PORTS, HostSpec

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"})


@dataclass(frozen=True, slots=True)
class HealthTarget:
    """Where the health probe goes: ``base_url`` + ``path``; ``tunnel`` when ``port`` is a port on
    the host's loopback that must be reached through the runner's port forward."""

    base_url: str
    path: str
    port: int
    tunnel: bool


def health_target(spec: HostSpec, engine: str | None = None, port: int | None = None) -> HealthTarget:
    """Resolve ``spec.health_url`` (or the port) into a :class:`HealthTarget`.

    Args:
        spec: the host. engine: the engine detected from the log, used when the spec names none.
        port: the port the start's log says the server serves on; used when the spec names
            neither ``port`` nor ``health_url`` (before the engine's default port).

    Raises:
        ValueError: ``health_url`` is not an ``http://`` or ``https://`` URL with a host.
    """
    from urllib.parse import urlsplit

    if spec.health_url is None:
        port = spec.port or port or DEFAULT_PORTS.get(spec.engine or engine or "", 8000)
        return HealthTarget(f"http://127.0.0.1:{port}", "/health", port, True)
    parts = urlsplit(spec.health_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"health_url must be an http:// or https:// URL with a host: {spec.health_url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/health"
    if parts.query:
        path += "?" + parts.query
    host = parts.hostname
    if host.lower() in _LOOPBACK_NAMES or host.startswith("127."):
        return HealthTarget(f"{parts.scheme}://127.0.0.1:{port}", path, port, not spec.is_local)
    netloc = f"[{host}]" if ":" in host else host
    return HealthTarget(f"{parts.scheme}://{netloc}:{port}", path, port, False)
