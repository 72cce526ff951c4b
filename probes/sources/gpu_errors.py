"""What the NVIDIA tools say when they give no data: nvidia-smi's own texts
(``tests/fixtures/nvidia-smi/error.*.txt``) and
NVML's failures, as one line for an operator each (:func:`classify_error`) and :class:`GpuError`.
Shared by the GPU sample (:mod:`probes.sources.gpu`), the process list
(:mod:`probes.sources.gpu_apps`) and NVML (:mod:`probes.sources.nvml`).
"""

from __future__ import annotations

import re

from probes.hosttext import one_line

_HANDLE_RE = re.compile(r"Unable to determine the device handle for gpu\s*([0-9A-Fa-f:.]+)\s*:\s*(.*)", re.I)
_NVML_VERSION_RE = re.compile(r"NVML library version:\s*(\S+)")


# One line for an operator per failure (shared by nvidia-smi and NVML).
MSG_DRIVER_NOT_LOADED = "NVIDIA driver not loaded (kernel module missing, e.g. after a kernel update)"
MSG_MISMATCH = "NVIDIA driver/library version mismatch: reboot or reload the nvidia kernel module"
MSG_NO_DEVICES = "no NVIDIA GPU found: the driver is loaded but sees no device"
MSG_NOT_INSTALLED = "nvidia-smi not found on the host (no NVIDIA driver installed?)"
MSG_NO_LIBRARY = "NVML library not found (libnvidia-ml.so.1): no NVIDIA driver installed?"


class GpuError(Exception):
    """The GPU probe could not read any GPU.

    Args:
        message: one line for an operator (plain text; may quote host output).
        fatal: True when polling again cannot help until someone acts on the host (driver not
            loaded, library mismatch, no GPU, no nvidia-smi); False when it may be passing or partial
            (one GPU's handle lost: the others can still be read one by one with ``-i``).
    """

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.fatal = fatal


def classify_error(output: str, returncode: int) -> str:
    """Say in one line why nvidia-smi gave no data.

    The texts are nvidia-smi's own, printed on **stdout** (``tests/fixtures/nvidia-smi/error.*.txt``,
    ``exit-codes.tsv``): driver not loaded (exit
    9), ``Failed to initialize NVML: Driver/library version mismatch`` (18, observed), ``No devices
    were found`` (6), ``Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost…``
    (also ``GPU0000:…`` on newer drivers, ``gpu …`` from ``-L``). A shell reports a missing binary
    with exit 127 / ``command not found``.

    Args:
        output: nvidia-smi's stdout (and stderr, if the caller has it).
        returncode: its exit status.

    Returns:
        One line for an operator (plain text; quotes host text with control characters removed).
    """
    return classify(output, returncode)[0]


def classify(output: str, returncode: int) -> tuple[str, bool]:
    """:func:`classify_error`'s message and whether the failure is fatal (see :class:`GpuError`):
    ``(one line, fatal)``."""
    text = output or ""
    lower = text.lower()
    if "couldn't communicate with the nvidia driver" in lower or "driver not loaded" in lower:
        return MSG_DRIVER_NOT_LOADED, True
    if "driver/library version mismatch" in lower:
        version = _NVML_VERSION_RE.search(text)
        suffix = f" (NVML library {one_line(version.group(1).strip(), max_chars=200)})" if version else ""
        return MSG_MISMATCH + suffix, True
    if "no devices were found" in lower:
        return MSG_NO_DEVICES, True
    handle = _HANDLE_RE.search(text)
    if handle:
        said = handle.group(2).splitlines()[0] if handle.group(2) else ""
        bus_id, reason = handle.group(1), one_line(said.strip(), max_chars=200)
        if "gpu is lost" in reason.lower():
            return f"GPU {bus_id} is lost (fell off the bus): reboot the host to recover it", False
        return (f"GPU {bus_id} cannot be reached ({reason or 'no reason given'}); "
                "the other GPUs can still be read one by one"), False
    if returncode == 127 or "command not found" in lower or re.search(r"nvidia-smi: (?:\S+ )?not found", lower):
        return MSG_NOT_INSTALLED, True
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        return f"nvidia-smi gave no output (exit {returncode})", False
    return f"nvidia-smi failed (exit {returncode}): {one_line(first.strip(), max_chars=200)}", False
