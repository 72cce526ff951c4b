"""``upwatch serve``'s pieces that need no server (tui/serve.py): the ``--listen`` address, what
counts as loopback, the command line each browser's app gets."""

from __future__ import annotations

import os

import pytest

from tui.serve import app_command, is_loopback, parse_listen


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:8765", ("127.0.0.1", 8765)), ("8765", ("127.0.0.1", 8765)), ("0.0.0.0:0", ("0.0.0.0", 0)),
    ("[::1]:9000", ("::1", 9000)), ("localhost:80", ("localhost", 80)),
])
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["", ":8765", "host:", "host:port", "127.0.0.1:65536", "127.0.0.1:-1"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(text)


def test_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "gpu-box", "localhost.evil.example"))


def test_every_app_is_read_only() -> None:
    demo = app_command(demo=True, speed=5.0, config_path=None, hosts=())
    live = app_command(demo=False, speed=None, config_path="hosts.toml", hosts=("gpu-a", "h/u"))
    assert demo[1:] == ["-m", "tui.serve_app", "--read-only", "--demo", "--speed", "5"]
    assert live[1:] == ["-m", "tui.serve_app", "--read-only", "--config", os.path.abspath("hosts.toml"), "gpu-a", "h/u"]
