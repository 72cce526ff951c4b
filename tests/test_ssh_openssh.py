"""upwatch trusts a host exactly when OpenSSH does (probes/transport/openssh.py), checked against the real
``ssh`` client's verdict on the same config and known_hosts files, on a real sshd on loopback
(tests/sshd.py): ``ssh -F <cfg> -o BatchMode=yes alias true`` exits 0 or refuses, and
:class:`~probes.transport.ssh.SshRunner` must agree (and both must give the verdict the case expects, so a
case where both fail for an unrelated reason cannot pass).

Also: algorithms no weaker than OpenSSH 9.2's defaults (a server signing only with ``ssh-rsa``,
SHA-1, is refused unless the config asks for it), and login-key failures named as what they are.

CheckHostIP: OpenSSH skips the address check for loopback addresses, so on this test host ``yes``
and ``no`` must give the same verdicts (they are both run); the non-loopback rule, which needs a
host name that resolves to a non-loopback address, is checked on :func:`probes.transport.openssh.trusted`
itself at the end.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest
from sshd import Sshd, SshdError, start_sshd

from probes.transport import openssh
from probes.transport.runner import ProbeError
from probes.transport.ssh import SshRunner


def _start(base: Path, **kw: object) -> Sshd:
    try:
        return start_sshd(base, **kw)  # type: ignore[arg-type]
    except SshdError as exc:
        pytest.fail(f"cannot start the test sshd: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = _start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def host_key(server: Sshd) -> str:
    """``type base64`` of the server's host key."""
    return " ".join(next(server.dir.glob("host_*.pub")).read_text().split()[:2])


def other_key(tmp: Path, kind: str = "ed25519") -> str:
    path = tmp / f"other_{kind}"
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    return " ".join((tmp / f"other_{kind}.pub").read_text().split()[:2])


