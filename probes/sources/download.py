"""Download progress: how far a model's fetch into the Hugging Face hub cache has come.

vLLM fetches a model silently inside what its log shows as weight loading (``Starting to load
model X...``, then nothing until the shards load: ``vllm-hang-download-01`` of the fixtures);
SGLang, TensorRT-LLM and TGI print some download lines in some versions (the reader's ``download``
phase). Neither says how many bytes are left. So while a start is in ``download``, or in
``weights`` with no shard bar yet and a model id that names a hub repo, the watcher measures the
repo's folder in the hub cache every few seconds over the host's connection (:data:`SAMPLE_SCRIPT`,
``du -sb``) and compares it with the expected total (``model.safetensors.index.json``). No agent,
no network access from the host, nothing written there.

Formats, and where they come from:

* **The hub cache** (huggingface_hub ``constants.py``, 0.2x-1.x): ``$HF_HUB_CACHE``, else the legacy
  ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, where ``HF_HOME`` defaults to
  ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``; ``~`` and ``$VARS`` expanded
  (``os.path.expanduser``/``expandvars`` of the server process: its ``HOME`` is the unit's user's).
  See :func:`hub_cache`.
* **A repo's folder** (huggingface_hub ``file_download.py``, ``repo_folder_name``): ``org/name`` lives
  in ``models--org--name/`` (``--`` is not allowed in repo ids): ``blobs/<etag>`` are the files by
  content, a file being fetched is ``blobs/<etag>.incomplete`` (renamed when complete),
  ``snapshots/<commit>/<path>`` are symlinks into ``blobs``, created once a blob is complete, and
  ``refs/<revision>`` holds the commit a revision (``main``) resolved to, written before the
  download. See :func:`repo_dir`.
* **``du -sb``** (GNU coreutils 9.1, measured): ``<bytes>\\t<path>``, the apparent size of every
  entry, each inode once: files, ``.incomplete`` files, directories (4096 bytes each on ext4) and
  symlinks (the length of their target); symlinks are not followed, so the snapshots do not count
  the blobs twice. A subfolder it may not read is reported on stderr (``du: cannot read directory
  '...': Permission denied``), exit status 1, and the total of the rest is still printed. A missing
  path prints nothing on stdout (``du: cannot access ...``, exit 1). Parallel downloaders that write
  chunks at offsets (``hf_transfer``) make a file's apparent size run ahead of the bytes received by
  at most their chunks in flight.
* **``model.safetensors.index.json``** (safetensors sharded checkpoints, transformers
  ``save_pretrained``): ``{"metadata": {"total_size": N, ...}, "weight_map": {...}}`` where ``N``
  is the tensors' bytes (a float in some exports), a little below the shard files' sizes (each
  has a JSON header). A single-file model (``model.safetensors``) has no index: the expected total
  is then unknown.
* **``systemctl show UNIT -p Environment,User``** (systemd 252, real captures in
  ``tests/fixtures/systemctl-show-env``): ``Environment=`` entries separated by spaces, an entry
  with special characters double-quoted as a whole with ``\\ " $ ``\\` `` escaped by a backslash and
  control characters as C escapes (``shell_maybe_quote(s, 0)``); see :func:`parse_environment`.

No UI here: :func:`download_words` gives the one line views and ``upwatch wait`` show.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from probes.data.download import DownloadSample
from probes.data.events import CONNECTION_KINDS, ProbeOk
from probes.fold.download import hub_repo_id, wanted
from probes.sources.context import SourceContext
from probes.sources.unit import parse_properties
from probes.transport.runner import Completed, ProbeError

#: Seconds between two looks at the folder while a download is being watched.
SAMPLE_INTERVAL_S = 5.0
#: Seconds the sampling command may take (``du`` over a large folder on a slow disk).
SAMPLE_TIMEOUT_S = 30.0

#: Prints what :func:`parse_sample` reads, for the repo folder ``$1`` (an argument, never spliced
#: into the script): ``missing`` or ``denied`` when the folder cannot be entered (``denied`` when it,
#: or the nearest folder above it that exists, may not be entered: a missing folder under an
#: unreadable ``/root`` is ``denied``, as the user cannot know); otherwise
#: ``ref <refs/main>``, one ``index <snapshot> "total_size": N`` per snapshot holding a complete
#: ``model.safetensors.index.json``, and ``du <bytes>\t.`` (``du -sb`` run inside the folder, so
#: the path it prints is ``.`` whatever the folder's name). ``du``'s complaints go to stderr.
SAMPLE_SCRIPT = (
    'if ! cd -- "$1" 2>/dev/null; then\n'
    '  [ -e "$1" ] && { echo denied; exit 0; }\n'
    '  p=$1\n'
    '  while [ -n "$p" ] && [ "$p" != / ]; do\n'
    '    p=${p%/*}; [ -n "$p" ] || p=/\n'
    '    if [ -d "$p" ]; then if [ -x "$p" ]; then echo missing; else echo denied; fi; exit 0; fi\n'
    '  done\n'
    '  echo missing; exit 0\n'
    'fi\n'
    "printf 'ref %s\\n' \"$(head -c 100 refs/main 2>/dev/null | tr -d '\\n')\"\n"
    "for f in snapshots/*/model.safetensors.index.json; do\n"
    '  [ -f "$f" ] || continue\n'
    '  r=${f#snapshots/}; r=${r%%/*}\n'
    "  printf 'index %s %s\\n' \"$r\" \"$(grep -o '\"total_size\"[[:space:]]*:[[:space:]]*[0-9][0-9.eE+]*' "
    "\"$f\" | head -n 1)\"\n"
    "done\n"
    "s=$(du -sb .)\n"
    "printf 'du %s\\n' \"$s\"\n"
)

_DU_RE = re.compile(r"du (\d{1,20})\t\.")
_INDEX_RE = re.compile(r'index ([0-9A-Za-z._-]{1,100}) "total_size"[ \t]*:[ \t]*([0-9][0-9.eE+]{0,30})')
_REF_RE = re.compile(r"ref ([0-9A-Za-z._-]{0,100})")
_VAR_RE = re.compile(r"\$(?:(\w+)|\{([^}]*)\})")
_CESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


# --- where to look -----------------------------------------------------------------------------------

def repo_dir(cache: str, model_id: str) -> str:
    """The folder of model repo ``model_id`` in the hub cache ``cache``.

    Args:
        cache: the hub cache folder (absolute), e.g. ``/root/.cache/huggingface/hub``.
        model_id: ``org/name``.

    Returns:
        ``<cache>/models--org--name`` (huggingface_hub ``repo_folder_name``).
    """
    return cache.rstrip("/") + "/models--" + model_id.replace("/", "--")


def parse_environment(value: str) -> dict[str, str]:
    """Read ``systemctl show -p Environment``'s value into a dict (later entries win).

    Args:
        value: the text after ``Environment=`` (systemd 252 format; see the module docstring).

    Returns:
        ``{KEY: value}``. An entry without ``=`` is skipped; an unterminated quote ends the text.
    """
    out: dict[str, str] = {}
    i, n = 0, len(value)
    while i < n:
        if value[i] == " ":
            i += 1
            continue
        if value[i] == '"':
            i += 1
            buf: list[str] = []
            while i < n and value[i] != '"':
                ch = value[i]
                if ch == "\\" and i + 1 < n:
                    nxt = value[i + 1]
                    if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", value[i + 2:i + 4]):
                        buf.append(chr(int(value[i + 2:i + 4], 16)))
                        i += 4
                        continue
                    buf.append(_CESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                buf.append(ch)
                i += 1
            i += 1
            word = "".join(buf)
        else:
            j = value.find(" ", i)
            j = n if j < 0 else j
            word = value[i:j]
            i = j
        key, sep, val = word.partition("=")
        if sep and key:
            out[key] = val
    return out


def unit_env_argv(unit: str, *, user_unit: bool = False) -> list[str]:
    """``systemctl [--user] show UNIT -p Environment,User --no-pager`` (the unit is one argv item)."""
    return ["systemctl", *(["--user"] if user_unit else []), "show", unit, "-p", "Environment,User", "--no-pager"]


def parse_unit_env(text: str) -> tuple[dict[str, str], str | None]:
    """The unit's ``Environment=`` as a dict and its ``User=`` (None when empty: root for a system
    unit), from :func:`unit_env_argv`'s output."""

    props = parse_properties(text)
    return parse_environment(props.get("Environment", "")), (props.get("User") or None)


