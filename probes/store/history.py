"""The start history: how long each start and each of its phases took, in SQLite.

One file, ``history.sqlite3`` in :func:`probes.store.paths.default_data_dir` (the user data folder;
``$UPWATCH_DATA_DIR`` overrides it, as for the audit log). Every finished start (ready or failed)
is written once; :meth:`History.typical` gives the medians of the last comparable ready starts
(same host, unit, model and engine-argument hash), from which ``probes/fold/eta.py`` computes an ETA and
"slower than usual".

Schema (``PRAGMA user_version`` = :data:`SCHEMA_VERSION`)::

    starts(id INTEGER PRIMARY KEY, host TEXT, unit TEXT, model TEXT NULL, args_hash TEXT NULL,
           engine TEXT, began REAL (epoch s), ended REAL NULL, outcome 'ready'|'failed',
           total_s REAL NULL, UNIQUE(host, unit, began))
    phases(start_id → starts.id, phase TEXT, duration_s REAL, PRIMARY KEY(start_id, phase))

The file is opened in WAL mode with a busy timeout, so the dashboard and ``upwatch wait`` may write
at once. A file that is not a database, a folder that cannot be written, or a database made by a
newer upwatch never raises: :attr:`History.problem` says why in one line and every method does
nothing (``record`` returns False, ``typical`` None, ``summary`` []).
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from probes.data.vocab import PHASE_INDEX
from probes.data.state import HostState, PhaseSpan, Typical

#: The history file's name in the user data folder.
HISTORY_FILE = "history.sqlite3"
#: ``PRAGMA user_version`` of the schema this code writes.
SCHEMA_VERSION = 1
#: Ready starts the medians are taken over (the newest ones).
TYPICAL_STARTS = 20
#: Seconds a writer waits for another one's lock before giving up (``PRAGMA busy_timeout``).
BUSY_TIMEOUT_S = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS starts (
    id INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    unit TEXT NOT NULL,
    model TEXT,
    args_hash TEXT,
    engine TEXT NOT NULL DEFAULT 'unknown',
    began REAL NOT NULL,
    ended REAL,
    outcome TEXT NOT NULL CHECK (outcome IN ('ready', 'failed')),
    total_s REAL,
    UNIQUE (host, unit, began)
);
CREATE TABLE IF NOT EXISTS phases (
    start_id INTEGER NOT NULL REFERENCES starts(id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    duration_s REAL NOT NULL,
    PRIMARY KEY (start_id, phase)
);
CREATE INDEX IF NOT EXISTS starts_key ON starts (host, unit, model, args_hash, outcome, began);
"""


def default_history_path() -> Path:
    """``history.sqlite3`` in the user data folder (``$UPWATCH_DATA_DIR`` overrides the folder)."""
    from probes.store.paths import default_data_dir

    return default_data_dir() / HISTORY_FILE


@dataclass(frozen=True, slots=True)
class StartRecord:
    """One finished start as written to the history.

    Attributes:
        host, unit, model, args_hash, engine: what started (model and args_hash None when the
            engine printed neither). began: epoch seconds of its first line. ended: epoch seconds
            of its ready line or decisive error, or None. outcome: ``ready`` or ``failed``.
        total_s: ``ended - began`` in seconds, or None. phases: ``(phase id, seconds)`` of each
            phase with a known duration, in order.
    """

    host: str
    unit: str
    model: str | None
    args_hash: str | None
    engine: str
    began: float
    ended: float | None
    outcome: str
    total_s: float | None
    phases: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """One comparable group of the history (``upwatch history`` prints one per row).

    Attributes:
        host, unit, model, args_hash, engine: the group's key (engine: of its newest start).
        ready, failed: how many starts ended each way.
        typical: medians over the last :data:`TYPICAL_STARTS` ready starts, or None when none was.
        last_began: epoch seconds of the newest start's beginning. last_outcome: its outcome.
    """

    host: str
    unit: str
    model: str | None
    args_hash: str | None
    engine: str
    ready: int
    failed: int
    typical: Typical | None
    last_began: float
    last_outcome: str


