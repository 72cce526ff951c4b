"""A fake GPU host on a real OpenSSH sshd (shared/TESTBED.md sections 1, 3 and 5).

:func:`start_testhost` starts the sshd of ``tests/sshd.py`` with ``SetEnv PATH=<shims>:...
UPWATCH_TEST_STATE=<state>``, so over SSH the host has:

* ``journalctl``: the **real** ``/usr/bin/journalctl --file=<state>/test.journal``; entries are
  appended with the real ``systemd-journal-remote`` (:meth:`TestHost.append`), one ``_BOOT_ID``
  (``journalctl -f`` follows only the latest boot). Each call's argv goes to
  ``state/journalctl.log``. With ``state/journalctl.before-236`` it refuses ``--output-fields``
  as systemd 235 and older do (getopt's ``unrecognized option``, exit 1).
* ``systemctl``: ``show`` prints ``state/systemctl-show.txt`` (a real ``systemctl show`` fixture;
  missing: the real ``not-found`` fixture with the asked unit's ``Id``); any other verb appends its
  argv to ``state/systemctl.log`` and exits 0.
* ``nvidia-smi``: ``--query-gpu=...`` prints ``state/query-gpu.csv`` (real fixture rows), again every
  ``-l S`` seconds or ``-lms MS`` milliseconds, re-reading the file each time;
  ``--query-compute-apps=...`` prints ``state/compute-apps.csv``. With ``state/nvidia-smi.error``
  it prints that text and exits with ``state/nvidia-smi.rc`` (default 9). A query field list that
  differs from ``state/query-gpu.fields`` fails like the real tool (``Field "x" is not a valid
  field to query.``, exit 2), so the fixture's column order and upwatch's request cannot drift.
  :meth:`TestHost.remove_shim` makes it missing (``sh: 1: exec: nvidia-smi: not found``, 127).
* ``sudo``: logs its argv to ``state/sudo.log``, drops ``-n`` and runs the rest.
* an HTTP server on the test process's loopback (:class:`HealthServer`), which is the remote
  loopback too, since sshd runs here.

Every shim is a ``#!/bin/sh`` script; every file under ``state/`` may be rewritten while a test runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sshd import Sshd, SshdError, descendants, start_sshd

FIXTURES = Path(__file__).parent / "fixtures"
JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
#: The one boot of every test journal (``journalctl -f`` shows only the latest boot).
BOOT_ID = "0123456789abcdef0123456789abcdef"
MACHINE_ID = "a0000000000000000000000000000001"

#: The field order of ``tests/fixtures/nvidia-smi/query-gpu.*.csv`` (their README); the nvidia-smi
#: shim rejects any other ``--query-gpu`` list.
QUERY_GPU_FIELDS = ("index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,"
                    "power.draw,power.limit")

SHIMS: dict[str, str] = {
    "journalctl": r'''#!/bin/sh
echo "$*" >> "$UPWATCH_TEST_STATE/journalctl.log"
if [ -e "$UPWATCH_TEST_STATE/journalctl.before-236" ]; then
  for a in "$@"; do
    case "$a" in
      --output-fields*) echo "journalctl: unrecognized option '$a'" >&2; exit 1 ;;
    esac
  done
fi
exec /usr/bin/journalctl --file="$UPWATCH_TEST_STATE/test.journal" "$@"
''',
    "sudo": r'''#!/bin/sh
echo "$*" >> "$UPWATCH_TEST_STATE/sudo.log"
[ "$1" = "-n" ] && shift
exec "$@"
''',
    "systemctl": r'''#!/bin/sh
S="$UPWATCH_TEST_STATE"
verb=
unit=
for a in "$@"; do
  case "$a" in
    -p|--property) skip=1; continue;;
    -*) continue;;
  esac
  if [ -n "$skip" ]; then skip=; continue; fi
  if [ -z "$verb" ]; then verb=$a; elif [ -z "$unit" ]; then unit=$a; fi
done
if [ "$verb" = show ]; then
  if [ -f "$S/systemctl-show.txt" ]; then exec cat "$S/systemctl-show.txt"; fi
  exec sed "s/^Id=.*/Id=$unit/" "$S/not-found.txt"
fi
echo "$*" >> "$S/systemctl.log"
exit 0
''',
    "nvidia-smi": r'''#!/bin/sh
S="$UPWATCH_TEST_STATE"
echo "$*" >> "$S/nvidia-smi.log"
if [ -f "$S/nvidia-smi.error" ]; then
  cat "$S/nvidia-smi.error"
  rc=9; [ -f "$S/nvidia-smi.rc" ] && rc=$(cat "$S/nvidia-smi.rc")
  exit "$rc"
fi
what=; every=
while [ $# -gt 0 ]; do
  case "$1" in
    --query-gpu=*) what=query-gpu; fields=${1#--query-gpu=};;
    --query-compute-apps=*) what=compute-apps;;
    -l|--loop) every=$2; shift;;
    --loop=*) every=${1#--loop=};;
    -lms|--loop-ms) every=$(printf '%d.%03d' $(($2 / 1000)) $(($2 % 1000))); shift;;
    --loop-ms=*) ms=${1#--loop-ms=}; every=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)));;
  esac
  shift
done
if [ -z "$what" ]; then echo "nvidia-smi shim: only --query-gpu and --query-compute-apps" >&2; exit 2; fi
if [ "$what" = query-gpu ] && [ -f "$S/query-gpu.fields" ] && [ "$fields" != "$(cat "$S/query-gpu.fields")" ]; then
  echo "Field \"$fields\" is not a valid field to query."
  echo
  exit 2
fi
while :; do
  cat "$S/$what.csv" || exit 1
  [ -n "$every" ] || exit 0
  sleep "$every"
done
''',
}

_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "upwatch-test"}]}
_COMPLETION = {"id": "cmpl-test", "object": "text_completion", "created": 0, "model": "m",
               "choices": [{"index": 0, "text": " ok", "logprobs": None, "finish_reason": "length"}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class HealthServer:
    """An LLM server's HTTP face on ``127.0.0.1:port``, served from a thread of the test process.

    ``mode``: ``200`` (GET /health 200 with an empty body, GET /v1/models a one-model list,
    POST /v1/completions a one-token completion, anything else 404), ``503`` (every request 503,
    empty body: SGLang while it starts) or ``"refused"`` (the socket is closed: connections are
    refused). Switching back from ``"refused"`` binds the same port again. ``requests`` records
    ``(method, path)`` of every request served, oldest first.
    """

    def __init__(self, mode: int | str = 200) -> None:
        self.port = 0
        self.requests: list[tuple[str, str]] = []
        self._mode: int | str = "refused"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._open: set[Any] = set()  # accepted sockets, closed when the server goes away
        self.set_mode(mode)

    @property
    def mode(self) -> int | str:
        """The current mode: ``200``, ``503`` or ``"refused"``."""
        return self._mode

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: int | str) -> None:
        """Switch to ``mode`` (``200``, ``503`` or ``"refused"``); returns once it is in effect."""
        if mode not in (200, 503, "refused"):
            raise ValueError(f"health mode must be 200, 503 or 'refused', not {mode!r}")
        with self._lock:
            self._mode = mode
            if mode == "refused":
                self._stop()
            elif self._server is None:
                self._start()

    def close(self) -> None:
        """Stop serving for good (same as ``"refused"``)."""
        self.set_mode("refused")

    def _start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass

            def setup(self) -> None:
                owner._open.add(self.request)
                super().setup()

            def finish(self) -> None:
                owner._open.discard(self.request)
                super().finish()

            def _reply(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
                self.send_response(status)
                if body:
                    self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                owner.requests.append((method, path))
                if owner._mode != 200:
                    self._reply(503)
                elif method == "GET" and path == "/health":
                    self._reply(200)
                elif method == "GET" and path == "/v1/models":
                    self._reply(200, json.dumps(_MODELS).encode())
                elif method == "POST" and path == "/v1/completions":
                    self._reply(200, json.dumps(_COMPLETION).encode())
                else:
                    self._reply(404, b'{"detail":"Not Found"}')

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                self._serve("POST")

        ThreadingHTTPServer.allow_reuse_address = True
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"health:{self.port}", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        for sock in list(self._open):  # a dead server's kept-alive connections die with it
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._open.clear()
        if self._thread is not None:
            self._thread.join(5)
        self._server = self._thread = None


def export_entry(fields: Mapping[str, str | bytes]) -> bytes:
    """One entry in the journal export format (``KEY=VALUE`` lines; a value holding ``\\n`` in the
    binary form ``KEY\\n<le64 length><bytes>\\n``), ending with the blank line."""
    out = bytearray()
    for key, value in fields.items():
        raw = value if isinstance(value, bytes) else value.encode()
        if b"\n" in raw:
            out += key.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
        else:
            out += key.encode() + b"=" + raw + b"\n"
    return bytes(out + b"\n")


class FakeGpuState:
    """The fake ``nvidia-smi``'s state files, shared by :class:`TestHost` and the real-systemd
    host of ``tests/systemd_host.py`` (both have a ``state`` folder the shim reads)."""

    state: Path

    def set_gpus(self, rows: str | Iterable[str]) -> None:
        """Make ``nvidia-smi --query-gpu`` print ``rows`` (CSV lines, ``QUERY_GPU_FIELDS`` order,
        one per GPU); takes effect at a looping shim's next sample."""
        text = rows if isinstance(rows, str) else "".join(r.rstrip("\n") + "\n" for r in rows)
        _replace(self.state / "query-gpu.csv", text.encode())

    def set_gpus_from_fixture(self, name: str = "query-gpu.h100x8-sglang-tp8.loop.csv", *,
                              sample: int = 0, gpus: int = 8) -> None:
        """Rows ``sample*gpus`` .. ``+gpus`` of ``tests/fixtures/nvidia-smi/<name>``: one sample of
        every GPU (the loop fixture holds 24 samples of 8 GPUs)."""
        lines = (FIXTURES / "nvidia-smi" / name).read_text().splitlines()
        rows = lines[sample * gpus:(sample + 1) * gpus]
        if len(rows) != gpus:
            raise ValueError(f"{name} has no sample {sample} of {gpus} GPUs")
        self.set_gpus(rows)

    def set_compute_apps(self, rows: str | Iterable[str]) -> None:
        """Make ``nvidia-smi --query-compute-apps`` print ``rows`` (may be empty)."""
        text = rows if isinstance(rows, str) else "".join(r.rstrip("\n") + "\n" for r in rows)
        _replace(self.state / "compute-apps.csv", text.encode())



