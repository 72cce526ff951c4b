"""The table format every engine module fills in, and the matcher that runs it.

An engine module is mostly a tuple of :class:`Rule`: a regular expression and what a line matching
it means (a phase begins, the server is ready, a failure with its cause, a banner that begins a new
start, evidence of which engine wrote the log). Adding an engine is adding a module with a table
and its ``ENGINE`` in the tuple that builds ``ENGINES`` in :mod:`probes.logs.engines` (import it
there); tests/test_engine_lists.py then names the per-engine tables outside this package that must
list it too (the default port, the name in sentences, the unit-name words).

Matching is the reader's hot path (a million lines in a few seconds), so a :class:`Matcher` does not
run every regex on every line. Each rule has *keys*: words (lower case) at least one of which must
occur in a matching line as a whole word. The matcher splits a line into words once, intersects them
with the set of all keys, and runs only the rules whose keys are present.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from functools import cache, cached_property

from probes.data.vocab import CAUSE_STRENGTH, PHASE_INDEX
from probes.logs.engines.patterns import (derive_keys, literal_head, literal_words, required_literals, required_lower,
                                         split_alternation)

_WORD_BYTES = bytes.maketrans(
    bytes(range(256)),
    bytes((b + 32) if 65 <= b <= 90 else (32 if chr(b) in string.punctuation and b != 95 else b)
          for b in range(256)))


@dataclass(frozen=True)
class Rule:
    """One row of an engine table: a pattern and what a matching line means.

    Attributes:
        pattern: a regular expression searched in the line's message (prefixes removed).
        keys: lower-case words, one of which occurs in every matching line (derived when empty;
            required when the pattern has ``|``).
        phase: the canonical phase this line belongs to (it begins the phase if not yet begun).
        ready: the line says the server is ready.
        provisional: a ready line that a following failure can take back (vLLM prints
            ``Application startup complete.`` before binding its port).
        confirm: the line confirms a provisional ready (``Uvicorn running on``).
        cause: a failure cause id from :data:`CAUSES`.
        strength: how decisive the failure line is (default from :data:`CAUSE_STRENGTH`).
        hint: a hint overriding the cause's default; ``{name}`` takes the pattern's named group.
        banner: the line is printed once per server launch; seen again, it begins a new start.
        detect: the engine whose log this line proves (``weak``: only if nothing stronger comes).
        benign: the message this line begins is a warning: failure patterns in it and in its
            continuation lines are ignored (an ignored optional import, a deprecation).
        harmless: the line reports nothing wrong though it holds a failure's words (a request log
            that echoes a client's prompt, a library probe that falls back): failure patterns in it
            are ignored; unlike ``benign``, the lines after it are read as usual.
        completes: the line says its phase is done (``Loading model weights took 10 GB``): a failure
            after it, before the next phase's first line, happened in the next phase.
        ends: the server says it has shut down (Uvicorn's ``Application shutdown complete.``, a
            ``KeyboardInterrupt``): a start that did not fail reads as stopped.
        progress: the pattern's ``done`` and ``total`` groups are progress in ``phase`` (for
            counters that are not tqdm bars, e.g. TGI's ``Download: [1/4]``).
        frame: the pattern names functions or files of a traceback frame (``in
            capture_one_batch_size``, ``model_loader/``): it matches only on frame lines, and
            ``phase`` is then the phase in which a failure under that frame happened (it does not
            move the live phase). Its ``keys`` are the function names, ``files`` the file or
            folder names (``cuda_graph_runner`` for ``.../cuda_graph_runner.py``).
        terminal: the line itself says the process ends or cannot go on (an engine's death line,
            a signal, a native crash, a server that could not bind): the start has failed, not
            just a suspect.
        lifecycle: a systemd event (``started``, ``exited``, ``result``, ``restart``, ``stopping``,
            ``stopped``, ``deactivated``, ``job_failed``, ``gave_up``); only lines written by systemd
            match these.
        flags: ``re`` flags for the pattern.
        example: a real line the rule must match (checked by the tests).

    The pattern is compiled on first use (:attr:`rx`): a run reads lines that try a few of the
    rules, and compiling all of them was a tenth of ``upwatch replay``'s start-up (the tests
    compile every one: tests/test_engine_tables.py).
    """

    pattern: str
    keys: tuple[str, ...] = ()
    phase: str | None = None
    ready: bool = False
    provisional: bool = False
    confirm: bool = False
    cause: str | None = None
    strength: int = 0
    hint: str | None = None
    banner: bool = False
    detect: str | None = None
    weak: bool = False
    benign: bool = False
    harmless: bool = False
    progress: bool = False
    ends: bool = False
    completes: bool = False
    frame: bool = False
    files: tuple[str, ...] = ()
    terminal: bool = False
    lifecycle: str | None = None
    flags: int = 0
    example: str = ""

    @cached_property
    def rx(self) -> re.Pattern[str]:
        """The compiled pattern (with :attr:`flags`), compiled on first use.

        Raises:
            re.error: for a pattern that is not a regular expression.
        """
        return re.compile(self.pattern, self.flags)

    def __post_init__(self) -> None:
        if self.phase is not None and self.phase not in PHASE_INDEX:
            raise ValueError(f"unknown phase {self.phase!r} in rule {self.pattern!r}")
        if self.cause is not None and self.cause not in CAUSE_STRENGTH:
            raise ValueError(f"unknown cause {self.cause!r} in rule {self.pattern!r}")
        keys = self.keys
        if not keys:
            if "|" in self.pattern:
                raise ValueError(f"pattern with alternation needs keys=: {self.pattern!r}")
            keys = derive_keys(self.pattern)
        object.__setattr__(self, "keys", tuple(k.lower() for k in keys))
        if self.cause is not None and not self.strength:
            object.__setattr__(self, "strength", CAUSE_STRENGTH[self.cause])


@dataclass(frozen=True)
class BarLabel:
    """A progress-bar label (the text before ``NN%|``) and the phase its bars belong to."""

    pattern: str
    phase: str
    flags: int = re.IGNORECASE
    rx: re.Pattern[str] = field(init=False, repr=False, compare=False)
    #: Lower-case text one of which every match holds (each branch's :func:`literal_head`), or None.
    heads: tuple[str, ...] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rx", re.compile(self.pattern, self.flags))
        heads = None
        if self.flags == re.IGNORECASE:
            found = [literal_head(b, shortest=1) for b in split_alternation(self.pattern)]
            if all(h is not None and h.isascii() for h in found):
                heads = tuple(dict.fromkeys(h.lower() for h in found if h is not None))
        object.__setattr__(self, "heads", heads)

    def search(self, label: str, low: str | None) -> bool:
        """Whether ``label`` matches. ``low`` is ``label.lower()`` when ``label`` is ASCII, else
        None: an ASCII text matches a case-insensitive ASCII literal only where its lower-case
        copy holds the literal's, so a label without any head is not searched (a vLLM stats
        line's 200 characters cost ~10 us a pattern)."""
        heads = self.heads
        if heads is not None and low is not None:
            for head in heads:
                if head in low:
                    break
            else:
                return False
        return self.rx.search(label) is not None