def start_record(state: HostState) -> StartRecord | None:
    """The finished start in ``state`` as a :class:`StartRecord`, or None while it is not finished
    (state not ``ready``/``failed``) or has no beginning time.

    Phase durations come from :attr:`HostState.phases` (:func:`phase_durations`); a ready start's
    total runs to its ``ready`` phase, a failed one's to its decisive error (``failed_at``), whose
    phase then lasts until it.
    """
    if state.state not in ("ready", "failed") or state.start_began is None:
        return None
    began = round(state.start_began, 3)
    ended: float | None = None
    if state.state == "ready":
        ended = next((p.began for p in state.phases if p.phase == "ready"), None)
    else:
        ended = state.failed_at
    phases = phase_durations(state.phases, ended)
    total = round(ended - began, 3) if ended is not None and ended >= began else None
    return StartRecord(state.host, state.unit, state.model, state.args_hash,
                       state.engine, began, ended, state.state, total, tuple(phases))


def phase_durations(spans: Sequence[PhaseSpan], ended: float | None = None) -> tuple[tuple[str, float], ...]:
    """Seconds spent in each phase of a start, ``(phase id, seconds)`` in order of first appearance,
    rounded to milliseconds; the ``ready`` phase and what follows it are left out.

    A phase the start came back to (TensorRT-LLM's ``starting``, download, ``starting`` again) counts
    once with its spans summed, so the median of a phase is the time a start spends in it. The last
    span, with no duration of its own, lasts until ``ended`` (a failed start's decisive line) when
    given; a span with no known duration is left out.
    """
    total: dict[str, float] = {}
    for i, p in enumerate(spans):
        if p.phase == "ready":
            break
        dur = p.duration_s
        if dur is None and i == len(spans) - 1 and ended is not None and p.began is not None:
            dur = ended - p.began  # the phase a failed start died in, until its decisive line
        if dur is not None and dur >= 0:
            total[p.phase] = total.get(p.phase, 0.0) + dur
    return tuple((ph, round(d, 3)) for ph, d in total.items())


