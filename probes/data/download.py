"""Download progress values: one look at a hub-cache folder (:class:`DownloadSample`, an event) and
how far the download has come (:class:`DownloadProgress`, in ``HostState.download``).
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class DownloadSample:
    """One look at a repo's folder in the hub cache (an event for :class:`~probes.fold.model.HostModel`).

    Attributes:
        time: when the look ended (epoch seconds, the watcher's clock).
        path: the folder looked at, e.g. ``/root/.cache/huggingface/hub/models--org--name``.
        status: ``ok``, ``missing`` (no such folder yet) or ``denied`` (it exists but may not be
            entered).
        bytes: ``du -sb`` of the folder (bytes), None unless ``ok``.
        expected_bytes: the ``total_size`` of the folder's ``model.safetensors.index.json``
            (bytes), None when there is none (yet) or several that disagree.
    """

    time: float
    path: str
    status: str = "ok"
    bytes: int | None = None
    expected_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class DownloadProgress:
    """How far the current start's download has come (in :attr:`HostState.download`).

    Only made once the folder has grown between two looks: a folder that is missing or does not
    grow (a model already cached) gives no progress at all, never a wrong one.

    Attributes:
        path: the repo folder measured.
        bytes: its size at the last look (bytes; includes the ``.incomplete`` files).
        expected_bytes: the expected total (bytes, the index's ``total_size``), or None.
        rate_bps: growth in bytes per second over the last :data:`RATE_WINDOW_S`, or None with too
            few looks (0 when it did not grow).
        eta_s: seconds left at that rate, or None (no expected total, no growth, or past it).
        sampled_at: when the last look was taken (epoch seconds).
        grew_at: when a look last found it bigger than the look before (epoch seconds).
    """

    path: str
    bytes: int
    expected_bytes: int | None
    rate_bps: float | None
    eta_s: float | None
    sampled_at: float
    grew_at: float

    @property
    def fraction(self) -> float | None:
        """``bytes / expected_bytes`` in [0, 1], or None when the total is unknown."""
        if not self.expected_bytes:
            return None
        return min(1.0, self.bytes / self.expected_bytes)
