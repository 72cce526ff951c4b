"""Download progress (probes/sources/download.py): the sampling script on the real OpenSSH test host over a
hub cache folder written here, the parser against real and broken output, the hub cache rules
against real ``systemctl show -p Environment,User`` captures, the rate/ETA rule, and the watcher's
rule (sample only while a start downloads) on a ManualClock."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from conftest import FIXTURES, LOGS
from probes.fold import download as fdl
from probes.sources import download as dl
from probes.clock import ManualClock
from probes.data.download import DownloadProgress, DownloadSample
from probes.logs.journal_json import parse_record
from probes.fold.model import HostModel
from probes.transport.runner import Completed, ProbeError
from probes.data.state import HostState
from probes.data.events import ProbeFailure, ProbeOk
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from testhost import TestHost

ENV_SHOW = FIXTURES / "systemctl-show-env"
REV = "a09a35458c702b33eeacc393d103063234e8bc28"
#: The index's total_size (a Qwen2.5-7B-sized checkpoint; any value does: the test wrote it).
TOTAL = 15_231_233_024


# --- a hub cache folder, as huggingface_hub lays it out ----------------------------------------------

def make_repo(cache: Path, model_id: str = "Qwen/Qwen2.5-7B-Instruct", *, index: bool = True,
              incomplete: int = 3 * 2**20) -> Path:
    """``models--org--name`` with two complete blobs (config, index) linked from ``snapshots/REV``,
    one ``.incomplete`` blob of ``incomplete`` bytes, and ``refs/main``."""
    repo = cache / ("models--" + model_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    snap = repo / "snapshots" / REV
    snap.mkdir(parents=True)
    (repo / "refs" / "main").write_text(REV)  # huggingface_hub writes it without a newline
    (repo / "blobs" / "cfg0").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}, indent=2))
    (snap / "config.json").symlink_to("../../blobs/cfg0")
    if index:
        body = {"metadata": {"total_size": TOTAL},
                "weight_map": {f"model.layers.{i}.mlp.up_proj.weight": f"model-0000{i % 4 + 1}-of-00004.safetensors"
                               for i in range(28)}}
        (repo / "blobs" / "idx0").write_text(json.dumps(body, indent=2))
        (snap / "model.safetensors.index.json").symlink_to("../../blobs/idx0")
    (repo / "blobs" / "w1.incomplete").write_bytes(b"\0" * incomplete)
    return repo


def apparent_size(root: Path) -> int:
    """What ``du -sb`` counts: the apparent size (``st_size``) of every entry under ``root``,
    ``root`` included, each inode once, symlinks not followed (GNU du, coreutils 9.1)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        names = [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]
        for p in names if dirpath == str(root) else names[1:]:
            st = os.lstat(p)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


async def sample_over(runner, path: Path | str, t: float = 100.0) -> tuple[DownloadSample, Completed]:
    done = await runner.run(dl.sample_argv(str(path)), timeout=30.0)
    return dl.parse_sample(done.stdout.decode("utf-8", "replace"), t, str(path)), done


# --- 1. the script on the real OpenSSH test host -------------------------------------------------------

async def test_script_over_ssh_measures_the_folder_and_its_index_exactly(testhost: TestHost, tmp_path: Path) -> None:
    cache = tmp_path / "hf cache's \"odd\" $HOME `x`" / "hub"
    repo = make_repo(cache)
    runner = testhost.runner()
    try:
        first, done = await sample_over(runner, repo)
        assert done.returncode == 0 and done.stderr == b""
        assert first == DownloadSample(100.0, str(repo), "ok", apparent_size(repo), TOTAL)
        # The blobs themselves are all but the directories' and symlinks' own sizes.
        files = sum(p.stat().st_size for p in (repo / "blobs").iterdir())
        assert first.bytes is not None and files < first.bytes < files + 64 * 1024
        # A download going on: the .incomplete blob grows between two looks.
        with open(repo / "blobs" / "w1.incomplete", "ab") as f:
            f.write(b"\1" * 5_000_000)
        second, _ = await sample_over(runner, repo, 105.0)
        assert second.bytes == first.bytes + 5_000_000 == apparent_size(repo)
        # It completes: renamed to its etag and linked from the snapshot; nothing counted twice.
        (repo / "blobs" / "w1.incomplete").rename(repo / "blobs" / "w1")
        (repo / "snapshots" / REV / "model-00001-of-00004.safetensors").symlink_to("../../blobs/w1")
        third, _ = await sample_over(runner, repo, 110.0)
        assert third.bytes == second.bytes + len("../../blobs/w1") == apparent_size(repo)
        assert third.expected_bytes == TOTAL
    finally:
        await runner.close()


