"""The dashboard's notifications: the bell, a toast, a desktop notification, a webhook.

The app hands every new snapshot to :meth:`Notifier.observe`; a
:class:`~probes.fold.notify.NoticeTracker` decides what is news (see :mod:`probes.fold.notify`) and each
notice goes to the channels of its host (``notify`` in ``hosts.toml``):

* ``bell``: ``App.bell()`` (once per host per snapshot, however many notices it brings);
* ``toast``: ``App.notify(text, markup=False)``, severity by kind; at most :data:`TOASTS_AT_ONCE`
  within :data:`TOAST_WINDOW_S`, then the rest of the burst in one toast (32 hosts failing at once
  gave 32 toasts that covered the screen); on a small terminal (:func:`small_screen`) one, for
  :data:`SMALL_TOAST_S` seconds;
* ``desktop``: ``notify-send`` (when on ``PATH``) run as an argv list, never through a shell, and
  killed after ``desktop_timeout_s``;
* ``webhook``: ``POST`` of :meth:`~probes.fold.notify.Notice.to_json` (a ``text`` field, so Slack-style
  incoming webhooks show it) with httpx, ``webhook_timeout_s`` in all.

Sending never blocks the screen: desktop and webhook sends go into a bounded queue per target, each
drained by one async worker (group ``notify``), so sends to one target never pile up and a dead
target never holds another. A failed send (refused, timed out, HTTP status 400 or more, notify-send
missing or exiting non-zero, a full queue) is shown as a warning toast naming the target and the
reason, remembered in :attr:`Notifier.failures` (the help screen lists them), and never raised.
"""

from __future__ import annotations

import asyncio
import html
import shutil
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from probes.hosttext import one_line
from probes.fold.notify import Notice, NoticeTracker, url_label
from probes.data.state import HostState
from probes.spec import HostSpec

if TYPE_CHECKING:
    from textual.app import App

#: Toast severity per notice kind.
SEVERITY = {"ready": "information", "failed": "error", "restart_loop": "error", "stalled": "warning"}
#: Toast title per notice kind.
TITLES = {"ready": "ready", "failed": "failed", "restart_loop": "restart loop", "stalled": "stalled"}
#: notify-send urgency per notice kind.
URGENCY = {"ready": "normal", "failed": "critical", "restart_loop": "critical", "stalled": "normal"}
#: Notices waiting per target before new ones are dropped (and the drop shown).
QUEUE_MAX = 32
#: Toasts shown one by one within :data:`TOAST_WINDOW_S` seconds (the app's clock); past them, the
#: notices of a burst (a fleet failing at once) are gathered into one toast, after
#: :data:`TOAST_GATHER_S` real seconds, so toasts never bury the screen.
TOASTS_AT_ONCE = 3
TOAST_WINDOW_S = 10.0
TOAST_GATHER_S = 1.0
#: A terminal under :data:`SMALL_ROWS` rows or :data:`SMALL_COLUMNS` columns is small (80x24): there
#: a toast stays :data:`SMALL_TOAST_S` seconds, a newer one takes its place (one at a time) and a
#: burst is gathered after its first toast, not its third (``--demo --fleet 128`` at 80x24: the
#: start-up toasts covered over half the rows for 15-20 s). See :meth:`tui.app.UpwatchApp.notify`.
SMALL_ROWS = 36
SMALL_COLUMNS = 100
SMALL_TOAST_S = 4.0


def small_screen(size: tuple[int, int]) -> bool:
    """Whether a terminal of ``size`` (columns, rows) is small for toasts (:data:`SMALL_ROWS`)."""
    width, height = size
    return height < SMALL_ROWS or width < SMALL_COLUMNS



@dataclass(frozen=True, slots=True)
class SendFailure:
    """A send that did not go through.

    Attributes:
        target: what it was sent to, as shown (``desktop (notify-send)``, ``webhook https://host/…``).
        reason: why, one line (``connection refused``, ``HTTP 500``, ``no answer within 5 s``).
        time: when it failed (the app's clock, epoch seconds). notice: the line that was not sent.
    """

    target: str
    reason: str
    time: float
    notice: str


