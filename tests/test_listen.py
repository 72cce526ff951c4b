"""The one ``--listen`` rule (tui/listen.py) of ``upwatch serve`` and ``upwatch exporter``: ``PORT``
and ``:PORT`` are 127.0.0.1 (unlike Prometheus' ``:PORT``, every address), ``HOST:PORT``,
``[IPv6]:PORT``; anything else is refused with the forms, by both commands alike."""

from __future__ import annotations

import pytest

from tui.cli_args import build_parser
from tui.listen import parse_listen, shown_address


@pytest.mark.parametrize(("text", "expected"), [
    ("8765", ("127.0.0.1", 8765)), (":9464", ("127.0.0.1", 9464)), ("0", ("127.0.0.1", 0)),
    ("127.0.0.1:8765", ("127.0.0.1", 8765)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("localhost:80", ("localhost", 80)),
    ("gpu-node-3.example:65535", ("gpu-node-3.example", 65535)), ("[::1]:9000", ("::1", 9000)),
    ("[::]:9464", ("::", 9464)), ("[fe80::1%eth0]:1", ("fe80::1%eth0", 1)),
])
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["", ":", "host:", "host:port", "h:70000", "127.0.0.1:65536", "127.0.0.1:-1",
                                  "[]:9464", "[gpu]:9464", "::1:9464", "::1", "[::1]", "9464x", "a b:1",
                                  "127.0.0.1:٣"])
def test_bad_listen_addresses_are_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"--listen takes PORT or :PORT \(127\.0\.0\.1:PORT\), HOST:PORT or \[IPv6\]:PORT"):
        parse_listen(text)


@pytest.mark.parametrize("command", ["serve", "exporter"])
def test_both_commands_take_and_refuse_the_same(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for text in ("8765", ":8765", "[::1]:8765", "0.0.0.0:8765"):
        assert parser.parse_args([command, "--listen", text]).listen == text
    with pytest.raises(SystemExit) as stop:
        parser.parse_args([command, "--listen", "::1:8765"])
    assert stop.value.code == 2
    assert "--listen takes PORT or :PORT" in capsys.readouterr().err
    assert ":PORT is 127.0.0.1:PORT" in parser._subparsers._group_actions[0].choices[command].format_help()  # type: ignore[union-attr]


def test_shown_address_brackets_ipv6() -> None:
    assert shown_address("::1", 9464) == "[::1]:9464" and shown_address("127.0.0.1", 0) == "127.0.0.1:0"
