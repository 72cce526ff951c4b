"""The GPU probe reads real nvidia-smi output and NVML answers into :class:`GpuReading`.

Fixtures: ``tests/fixtures/nvidia-smi/`` (see its README.md). NVML is faked with an object that
carries the **real** ``pynvml`` exception classes and structs and behaves as nvidia-ml-py 13.615.71
does (errors raised as ``NVMLError(code)``, which maps to the ``NVMLError_*`` subclass; memory in
bytes; power in milliwatts; ``Uninitialized`` before ``nvmlInit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.sources.gpu import QUERY_FIELDS, parse_query, parse_query_line, query_argv
from probes.sources.gpu_errors import (MSG_DRIVER_NOT_LOADED, MSG_MISMATCH, MSG_NO_DEVICES, MSG_NO_LIBRARY,
                                       MSG_NOT_INSTALLED, GpuError, classify_error)
from probes.sources.nvml import NvmlSource
from probes.data.events import GpuReading, GpuSample

SMI = Path(__file__).resolve().parent / "fixtures" / "nvidia-smi"
NOW = 1_741_436_938.0
H100 = "NVIDIA H100 80GB HBM3"
ZERO_UUID = "GPU-00000000-0000-0000-0000-000000000000"
MIB = 1024**2


def read(name: str) -> str:
    return (SMI / name).read_text()


def uuid(tag: str) -> str:
    return f"GPU-00000000-0000-0000-0000-0000000000{tag}"


# --- the command -----------------------------------------------------------------------------------


def test_query_argv_shape() -> None:
    fields = "index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit"
    assert ",".join(QUERY_FIELDS) == fields
    assert query_argv() == ["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits"]
    assert query_argv(1000) == ["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits",
                                "-lms", "1000"]


def test_every_fixture_file_is_used_here() -> None:
    used = {"query-gpu.captured-rows.with-units.csv", "query-gpu.h100x8-sglang-tp8.loop.csv",
            "query-gpu.h100-mig.csv", "query-gpu.single-gb10-na.csv",
            "query-gpu.single-geforce-not-supported.csv", "compute-apps.sglang-tp8.csv",
            "compute-apps.vllm-tp2.csv", "compute-apps.h100-mig.csv", "exit-codes.tsv", "README.md",
            *ERRORS}
    assert {p.name for p in SMI.iterdir()} == used


# --- captured rows (with units and a header) -------------------------------------------------------

# (name, used MiB, total MiB, util %, temp C, power W, limit W), from the captures in the README.
CAPTURED = [
    (H100, 0, 81559, 0, 41, 69.85, 700.0),              # H100 idle
    (H100, 19818, 81559, 100, 59, 631.95, 700.0),       # H100 gpu-burn
    (H100, 59, 81559, None, 42, 71.15, 700.0),          # H100 MIG idle: utilization [N/A]
    (H100, 11125, 81559, None, 53, 433.78, 700.0),      # H100 MIG load
    ("NVIDIA H200", 0, 143771, 0, 28, 77.71, 700.0),
    ("NVIDIA H200", 32362, 143771, 100, 52, 627.40, 700.0),
    ("NVIDIA L40S", 0, 46068, 100, 63, 144.97, 350.0),  # the "idle" capture: 100 % with 0 MiB
    ("NVIDIA L40S", 1235, 46068, 9, 54, 110.23, 350.0),
]


def test_captured_rows_with_units_and_header() -> None:
    text = read("query-gpu.captured-rows.with-units.csv")
    header, *rows = text.splitlines()
    with pytest.raises(ValueError):
        parse_query_line(header)
    got = [parse_query_line(row) for row in rows]
    assert [(g.name, g.mem_used_mib, g.mem_total_mib, g.util_pct, g.temp_c, g.power_w, g.power_limit_w)
            for g in got] == CAPTURED
    assert all(g.index == 0 and g.uuid == ZERO_UUID and g.note is None for g in got)
    reading = parse_query(text, NOW)
    assert reading.time == NOW and len(reading.gpus) == 8     # the header is skipped


def test_captured_h100_load_row_fraction() -> None:
    row = read("query-gpu.captured-rows.with-units.csv").splitlines()[2]
    sample = parse_query_line(row)
    assert sample.mem_fraction == pytest.approx(19818 / 81559)


def test_units_and_nounits_give_the_same_sample() -> None:
    with_units = "0, GPU-<uuid>, NVIDIA H100 80GB HBM3, 19818 MiB, 81559 MiB, 100 %, 59, 631.95 W, 700.00 W"
    without = "0, GPU-<uuid>, NVIDIA H100 80GB HBM3, 19818, 81559, 100, 59, 631.95, 700.00"
    assert parse_query_line(with_units.replace("<uuid>", "1")) == parse_query_line(without.replace("<uuid>", "1"))


# --- the TP8 loop ------------------------------------------------------------------------------------


def loop_iterations() -> list[list[GpuSample]]:
    lines = read("query-gpu.h100x8-sglang-tp8.loop.csv").splitlines()
    samples = [parse_query_line(line) for line in lines]
    return [samples[i:i + 8] for i in range(0, len(samples), 8)]


def test_loop_has_24_iterations_of_8_gpus_in_index_order() -> None:
    lines = read("query-gpu.h100x8-sglang-tp8.loop.csv").splitlines()
    assert len(lines) == 192
    iterations = loop_iterations()
    assert len(iterations) == 24
    for it in iterations:
        assert [g.index for g in it] == list(range(8))
        assert [g.uuid for g in it] == [uuid(f"a{i}") for i in range(8)]
        assert all(g.name == H100 and g.mem_total_mib == 81559 and g.power_limit_w == 700.0 for g in it)


def test_loop_gpu7_first_and_last_iteration() -> None:
    iterations = loop_iterations()
    first, last = iterations[0][7], iterations[-1][7]
    assert (first.mem_used_mib, first.util_pct, first.temp_c, first.power_w) == (1536, 0, 35, 71.01)  # orphan only
    assert last == GpuSample(7, uuid("a7"), H100, 74582, 81559, 100, 60, 673.91, 700.0)


def test_loop_memory_never_falls_and_the_kv_pool_jumps_at_iteration_13() -> None:
    iterations = loop_iterations()
    for gpu in range(8):
        series = [it[gpu].mem_used_mib for it in iterations]
        assert series == sorted(series), f"GPU {gpu} memory fell: {series}"
        assert series[13] - series[12] > 50_000          # weights → KV cache pool
    assert [it[0].util_pct for it in iterations[20:]] == [100, 100, 100, 100]   # warm-up, then load


def test_loop_whole_text_parses_as_one_reading_sorted_by_index() -> None:
    reading = parse_query(read("query-gpu.h100x8-sglang-tp8.loop.csv"), NOW)
    assert len(reading.gpus) == 192
    assert [g.index for g in reading.gpus] == sorted(g.index for g in reading.gpus)


def test_loop_last_iteration_matches_compute_apps_plus_20_mib() -> None:
    per_uuid: dict[str, int] = {}
    for line in read("compute-apps.sglang-tp8.csv").splitlines():
        pid, name, used, gpu_uuid = (c.strip() for c in line.split(","))
        per_uuid[gpu_uuid] = per_uuid.get(gpu_uuid, 0) + int(used)
    last = loop_iterations()[-1]
    assert {g.uuid: g.mem_used_mib for g in last} == {u: mib + 20 for u, mib in per_uuid.items()}


@pytest.mark.parametrize("name", ["compute-apps.sglang-tp8.csv", "compute-apps.vllm-tp2.csv",
                                  "compute-apps.h100-mig.csv"])
def test_compute_apps_output_is_not_mistaken_for_gpu_rows(name: str) -> None:
    for line in read(name).splitlines():
        with pytest.raises(ValueError):
            parse_query_line(line)
    with pytest.raises(GpuError) as info:
        parse_query(read(name), NOW)
    assert info.value.message.startswith("nvidia-smi failed (exit 0): ")


# --- single-GPU oddities -----------------------------------------------------------------------------


def test_mig_utilization_is_none() -> None:
    (gpu,) = parse_query(read("query-gpu.h100-mig.csv"), NOW).gpus
    assert gpu == GpuSample(0, uuid("c0"), H100, 11125, 81559, None, 53, 433.78, 700.0)


def test_gb10_unified_memory_is_none_not_zero() -> None:
    (gpu,) = parse_query(read("query-gpu.single-gb10-na.csv"), NOW).gpus
    assert gpu == GpuSample(0, uuid("b0"), "NVIDIA GB10", None, None, 0, 41, 11.52, None)
    assert gpu.mem_fraction is None


def test_geforce_not_supported_power_is_none() -> None:
    (gpu,) = parse_query(read("query-gpu.single-geforce-not-supported.csv"), NOW).gpus
    assert gpu == GpuSample(0, uuid("b1"), "GeForce 930M", 327, 2002, 57, 53, None, None)


@pytest.mark.parametrize("token", ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]",
                                   "[Insufficient Permissions]",
                                   "[Requested functionality has been deprecated]", ""])
def test_no_value_tokens_are_none(token: str) -> None:
    row = f"3, {uuid('a3')}, {H100}, {token}, 81559, {token}, {token}, {token}, 700.00"
    gpu = parse_query_line(row)
    assert (gpu.mem_used_mib, gpu.util_pct, gpu.temp_c, gpu.power_w) == (None, None, None, None)
    assert gpu.mem_total_mib == 81559 and gpu.note is None


def test_gpu_requires_reset_sets_the_note() -> None:
    row = f"0, {uuid('a0')}, {H100}, 0, 81559, [GPU requires reset], [GPU requires reset], [N/A], 700.00"
    gpu = parse_query_line(row)
    assert gpu.note == "[GPU requires reset]"
    assert (gpu.util_pct, gpu.temp_c, gpu.power_w) == (None, None, None)
    assert gpu.mem_used_mib == 0


# --- whole-command failures ----------------------------------------------------------------------------

# file → (exit status from exit-codes.tsv, message, fatal)
ERRORS = {
    "error.driver-not-loaded.txt": (9, MSG_DRIVER_NOT_LOADED, True),
    "error.no-devices.txt": (6, MSG_NO_DEVICES, True),
    "error.driver-library-mismatch.txt": (18, MSG_MISMATCH + " (NVML library 535.161)", True),
    "error.device-handle-unknown.txt": (
        255, "GPU 0000:0B:00.0 cannot be reached (Unknown Error); the other GPUs can still be read one by one",
        False),
    "error.device-handle-gpu-lost.txt": (
        15, "GPU 0000:02:00.0 is lost (fell off the bus): reboot the host to recover it", False),
}


def test_exit_codes_file_matches() -> None:
    rows = dict(line.split("\t") for line in read("exit-codes.tsv").splitlines()[1:])
    assert {name: int(rc) for name, rc in rows.items()} == {name: v[0] for name, v in ERRORS.items()}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_file_is_classified_and_parse_query_raises(name: str) -> None:
    rc, message, fatal = ERRORS[name]
    output = read(name)
    assert classify_error(output, rc) == message
    with pytest.raises(GpuError) as info:
        parse_query(output, NOW, returncode=rc)
    assert info.value.message == message and str(info.value) == message
    assert info.value.fatal is fatal
    for line in output.splitlines():
        with pytest.raises(ValueError):
            parse_query_line(line)


def test_driver_error_with_the_extra_empty_line_some_pastes_show() -> None:
    assert classify_error(read("error.driver-not-loaded.txt") + "\n", 9) == MSG_DRIVER_NOT_LOADED


@pytest.mark.parametrize("text", [
    "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error\n",   # newer drivers
    "Unable to determine the device handle for gpu 0000:07:00.0: Unknown Error\n",  # nvidia-smi -L
])
def test_device_handle_forms_without_space_or_lower_case(text: str) -> None:
    assert classify_error(text, 255).startswith("GPU 0000:07:00.0 cannot be reached (Unknown Error)")


def test_gpu_lost_without_a_space_names_the_bus_id() -> None:
    text = "Unable to determine the device handle for GPU0000:02:00.0: GPU is lost. Reboot the system to recover this GPU"
    assert classify_error(text, 15) == "GPU 0000:02:00.0 is lost (fell off the bus): reboot the host to recover it"


@pytest.mark.parametrize(("output", "rc"), [
    ("bash: line 1: nvidia-smi: command not found\n", 127),
    ("sh: 1: nvidia-smi: not found\n", 127),
    ("", 127),
    ("zsh: command not found: nvidia-smi\n", 1),
])
def test_nvidia_smi_not_installed(output: str, rc: int) -> None:
    assert classify_error(output, rc) == MSG_NOT_INSTALLED


def test_generic_failure_quotes_the_first_line_as_plain_text() -> None:
    output = "\n\x1b[31mSomething [bold]odd[/] happened\r\nsecond line\n"
    assert classify_error(output, 3) == "nvidia-smi failed (exit 3): Something [bold]odd[/] happened"


def test_empty_output_is_its_own_message() -> None:
    assert classify_error("", 0) == "nvidia-smi gave no output (exit 0)"
    with pytest.raises(GpuError, match="gave no output"):
        parse_query("\n\n", NOW)


def test_infrom_warning_after_rows_keeps_the_rows() -> None:
    text = read("query-gpu.h100-mig.csv") + "WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n"
    assert len(parse_query(text, NOW, returncode=14).gpus) == 1


# --- bad input -------------------------------------------------------------------------------------------


def test_markup_in_the_name_is_kept_verbatim() -> None:
    row = f"0, {uuid('a0')}, [bold]NVIDIA[/] H100, 0, 81559, 0, 33, 69.80, 700.00"
    assert parse_query_line(row).name == "[bold]NVIDIA[/] H100"


def test_markup_in_a_number_cell_is_none() -> None:
    row = f"0, {uuid('a0')}, {H100}, [bold], 81559, [bold]5, 33, [red]69.80, 700.00"
    gpu = parse_query_line(row)
    assert (gpu.mem_used_mib, gpu.util_pct, gpu.power_w) == (None, None, None)
    assert (gpu.temp_c, gpu.power_limit_w) == (33, 700.0)


def test_a_comma_in_the_name_does_not_shift_the_numbers() -> None:
    row = f"0, {uuid('a0')}, NVIDIA H100, rev 2, 100, 81559, 5, 33, 69.80, 700.00"
    gpu = parse_query_line(row)
    assert gpu.name == "NVIDIA H100, rev 2"
    assert (gpu.mem_used_mib, gpu.mem_total_mib, gpu.power_limit_w) == (100, 81559, 700.0)


@pytest.mark.parametrize("line", [
    f"0, {uuid('a0')}, {H100}, 19818",                                   # truncated row
    f"0, {uuid('a0')}, {H100}, 19818, 81559, 100, 59, 631.95",           # one cell short
    "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.",
    "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
    "index, uuid, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%], temperature.gpu, power.draw [W], power.limit [W]",
    f"x, {uuid('a0')}, {H100}, 0, 81559, 0, 33, 69.80, 700.00",           # index not a number
    f"0, not-a-uuid, {H100}, 0, 81559, 0, 33, 69.80, 700.00",
    "",
])
def test_lines_that_are_not_rows_raise_value_error(line: str) -> None:
    with pytest.raises(ValueError):
        parse_query_line(line)


def test_xid_lines_interleaved_in_loop_output_are_skipped_by_the_caller() -> None:
    lines = read("query-gpu.h100x8-sglang-tp8.loop.csv").splitlines()[:16]
    lines.insert(8, "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus")
    lines.insert(3, "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0")
    kept = []
    for line in lines:                      # what a loop reader does with each streamed line
        try:
            kept.append(parse_query_line(line))
        except ValueError:
            continue
    assert [g.index for g in kept] == list(range(8)) * 2
    assert len(parse_query("\n".join(lines), NOW).gpus) == 16


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_query_line_raises_only_value_error(line: str) -> None:
    try:
        gpu = parse_query_line(line)
    except ValueError:
        return
    assert isinstance(gpu, GpuSample) and gpu.index >= 0


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(-1, 300))
def test_classify_error_is_always_one_line(output: str, rc: int) -> None:
    message = classify_error(output, rc)
    assert message and "\n" not in message and "\r" not in message and "\x1b" not in message


# --- NVML ---------------------------------------------------------------------------------------------


class Err:
    """A field or call that fails with NVML error ``code`` (raised as the real bindings do)."""

    def __init__(self, code: int) -> None:
        self.code = code


@dataclass
class Device:
    uuid: Any
    name: Any
    memory: Any = (81559 * MIB, 0, 0)      # (total, free, used) bytes, or Err
    util: Any = (0, 0)                     # (gpu %, memory %), or Err
    temp: Any = 33
    power_mw: Any = 69850
    limit_mw: Any = 700000
    handle: Any = None                     # Err: nvmlDeviceGetHandleByIndex fails


@dataclass
class FakeNvml:
    """The part of ``pynvml`` (nvidia-ml-py 13.615.71) NvmlSource uses, behaving the same way."""

    devices: list[Device]
    init_error: int | None = None
    count_error: int | None = None
    inits: int = 0
    calls: list[str] = field(default_factory=list)

    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __getattr__(self, name: str) -> Any:       # the real exception classes
        if name.startswith("NVMLError"):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def _check(self) -> None:
        if self.inits == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    @staticmethod
    def _value(value: Any) -> Any:
        if isinstance(value, Err):
            raise pynvml.NVMLError(value.code)
        return value

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")
        self._check()
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        if self.count_error is not None:
            raise pynvml.NVMLError(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Device:
        self._check()
        device = self.devices[index]
        self._value(device.handle)
        return device

    def nvmlDeviceGetUUID(self, h: Device) -> Any:
        return self._value(h.uuid)

    def nvmlDeviceGetName(self, h: Device) -> Any:
        return self._value(h.name)

    def nvmlDeviceGetMemoryInfo(self, h: Device) -> pynvml.c_nvmlMemory_t:
        total, free, used = self._value(h.memory)
        return pynvml.c_nvmlMemory_t(total=total, free=free, used=used)

    def nvmlDeviceGetUtilizationRates(self, h: Device) -> pynvml.c_nvmlUtilization_t:
        gpu, memory = self._value(h.util)
        return pynvml.c_nvmlUtilization_t(gpu=gpu, memory=memory)

    def nvmlDeviceGetTemperature(self, h: Device, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._value(h.temp)

    def nvmlDeviceGetPowerUsage(self, h: Device) -> int:
        return self._value(h.power_mw)

    def nvmlDeviceGetPowerManagementLimit(self, h: Device) -> int:
        return self._value(h.limit_mw)


NOT_SUPPORTED = Err(pynvml.NVML_ERROR_NOT_SUPPORTED)


def h100(i: int, **kw: Any) -> Device:
    return Device(uuid=uuid(f"a{i}"), name=H100, **kw)


def test_fake_raises_the_real_subclasses() -> None:
    with pytest.raises(pynvml.NVMLError_NotSupported):
        FakeNvml([h100(0, temp=NOT_SUPPORTED)]).nvmlDeviceGetTemperature(h100(0, temp=NOT_SUPPORTED), 0)
    assert str(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)) == "GPU is lost"


def test_nvml_sample_converts_units_like_nvidia_smi() -> None:
    fake = FakeNvml([
        h100(0, memory=(81559 * MIB, 0, 19818 * MIB + 512), util=(100, 40), temp=59, power_mw=631950),
        h100(1),
    ])
    source = NvmlSource.open(nvml=fake)
    reading = source.sample(NOW)
    assert reading == GpuReading(NOW, (
        GpuSample(0, uuid("a0"), H100, 19818, 81559, 100, 59, 631.95, 700.0),
        GpuSample(1, uuid("a1"), H100, 0, 81559, 0, 33, 69.85, 700.0),
    ))


def test_nvml_mig_utilization_not_supported_is_none() -> None:
    fake = FakeNvml([h100(0, memory=(81559 * MIB, 0, 11125 * MIB), util=NOT_SUPPORTED, temp=53, power_mw=433780)])
    (gpu,) = NvmlSource.open(nvml=fake).sample(NOW).gpus
    assert gpu == GpuSample(0, uuid("a0"), H100, 11125, 81559, None, 53, 433.78, 700.0)


def test_nvml_gb10_memory_and_limit_not_supported() -> None:
    fake = FakeNvml([Device(uuid("b0"), "NVIDIA GB10", memory=NOT_SUPPORTED, temp=41, power_mw=11520,
                            limit_mw=NOT_SUPPORTED)])
    (gpu,) = NvmlSource.open(nvml=fake).sample(NOW).gpus
    assert gpu == GpuSample(0, uuid("b0"), "NVIDIA GB10", None, None, 0, 41, 11.52, None)


def test_nvml_no_permission_and_deprecated_fields_are_none_without_note() -> None:
    fake = FakeNvml([h100(0, power_mw=Err(pynvml.NVML_ERROR_NO_PERMISSION),
                          temp=Err(pynvml.NVML_ERROR_DEPRECATED))])
    (gpu,) = NvmlSource.open(nvml=fake).sample(NOW).gpus
    assert (gpu.power_w, gpu.temp_c, gpu.note) == (None, None, None)


def test_nvml_lost_and_unknown_devices_become_samples_with_a_note() -> None:
    fake = FakeNvml([h100(0), h100(1, handle=Err(pynvml.NVML_ERROR_GPU_IS_LOST)),
                     h100(2, handle=Err(pynvml.NVML_ERROR_UNKNOWN))])
    gpus = NvmlSource.open(nvml=fake).sample(NOW).gpus
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[0].note is None and gpus[0].uuid == uuid("a0")
    assert gpus[1] == GpuSample(1, "", "", None, None, None, note="GPU is lost")
    assert gpus[2] == GpuSample(2, "", "", None, None, None, note="Unknown Error")


def test_nvml_gpu_lost_in_one_field_keeps_the_others_and_notes_it() -> None:
    lost = Err(pynvml.NVML_ERROR_GPU_IS_LOST)
    fake = FakeNvml([h100(0, temp=lost, power_mw=lost)])
    (gpu,) = NvmlSource.open(nvml=fake).sample(NOW).gpus
    assert (gpu.temp_c, gpu.power_w, gpu.note, gpu.mem_total_mib) == (None, None, "GPU is lost", 81559)


def test_nvml_old_bindings_returning_bytes() -> None:
    fake = FakeNvml([Device(uuid("a0").encode(), H100.encode())])
    (gpu,) = NvmlSource.open(nvml=fake).sample(NOW).gpus
    assert (gpu.uuid, gpu.name) == (uuid("a0"), H100)


@pytest.mark.parametrize(("code", "message"), [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, MSG_NO_LIBRARY),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, MSG_DRIVER_NOT_LOADED),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, MSG_MISMATCH),
    (pynvml.NVML_ERROR_UNKNOWN, "NVML failed: Unknown Error"),
])
def test_nvml_open_failures_raise_gpu_error(code: int, message: str) -> None:
    with pytest.raises(GpuError) as info:
        NvmlSource.open(nvml=FakeNvml([], init_error=code))
    assert info.value.message == message and info.value.fatal
    assert isinstance(info.value.__cause__, pynvml.NVMLError)


def test_nvml_driver_gone_mid_run_raises_fatal() -> None:
    fake = FakeNvml([h100(0)])
    source = NvmlSource.open(nvml=fake)
    fake.count_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(GpuError) as info:
        source.sample(NOW)
    assert info.value.message == MSG_DRIVER_NOT_LOADED and info.value.fatal


def test_nvml_close_is_idempotent_and_sampling_after_close_fails_cleanly() -> None:
    fake = FakeNvml([h100(0)])
    with NvmlSource.open(nvml=fake) as source:
        assert len(source.sample(NOW).gpus) == 1
    source.close()
    assert fake.calls == ["init", "shutdown"] and fake.inits == 0
    with pytest.raises(GpuError) as info:
        source.sample(NOW)
    assert info.value.message == "NVML failed: Uninitialized" and info.value.fatal


def test_nvml_zero_devices_is_an_empty_reading() -> None:
    assert NvmlSource.open(nvml=FakeNvml([])).sample(NOW) == GpuReading(NOW, ())


def test_nvml_source_defaults_to_the_real_pynvml_module() -> None:
    source = NvmlSource()
    assert source._nvml is pynvml