async def test_script_over_ssh_missing_folder_single_file_model_and_other_revisions(testhost: TestHost,
                                                                                    tmp_path: Path) -> None:
    cache = tmp_path / "a b" / "hub"
    cache.mkdir(parents=True)
    runner = testhost.runner()
    try:
        s, done = await sample_over(runner, cache / "models--org--not-yet")
        assert (s.status, s.bytes, s.expected_bytes, done.returncode) == ("missing", None, None, 0)
        s, _ = await sample_over(runner, tmp_path / "no such" / "hub" / "models--org--x")
        assert s.status == "missing"
        # A single-file model has no index: bytes, no expected total.
        repo = make_repo(cache, "org/single", index=False)
        s, _ = await sample_over(runner, repo)
        assert (s.status, s.bytes, s.expected_bytes) == ("ok", apparent_size(repo), None)
        # An older revision with another index: refs/main says which one is being fetched.
        old = repo.parent / "models--Qwen--Qwen2.5-7B-Instruct"
        make_repo(cache)
        (old / "snapshots" / "0ld").mkdir()
        (old / "blobs" / "idx1").write_text('{"metadata":{"total_size":1234.0},"weight_map":{}}')
        (old / "snapshots" / "0ld" / "model.safetensors.index.json").symlink_to("../../blobs/idx1")
        s, _ = await sample_over(runner, old)
        assert (s.bytes, s.expected_bytes) == (apparent_size(old), TOTAL)
        (old / "refs" / "main").write_text("0ld")
        s, _ = await sample_over(runner, old)
        assert s.expected_bytes == 1234
    finally:
        await runner.close()


# --- 2. permissions, with the real du as an unprivileged user -------------------------------------------

def run_as_nobody(path: str) -> subprocess.CompletedProcess[bytes]:
    assert os.geteuid() == 0, "this test runs the script as nobody through setpriv: run the tests as root (.ci/run)"
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *dl.sample_argv(path)],
                          capture_output=True, timeout=30)


def test_a_subfolder_du_may_not_read_still_gives_the_rest_and_an_unreadable_cache_is_denied() -> None:
    base = Path(tempfile.mkdtemp(prefix="upwatch-dl-", dir="/tmp"))
    try:
        base.chmod(0o755)
        repo = make_repo(base / "hub")
        for p in [base / "hub", *repo.rglob("*"), repo]:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        locked = repo / "blobs" / "locked"
        locked.mkdir(mode=0o700)
        (locked / "secret").write_bytes(b"x" * 10_000)
        done = run_as_nobody(str(repo))
        assert done.returncode == 0
        assert b"du: cannot read directory './blobs/locked': Permission denied" in done.stderr
        s = dl.parse_sample(done.stdout.decode(), 1.0, str(repo))
        # Everything but what is inside the locked folder (its own entry is counted).
        assert s.bytes == apparent_size(repo) - 10_000 and s.expected_bytes == TOTAL
        # /root-like: the cache's parent may not be entered; the folder may or may not exist there.
        private = base / "root"
        private.mkdir(mode=0o700)
        for name in ("models--a--b", "models--c--d"):
            if name == "models--a--b":
                (private / name).mkdir()
            done = run_as_nobody(str(private / name))
            assert dl.parse_sample(done.stdout.decode(), 1.0, "x").status == "denied"
    finally:
        shutil.rmtree(base)


# --- 3. the parser ------------------------------------------------------------------------------------

