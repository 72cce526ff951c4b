"""The unit probe reads real ``systemctl show`` output (systemd 252.39) into :class:`UnitState`.

Fixtures: ``tests/fixtures/systemctl-show/`` (see its README.md for how each was made). The expected
values below are that README's table and the files' own lines; timestamps are exact epoch seconds.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.data.events import UnitState
from probes.sources.unit import SHOW_PROPERTIES, parse_properties, parse_show, parse_timestamp, show_argv

SHOW = Path(__file__).resolve().parent / "fixtures" / "systemctl-show"
NOW = 1_800_000_000.0

# The -p list every fixture was captured with (fixture README).
CAPTURED_P = ("Id,LoadState,ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStartTimestamp,"
              "ExecMainStartTimestampMonotonic,ExecMainCode,ExecMainStatus,ActiveEnterTimestamp,"
              "InactiveExitTimestamp,StateChangeTimestamp,Restart,RestartUSec,StartLimitBurst,"
              "StartLimitIntervalUSec,MemoryCurrent,ControlGroup")


def utc(text: str) -> float:
    """``2026-11-29 17:05:25`` (UTC) → epoch seconds, to write expectations readably."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


# file → (unit, load, active, sub, result, NRestarts, MainPID, ExecMainCode, ExecMainStatus,
#         MemoryCurrent, ExecMainStartTimestamp, ActiveEnterTimestamp, InactiveExitTimestamp,
#         StateChangeTimestamp)
CASES = {
    "active-running.txt": (
        "sglang.service", "loaded", "active", "running", "success", 0, 72, 0, 0, None,
        1795971889.0, 1795971889.0, 1795971889.0, 1795971889.0),
    "activating-auto-restart.txt": (
        "vllm-coder.service", "loaded", "activating", "auto-restart", "exit-code", 7, None, 1, 1, None,
        1795971925.0, 1795971925.0, 1795971925.0, 1795971925.0),
    "failed-start-limit-hit.txt": (
        "vllm.service", "loaded", "failed", "failed", "exit-code", 3, None, 1, 1, None,
        1795971902.0, 1795971902.0, 1795971904.0, 1795971909.0),
    "failed-start-limit-hit-after-success.txt": (
        "vllm-warmup.service", "loaded", "failed", "failed", "start-limit-hit", 3, None, 1, 0, None,
        1795971890.0, 1795971890.0, 1795971890.0, 1795971890.0),
    "inactive-dead-stopped.txt": (
        "vllm-embed.service", "loaded", "inactive", "dead", "success", 0, None, 2, 15, None,
        1795971889.0, 1795971889.0, 1795971889.0, 1795971891.0),
    "inactive-dead-never-started.txt": (
        "sglang-old.service", "loaded", "inactive", "dead", "success", 0, None, 0, 0, None,
        None, None, None, None),
    "not-found.txt": (
        "nosuch.service", "not-found", "inactive", "dead", "success", 0, None, 0, 0, None,
        None, None, None, None),
    "failed-sigkill.txt": (
        "sglang-7b.service", "loaded", "failed", "failed", "signal", 0, None, 2, 9, None,
        1795971889.0, 1795971889.0, 1795971889.0, 1795971892.0),
    "failed-oom-kill.derived.txt": (
        "sglang-7b.service", "loaded", "failed", "failed", "oom-kill", 0, None, 2, 9, None,
        1795971889.0, 1795971889.0, 1795971889.0, 1795971892.0),
    "active-running.gpu-node-1.derived.txt": (
        "sglang.service", "loaded", "active", "running", "success", 0, 3207, 0, 0, 71834742784,
        1741436938.0, 1741436938.0, 1741436938.0, 1741436938.0),
    "failed-start-limit-hit.gpu-node-2.derived.txt": (
        "vllm.service", "loaded", "failed", "failed", "exit-code", 3, None, 1, 1, None,
        1730776976.0, 1730776976.0, 1730777028.0, 1730777033.0),
}


def read(name: str) -> str:
    return (SHOW / name).read_text()


# --- every fixture ---------------------------------------------------------------------------------


def test_every_fixture_file_has_a_case() -> None:
    assert {p.name for p in SHOW.glob("*.txt")} == set(CASES)


