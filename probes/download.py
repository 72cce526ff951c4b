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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Seconds between two looks at the folder while a download is being watched.
SAMPLE_INTERVAL_S = 5.0
#: The rate is the growth over the samples of the last this many seconds.
RATE_WINDOW_S = 30.0
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

_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
_HUB_ID_RE = re.compile(rf"({_HUB_PART})/({_HUB_PART})")
_DU_RE = re.compile(r"du (\d{1,20})\t\.")
_INDEX_RE = re.compile(r'index ([0-9A-Za-z._-]{1,100}) "total_size"[ \t]*:[ \t]*([0-9][0-9.eE+]{0,30})')
_REF_RE = re.compile(r"ref ([0-9A-Za-z._-]{0,100})")
_VAR_RE = re.compile(r"\$(?:(\w+)|\{([^}]*)\})")
_CESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


# --- events and state ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class DownloadSample:
    """One look at a repo's folder in the hub cache (an event for :class:`~probes.model.HostModel`).

    Attributes:
        time: when the look ended (epoch seconds, the watcher's clock).
        path: the folder looked at, e.g. ``/root/.cache/huggingface/hub/models--org--name``.
        status: ``ok``, ``missing`` (no such folder yet) or ``denied`` (it exists but may not be
            entered).
        bytes: ``du -sb`` of the folder (bytes), None unless ``ok``.
        expected_bytes: the ``total_size`` of the folder's ``model.safetensors.index.json``
            (bytes), None when there is none (yet) or several that disagree.
    """

    time: float
    path: str
    status: str = "ok"
    bytes: int | None = None
    expected_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class DownloadProgress:
    """How far the current start's download has come (in :attr:`HostState.download`).

    Only made once the folder has grown between two looks: a folder that is missing or does not
    grow (a model already cached) gives no progress at all, never a wrong one.

    Attributes:
        path: the repo folder measured.
        bytes: its size at the last look (bytes; includes the ``.incomplete`` files).
        expected_bytes: the expected total (bytes, the index's ``total_size``), or None.
        rate_bps: growth in bytes per second over the last :data:`RATE_WINDOW_S`, or None with too
            few looks (0 when it did not grow).
        eta_s: seconds left at that rate, or None (no expected total, no growth, or past it).
        sampled_at: when the last look was taken (epoch seconds).
        grew_at: when a look last found it bigger than the look before (epoch seconds).
    """

    path: str
    bytes: int
    expected_bytes: int | None
    rate_bps: float | None
    eta_s: float | None
    sampled_at: float
    grew_at: float

    @property
    def fraction(self) -> float | None:
        """``bytes / expected_bytes`` in [0, 1], or None when the total is unknown."""
        if not self.expected_bytes:
            return None
        return min(1.0, self.bytes / self.expected_bytes)


# --- where to look -----------------------------------------------------------------------------------

def hub_repo_id(model: str | None) -> str | None:
    """The hub repo id ``org/name`` that ``model`` names, or None when it is not one.

    A local path (``/models/x``, ``./x``, ``~/x``, ``models/x/`` with more slashes), an id without an
    org (``gpt2``: not told apart from a relative folder), or a name holding ``--`` or ``..``
    (forbidden in hub ids) is None.
    """
    if not model:
        return None
    m = _HUB_ID_RE.fullmatch(model.strip())
    if m is None or "--" in model or ".." in model:
        return None
    return f"{m.group(1)}/{m.group(2)}"


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
    from probes.unit import parse_properties  # probes.unit imports probes.state, which imports us

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


# --- progress ------------------------------------------------------------------------------------------

def progress_from(samples: Sequence[DownloadSample], window_s: float = RATE_WINDOW_S) -> DownloadProgress | None:
    """Progress from the looks at one folder (oldest first), or None while it has not grown.

    Only ``ok`` samples count. The rate is ``(last - oldest within window_s) / their time apart``
    (the look just before the window when the window holds one look only); a shrinking folder (a
    broken file removed) gives no rate. The ETA is ``(expected - bytes) / rate``.
    """
    ok = [s for s in samples if s.status == "ok" and s.bytes is not None]
    if len(ok) < 2:
        return None
    grew_at = None
    for a, b in zip(ok, ok[1:]):
        if b.bytes > a.bytes:  # type: ignore[operator]
            grew_at = b.time
    if grew_at is None:
        return None
    last = ok[-1]
    ref = ok[-2]
    for s in ok[:-1]:
        if last.time - s.time <= window_s:
            ref = s
            break
    rate: float | None = None
    dt = last.time - ref.time
    if dt > 0 and last.bytes >= ref.bytes:  # type: ignore[operator]
        rate = (last.bytes - ref.bytes) / dt  # type: ignore[operator]
    expected = last.expected_bytes
    eta = None
    if expected is not None and rate and last.bytes < expected:  # type: ignore[operator]
        eta = (expected - last.bytes) / rate  # type: ignore[operator]
    return DownloadProgress(last.path, last.bytes, expected, rate, eta, last.time, grew_at)  # type: ignore[arg-type]


def wanted(state: str, phase: str, progress_phase: str | None, model: str | None) -> bool:
    """Whether a start's download should be sampled now: it is loading, its model id names a hub
    repo, and it is in ``download``, or in ``weights`` with no shard bar yet (vLLM's silent fetch).

    Args:
        state: the start's state (``loading`` ...). phase: its phase id.
        progress_phase: the phase of its current progress bar, or None. model: its model id.
    """
    if state != "loading" or hub_repo_id(model) is None:
        return False
    return phase == "download" or (phase == "weights" and progress_phase != "weights")


# --- words ---------------------------------------------------------------------------------------------

def gib_text(n: float) -> str:
    """Bytes as GiB with one decimal: ``12.4``."""
    return f"{n / 2**30:.1f}"


def rate_text(bps: float) -> str:
    """Bytes per second as ``310 MiB/s`` (one decimal below 10 MiB/s)."""
    mib = bps / 2**20
    return f"{mib:.1f} MiB/s" if mib < 9.95 else f"{mib:.0f} MiB/s"


def eta_text(seconds: float) -> str:
    """``2:37`` (minutes:seconds) or ``1:02:37``."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def download_words(state: object) -> str:
    """The download's line: ``Download 12.4/61.0 GiB · 310 MiB/s · ETA 2:37``; without an expected
    total ``Download 12.4 GiB · 310 MiB/s``; "" when there is no download progress.

    Args:
        state: a :class:`~probes.state.HostState` (or anything with a ``download`` attribute
            holding a :class:`DownloadProgress` or None).
    """
    d = getattr(state, "download", None)
    if not isinstance(d, DownloadProgress):
        return ""
    if d.expected_bytes:
        parts = [f"Download {gib_text(d.bytes)}/{gib_text(d.expected_bytes)} GiB"]
    else:
        parts = [f"Download {gib_text(d.bytes)} GiB"]
    if d.rate_bps is not None:
        parts.append(rate_text(d.rate_bps))
    if d.eta_s is not None:
        parts.append(f"ETA {eta_text(d.eta_s)}")
    return " · ".join(parts)
