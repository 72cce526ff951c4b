"""Download progress from the looks at a hub-cache folder, when to look, and the download's words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probes.data.download import DownloadProgress, DownloadSample

#: The rate is the growth over the samples of the last this many seconds.
RATE_WINDOW_S = 30.0
_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
_HUB_ID_RE = re.compile(rf"({_HUB_PART})/({_HUB_PART})")


def hub_repo_id(model: str | None) -> str | None:
    """The hub repo id ``org/name`` that ``model`` names, or None when it is not one.

    A local path (``/models/x``, ``./x``, ``~/x``, ``models/x/`` with more slashes), an id without an
    org (``gpt2``: not told apart from a relative folder), or a name holding ``--`` or ``..``
    (forbidden in hub ids) is None.
    """
    if not model:
        return None
    m = _HUB_ID_RE.fullmatch(model.strip())
    if m is None or "--" in model or ".." in model:
        return None
    return f"{m.group(1)}/{m.group(2)}"

def progress_from(samples: Sequence[DownloadSample], window_s: float = RATE_WINDOW_S) -> DownloadProgress | None:
    """Progress from the looks at one folder (oldest first), or None while it has not grown.

    Only ``ok`` samples count. The rate is ``(last - oldest within window_s) / their time apart``
    (the look just before the window when the window holds one look only); a shrinking folder (a
    broken file removed) gives no rate. The ETA is ``(expected - bytes) / rate``.
    """
    ok = [s for s in samples if s.status == "ok" and s.bytes is not None]
    if len(ok) < 2:
        return None
    grew_at = None
    for a, b in zip(ok, ok[1:]):
        if b.bytes > a.bytes:  # type: ignore[operator]
            grew_at = b.time
    if grew_at is None:
        return None
    last = ok[-1]
    ref = ok[-2]
    for s in ok[:-1]:
        if last.time - s.time <= window_s:
            ref = s
            break
    rate: float | None = None
    dt = last.time - ref.time
    if dt > 0 and last.bytes >= ref.bytes:  # type: ignore[operator]
        rate = (last.bytes - ref.bytes) / dt  # type: ignore[operator]
    expected = last.expected_bytes
    eta = None
    if expected is not None and rate and last.bytes < expected:  # type: ignore[operator]
        eta = (expected - last.bytes) / rate  # type: ignore[operator]
    return DownloadProgress(last.path, last.bytes, expected, rate, eta, last.time, grew_at)  # type: ignore[arg-type]


def wanted(state: str, phase: str, progress_phase: str | None, model: str | None) -> bool:
    """Whether a start's download should be sampled now: it is loading, its model id names a hub
    repo, and it is in ``download``, or in ``weights`` with no shard bar yet (vLLM's silent fetch).

    Args:
        state: the start's state (``loading`` ...). phase: its phase id.
        progress_phase: the phase of its current progress bar, or None. model: its model id.
    """
    if state != "loading" or hub_repo_id(model) is None:
        return False
    return phase == "download" or (phase == "weights" and progress_phase != "weights")




# --- words ---------------------------------------------------------------------------------------------

def gib_text(n: float) -> str:
    """Bytes as GiB with one decimal: ``12.4``."""
    return f"{n / 2**30:.1f}"


def rate_text(bps: float) -> str:
    """Bytes per second as ``310 MiB/s`` (one decimal below 10 MiB/s)."""
    mib = bps / 2**20
    return f"{mib:.1f} MiB/s" if mib < 9.95 else f"{mib:.0f} MiB/s"


def eta_text(seconds: float) -> str:
    """``2:37`` (minutes:seconds) or ``1:02:37``."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def download_words(state: object) -> str:
    """The download's line: ``Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37``; without an expected
    total ``Download 12.4 GiB · 310 MiB/s``; "" when there is no download progress.

    Args:
        state: a :class:`~probes.data.state.HostState` (or anything with a ``download`` attribute
            holding a :class:`DownloadProgress` or None).
    """
    d = getattr(state, "download", None)
    if not isinstance(d, DownloadProgress):
        return ""
    if d.expected_bytes:
        parts = [f"Download {gib_text(d.bytes)}/{gib_text(d.expected_bytes)} GiB"]
    else:
        parts = [f"Download {gib_text(d.bytes)} GiB"]
    if d.rate_bps is not None:
        parts.append(rate_text(d.rate_bps))
    if d.eta_s is not None:
        parts.append(f"ETA {eta_text(d.eta_s)}")
    return " · ".join(parts)
