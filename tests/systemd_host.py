"""A GPU host whose service manager is a real systemd 252 (shared/TESTBED.md section 4).

:func:`start_systemd_host` boots ``/lib/systemd/systemd`` as PID 1 of new PID, mount, UTS, IPC and
cgroup namespaces inside its own network namespace (``uwsd<pid%1000><letter>``, veth
``<ns>-h``/``<ns>-n``, addresses ``10.201.N.1``/``10.201.N.2``), with every safety measure of the
recipe: private ``/run`` and ``/tmp``, the host's ``/etc/systemd/system`` hidden under a tmpfs,
risky units masked, ``/var/lib/systemd`` and ``/var/log/journal`` on tmpfs, read-only ``/sys`` and
``/proc/sys``, ``/dev/kmsg`` bound to ``/dev/null``, ``/dev/console`` bound to a file, and its own
cgroup2 subtree ``/sys/fs/cgroup/unified/uwsysd-<ns>`` (the cgroup namespace's root).

Inside run, as real units (all ``DefaultDependencies=no``, pulled in by ``uw.target``):

* ``systemd-journald`` (real journal: ``journalctl -u UNIT -o json`` over SSH is the real thing);
* ``uw-sshd.service``: OpenSSH on ``10.201.N.2:22``, key-only root login with throwaway keys,
  ``SetEnv PATH=<work>/shims:/usr/local/sbin:...`` where ``shims`` holds only the fake
  ``nvidia-smi`` of tests/testhost.py (same state files: :meth:`SystemdHost.set_gpus` ...);
  ``systemctl`` and ``journalctl`` stay real;
* the caller's units, by default ``fake-llm.service`` (:func:`llm_unit`: tests/fake_llm.py replaying
  ``sglang-ok-01.log`` at ``--speed 50``).

:meth:`SystemdHost.stop` powers systemd off (SIGRTMIN+4), falls back to SIGKILL of ``unshare``
(``--kill-child=SIGKILL`` takes PID 1 and so the whole PID namespace), kills anything left in the
cgroup subtree (``cgroup.kill``), removes the cgroup directories and deletes the network namespace.
Processes are only ever ended by PID or by their cgroup, never by name.

Anything that keeps the host from booting raises :class:`SystemdHostError` with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netns import add_namespace, free_subnet, ip, namespace_name, remove_namespace
from sshd import SSHD, SYSTEM_PATH, SshdError, check_sshd_config, descendants, write_sshd_files
from testhost import FIXTURES, QUERY_GPU_FIELDS, SHIMS, FakeGpuState, _write_script

SYSTEMD = "/lib/systemd/systemd"
PYTHON = "/usr/bin/python3"  # the host's system python; fake_llm.py needs only the stdlib
CGROUP2 = Path("/sys/fs/cgroup/unified")
FAKE_LLM = Path(__file__).parent / "fake_llm.py"
LOGS = FIXTURES / "logs"

#: Units masked inside (they touch state shared with this machine: TESTBED section 4).
MASKED = (
    "systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service systemd-tmpfiles-clean.timer "
    "systemd-sysusers.service systemd-remount-fs.service systemd-udev-trigger.service systemd-udevd.service "
    "systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-modules-load.service systemd-sysctl.service "
    "systemd-binfmt.service proc-sys-fs-binfmt_misc.automount systemd-update-utmp.service "
    "systemd-update-utmp-runlevel.service systemd-firstboot.service systemd-machine-id-commit.service "
    "systemd-hwdb-update.service ldconfig.service systemd-random-seed.service systemd-timesyncd.service "
    "systemd-repart.service systemd-pcrphase.service systemd-pcrphase-sysinit.service kmod-static-nodes.service "
    "getty.target console-getty.service systemd-logind.service dbus.service dbus.socket"
).split()

BOOT_SH = """#!/bin/bash
set -eu
NAME=$1 NETNS=$2          # WORK is exported by the caller
mkdir -p /sys/fs/cgroup/unified/uwsysd-$NAME                       # own cgroup2 subtree ...
echo $$ > /sys/fs/cgroup/unified/uwsysd-$NAME/cgroup.procs         # ... which becomes the cgroup-ns root
exec ip netns exec $NETNS unshare --pid --fork --kill-child=SIGKILL --mount --uts --ipc --cgroup \\
     --mount-proc --propagation private "$WORK/inner.sh"