class _Lane:
    """One target's queue and the worker that drains it."""

    def __init__(self, label: str, send: Callable[[Notice], object]) -> None:
        self.label = label
        self.send = send
        self.queue: asyncio.Queue[Notice] = asyncio.Queue(maxsize=QUEUE_MAX)
        self.worker = None


class Notifier:
    """Tells the dashboard's user what changed (see the module docstring).

    Args:
        app: the Textual app (for ``bell``, ``notify``, ``run_worker``).
        hosts: the hosts' specs (their ``notify`` channels, ``webhook_url``, ``stall_after_s``).
        since: when watching began (epoch seconds, the app's clock); earlier events are not told.
        now: the app's clock, for the time of a failure.
        webhook_timeout_s: seconds a webhook POST may take in all (connect, send, answer).
        desktop_timeout_s: seconds ``notify-send`` may run before it is killed.
        which: finds a program on ``PATH`` (``shutil.which``; tests pass their own).
    """

    def __init__(self, app: App, hosts: Iterable[HostSpec], since: float, now: Callable[[], float],
                 *, webhook_timeout_s: float = 5.0, desktop_timeout_s: float = 5.0,
                 which: Callable[[str], str | None] = shutil.which) -> None:
        self.app = app
        self.specs = {spec.name: spec for spec in hosts}
        self.tracker = NoticeTracker(since, {s.name: dict(s.stall_after_s) for s in self.specs.values()})
        self.now = now
        self.webhook_timeout_s = webhook_timeout_s
        self.desktop_timeout_s = desktop_timeout_s
        self.which = which
        self._lanes: dict[str, _Lane] = {}
        #: The notices told, oldest first (the last 500).
        self.told: deque[Notice] = deque(maxlen=500)
        #: Sends that went through, per target label.
        self.delivered: dict[str, int] = {}
        #: The last failed send per target label.
        self.failures: dict[str, SendFailure] = {}
        self._toasted: deque[float] = deque()  # when the last toasts went up (the app's clock)
        self._held: list[Notice] = []  # notices of a burst, for the one toast that gathers them

    # --- in: snapshots ---------------------------------------------------------------------------

    def observe(self, state: HostState) -> list[Notice]:
        """A new snapshot of a host: tell what is news, on the host's channels. Returns at once
        (slow sends are queued); never raises for a send."""
        try:
            notes = self.tracker.update(state)
        except Exception as exc:  # a bug in the rules must not stop the repaint that called us
            if "notices" not in self.failures:
                self._failed("notices", f"cannot judge {state.host}: {type(exc).__name__}: {exc}",
                             Notice(state.host, state.unit, "failed", "(not judged)", self.now()))
            return []
        if not notes:
            return notes
        spec = self.specs.get(state.host)
        channels = spec.notify if spec is not None else ("bell", "toast")
        self.told.extend(notes)
        if "bell" in channels:
            self.app.bell()
        for n in notes:
            if "toast" in channels:
                self._toast(n)
            if "desktop" in channels:
                self._queue("desktop (notify-send)", self._desktop, n)
            if "webhook" in channels and spec is not None and spec.webhook_url:
                url = spec.webhook_url
                self._queue(f"webhook {url_label(url)}", lambda n, url=url: self._webhook(url, n), n,
                            key=f"webhook {url}")
        return notes

    def _toast(self, n: Notice) -> None:
        """Show ``n`` as a toast, or, past :data:`TOASTS_AT_ONCE` in :data:`TOAST_WINDOW_S`, hold it
        for the one toast that gathers the burst (:meth:`toast_held`)."""
        now = self.now()
        while self._toasted and now - self._toasted[0] >= TOAST_WINDOW_S:
            self._toasted.popleft()
        at_once = 1 if small_screen(self.app.size) else TOASTS_AT_ONCE
        if len(self._toasted) < at_once and not self._held:
            self._toasted.append(now)
            self.app.notify(n.text, title=TITLES[n.kind], severity=SEVERITY[n.kind],  # type: ignore[arg-type]
                            markup=False, timeout=10)
            return
        if not self._held:
            self.app.set_timer(TOAST_GATHER_S, self.toast_held)
        self._held.append(n)

    def toast_held(self) -> None:
        """One toast for the held notices: how many of each kind, and which hosts (the first few).
        Runs :data:`TOAST_GATHER_S` real seconds after the first held one; a caller that needs a
        fixed picture (the demo's snapshots) runs it at once, and the timer then finds nothing."""
        held, self._held = self._held, []
        if not held:
            return
        self._toasted.append(self.now())
        parts = []
        for kind in SEVERITY:
            hosts = [n.host for n in held if n.kind == kind]
            if hosts:
                shown = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
                parts.append(f"{len(hosts)} {TITLES[kind]}: {shown}")
        worst = "error" if any(SEVERITY[n.kind] == "error" for n in held) else \
            "warning" if any(SEVERITY[n.kind] == "warning" for n in held) else "information"
        self.app.notify("; ".join(parts) + ".",
                        title=f"{len(held)} more hosts changed", severity=worst, markup=False,  # type: ignore[arg-type]
                        timeout=10)

    # --- out: sends ------------------------------------------------------------------------------

    def _queue(self, label: str, send: Callable[[Notice], object], notice: Notice, key: str | None = None) -> None:
        key = key or label
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(label, send)
        if lane.worker is None or lane.worker.is_finished:
            lane.worker = self.app.run_worker(self._drain(lane), name=f"notify {label}", group="notify",
                                              exit_on_error=False)
        try:
            lane.queue.put_nowait(notice)
        except asyncio.QueueFull:
            self._failed(label, f"{QUEUE_MAX} notifications are still waiting to go; this one was dropped", notice)

    async def _drain(self, lane: _Lane) -> None:
        """One target's worker: send what is queued, one at a time; a failure is shown, not raised."""
        while True:
            notice = await lane.queue.get()
            try:
                reason = await lane.send(notice)  # type: ignore[misc]
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug of ours must not end the lane either
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                self._failed(lane.label, reason, notice)
            else:
                self.delivered[lane.label] = self.delivered.get(lane.label, 0) + 1

    def _failed(self, label: str, reason: str, notice: Notice) -> None:
        reason = one_line(reason).strip()
        self.failures[label] = SendFailure(label, reason, self.now(), notice.text)
        self.app.notify(f"{label}: {reason} (not sent: {notice.text})", title="notification not sent",
                        severity="warning", markup=False, timeout=10)

    async def _webhook(self, url: str, notice: Notice) -> str | None:
        """POST the notice as JSON. Returns None when the server took it (HTTP < 400), else why not."""
        import httpx

        t = self.webhook_timeout_s
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(t)) as client:
                resp = await asyncio.wait_for(client.post(url, json=notice.to_json()), t)
        except (TimeoutError, httpx.TimeoutException):
            return f"no answer within {t:g} s"
        except httpx.ConnectError as exc:
            return f"cannot connect ({exc or 'connection failed'})"
        except (httpx.HTTPError, OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        if resp.status_code >= 400:
            body = one_line(resp.text[:120]).strip()
            return f"HTTP {resp.status_code}" + (f": {body}" if body else "")
        return None

    async def _desktop(self, notice: Notice) -> str | None:
        """Run ``notify-send`` (argv, no shell). Returns None when it exited 0, else why not."""
        exe = self.which("notify-send")
        if exe is None:
            return "notify-send is not installed (not on PATH)"
        # The body may hold markup for some notification servers: escape it, it is host text.
        argv = [exe, "--app-name=upwatch", f"--urgency={URGENCY[notice.kind]}",
                f"{notice.host}: {TITLES[notice.kind]}", html.escape(notice.text, quote=False)]
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            return f"notify-send cannot run: {exc}"
        try:
            _, err = await asyncio.wait_for(proc.communicate(), self.desktop_timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            proc.kill()
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return f"notify-send did not finish within {self.desktop_timeout_s:g} s"
        if proc.returncode != 0:
            line = err.decode("utf-8", "replace").strip().splitlines()
            return f"notify-send exited with status {proc.returncode}" + (f": {line[0][:120]}" if line else "")
        return None

    # --- shown ---------------------------------------------------------------------------------

    def status_lines(self) -> list[str]:
        """For the help screen: each target's last failed send, two lines each (target and time, then
        the reason); no lines when nothing failed."""
        import time as _time

        lines = []
        for f in self.failures.values():
            lines.append(f"{f.target}: failed at {_time.strftime('%H:%M:%S', _time.localtime(f.time))}:")
            lines.append(f"  {f.reason}")
        return lines