def test_the_epoch_values_above_are_the_readme_times() -> None:
    assert utc("2026-11-29 17:05:25") == 1795971925.0
    assert utc("2025-03-08 12:28:58") == 1741436938.0
    assert utc("2024-11-05 03:23:53") == 1730777033.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_parses_to_the_readme_values(name: str) -> None:
    (unit, load, active, sub, result, n_restarts, main_pid, code, status, memory,
     started, active_since, inactive_exit, state_change) = CASES[name]
    state = parse_show(read(name), NOW)
    props = parse_properties(read(name))
    assert state == UnitState(
        time=NOW, unit=unit, load_state=load, active_state=active, sub_state=sub, result=result,
        n_restarts=n_restarts, main_pid=main_pid, started_at=started, active_since=active_since,
        memory_bytes=memory, exec_main_code=code, exec_main_status=status,
        inactive_exit_at=inactive_exit, started_monotonic_us=int(props["ExecMainStartTimestampMonotonic"]) or None,
        invocation_id=None, control_group=props["ControlGroup"] or None)
    assert parse_timestamp(props["InactiveExitTimestamp"]) == inactive_exit
    assert parse_timestamp(props["StateChangeTimestamp"]) == state_change


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_holds_exactly_the_properties_asked_for(name: str) -> None:
    # The fixtures were captured before InvocationID joined the list (CAPTURED_P).
    assert set(parse_properties(read(name))) == set(SHOW_PROPERTIES) - {"InvocationID"}
    assert set(CAPTURED_P.split(",")) == set(SHOW_PROPERTIES) - {"InvocationID"}


def test_exit_status_was_zero_for_every_file_even_not_found() -> None:
    rows = dict(line.split("\t") for line in (SHOW / "exit-codes.tsv").read_text().splitlines()[1:])
    assert rows["not-found.txt"] == "0" and set(rows.values()) == {"0"}
    assert set(rows) <= set(CASES)


def test_running_property_follows_the_states() -> None:
    assert parse_show(read("active-running.txt"), NOW).running
    assert not parse_show(read("activating-auto-restart.txt"), NOW).running
    assert not parse_show(read("not-found.txt"), NOW).running


def test_property_order_does_not_matter() -> None:
    text = read("active-running.gpu-node-1.derived.txt")
    shuffled = "\n".join(reversed(text.splitlines())) + "\n"
    assert parse_show(shuffled, NOW) == parse_show(text, NOW)


# --- the command -----------------------------------------------------------------------------------


def test_show_properties_are_the_fixtures_p_list() -> None:
    assert ",".join(SHOW_PROPERTIES) == CAPTURED_P + ",InvocationID"


def test_show_argv_shape() -> None:
    argv = show_argv("sglang.service")
    assert argv == ["systemctl", "show", "sglang.service", "-p", CAPTURED_P + ",InvocationID", "--no-pager"]


def test_show_argv_keeps_a_hostile_unit_name_as_one_item() -> None:
    argv = show_argv("x; rm -rf / #.service")
    assert argv[2] == "x; rm -rf / #.service" and len(argv) == 6


# --- timestamps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ("Tue 2024-03-05 14:03:11 UTC", 1709647391.0),
    ("Tue 2024-03-05 14:03:11 GMT", 1709647391.0),
    ("Tue 2024-03-05 21:03:11 +07", 1709647391.0),          # tzdata zone without a name
    ("Tue 2024-03-05 10:33:11 -0330", 1709647391.0),
    ("Tue 2024-03-05 19:33:11 +05:30", 1709647391.0),
    ("Tue 2024-03-05 15:03:11 CET", 1709647391.0),
    ("Tue 2024-03-05 09:03:11 EST", 1709647391.0),
    ("Wed 2024-07-03 16:00:00 CEST", utc("2024-07-03 14:00:00")),
    ("Wed 2024-07-03 10:00:00 EDT", utc("2024-07-03 14:00:00")),
    ("Wed 2024-07-03 07:00:00 PDT", utc("2024-07-03 14:00:00")),
    ("Wed 2024-07-03 23:30:00 ACST", utc("2024-07-03 14:00:00")),
    ("Sat 2021-12-11 14:25:57.177848 UTC", utc("2021-12-11 14:25:57") + 0.177848),  # --timestamp=us+utc
    ("@1700000000", 1700000000.0),                           # --timestamp=unix (v251+)
    ("Thu 2024-02-29 00:00:00 UTC", utc("2024-02-29 00:00:00")),
])
def test_parse_timestamp_known_zones(value: str, expected: float) -> None:
    assert parse_timestamp(value) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("value", [
    "",                                      # unset
    "n/a",
    "[not set]",
    "Tue 2024-03-05 14:03:11 CST",           # US -6, Cuba -5 or China +8: ambiguous
    "Tue 2024-03-05 14:03:11 IST",           # India, Ireland or Israel
    "Tue 2024-03-05 14:03:11 PST",           # US -8 or Philippines +8
    "Tue 2024-03-05 14:03:11 XYZT",          # unknown
    "Tue 2024-03-05 14:03:11",               # no zone: unknown
    "Tue 2024-02-30 14:03:11 UTC",           # no such day
    "Tue 2024-03-05 25:03:11 UTC",
    "Tue 2024-03-05 14:03:11 +99",
    "[bold]Tue 2024-03-05 14:03:11 UTC",
    "garbage",
    "2303348559",                            # a …Monotonic value is not a timestamp
])
def test_parse_timestamp_gives_none_rather_than_a_guess(value: str) -> None:
    assert parse_timestamp(value) is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_timestamp_never_raises(value: str) -> None:
    result = parse_timestamp(value)
    assert result is None or isinstance(result, float)


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    "hello world\n\x1b[31mnot systemd\x1b[0m\n",
    "Failed to connect to bus: No such file or directory\n",   # systemctl's own error, if merged
    "this line has no equals sign\n",
    "LoadState=loaded\nSubState=running\n",                    # no Id, no ActiveState
    "Id=sglang.service\n",                                     # no ActiveState
    "ActiveState=active\n",                                    # no Id
])
def test_not_systemctl_output_raises_a_clear_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="not systemctl show output"):
        parse_show(text, NOW)


