"""contrib/prometheus: the alerting rules pass ``promtool check rules``, their unit tests pass
``promtool test rules``, every alert has tests that see it fire and stay quiet, and each
``for:`` is really tested: the same tests fail on a copy of the rules with that ``for:`` set to 0m.
The scrape example passes ``promtool check config``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CONTRIB = Path(__file__).resolve().parent.parent / "contrib" / "prometheus"
RULES = CONTRIB / "upwatch-rules.yml"
TESTS = CONTRIB / "upwatch-rules.test.yml"

#: ``- alert: NAME`` and the ``for:`` two lines below it, as the rules file writes them.
ALERT_RE = re.compile(r"- alert: (\w+)\n\s+expr:.*?\n\s+for: (\w+)", re.S)


def promtool(*args: str, cwd: Path = CONTRIB) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def alerts() -> dict[str, str]:
    """Alert name → its ``for:`` in the shipped rules."""
    found = dict(ALERT_RE.findall(RULES.read_text()))
    assert len(found) == RULES.read_text().count("- alert: ")
    return found


def test_the_rules_are_valid_and_their_tests_pass() -> None:
    done = promtool("check", "rules", RULES.name)
    assert done.returncode == 0 and "SUCCESS: 7 rules found" in done.stdout, done.stdout + done.stderr
    done = promtool("test", "rules", TESTS.name)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_each_alert_an_operator_needs_is_there_and_tested_both_ways() -> None:
    names = alerts()
    assert set(names) == {"UpwatchRestartLoop", "UpwatchStartStalled", "UpwatchNotReadyAfterStart",
                          "UpwatchGpuMemoryOutsideUnit", "UpwatchServingStopped", "UpwatchProbeCannotRead",
                          "UpwatchExporterDown"}
    text = TESTS.read_text()
    for name in names:
        cases = re.findall(rf"alertname: {name}\n\s+exp_alerts:(.*?)\n", text)
        assert " []" in cases, f"{name}: no case where it must not fire"
        assert "" in cases, f"{name}: no case where it fires"


@pytest.mark.parametrize("name", [n for n, f in alerts().items() if f != "0m"])
def test_the_tests_fail_when_the_for_is_dropped(name: str, tmp_path: Path) -> None:
    text = RULES.read_text()
    m = next(m for m in ALERT_RE.finditer(text) if m.group(1) == name)
    start, end = m.span(2)
    (tmp_path / RULES.name).write_text(text[:start] + "0m" + text[end:])
    shutil.copy(TESTS, tmp_path / TESTS.name)
    done = promtool("test", "rules", TESTS.name, cwd=tmp_path)
    assert done.returncode == 1 and f"alertname: {name}," in done.stdout + done.stderr, done.stdout


def test_the_scrape_example_is_a_valid_prometheus_config(tmp_path: Path) -> None:
    shutil.copy(CONTRIB / "scrape.example.yml", tmp_path / "prometheus.yml")
    shutil.copy(RULES, tmp_path / RULES.name)
    done = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
