"""What the startup reader knows after some lines: :class:`Reading` and its parts (phase marks,
progress, the decisive line, suspects, failed starts). Frozen values made by
:class:`probes.logs.reader.StartupReader`; ``upwatch replay --json`` prints :meth:`Reading.to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """Where a phase began.

    Attributes:
        phase: canonical phase id.
        line: 1-based input line number of the first line attributable to the phase.
        time: ISO 8601 local time of that line (``2025-03-08T12:29:04``; ``Z``/offset when known),
            or None when the line had no timestamp. A date without a year takes the year of the
            nearest full date in the log; with none, the year is left out (``--02-12T19:33:39``).
        text: the line as shown to an operator.
        duration_s: seconds until the next phase began (or until the last timestamped line, for the
            current phase); None when either end has no time.
    """

    phase: str
    line: int
    time: str | None
    text: str
    duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """Progress inside a phase: ``done`` of ``total`` (shards, batches, files; bytes for downloads)."""

    phase: str
    done: float
    total: float

    @property
    def fraction(self) -> float:
        """``done / total`` in [0, 1] (0 when total is 0)."""
        return min(1.0, self.done / self.total) if self.total else 0.0


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """The decisive failure line of a start: its line number, text, cause id and hint, and the
    time its prefix gives (ISO text as :attr:`PhaseMark.time` has it; None for a line with none)."""

    line: int
    text: str
    cause: str
    hint: str
    time: str | None = None


@dataclass(frozen=True, slots=True)
class Suspect:
    """A line of the last start that looks like a failure: its line number, text, cause id, and
    whether it was logged at a low level (DEBUG/INFO/WARNING, which never ends a start)."""

    line: int
    text: str
    cause: str
    low: bool = False


@dataclass(frozen=True, slots=True)
class FailedStart:
    """One failed start of a restart loop: its cause id (or None), the phase it died in, and when
    it began (ISO text as in :class:`PhaseMark`, or None)."""

    cause: str | None
    phase: str
    began: str | None


@dataclass(frozen=True, slots=True)
class Reading:
    """What the reader knows after some number of lines. Describes the last start in the log.

    Attributes:
        engine: engine id (``sglang``, ``vllm``, ``tgi``, ``llamacpp``, ``trtllm``, ``ollama``) or
            ``unknown``.
        state: ``loading``, ``ready``, ``failed`` or ``stopped`` (stopped on purpose).
        phase: where the last start is; for a failed start, the phase in which it failed.
        phases: where each phase of the last start began, in order of first appearance.
        progress: the last bar's ``n/N`` in the last start, or None.
        error: the decisive line of the last start, or of the latest failed start when the last
            start has not failed (yet), or None.
        cause: the last start's cause id when it failed, else None.
        hint: one line an operator can act on ("" when nothing failed).
        starts: server starts with any visible evidence in the log.
        restart_loop: two or more starts failed with no ready between them.
        restart_counter: the last ``restart counter is at N`` systemd logged, or None.
        gave_up: systemd hit the unit's start limit and stopped restarting it.
        lines: physical input lines read.
        bad_lines: journal records that could not be read (truncated or invalid JSON).
        last_line: the last non-empty line the server wrote (not systemd), or "".
        began: the time of the last start's first line (its systemd ``Started`` line, or its first
            own line), ISO text as in :class:`PhaseMark`, or None.
        failed_starts: the failed starts since the last ready (the restart loop's iterations,
            oldest first; the last start included when it failed).
        model: the model the last start serves (a hub id or a path), or None (see
            :mod:`probes.logs.identity`).
        args_hash: 12 hex digits identifying the last start's engine arguments, or None.
        port: the TCP port the last start says it serves on (its arguments, or the line that
            says it listens), or None (see :func:`probes.logs.identity.listen_port`).
        suspect: while the last start has not failed, its most decisive unrecovered suspect (a
            line that looks like a failure, with no proof yet that the process ended), or None.
        suspects: the last start's unrecovered suspects, in order (the decisive line of a failed
            start is chosen among them).
        service: the service whose lines were read, when the log holds several (``docker
            compose logs``, ``kubectl logs --prefix``); None for a log of one.
        engine_services: how many of those services name an engine (the reading is the one in
            the worst state); 0 for a log without service prefixes.
    """

    engine: str
    state: str
    phase: str
    phases: tuple[PhaseMark, ...]
    progress: Progress | None
    error: ErrorLine | None
    cause: str | None
    hint: str
    starts: int
    restart_loop: bool
    restart_counter: int | None = None
    gave_up: bool = False
    lines: int = 0
    bad_lines: int = 0
    last_line: str = ""
    began: str | None = None
    failed_starts: tuple[FailedStart, ...] = ()
    model: str | None = None
    args_hash: str | None = None
    port: int | None = None
    suspect: ErrorLine | None = None
    suspects: tuple[Suspect, ...] = ()
    service: str | None = None
    engine_services: int = 0

    @property
    def phases_seen(self) -> list[str]:
        """Phase ids of the last start, in order of their first line."""
        return [m.phase for m in self.phases]

    def to_json(self) -> dict[str, Any]:
        """The reading as ``upwatch replay --json`` prints it (exactly these keys)."""
        prog = None
        if self.progress is not None:
            prog = {"phase": self.progress.phase, "done": _num(self.progress.done),
                    "total": _num(self.progress.total)}
        return {
            "engine": self.engine,
            "state": self.state,
            "phase": self.phase,
            "phases_seen": self.phases_seen,
            "phases": [{"phase": m.phase, "line": m.line, "time": m.time, "text": m.text} for m in self.phases],
            "progress": prog,
            "error": None if self.error is None else {"line": self.error.line, "time": self.error.time,
                                                   "text": self.error.text},
            "cause": self.cause,
            "hint": self.hint,
            "starts": self.starts,
            "restart_loop": self.restart_loop,
            "suspects": [{"line": s.line, "cause": s.cause, "text": s.text} for s in self.suspects],
            "service": self.service,
        }


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x
