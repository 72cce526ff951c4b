"""The help screen (``?``): the keys, and what the card shows; with the actions off, no action key
but that they are off and how to get them."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP_KEYS = """\
upwatch: is the server up yet?

Overview
  arrows / tab     move between host cards (or rows)
  enter / click    open the host's detail screen
  c                copy a Markdown report of the host (also on the
                   detail screen; OSC 52: `upwatch report HOST` prints it)
  v                view: auto / cards / compact (a row per host)
  o, /             rows: order (severity, name, arrival), filter
  ?                this help
  t                light / dark theme
  q, ctrl+c        quit
"""

HELP_ACTIONS = """
Actions (focused card or row, or the detail screen; each asks first,
showing the exact command; escape or n cancels; off with --read-only)
  r                restart the unit
  s                stop the unit
  S                start the unit
  k                SIGKILL every process of the unit
  K                SIGKILL processes holding GPU memory outside the unit
  R                safe restart: stop, wait for free GPUs, start
"""

#: The help's actions part in a browser session (``upwatch serve``: always read-only).
HELP_ACTIONS_OFF_WEB = """
Actions are off in this view: a browser session of `upwatch serve`
only watches. To restart, stop or kill, run upwatch in a terminal.
"""

#: The help's actions part when the actions are off in a terminal.
HELP_ACTIONS_OFF = """
Actions are off: upwatch runs read-only (--read-only, or
read_only = true in the configuration). To restart, stop or kill,
run upwatch without it.
"""

HELP_REST = """
Detail screen
  /                filter the log (enter keeps it, escape clears it)
  n / N            next / previous line matching the filter
  e                jump to the decisive error line
  f                follow the tail on / off
  left / right     scroll long lines sideways (e and / go back left)
  escape           clear a kept filter, then back to the overview

Card: host · unit · engine · readiness · restarts, the phase bar
(current phase lit, progress inside), time in phase and since start,
GPU memory and utilisation, the last log line, and what is wrong.
Readiness: not running → port closed → HTTP unhealthy → healthy → serving.
The card's first word is the worst that is true: FAILED, UNREACHABLE
(never reached), SSH REFUSED (host key or login refused), CANNOT SEE
(the unit or journal cannot be read), NO SUCH UNIT, RESTART LOOP,
STALLED (no log line for minutes while loading), UNHEALTHY (the log says
ready, the server does not answer as ready), LOADING, READY, STOPPED.
STALE: the host stopped answering; the card keeps the last known state.
"""


def help_text(*, read_only: bool = False, web: bool = False) -> str:
    """The help screen's text: the keys, the action keys (or, when the actions are off, that they
    are and how to get them: in a browser ``web``, run upwatch in a terminal), the rest."""
    actions = HELP_ACTIONS if not read_only else HELP_ACTIONS_OFF_WEB if web else HELP_ACTIONS_OFF
    return HELP_KEYS + actions + HELP_REST


class HelpScreen(ModalScreen[None]):
    """The keys, and what the card shows; with ``read_only``, no action key, but that the actions
    are off and how to get them (``web``: a browser session of ``upwatch serve``)."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 81; height: auto; max-height: 90%; border: thick $accent;
                                  background: $surface; padding: 1 2; scrollbar-size-vertical: 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, notifications: list[str] | None = None, *, read_only: bool = False, web: bool = False) -> None:
        super().__init__()
        self.notifications = list(notifications or ())
        self.read_only = read_only
        self.web = web

    def compose(self) -> ComposeResult:
        with VerticalScroll():  # focused: up/down, page up/down, home/end scroll it
            text = help_text(read_only=self.read_only, web=self.web)
            if self.notifications:
                text += "\nNotifications not sent (the last failure per target)\n" + "".join(
                    f"  {line}\n" for line in self.notifications)
            yield Static(text, markup=False)

    def on_mount(self) -> None:
        box = self.query_one(VerticalScroll)
        box.border_subtitle = "esc, q or ? closes"  # the box covers the footer that would say so
        box.focus()