@dataclass(frozen=True)
class Engine:
    """An engine family: its name, its table, its hints and the syslog identifiers it runs as.

    Attributes:
        name: the id used in readings and ``--engine`` (``sglang``, ``vllm``, ...).
        label: the name shown to people.
        rules: the engine's own rules, most specific first.
        bars: bar labels specific to the engine (common ones live in ``common.py``).
        hints: per-cause hints naming the engine's own flags.
        idents: syslog identifiers that prove the engine (``ollama``).
        dots: the phase of a line of dots only (llama.cpp's ``load_tensors`` prints one dot per
            chunk of tensors it loads), or None.

    Which line-prefix styles (``Line.flavor`` from :mod:`probes.logs.logline`) hint at an engine is
    not here: it is ``_FLAVOR_ENGINE`` in :mod:`probes.logs.classify`.
    """

    name: str
    label: str
    rules: tuple[Rule, ...]
    bars: tuple[BarLabel, ...] = ()
    hints: dict[str, str] = field(default_factory=dict)
    idents: tuple[str, ...] = ()
    dots: str | None = None


_NO_HITS: list[tuple[Rule, re.Match[str]]] = []


#: The table :func:`words_of` translates with: ASCII letters to lower case, punctuation but ``_`` to
#: a space (what :mod:`probes.logs.blockscan` scans a whole block's words in).
WORD_BYTES = _WORD_BYTES


def words_of(data: bytes) -> list[bytes]:
    """The words of ``data`` as the matcher's keys are looked up: ASCII letters in lower case,
    split at white space and punctuation but ``_``."""
    return data.translate(_WORD_BYTES).split()

#: Key words are looked for in the first this many characters of a message: every rule's key sits
#: near the start of the lines it matches, and it bounds the cost of 10 kB argument dumps.
SCAN_CHARS = 400


