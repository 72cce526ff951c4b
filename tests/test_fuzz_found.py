"""The inputs that once crashed a parser entry point (found by ``bench/fuzz.py`` or measured for
issue 13), each with the answer a correct parser gives. The GPU ones (a 309-digit ``memory.used``,
a 5000-digit pid) are in tests/test_probe_faults.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from probes.sources.health import probe_health
from probes.logs.journal_json import parse_record
from probes.fold.model import HostModel
from tui.config import ConfigError, load_config

NOW = 1_741_437_000.0


# --- journal records ---------------------------------------------------------------------------------


def test_a_journal_timestamp_of_400_digits_is_no_time_and_the_entry_is_kept() -> None:
    # fuzz: OverflowError "int too large to convert to float" in HostModel._record
    # (realtime_us / 1e6), which stopped the journal task.
    line = json.dumps({"__CURSOR": "s=1", "__REALTIME_TIMESTAMP": "9" * 400, "MESSAGE": "Loading weights",
                       "_SYSTEMD_UNIT": "sglang.service"})
    rec = parse_record(line)
    assert rec.realtime_us is None and rec.cursor == "s=1"
    model = HostModel("h", "sglang.service")
    model.apply(rec)
    state = model.state(NOW)
    assert state.log_count == 1 and model.log[-1].text == "Loading weights" and model.log[-1].time is None


@pytest.mark.parametrize("stamp", ["-1", "253402300800000000", str(2**64)])
def test_journal_timestamps_outside_years_1_to_9999_are_no_time(stamp: str) -> None:
    rec = parse_record(json.dumps({"__REALTIME_TIMESTAMP": stamp, "MESSAGE": "x"}))
    assert (rec.realtime_us is None) == (stamp != "-1")  # -1 µs is 1969: a time, if an odd one
    HostModel("h", "u.service").apply(rec)


# --- health answers ------------------------------------------------------------------------------------


async def answer_with(models_body: bytes, completion_body: bytes) -> object:
    def reply(request: httpx.Request) -> httpx.Response:
        body = {"/health": b"", "/v1/models": models_body, "/v1/completions": completion_body}[request.url.path]
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    async with httpx.AsyncClient(base_url="http://127.0.0.1:30000", transport=httpx.MockTransport(reply)) as c:
        return await probe_health(c, NOW, serving_check=True)


async def test_a_models_answer_nested_too_deeply_is_not_serving() -> None:
    # fuzz: RecursionError from response.json() in _first_model_id (only ValueError was caught).
    h = await answer_with(b"[" * 100_000, b"{}")
    assert h.rung == "healthy" and h.detail.endswith("not serving: /v1/models lists no model")


async def test_a_completion_answer_nested_too_deeply_is_not_serving() -> None:
    h = await answer_with(json.dumps({"data": [{"id": "m"}]}).encode(), b'{"choices":' + b"[" * 100_000)
    assert h.rung == "healthy" and h.detail.endswith("answered without choices")


@pytest.mark.parametrize("body", [b'{"data": [1]}', b'{"data": "x"}', b"[]", b'{"data": [{"id": 5}]}',
                                  b"1" * 5000, b"\xff\xfe"])
async def test_models_answers_of_other_shapes_list_no_model(body: bytes) -> None:
    h = await answer_with(body, b"{}")
    assert h.rung == "healthy" and h.detail.endswith("lists no model")


# --- hosts.toml ------------------------------------------------------------------------------------------


def load(tmp_path: Path, text: str) -> str:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={}, default_path=tmp_path / "none.toml")
    return str(info.value)


def test_an_integer_of_5000_digits_names_its_line(tmp_path: Path) -> None:
    # Measured: a Python traceback (tomllib raises a bare ValueError, only TOMLDecodeError was caught).
    # The same digits in a comment and a string are not it: the line named is the value's.
    text = ("# " + "9" * 5000 + '\n[[host]]\nname = "a"\nunit = "x.service"\nnote = "' + "8" * 5000
            + '"\nport = ' + "9" * 5000 + "\n")
    assert load(tmp_path, text) == f"{tmp_path / 'hosts.toml'} line 6: not valid TOML: an integer of 5000 digits (at most 4300)"


def test_an_integer_with_underscores_counts_its_digits(tmp_path: Path) -> None:
    msg = load(tmp_path, "[settings]\nunit_interval_s = 1_" + "0" * 4400 + "\n")
    assert msg.endswith("line 2: not valid TOML: an integer of 4401 digits (at most 4300)")


def test_a_hex_integer_too_long_to_print_is_named_by_its_size(tmp_path: Path) -> None:
    # tomllib reads 0x + 5000 digits; the message then failed to print it (str() of an int over 4300 digits).
    msg = load(tmp_path, '[[host]]\nname = "a"\nunit = "u"\nport = 0x' + "f" * 5000 + "\n")
    assert msg.endswith('line 4: host "a": key "port" must be 1..65535, not an integer of about 6021 digits')


def test_a_setting_of_309_digits_is_refused_not_a_crash(tmp_path: Path) -> None:
    # fuzz: OverflowError from math.isfinite(10**309) in _settings.
    msg = load(tmp_path, "[settings]\nhealth_interval_s = " + "9" * 309 + "\n")
    assert 'line 2: [settings]: key "health_interval_s" must be at most 604800 seconds (a week), not an integer' in msg


def test_arrays_nested_too_deeply_are_not_a_traceback(tmp_path: Path) -> None:
    msg = load(tmp_path, "a = " + "[" * 5000 + "\n")
    assert msg.endswith("not valid TOML: arrays or inline tables nested too deeply")
