"""The audit log: JSON lines, one per operator action (done, failed, cancelled or refused), in the
data folder (:func:`probes.store.paths.default_data_dir`).
"""

from __future__ import annotations

import getpass
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from probes.hosttext import json_text
from probes.spec import HostSpec
from probes.store.paths import default_data_dir

#: The audit log's file name in the data folder.
AUDIT_FILE = "audit.jsonl"
#: Who acts through upwatch, the ``actor`` of an audit line: ``tui`` (a key in the dashboard, the
#: default), ``wait`` (``upwatch wait --restart``), ``mcp`` (a coding agent through ``upwatch mcp
#: --allow-actions``).
ACTORS = ("tui", "wait", "mcp")
#: Most characters of a command's output kept in an audit line (its end).
OUTPUT_MAX_CHARS = 4000


class PlannedAction(Protocol):
    """What the audit log records of an action (:class:`probes.ops.actions.ActionPlan` is one)."""

    @property
    def host(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def shown(self) -> str: ...
    @property
    def pids(self) -> tuple[int, ...]: ...


def truncate(text: str) -> str:
    """``text`` if at most :data:`OUTPUT_MAX_CHARS` long, else its end with ``[N characters cut] `` before it."""
    if len(text) <= OUTPUT_MAX_CHARS or (text.startswith("[") and " characters cut] " in text[:40]):
        return text
    cut = len(text) - OUTPUT_MAX_CHARS
    return f"[{cut} characters cut] " + text[-OUTPUT_MAX_CHARS:]

def iso_time(epoch_s: float) -> str:
    """``2025-05-02T16:15:37.123+02:00``: local time with its UTC offset."""
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).astimezone().isoformat(timespec="milliseconds")


@dataclass
class AuditLog:
    """Append-only JSON lines, one per action (done, failed, cancelled or refused).

    Each line: ``time`` (ISO 8601 with offset), ``user`` (who ran upwatch), ``actor`` (which of
    upwatch's interfaces acted: :data:`ACTORS`), ``host``, ``target``,
    ``unit``, ``action``, ``command`` (the shown command line), ``outcome`` (``ok``, ``failed``,
    ``error``, ``cancelled``, ``refused``), ``exit_status`` (int or null), ``output`` (stdout then
    stderr, at most :data:`OUTPUT_MAX_CHARS`, the end kept), ``duration_s``, and ``pids`` for
    ``kill_pids``.

    Args:
        path: the file (default: ``audit.jsonl`` in :func:`default_data_dir`).
        now: wall time for the ``time`` field (tests pass a fixed one).
    """

    path: Path = field(default_factory=lambda: default_data_dir() / AUDIT_FILE)
    now: Callable[[], float] = time.time

    def record(self, plan: PlannedAction, outcome: str, *, exit_status: int | None = None,
               output: str = "", duration_s: float | None = None, actor: str = "tui") -> dict[str, object]:
        """Append one line for ``plan``, done by ``actor`` (one of :data:`ACTORS`); returns the record
        written. A log that cannot be written raises :class:`OSError` (the UI says so: an action must
        not go unrecorded silently)."""
        try:
            user = getpass.getuser()
        except Exception:  # no user name for this uid (containers)
            user = str(os.getuid())
        rec: dict[str, object] = {"time": iso_time(self.now()), "user": user, "actor": actor, "host": plan.host,
                                  "target": plan.target, "unit": plan.unit, "action": plan.action,
                                  "command": plan.shown, "outcome": outcome, "exit_status": exit_status,
                                  "output": truncate(output),
                                  "duration_s": None if duration_s is None else round(duration_s, 3)}
        if plan.pids:
            rec["pids"] = list(plan.pids)
        self.write(rec)
        return rec

    def refused(self, spec: HostSpec, action: str, reason: str, *, actor: str = "tui") -> dict[str, object]:
        """Append a line for an action ``actor`` asked for that was refused before it could be planned."""
        rec: dict[str, object] = {"time": iso_time(self.now()), "actor": actor, "host": spec.name, "target": spec.target,
                                  "unit": spec.unit, "action": action, "command": None, "outcome": "refused",
                                  "exit_status": None, "output": truncate(reason), "duration_s": None}
        self.write(rec)
        return rec

    def write(self, rec: Mapping[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = (json_text(rec) + "\n").encode("utf-8", "replace")  # `cat audit.jsonl` shows no escape
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)  # one write per line: lines of two upwatch instances never interleave
        finally:
            os.close(fd)

    def lines(self) -> list[dict[str, Any]]:
        """Every record in the file, oldest first ([] when there is none yet)."""
        if not self.path.exists():
            return []
        return [json.loads(ln) for ln in self.path.read_text(encoding="utf-8").splitlines() if ln.strip()]
