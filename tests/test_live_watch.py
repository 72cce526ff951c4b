"""The whole HostWatcher against real hosts (tests/testhost.py, tests/netns.py): entries followed
live and across a cut connection (none lost, none twice), no remote process left behind by a
stop or a cut, and two namespace hosts where one link goes down and comes back.

Every wait polls a condition with a deadline (``until`` of tests/waiting.py). The journal's
own view (``journalctl --file`` run here on the test host's journal file) is the reference for
texts and cursors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from netns import NetnsHost
from probes.clock import WallClock
from probes.data.state import HostState
from probes.logs.journal_json import READ_FIELDS
from probes.sources.journal_cmd import output_fields_option
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from waiting import until
from testhost import FIXTURES, TestHost

#: The 5 entries every test host's journal is seeded with (start_testhost defaults).
SEEDED = (FIXTURES / "logs" / "sglang-ok-01.log").read_text().splitlines()[:5]
FAST = {"unit_interval_s": 0.2, "health_interval_s": 0.2, "gpu_interval_s": 0.2,
        "apps_interval_s": 0.2, "retry_s": 0.2}
#: A dead link is noticed after about interval * (count_max + 1) = 3 s; reconnects start at 0.2 s.
QUICK_SSH = {"keepalive_interval": 1, "keepalive_count_max": 2, "reconnect_s": 0.2}


class Recorder:
    """``on_change`` that keeps every snapshot the watcher had (``HostState`` is frozen)."""

    def __init__(self) -> None:
        self.states: list[HostState] = []

    def __call__(self, w: HostWatcher) -> None:
        self.states.append(w.state())

    def ever(self, pred: Callable[[HostState], object]) -> bool:
        return any(pred(s) for s in self.states)


def journal_records(host: TestHost) -> list[dict[str, object]]:
    """Every entry of the unit as ``journalctl -o json`` prints it here, from the host's file."""
    done = subprocess.run(["/usr/bin/journalctl", f"--file={host.journal}", "-u", host.unit,
                           "-o", "json", "--no-pager"], capture_output=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def texts(w: HostWatcher) -> list[str]:
    return [e.text for e in w.entries_after(0)]


def batch(name: str, n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"{name} {i} {tag}" for i in range(n)]


async def flush(w: HostWatcher, host: TestHost) -> list[str]:
    """Append a sentinel and wait for it: the stream is in order, so whatever an earlier append
    (or a resumed stream) would still bring in has arrived by then. Returns the sentinel list."""
    mark = batch("sentinel", 1)
    host.append_log_lines(mark)
    await until("the sentinel entry", lambda: texts(w)[-1:] == mark)
    return mark


def watcher(host: TestHost, on_change: Recorder | None = None, *, gpu_interval_s: float = 0.2,
            **ssh: object) -> HostWatcher:
    assert host.health is not None
    spec = HostSpec("gpu-node-1", host.unit, port=host.health.port, ssh=host.target)
    return HostWatcher(spec, host.runner(**ssh), WallClock(), on_change,
                       **{**FAST, "gpu_interval_s": gpu_interval_s})


def process_ids(host: TestHost) -> dict[int, tuple[str, str]]:
    """Remote processes as ``{pid: (start time in ticks, cmdline)}`` (the start time tells a
    reused PID apart)."""
    out = {}
    for pid, cmd in host.remote_processes():
        try:
            start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            continue  # ended meanwhile
        out[pid] = (start, cmd)
    return out


def alive(pid: int, start: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19] == start
    except OSError:
        return False


# --- 1. following ------------------------------------------------------------------------------

async def test_follow_while_appending_gets_every_entry_once_in_order(testhost: TestHost) -> None:
    w = watcher(testhost)
    w.start()
    try:
        await until("the 5 seeded entries", lambda: texts(w) == SEEDED)
        expected = list(SEEDED)
        for name, n in (("first", 3), ("second", 7), ("third", 1)):
            lines = batch(name, n)
            testhost.append_log_lines(lines)
            expected += lines
            await until(f"the {name} batch", lambda: len(texts(w)) >= len(expected))
        expected += await flush(w, testhost)
        assert texts(w) == expected
        entries = w.entries_after(0)
        assert [e.seq for e in entries] == list(range(1, len(expected) + 1))
        assert w.state().log_count == len(expected) == 5 + 3 + 7 + 1 + 1
        records = journal_records(testhost)
        assert [e.cursor for e in entries] == [r["__CURSOR"] for r in records]
        assert w.cursor == records[-1]["__CURSOR"]
        assert not w.state().failures
    finally:
        await w.stop()


# --- 2. a cut connection -------------------------------------------------------------------------

async def test_cut_mid_stream_loses_nothing_and_repeats_nothing(testhost: TestHost) -> None:
    rec = Recorder()
    w = watcher(testhost, rec, **QUICK_SSH)
    w.start()
    try:
        await until("the 5 seeded entries", lambda: texts(w) == SEEDED)
        a = batch("A", 4)
        testhost.append_log_lines(a)
        await until("batch A", lambda: len(texts(w)) >= len(SEEDED + a))
        assert texts(w) == SEEDED + a
        assert not rec.ever(lambda s: s.stale_since is not None)

        assert testhost.cut_connections()
        # Appended before the loop runs again: the sshd sessions are dead already, so none of B
        # can have left the host on the old connection; it must come through the resumed stream.
        b = batch("B", 6)
        testhost.append_log_lines(b)
        await until("the journal stream's drop noticed (a 'closed' failure)",
                    lambda: rec.ever(lambda s: s.failure("journal") is not None
                                     and s.failure("journal").kind == "closed"))
        await until("batch B after the reconnect", lambda: len(texts(w)) >= len(SEEDED + a + b))
        assert texts(w) == SEEDED + a + b
        await until("not stale after the reconnect", lambda: w.state().stale_since is None)

        c = batch("C", 5)
        testhost.append_log_lines(c)
        await until("batch C", lambda: len(texts(w)) >= len(SEEDED + a + b + c))
        mark = await flush(w, testhost)

        assert texts(w) == SEEDED + a + b + c + mark
        entries = w.entries_after(0)
        cursors = [e.cursor for e in entries]
        assert len(set(cursors)) == len(cursors) == 5 + 4 + 6 + 5 + 1
        assert cursors == [r["__CURSOR"] for r in journal_records(testhost)]
        assert w.cursor == cursors[-1]
        assert rec.ever(lambda s: s.stale_since is not None)
        assert not [e.text for e in entries if e.text.startswith("[unreadable journal record]")]
        assert w.state().failures == ()
    finally:
        await w.stop()


# --- 3, 4. remote processes ----------------------------------------------------------------------

async def _all_probes_running(w: HostWatcher, host: TestHost, *, gpu_reading: bool = True) -> None:
    """Wait until journalctl and the looping nvidia-smi run on the host and the probes answered
    (the GPU reading too when ``gpu_reading``: the first one comes one loop interval late, when
    the second sample's first row shows the first sample complete)."""
    loop = f"-lms {int(w.gpu_interval_s * 1000)}"

    def running() -> bool:
        cmds = " ".join(c for _, c in host.remote_processes())
        return "/usr/bin/journalctl" in cmds and "nvidia-smi" in cmds and loop in cmds

    def answered() -> bool:
        s = w.state()
        return (s.unit_state is not None and s.health is not None and s.health.rung == "serving"
                and s.log_count == 5 and (not gpu_reading or (s.gpus is not None and s.gpu_apps is not None)))

    await until(f"journalctl and nvidia-smi {loop} running on the host", running)
    await until("every probe answered", answered)
    s = w.state()
    assert (s.unit_state.active_state, s.health.rung, s.failures) == ("active", "serving", ())
    if gpu_reading:
        assert (len(s.gpus.gpus), s.gpu_apps.apps) == (8, ())


async def test_no_remote_process_outlives_stop(testhost: TestHost) -> None:
    w = watcher(testhost)
    w.start()
    try:
        await _all_probes_running(w, testhost)
    finally:
        await w.stop()
    await until("no remote process after stop()", lambda: not testhost.remote_processes(), 5.0)


async def test_no_remote_process_of_a_cut_connection_outlives_it(testhost: TestHost) -> None:
    rec = Recorder()
    # A GPU loop of 10 s: the shim then sits in `sleep 10` and writes nothing, so it would outlive
    # the cut by seconds if only SIGPIPE ended it (journalctl -f ends by itself when its stdout's
    # reader goes away); the stream wrapper must end it when the channel's stdin closes.
    w = watcher(testhost, rec, gpu_interval_s=10.0, **QUICK_SSH)
    w.start()
    try:
        await _all_probes_running(w, testhost, gpu_reading=False)
        before = process_ids(testhost)
        cmds = " ".join(c for _, c in before.values())
        assert "/usr/bin/journalctl" in cmds and "nvidia-smi" in cmds
        assert testhost.cut_connections()
        # The watcher keeps running and reconnects; the killed sessions' processes must end on
        # their own (the stream wrapper sees its stdin close), whatever the new session starts.
        await until(f"every process of the cut sessions gone: {sorted(before.items())}",
                    lambda: not [p for p, (t, _) in before.items() if alive(p, t)], 5.0)
        # ... and the watcher came back with new ones.
        await until("the watcher reconnected and follows the journal again",
                    lambda: w.state().stale_since is None
                    and rec.ever(lambda s: s.stale_since is not None)
                    and "/usr/bin/journalctl" in " ".join(c for _, c in testhost.remote_processes()))
        assert not set(process_ids(testhost).items()) & set(before.items())
    finally:
        await w.stop()
    await until("no remote process after stop()", lambda: not testhost.remote_processes(), 5.0)


# --- 5. two hosts in network namespaces ------------------------------------------------------------

async def test_one_host_link_down_goes_stale_and_recovers_while_the_other_keeps_going(
        netns_hosts: list[NetnsHost]) -> None:
    hosts = netns_hosts
    recs = [Recorder(), Recorder()]
    ws = [HostWatcher(HostSpec(h.host.hostname, h.host.unit, ssh=h.target),
                      h.runner(connect_timeout=2.0, **QUICK_SSH), WallClock(), r, **FAST)
          for h, r in zip(hosts, recs)]
    for w in ws:
        w.start()
    try:
        for w in ws:
            await until(f"{w.name}: 8 GPUs and the 5 seeded entries", lambda: w.state().gpus is not None and len(w.state().gpus.gpus) == 8
                        and len(texts(w)) == 5)
            assert texts(w) == SEEDED
            assert w.state().stale_since is None

        hosts[0].link_down()
        await until("host 0 stale after its link went down", lambda: ws[0].state().stale_since is not None)
        went_stale = ws[0].state().stale_since
        assert went_stale is not None
        # Host 1 goes on: GPU readings newer than the moment host 0 went stale, and never a failure.
        await until("host 1 GPU readings after host 0 went stale", lambda: ws[1].state().gpus.time > went_stale + 0.5)
        assert ws[1].state().stale_since is None
        # With the link down every connect fails (no route): wait for a counted failed attempt,
        # then bring the link back.
        await until("host 0: a failed reconnect counted", lambda: ws[0].state().reconnect_attempt >= 1)
        assert ws[0].state().stale_since == went_stale  # stale since the drop, not since each try

        hosts[0].link_up()
        await until("host 0 recovered after link_up", lambda: ws[0].state().stale_since is None, 15.0)
        # Each probe clears its own failure when it delivers again (a stream cut by the drop may
        # have failed as "command", which is no connection failure and so no part of stale_since).
        await until("host 0: every probe delivers again", lambda: ws[0].state().failures == ())
        back = ws[0].state()
        assert (back.reconnect_attempt, back.stale_since) == (0, None)
        await until("host 0 delivers GPU readings again", lambda: ws[0].state().gpus.time > back.updated)

        for h, w in zip(hosts, ws):  # the journal resumed after the cursor on host 0: nothing twice
            lines = batch(w.name, 2)
            h.host.append_log_lines(lines)
            await until(f"{w.name}: the new entries", lambda: len(texts(w)) >= len(SEEDED + lines))
            mark = await flush(w, h.host)
            assert texts(w) == SEEDED + lines + mark

        assert recs[0].ever(lambda s: s.reconnect_attempt >= 1)
        assert not recs[1].ever(lambda s: s.failures or s.stale_since is not None)
    finally:
        for w in ws:
            await w.stop()


async def test_the_first_gpu_sample_shows_without_waiting_for_the_second(testhost: TestHost) -> None:
    # With -lms 30000 the second sample comes 30 s after the first. How many GPUs a sample has is
    # only certain when the next one begins, so the first is shown once its rows stopped coming.
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target)
    w = HostWatcher(spec, testhost.runner(), WallClock(), **{**FAST, "gpu_interval_s": 30.0})
    w.start()
    try:
        await until("the first GPU sample", lambda: w.state().gpus is not None, 15.0)
        gpus = w.state().gpus
        assert gpus is not None and [g.index for g in gpus.gpus] == list(range(8))
        assert w.gpu.gpu_count == 0  # not learnt from a sample that was cut by time
    finally:
        await w.stop()


