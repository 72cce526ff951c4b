"""The GPU part of a host's fold (:class:`~probes.fold.model.HostModel` holds one): the last
reading, when the GPUs' memory last moved (stall detection), and the samples kept per GPU for the
detail screen's sparklines, as the snapshot's tuples made once per reading. Pure: no I/O."""

from __future__ import annotations

from collections import deque

from probes.data.events import GpuReading

#: GPU samples kept per GPU for the detail screen's sparklines.
GPU_HISTORY = 120
#: GPU memory moving by this much (MiB, all GPUs together) counts as progress for stall detection.
GPU_CHANGE_MIB = 256

#: Per GPU (in index order), its kept samples: (memory used as a fraction of total, use %), each None when not read.
GpuHistory = tuple[tuple[tuple[float | None, int | None], ...], ...]


class GpuFold:
    """One host's GPU readings folded: :attr:`last`, :attr:`changed_at`, :meth:`history`."""

    def __init__(self) -> None:
        #: the last reading, or None
        self.last: GpuReading | None = None
        #: when the GPUs' memory (all together) last moved by :data:`GPU_CHANGE_MIB` (epoch s), or None
        self.changed_at: float | None = None
        self._total: int | None = None
        self._samples: dict[int, deque[tuple[float | None, int | None]]] = {}
        self._history: GpuHistory | None = None  # ``_samples`` as tuples, until the next reading

    def apply(self, event: GpuReading) -> None:
        """Fold one reading in."""
        self.last = event
        total = sum(g.mem_used_mib for g in event.gpus if g.mem_used_mib is not None)
        if self._total is None or abs(total - self._total) >= GPU_CHANGE_MIB:
            if self._total is not None:
                self.changed_at = event.time
            self._total = total
        for g in event.gpus:
            kept = self._samples.get(g.index)
            if kept is None:
                kept = self._samples[g.index] = deque(maxlen=GPU_HISTORY)
            kept.append((g.mem_fraction, g.util_pct))
        self._history = None

    def history(self) -> GpuHistory:
        """The samples kept per GPU, in index order: the same tuple until the next reading (every
        snapshot had copied 8 x 120 samples)."""
        hist = self._history
        if hist is None:
            hist = self._history = tuple(tuple(self._samples[i]) for i in sorted(self._samples))
        return hist
