"""contrib/systemd/upwatch-exporter.service run for real: installed in a real systemd 252 host
(tests/systemd_host.py) as shipped, but for a drop-in that points ``ExecStart`` at this checkout
(and keeps the testbed's ``DefaultDependencies=no``), started, scraped, and seen reading the watched
unit's journal and its ``systemctl show`` with the hardening on (its user, ``ProtectSystem=strict``,
``SupplementaryGroups=systemd-journal``, the system-call filter ...).

The checkout's own interpreter lives under /root (``pyenv``), which ``ProtectHome=yes`` hides, as
it would hide any interpreter in a home; so the drop-in runs Debian's ``/usr/bin/python3`` (the
same 3.11) on this checkout and the venv's site-packages, as ``pip install upwatch`` into /opt
would.

What a real host has and this testbed leaves out is done first, inside the host's namespaces only:
``systemd-tmpfiles`` for the journal's folders (the ``systemd-journal`` group may read them; the
testbed masks tmpfiles at boot), D-Bus (masked in the testbed; unprivileged ``systemctl show``
needs it), and writable ``/etc`` and ``/var/lib`` layers (an overlay and a tmpfs), so that the
unit's user, ``ConfigurationDirectory=`` and ``StateDirectory=`` never touch this machine's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from systemd_host import SystemdHost
from waiting import until_sync

pytestmark = [pytest.mark.host, pytest.mark.filterwarnings("ignore::ResourceWarning")]

ROOT = Path(__file__).resolve().parent.parent
SYSTEMD_DIR = ROOT / "contrib" / "systemd"
UNIT = "upwatch-exporter.service"
SYSTEM_PYTHON = "/usr/bin/python3"
PORT = 9464

#: Inside the host: /var/lib becomes a tmpfs (its /var/lib/systemd tmpfs moved onto it), /etc an
#: overlay whose writes land in /run (its bind mounts moved back on top), as /var/lib/private
#: and /etc/upwatch do not belong to this test on this machine.
LAYERS = """set -eu
mkdir -p /run/uwx/sd /run/uwx/etc-up /run/uwx/etc-work /run/uwx/etc-sys
touch /run/uwx/etc-hostname
mount --move /var/lib/systemd /run/uwx/sd
mount -t tmpfs -o mode=755 tmpfs /var/lib
mkdir /var/lib/systemd
mount --move /run/uwx/sd /var/lib/systemd
mount --move /etc/systemd/system /run/uwx/etc-sys
mount --move /etc/hostname /run/uwx/etc-hostname
mount -t overlay overlay -o lowerdir=/etc,upperdir=/run/uwx/etc-up,workdir=/run/uwx/etc-work /etc
mount --move /run/uwx/etc-sys /etc/systemd/system
mount --move /run/uwx/etc-hostname /etc/hostname
systemd-tmpfiles --create --prefix=/run/log/journal --prefix=/var/log/journal
"""

HOSTS_TOML = """[[host]]
name = "gpu-node-3"
ssh = "local"
unit = "fake-llm.service"
engine = "sglang"
port = 30000
"""


def run_in(host: SystemdHost, script: str) -> str:
    done = host.exec("/bin/sh", "-c", script)
    assert done.returncode == 0, f"{script}\n{done.stdout}{done.stderr}"
    return done.stdout


def metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    try:
        text = httpx.get(url, timeout=2).text
    except httpx.HTTPError:
        return None
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("host", "unit")))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples if s.name.startswith("upwatch_")}


def test_the_shipped_unit_runs_hardened_and_reads_the_journal(systemd_host: SystemdHost) -> None:
    host = systemd_host
    # The unit runs this checkout's code inside the host, whose /tmp is a private tmpfs
    # (tests/systemd_host.py): a checkout under /tmp is not there.
    assert not ROOT.is_relative_to("/tmp"), (f"the checkout {ROOT} is under /tmp, which the test host's private "
                                             "/tmp hides from the unit: clone it elsewhere")
    version = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    assert version == str(sys.version_info[:2]), f"{SYSTEM_PYTHON} is {version}, the venv {sys.version_info[:2]}"
    before = (Path("/etc/upwatch").exists(), Path("/var/lib/upwatch").exists(),
              Path("/etc/passwd").read_text())
    run_in(host, LAYERS)
    units = Path(f"/proc/{host.systemd_pid}/root/etc/systemd/system")  # the host's view
    for name in ("dbus.service", "dbus.socket"):  # the testbed masks them
        (units / name).unlink()
        (units / f"{name}.d").mkdir()
        (units / f"{name}.d" / "testbed.conf").write_text("[Unit]\nDefaultDependencies=no\n")
    shutil.copyfile(SYSTEMD_DIR / UNIT, units / UNIT)
    (units / f"{UNIT}.d").mkdir()
    (units / f"{UNIT}.d" / "checkout.conf").write_text(
        "[Unit]\n# the testbed's rule: nothing may pull in sysinit.target (shared/TESTBED.md section 4)\n"
        "DefaultDependencies=no\n"
        "[Service]\nExecStart=\n"
        f"ExecStart={SYSTEM_PYTHON} -m tui exporter --config /etc/upwatch/hosts.toml --listen {host.address}:{PORT}\n"
        f"Environment=PYTHONPATH={ROOT}:{sysconfig.get_paths()['purelib']} PYTHONDONTWRITEBYTECODE=1\n")
    sysusers = SYSTEMD_DIR / "upwatch-exporter.sysusers.conf"
    run_in(host, f"mkdir -p /etc/upwatch /etc/sysusers.d && cp {sysusers} /etc/sysusers.d/upwatch.conf && "
                 f"systemd-sysusers && cat > /etc/upwatch/hosts.toml <<'EOF'\n{HOSTS_TOML}EOF\n")
    run_in(host, "systemctl daemon-reload && systemctl start dbus.socket dbus.service")
    run_in(host, f"systemctl start {UNIT}")

    url = f"http://{host.address}:{PORT}/metrics"
    try:
        seen = until_sync("the exporter's unit reads the journal and the unit", lambda: (
            m := metrics(url)) and m.get(("upwatch_probe_up", (("probe", "journal"),))) == 1
            and m.get(("upwatch_probe_up", (("probe", "unit"),))) == 1 and m, 60, every=0.2)
    except AssertionError as exc:
        status = host.systemctl("status", UNIT, "-n", "30")
        raise AssertionError(f"{exc}\n{status.stdout}\n{metrics(url)}") from None
    assert seen[("upwatch_journal_lines_total", ())] > 0
    assert seen[("upwatch_probe_up", (("probe", "health"),))] == 1
    [(kind, level)] = [(dict(ls)["kind"], dict(ls)["level"]) for (n, ls), v in seen.items()
                       if n == "upwatch_verdict" and v == 1]
    assert kind != "cannot_see", (kind, level)

    # It runs as the unit says: its own user, in the journal's group, with the hardening on.
    pid = host.show(UNIT, "MainPID")["MainPID"]
    status = run_in(host, f"grep -E '^(Uid|Groups|NoNewPrivs|Seccomp|CapEff):' /proc/{pid}/status; "
                          "id -u upwatch; getent group systemd-journal | cut -d: -f3; stat -c %U /var/lib/upwatch")
    fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
    uid, journal_gid, state_owner = [ln for ln in status.splitlines() if ":" not in ln]
    assert fields["Uid"].split()[0] == uid != "0", status
    assert journal_gid in fields["Groups"].split(), status
    assert fields["NoNewPrivs"].strip() == "1" and fields["Seccomp"].strip() == "2", status
    assert int(fields["CapEff"], 16) == 0 and state_owner == "upwatch", status
    said = host.journalctl("-u", UNIT, "-o", "cat").stdout
    assert f"upwatch exporter: 1 host(s), metrics at http://{host.address}:{PORT}/metrics" in said, said
    run_in(host, f"systemctl stop {UNIT}")
    assert host.show(UNIT, "ActiveState", "Result")["Result"] == "success"
    # Nothing of this machine changed: the host's /etc and /var/lib were layers of its own.
    assert (Path("/etc/upwatch").exists(), Path("/var/lib/upwatch").exists(), Path("/etc/passwd").read_text()) \
        == before