async def test_a_broken_nvidia_smi_after_a_cut_is_not_a_lost_connection(testhost: TestHost) -> None:
    # Only the GPU cell may show the driver trouble; once the link is back the host is not stale,
    # even though the journal has nothing new to say and nvidia-smi keeps failing.
    rec = Recorder()
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target, port=testhost.health.port)
    w = HostWatcher(spec, testhost.runner(**QUICK_SSH), WallClock(), rec, **FAST)
    w.start()
    try:
        await until("GPUs and the journal", lambda: w.state().gpus is not None and w.state().log_count == 5)
        testhost.set_nvidia_error("error.driver-library-mismatch.txt")  # the running loop goes on
        testhost.cut_connections()  # ... until now: the restarted nvidia-smi fails
        await until("the drop is noticed", lambda: rec.ever(lambda s: s.stale_since is not None))
        await until("reconnected, GPU cell failing", lambda: w.state().stale_since is None and w.state().failure("gpu") is not None
                    and w.state().failure("gpu").kind == "command", 15.0)
        s = w.state()
        f = s.failure("gpu")
        assert f is not None and f.kind == "command" and f.message.startswith("NVIDIA driver/library version mismatch")
        assert s.verdict is None or s.verdict.kind != "stale"
    finally:
        await w.stop()