#: Sets of key words a :class:`Matcher` keeps the rows of (each a few hundred bytes).
_MAX_KEY_SETS = 4096


class Matcher:
    """Runs a table of rules against lines, fast: only rules whose key words occur are tried.

    ``match(msg)`` returns ``[(rule, match), ...]`` for every rule that matches, in table order.
    """

    __slots__ = ("rules", "_rows", "_index", "_keys", "_literals", "_lower", "_rows_of")

    def __init__(self, rules: tuple[Rule, ...] | list[Rule]) -> None:
        self.rules = tuple(rules)
        # key -> ((row id, rule index, branch, literal head), ...), from each rule's rows (see
        # _rule_entries; branch None: the rule's whole pattern). A row id names one regex of one
        # rule (the same under each of its keys), in table order: a line with several keys sorts
        # and dedupes its rows by it, never hashing a Pattern (which hashes its whole code, every
        # time).
        rows: dict[bytes, list[tuple[int, int, str | None, str | None]]] = {}
        ids: dict[tuple[int, str | None], int] = {}
        for i, rule in enumerate(self.rules):
            for key, branch, head in _rule_entries(rule.pattern, rule.flags, rule.keys):
                row = ids.setdefault((i, branch), len(ids))
                rows.setdefault(key, []).append((row, i, branch, head))
        self._rows = {k: tuple(v) for k, v in rows.items()}
        # The same rows with their regexes and needed texts, for the keys a line has held so far
        # (_compiled). The needed texts: one of them is in every match of the row's regex (its
        # literal head, else its required_literals), None when it needs none: a line without any
        # is not searched.
        self._index: dict[bytes, tuple[tuple[int, int, re.Pattern[str], tuple[str, ...] | None], ...]] = {}
        self._keys = frozenset(rows)
        # For each key, texts one of which a line with the key must hold for any of its rows to
        # match, or None where a row requires none: may_match's index, filled as keys come up.
        self._literals: dict[bytes, tuple[str, ...] | None] = {}
        # The keys with a case-insensitive row: their texts are in lower case, for the lower-case
        # copy of an ASCII line (any other line may match them).
        self._lower: set[bytes] = set()
        # The rows of a set of several keys found in a line, sorted and deduped (lines repeat
        # their sets: a start's log is much the same every time); at most _MAX_KEY_SETS sets.
        self._rows_of: dict[frozenset[bytes], list[tuple[int, int, re.Pattern[str], tuple[str, ...] | None]]] = {}

    def match(self, msg: str) -> list[tuple[Rule, re.Match[str]]]:
        """All rules matching ``msg``, in table order (an empty list for most lines)."""
        words = msg[:SCAN_CHARS].encode("utf-8", "surrogateescape").translate(_WORD_BYTES).split()
        keys = self._keys
        if keys.isdisjoint(words):
            return _NO_HITS
        hits = keys.intersection(words)
        index = self._index
        cands: tuple[tuple[int, int, re.Pattern[str], tuple[str, ...] | None], ...] | list[
            tuple[int, int, re.Pattern[str], tuple[str, ...] | None]]
        if len(hits) == 1:
            key = next(iter(hits))
            cands = index.get(key) or self._compiled(key)
        else:
            rows_of = self._rows_of
            rows = rows_of.get(hits)
            if rows is None:
                rows = sorted({c[0]: c for k in hits for c in (index.get(k) or self._compiled(k))}.values())
                if len(rows_of) < _MAX_KEY_SETS:
                    rows_of[hits] = rows
            cands = rows
        out = []
        rules = self.rules
        last = -1
        for _, i, rx, need in cands:
            if i == last:
                continue  # this rule already matched through another branch
            if need is not None:
                for text in need:
                    if text in msg:
                        break
                else:
                    continue  # none of the texts every match holds is there
            m = rx.search(msg, 0, 8192)
            if m is not None:
                out.append((rules[i], m))
                last = i
        return out


    def may_match(self, text: str, words: list[bytes] | None = None) -> bool:
        """False when no rule can match a message that ``text`` ends with (a line with its
        prefixes; at most :data:`SCAN_CHARS` long, so that every word :meth:`match` looks at is in
        it): it holds none of the keys, or for each key it holds, none of the texts its rows
        require. True says only that a rule may match. A look at the words and a few substring
        tests, no regex: the quiet lines' test (:mod:`probes.logs.quiet`). ``words``: the text's
        words as :func:`words_of` gives them, when already split."""
        if words is None:
            words = words_of(text.encode("utf-8", "surrogateescape"))
        keys = self._keys
        if keys.isdisjoint(words):
            return False
        literals = self._literals
        low: str | None = None
        for key in keys.intersection(words):
            need = literals.get(key, ())  # required(key), without the call (the per-line hot path)
            if need == ():
                need = literals[key] = self._required(key)
            if need is None:
                return True
            hay = text
            if key in self._lower:
                if low is None:
                    if not text.isascii():
                        return True
                    low = text.lower()
                hay = low
            for lit in need:
                if lit in hay:
                    return True
        return False


    def _compiled(self, key: bytes) -> tuple[tuple[int, int, re.Pattern[str], tuple[str, ...] | None], ...]:
        """``key``'s rows with their regexes and needed texts (made now, the first time a line
        holds ``key``): (row id, rule index, regex, the texts one of which every match holds: the
        literal head, else :func:`required_literals`; None when it needs none)."""
        rules = self.rules
        got = self._index[key] = tuple(
            (row, i, rules[i].rx if branch is None else re.compile(branch, rules[i].flags),
             (head,) if head is not None else required_literals(rules[i].pattern if branch is None else branch,
                                                                 rules[i].flags))
            for row, i, branch, head in self._rows[key])
        return got

    @property
    def keys(self) -> frozenset[bytes]:
        """Every key word of the rules (lower-case bytes, as :func:`words_of` gives words)."""
        return self._keys

    def required(self, key: bytes) -> tuple[str, ...] | None:
        """The texts one of which a line with the word ``key`` must hold for a rule to match it
        (what :meth:`may_match` tests), or None when a row of ``key`` requires none. Where a row
        of ``key`` is case-insensitive (:meth:`lowered`), the texts are in lower case and what
        must hold one is the line's lower-case copy, for an ASCII line only.

        Raises:
            KeyError: for a word that is not one of :attr:`keys`.
        """
        need = self._literals.get(key, ())
        if need == ():
            need = self._literals[key] = self._required(key)
        return need

    def lowered(self, key: bytes) -> bool:
        """Whether :meth:`required` of ``key`` is in lower case, for a line's lower-case copy (a
        row of ``key`` is case-insensitive). Known once :meth:`required` of ``key`` was asked."""
        return key in self._lower

    def _required(self, key: bytes) -> tuple[str, ...] | None:
        """The texts one of which a line must hold for a row of ``key`` to match (each row's
        :func:`required_literals`, or :func:`required_lower` for a case-insensitive row; then all
        of them in lower case, and ``key`` is noted in ``_lower``), or None when a row requires none."""
        rules = self.rules
        rows = [(rules[i].pattern if branch is None else branch, rules[i].flags) for _, i, branch, _ in self._rows[key]]
        blind = any(flags & re.IGNORECASE for _, flags in rows)
        found = [(required_lower if flags & re.IGNORECASE else required_literals)(pattern, flags)
                 for pattern, flags in rows]
        if None in found:
            return None
        texts = {t for f in found if f for t in f}
        if blind:
            self._lower.add(key)
            texts = {t.lower() for t in texts}
        return tuple(sorted(texts))


