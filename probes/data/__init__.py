"""Frozen value types and the fixed vocabulary (phases, causes, the reading, host state, events).

Imports nothing else in :mod:`probes` (import-linter contract in ``pyproject.toml``).
"""
