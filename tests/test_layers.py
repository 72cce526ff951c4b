"""The test layers (tests/layers.py): a test outside ``host`` cannot start a host program, a
``host`` test can, and the marking at collection follows the fixtures a test uses."""

from __future__ import annotations

import subprocess

import pytest

from layers import GUARD, HostInFastLayer


def test_a_fast_test_cannot_start_a_host_program() -> None:
    with pytest.raises(HostInFastLayer, match=r"test_layers.py::test_a_fast_test_cannot_start_a_host_program "
                                             r"is not marked host but starts tmux"):
        subprocess.run(["/usr/bin/tmux", "-V"], capture_output=True)
    with pytest.raises(HostInFastLayer, match="starts journalctl"):  # asyncio's subprocesses too
        import asyncio

        asyncio.run(asyncio.create_subprocess_exec("journalctl", "--version"))
    assert [v.split()[0] for v in GUARD.violations] == ["tmux", "journalctl"]
    GUARD.violations.clear()  # seen; else this test fails at teardown, as it should for a real slip
    assert subprocess.run(["true"]).returncode == 0  # any other program is fine


@pytest.mark.host
def test_a_host_test_may_start_one() -> None:
    assert GUARD.test is None
    done = subprocess.run(["journalctl", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("systemd ")


class _Item:
    def __init__(self, *fixturenames: str, function: object = None) -> None:
        self.fixturenames = list(fixturenames)
        self.marks: list[str] = []
        self.function = function

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)

    def get_closest_marker(self, name: str) -> object:
        return name if name in self.marks else None


async def _runs_the_app_under_pilot() -> None:  # a stand-in test body: never run
    from tui.demo_app import make_demo_app
    async with make_demo_app().run_test() as pilot:
        await pilot.pause()


def _does_not() -> None:  # a stand-in test body
    assert 1 + 1 == 2


def _upwatch(*args: str) -> None:  # a stand-in helper of the module: upwatch as a process of its own
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "tui", *args], check=False)


def _calls_a_helper_that_runs_upwatch() -> None:  # a stand-in test body: never run
    _upwatch("replay", "--json", "x.log")


def test_collection_marks_a_test_host_by_its_fixture_closure() -> None:
    from conftest import pytest_collection_modifyitems

    items = [_Item("_own_data_dir", "tmp_path", "runner", "testhost"), _Item("_own_data_dir", "tmp_path"),
             _Item("systemd_host"), _Item("sshd", "runner")]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.marks for i in items] == [["host"], [], ["host"], ["host"]]


def test_collection_marks_a_test_app_when_it_runs_the_app_and_is_not_host() -> None:
    from conftest import pytest_collection_modifyitems

    items = [_Item("tmp_path", function=_runs_the_app_under_pilot), _Item("tmp_path", function=_does_not),
             _Item("snap_compare", function=_does_not), _Item("testhost", function=_runs_the_app_under_pilot)]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.marks for i in items] == [["app"], [], ["app"], ["host"]]
    helper = [_Item("tmp_path", function=_calls_a_helper_that_runs_upwatch)]
    pytest_collection_modifyitems(helper)  # type: ignore[arg-type]
    assert helper[0].marks == ["app"]
