"""Score the reader against real logs' expected readings, field by field (issue 25's first read).

    .venv/bin/python bench/first_read.py DIR [DIR ...] [--json]

For every ``NAME.log`` with a ``NAME.expected.json`` beside it (the conventions of
tests/fixtures/logs/README.md), the reading of ``upwatch replay --json`` is compared with the
expected one. Printed: per field, how many logs read it right; ``state+phase`` (both right);
``decisive line`` (for a log whose expected reading has one: the same line number and the expected
text in it; for one that has none: none found); ``confident wrong causes`` (a named cause, not
``unknown``, where the expected cause is another); then each log's misses.

To score the reader as it was at another commit (the honest first read, before any fix), run it
from a worktree of that commit: ``git worktree add /tmp/base REV && PYTHONPATH=/tmp/base python
bench/first_read.py DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from probes.sources.logfile import read_path

FIELDS = ("engine", "state", "phase", "phases_seen", "cause", "starts", "restart_loop", "progress")


def score(logs: list[Path]) -> dict[str, object]:
    """The per-field score of these logs: ``{"n": logs, field: right, ..., "misses": {name: [field]}}``."""
    right = dict.fromkeys(FIELDS + ("error", "state+phase"), 0)
    misses: dict[str, list[str]] = {}
    wrong_cause: list[str] = []
    for log in logs:
        exp = json.loads(log.with_name(log.stem + ".expected.json").read_text())
        got = read_path(str(log)).to_json()
        miss = []
        for f in FIELDS:
            if got[f] == exp.get(f):
                right[f] += 1
            else:
                miss.append(f"{f}: {json.dumps(got[f])} (expected {json.dumps(exp.get(f))})")
        if got["state"] == exp["state"] and got["phase"] == exp["phase"]:
            right["state+phase"] += 1
        e = got["error"]
        if exp["error_line"] is None:
            ok = e is None
        else:
            ok = e is not None and e["line"] == exp["error_line"] and exp["error_contains"] in e["text"]
        if ok:
            right["error"] += 1
        else:
            miss.append(f"error: line {e and e['line']} (expected {exp['error_line']}: {exp['error_contains']!r})")
        if got["cause"] not in (None, "unknown") and got["cause"] != exp.get("cause"):
            wrong_cause.append(f"{log.stem}: {got['cause']} (expected {exp.get('cause')})")
        if miss:
            misses[log.stem] = miss
    return {"n": len(logs), **right, "confident_wrong_causes": wrong_cause, "misses": misses}


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    dirs = [Path(a) for a in argv if a != "--json"]
    logs = sorted(p.with_name(p.name.replace(".expected.json", ".log"))
                  for d in dirs for p in d.glob("*.expected.json"))
    result = score(logs)
    if as_json:
        print(json.dumps(result, indent=1))
        return 0
    n = result["n"]
    print(f"{n} logs")
    for f in FIELDS + ("state+phase", "error"):
        print(f"  {f:14s} {result[f]:3d}/{n}  {100 * result[f] / max(n, 1):5.1f} %")  # type: ignore[operator]
    print(f"  confident wrong causes: {len(result['confident_wrong_causes'])}")  # type: ignore[arg-type]
    for line in result["confident_wrong_causes"]:  # type: ignore[attr-defined]
        print("    " + line)
    for name, miss in result["misses"].items():  # type: ignore[attr-defined]
        print(name)
        for m in miss:
            print("    " + m[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