def test_error_message_names_what_is_missing_and_quotes_the_input() -> None:
    with pytest.raises(ValueError) as info:
        parse_show("garbage\n", NOW)
    assert "no Id and no ActiveState" in str(info.value) and "'garbage'" in str(info.value)
    with pytest.raises(ValueError, match="empty output"):
        parse_show("", NOW)


def test_values_holding_markup_are_kept_verbatim_and_numbers_with_it_are_none() -> None:
    text = (read("active-running.txt")
            .replace("Id=sglang.service", "Id=[bold]sglang[/].service")
            .replace("Result=success", "Result=[bold]x[/]")
            .replace("NRestarts=0", "NRestarts=[bold]3")
            .replace("MainPID=72", "MainPID=[red]72"))
    state = parse_show(text, NOW)
    assert state.unit == "[bold]sglang[/].service"
    assert state.result == "[bold]x[/]"
    assert state.n_restarts is None and state.main_pid is None
    assert state.active_state == "active"


def test_a_line_without_equals_is_skipped() -> None:
    lines = read("activating-auto-restart.txt").splitlines()
    lines.insert(5, "this line has no equals sign")
    lines.insert(0, "=no name")
    state = parse_show("\n".join(lines) + "\n", NOW)
    assert state == parse_show(read("activating-auto-restart.txt"), NOW)


def test_a_value_holding_equals_signs_is_kept_whole() -> None:
    text = read("active-running.txt").replace("Result=success", "Result=a=b=c")
    assert parse_show(text, NOW).result == "a=b=c"


def test_old_systemd_without_nrestarts_gives_none() -> None:
    text = "".join(line + "\n" for line in read("active-running.txt").splitlines()
                   if not line.startswith("NRestarts="))
    assert parse_show(text, NOW).n_restarts is None


def test_memory_current_uint64_max_is_not_set() -> None:
    text = read("active-running.txt").replace("MemoryCurrent=[not set]", "MemoryCurrent=18446744073709551615")
    assert parse_show(text, NOW).memory_bytes is None


def test_only_the_first_unit_of_several_is_read() -> None:
    text = read("active-running.txt") + "\n" + read("not-found.txt")
    assert parse_show(text, NOW).unit == "sglang.service"


def test_crlf_line_ends_are_tolerated() -> None:
    text = read("failed-sigkill.txt").replace("\n", "\r\n")
    assert parse_show(text, NOW) == parse_show(read("failed-sigkill.txt"), NOW)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_show_raises_only_value_error(text: str) -> None:
    try:
        state = parse_show(text, NOW)
    except ValueError:
        return
    assert state.unit and state.active_state


def test_invocation_id_and_control_group_are_read() -> None:
    text = read("active-running.txt") + "InvocationID=0f5c6b0e2d1e4b0c9a8f7e6d5c4b3a29\n"
    state = parse_show(text, NOW)
    assert state.invocation_id == "0f5c6b0e2d1e4b0c9a8f7e6d5c4b3a29"
    assert state.control_group == "/system.slice/sglang.service"
    assert state.started_monotonic_us == 2303348559
    assert state.inactive_exit_at == 1795971889.0


def test_show_argv_asks_for_what_the_model_needs() -> None:
    props = show_argv("sglang.service")[4].split(",")
    for name in ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "MainPID", "InvocationID",
                 "ExecMainStartTimestampMonotonic", "ExecMainCode", "ExecMainStatus", "ControlGroup"):
        assert name in props
