"""The wrappers people put around a server's log, as functions of the log's lines.

Each wrapper turns the lines of a bare log (bytes, no line ends) into the bytes someone gets when
the log passes through it (``docker compose logs``, ``journalctl``, a terminal copy, PowerShell's
``>``), and says, for every line of its output, which line of the bare log it came from (``0``: a
line of the wrapper's own). tests/test_wrappers.py reads every real fixture through each of them;
bench/wrapper_matrix.py prints the logs x wrappers table.

Every form here is one that really occurs (named beside it); none is a made-up format.
"""

from __future__ import annotations

from collections.abc import Callable

#: (output bytes, for each output line its bare line number or 0)
Wrapped = tuple[bytes, list[int]]


def _per_line(fn: Callable[[int, bytes], bytes], end: bytes = b"\n") -> Callable[[list[bytes]], Wrapped]:
    def wrap(lines: list[bytes]) -> Wrapped:
        return b"".join(fn(i, line) + end for i, line in enumerate(lines, 1)), list(range(1, len(lines) + 1))
    return wrap


def _interleave(lines: list[bytes], prefix: bytes, others: list[bytes], every: int) -> Wrapped:
    """``docker compose logs``: the service's lines behind its prefix, other services' lines
    between them (compose colours nothing when its output is not a terminal)."""
    out: list[bytes] = []
    where: list[int] = []
    k = 0
    for i, line in enumerate(lines, 1):
        if i % every == 0:
            out.append(others[k % len(others)])
            where.append(0)
            k += 1
        out.append(prefix + line)
        where.append(i)
    return b"".join(x + b"\n" for x in out), where


# Real lines of the services that sit beside a model server in compose files: Redis 7's ready
# line, PostgreSQL 16's, nginx's access log, and a FastAPI app behind Uvicorn (the app's own
# "Application startup complete." is not the engine's).
_NEIGHBOURS = [
    b"redis-1     | 1:M 08 Mar 2025 12:30:00.104 * Ready to accept connections tcp",
    b"db-1        | 2025-03-08 12:30:00.211 UTC [1] LOG:  database system is ready to accept connections",
    b'proxy-1     | 10.0.0.7 - - [08/Mar/2025:12:30:01 +0000] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.29"',
    b"api-1       | INFO:     Application startup complete.",
    b"api-1       | INFO:     Uvicorn running on http://0.0.0.0:8080 (Press CTRL+C to quit)",
]


def _hard_wrap(width: int) -> Callable[[list[bytes]], Wrapped]:
    """A terminal copy: every line longer than the terminal is cut into rows of ``width``
    characters (a line with ``\\r`` frames is a progress bar the terminal redrew: it is copied as
    it was, unwrapped, since only its last frame was on the screen)."""
    def wrap(lines: list[bytes]) -> Wrapped:
        out: list[bytes] = []
        where: list[int] = []
        for i, line in enumerate(lines, 1):
            text = line.decode("utf-8", "replace")
            if b"\r" in line or len(text) <= width:
                out.append(line)
                where.append(i)
                continue
            for j in range(0, len(text), width):
                out.append(text[j:j + width].encode())
                where.append(i)
        return b"".join(x + b"\n" for x in out), where
    return wrap


def _around(head: list[bytes], tail: list[bytes]) -> Callable[[list[bytes]], Wrapped]:
    def wrap(lines: list[bytes]) -> Wrapped:
        body = head + lines + tail
        where = [0] * len(head) + list(range(1, len(lines) + 1)) + [0] * len(tail)
        return b"".join(x + b"\n" for x in body), where
    return wrap


def _blank_after(lines: list[bytes]) -> Wrapped:
    """A chat or forum that turned each line into a paragraph: a blank line after every line."""
    where: list[int] = []
    for i in range(1, len(lines) + 1):
        where += [i, 0]
    return b"".join(line + b"\n\n" for line in lines), where


def _utf16(lines: list[bytes]) -> Wrapped:
    """PowerShell 5's ``>`` (``Out-File``): the text as UTF-16 LE with a byte-order mark, CRLF."""
    text = b"".join(line + b"\r\n" for line in lines).decode("utf-8", "replace")
    return b"\xff\xfe" + text.encode("utf-16-le"), list(range(1, len(lines) + 1))


WRAPPERS: dict[str, Callable[[list[bytes]], Wrapped]] = {
    # docker logs -t / docker compose logs -t: RFC 3339 with nanoseconds, UTC
    "docker-logs-t": _per_line(lambda i, line: b"2025-03-08T12:30:00.123456789Z " + line),
    # podman logs -t: RFC 3339 with nanoseconds and a numeric offset
    "podman-logs-t": _per_line(lambda i, line: b"2025-03-08T12:30:00.123456789+00:00 " + line),
    "kubectl-prefix": _per_line(lambda i, line: b"[pod/sglang-7d9f/sglang] " + line),
    "kubectl-prefix-timestamps": _per_line(
        lambda i, line: b"[pod/sglang-7d9f/sglang] 2025-03-08T12:30:00.123456789Z " + line),
    "compose": _per_line(lambda i, line: b"server-1  | " + line),
    # docker compose up on a terminal: the service name coloured, then the bar reset
    "compose-ansi": _per_line(lambda i, line: b"\x1b[36mserver-1  |\x1b[0m " + line),
    "compose-interleaved": lambda lines: _interleave(lines, b"server-1    | ", _NEIGHBOURS, 3),
    # Ray forwards a worker's output behind its actor and pid, coloured (cyan) on a terminal
    "ray-ansi-prefix": _per_line(lambda i, line: b"\x1b[36m(ServeReplica:default:LLMServer pid=2613)\x1b[0m " + line),
    "ray-prefix": _per_line(lambda i, line: b"(ServeReplica:default:LLMServer pid=2613) " + line),
    "grep-n": _per_line(lambda i, line: str(i).encode() + b":" + line),
    # A date in front whose first number grows (the new year) is no grep -n number: the log must
    # not lose its dates from there on (it did: 2025 > 2024 read as two growing line numbers).
    "dated-over-new-year": _per_line(
        lambda i, line: (b"2024-12-31 23:59:59 " if i < 8 else b"2025-01-01 00:00:00 ") + line),
    # journalctl -o short / short-iso / short-precise, with identifiers a unit really gets
    # (ExecStart=/usr/bin/env ..., a wrapper script, the interpreter)
    "journal-short": _per_line(lambda i, line: b"Mar 08 12:30:00 gpu-node-1 python3[2613]: " + line),
    "journal-short-iso": _per_line(lambda i, line: b"2025-03-08T12:30:00+0000 gpu-node-1 env[2613]: " + line),
    "journal-short-precise": _per_line(
        lambda i, line: b"Mar 08 12:30:00.123456 gpu-node-1 start-server.sh[2613]: " + line),
    "crlf": _per_line(lambda i, line: line, end=b"\r\n"),
    "quoted": _per_line(lambda i, line: b"> " + line),
    "blank-after": _blank_after,
    "wrap-120": _hard_wrap(120),
    "wrap-200": _hard_wrap(200),
    "shell-nohup": _around(
        [b"user@gpu-node-1:~$ nohup ./start-server.sh > server.log 2>&1 &", b"[1] 2613",
         b"user@gpu-node-1:~$ nohup: ignoring input", b"", b"user@gpu-node-1:~$ tail -f server.log"],
        [b"^C", b"user@gpu-node-1:~$ "]),
    "utf16": _utf16,
}


def split_log(data: bytes) -> list[bytes]:
    """The lines of a bare log, without their ``\\n`` (a last empty line dropped)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines
