"""One server start as the reader follows it: its :class:`Life`, phases, progress and failures.

A start is one process lifetime of the unit. :class:`Start` holds what the log has said of it so
far (the phase of each process, the marks, the bars, the suspect lines); :class:`Failure` is one
line that looks like a failure or proves one. The code that moves a start along lives beside
these values: :mod:`probes.logs.phases` (phases and progress), :mod:`probes.logs.failures`
(suspects and the decisive line), :mod:`probes.logs.lifecycle` (new starts and systemd's lines).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from probes.logs.timeline import Mark


class Life(enum.Enum):
    """Where one start is in its lifecycle (a start is one process lifetime of the unit).

    ``EMPTY`` (nothing seen yet) → ``LOADING`` → ``READY`` (or ``PROVISIONAL``: vLLM's
    ``Application startup complete.`` before the bind, which a bind error takes back), and from any
    of them ``FAILED`` (on evidence that the process ended or cannot go on) or ``STOPPED`` (ended on
    purpose). A ``READY`` start may still fail (a crash while serving); a ``FAILED`` one becomes
    ``READY`` again only if the server says ready after all.
    """

    EMPTY = "empty"
    LOADING = "loading"
    PROVISIONAL = "provisional"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(slots=True)
class Failure:
    """A line that looks like a failure (a suspect), or that proves one."""

    line: int
    text: str
    msg: str
    cause: str
    strength: int
    hint: str
    low: bool = False       # logged at DEBUG/INFO/WARNING: never terminal, never ends a log by itself
    phase: int = -1         # the phase the failure happened in, as far as known when it was seen
    mark: Mark | None = None  # the line that named that phase (a frame, the exception text)
    at: Mark | None = None    # where the line itself is
    thread: bool = False       # a thread died of it (the process may well go on)

    def beats(self, cur: Failure | None) -> bool:
        """Whether this line is more decisive than ``cur``: a line logged as an error beats one
        logged at a lower level, then the stronger cause; between equals the first, except that a
        complete copy of a truncated line replaces it."""
        if cur is None:
            return True
        if self.low != cur.low:
            return cur.low
        return self.strength > cur.strength or (
            self.strength == cur.strength and self.cause == cur.cause and len(self.msg) > len(cur.msg)
            and self.msg.startswith(cur.msg))


@dataclass(slots=True)
class Start:
    """What the log has said of one start. Phases are indices into
    :data:`~probes.data.vocab.PHASES` (-1: none yet)."""

    life: Life = Life.EMPTY
    main: int = -1                      # phase index of the main process
    ranks: dict[str, int] = field(default_factory=dict)
    marks: dict[str, Mark] = field(default_factory=dict)
    first: Mark | None = None           # the start's first line (fallback "starting" mark)
    launched: bool = False              # ... and that line is systemd's "Starting"/"Started"
    job_pending: bool = False           # systemd said "Starting" and not yet "Started"
    served: bool = False                # it was ready at some point (a crash after it starts a new count)
    pre_ready: int = -1
    fail_phase: int = -1
    error: Failure | None = None        # the decisive line among the unrecovered suspects
    suspects: list[Failure] = field(default_factory=list)
    pending: Failure | None = None      # an exception while serving, not (yet) fatal
    completed: int = -1                 # the phase a "... took N s" line said was done
    done_ranks: dict[int, set[str]] = field(default_factory=dict)
    bars: dict[str | None, tuple[str, float, float]] = field(default_factory=dict)
    last_bar_phase: str | None = None
    output: bool = False                # the server itself wrote a line in this start
    banners: set[str] = field(default_factory=set)  # the banner rules (patterns) seen in this start
    ended: bool = False                 # systemd says the process is gone
    end: Mark | None = None             # systemd's first line saying so (with a time): where the start's last phase ends
    exited: bool = False                # ... with a "Main process exited" line
    stopping: bool = False              # systemd is stopping it on purpose
    invocation: str | None = None
    model: str | None = None            # what the start serves (probes/logs/identity.py)
    args_hash: str | None = None
    port: int | None = None             # the port the start says it serves on

    @property
    def evidence(self) -> bool:
        """Anything at all was seen of this start."""
        return self.life is not Life.EMPTY

    @property
    def failed(self) -> bool:
        """The start is known to have failed."""
        return self.life is Life.FAILED

    @property
    def ready(self) -> bool:
        """The server said it is ready (provisionally included)."""
        return self.life is Life.READY or self.life is Life.PROVISIONAL

    def host_phase(self) -> int:
        """The host's phase: the main process's, or the slowest rank's when that is further.

        Ranks are flat (SGLang's TPn, torch's rankN: every one must be done) or grouped per vLLM
        data-parallel engine ("DP1/core", "DP1/Worker_TP0"): an engine is as far as its core or
        its slowest worker, whichever is further, and the host as far as its slowest engine.
        """
        ranks = self.ranks
        if not ranks:
            return self.main
        slowest = None
        engines: dict[str, list[int]] = {}
        for key, p in ranks.items():
            group, sep, member = key.partition("/")
            if not sep:
                slowest = p if slowest is None or p < slowest else slowest
                continue
            core_worker = engines.setdefault(group, [-1, 99])
            if member == "core":
                core_worker[0] = max(core_worker[0], p)
            else:
                core_worker[1] = min(core_worker[1], p)
        for core, worker in engines.values():
            p = max(core, worker if worker != 99 else -1)
            slowest = p if slowest is None or p < slowest else slowest
        assert slowest is not None
        return slowest if slowest > self.main else self.main

    def furthest(self) -> int:
        """The furthest phase any process of the start has reached."""
        return max([self.main, *self.ranks.values()])
