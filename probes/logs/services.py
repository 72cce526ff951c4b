"""A log of several services (``docker compose logs``, ``kubectl logs --prefix``): one reader each.

Each service's lines go to a reader of its own; the log's reading is that of the engine's
service: of the services whose lines name an engine (a web UI, a gateway or a database names
none), the one in the worst state (a failed engine beside a ready one is what the operator must
see), then the one with the most evidence.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from probes.data.reading import Reading
from probes.logs.logline import Line

_MAX_SERVICES = 16
#: How bad a reading's state is, to choose among several engine services.
_STATE_WORSE = {"failed": 4, "loading": 3, "stopped": 2, "ready": 1}
# docker compose names a service's containers SERVICE-1, SERVICE-2: the service is the name without it.
_COMPOSE_INDEX_RE = re.compile(r"-\d{1,4}$")


class ServiceReader(Protocol):
    """What :class:`Services` needs of a service's reader."""

    @property
    def engine_evidence(self) -> int:
        """The most evidence any one engine has in the service's lines (0: they name none)."""
        ...

    def reading(self, ended: bool = False) -> Reading:
        """The service's reading."""
        ...


R = TypeVar("R", bound=ServiceReader)


class Services(Generic[R]):
    """The services of one log, each with its reader (``subs``, by service name, at most
    :data:`_MAX_SERVICES`; ``make`` makes one). Made at the first line with a service prefix,
    whose reader it makes at once: ``subs`` is never empty after :meth:`route`.

    ``last`` is the service of the last line; ``depth`` the deepest wrapper a service prefix was
    seen at (:attr:`~probes.logs.logline.Line.service_depth`).
    """

    __slots__ = ("make", "subs", "last", "depth")

    def __init__(self, make: Callable[[], R]) -> None:
        self.make = make
        self.subs: dict[str, R] = {}
        self.last: str | None = None
        self.depth = 0

    def route(self, ln: Line) -> R | None:
        """The reader for a line (None past :data:`_MAX_SERVICES` services). A line with no
        service prefix (a bar's frame), or only an outer wrapper's, continues the last service's;
        ``ln.service`` is set to the service it goes to."""
        if ln.service_depth < self.depth and self.last is not None:
            ln.service = None  # only an outer wrapper's prefix: as unprefixed inside it
        self.depth = max(self.depth, ln.service_depth)
        if ln.service is None:
            ln.service = self.last  # an unprefixed line (a bar's frame) continues the last service's
        self.last = service = ln.service
        if service is None:
            return None  # not a service's line (the reader routes a line only once one had a prefix)
        sub = self.subs.get(service)
        if sub is None:
            if len(self.subs) >= _MAX_SERVICES:
                return None
            sub = self.subs[service] = self.make()
        return sub

    def engine_services(self) -> list[tuple[str, R]]:
        """The services whose lines name an engine, most evidence first."""
        named = [(name, sub) for name, sub in self.subs.items() if sub.engine_evidence]
        return sorted(named, key=lambda item: -item[1].engine_evidence)

    def chosen(self, ended: bool = False) -> tuple[str, R, int] | None:
        """The service whose reading is the log's, and how many services name an engine; None when
        several services name none (with one service, its lines are the log's whatever they name)."""
        named = self.engine_services()
        if not named:
            if len(self.subs) == 1:  # one service: its lines are the log's, whatever they name
                name, sub = next(iter(self.subs.items()))
                return name, sub, 0
            return None
        if len(named) == 1:
            return named[0][0], named[0][1], 1
        worst = max(named, key=lambda item: _STATE_WORSE.get(item[1].reading(ended).state, 0))
        return worst[0], worst[1], len(named)

    def reading(self, lines: int, bad_lines: int, ended: bool) -> Reading | None:
        """The chosen service's reading, with the whole log's line counts (``lines``,
        ``bad_lines``) and the service's name (without compose's ``-N``) when there are several;
        None when no service is chosen."""
        chosen = self.chosen(ended)
        if chosen is None:
            return None
        name, sub, engines = chosen
        return dataclasses.replace(sub.reading(ended), lines=lines, bad_lines=bad_lines,
                                   service=_COMPOSE_INDEX_RE.sub("", name) if len(self.subs) > 1 else None,
                                   engine_services=engines)