def test_parse_sample_reads_its_lines_and_skips_chatter() -> None:
    out = (f"Welcome to gpu-node-1!\nref {REV}\nindex {REV} \"total_size\": 65527752704\n"
           "index 0ld \"total_size\": 1\ndu 12345678\t.\n")
    assert dl.parse_sample(out, 5.0, "/p") == DownloadSample(5.0, "/p", "ok", 12345678, 65527752704)
    # Without refs/main: the one total the indexes agree on, else none.
    assert dl.parse_sample('ref \nindex a "total_size": 7\nindex b "total_size":7\ndu 1\t.\n', 0, "/p").expected_bytes == 7
    assert dl.parse_sample('ref \nindex a "total_size": 7\nindex b "total_size": 8\ndu 1\t.\n', 0, "/p").expected_bytes is None
    # A float total (some exports write one), an index without a total, a bad total.
    assert dl.parse_sample('index a "total_size": 1.5e10\ndu 1\t.\n', 0, "/p").expected_bytes == 15_000_000_000
    assert dl.parse_sample("index a \ndu 1\t.\n", 0, "/p").expected_bytes is None
    assert dl.parse_sample('index a "total_size": 1.2.3\ndu 1\t.\n', 0, "/p").expected_bytes is None
    assert dl.parse_sample('index a "total_size": 0\ndu 1\t.\n', 0, "/p").expected_bytes is None
    assert dl.parse_sample("missing\n", 3.0, "/p") == DownloadSample(3.0, "/p", "missing")
    assert dl.parse_sample("denied\n", 3.0, "/p").status == "denied"