def write_config(tmp: Path, server: Sshd, known: Path, *, check_host_ip: str | None = None,
                 alias: str | None = None, extra: str = "", identity: Path | None = None) -> Path:
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    lines = ["Host box", "    HostName localhost", f"    Port {server.port}", f"    User {user}",
             f"    IdentityFile {identity or server.client_key}", "    IdentitiesOnly yes",
             f"    UserKnownHostsFile {known}", "    GlobalKnownHostsFile /dev/null",
             "    StrictHostKeyChecking yes", "    UpdateHostKeys no", "    BatchMode yes"]
    if check_host_ip is not None:
        lines.append(f"    CheckHostIP {check_host_ip}")
    if alias is not None:
        lines.append(f"    HostKeyAlias {alias}")
    lines += [f"    {line}" for line in extra.splitlines() if line.strip()]
    cfg = tmp / "ssh_config"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def openssh_verdict(cfg: Path) -> tuple[bool, str]:
    done = subprocess.run(["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "box", "true"],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
    return done.returncode == 0, done.stderr.strip()


async def upwatch_verdict(cfg: Path, **kw: object) -> tuple[bool, ProbeError | None]:
    r = SshRunner("box", config=[cfg], connect_timeout=5.0, **kw)  # type: ignore[arg-type]
    try:
        done = await r.run(["true"])
        assert done.returncode == 0
        return True, None
    except ProbeError as exc:
        return False, exc
    finally:
        await r.close()


def hashed(entry_host: str, key: str, tmp: Path) -> str:
    """A known_hosts line for ``entry_host`` hashed by ``ssh-keygen -H`` itself."""
    f = tmp / "to_hash"
    f.write_text(f"{entry_host} {key}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(f)], check=True, capture_output=True)
    return f.read_text().strip()


# (case, known_hosts lines as a function of (server, tmp), HostKeyAlias, connects?)
P = "{port}"
CASES = [
    ("hostname entry", lambda s, t: [f"[localhost]:{s.port} {host_key(s)}"], None, True),
    ("ip entry only (issue 13)", lambda s, t: [f"[127.0.0.1]:{s.port} {host_key(s)}"], None, False),
    ("hostname and ip entries", lambda s, t: [f"[localhost]:{s.port} {host_key(s)}",
                                              f"[127.0.0.1]:{s.port} {host_key(s)}"], None, True),
    ("hashed hostname entry", lambda s, t: [hashed(f"[localhost]:{s.port}", host_key(s), t)], None, True),
    ("hashed ip entry only", lambda s, t: [hashed(f"[127.0.0.1]:{s.port}", host_key(s), t)], None, False),
    ("hostname entry without the port", lambda s, t: [f"localhost {host_key(s)}"], None, True),
    ("hashed entry without the port", lambda s, t: [hashed("localhost", host_key(s), t)], None, True),
    ("other key without the port", lambda s, t: [f"localhost {other_key(t)}"], None, False),
    ("ip entry without the port", lambda s, t: [f"127.0.0.1 {host_key(s)}"], None, False),
    ("other type with the port, key without", lambda s, t: [f"[localhost]:{s.port} {other_key(t, 'rsa')}",
                                                           f"localhost {host_key(s)}"], None, False),
    ("wildcard entry", lambda s, t: [f"[local*]:{s.port} {host_key(s)}"], None, True),
    ("changed key, right key on the ip", lambda s, t: [f"[localhost]:{s.port} {other_key(t)}",
                                                       f"[127.0.0.1]:{s.port} {host_key(s)}"], None, False),
    ("only another key type known", lambda s, t: [f"[localhost]:{s.port} {other_key(t, 'rsa')}"], None, False),
    ("revoked key", lambda s, t: [f"[localhost]:{s.port} {host_key(s)}", f"@revoked * {host_key(s)}"],
     None, False),
    ("HostKeyAlias entry", lambda s, t: [f"gpubox {host_key(s)}"], "gpubox", True),
    ("HostKeyAlias with a port", lambda s, t: [f"[gpubox]:{s.port} {host_key(s)}"], "gpubox", False),
    ("HostKeyAlias, hostname entry", lambda s, t: [f"[localhost]:{s.port} {host_key(s)}"], "gpubox", False),
]


@pytest.mark.parametrize("check_host_ip", [None, "no", "yes"])
@pytest.mark.parametrize(("case", "entries", "alias", "connects"), CASES, ids=[c[0] for c in CASES])
async def test_upwatch_trusts_a_host_key_exactly_when_openssh_does(
        sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, entries, alias: str | None,  # type: ignore[no-untyped-def]
        connects: bool, check_host_ip: str | None) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(entries(sshd, tmp_path)) + "\n")
    cfg = write_config(tmp_path, sshd, known, check_host_ip=check_host_ip, alias=alias)
    ssh_ok, ssh_err = await asyncio.to_thread(openssh_verdict, cfg)
    ours, err = await upwatch_verdict(cfg)
    assert ssh_ok == connects, f"OpenSSH itself: {ssh_err}"
    assert ours == ssh_ok, f"OpenSSH {'connected' if ssh_ok else 'refused: ' + ssh_err}; upwatch: {err}"
    if err is not None:
        assert err.kind == "host_key", err
        assert str(known) in err.message


async def test_the_messages_say_what_openssh_says(sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {host_key(sshd)}\n")
    cfg = write_config(tmp_path, sshd, known)
    _, ssh_err = await asyncio.to_thread(openssh_verdict, cfg)
    _, err = await upwatch_verdict(cfg)
    assert f"No ED25519 host key is known for [localhost]:{sshd.port}" in ssh_err
    assert err is not None
    assert f"No ED25519 host key is known for [localhost]:{sshd.port} in {known}." in err.message
    assert err.message.endswith(f"ssh-keyscan -p {sshd.port} localhost >> {known}")

    known.write_text(f"[localhost]:{sshd.port} {other_key(tmp_path, 'rsa')}\n")
    _, err = await upwatch_verdict(cfg)
    assert err is not None and f"CHANGED since it was recorded in {known} ({known} records RSA for " \
        f"[localhost]:{sshd.port}; the server shows ED25519)" in err.message  # not "connection reset"

    known.write_text(f"[localhost]:{sshd.port} {other_key(tmp_path)}\n")
    _, err = await upwatch_verdict(cfg)
    assert err is not None and f"the host key of localhost:{sshd.port} CHANGED" in err.message
    assert f"ssh-keygen -f {known} -R '[localhost]:{sshd.port}'" in err.message

    known.write_text(f"[localhost]:{sshd.port} {host_key(sshd)}\n@revoked * {host_key(sshd)}\n")
    _, err = await upwatch_verdict(cfg)
    assert err is not None and "is marked @revoked" in err.message


async def test_user_known_hosts_file_none_trusts_nothing(sshd: Sshd, tmp_path: Path) -> None:
    # asyncssh reads "none" as "do not check host keys at all"; OpenSSH as "no key is known".
    cfg = write_config(tmp_path, sshd, Path("none"))
    ssh_ok, _ = await asyncio.to_thread(openssh_verdict, cfg)
    ours, err = await upwatch_verdict(cfg)
    assert (ssh_ok, ours) == (False, False)
    assert err is not None and err.kind == "host_key"


# --- algorithms -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sha1_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """An sshd whose only host key is RSA and that signs with ``ssh-rsa`` (SHA-1) only."""
    server = _start(tmp_path_factory.mktemp("sha1"), host_key_type="rsa",
                    extra_config="HostKeyAlgorithms ssh-rsa\n")
    yield server
    server.stop()


async def test_a_server_signing_only_with_sha1_is_refused_unless_the_config_allows_it(
        sha1_sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"[localhost]:{sha1_sshd.port} {host_key(sha1_sshd)}\n")
    cfg = write_config(tmp_path, sha1_sshd, known)
    ssh_ok, ssh_err = await asyncio.to_thread(openssh_verdict, cfg)
    ours, err = await upwatch_verdict(cfg)
    assert not ssh_ok and "no matching host key type found. Their offer: ssh-rsa" in ssh_err
    assert not ours and err is not None and err.kind == "host_key"
    assert "only with ssh-rsa (SHA-1)" in err.message
    assert "'HostKeyAlgorithms +ssh-rsa' under 'Host box' in ~/.ssh/config" in err.message

    cfg = write_config(tmp_path, sha1_sshd, known, extra="HostKeyAlgorithms +ssh-rsa")
    ssh_ok, ssh_err = await asyncio.to_thread(openssh_verdict, cfg)
    ours, err = await upwatch_verdict(cfg)
    assert ssh_ok, ssh_err
    assert ours, err


def test_the_algorithms_are_openssh_92s_defaults_and_the_config_edits_them_by_its_rules() -> None:
    config = asyncssh.config.SSHClientConfig  # noqa: F841 - asyncssh's parser reads the options below
    hk = openssh.host_key_algs(None, [], False)
    assert "ssh-rsa" not in hk and "rsa-sha2-256" in hk and hk[0] == "ssh-ed25519-cert-v01@openssh.com"
    rsa = asyncssh.generate_private_key("ssh-rsa").convert_to_public()
    first = openssh.host_key_algs(None, [rsa], False)
    assert first[:2] == ["rsa-sha2-512", "rsa-sha2-256"] and "ssh-rsa" not in first  # known type first
    assert openssh.host_key_algs("+ssh-rsa", [], False)[-1] == "ssh-rsa"
    assert openssh.host_key_algs("^ssh-rsa", [], False)[0] == "ssh-rsa"
    assert "ecdsa-sha2-nistp256" not in openssh.host_key_algs("-ecdsa*", [], False)
    assert "ssh-rsa" not in openssh.host_key_algs("-ecdsa*", [], False)  # asyncssh's own '-' keeps it
    assert openssh.host_key_algs("ssh-ed25519", [rsa], False) == ["ssh-ed25519"]
    with pytest.raises(ValueError):
        openssh.choose_algs("Ciphers", "no-such-cipher", openssh.OPENSSH_CIPHERS, [b"aes128-ctr"])
    cfg = asyncssh.SSHClientConnectionOptions(config=[], known_hosts=None, client_keys=None).config
    algs = openssh.other_algs(cfg)
    assert "diffie-hellman-group14-sha1" not in algs["kex_algs"]
    assert "ssh-rsa" not in algs["signature_algs"] and "rsa-sha2-256" in algs["signature_algs"]


# --- login keys -------------------------------------------------------------------------------------

@pytest.mark.parametrize("explicit", [False, True], ids=["IdentityFile", "client_keys"])
async def test_a_passphrase_protected_key_is_auth_with_the_fix(
        sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, explicit: bool) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    locked = tmp_path / "locked_ed25519"
    await asyncio.to_thread(subprocess.run, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f",
                                             str(locked)], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(f"[localhost]:{sshd.port} {host_key(sshd)}\n")
    cfg = write_config(tmp_path, sshd, known, identity=locked)
    ssh_ok, _ = await asyncio.to_thread(openssh_verdict, cfg)
    ours, err = await upwatch_verdict(cfg, **({"client_keys": [locked]} if explicit else {}))
    assert not ssh_ok and not ours
    assert err is not None and err.kind == "auth", err
    assert f"the key {locked} is protected by a passphrase" in err.message
    assert f"ssh-add {locked}" in err.message and "no ssh-agent" in err.message


async def test_a_key_file_that_is_not_a_private_key_is_auth_and_named(
        sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    public = tmp_path / "id.pub"
    public.write_text(host_key(sshd) + "\n")
    known = tmp_path / "known_hosts"
    known.write_text(f"[localhost]:{sshd.port} {host_key(sshd)}\n")
    cfg = write_config(tmp_path, sshd, known, identity=public)
    ours, err = await upwatch_verdict(cfg, client_keys=[public])
    assert not ours and err is not None and err.kind == "auth", err
    assert f"the key {public} is not a private key upwatch can read" in err.message


# --- CheckHostIP off loopback (no name resolves to a non-loopback address here) ---------------------

def test_check_host_ip_refuses_a_key_the_address_disagrees_with(tmp_path: Path) -> None:
    good = asyncssh.generate_private_key("ssh-ed25519").convert_to_public()
    bad = asyncssh.generate_private_key("ssh-ed25519").convert_to_public()
    rsa = asyncssh.generate_private_key("ssh-rsa").convert_to_public()

    def line(name: str, key: asyncssh.SSHKey) -> str:
        return f"{name} {key.export_public_key().decode().strip()}"
    known_file = tmp_path / "known_hosts"
    known_file.write_text("\n".join([line("gpu1.example", good), line("10.1.2.3", bad),
                                     line("gpu2.example", good), line("10.1.2.4", rsa)]) + "\n")
    known = openssh.KnownHosts([str(known_file)])
    on = openssh.Target("gpu1.example", 22, "gpu1.example", True, False)
    off = openssh.Target("gpu1.example", 22, "gpu1.example", False, False)
    assert openssh.trusted(on, known, "10.1.2.3").keys == ()        # another key there: refused
    assert openssh.trusted(off, known, "10.1.2.3").keys == (good,)  # CheckHostIP no (the default)
    assert openssh.trusted(on, known, "127.0.0.1").keys == (good,)  # loopback: skipped
    proxied = openssh.Target("gpu1.example", 22, "gpu1.example", True, True)
    assert openssh.trusted(proxied, known, "10.1.2.3").keys == (good,)
    two = openssh.Target("gpu2.example", 22, "gpu2.example", True, False)
    assert openssh.trusted(two, known, "10.1.2.4").keys == ()  # any other key there, of any type
    nobody = openssh.Target("gpu3.example", 22, "gpu3.example", True, False)
    assert openssh.trusted(nobody, known, "10.1.2.3").keys == ()    # an IP entry never trusts alone
    msg = openssh.host_key_message("gpu1", on, known, good, "10.1.2.3", "")
    assert "records a different key for its address 10.1.2.3" in msg
    assert f"ssh-keygen -f {known_file} -R '10.1.2.3'" in msg
    assert os.path.basename(str(known_file)) in msg


# --- ProxyJump: every hop by the same rules -------------------------------------------------------

@pytest.mark.parametrize(("jump_entry", "connects"), [("[localhost]:{port}", True), ("[127.0.0.1]:{port}", False)],
                         ids=["jump known by name", "jump known by address only"])
async def test_a_jump_host_is_checked_by_openssh_rules_too(
        sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jump_entry: str, connects: bool) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    known = tmp_path / "known_hosts"
    known.write_text(f"gpubox {host_key(sshd)}\n{jump_entry.format(port=sshd.port)} {host_key(sshd)}\n")
    cfg = write_config(tmp_path, sshd, known, alias="gpubox", extra="ProxyJump jump")
    user = getpass.getuser()
    with cfg.open("a") as f:  # the jump host: this same sshd, by the name localhost
        f.write(f"Host jump\n    HostName localhost\n    Port {sshd.port}\n    User {user}\n"
                f"    IdentityFile {sshd.client_key}\n    IdentitiesOnly yes\n    UserKnownHostsFile {known}\n"
                "    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    UpdateHostKeys no\n"
                "    BatchMode yes\n")
    ssh_ok, ssh_err = await asyncio.to_thread(openssh_verdict, cfg)
    ours, err = await upwatch_verdict(cfg)
    assert ssh_ok == connects, f"OpenSSH itself: {ssh_err}"
    assert ours == ssh_ok, f"OpenSSH {'connected' if ssh_ok else 'refused: ' + ssh_err}; upwatch: {err}"
    if err is not None:
        assert err.kind == "host_key" and err.message.startswith("box (jump host jump): No ED25519 host key")