async def test_a_frozen_link_is_not_read_as_an_unhealthy_server(testhost: TestHost) -> None:
    # SIGSTOP the sshd session: TCP stays up, nothing answers. Health requests through the
    # tunnel time out; that must become a lost connection, never "HTTP unhealthy".
    rec = Recorder()
    spec = HostSpec("gpu-node-1", "sglang.service", ssh=testhost.target, port=testhost.health.port)
    w = HostWatcher(spec, testhost.runner(**QUICK_SSH), WallClock(), rec, **FAST)
    w.start()
    frozen: list[int] = []
    try:
        await until("healthy first", lambda: w.state().readiness in ("healthy", "serving"))
        seen = len(rec.states)
        frozen = testhost.sshd.session_pids()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        await until("the freeze is noticed (keepalives)", lambda: w.state().stale_since is not None, 15.0)
        during = rec.states[seen:]
        assert all(s.readiness != "http_unhealthy" for s in during), [s.health for s in during if s.readiness == "http_unhealthy"]
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await w.stop()


# --- 8. only the fields upwatch reads ------------------------------------------------------------

def follows_asked(host: TestHost) -> list[str]:
    """The argv of every ``journalctl -f`` the host ran (from the shim's log)."""
    return [line for line in host.log("journalctl.log") if " -f " in f" {line} "]


