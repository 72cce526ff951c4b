"""What an install carries: every module of probes/, tui/ and widgets/ is in a package the build
finds, so ``pipx install .`` (not editable) has all of upwatch (a fixed package list had missed the
layers of probes/ since they were made: such an install could not import probes.transport)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, find_packages

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_is_in_a_package_the_build_finds() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = config["packages"]["find"]["include"]
    found = set(find_packages(str(ROOT), include=include))
    dirs = set(find_namespace_packages(str(ROOT), include=include, exclude=["*.__pycache__"]))
    with_modules = {d for d in dirs if any((ROOT / d.replace(".", "/")).glob("*.py"))}
    assert with_modules and with_modules <= found, sorted(with_modules - found)
    assert {"probes.transport.replay", "probes.sources", "probes.fold", "tui", "widgets"} <= found


def test_the_files_the_app_reads_are_package_data() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {p for pattern in data["tui"] for p in (ROOT / "tui").glob(pattern) if p.is_file()}
    wanted = {p for p in (ROOT / "tui").rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
              and "__pycache__" not in p.parts}
    assert wanted and wanted <= shipped, sorted(str(p) for p in wanted - shipped)
