"""probes/ is the core: it never imports textual or rich (DESIGN.md, "Rooms")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = """
import importlib, json, pkgutil, sys
import probes
names = ["probes"] + [m.name for m in pkgutil.walk_packages(probes.__path__, "probes.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "ui": sorted(m for m in sys.modules
                  if m.split(".")[0] in ("textual", "rich", "tui", "widgets"))}))
"""


def test_no_probes_module_loads_a_ui_library_in_a_fresh_interpreter() -> None:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert "probes.reader" in result["modules"] and "probes.engines.sglang" in result["modules"]
    assert result["ui"] == []


def test_import_linter_contracts_hold() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    assert exe.exists(), "import-linter is missing: pip install -e '.[test]'"
    proc = subprocess.run([str(exe)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 2 kept, 0 broken" in proc.stdout
