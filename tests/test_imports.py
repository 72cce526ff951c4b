"""probes/ is the core: it never imports textual or rich (DESIGN.md, "Rooms"), and its subpackages
import only the layers below them (docs/architecture.md; import-linter contracts in pyproject.toml)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "probes.logs.reader" in result["modules"] and "probes.logs.engines.sglang" in result["modules"]
    assert result["ui"] == []


def test_import_linter_contracts_hold() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    assert exe.exists(), "import-linter is missing: pip install -e '.[test]'"
    proc = subprocess.run([str(exe)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 5 kept, 0 broken" in proc.stdout


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache"], capture_output=True, text=True, cwd=root)


#: The edges of the two import circles the layout removed (issue 14), and two more that would go
#: up the layers: put back on a scratch copy, each must break a contract.
BACK_EDGES = [
    ("probes/ops/actions.py", "probes.watch.watcher", "probes flows one way"),      # actions -> watch (HostSpec)
    ("probes/store/history.py", "probes.ops.actions", "probes flows one way"),      # history -> actions (data dir)
    ("probes/data/state.py", "probes.sources.download", "probes flows one way"),    # state -> download
    ("probes/data/state.py", "probes.logs.reader", "probes flows one way"),         # state -> reader (value types)
    ("probes/sources/unit.py", "probes.sources.download", "no import circles"),     # unit -> download -> unit
    ("probes/fold/model.py", "asyncio", "the fold is pure"),
]


@pytest.mark.parametrize(("module", "target", "contract"), BACK_EDGES)
def test_a_former_circle_edge_put_back_breaks_a_contract(tmp_path: Path, module: str, target: str,
                                                          contract: str) -> None:
    for name in ("probes", "tui", "widgets"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint(tmp_path).returncode == 0  # the copy itself keeps every contract
    path = tmp_path / module
    path.write_text(path.read_text() + f"\nimport {target}  # noqa: E402,F401\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0, proc.stdout
    broken = proc.stdout.split("Broken contracts", 1)[1]
    assert contract in broken and target.rsplit(".", 1)[-1] in broken, proc.stdout


def test_the_commands_that_never_connect_do_not_import_asyncssh() -> None:
    # asyncssh takes 0.15-0.25 s to import: replay (the command line's parser and the reader), the
    # config check and the demo must not pay for it.
    code = ("import sys, tui.cli, tui.replay, tui.config, tui.demo_app; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'asyncssh'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.strip() == "[]"


def test_replay_without_markdown_does_not_import_textual(tmp_path: Path) -> None:
    # `replay` (text and --json) imported the report's module for a helper it uses only with
    # --markdown, and textual with it: 0.19 s of a 0.4 s start, 8-10x a bare loop over 200k lines.
    log = tmp_path / "one.log"
    log.write_text("INFO 02-12 19:33:39 hello\n")
    code = ("import sys, runpy; sys.argv = ['upwatch', 'replay', '--json', sys.argv[1]]\n"
            "try:\n    runpy.run_module('tui', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'asyncssh', 'httpx'}), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_replay_of_a_text_log_imports_no_notices_and_no_subprocess(tmp_path: Path) -> None:
    # `replay` reads a file: the notices (probes.fold.notify and the host state and verdict it
    # imports, 16 ms: the configuration's schema named its channels) and subprocess (for a binary
    # journal only) are other commands' start-up.
    log = tmp_path / "one.log"
    log.write_text("[2025-03-08 12:29:42] INFO:     10.0.0.11:42306 - \"GET /health HTTP/1.1\" 200 OK\n")
    code = ("import sys, runpy; sys.argv = ['upwatch', 'replay', '--json', sys.argv[1]]\n"
            "try:\n    runpy.run_module('tui', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(set(sys.modules) & {'probes.fold.notify', 'probes.data.state', 'probes.fold.verdict', "
            "'subprocess'}), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
