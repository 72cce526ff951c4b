"""docs/verdicts.md's rules table lists the verdict kinds in the order ``verdict_for`` checks them.

The order is read from the code itself: the ``kind="..."`` literals of ``verdict_for``'s source in
the order they occur, with each module helper it calls (``_stale(s)``, ``_unit_failed(s)``, ...)
replaced by the kinds of that helper's own source. A rule moved in the code, or a row moved in the
table, fails here with both orders shown.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from probes.fold import verdict

ROOT = Path(__file__).resolve().parent.parent
_KIND = re.compile(r'kind="(?P<kind>\w+)"|\b(?P<helper>_[a-z]\w*)\(')
_ROW_KINDS = re.compile(r"`(\w+)`")


def kinds_in_source(name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The verdict kinds the function ``name`` of :mod:`probes.fold.verdict` can return, in the order
    its source (helpers expanded in place) names them; a kind named twice is listed twice."""
    out: list[str] = []
    seen = seen | {name}  # its own ``def name(`` line, and no recursion
    for m in _KIND.finditer(inspect.getsource(getattr(verdict, name))):
        helper = m.group("helper")
        if m.group("kind") is not None:
            out.append(m.group("kind"))
        elif helper not in seen and inspect.isfunction(getattr(verdict, helper, None)):
            out += kinds_in_source(helper, seen)
    return out


def kinds_in_table() -> list[str]:
    """The kinds of the rules table of docs/verdicts.md, row by row (a row's kinds left to right)."""
    lines = (ROOT / "docs" / "verdicts.md").read_text().splitlines()
    head = lines.index("| kind | level | when | example |")
    rows = [ln for ln in lines[head + 2:] if ln.startswith("|")]
    rows = rows[:next((i for i, ln in enumerate(rows) if not ln.startswith("| `")), len(rows))]
    return [k for row in rows for k in _ROW_KINDS.findall(row.split("|")[1])]


def test_the_verdicts_table_lists_the_rules_in_the_order_they_are_checked() -> None:
    assert kinds_in_table() == kinds_in_source("verdict_for")


def test_every_listed_kind_is_checked_somewhere() -> None:
    # The reading of the source is not vacuous: it finds every kind views may key on.
    assert set(kinds_in_source("verdict_for")) == set(verdict.VERDICT_KINDS)
