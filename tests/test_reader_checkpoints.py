"""The reader's whole reading, line by line, on every fixture log, against recorded digests.

``tests/test_fixture_logs.py`` checks the fields a fixture's ``expected.json`` names, at the end.
This checks everything else too: the full ``repr`` of ``reading()`` and of ``reading(ended=True)``
after every line (hashed into a running digest, compared every :data:`EVERY` lines and at the end), on every fixture log (``tests/fixtures/logs``,
the shared fixtures, and ``logs-extra``) and every journal fixture, through each way a line gets
in (``feed_bytes``, as ``upwatch replay`` read a file line by line; ``feed_lines``, its block
path, the block scan judging each line; ``feed``, as the journal's ``MESSAGE`` texts come;
journal records through ``read_path``). The digests in
``tests/fixtures/readings/checkpoints.json`` were recorded from the reader before its fast paths
(issue 17) were written: a shortcut that changes any reading, anywhere, fails here with the log,
the route and the line.

To record them again after a deliberate change of what the reader says (then look at why each
one changed)::

    python tests/test_reader_checkpoints.py --record
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, too

from probes.logs.reader import StartupReader  # noqa: E402
from probes.sources.logfile import iter_lines, read_path  # noqa: E402

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
RECORDED = FIXTURES / "readings" / "checkpoints.json"
#: A reading is taken after every this many lines (a prime, so it falls on every kind of line).
EVERY = 97

#: One checkpoint: (line, digest of every reading() so far, digest of every reading(ended=True) so
#: far); line 0 is the end (with read_path's final reading).
Checkpoint = tuple[int, str, str]


class _Running:
    """Digests of every reading so far: ``reading()`` and ``reading(ended=True)`` after each line
    are hashed in, so a checkpoint's digest changes when any reading before it did."""

    def __init__(self) -> None:
        self.live = hashlib.sha256()
        self.ended = hashlib.sha256()

    def add(self, reader: StartupReader) -> None:
        self.live.update(repr(reader.reading()).encode())
        self.ended.update(repr(reader.reading(ended=True)).encode())

    def checkpoint(self, line: int) -> Checkpoint:
        return line, self.live.hexdigest()[:20], self.ended.hexdigest()[:20]


def _logs() -> list[Path]:
    return sorted([*(FIXTURES / "logs").glob("*.log"), *(FIXTURES / "logs-extra").glob("*.log")])


def _journals() -> list[Path]:
    return sorted((FIXTURES / "journal").glob("*.jsonl"))


def _fed(path: Path, feed: Callable[[StartupReader, bytes], None]) -> list[Checkpoint]:
    reader = StartupReader()
    out: list[Checkpoint] = []
    running = _Running()
    with path.open("rb") as f:
        for n, raw in enumerate(iter_lines(f), 1):
            feed(reader, raw)
            running.add(reader)
            if n % EVERY == 0:
                out.append(running.checkpoint(n))
    return [*out, running.checkpoint(0)]


def _by_read_path(path: Path) -> list[Checkpoint]:
    out: list[Checkpoint] = []
    running = _Running()
    n = 0

    def on_line(reader: StartupReader) -> None:
        nonlocal n
        n += 1
        running.add(reader)
        if n % EVERY == 0:
            out.append(running.checkpoint(n))

    running.live.update(repr(read_path(str(path), on_line=on_line)).encode())  # the final reading
    return [*out, running.checkpoint(0)]


#: How lines get in: as ``upwatch replay`` reads a text file, as journal ``MESSAGE`` texts come,
#: and through :func:`read_path` (journal records included).
ROUTES: dict[str, Callable[[Path], list[Checkpoint]]] = {
    "feed_bytes": lambda p: _fed(p, lambda r, raw: r.feed_bytes(raw)),
    # The block path (StartupReader.feed_lines, probes/logs/blockscan.py) one line a block, so
    # that a reading follows every line: the scan says of each line whether it may matter, and a
    # line it lets through that mattered changes a reading. Runs of many quiet lines are
    # tests/test_reader_block.py's. Its readings are feed_bytes' (RECORDED_AS).
    "feed_lines": lambda p: _fed(p, lambda r, raw: r.feed_lines([raw])),
    "feed": lambda p: _fed(p, lambda r, raw: r.feed(raw.decode("utf-8", "replace"))),
    "read_path": _by_read_path,
}


def checkpoints(route: str, path: Path) -> list[Checkpoint]:
    """The digests of the readings of ``path`` fed by ``route``: every :data:`EVERY` lines and at
    the end (line 0)."""
    return ROUTES[route](path)


#: Routes whose readings must be another route's, recorded once under that route's name.
RECORDED_AS = {"feed_lines": "feed_bytes"}


def _cases() -> list[tuple[str, Path]]:
    return [(route, p) for p in _logs() for route in ("feed_bytes", "feed_lines", "feed")] + [
        ("read_path", p) for p in (*_logs(), *_journals())]


def _key(route: str, path: Path) -> str:
    return f"{RECORDED_AS.get(route, route)}:{path.relative_to(FIXTURES)}"


def test_every_fixture_has_recorded_checkpoints() -> None:
    recorded = json.loads(RECORDED.read_text())
    assert sorted(recorded) == sorted({_key(r, p) for r, p in _cases()})
    assert len(recorded) >= 3 * 86  # the fixture globs matched what they should


@pytest.mark.parametrize(("route", "path"), _cases(), ids=lambda v: v if isinstance(v, str) else v.stem)
def test_every_reading_is_the_recorded_one(route: str, path: Path) -> None:
    want = [tuple(cp) for cp in json.loads(RECORDED.read_text())[_key(route, path)]]
    got = checkpoints(route, path)
    for w, g in zip(want, got):
        assert g == w, f"{_key(route, path)}: the reading after line {w[0] or 'the last'} changed"
    assert len(got) == len(want)


def record() -> None:
    """Write :data:`RECORDED` from the reader as it is now."""
    RECORDED.parent.mkdir(exist_ok=True)
    data = {_key(r, p): checkpoints(r, p) for r, p in _cases() if r not in RECORDED_AS}
    RECORDED.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"recorded {sum(len(v) for v in data.values())} checkpoints of {len(data)} cases in {RECORDED}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit(__doc__)
    record()