def home_from_passwd(text: str) -> str | None:
    """The home folder from a ``getent passwd NAME`` line (``name:x:uid:gid:gecos:home:shell``),
    or None when the line is not one."""
    fields = text.strip().split("\n")[0].split(":") if text.strip() else []
    if len(fields) != 7 or not fields[5].startswith("/"):
        return None
    return fields[5]


def _expandvars(path: str, env: Mapping[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced from ``env``; unknown names kept as written (as
    ``os.path.expandvars`` does)."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))
    return _VAR_RE.sub(sub, path)


def hub_cache(env: Mapping[str, str], home: str | None) -> str | None:
    """The hub cache folder a server with environment ``env`` uses (huggingface_hub's rule; see the
    module docstring).

    Args:
        env: the server's environment (the unit's ``Environment=``).
        home: the home folder of the user it runs as, or None when unknown.

    Returns:
        An absolute folder, or None when it cannot be known (it depends on an unknown home, or
        comes out relative, i.e. depends on the server's working folder).
    """
    full = dict(env)
    if home is not None:
        full.setdefault("HOME", home)

    def expand(p: str) -> str:
        if p == "~" or p.startswith("~/"):
            if home is None:
                return p
            p = home.rstrip("/") + p[1:] if p != "~" else home
        return _expandvars(p, full)

    if "HF_HUB_CACHE" in env:
        path = expand(env["HF_HUB_CACHE"])
    elif "HUGGINGFACE_HUB_CACHE" in env:
        path = expand(env["HUGGINGFACE_HUB_CACHE"])
    else:
        if "HF_HOME" in env:
            hf_home = env["HF_HOME"]
        else:
            xdg = env.get("XDG_CACHE_HOME", "~/.cache")
            hf_home = xdg.rstrip("/") + "/huggingface"
        path = expand(hf_home).rstrip("/") + "/hub"
    if not path.startswith("/"):
        return None
    return path


# --- one look ----------------------------------------------------------------------------------------

def sample_argv(path: str) -> list[str]:
    """The command that looks at repo folder ``path``: ``["sh", "-c", SAMPLE_SCRIPT, "sh", path]``."""
    return ["sh", "-c", SAMPLE_SCRIPT, "sh", path]


def _total(text: str) -> int | None:
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value <= 0 or value >= 2**63:
        return None
    return int(value)


def parse_sample(stdout: str, time: float, path: str) -> DownloadSample:
    """Read :data:`SAMPLE_SCRIPT`'s output.

    Lines it does not know (a login script's chatter) are skipped. The expected total is the index
    of the snapshot ``refs/main`` names; else the one total all indexes agree on; else None.

    Args:
        stdout: the script's stdout (its stderr and exit status do not matter: ``du`` still prints
            a total when it could not read a subfolder).
        time: when the look ended (epoch seconds). path: the folder looked at.

    Returns:
        The sample (``status`` ``missing`` or ``denied`` when the folder could not be entered).

    Raises:
        ValueError: no ``du <bytes>\\t.`` line (the script did not run, or ``du`` printed nothing),
            or a ``du`` line that is not that.
    """
    lines = stdout.splitlines()
    for line in lines:
        if line in ("missing", "denied"):
            return DownloadSample(time, path, line)
    size: int | None = None
    ref = ""
    totals: dict[str, int] = {}
    for line in lines:
        if line.startswith("du "):
            m = _DU_RE.fullmatch(line)
            if m is None:
                raise ValueError(f"du printed no total: {line[:80]!r}")
            size = int(m.group(1))
        elif line.startswith("ref "):
            m = _REF_RE.fullmatch(line)
            ref = m.group(1) if m else ""
        elif line.startswith("index "):
            m = _INDEX_RE.fullmatch(line)
            if m is not None and (t := _total(m.group(2))) is not None:
                totals[m.group(1)] = t
    if size is None:
        first = next((ln for ln in lines if ln.strip()), "")
        raise ValueError(f"no du total in the output ({first[:80]!r})" if first else "no output")
    if ref in totals:
        expected: int | None = totals[ref]
    elif len(set(totals.values())) == 1:
        expected = next(iter(totals.values()))
    else:
        expected = None
    return DownloadSample(time, path, "ok", size, expected)


# --- the loop ---------------------------------------------------------------------------------------


class DownloadSource:
    """The download probe's loop: measure the model's folder in the hub cache every
    ``download_interval_s`` while the start downloads (:func:`probes.fold.download.wanted`), one
    command at a time, each with a time limit. A failure is this cell's only (``download``): a lost
    connection is left to the other probes to say, a slow ``du`` is a command failure, never a
    stale host. A folder the SSH user may not read is looked at again through ``sudo -n`` when the
    host has ``sudo = true`` (system units).

    Args:
        context: the host's :class:`~probes.sources.context.SourceContext`.
    """

    def __init__(self, context: SourceContext) -> None:
        self.context = context
        #: (MainPID, InvocationID) the hub cache was found for, and the folder (None: unknown).
        self._hub_cache: tuple[tuple[int | None, str | None], str | None] | None = None

    async def find_hub_cache(self) -> str | None:
        """The hub cache folder of the current process: ``hf_cache`` when configured, else from the
        unit's ``Environment=`` and its user's home (``getent passwd``), looked up once per process
        (MainPID, InvocationID). None when it cannot be known.

        Raises:
            ProbeError: the connection failed.
        """
        ctx = self.context
        spec = ctx.spec
        if spec.hf_cache:
            return spec.hf_cache
        u = ctx.unit()
        key = (u.main_pid, u.invocation_id) if u is not None else (None, None)
        if self._hub_cache is not None and self._hub_cache[0] == key:
            return self._hub_cache[1]
        done = await ctx.runner.run(ctx.privileged(unit_env_argv(spec.unit, user_unit=spec.user_unit)),
                                    timeout=30.0)
        env, user = parse_unit_env(done.stdout.decode("utf-8", "replace"))
        if spec.user_unit:  # the SSH user's own manager: its home
            done = await ctx.runner.run(["sh", "-c", 'printf "%s\\n" "$HOME"'], timeout=30.0)
            home = done.stdout.decode("utf-8", "replace").strip() or None
        else:
            name = user or "root"
            done = await ctx.runner.run(["getent", "passwd", name], timeout=30.0)
            home = home_from_passwd(done.stdout.decode("utf-8", "replace"))
            if home is None and name in ("root", "0"):
                home = "/root"
        cache = hub_cache(env, home if home is None or home.startswith("/") else None)
        self._hub_cache = (key, cache)
        return cache

    async def run(self) -> None:
        """Watch downloads until cancelled."""
        ctx = self.context
        spec = ctx.spec
        sudo = False
        while True:
            s = ctx.facts()  # no verdict read here: none judged for this look
            if not wanted(s.state, s.phase, s.progress.phase if s.progress is not None else None, s.model):
                if ctx.failing("download") and not ctx.unreachable():
                    # That download is over. (Not while the host is out of reach: a ProbeOk says
                    # the connection works.)
                    ctx.emit(ProbeOk(ctx.clock.now(), "download"))
                await ctx.clock.sleep(ctx.cadence.unit_interval_s)
                continue
            repo = hub_repo_id(s.model)
            assert repo is not None
            path = ""
            done: Completed | None = None
            try:
                cache = await self.find_hub_cache()
                if cache is None:
                    ctx.fail("download", "command", "the Hugging Face cache folder is not known (HF_HOME or "
                             "HF_HUB_CACHE is relative, or the user's home is unknown): set hf_cache for this host")
                    await ctx.clock.sleep(ctx.cadence.download_interval_s)
                    continue
                path = repo_dir(cache, repo)
                argv = sample_argv(path)
                done = await ctx.runner.run(["sudo", "-n", *argv] if sudo else argv, timeout=SAMPLE_TIMEOUT_S)
                sample = parse_sample(done.stdout.decode("utf-8", "replace"), ctx.clock.now(), path)
            except ProbeError as exc:
                if exc.kind == "timeout":
                    ctx.fail("download", "command", f"du of {path or 'the cache'} took more than {SAMPLE_TIMEOUT_S:.0f} s")
                elif exc.kind not in CONNECTION_KINDS:
                    ctx.fail("download", exc.kind, exc.message)
                await ctx.clock.sleep(ctx.cadence.download_interval_s)
                continue
            except ValueError as exc:
                err = done.stderr.decode("utf-8", "replace").strip().splitlines() if done is not None else []
                ctx.fail("download", "command", f"{path}: {err[0][:200] if err else exc}")
                await ctx.clock.sleep(ctx.cadence.download_interval_s)
                continue
            if sample.status == "denied" and not sudo and spec.sudo and not spec.user_unit:
                sudo = True  # e.g. /root/.cache: look again through sudo -n at once
                continue
            if sample.status == "denied":
                ctx.fail("download", "permission", f"{path}: the SSH user may not read it"
                         + ("" if sudo else " (set sudo = true for this host, or hf_cache)"))
            else:
                ctx.ok("download")
                ctx.emit(sample)
            await ctx.clock.sleep(ctx.cadence.download_interval_s)