@pytest.mark.parametrize("out, message", [
    ("", "no output"),
    ("\n\n", "no output"),
    ("sh: 1: du: not found\n", "no du total in the output ('sh: 1: du: not found')"),
    ("ref x\ndu \n", "du printed no total: 'du '"),
    ("du 12K\t.\n", "du printed no total: 'du 12K\\t.'"),
    ("du 123\t/root/.cache\n", "du printed no total: 'du 123\\t/root/.cache'"),
    ("\x1b[31mdu\x00 1\t.\n", "no du total in the output ('\\x1b[31mdu\\x00 1\\t.')"),
])
def test_parse_sample_refuses_output_without_a_total(out: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        dl.parse_sample(out, 0.0, "/p")
    assert str(exc.value) == message


# --- 4. where the cache is -----------------------------------------------------------------------------

def test_environment_of_real_systemctl_show_captures() -> None:
    env, user = dl.parse_unit_env((ENV_SHOW / "environment-user.txt").read_text())
    # What the process saw (/proc/PID/environ at capture time).
    assert env == {"HF_HOME": "/data/hf", "HF_HUB_CACHE": "/data/my cache/hub", "PLAIN": "1",
                   "QUOTE": "it's \"q\"", "DOLLAR": "a$$b", "BACK": "x\\y", "EMPTY": ""}
    assert user == "nobody"
    assert dl.parse_unit_env((ENV_SHOW / "environment-none.txt").read_text()) == ({}, None)
    assert dl.hub_cache(env, "/nonexistent") == "/data/my cache/hub"


def test_environment_escapes_and_broken_quoting() -> None:
    assert dl.parse_environment(r'"A=tab\there\nnl\x01" B=2') == {"A": "tab\there\nnl\x01", "B": "2"}
    assert dl.parse_environment('NOEQUALS "=x" C=3 "D=unterminated') == {"C": "3", "D": "unterminated"}
    assert dl.parse_environment("") == {}


@pytest.mark.parametrize("env, home, expected", [
    ({}, "/root", "/root/.cache/huggingface/hub"),
    ({}, "/home/ops/", "/home/ops/.cache/huggingface/hub"),
    ({}, None, None),
    ({"HF_HOME": "/data/hf"}, None, "/data/hf/hub"),
    ({"HF_HOME": "/data/hf/"}, None, "/data/hf/hub"),
    ({"HF_HOME": "~/hf"}, "/srv/llm", "/srv/llm/hf/hub"),
    ({"HF_HOME": "$HOME/hf"}, "/srv/llm", "/srv/llm/hf/hub"),
    ({"HF_HOME": "${BASE}/hf", "BASE": "/mnt"}, None, "/mnt/hf/hub"),
    ({"HF_HOME": "relative/hf"}, "/root", None),
    ({"XDG_CACHE_HOME": "/var/cache"}, None, "/var/cache/huggingface/hub"),
    ({"HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HOME": "/data/hf"}, None, "/legacy"),
    ({"HF_HUB_CACHE": "/new", "HUGGINGFACE_HUB_CACHE": "/legacy"}, None, "/new"),
    ({"HF_HUB_CACHE": ""}, "/root", None),
])
def test_hub_cache_follows_huggingface_hub(env: dict[str, str], home: str | None, expected: str | None) -> None:
    assert dl.hub_cache(env, home) == expected


@pytest.mark.parametrize("model, expected", [
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    ("unsloth/Qwen3-VL-32B-Instruct-bnb-4bit", "unsloth/Qwen3-VL-32B-Instruct-bnb-4bit"),
    ("openai/gpt-oss-120b", "openai/gpt-oss-120b"),
    ("/models/Qwen2.5-7B", None), ("./models/x", None), ("~/x/y", None), ("models/x/", None),
    ("a/b/c", None), ("gpt2", None), ("org/na--me", None), ("org/na..me", None), ("org/-x", None),
    ("", None), (None, None),
])
def test_hub_repo_id(model: str | None, expected: str | None) -> None:
    assert fdl.hub_repo_id(model) == expected


def test_repo_dir_and_passwd() -> None:
    assert dl.repo_dir("/root/.cache/huggingface/hub/", "openai/gpt-oss-120b") == \
        "/root/.cache/huggingface/hub/models--openai--gpt-oss-120b"
    assert dl.home_from_passwd("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n") == "/nonexistent"
    assert dl.home_from_passwd("") is None and dl.home_from_passwd("garbage") is None


# --- 5. rate and ETA ------------------------------------------------------------------------------------

def samples(*points: tuple[float, int | None], expected: int | None = None) -> list[DownloadSample]:
    return [DownloadSample(t, "/p", "ok" if b is not None else "missing", b, expected if b is not None else None)
            for t, b in points]


def test_progress_needs_growth_and_takes_the_rate_over_the_window() -> None:
    assert fdl.progress_from(samples((0, 100), (5, 100), (10, 100))) is None  # cached: never grows
    assert fdl.progress_from(samples((0, None), (5, None))) is None           # never there
    assert fdl.progress_from(samples((0, 100))) is None
    gib = 2**30
    p = fdl.progress_from(samples((0, None), (5, 0), (10, gib), (15, 2 * gib), expected=10 * gib))
    assert p == DownloadProgress("/p", 2 * gib, 10 * gib, 2 * gib / 10, 8 * gib / (2 * gib / 10), 15, 15)
    assert p is not None and p.fraction == 0.2
    # The window: only the last 30 s count (from t=40: 40→70, 3 GiB in 30 s).
    pts = [(0.0, 0), (10.0, gib), (20.0, 2 * gib), (40.0, 4 * gib), (55.0, 5 * gib), (70.0, 7 * gib)]
    p = fdl.progress_from(samples(*pts))
    assert p is not None and p.rate_bps == 3 * gib / 30 and p.eta_s is None and p.expected_bytes is None
    # Stalled: rate 0, no ETA; it keeps showing what it got.
    p = fdl.progress_from(samples((0, 0), (5, gib), (40, gib), (45, gib), expected=2 * gib))
    assert p is not None and (p.rate_bps, p.eta_s, p.grew_at) == (0.0, None, 5)
    # Past the expected total (headers, tokenizer files): no ETA, fraction 1.
    p = fdl.progress_from(samples((0, 0), (5, 3 * gib), expected=2 * gib))
    assert p is not None and p.eta_s is None and p.fraction == 1.0
    # Shrinking over the window (a broken file removed): no rate; net growth over it: its rate.
    p = fdl.progress_from(samples((0, 2 * gib), (5, 3 * gib), (10, gib)))
    assert p is not None and p.rate_bps is None and p.eta_s is None
    p = fdl.progress_from(samples((0, 0), (5, 3 * gib), (10, gib)))
    assert p is not None and p.rate_bps == gib / 10


def test_download_words() -> None:
    gib = 2**30
    d = DownloadProgress("/p", int(12.4 * gib), 61 * gib, 310 * 2**20, 157.0, 0.0, 0.0)
    assert fdl.download_words(HostState("h", "u", download=d)) == "Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37"
    d = DownloadProgress("/p", int(0.5 * gib), None, 3.25 * 2**20, None, 0.0, 0.0)
    assert fdl.download_words(HostState("h", "u", download=d)) == "Download 0.5 GiB · 3.2 MiB/s"
    d = DownloadProgress("/p", gib, 600 * gib, 2**20, 3 * 3600 + 62, 0.0, 0.0)
    assert fdl.download_words(HostState("h", "u", download=d)) == "Download 1.0/600.0 GiB · 1.0 MiB/s · ETA 3:01:02"
    assert fdl.download_words(HostState("h", "u")) == ""


# --- 6. the watcher's rule, on a ManualClock --------------------------------------------------------------

T0 = 1_700_000_000.0
VLLM_LINES = (LOGS / "vllm-hang-download-01.log").read_text().splitlines()  # engine, world size, "Starting to load model"
SHARDS = "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00?, ?it/s]"
PATH = "/data/my cache/hub/models--unsloth--Qwen3-VL-32B-Instruct-bnb-4bit"


class CacheHost:
    """Answers the download probe's commands as a host whose unit has the real captured
    ``Environment=`` (``HF_HUB_CACHE=/data/my cache/hub``) and a repo folder of ``size`` bytes. The
    journal and the other probes are not run (the test drives the model itself)."""

    host = "gpu-node-1"

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.size = 0
        self.expected: int | None = None
        self.fail: ProbeError | None = None

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        argv = tuple(argv)
        self.calls.append(argv)
        if self.fail is not None:
            raise self.fail
        if argv[:2] == ("systemctl", "show"):
            return Completed(argv, 0, (ENV_SHOW / "environment-user.txt").read_bytes())
        if argv[:2] == ("getent", "passwd"):
            return Completed(argv, 0, b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        assert argv[:3] == ("sh", "-c", dl.SAMPLE_SCRIPT) and argv[4] == PATH, argv
        index = f'index {REV} "total_size": {self.expected}\n' if self.expected else ""
        return Completed(argv, 0, f"ref {REV}\n{index}du {self.size}\t.\n".encode())

    def samples(self) -> int:
        return sum(1 for c in self.calls if c[:2] == ("sh", "-c"))


@contextlib.asynccontextmanager
async def download_task(w: HostWatcher) -> AsyncIterator[None]:
    """Run only the watcher's download task (the clock drives it), cancelled at the end."""
    task = asyncio.create_task(w.download.run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def journal(model: HostModel, text: str, t: float, *, systemd: bool = False) -> None:
    """One ``journalctl -o json`` record of the server (or of systemd about the unit) at ``t``."""
    fields = ({"SYSLOG_IDENTIFIER": "systemd", "_PID": "1", "UNIT": "vllm.service", "_TRANSPORT": "journal"}
              if systemd else {"SYSLOG_IDENTIFIER": "vllm", "_PID": "115", "_TRANSPORT": "stdout"})
    model.apply(parse_record(json.dumps({"MESSAGE": text, "__REALTIME_TIMESTAMP": str(int(t * 1e6)), **fields})))


async def test_watcher_samples_only_while_a_silent_vllm_weights_phase_downloads() -> None:
    clock = ManualClock(T0)
    host = CacheHost()
    w = HostWatcher(HostSpec("gpu-node-1", "vllm.service", engine="vllm"), host, clock)  # type: ignore[arg-type]
    async with download_task(w):
        journal(w.model, VLLM_LINES[0], T0)
        await clock.advance(30)
        assert host.calls == []  # starting: nothing to measure
        journal(w.model, VLLM_LINES[1], T0 + 30)
        journal(w.model, VLLM_LINES[2], T0 + 30)  # Starting to load model unsloth/...: weights, no bar
        assert w.state().phase == "weights" and w.state().model == "unsloth/Qwen3-VL-32B-Instruct-bnb-4bit"
        gib = 2**30
        host.size = gib
        await clock.advance(1)  # the rule is looked at every unit_interval_s (1 s)
        assert host.calls[:2] == [("systemctl", "show", "vllm.service", "-p", "Environment,User", "--no-pager"),
                                  ("getent", "passwd", "nobody")]
        assert host.samples() == 1 and w.state().download is None  # one look: no growth seen yet
        host.size, host.expected = 2 * gib, 21 * gib
        await clock.advance(5)
        s = w.state()
        assert host.samples() == 2
        assert s.download == DownloadProgress(PATH, 2 * gib, 21 * gib, gib / 5, 19 * gib / (gib / 5), T0 + 36, T0 + 36)
        assert fdl.download_words(s) == "Download 2.0/21.0 GiB · 205 MiB/s · ETA 1:35"
        # Five minutes of a silent log while it grows: not stalled, no "no GPU memory" either.
        for _ in range(60):
            host.size += gib // 10
            await clock.advance(5)
        s = w.state()
        assert host.samples() == 62 and s.verdict is None
        assert s.download is not None and s.download.rate_bps == pytest.approx(gib / 10 / 5)
        assert s.download.bytes == 2 * gib + 60 * (gib // 10)
        # It stops growing: after the stall limit (120 s) it is stalled, and the sentence says so.
        await clock.advance(125)
        s = w.state()
        assert s.verdict is not None and s.verdict.kind == "stalled"
        assert s.verdict.sentence == ("No log line for 7m11s, the download has not grown for 2m05s, in Weight load: "
                                      "the start looks hung.")
        assert s.download is not None and s.download.rate_bps == 0.0 and s.download.eta_s is None
        # The shards begin: the download is over, sampling stops, the progress goes.
        journal(w.model, SHARDS, clock.now())
        n = host.samples()
        await clock.advance(60)
        assert host.samples() == n and w.state().download is None


async def test_a_failing_look_degrades_only_the_download_cell() -> None:
    clock = ManualClock(T0)
    host = CacheHost()
    w = HostWatcher(HostSpec("gpu-node-1", "vllm.service", engine="vllm"), host, clock)  # type: ignore[arg-type]
    async with download_task(w):
        for line in VLLM_LINES:
            journal(w.model, line, T0)
        host.fail = ProbeError("timeout", "gpu-node-1: command timed out after 30 s")
        await clock.advance(2)
        s = w.state()
        f = s.failure("download")
        assert f is not None and (f.kind, f.message) == ("command", "du of the cache took more than 30 s")
        assert s.stale_since is None and s.verdict is None
        # A lost connection is for the other probes to say: nothing is added here.
        host.fail = ProbeError("closed", "gpu-node-1: connection lost")
        await clock.advance(5)
        assert w.state().failure("download") == f and w.state().stale_since is None
        # It answers again: the failure is over.
        host.fail = None
        host.size = 10
        await clock.advance(5)
        assert w.state().failure("download") is None
        # Garbage from the host: said in the cell, with what came back.
        host.size = "12K"  # type: ignore[assignment]
        await clock.advance(5)
        f = w.state().failure("download")
        assert f is not None and f.message == f"{PATH}: du printed no total: 'du 12K\\t.'"
        # The start moves on, and the link drops: the cell's failure stays while the host is out
        # of reach (clearing it would say the connection works), and goes once it is back.
        w.model.apply(ProbeFailure(clock.now(), "journal", "closed", "gpu-node-1: connection lost"))
        journal(w.model, SHARDS, clock.now())
        await clock.advance(5)  # at the next look it would have taken
        s = w.state()
        assert s.stale_since is not None and s.failure("download") is not None
        w.model.apply(ProbeOk(clock.now(), "journal"))
        await clock.advance(1)
        assert w.state().failure("download") is None and w.state().stale_since is None


async def test_no_sampling_for_a_local_path_or_a_ready_start() -> None:
    clock = ManualClock(T0)
    host = CacheHost()
    w = HostWatcher(HostSpec("gpu-node-1", "vllm.service", engine="vllm"), host, clock)  # type: ignore[arg-type]
    async with download_task(w):
        journal(w.model, VLLM_LINES[0], T0)
        journal(w.model, "(EngineCore pid=115) Starting to load model /models/Qwen3-32B...", T0)
        assert w.state().phase == "weights" and w.state().model == "/models/Qwen3-32B"
        await clock.advance(60)
        assert host.calls == []


async def test_hf_cache_setting_wins_and_samples_from_an_earlier_start_do_not_count() -> None:
    clock = ManualClock(T0)
    host = CacheHost()
    spec = HostSpec("gpu-node-1", "vllm.service", engine="vllm", hf_cache="/data/my cache/hub")
    w = HostWatcher(spec, host, clock)  # type: ignore[arg-type]
    async with download_task(w):
        for line in VLLM_LINES:
            journal(w.model, line, T0)
        host.size = 100
        await clock.advance(1)
        host.size = 200
        await clock.advance(5)
        assert w.state().download is not None
        assert not any(c[0] in ("systemctl", "getent") for c in host.calls)  # the setting is the answer
        # A new start (systemd's Started line): the earlier looks are not this start's.
        journal(w.model, "vllm.service: Main process exited, code=killed, status=9/KILL", clock.now(), systemd=True)
        journal(w.model, "Started vllm.service - vLLM.", clock.now() + 0.5, systemd=True)
        for line in VLLM_LINES:
            journal(w.model, line, clock.now() + 0.5)
        await clock.advance(0.1)
        assert w.state().starts == 2 and w.state().download is None
        host.size = 5000
        await clock.advance(5)
        assert w.state().download is None  # one look of this start
        host.size = 5100
        await clock.advance(5)
        d = w.state().download
        assert d is not None and (d.bytes, d.rate_bps, d.grew_at) == (5100, 20.0, T0 + 15)


# --- 7. end to end: a real sshd, a real journal, a folder that grows ---------------------------------------

@pytest.mark.host  # starts a test host itself
async def test_live_watcher_shows_a_silent_vllm_download_from_the_units_environment(tmp_path: Path) -> None:
    from probes.clock import WallClock
    from waiting import until
    from testhost import start_testhost

    host = start_testhost(tmp_path / "host", unit="vllm.service", defaults=False, health=False)
    cache = tmp_path / "data dir" / "hub"
    repo = make_repo(cache, "unsloth/Qwen3-VL-32B-Instruct-bnb-4bit")
    show = (FIXTURES / "systemctl-show" / "active-running.txt").read_text()
    env = f'Environment=HF_HOME=/elsewhere "HF_HUB_CACHE={cache}"\nUser=\n'
    (host.state / "systemctl-show.txt").write_text(show + env)
    host.set_gpus_from_fixture()
    host.set_compute_apps("")
    host.append_log_lines(VLLM_LINES)
    w = HostWatcher(HostSpec("gpu-node-1", "vllm.service", engine="vllm", ssh=host.target), host.runner(),
                    WallClock(), unit_interval_s=0.2, health_interval_s=0.5, gpu_interval_s=0.5,
                    apps_interval_s=0.5, retry_s=0.2, download_interval_s=0.3)
    w.start()
    try:
        await until("a first look at the folder", lambda: len(w.model.download_samples()) >= 1)
        assert w.model.download_samples()[-1].path == str(repo) and w.state().download is None
        with open(repo / "blobs" / "w1.incomplete", "ab") as f:
            f.write(b"\1" * 7_000_000)
        await until("the download's growth", lambda: w.state().download is not None)
        await until("the folder's size", lambda: w.state().download.bytes == apparent_size(repo))  # type: ignore[union-attr]
        d = w.state().download
        assert d is not None and d.path == str(repo) and d.expected_bytes == TOTAL
        assert d.rate_bps is not None and d.rate_bps > 0 and d.eta_s is not None
        assert w.state().failure("download") is None and w.state().stale_since is None
        host.append_log_lines([SHARDS])
        await until("the shards", lambda: w.state().progress is not None and w.state().download is None)
    finally:
        await w.stop()
        host.stop()


class RootCacheHost(CacheHost):
    """A cache under ``/root`` the SSH user may not enter: the script says ``denied`` unless it
    runs through ``sudo -n``."""

    async def run(self, argv: Sequence[str], timeout: float = 30.0) -> Completed:
        argv = tuple(argv)
        if argv[:2] == ("sh", "-c"):
            self.calls.append(argv)
            return Completed(argv, 0, b"denied\n")
        if argv[:2] == ("sudo", "-n"):
            self.calls.append(("sudo", "-n"))
            return await super().run(argv[2:], timeout)
        return await super().run(argv, timeout)


@pytest.mark.parametrize("sudo", [True, False])
async def test_an_unreadable_cache_is_read_through_sudo_when_allowed(sudo: bool) -> None:
    clock = ManualClock(T0)
    host = RootCacheHost()
    w = HostWatcher(HostSpec("gpu-node-1", "vllm.service", engine="vllm", sudo=sudo), host, clock)  # type: ignore[arg-type]
    async with download_task(w):
        for line in VLLM_LINES:
            journal(w.model, line, T0)
        host.size = 1
        await clock.advance(1)
        host.size = 2
        await clock.advance(5)
        s = w.state()
        look = ("sh", "-c", dl.SAMPLE_SCRIPT, "sh", PATH)
        if sudo:
            # systemctl show as the unit probe runs it (sudo -n); the first look as the SSH user is
            # refused, then every look goes through sudo -n.
            assert host.calls == [("sudo", "-n"), ("systemctl", "show", "vllm.service", "-p", "Environment,User",
                                                    "--no-pager"),
                                  ("getent", "passwd", "nobody"), look, ("sudo", "-n"), look, ("sudo", "-n"), look]
            assert s.download is not None and s.download.bytes == 2 and s.failure("download") is None
        else:
            f = s.failure("download")
            assert s.download is None and f is not None and f.kind == "permission"
            assert f.message == f"{PATH}: the SSH user may not read it (set sudo = true for this host, or hf_cache)"
            assert s.stale_since is None
