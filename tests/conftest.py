"""Shared paths and fixtures for the tests. Every fixture file a test reads lives under tests/fixtures/;
``testhost`` and ``netns_hosts`` are real SSH hosts (tests/testhost.py, tests/netns.py); ``systemd_host``
is a host whose service manager is a real systemd (tests/systemd_host.py). A test that uses one is
marked ``host`` here; the guard of tests/layers.py keeps every other test from starting a host
program (``pytest -m "not host and not app"``: the fast layer)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from layers import GUARD, HOST_FIXTURES, runs_the_app
from sshd import SshdError
from testhost import TestHost, start_testhost

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = FIXTURES / "logs"
EXTRA_LOGS = FIXTURES / "logs-extra"
JOURNAL = FIXTURES / "journal"


def log_cases() -> list[Path]:
    """Every ``NAME.log`` that has a ``NAME.expected.json`` beside it, shared and our own."""
    return sorted(p.with_suffix(".log") for d in (LOGS, EXTRA_LOGS)
                  for p in (q.with_name(q.name.replace(".expected.json", "")) for q in d.glob("*.expected.json")))


# --- the test layers (tests/layers.py) -------------------------------------------------------------

sys.addaudithook(GUARD.audit)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``host`` every test whose fixture closure holds a real-host fixture, and ``app`` every
    other test that runs the whole Textual app (:func:`layers.runs_the_app`), before ``-m`` selects."""
    for item in items:
        if HOST_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.host)
        elif item.get_closest_marker("host") is None and runs_the_app(item):
            item.add_marker(pytest.mark.app)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """While a test that is not ``host`` runs (setup to teardown), host programs are refused."""
    GUARD.begin(item.nodeid, host=item.get_closest_marker("host") is not None)
    try:
        yield
    finally:
        GUARD.end()


@pytest.fixture(autouse=True)
def _fast_layer_started_no_host() -> Iterator[None]:
    """Fail a test outside the ``host`` layer that tried to start a host program, even when the
    code under test swallowed the :class:`layers.HostInFastLayer` it got."""
    yield
    if GUARD.test is not None and GUARD.violations:
        pytest.fail(f"not marked host, yet tried to start: {'; '.join(GUARD.violations)}", pytrace=False)


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test keeps its audit log and history in a folder of its own ($UPWATCH_DATA_DIR),
    never in the user's data folder."""
    folder = tmp_path_factory.mktemp("upwatch-data")
    monkeypatch.setenv("UPWATCH_DATA_DIR", str(folder))
    return folder


# --- real test hosts (tests/testhost.py, tests/netns.py) ------------------------------------------


@contextmanager
def running_testhost(folder: Path, what: str, **kwargs: object) -> Iterator[TestHost]:
    """A test host (:func:`testhost.start_testhost` with ``kwargs``) in ``folder``, stopped after,
    even when the test failed; the test fails saying why when it cannot start."""
    try:
        host = start_testhost(folder, **kwargs)  # type: ignore[arg-type]
    except (SshdError, OSError, RuntimeError) as exc:
        pytest.fail(f"cannot start {what}: {exc}", pytrace=False)
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def testhost(tmp_path: Path) -> Iterator[TestHost]:
    """A fake GPU host on a real sshd (tests/testhost.py) in its default state: ``active-running``
    for ``systemctl show``, 8 H100 rows, no compute apps, 5 journal entries of a real SGLang start,
    health 200. Stopped after the test, even when it failed."""
    with running_testhost(tmp_path / "testhost", "the test host") as host:
        yield host


@pytest.fixture
def netns_hosts(tmp_path: Path) -> Iterator[list]:
    """Two :class:`netns.NetnsHost` (``gpu-node-1``, ``gpu-node-2``), each in its own network
    namespace with its own sshd on ``10.200.N.2:22``; namespaces and sshds removed afterwards."""
    from netns import start_netns_host

    hosts = []
    try:
        for i in range(2):
            try:
                hosts.append(start_netns_host(tmp_path / f"ns{i}", i))
            except (SshdError, OSError, RuntimeError) as exc:
                pytest.fail(f"cannot start network-namespace host {i}: {exc}", pytrace=False)
        yield hosts
    finally:
        for h in hosts:
            h.stop()


@pytest.fixture
def systemd_host(tmp_path: Path) -> Iterator:
    """A :class:`systemd_host.SystemdHost` (``gpu-node-3``): real systemd 252 as PID 1 of its own
    namespaces, sshd on ``10.201.N.2:22``, ``fake-llm.service`` replaying ``sglang-ok-01.log`` at
    speed 50 (:func:`systemd_host.llm_unit`). Powered off and removed after the test, even when it
    failed; a host that cannot boot fails the test with the reason (never a skip)."""
    from systemd_host import start_systemd_host

    try:
        host = start_systemd_host(tmp_path / "sysd", 0)
    except (SshdError, OSError, RuntimeError, subprocess.SubprocessError) as exc:
        pytest.fail(f"cannot start the systemd test host: {exc}", pytrace=False)
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    """Tasks the test starts (a source's loop), cancelled at its end."""
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
