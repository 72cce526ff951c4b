"""The three test layers, and the guard that keeps the host layer apart.

``host``: a test that needs a real part of a machine: an OpenSSH server (tests/sshd.py,
tests/testhost.py, tests/netns.py), a real systemd (tests/systemd_host.py), the real ``journalctl``
on journal files, tmux, a browser (Chromium), or an upwatch subprocess against such a host or
serving one (``upwatch serve``).

``app``: a test, not ``host``, that runs the whole upwatch: the Textual app under Pilot
(``App.run_test``, the demo app, an SVG snapshot) or upwatch as a process of its own (``python -m
tui ...``): no host, but a second or more each (:func:`runs_the_app`).

Everything else is the fast layer: ``pytest -m "not host and not app"``; ``pytest -m "not host"``
adds the app.

A test is ``host`` when its fixture closure holds one of :data:`HOST_FIXTURES` (conftest.py marks
it at collection) or when its module or the test itself says ``pytest.mark.host`` (a test that
starts a host or runs a host program directly).

The guard: while a test that is not ``host`` runs (setup, call and teardown), :meth:`Guard.audit`
(a ``sys.addaudithook`` hook installed by conftest.py) refuses to start any of
:data:`HOST_PROGRAMS` (``subprocess.Popen``, hence also asyncio's subprocesses): the spawn raises
:class:`HostInFastLayer`, and conftest fails the test at teardown even when the code under test
swallowed that exception. Not seen: a host program started by a shell (``sh -c 'tmux ...'``) or
by a grandchild process.
"""

from __future__ import annotations

import os
import re
from typing import Any

#: Fixtures that start a real host; a test using one (directly or through another fixture) is ``host``.
HOST_FIXTURES = frozenset({
    "testhost",      # conftest.py: tests/testhost.py on a real sshd
    "netns_hosts",   # conftest.py: tests/netns.py
    "systemd_host",  # conftest.py: tests/systemd_host.py
    "sshd",          # test_ssh_runner.py, test_ssh_openssh.py: tests/sshd.py
    "sha1_sshd",     # test_ssh_openssh.py
    "second_host",   # test_hostile_text.py: a second tests/testhost.py
})

#: Programs (basename of ``argv[0]``) that only a ``host`` test may start.
HOST_PROGRAMS = frozenset({
    "sshd", "ssh", "ssh-keygen", "journalctl", "systemctl", "systemd", "systemd-journal-remote",
    "systemd-run", "tmux", "unshare", "nsenter", "ip", "chromium",
})


#: What in a test's source (or in a function of its module it calls) says it runs the whole
#: upwatch: the Textual app under Pilot, or upwatch as a process of its own (``python -m tui``).
APP_WORDS = ("run_test(", "make_demo_app(", "make_app(", "advance_demo(", "run_app(", '"-m", "tui"',
             "'-m', 'tui'")
_CALLED_RE = re.compile(r"\b([A-Za-z_]\w*)\(")
#: Fixtures that run the app: pytest-textual-snapshot's.
APP_FIXTURES = frozenset({"snap_compare"})


def runs_the_app(item: Any) -> bool:
    """Whether a collected test runs the whole Textual app: it uses an :data:`APP_FIXTURES` fixture,
    its module says ``pytestmark = pytest.mark.app``, or its own function's source holds one of
    :data:`APP_WORDS`."""
    import inspect

    if APP_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    fn = getattr(item, "function", None)
    if fn is None:
        return False
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):  # no source (a generated test): not known to run the app
        return False
    if any(w in source for w in APP_WORDS):
        return True
    module = inspect.getmodule(fn)
    for name in set(_CALLED_RE.findall(source)):  # the module's own helpers, one level down
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper is not fn and inspect.getmodule(helper) is module:
            try:
                if any(w in inspect.getsource(helper) for w in APP_WORDS):
                    return True
            except (OSError, TypeError):
                continue
    return False


class HostInFastLayer(Exception):
    """A test outside the ``host`` layer tried to start a host program; the message names both."""


class Guard:
    """Which test runs now and whether it may start host programs; what it tried anyway.

    Attributes:
        test: the node id of the running test that is *not* ``host``; None while a ``host`` test
            runs or between tests (collection, session fixtures).
        violations: ``"program (argv)"`` for each refused start, since the test began.
    """

    def __init__(self) -> None:
        self.test: str | None = None
        self.violations: list[str] = []

    def begin(self, nodeid: str, host: bool) -> None:
        """A test starts: ``host`` says whether it may start host programs."""
        self.test = None if host else nodeid
        self.violations = []

    def end(self) -> None:
        """The test ended (after its teardown)."""
        self.test = None

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The ``sys.addaudithook`` hook: raises :class:`HostInFastLayer` for a
        ``subprocess.Popen`` of a :data:`HOST_PROGRAMS` program while a fast test runs."""
        if event != "subprocess.Popen" or self.test is None:
            return
        executable, argv = args[0], args[1]
        first = argv[0] if isinstance(argv, (list, tuple)) and argv else (executable or argv)
        words = os.path.basename(os.fsdecode(first)).split() if first else []
        program = words[0] if words else ""
        if program in HOST_PROGRAMS:
            self.violations.append(f"{program} ({argv!r})")
            raise HostInFastLayer(f"{self.test} is not marked host but starts {program}: give it a host "
                                  "fixture or mark it pytest.mark.host (tests/layers.py)")


#: The one guard of the test session (conftest.py drives it).
GUARD = Guard()
