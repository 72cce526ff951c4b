"""Shared paths for the tests. Every fixture a test reads lives under tests/fixtures/."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = FIXTURES / "logs"
EXTRA_LOGS = FIXTURES / "logs-extra"
JOURNAL = FIXTURES / "journal"


def log_cases() -> list[Path]:
    """Every ``NAME.log`` that has a ``NAME.expected.json`` beside it, shared and our own."""
    return sorted(p.with_suffix(".log") for d in (LOGS, EXTRA_LOGS)
                  for p in (q.with_name(q.name.replace(".expected.json", "")) for q in d.glob("*.expected.json")))