async def test_the_journal_is_asked_only_for_the_fields_upwatch_reads(testhost: TestHost) -> None:
    w = watcher(testhost)
    w.start()
    try:
        await until("the 5 seeded entries", lambda: texts(w) == SEEDED)
        assert w.journal.fields is True
        assert follows_asked(testhost)
        assert all(output_fields_option(READ_FIELDS) in line for line in follows_asked(testhost))
        entries = w.entries_after(0)
        assert [e.cursor for e in entries] == [r["__CURSOR"] for r in journal_records(testhost)]
        assert not w.state().failures
    finally:
        await w.stop()


async def test_a_journalctl_before_236_is_followed_without_output_fields(testhost: TestHost) -> None:
    (testhost.state / "journalctl.before-236").touch()
    w = watcher(testhost)
    w.start()
    try:
        await until("the 5 seeded entries", lambda: texts(w) == SEEDED)
        lines = batch("after", 3)
        testhost.append_log_lines(lines)
        await until("the appended entries", lambda: texts(w)[-3:] == lines)
        assert w.journal.fields is False
        assert follows_asked(testhost)
        assert not any("--output-fields" in line for line in follows_asked(testhost))
        asked = [line for line in testhost.log("journalctl.log") if "--output-fields" in line]
        assert len(asked) == 1  # refused once, never asked again
        assert not w.state().failures
    finally:
        await w.stop()
