"""journalctl 252 follows a unit badly when the unit had no entries as the follow began
(systemd#25649: it misses some or all of the entries that come later). The watcher reopens such a
follow; on the real systemd 252 test host, every entry of three fresh units arrives exactly once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from probes.clock import WallClock
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from systemd_host import SystemdHost, llm_unit
from test_systemd_host import log_lines
from waiting import until

#: The last line of the replayed log (tests/fixtures/logs/sglang-ok-01.log): the ready line.
LAST_LINE = log_lines("sglang-ok-01.log")[-1].decode()


async def _follow_three_fresh_units(host: SystemdHost) -> list[tuple[HostWatcher, str]]:
    out = []
    for k in range(3):
        unit = f"fresh{k}.service"
        host.add_unit(unit, llm_unit("sglang-ok-01.log", port=30021 + k, speed=10))
        w = HostWatcher(HostSpec("gpu-node-3", unit, ssh=host.target, engine="sglang", port=30021 + k),
                        host.runner(), WallClock(), unit_interval_s=0.2, health_interval_s=0.2)
        w.start()
        out.append((w, unit))
    # every follow is open and has shown the nothing there is before the units start: each
    # journalctl -f of the three units waits in sd_journal_wait (a poll) on the host
    await until("three follows open", lambda: all(w.journal.is_open for w, _ in out), 30)
    await until("three journalctl -f waiting for entries", lambda: _follows_waiting(host, [u for _, u in out]),
                30, every=0.05)
    for _, unit in out:
        done = host.systemctl("start", unit)
        assert done.returncode == 0, done.stderr
    return out


def _follows_waiting(host: SystemdHost, units: list[str]) -> bool:
    """Whether, for each of ``units``, a ``journalctl ... -f`` of that unit runs on the host and
    sleeps in a poll (``/proc/PID/wchan``, e.g. ``poll_schedule_timeout``): it has read the journal
    to its end and waits for new entries."""
    waiting = set()
    for pid in host.host_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            wchan = Path(f"/proc/{pid}/wchan").read_text()
        except OSError:  # ended meanwhile
            continue
        if argv and argv[0].endswith(b"journalctl") and b"-f" in argv and "poll" in wchan:
            waiting.update(u for u in units if u.encode() in argv)
    return waiting == set(units)


def _journal_cursors(host: SystemdHost, unit: str) -> list[str]:
    text = host.journalctl("-u", unit, "-o", "json", "-a", "--no-pager").stdout
    return [json.loads(line)["__CURSOR"] for line in text.splitlines() if line.strip()]


async def test_every_entry_of_a_unit_that_had_none_arrives_once(systemd_host: SystemdHost) -> None:
    watchers = await _follow_three_fresh_units(systemd_host)
    try:
        for w, unit in watchers:
            await until(f"{unit} ready", lambda w=w: w.state().state == "ready", 60)
            # the health probe can say ready before the log's last line (the ready line) arrives
            await until(f"{unit}: the log's last line read", lambda w=w: any(
                e.text == LAST_LINE for e in w.model.entries_after(0)), 30)
        for w, unit in watchers:
            want = _journal_cursors(systemd_host, unit)
            got = [e.cursor for e in w.model.entries_after(0)]
            assert got == want, (unit, len(got), len(want), w.journal_reopened)
            assert [p.phase for p in w.state().phases] == ["starting", "weights", "init", "graph_capture",
                                                           "warmup", "ready"]
    finally:
        await asyncio.gather(*(w.stop() for w, _ in watchers))