@dataclass
class TestHost(FakeGpuState):
    """A running fake GPU host; make it with :func:`start_testhost`, end it with :meth:`stop`.

    Attributes:
        sshd: the real sshd (its ``ssh_config`` has ``Host testhost``).
        state: the folder the shims read (``UPWATCH_TEST_STATE``).
        unit: the unit :meth:`append` writes entries for, e.g. ``sglang.service``.
        hostname: ``_HOSTNAME`` of appended entries.
        health: the HTTP server, or None (network-namespace hosts have none).
    """

    __test__ = False  # not a pytest test class

    sshd: Sshd
    state: Path
    unit: str = "sglang.service"
    hostname: str = "gpu-node-1"
    health: HealthServer | None = None
    pid: int = 4242
    _realtime_us: int = 0
    _monotonic_us: int = 1_000_000
    _appended: int = 0
    _saved_shims: dict[str, str] = field(default_factory=dict)

    # --- reaching it -------------------------------------------------------------------------------

    @property
    def shims(self) -> Path:
        """The folder first on the remote PATH."""
        return self.sshd.shims

    @property
    def journal(self) -> Path:
        """``state/test.journal``: the file the journalctl shim reads."""
        return self.state / "test.journal"

    @property
    def target(self) -> str:
        """``user@address:port`` for :class:`~probes.transport.ssh.SshRunner` (use with ``config=[]``)."""
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        return f"{user}@{self.sshd.listen}:{self.sshd.port}"

    def runner_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``SshRunner(self.target, **kw)``: our known_hosts and client key,
        no SSH config, a 5 s connect timeout."""
        return {"known_hosts": self.sshd.known_hosts, "client_keys": [self.sshd.client_key],
                "config": [], "connect_timeout": 5.0}

    def runner(self, **kw: Any) -> Any:
        """A new :class:`~probes.transport.ssh.SshRunner` on this host (``kw`` overrides :meth:`runner_kwargs`)."""
        from probes.transport.ssh import SshRunner

        return SshRunner(self.target, **{**self.runner_kwargs(), **kw})

    def ssh_argv(self, *command: str) -> list[str]:
        """The OpenSSH client command line that runs ``command`` here: ``ssh -F <ssh_config> testhost ...``."""
        return ["ssh", "-F", str(self.sshd.ssh_config), "testhost", *command]

    # --- state files -------------------------------------------------------------------------------

    def set_systemctl_show(self, fixture: str | Path | None) -> None:
        """Make ``systemctl show`` print ``fixture`` (a path, or a name under
        ``tests/fixtures/systemctl-show/``); None: the unit is not found."""
        dest = self.state / "systemctl-show.txt"
        if fixture is None:
            dest.unlink(missing_ok=True)
            return
        src = Path(fixture) if "/" in str(fixture) else FIXTURES / "systemctl-show" / str(fixture)
        _replace(dest, src.read_bytes())

    def set_nvidia_error(self, fixture: str | None, rc: int | None = None) -> None:
        """Make every nvidia-smi call print ``tests/fixtures/nvidia-smi/<fixture>`` and exit ``rc``
        (default: the code ``exit-codes.tsv`` gives that file, else 9); None: work again."""
        if fixture is None:
            for name in ("nvidia-smi.error", "nvidia-smi.rc"):
                (self.state / name).unlink(missing_ok=True)
            return
        if rc is None:
            codes = dict(line.split("\t") for line in
                         (FIXTURES / "nvidia-smi" / "exit-codes.tsv").read_text().splitlines()[1:] if line)
            rc = int(codes.get(fixture, "9"))
        _replace(self.state / "nvidia-smi.rc", f"{rc}\n".encode())
        _replace(self.state / "nvidia-smi.error", (FIXTURES / "nvidia-smi" / fixture).read_bytes())

    def remove_shim(self, name: str) -> None:
        """Delete the ``name`` shim (e.g. ``nvidia-smi``): the remote shell then says ``not found``
        and exits 127. :meth:`restore_shim` puts it back."""
        path = self.shims / name
        self._saved_shims[name] = path.read_text()
        path.unlink()

    def restore_shim(self, name: str) -> None:
        """Put back a shim removed by :meth:`remove_shim`."""
        _write_script(self.shims / name, self._saved_shims.pop(name))

    def log(self, name: str) -> list[str]:
        """Lines of ``state/<name>`` (``systemctl.log``, ``sudo.log``, ``nvidia-smi.log``); [] if absent."""
        path = self.state / name
        return path.read_text().splitlines() if path.exists() else []

    # --- the journal -----------------------------------------------------------------------------

    def append(self, entries: Iterable[Mapping[str, str | bytes]]) -> int:
        """Append entries to ``state/test.journal`` with the real ``systemd-journal-remote``.

        Each entry's fields go over these defaults: ``_BOOT_ID`` (:data:`BOOT_ID`), ``_SYSTEMD_UNIT``
        (:attr:`unit`), ``__REALTIME_TIMESTAMP`` (now, µs, strictly increasing),
        ``__MONOTONIC_TIMESTAMP`` (µs, strictly increasing), ``_PID``, ``PRIORITY`` 6,
        ``SYSLOG_IDENTIFIER`` (the unit's stem), ``_HOSTNAME``, ``_TRANSPORT=stdout``.
        ``MESSAGE`` is the caller's. Returns when journal-remote has exited (about 5-20 ms).

        Returns:
            The number of entries appended.

        Raises:
            RuntimeError: journal-remote failed (its stderr is in the message).
        """
        blob = bytearray()
        count = 0
        for given in entries:
            now = time.time_ns() // 1000
            self._realtime_us = max(self._realtime_us + 1, now)
            self._monotonic_us = max(self._monotonic_us + 1, time.monotonic_ns() // 1000)
            fields: dict[str, str | bytes] = {
                "__REALTIME_TIMESTAMP": str(self._realtime_us),
                "__MONOTONIC_TIMESTAMP": str(self._monotonic_us),
                "_BOOT_ID": BOOT_ID, "_MACHINE_ID": MACHINE_ID,
                "PRIORITY": "6", "SYSLOG_FACILITY": "3",
                "SYSLOG_IDENTIFIER": self.unit.split(".")[0],
                "_PID": str(self.pid), "_UID": "0", "_GID": "0",
                "_COMM": "python3", "_HOSTNAME": self.hostname, "_TRANSPORT": "stdout",
                "_SYSTEMD_UNIT": self.unit, "_SYSTEMD_CGROUP": f"/system.slice/{self.unit}",
            }
            fields.update(given)
            blob += export_entry(fields)
            count += 1
        if count:
            done = subprocess.run([JOURNAL_REMOTE, "-o", str(self.journal), "-"], input=bytes(blob),
                                  capture_output=True)
            if done.returncode != 0:
                raise RuntimeError(f"{JOURNAL_REMOTE} exited {done.returncode}: "
                                   f"{done.stderr.decode(errors='replace').strip()[-500:]}")
            self._appended += count
        return count

    def append_log_lines(self, lines: Iterable[str], **fields: str) -> int:
        """Append one entry per line (``MESSAGE`` = the line without its ``\\n``; ``fields`` go into
        every entry, e.g. ``PRIORITY="3"``). Returns the number appended."""
        return self.append({**fields, "MESSAGE": line.rstrip("\n")} for line in lines)

    def seed_log(self, name: str = "sglang-ok-01.log", *, limit: int | None = None) -> list[str]:
        """Append the lines of the real startup log ``tests/fixtures/logs/<name>`` (the first
        ``limit`` lines when given) as entries of :attr:`unit`. Returns the lines appended."""
        text = (FIXTURES / "logs" / name).read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if limit is not None:
            lines = lines[:limit]
        self.append_log_lines(lines)
        return lines

    @property
    def appended(self) -> int:
        """How many entries :meth:`append` has written so far."""
        return self._appended

    # --- processes ---------------------------------------------------------------------------------

    def remote_processes(self) -> list[tuple[int, str]]:
        """What runs "on the host" for its SSH clients: every process below this sshd's listener
        that is not itself ``sshd`` (``sh``, ``cat``, ``journalctl``, ``sleep`` ...), as
        ``(pid, cmdline)`` with the arguments joined by spaces."""
        found = []
        for pid, comm in descendants(self.sshd.proc.pid):
            if comm == "sshd":
                continue
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile
            found.append((pid, raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")))
        return found

    def cut_connections(self) -> list[int]:
        """SIGKILL every per-connection sshd process (monitor and session child), as a dropped
        link would end them; the listener stays up, so clients can connect again.
        Returns the PIDs killed."""
        pids = self.sshd.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def stop(self) -> None:
        """Stop the health server and the sshd (and any session process left)."""
        if self.health is not None:
            self.health.close()
        self.sshd.stop()


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _write_script(path: Path, text: str) -> None:
    _replace(path, text.encode())
    path.chmod(0o755)


def prepare_state(state: Path, shims: Path) -> None:
    """Write the shims into ``shims`` and the default files into ``state``: the not-found fixture
    (``not-found.txt``), the query field list, empty ``compute-apps.csv``."""
    state.mkdir(parents=True, exist_ok=True)
    for name, text in SHIMS.items():
        _write_script(shims / name, text)
    shutil.copyfile(FIXTURES / "systemctl-show" / "not-found.txt", state / "not-found.txt")
    (state / "query-gpu.fields").write_text(QUERY_GPU_FIELDS)
    (state / "compute-apps.csv").write_text("")


def start_testhost(base: Path, *, unit: str = "sglang.service", hostname: str = "gpu-node-1",
                   health: bool = True, defaults: bool = True, listen: str = "127.0.0.1",
                   port: int | None = None, netns: str | None = None) -> TestHost:
    """Start a fake GPU host with its files under ``base`` (``base/sshd``, ``base/state``).

    Args:
        unit: the watched unit (entries are appended for it).
        hostname: ``_HOSTNAME`` of its entries (and the UTS host name inside a network namespace).
        health: start a :class:`HealthServer` in mode 200 (loopback hosts only).
        defaults: the sane default state: ``active-running.txt`` for ``systemctl show``, sample 0 of
            the 8x H100 loop fixture, no compute apps, and the journal seeded with the first 5
            lines of ``sglang-ok-01.log``. False: an empty state (no journal file yet).
        listen, port, netns: where the sshd listens (see :func:`sshd.start_sshd`).

    Raises:
        SshdError: the sshd or systemd-journal-remote is missing or did not start (with the reason).
    """
    if not os.path.exists(JOURNAL_REMOTE):
        raise SshdError(f"{JOURNAL_REMOTE} is missing: apt-get install -y --no-install-recommends "
                        "systemd-journal-remote")
    if shutil.which("nvidia-smi", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"):
        raise SshdError("a real nvidia-smi is on this machine's PATH: the 'nvidia-smi missing' "
                        "tests cannot work here")
    state = base / "state"
    state.mkdir(parents=True, exist_ok=True)
    server = start_sshd(base / "sshd", listen=listen, port=port, netns=netns,
                        hostname=hostname if netns else None,
                        env={"UPWATCH_TEST_STATE": str(state)})
    host = TestHost(server, state, unit=unit, hostname=hostname)
    try:
        prepare_state(state, server.shims)
        if defaults:
            host.set_systemctl_show("active-running.txt")
            host.set_gpus_from_fixture()
            host.seed_log(limit=5)
        if health:
            host.health = HealthServer(200)
    except BaseException:
        host.stop()
        raise
    return host
