"""The local GPU source: NVML (``pynvml``) → :class:`~probes.data.events.GpuReading`.

nvidia-ml-py 13.615.71, module ``pynvml`` (its ``pynvml.py``; https://pypi.org/project/nvidia-ml-py/).
Memory comes in bytes, power in milliwatts; per-field ``NVMLError`` (``NotSupported`` under MIG, …) gives ``None``; a device whose
handle cannot be had (``GpuIsLost``, ``Unknown``) gives a sample with a note; a driver-level failure
raises :class:`~probes.sources.gpu.GpuError`. The loop that samples it is
:class:`probes.sources.gpu.GpuSource` (given an :class:`NvmlSource` as its sampler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from probes.data.events import GpuReading, GpuSample
from probes.hosttext import one_line
from probes.sources.gpu_errors import MSG_DRIVER_NOT_LOADED, MSG_MISMATCH, MSG_NO_LIBRARY, GpuError

class NvmlSource:
    """Local GPU sampling through NVML (``pynvml`` from the ``nvidia-ml-py`` package).

    Calls block (ctypes into ``libnvidia-ml.so.1``); run :meth:`sample` in a thread from async
    code. Values match the nvidia-smi source: memory bytes → MiB (``// 1024**2``), power mW → W,
    ``power_limit_w`` from ``nvmlDeviceGetPowerManagementLimit`` (nvidia-smi's ``power.limit``).

    Args:
        nvml: the ``pynvml`` module, or an object with the same names (tests); None imports it.
    """

    #: NVML errors that mean the driver state is gone for every device (nvidia_gpu_exporter
    #: re-initialises on these); they raise :class:`GpuError` instead of giving None.
    FATAL_ERRORS = ("NVMLError_Uninitialized", "NVMLError_DriverNotLoaded",
                    "NVMLError_LibRmVersionMismatch", "NVMLError_LibraryNotFound")
    #: NVML errors that mean one device is unusable: its sample carries a note.
    DEVICE_ERRORS = ("NVMLError_GpuIsLost", "NVMLError_Unknown", "NVMLError_ResetRequired")

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml  # imported only where NVML is wanted

            nvml = pynvml
        self._nvml = nvml
        self._open = False

    @classmethod
    def open(cls, nvml: Any = None) -> NvmlSource:
        """Initialise NVML (``nvmlInit``) and return a source ready to sample.

        Args:
            nvml: as for the constructor.

        Raises:
            GpuError: NVML cannot start (library not found, driver not loaded, driver/library
                mismatch, …); always ``fatal``.
        """
        source = cls(nvml)
        try:
            source._nvml.nvmlInit()
        except source._error_class("NVMLError") as exc:
            raise GpuError(source._message(exc), fatal=True) from exc
        source._open = True
        return source

    def sample(self, time: float) -> GpuReading:
        """Read every GPU once.

        Args:
            time: when the sample is taken (epoch seconds; the injected clock's "now").

        Returns:
            One sample per device in index order. A field NVML cannot give is None; a device that
            cannot be reached is a sample with empty uuid/name, None values and a note
            (``GPU is lost``, ``Unknown Error``).

        Raises:
            GpuError: NVML as a whole failed (driver gone, not initialised).
        """
        nvml = self._nvml
        nvml_error = self._error_class("NVMLError")
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml_error as exc:
            raise GpuError(self._message(exc), fatal=self._is(exc, self.FATAL_ERRORS)) from exc
        gpus = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml_error as exc:
                if self._is(exc, self.FATAL_ERRORS):
                    raise GpuError(self._message(exc), fatal=True) from exc
                gpus.append(GpuSample(index, "", "", None, None, None, note=str(exc)))
                continue
            gpus.append(self._device(index, handle))
        return GpuReading(time=time, gpus=tuple(gpus))

    def close(self) -> None:
        """Shut NVML down (``nvmlShutdown``); safe to call twice."""
        if not self._open:
            return
        self._open = False
        try:
            self._nvml.nvmlShutdown()
        except self._error_class("NVMLError"):
            pass

    def __enter__(self) -> NvmlSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers --

    def _device(self, index: int, handle: Any) -> GpuSample:
        """One device's sample; each field read on its own so one failure costs one value."""
        nvml = self._nvml
        notes: list[str] = []

        def field(call: Callable[[], Any]) -> Any:
            try:
                return call()
            except self._error_class("NVMLError") as exc:
                if self._is(exc, self.FATAL_ERRORS):
                    raise GpuError(self._message(exc), fatal=True) from exc
                if self._is(exc, self.DEVICE_ERRORS) and str(exc) not in notes:
                    notes.append(str(exc))
                return None

        memory = field(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        util = field(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        power_mw = field(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        limit_mw = field(lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
        return GpuSample(
            index=index,
            uuid=_text(field(lambda: nvml.nvmlDeviceGetUUID(handle))),
            name=_text(field(lambda: nvml.nvmlDeviceGetName(handle))),
            mem_used_mib=_mib(getattr(memory, "used", None)),
            mem_total_mib=_mib(getattr(memory, "total", None)),
            util_pct=_available(getattr(util, "gpu", None)),
            temp_c=_available(field(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))),
            power_w=_watts(power_mw),
            power_limit_w=_watts(limit_mw),
            note="; ".join(notes) or None,
        )

    def _error_class(self, name: str) -> type[BaseException] | tuple[()]:
        """The bindings' exception class ``name``, or ``()`` (matches nothing) when they lack it."""
        return getattr(self._nvml, name, ())

    def _is(self, exc: BaseException, names: tuple[str, ...]) -> bool:
        return any(isinstance(exc, self._error_class(name)) for name in names)

    def _message(self, exc: BaseException) -> str:
        """One line for an operator about a host-level NVML failure."""
        if self._is(exc, ("NVMLError_LibraryNotFound",)):
            return MSG_NO_LIBRARY
        if self._is(exc, ("NVMLError_DriverNotLoaded",)):
            return MSG_DRIVER_NOT_LOADED
        if self._is(exc, ("NVMLError_LibRmVersionMismatch",)):
            return MSG_MISMATCH
        return f"NVML failed: {one_line(str(exc).strip(), max_chars=200)}"


def _text(value: Any) -> str:
    """NVML strings: ``str`` (nvidia-ml-py ≥ 11.515) or ``bytes`` (older bindings); None → ``""``."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


#: ``NVML_VALUE_NOT_AVAILABLE`` as ``c_uint(-1)`` / ``c_ulonglong(-1)``; read as "no value".
_NOT_AVAILABLE = (2**32 - 1, 2**64 - 1)


def _available(value: Any) -> int | None:
    if value is None or value in _NOT_AVAILABLE:
        return None
    return int(value)


def _mib(value_bytes: Any) -> int | None:
    value = _available(value_bytes)
    return None if value is None else value // 1024**2


def _watts(value_mw: Any) -> float | None:
    value = _available(value_mw)
    return None if value is None else round(value / 1000, 2)
