"""Every real log fixture gives exactly its expected reading, field by field.

``tests/fixtures/logs`` are the shared fixtures (see its README for the conventions);
``tests/fixtures/logs-extra`` are more real logs found in public issue threads, same conventions.
"""

from __future__ import annotations

import json

import pytest

from conftest import log_cases
from probes.sources.logfile import read_path

CASES = log_cases()


def test_there_are_enough_fixtures() -> None:
    # 23 shared + 63 of our own; a glob that silently matched nothing would make the table vacuous.
    assert len(CASES) >= 86


@pytest.mark.parametrize("log", CASES, ids=lambda p: p.stem)
def test_fixture_reading(log) -> None:
    expected = json.loads(log.with_name(log.stem + ".expected.json").read_text())
    reading = read_path(str(log))
    got = reading.to_json()
    assert got["engine"] == expected["engine"]
    assert got["state"] == expected["state"]
    assert got["phase"] == expected["phase"]
    assert got["phases_seen"] == expected["phases_seen"]
    assert got["cause"] == expected["cause"]
    assert got["starts"] == expected["starts"]
    assert got["restart_loop"] == expected["restart_loop"]
    assert got["progress"] == expected["progress"]
    assert got["service"] == expected.get("service")
    if expected["error_line"] is None:
        assert got["error"] is None
    else:
        assert got["error"] is not None, "no decisive line found"
        assert got["error"]["line"] == expected["error_line"]
        assert expected["error_contains"] in got["error"]["text"]
        # The decisive text is that line of the file, escape codes removed.
        raw = log.read_bytes().split(b"\n")[expected["error_line"] - 1].decode("utf-8", "replace")
        assert expected["error_contains"] in raw
    # A failed start always comes with something an operator can act on.
    assert bool(got["hint"]) == (got["state"] == "failed")
    # Phase marks point at real lines, in order, each holding the text shown.
    lines = [line.decode("utf-8", "replace") for line in log.read_bytes().split(b"\n")]
    assert [m["line"] for m in got["phases"]] == sorted(m["line"] for m in got["phases"])
    for mark in got["phases"]:
        assert 1 <= mark["line"] <= len(lines)
