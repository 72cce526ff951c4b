"""``upwatch serve``'s pieces that need no server (tui/serve.py): what counts as loopback, the
command line each browser's app gets (the ``--listen`` address: tests/test_listen.py)."""

from __future__ import annotations

import os

from tui.serve import app_command, is_loopback


def test_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "gpu-box", "localhost.evil.example"))


def test_every_app_is_read_only() -> None:
    demo = app_command(demo=True, speed=5.0, config_path=None, hosts=())
    live = app_command(demo=False, speed=None, config_path="hosts.toml", hosts=("gpu-a", "h/u"))
    assert demo[1:] == ["-m", "tui.serve_app", "--read-only", "--demo", "--speed", "5"]
    assert live[1:] == ["-m", "tui.serve_app", "--read-only", "--config", os.path.abspath("hosts.toml"), "gpu-a", "h/u"]