@cache
def _rule_entries(pattern: str, flags: int, keys: tuple[str, ...]
                  ) -> tuple[tuple[bytes, str | None, str | None], ...]:
    """A rule's rows in a :class:`Matcher`'s index: ``(key, branch, head)``, branch None for the
    rule's whole pattern (its ``rx``), else one of its top-level branches (compiled with the rule's
    flags), head its :func:`literal_head` (or None). Cached: every engine's matcher holds the shared rules, and an engine switch builds one.

    A rule "A|B|C" is tried, for a key, only through the branches holding that key: a branch
    that starts with a literal is a fast search in `re`, an alternation is not.
    """
    branches = split_alternation(pattern)
    branch_words = [literal_words(b) for b in branches] if len(branches) > 1 else []
    # Split only when every branch holds one of the keys (else a line could match a branch
    # that no key leads to) and there are no named groups to keep together.
    split = (branch_words and "(?P" not in pattern
             and all(any(k in w for k in keys) for w in branch_words))
    out: list[tuple[bytes, str | None, str | None]] = []
    whole = literal_head(pattern, flags)
    for key in keys:
        mine = [b for b, w in zip(branches, branch_words) if key in w]
        if split and mine:
            out += [(key.encode(), branch, literal_head(branch, flags)) for branch in mine]
        else:
            out.append((key.encode(), None, whole))
    return tuple(out)