class History:
    """The start history in one SQLite file (see the module docstring). Thread-safe: one connection
    guarded by a lock, so calls may come from ``asyncio.to_thread``.

    Args:
        path: the database file (default: :func:`default_history_path`). Its folder is made.

    Attributes:
        problem: why the history is off (``history off: PATH: file is not a database``), or None.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_history_path()
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            self._db = self._open()
        except (sqlite3.Error, OSError, ValueError) as exc:
            self._off(exc)

    @property
    def ok(self) -> bool:
        """Whether the history can be read and written."""
        return self._db is not None

    def _off(self, exc: BaseException | str) -> None:
        self.problem = f"history off: {self.path}: {exc}"
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            version = db.execute("PRAGMA user_version").fetchone()[0]  # reads the header: "not a database"
            if version > SCHEMA_VERSION:
                raise ValueError(f"written by a newer upwatch (schema {version}, this one knows {SCHEMA_VERSION})")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA foreign_keys = ON")
            if version < SCHEMA_VERSION:
                db.execute("BEGIN IMMEDIATE")  # two upwatch processes creating it at once: one waits
                try:
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            db.execute(stmt)  # each is IF NOT EXISTS: the second one changes nothing
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    db.execute("COMMIT")
                finally:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Close the file (further calls do nothing)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # --- writing ----------------------------------------------------------------------------------

    def record(self, state: HostState) -> bool:
        """Write the finished start of ``state`` once (see :func:`start_record`).

        Returns:
            True when it was written now; False when it is not finished, was written before (same
            host, unit and beginning), or the history is off (then :attr:`problem` says why).
        """
        rec = start_record(state)
        return self.add(rec) if rec is not None else False

    def add(self, rec: StartRecord) -> bool:
        """Write ``rec`` unless a start of the same host and unit with the same beginning is there.
        Returns True when written."""
        with self._lock:
            db = self._db
            if db is None:
                return False
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    cur = db.execute(
                        "INSERT OR IGNORE INTO starts (host, unit, model, args_hash, engine, began, ended, outcome,"
                        " total_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (rec.host, rec.unit, rec.model, rec.args_hash, rec.engine, rec.began, rec.ended,
                         rec.outcome, rec.total_s))
                    written = cur.rowcount == 1
                    if written:
                        db.executemany("INSERT OR IGNORE INTO phases (start_id, phase, duration_s) VALUES (?, ?, ?)",
                                       [(cur.lastrowid, p, d) for p, d in rec.phases])
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                self._off(exc)
                return False
            return written

    # --- reading ----------------------------------------------------------------------------------

    def typical(self, host: str, unit: str, model: str | None, args_hash: str | None,
                *, limit: int = TYPICAL_STARTS, before: float | None = None) -> Typical | None:
        """Medians over the last ``limit`` ready starts of this host and unit with this model and
        engine-argument hash (None matches only None), or None when there is none (or the history
        is off).

        Args:
            before: the current start's beginning (epoch seconds): only starts that were ready
                before it count, so the current start, once written, is never its own history.
                None: every start.

        Returns:
            A :class:`~probes.data.state.Typical`: ``n`` starts, the median total to ready, and per
            phase the median over the starts that had it.
        """
        with self._lock:
            db = self._db
            if db is None:
                return None
            try:
                return self._typical(db, host, unit, model, args_hash, limit, before)
            except sqlite3.Error as exc:
                self._off(exc)
                return None

    @staticmethod
    def _typical(db: sqlite3.Connection, host: str, unit: str, model: str | None, args_hash: str | None,
                 limit: int, before: float | None = None) -> Typical | None:
        # An earlier start was ready (``ended``) before this one began; ``began`` alone would not
        # do: the beginning of the start being watched can move by a second as more is read.
        cut = "" if before is None else " AND began < ? AND COALESCE(ended, began) <= ?"
        rows = db.execute(
            "SELECT id, total_s FROM starts WHERE host = ? AND unit = ? AND model IS ? AND args_hash IS ?"
            " AND outcome = 'ready'" + cut + " ORDER BY began DESC LIMIT ?",
            (host, unit, model, args_hash, *(() if before is None else (before, before)), limit)).fetchall()
        if not rows:
            return None
        ids = [r[0] for r in rows]
        totals = [r[1] for r in rows if r[1] is not None]
        per: dict[str, list[float]] = {}
        marks = ",".join("?" * len(ids))
        for phase, dur in db.execute(f"SELECT phase, duration_s FROM phases WHERE start_id IN ({marks})", ids):
            per.setdefault(phase, []).append(dur)
        phases = tuple((p, statistics.median(v), len(v))
                       for p, v in sorted(per.items(), key=lambda kv: PHASE_INDEX.get(kv[0], 99)))
        return Typical(host, unit, model, args_hash, len(rows),
                       statistics.median(totals) if totals else None, phases)

    def starts(self, host: str | None = None) -> list[StartRecord]:
        """Every recorded start (of ``host`` when given), oldest first ([] when the history is off)."""
        with self._lock:
            db = self._db
            if db is None:
                return []
            try:
                q = "SELECT id, host, unit, model, args_hash, engine, began, ended, outcome, total_s FROM starts"
                rows = db.execute(q + (" WHERE host = ?" if host is not None else "") + " ORDER BY began, id",
                                  (host,) if host is not None else ()).fetchall()
                out = []
                for sid, h, u, model, args_hash, engine, began, ended, outcome, total_s in rows:
                    ph = db.execute("SELECT phase, duration_s FROM phases WHERE start_id = ?", (sid,)).fetchall()
                    ph.sort(key=lambda x: PHASE_INDEX.get(x[0], 99))
                    out.append(StartRecord(h, u, model, args_hash, engine, began, ended, outcome, total_s,
                                           phases=tuple((p, d) for p, d in ph)))
                return out
            except sqlite3.Error as exc:
                self._off(exc)
                return []

    def summary(self, hosts: Sequence[str] = ()) -> list[SummaryRow]:
        """One :class:`SummaryRow` per (host, unit, model, args hash), of ``hosts`` when given,
        sorted by host, unit, then newest first."""
        with self._lock:
            db = self._db
            if db is None:
                return []
            try:
                q = ("SELECT host, unit, model, args_hash, SUM(outcome = 'ready'), SUM(outcome = 'failed'),"
                     " MAX(began) FROM starts")
                args: tuple[str, ...] = ()
                if hosts:
                    q += f" WHERE host IN ({','.join('?' * len(hosts))})"
                    args = tuple(hosts)
                q += " GROUP BY host, unit, model, args_hash"
                out = []
                for host, unit, model, ah, ready, failed, last in db.execute(q, args).fetchall():
                    engine, outcome = db.execute(
                        "SELECT engine, outcome FROM starts WHERE host = ? AND unit = ? AND model IS ?"
                        " AND args_hash IS ? AND began = ?", (host, unit, model, ah, last)).fetchone()
                    typ = self._typical(db, host, unit, model, ah, TYPICAL_STARTS)
                    out.append(SummaryRow(host, unit, model, ah, engine, ready, failed, typ, last, outcome))
                out.sort(key=lambda r: (r.host, r.unit, -r.last_began))
                return out
            except sqlite3.Error as exc:
                self._off(exc)
                return []
