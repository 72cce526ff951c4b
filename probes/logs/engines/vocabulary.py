"""The engines' own vocabulary: what each engine (and the runtimes under them) prints on the startup
path, read from its source across versions, as data (``messages/<engine>.toml``).

Each message names its wording (the format string in the source), where it is logged, the version
range that prints that wording, what it means for a start (``means``) and whole sample lines as
printed. The rule tables (``probes/logs/engines/<engine>.py``) are checked against it
(tests/test_engine_messages.py): every sample must be claimed by a rule of the same meaning, and
``upwatch replay --json`` names, for a reading's decisive line, phase and state, the message the rule
that read it stands for (:func:`message_for`).

Format of a table (TOML 1.0, read with :mod:`tomllib`)::

    engine = "vllm"                 # an engine id of probes.logs.engines.ENGINES, or "runtime"
    repository = "vllm-project/vllm"
    versions_read = ["v0.8.0", ...]
    [[message]]
    id = "startup_complete"        # unique in the table
    means = "ready"                # see MEANS
    text = "Application startup complete."
    where = "uvicorn: lifespan/on.py LifespanOn.startup"
    versions = "0.4 - current"
    samples = ["INFO:     Application startup complete."]
    note = "..."                   # optional
    completes = true               # optional (phase:<id>): the phase is done
    provisional = true             # optional (ready): a failure right after takes it back
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from probes.data.vocab import CAUSE_STRENGTH, PHASE_INDEX

#: The words ``means`` may hold (``phase:``, ``progress:`` take a phase id, ``error:`` a cause id).
MEANS = ("phase", "progress", "ready", "banner", "shutdown", "error", "suspect", "harmless", "identity")
#: The tables there are: the six engines and the runtimes under them.
TABLES = ("vllm", "sglang", "tgi", "llamacpp", "ollama", "trtllm", "runtime")


class VocabularyError(ValueError):
    """A message table that is not in the format above (the message names the table and the entry)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message an engine prints, from its source.

    Attributes:
        table: the table it is in (an engine id or ``runtime``).
        id: its id, unique in the table.
        means: what it means (``phase:weights``, ``ready``, ``error:cuda_oom``, ...; :data:`MEANS`).
        text: the wording, as the format string in the source.
        where: the source file and function that logs it.
        versions: the version range that prints this wording (``"0.8.0 - current"``).
        samples: whole printed lines (with the logger's prefix of that version).
        note: what a rule writer must know (may be empty).
        completes: for ``phase:``, the line says the phase is done.
        provisional: for ``ready``, a failure right after takes it back.
    """

    table: str
    id: str
    means: str
    text: str
    where: str
    versions: str
    samples: tuple[str, ...]
    note: str = ""
    completes: bool = False
    provisional: bool = False

    @property
    def kind(self) -> str:
        """The word of :attr:`means` before ``:`` (``phase``, ``error``, ...)."""
        return self.means.partition(":")[0]

    @property
    def arg(self) -> str | None:
        """The phase or cause id after ``:`` in :attr:`means`, or None."""
        return self.means.partition(":")[2] or None

    def ref(self) -> dict[str, str]:
        """The message as ``replay --json`` names it: ``{"table", "message", "versions", "where"}``."""
        return {"table": self.table, "message": self.id, "versions": self.versions, "where": self.where}


def _check_means(means: str, where: str) -> None:
    kind, _, arg = means.partition(":")
    if kind not in MEANS:
        raise VocabularyError(f"{where}: means {means!r} is none of {', '.join(MEANS)}")
    if kind in ("phase", "progress") and arg not in PHASE_INDEX:
        raise VocabularyError(f"{where}: {means!r} names no phase id")
    if kind == "error" and arg not in CAUSE_STRENGTH:
        raise VocabularyError(f"{where}: {means!r} names no cause id")
    if kind not in ("phase", "progress", "error", "banner") and arg:
        raise VocabularyError(f"{where}: {kind!r} takes no argument")


def parse_table(name: str, text: str) -> tuple[Message, ...]:
    """The messages of one table's TOML text.

    Raises:
        VocabularyError: for TOML that does not parse, a missing or mistyped field, an unknown
            ``means``, phase or cause, a duplicate id, or a message without samples.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise VocabularyError(f"messages/{name}.toml: {exc}") from None
    if doc.get("engine") != name:
        raise VocabularyError(f"messages/{name}.toml: engine = {doc.get('engine')!r}, not {name!r}")
    out: list[Message] = []
    seen: set[str] = set()
    for k, m in enumerate(doc.get("message", []), 1):
        where = f"messages/{name}.toml message {k} ({m.get('id', '?')})"
        for f in ("id", "means", "text", "where", "versions"):
            if not isinstance(m.get(f), str) or not m[f]:
                raise VocabularyError(f"{where}: {f} missing or not a string")
        samples = m.get("samples")
        if not isinstance(samples, list) or not samples or not all(isinstance(s, str) and s for s in samples):
            raise VocabularyError(f"{where}: samples must be a list of whole printed lines")
        if any("\n" in s for s in samples):
            raise VocabularyError(f"{where}: a sample is one line")
        if m["id"] in seen:
            raise VocabularyError(f"{where}: id {m['id']!r} twice")
        seen.add(m["id"])
        _check_means(m["means"], where)
        out.append(Message(name, m["id"], m["means"], m["text"], m["where"], m["versions"], tuple(samples),
                           str(m.get("note", "")), bool(m.get("completes", False)),
                           bool(m.get("provisional", False))))
    return tuple(out)


@cache
def messages(name: str) -> tuple[Message, ...]:
    """The messages of one table (an engine id or ``runtime``); () for a table not written yet.

    Raises:
        VocabularyError: as :func:`parse_table`.
    """
    path = resources.files("probes.logs.engines").joinpath("messages", f"{name}.toml")
    if not path.is_file():
        return ()
    return parse_table(name, path.read_text(encoding="utf-8"))


def all_messages() -> tuple[Message, ...]:
    """Every table's messages, engines first, then the runtimes'."""
    return tuple(m for t in TABLES for m in messages(t))