"""

INNER_SH = """#!/bin/bash
set -eu
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/uwstage /run/lock
mount --bind "$WORK" /run/uwstage
mount -t tmpfs -o mode=1777 tmpfs /tmp                 # PRIVATE /tmp: Debian tmpfiles has 'D /tmp' (wipe at boot)
mkdir -p "$WORK" && mount --move /run/uwstage "$WORK"   # bring the work dir back at the same path
mount --bind "$WORK/hostname" /etc/hostname            # systemd sets the hostname from /etc/hostname
mount -t tmpfs tmpfs /etc/systemd/system               # hide the host's enabled units (ssh, postgresql, ...)
cp "$WORK"/units/* /etc/systemd/system/
for u in %(masked)s; do
  ln -sf /dev/null /etc/systemd/system/$u              # mask anything that touches shared host state
done
mount -t tmpfs tmpfs /var/lib/systemd
mount -t tmpfs tmpfs /var/log/journal
mount -t cgroup2 cgroup2 /sys/fs/cgroup                # root = the host's /sys/fs/cgroup/unified/uwsysd-NAME
mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
mount -o remount,bind,ro /sys                          # like nspawn: no uevent writes
mount --bind /dev/null /dev/kmsg                       # PID 1/journald must not write/read the host kernel log
touch "$WORK/console.log" && mount --bind "$WORK/console.log" /dev/console
export container=uwtest
exec /lib/systemd/systemd --system --unit=uw.target --log-target=journal-or-kmsg --show-status=no \\
     </dev/null >"$WORK/systemd.stdout" 2>&1
""" % {"masked": " ".join(MASKED)}

#: Where :func:`llm_unit` text names the work folder; replaced when the unit is installed.
WORK_MARK = "@WORK@"
#: A comment line :func:`llm_unit` puts in the unit text: this log is copied to ``<work>/logs/``.
LOG_MARK = "# upwatch-test-log: "


class SystemdHostError(SshdError):
    """The systemd test host could not be started or torn down; the message says why."""


def _sd_quote(text: str) -> str:
    """One ``ExecStart=`` word: double-quoted, with systemd's escapes for ``\\ " % $``."""
    return '"' + (text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
                  .replace("$", "$$")) + '"'


def llm_unit(log: str | os.PathLike[str], *, restart: str = "on-failure", restart_sec: float = 1,
             extra_args: str = "", port: int = 30000, speed: float = 50,
             crash_at: str | None = None, crash_line: str | None = None, exit_code: int | None = None,
             hang_at: str | None = None, start_limit_interval_s: float | None = None,
             start_limit_burst: int | None = None, description: str = "fake LLM server") -> str:
    """The text of a unit that runs tests/fake_llm.py replaying ``log``.

    Args:
        log: a file name under ``tests/fixtures/logs/`` or a path. It is copied to
            ``<work>/logs/`` when the unit is installed (:func:`start_systemd_host` or
            :meth:`SystemdHost.add_unit`), which also replaces ``@WORK@`` by the work folder.
        restart, restart_sec: ``Restart=``, ``RestartSec=`` (seconds; fractions allowed).
        extra_args: appended verbatim to ``ExecStart=`` (systemd quoting is the caller's).
        port, speed: fake_llm's ``--port`` and ``--speed``.
        crash_at, crash_line, exit_code, hang_at: fake_llm's fault options (quoted here).
        start_limit_interval_s, start_limit_burst: ``StartLimitIntervalSec=``/``StartLimitBurst=``
            (None: systemd's defaults, 10 s and 5).
    """
    src = Path(log) if os.sep in os.fspath(log) else LOGS / os.fspath(log)
    if not src.is_file():
        raise FileNotFoundError(f"no such log: {src}")
    argv = [PYTHON, f"{WORK_MARK}/fake_llm.py", "--log", f"{WORK_MARK}/logs/{src.name}",
            "--port", str(port), "--speed", f"{speed:g}"]
    for flag, value in (("--crash-at", crash_at), ("--crash-line", crash_line),
                        ("--exit-code", exit_code), ("--hang-at", hang_at)):
        if value is not None:
            argv += [flag, str(value)]
    exec_start = " ".join(_sd_quote(a) for a in argv) + (f" {extra_args}" if extra_args else "")
    limits = ""
    if start_limit_interval_s is not None:
        limits += f"StartLimitIntervalSec={start_limit_interval_s:g}\n"
    if start_limit_burst is not None:
        limits += f"StartLimitBurst={start_limit_burst}\n"
    return f"""{LOG_MARK}{src.resolve()}
[Unit]
Description={description}
DefaultDependencies=no
After=systemd-journald.service
Conflicts=shutdown.target
Before=shutdown.target
{limits}
[Service]
ExecStart={exec_start}
Restart={restart}
RestartSec={restart_sec:g}
"""


@dataclass
class SystemdHost(FakeGpuState):
    """A running systemd test host.

    Attributes:
        name: the network namespace (also the veth prefix and the cgroup's suffix).
        subnet: N of ``10.201.N.0/24``.
        work: the work folder (units, keys, ``sshd_config``, ``fake_llm.py``, ``logs/``,
            ``shims/``, ``state/``, ``systemd.stdout``, ``console.log``); the host sees it at the
            same path.
        proc: the ``unshare`` process (its PID is this machine's).
        systemd_pid: PID 1 of the host, as this machine numbers it.
        cgroup: the host's cgroup2 root on this machine.
    """

    name: str
    subnet: int
    work: Path
    proc: subprocess.Popen[bytes]
    systemd_pid: int = 0
    cgroup: Path = Path()
    hostname: str = "gpu-node-3"
    _stopped: bool = False

    # --- addresses and SSH ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The host's address: ``10.201.N.2`` (sshd on port 22)."""
        return f"10.201.{self.subnet}.2"

    @property
    def target(self) -> str:
        """``root@10.201.N.2:22`` for :class:`~probes.transport.ssh.SshRunner` with :meth:`runner_kwargs`."""
        return f"root@{self.address}:22"

    @property
    def state(self) -> Path:
        """The nvidia-smi shim's state folder (``query-gpu.csv``, ``compute-apps.csv`` ...)."""
        return self.work / "state"

    @property
    def shims(self) -> Path:
        return self.work / "shims"

    @property
    def known_hosts(self) -> Path:
        return self.work / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.work / "client_ed25519"

    def ssh_home(self, home: Path, alias: str) -> Path:
        """Make ``home/.ssh/config`` name this host ``alias`` (root, our client key and known_hosts),
        for a ``python -m tui`` run with ``HOME=home``; returns ``home``."""
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        (home / ".ssh" / "config").write_text(
            f"Host {alias}\n  HostName {self.address}\n  Port 22\n  User root\n"
            f"  IdentityFile {self.client_key}\n  UserKnownHostsFile {self.known_hosts}\n")
        return home

    def runner_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``SshRunner(self.target, **kw)``: our known_hosts and client key,
        no SSH config, a 5 s connect timeout."""
        return {"known_hosts": self.known_hosts, "client_keys": [self.client_key], "config": [],
                "connect_timeout": 5.0}

    def runner(self, **kw: Any) -> Any:
        """A new :class:`~probes.transport.ssh.SshRunner` on this host (``kw`` overrides :meth:`runner_kwargs`)."""
        from probes.transport.ssh import SshRunner

        return SshRunner(self.target, **{**self.runner_kwargs(), **kw})

    def ssh_argv(self, *command: str) -> list[str]:
        """The OpenSSH client command line that runs ``command`` here (``ssh -F <work>/ssh_config testhost ...``)."""
        return ["ssh", "-F", str(self.work / "ssh_config"), "testhost", *command]

    # --- commands inside the host's namespaces (setup and assertions) ---------------------------------

    def nsenter_argv(self, *command: str) -> list[str]:
        """``nsenter -t <systemd pid> -m -u -i -n -p -C <command>``."""
        return ["nsenter", "-t", str(self.systemd_pid), "-m", "-u", "-i", "-n", "-p", "-C", *command]

    def exec(self, *command: str, timeout: float = 30.0,
             input: str | None = None) -> subprocess.CompletedProcess[str]:  # noqa: A002
        """Run ``command`` inside the host (all its namespaces, not in any unit) and wait."""
        env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": ""}
        return subprocess.run(self.nsenter_argv(*command), capture_output=True, text=True, env=env,
                              cwd="/", timeout=timeout, input=input)

    def systemctl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """The real ``systemctl --no-pager ARGS`` inside the host."""
        return self.exec("/usr/bin/systemctl", "--no-pager", *args, timeout=timeout)

    def journalctl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """The real ``journalctl --no-pager ARGS`` inside the host."""
        return self.exec("/usr/bin/journalctl", "--no-pager", *args, timeout=timeout)

    def show(self, unit: str, *props: str) -> dict[str, str]:
        """``systemctl show UNIT -p A,B`` as a dict (inside the host)."""
        done = self.systemctl("show", unit, "-p", ",".join(props))
        if done.returncode != 0:
            raise SystemdHostError(f"systemctl show {unit} failed: {done.stderr.strip()}")
        return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)

    def add_unit(self, name: str, text: str, *, start: bool = False) -> None:
        """Install unit ``name`` (text as :func:`llm_unit` makes; ``@WORK@`` and the log are
        resolved), ``daemon-reload``, and with ``start`` also ``systemctl start`` it."""
        text = _prepare_unit(self.work, name, text)
        (self.work / "units" / name).write_text(text)
        dest = Path(f"/proc/{self.systemd_pid}/root/etc/systemd/system") / name  # the host's view
        dest.write_text(text)
        for args in (("daemon-reload",), ("start", name)) if start else (("daemon-reload",),):
            done = self.systemctl(*args)
            if done.returncode != 0:
                raise SystemdHostError(f"systemctl {' '.join(args)} failed: {done.stderr.strip()}")

    def start_stray(self, command: Sequence[str]) -> int:
        """Start ``command`` inside the host's namespaces but in no unit: in the cgroup ``/stray``
        (as the host sees it), not below ``system.slice``, its parent PID 1 (an orphan, as a
        process left over from an earlier run would be). Returns its PID as the host numbers it.
        Its output goes to /dev/null; it ends with the host at the latest."""
        # A shell inside moves itself into /stray, starts the command in the background, prints
        # its PID and exits, so the command is reparented to systemd. nsenter must not stay its
        # parent: systemd-shutdown's broadcast SIGSTOP stops the child, nsenter (waitpid with
        # WUNTRACED) then stops itself, nobody outside sends SIGCONT, the killed child stays an
        # unreaped zombie and poweroff waits 90 s (measured).
        script = ('mkdir -p /sys/fs/cgroup/stray && echo $$ > /sys/fs/cgroup/stray/cgroup.procs && '
                  '{ "$@" </dev/null >/dev/null 2>&1 & echo $!; }')
        done = subprocess.run(self.nsenter_argv("/bin/sh", "-c", script, "sh", *command),
                              capture_output=True, text=True, cwd="/", env={"PATH": SYSTEM_PATH},
                              timeout=10)
        if done.returncode != 0 or not done.stdout.strip().isdigit():
            raise SystemdHostError(f"stray {list(command)!r} did not start ({done.returncode}): "
                                   f"{done.stderr.strip()}")
        return int(done.stdout)

    # --- teardown ----------------------------------------------------------------------------------------

    def host_pids(self) -> list[int]:
        """Every process of this host as this machine numbers it: ``unshare`` and everything in
        the cgroup subtree (systemd, journald, sshd, units, strays)."""
        pids = {self.proc.pid} if self.proc.poll() is None else set()
        return sorted(pids | set(_cgroup_pids(self.cgroup)))

    def stop(self) -> None:
        """Clean poweroff (SIGRTMIN+4 to systemd, 10 s), else SIGKILL to ``unshare``; then kill
        what is left in the cgroup subtree, remove its directories and the network namespace.
        Does all of it even when a step fails; raises :class:`SystemdHostError` afterwards if
        something is left behind."""
        if self._stopped:
            return
        self._stopped = True
        problems: list[str] = []
        if self.proc.poll() is None and self.systemd_pid:
            try:
                os.kill(self.systemd_pid, signal.SIGRTMIN + 4)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10 if self.systemd_pid else 0.1)
        except subprocess.TimeoutExpired:
            left = ", ".join(f"{pid}:{_comm(pid)}" for pid in _cgroup_pids(self.cgroup))
            what = "systemd did not power off within 10 s" if self.systemd_pid else "systemd never started"
            problems.append(f"{what} (left: {left}); SIGKILL to unshare")
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                problems.append(f"unshare {self.proc.pid} survived SIGKILL")
        problems += _remove_cgroup(self.cgroup)
        remove_namespace(self.name)
        if ip("netns", "list", check=False).stdout.split().count(self.name):
            problems.append(f"network namespace {self.name} is still there")
        if problems:
            raise SystemdHostError("; ".join(problems))


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _cgroup_pids(root: Path) -> list[int]:
    pids: list[int] = []
    if not root.is_dir() or root == Path():
        return pids
    for procs in root.rglob("cgroup.procs"):
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except OSError:
            pass
    return pids


def _remove_cgroup(root: Path) -> list[str]:
    """Kill everything in ``root``'s subtree (``cgroup.kill``), wait for it to empty, rmdir all."""
    if root == Path() or not root.is_dir():
        return []
    try:
        (root / "cgroup.kill").write_text("1")
    except OSError as exc:
        return [f"cgroup.kill in {root}: {exc.strerror}"]
    until = time.monotonic() + 5
    while _cgroup_pids(root):
        if time.monotonic() > until:
            return [f"{root} still holds {_cgroup_pids(root)} 5 s after cgroup.kill"]
        time.sleep(0.01)  # polling interval
    problems: list[str] = []
    dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
    for d in [*dirs, root]:
        until = time.monotonic() + 2
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:  # EBUSY for a moment after the last process died
                if time.monotonic() > until:
                    problems.append(f"rmdir {d}: {exc.strerror}")
                    break
                time.sleep(0.01)  # polling interval
    return problems


def _prepare_unit(work: Path, name: str, text: str) -> str:
    """Copy the logs a unit names (``# upwatch-test-log: PATH``) to ``work/logs`` and put the
    work folder in place of ``@WORK@``. Refuses units without ``DefaultDependencies=no`` (they
    would pull in ``sysinit.target``: TESTBED section 4)."""
    if "DefaultDependencies=no" not in text:
        raise SystemdHostError(f"unit {name} lacks DefaultDependencies=no (it would pull in sysinit.target)")
    for m in re.finditer(rf"^{re.escape(LOG_MARK)}(.+)$", text, re.M):
        src = Path(m.group(1).strip())
        (work / "logs").mkdir(exist_ok=True)
        shutil.copyfile(src, work / "logs" / src.name)
    return text.replace(WORK_MARK, str(work))


def start_systemd_host(base: Path, index: int, *, units: Mapping[str, str] | None = None,
                       hostname: str = "gpu-node-3", deadline_s: float = 20.0) -> SystemdHost:
    """Boot a systemd test host with its files under ``base`` (the work folder, created).

    Args:
        base: the work folder; it must not be a mount point (it is bind-mounted inside).
        index: 0, 1 ... (the namespace's letter; several hosts per test run).
        units: unit name → text (see :func:`llm_unit`), started at boot by ``uw.target``; None:
            ``fake-llm.service`` replaying ``sglang-ok-01.log`` at speed 50.
        hostname: the host's name (``/etc/hostname`` inside).
        deadline_s: seconds for systemd to appear and sshd to accept on port 22.

    Raises:
        SystemdHostError: a tool is missing, ``ip``/``unshare`` failed, or sshd never accepted
            (with the tail of systemd's output).
    """
    for tool in (SYSTEMD, SSHD, PYTHON):
        if not os.path.exists(tool):
            raise SystemdHostError(f"{tool} is missing")
    for tool in ("unshare", "nsenter", "ip", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise SystemdHostError(f"{tool} is missing from PATH")
    if not (CGROUP2 / "cgroup.procs").exists():
        raise SystemdHostError(f"no cgroup2 hierarchy at {CGROUP2} (this recipe needs the hybrid layout)")
    if units is None:
        units = {"fake-llm.service": llm_unit("sglang-ok-01.log")}
    work = base.resolve()
    work.mkdir(parents=True, exist_ok=True)
    name = namespace_name("uwsd", index)
    cgroup = CGROUP2 / f"uwsysd-{name}"
    remove_namespace(name)  # leftovers of a crashed earlier run with the same names
    _remove_cgroup(cgroup)
    subnet = free_subnet("10.201", (os.getpid() * 3 + index * 11) % 250, SystemdHostError)
    addr = f"10.201.{subnet}.2"

    # files: keys, sshd_config, shims and state, units, scripts
    (work / "shims").mkdir(exist_ok=True)
    _write_script(work / "shims" / "nvidia-smi", SHIMS["nvidia-smi"])  # ONLY nvidia-smi is fake
    state = work / "state"
    state.mkdir(exist_ok=True)
    (state / "query-gpu.fields").write_text(QUERY_GPU_FIELDS)
    (state / "compute-apps.csv").write_text("")
    cfg = write_sshd_files(work, listen=addr, port=22, user="root", pid_file="/run/sshd.pid",
                           env={"PATH": f"{work}/shims:{SYSTEM_PATH}", "UPWATCH_TEST_STATE": str(state)})
    check_sshd_config(cfg, SystemdHostError)
    (work / "hostname").write_text(hostname + "\n")
    shutil.copyfile(FAKE_LLM, work / "fake_llm.py")
    unit_dir = work / "units"
    unit_dir.mkdir(exist_ok=True)
    (unit_dir / "uw.target").write_text(f"""[Unit]
Description=upwatch test host
DefaultDependencies=no
Wants=systemd-journald.socket systemd-journald.service uw-sshd.service {' '.join(units)}
After=systemd-journald.service
""")
    (unit_dir / "uw-sshd.service").write_text(f"""[Unit]
Description=OpenSSH server of the test host
DefaultDependencies=no
After=systemd-journald.service
Conflicts=shutdown.target
Before=shutdown.target
[Service]
RuntimeDirectory=sshd
RuntimeDirectoryPreserve=yes
ExecStart={SSHD} -D -e -f {work}/sshd_config
""")
    for unit, text in units.items():
        (unit_dir / unit).write_text(_prepare_unit(work, unit, text))
    _write_script(work / "boot.sh", BOOT_SH)
    _write_script(work / "inner.sh", INNER_SH)

    add_namespace(name, "10.201", subnet, SystemdHostError)  # network namespace and veth

    log = open(work / "boot.log", "wb")  # noqa: SIM115 - boot.sh/unshare write it
    proc = subprocess.Popen(["/bin/bash", str(work / "boot.sh"), name, name], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd="/",
                            env={"PATH": SYSTEM_PATH, "WORK": str(work), "LANG": "C.UTF-8"})
    log.close()
    host = SystemdHost(name, subnet, work, proc, cgroup=cgroup, hostname=hostname)
    try:
        until = time.monotonic() + deadline_s
        while not host.systemd_pid:
            found = [pid for pid, comm in descendants(proc.pid) if comm == "systemd"]
            if found:
                host.systemd_pid = found[0]
                break
            _check_boot(host, until, "systemd did not appear")
            time.sleep(0.01)  # polling interval
        while True:
            try:
                with socket.create_connection((addr, 22), timeout=0.5):
                    break
            except OSError:
                pass
            _check_boot(host, until, f"sshd did not accept on {addr}:22")
            time.sleep(0.02)  # polling interval
    except BaseException:
        try:
            host.stop()
        except SystemdHostError:
            pass
        raise
    return host


def _tail(path: Path, n: int = 600) -> str:
    try:
        return path.read_text(errors="replace").strip()[-n:]
    except OSError:
        return ""


def _check_boot(host: SystemdHost, until: float, what: str) -> None:
    """Raise with the evidence when the boot died or the deadline passed."""
    died = host.proc.poll() is not None
    if died or time.monotonic() > until:
        why = f"exited with {host.proc.returncode}" if died else "deadline passed"
        detail = " | ".join(f"{f}: {t}" for f in ("boot.log", "systemd.stdout", "console.log")
                            if (t := _tail(host.work / f)))
        if host.systemd_pid and not died:
            status = host.systemctl("status", "uw-sshd.service", timeout=5)
            detail += f" | systemctl status uw-sshd: {status.stdout.strip()[-600:]}"
        raise SystemdHostError(f"{what} ({why}): {detail}")
