"""The logs x wrappers matrix of tests/test_wrappers.py, as a table (issue 25, format invariance).

    .venv/bin/python bench/wrapper_matrix.py

For each wrapper: how many fixture logs read exactly as they do bare, and which fields changed in
the others (counts), then the pairs that differ.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_wrappers import CASES, differences, reading_key  # noqa: E402
from wrapping import WRAPPERS, split_log  # noqa: E402


def main() -> int:
    changed: dict[str, list[tuple[str, list[str]]]] = collections.defaultdict(list)
    for log in CASES:
        data = log.read_bytes()
        bare = reading_key(data)
        for name, wrap in WRAPPERS.items():
            out, where = wrap(split_log(data))
            diff = differences(bare, reading_key(out, where))
            if diff:
                changed[name].append((log.stem, diff))
    n = len(CASES)
    print(f"{n} logs x {len(WRAPPERS)} wrappers = {n * len(WRAPPERS)} readings; "
          f"{n * len(WRAPPERS) - sum(map(len, changed.values()))} as bare")
    print("| wrapper | same as bare | fields that changed |\n|---|---|---|")
    for name in WRAPPERS:
        fields = collections.Counter(f for _, diff in changed[name] for f in diff)
        print(f"| {name} | {n - len(changed[name])}/{n} | {', '.join(f'{k} {v}' for k, v in fields.items()) or '-'} |")
    for name, pairs in changed.items():
        for stem, diff in pairs:
            print(f"{name}: {stem}: {', '.join(diff)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
