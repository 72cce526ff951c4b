"""Verdicts against a real systemd 252 (tests/systemd_host.py): restart loops with their cause,
systemd giving up, health answered by an earlier process, GPU memory held outside the unit.

Everything upwatch reads here is real: ``systemctl show``, the journal (journald), the restart
counter, cgroups, ``ps``; only ``nvidia-smi`` is a shim (there is no GPU) and the LLM server is
``tests/fake_llm.py`` replaying a real log. Every wait polls with a deadline.
"""

from __future__ import annotations

import re

from probes.clock import WallClock
from probes.fold.verdict import verdict_for
from probes.spec import HostSpec
from probes.watch.watcher import HostWatcher
from systemd_host import SystemdHost, llm_unit
from test_systemd_host import OOM_LINE
from waiting import until

FAST = {"unit_interval_s": 0.2, "health_interval_s": 0.2, "gpu_interval_s": 0.5, "apps_interval_s": 0.5,
        "retry_s": 0.2}


def watcher(host: SystemdHost, unit: str, **spec: object) -> HostWatcher:
    w = HostWatcher(HostSpec("gpu-node-3", unit, ssh=host.target, **spec),  # type: ignore[arg-type]
                    host.runner(), WallClock(), **FAST)
    w.start()
    return w


async def test_a_crash_loop_is_a_restart_loop_with_each_cause(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("crashy.service", llm_unit(
        "sglang-ok-01.log", port=30002, crash_at="Load weight begin", crash_line=OOM_LINE, exit_code=1,
        restart_sec=0.5, start_limit_interval_s=0), start=True)
    w = watcher(systemd_host, "crashy.service", engine="sglang")
    try:
        s = await until("a restart loop of 3 failed starts, NRestarts caught up",
                        lambda: (st := w.state()).restart_loop and len(st.failed_starts) >= 3
                        and st.unit_state is not None and (st.unit_state.n_restarts or 0) >= 2 and st, 30)
        v = s.verdict
        assert v is not None and (v.level, v.kind) == ("error", "restart_loop")
        assert v.sentence.startswith(f"Restart loop: {len(s.failed_starts)} starts failed in ")
        assert "each CUDA out of memory during weight load" in v.sentence
        assert all(f.cause == "cuda_oom" and f.phase == "weights" for f in s.failed_starts)
        assert re.fullmatch(r"start 1 \(began \d\d:\d\d:\d\d\): CUDA out of memory in Weight load", v.evidence[0])
        assert s.unit_state is not None and (s.unit_state.n_restarts or 0) >= 2
        assert s.restart_counter == s.unit_state.n_restarts
    finally:
        await w.stop()


async def test_start_limit_says_systemd_gave_up(systemd_host: SystemdHost) -> None:
    systemd_host.add_unit("burst.service", llm_unit(
        "sglang-ok-01.log", port=30003, crash_at="Load weight begin", crash_line=OOM_LINE, restart_sec=0.1,
        start_limit_interval_s=60, start_limit_burst=3), start=True)
    w = watcher(systemd_host, "burst.service", engine="sglang")
    try:
        s = await until("systemd gave up", lambda: (st := w.state()).unit_state is not None
                        and st.unit_state.active_state == "failed" and st.restart_loop and st, 30)
        assert s.state == "failed" and s.readiness == "inactive"
        v = s.verdict
        assert v is not None and v.kind == "restart_loop"
        assert v.sentence.endswith("; systemd gave up (start limit): fix it, then systemctl reset-failed.")
    finally:
        await w.stop()


STRAY_HEALTH = ["/usr/bin/python3", "-c",
                "import http.server as h\n"
                "class H(h.BaseHTTPRequestHandler):\n"
                "    def do_GET(self):\n"
                "        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()\n"
                "    def log_message(self, *a): pass\n"
                "h.HTTPServer(('127.0.0.1', 30099), H).serve_forever()\n"]


async def test_health_from_an_earlier_process_does_not_count(systemd_host: SystemdHost) -> None:
    # Something keeps answering /health on the port while the unit restarts (an old server that
    # outlived its unit): here a real stray HTTP server inside the host, outside the unit.
    systemd_host.start_stray(STRAY_HEALTH)
    # The first start runs to ready, so the answer counts for it ...
    systemd_host.add_unit("slow.service", llm_unit("sglang-ok-01.log", port=30005), start=True)
    w = watcher(systemd_host, "slow.service", engine="sglang", health_url="http://127.0.0.1:30099/health")
    try:
        first = await until("ready and healthy", lambda: (st := w.state()).readiness in ("healthy", "serving")
                            and st.state == "ready" and st.unit_state is not None and st.unit_state.main_pid and st, 30)
        old_pid = first.unit_state.main_pid
        assert not first.health_stale
        # ... the next start hangs before binding: only the stray ever answers.
        systemd_host.add_unit("slow.service", llm_unit("sglang-ok-01.log", port=30005, hang_at="Load weight begin"))
        done = systemd_host.systemctl("restart", "slow.service")
        assert done.returncode == 0, done.stderr
        s = await until("health marked stale after the restart", lambda: (st := w.state()).health_stale
                        and st.unit_state is not None and st.unit_state.main_pid != old_pid and st, 15)
        assert s.readiness == "port_closed"  # not "healthy": the new process has not answered
        assert s.verdict is not None and s.verdict.kind == "stale_health"
        assert f"MainPID is now {s.unit_state.main_pid}" in s.verdict.sentence
        assert s.health is not None and s.health.rung in ("healthy", "serving")  # the stray still says 200
    finally:
        await w.stop()


async def test_health_while_the_log_is_still_loading_is_someone_elses(systemd_host: SystemdHost) -> None:
    # upwatch connects after the restart: it never saw the old process answer. SGLang binds its
    # port only after loading, so a 200 while the log is in weight loading is someone else's.
    systemd_host.start_stray(STRAY_HEALTH)
    systemd_host.add_unit("slow.service", llm_unit("sglang-ok-01.log", port=30005, hang_at="Load weight begin"),
                          start=True)
    w = watcher(systemd_host, "slow.service", engine="sglang", health_url="http://127.0.0.1:30099/health")
    try:
        s = await until("the early answer noticed", lambda: (st := w.state()).health_early_since is not None
                        and st.phase == "weights" and st, 30)
        assert s.health is not None and s.health.rung in ("healthy", "serving")  # the stray says 200 ...
        assert s.readiness == "port_closed"  # ... which is not this start's readiness
        assert not s.health_stale  # no MainPID change was seen: this is the other rule
        assert verdict_for(s, s.health_early_since + 29) is None  # the journal may lag a little
        v = verdict_for(s, s.health_early_since + 31)
        assert v is not None and (v.level, v.kind) == ("warning", "foreign_health")
        assert v.sentence == ("/health answers OK, but the log is still in Weight load and SGLang binds its port "
                              "only after loading: something else answers there.")
    finally:
        await w.stop()


async def test_gpu_memory_held_outside_the_unit_names_the_process(systemd_host: SystemdHost) -> None:
    stray = systemd_host.start_stray(["sleep", "300"])
    systemd_host.set_gpus_from_fixture()  # 8 H100 rows: uuids ...a0 to ...a7
    w = watcher(systemd_host, "fake-llm.service", engine="sglang")
    try:
        s = await until("the unit's MainPID", lambda: (st := w.state()).unit_state is not None
                        and st.unit_state.main_pid and st, 20)
        main = s.unit_state.main_pid
        systemd_host.set_compute_apps([f"{main}, sglang::scheduler_TP0, 70123, GPU-00000000-0000-0000-0000-0000000000a0",
                                       f"{stray}, [Not Found], 1536, GPU-00000000-0000-0000-0000-0000000000a7"])
        s = await until("an orphan seen", lambda: (st := w.state()).gpu_orphans and st, 20)
        [o] = s.gpu_orphans
        assert (o.pid, o.command, o.mem_mib, o.gpu_index) == (stray, "sleep 300", 1536, 7)
        v = s.verdict
        assert v is not None and (v.level, v.kind) == ("warning", "gpu_orphans")
        assert v.sentence == f"GPU memory held outside the unit: 1 process holds 1536 MiB (PID {stray})."
        assert v.evidence == (f"PID {stray} sleep 300: 1536 MiB on GPU 7",)
    finally:
        await w.stop()


async def test_a_loop_that_ended_before_upwatch_connected_is_read_whole(systemd_host: SystemdHost) -> None:
    # Every automatic restart passes through "inactive": InactiveExitTimestamp is the last start
    # only, so the first connect must read the backlog to see the loop's earlier starts.
    systemd_host.add_unit("gone.service", llm_unit(
        "sglang-ok-01.log", port=30006, crash_at="Load weight begin", crash_line=OOM_LINE, restart_sec=0.1,
        start_limit_interval_s=60, start_limit_burst=3), start=True)
    await until("systemd gave up", lambda: systemd_host.show("gone.service", "ActiveState")["ActiveState"] == "failed", 30)
    stray = systemd_host.start_stray(["sleep", "300"])
    systemd_host.set_gpus_from_fixture()
    systemd_host.set_compute_apps([f"{stray}, [Not Found], 4096, GPU-00000000-0000-0000-0000-0000000000a3",
                                   "999999, VLLM::Worker_TP0, 100, GPU-00000000-0000-0000-0000-0000000000a3"])
    w = watcher(systemd_host, "gone.service", engine="sglang")
    try:
        s = await until("the whole loop and the orphan", lambda: (st := w.state()).restart_loop
                        and st.gpu_orphans is not None and st.unit_state is not None and st, 30)
        # StartLimitBurst=3: three starts ran; the fourth was refused ("Start request repeated too
        # quickly") though NRestarts counted it.
        assert len(s.failed_starts) == 3 and s.unit_state.n_restarts == 3
        v = s.verdict
        assert v is not None and v.sentence.startswith("Restart loop: 3 starts failed in ")
        assert "each CUDA out of memory during weight load; systemd gave up (start limit)" in v.sentence
        # The unit has no process: whatever holds GPU memory is outside it. 999999 is gone (ps
        # does not know it), so it is not named: nothing may kill its number's next owner.
        assert [(o.pid, o.command, o.mem_mib) for o in s.gpu_orphans] == [(stray, "sleep 300", 4096)]
        assert v.sentence.endswith(f"; 1 process holds 4096 MiB (PID {stray}).")
        # Started again by hand: systemd has not given up on this try.
        assert systemd_host.systemctl("reset-failed", "gone.service").returncode == 0
        assert systemd_host.systemctl("start", "gone.service").returncode == 0
        s = await until("the new try seen", lambda: (st := w.state()).unit_state is not None
                        and st.unit_state.active_state != "failed" and st.verdict is not None and st, 15)
        assert "gave up" not in s.verdict.sentence
    finally:
        await w.stop()
