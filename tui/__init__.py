"""Wiring: the command line, the dashboard app, its screens and actions, the headless commands."""

#: upwatch's version (as in pyproject.toml): ``--version`` and the reports say it.
__version__ = "0.1.0"
