"""OpenSSH's client rules, applied to asyncssh: which host keys are trusted, which algorithms are
allowed, and why a login key cannot be used. :class:`~probes.transport.ssh.SshRunner` connects with these, so
upwatch trusts a host exactly when ``ssh -o BatchMode=yes`` would, never more.

Source of truth: OpenSSH 9.2p1 (Debian 12), ``ssh_config(5)`` and ``sshconnect.c``
(``check_host_key``, ``get_hostfile_hostname_ipaddr``), checked against the real ``ssh`` in
``tests/test_ssh_openssh.py``. What asyncssh 2.24 does differently, and what is done here instead:

* **The name looked up in known_hosts.** OpenSSH looks up one name: ``HostKeyAlias`` when set (as
  it is), else the ``HostName`` it connects to, lowercased, as ``[host]:port`` for a port other
  than 22. asyncssh also accepts a key recorded for the peer's IP address, and for a non-22 port
  retries the name without the port: both looser (``[127.0.0.1]:2222`` was trusted for an alias
  whose ``HostName`` is ``localhost``).
* **CheckHostIP** (default ``no`` since OpenSSH 8.5): with ``yes``, a key recorded for the address
  (``[addr]:port``) of a *different* key of the same type refuses the connection; OpenSSH skips the
  check for loopback addresses, when the host name is the address, and through a proxy. The IP
  entry never makes an unknown host trusted. asyncssh does not read the option; it is registered
  with asyncssh's own config parser here (:func:`register_config_options`).
* **Known hosts files**: ``UserKnownHostsFile`` (default ``~/.ssh/known_hosts
  ~/.ssh/known_hosts2``) and ``GlobalKnownHostsFile`` (default ``/etc/ssh/ssh_known_hosts
  /etc/ssh/ssh_known_hosts2``); a missing file counts as empty and a bad line is skipped, as in
  OpenSSH. ``UserKnownHostsFile none`` means no key is known (asyncssh turned checking *off*).
  Checking is always strict: upwatch never adds a key (``StrictHostKeyChecking`` ``no`` or
  ``accept-new`` make ``ssh`` accept what upwatch refuses, which is stricter, never looser).
* **Algorithms**: OpenSSH 9.2's default lists (``ssh -G``), not asyncssh's, which add ``ssh-rsa``
  (SHA-1) signatures, ``diffie-hellman-group14-sha1`` and others. ``HostKeyAlgorithms``,
  ``PubkeyAcceptedAlgorithms``, ``KexAlgorithms``, ``Ciphers`` and ``MACs`` from the config apply
  with OpenSSH's ``+``/``-``/``^`` rules over OpenSSH's defaults (:func:`choose_algs`), so
  ``HostKeyAlgorithms +ssh-rsa`` is how a user allows SHA-1 for one host. Without
  ``HostKeyAlgorithms``, the types already known for the host are offered first (OpenSSH's
  ``order_hostkeyalgs``), then the rest.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import asyncssh
from asyncssh.config import SSHClientConfig, SSHConfig
from asyncssh.encryption import get_encryption_algs
from asyncssh.kex import get_kex_algs
from asyncssh.mac import get_mac_algs
from asyncssh.public_key import get_certificate_algs, get_public_key_algs

#: OpenSSH 9.2p1's ``HostKeyAlgorithms`` and ``PubkeyAcceptedAlgorithms`` (``ssh -G``, Debian 12):
#: no ``ssh-rsa`` (RSA with SHA-1) since OpenSSH 8.8, no ``ssh-dss``.
OPENSSH_KEY_ALGS = (
    "ssh-ed25519-cert-v01@openssh.com", "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com", "rsa-sha2-256-cert-v01@openssh.com",
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", "rsa-sha2-512", "rsa-sha2-256")
#: OpenSSH 9.2p1's ``KexAlgorithms``.
OPENSSH_KEX_ALGS = (
    "sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com", "curve25519-sha256",
    "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256", "ecdh-sha2-nistp384", "ecdh-sha2-nistp521",
    "diffie-hellman-group-exchange-sha256", "diffie-hellman-group16-sha512",
    "diffie-hellman-group18-sha512", "diffie-hellman-group14-sha256")
#: OpenSSH 9.2p1's ``Ciphers``.
OPENSSH_CIPHERS = ("chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr",
                   "aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
#: OpenSSH 9.2p1's ``MACs``.
OPENSSH_MACS = ("umac-64-etm@openssh.com", "umac-128-etm@openssh.com", "hmac-sha2-256-etm@openssh.com",
                "hmac-sha2-512-etm@openssh.com", "hmac-sha1-etm@openssh.com", "umac-64@openssh.com",
                "umac-128@openssh.com", "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1")
#: OpenSSH's default known_hosts files.
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
#: The private keys OpenSSH tries when no ``IdentityFile`` is given (``ssh(1)``, 9.2).
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
                      "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa")


def register_config_options() -> None:
    """Teach asyncssh's config parser the client options it skips and upwatch needs:
    ``CheckHostIP`` (yes/no) and ``PubkeyAcceptedAlgorithms`` (old name ``PubkeyAcceptedKeyTypes``).
    asyncssh then applies its own ``Host``/``Match``/``Include`` and first-value-wins rules to them.
    Idempotent."""
    handlers = SSHClientConfig._handlers  # the table asyncssh parses with
    handlers.setdefault("checkhostip", ("CheckHostIP", SSHConfig._set_bool))
    for name in ("pubkeyacceptedalgorithms", "pubkeyacceptedkeytypes"):
        handlers.setdefault(name, ("PubkeyAcceptedAlgorithms", SSHConfig._set_string))


register_config_options()


def choose_algs(option: str, value: object, defaults: Sequence[str], supported: Iterable[bytes]) -> list[str]:
    """An algorithm list by OpenSSH's rules (``ssh_config(5)``), kept to what asyncssh supports.

    Args:
        option: the option's name (for the error). value: the config's value (a comma-separated
            string) or None. defaults: OpenSSH's default list. supported: what asyncssh can do.

    Returns:
        ``value`` unset: ``defaults``; ``+a,b``: defaults then a, b; ``-a,b``: defaults without
        those (``*``/``?`` wildcards); ``^a,b``: a, b, then the defaults; else the list itself.
        Wildcards match in every form. Order kept, duplicates and unsupported names dropped.

    Raises:
        ValueError: nothing left (OpenSSH refuses such a config too).
    """
    can = [a.decode("ascii") for a in supported]
    base = [a for a in defaults if a in can]
    if not isinstance(value, str) or not value.strip():
        chosen = base
    else:
        mode, text = (value[0], value[1:]) if value[0] in "+-^" else ("", value)
        items = [p.strip() for p in text.split(",") if p.strip()]
        named = [a for p in items for a in (fnmatch.filter(can, p) if any(c in p for c in "*?") else [p])]
        if mode == "+":
            chosen = base + named
        elif mode == "-":
            chosen = [a for a in base if not any(fnmatch.fnmatchcase(a, p) for p in items)]
        elif mode == "^":
            chosen = named + base
        else:
            chosen = named
    out: list[str] = []
    for a in chosen:
        if a in can and a not in out:
            out.append(a)
    if not out:
        raise ValueError(f"{option} {value!r} leaves no algorithm upwatch can use")
    return out


def host_key_algs(value: object, known: Sequence[asyncssh.SSHKey], cas: bool) -> list[str]:
    """``HostKeyAlgorithms`` for a host: the config's by :func:`choose_algs`; when unset, OpenSSH's
    defaults with the algorithms of the key types already known for the host first (and the
    certificate ones first when a ``@cert-authority`` key matches)."""
    supported = get_certificate_algs() + get_public_key_algs()
    algs = choose_algs("HostKeyAlgorithms", value, OPENSSH_KEY_ALGS, supported)
    if isinstance(value, str) and value.strip():
        return algs
    mine = {a.decode("ascii") for k in known for a in k.sig_algorithms}
    first = [a for a in algs if a in mine or (cas and "-cert-" in a)]
    return first + [a for a in algs if a not in first]


def other_algs(config: SSHClientConfig) -> dict[str, list[str]]:
    """``kex_algs``, ``encryption_algs``, ``mac_algs`` and ``signature_algs`` for asyncssh, by
    :func:`choose_algs` over the config's ``KexAlgorithms``, ``Ciphers``, ``MACs`` and
    ``PubkeyAcceptedAlgorithms``.

    Raises:
        ValueError: an option leaves nothing.
    """
    get = config.get
    return {
        "kex_algs": choose_algs("KexAlgorithms", get("KexAlgorithms"), OPENSSH_KEX_ALGS, get_kex_algs()),
        "encryption_algs": choose_algs("Ciphers", get("Ciphers"), OPENSSH_CIPHERS, get_encryption_algs()),
        "mac_algs": choose_algs("MACs", get("MACs"), OPENSSH_MACS, get_mac_algs()),
        "signature_algs": choose_algs("PubkeyAcceptedAlgorithms", get("PubkeyAcceptedAlgorithms"),
                                      OPENSSH_KEY_ALGS, get_public_key_algs()),  # signatures: no certificates
    }


# --- known hosts ------------------------------------------------------------------------------------

def lookup_name(host: str, port: int, alias: str | None) -> str:
    """The one name OpenSSH looks up in known_hosts: ``alias`` (HostKeyAlias) when set, else
    ``host`` (the HostName), lowercased, as ``[host]:port`` when ``port`` is not 22."""
    if alias:
        return alias.lower()
    host = host.lower()
    return host if port == 22 else f"[{host}]:{port}"


@dataclass(frozen=True)
class Matched:
    """What known_hosts holds for one name: ``keys`` (plain entries), ``cas`` (``@cert-authority``),
    ``revoked`` (``@revoked``)."""

    keys: tuple[asyncssh.SSHKey, ...]
    cas: tuple[asyncssh.SSHKey, ...]
    revoked: tuple[asyncssh.SSHKey, ...]


class KnownHosts:
    """known_hosts files as OpenSSH reads them: missing files are empty, bad lines skipped.

    Args:
        files: paths (``~`` expanded), read now, in order.
    """

    def __init__(self, files: Sequence[str]) -> None:
        self.files = tuple(files)
        #: Lines that could not be read, as ``(file, line number)``.
        self.skipped: list[tuple[str, int]] = []
        self._hosts = asyncssh.SSHKnownHosts()
        for name in self.files:
            try:
                with open(os.path.expanduser(name), encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                continue  # missing or unreadable: nothing known from it (as OpenSSH)
            for number, line in enumerate(text.splitlines(), 1):
                try:
                    self._hosts.load(line)
                except ValueError:
                    self.skipped.append((name, number))

    def match(self, name: str) -> Matched:
        """The entries for exactly ``name`` (a host, ``[host]:port`` or an alias; hashed entries
        too): no IP address, no retry without the port (asyncssh's ``match`` does both)."""
        found = self._hosts.match(name, "", None)
        return Matched(tuple(found[0]), tuple(found[1]), tuple(found[2]))


@dataclass(frozen=True)
class Target:
    """Where a connection goes, as OpenSSH resolves it.

    Attributes:
        host: the HostName (lowercased); port: the port; lookup: :func:`lookup_name`;
        check_host_ip: CheckHostIP from the config (OpenSSH's default: no); proxied: through
        ProxyJump or ProxyCommand (the IP check is skipped then).
    """

    host: str
    port: int
    lookup: str
    check_host_ip: bool
    proxied: bool

    @property
    def bare(self) -> str | None:
        """The name OpenSSH looks up again when :attr:`lookup` has no key at all (``HOST_NEW``):
        the host without the port, for a port other than 22 and no HostKeyAlias; else None."""
        if self.port == 22 or self.lookup != lookup_name(self.host, self.port, None):
            return None
        return self.host

    def ip_name(self, addr: str, port: int | None = None) -> str | None:
        """The name the address is looked up as for CheckHostIP (with ``port``, default
        :attr:`port`), or None when OpenSSH skips the check for it: loopback, the host name *is*
        the address, a proxy."""
        port = self.port if port is None else port
        if not self.check_host_ip or self.proxied or not addr or addr.lower() == self.host:
            return None
        try:
            if ipaddress.ip_address(addr.split("%")[0]).is_loopback:
                return None
        except ValueError:
            return None
        return addr if port == 22 else f"[{addr}]:{port}"


def trusted(target: Target, known: KnownHosts, addr: str) -> Matched:
    """The keys to trust for ``target`` reached at ``addr``: exactly those OpenSSH's
    ``check_host_key`` accepts (``sshconnect.c``, ``hostfile.c``), so asyncssh can be given them
    before the handshake.

    * The entries of :attr:`Target.lookup`: when there is any, the key must be one of them (a
      key of another type is "CHANGED" too).
    * When there is none and :attr:`Target.bare` applies, OpenSSH checks again without the port:
      the entries of the bare name (``localhost`` for ``[localhost]:2222``), with the same rules.
    * CheckHostIP (:meth:`Target.ip_name`): when the address has entries, the key must be one of
      them too (on each level: ``[addr]:port``, and ``addr`` for the bare one). An address entry
      never makes a host trusted on its own.
    * ``@revoked`` keys of either name are never trusted.
    """
    mine = known.match(target.lookup)
    keys = _agreeing(mine.keys, known, target.ip_name(addr))
    cas, revoked = mine.cas, mine.revoked
    if not mine.keys and target.bare is not None:
        bare = known.match(target.bare)
        keys = _agreeing(_agreeing(bare.keys, known, target.ip_name(addr, 22)), known, target.ip_name(addr))
        cas, revoked = cas + bare.cas, revoked + bare.revoked
    return Matched(tuple(k for k in keys if k not in revoked), cas, revoked)


def _agreeing(keys: tuple[asyncssh.SSHKey, ...], known: KnownHosts, ip_name: str | None) -> tuple[asyncssh.SSHKey, ...]:
    """``keys`` the address's entries agree with (all of them when it has none or is skipped)."""
    if ip_name is None:
        return keys
    theirs = known.match(ip_name).keys
    return keys if not theirs else tuple(k for k in keys if k in theirs)


def key_type(algorithm: bytes | str) -> str:
    """OpenSSH's word for a key type: ``ssh-ed25519`` -> ``ED25519``, ``ssh-rsa`` -> ``RSA`` ..."""
    a = algorithm.decode("ascii") if isinstance(algorithm, bytes) else algorithm
    a = a.replace("-cert-v01@openssh.com", "")
    sk = "-SK" if a.startswith("sk-") else ""
    if "ed25519" in a:
        return "ED25519" + sk
    if "ecdsa" in a:
        return "ECDSA" + sk
    if "rsa" in a:
        return "RSA"
    if "dss" in a:
        return "DSA"
    return a.upper()


# --- login keys -----------------------------------------------------------------------------------

def key_problems(files: Sequence[str], *, explicit: bool) -> list[str]:
    """Why login keys cannot be used, one sentence each with the fix (for an ``auth`` failure).

    Args:
        files: private key files (``~`` expanded). explicit: named by the user (a missing one is
            a problem), not OpenSSH's default list (missing ones are skipped).

    Returns:
        For each file that is missing (explicit only), protected by a passphrase (upwatch never
        asks for one: ``ssh-add`` it to the agent), unreadable as a private key, or of a type
        OpenSSH 9.2 does not use (DSA).
    """
    out = []
    for name in files:
        path = os.path.expanduser(name)
        if not os.path.exists(path):
            if explicit:
                out.append(f"the key {name} does not exist")
            continue
        try:
            key = asyncssh.read_private_key(path)
        except asyncssh.KeyImportError as exc:
            if "passphrase" in str(exc).lower():
                out.append(f"the key {name} is protected by a passphrase and upwatch never asks for "
                           f"one: load it into the agent (ssh-add {name}) and keep SSH_AUTH_SOCK set")
            else:
                out.append(f"the key {name} is not a private key upwatch can read ({exc})")
            continue
        except OSError as exc:
            out.append(f"the key {name} cannot be read ({exc.strerror or exc})")
            continue
        if key.algorithm == b"ssh-dss":
            out.append(f"the key {name} is a DSA key, which OpenSSH 9.2 does not use: make an "
                       f"ed25519 key (ssh-keygen -t ed25519) and install it on the host")
    return out


# --- what to tell the operator -------------------------------------------------------------------

def host_key_message(name: str, target: Target, known: KnownHosts, key: asyncssh.SSHKey | None,
                     addr: str, reason: str) -> str:
    """Why the host key of ``target`` is not trusted (the cases of :func:`trusted`), in OpenSSH's
    words where it has them, with the commands that fix it for the known_hosts file in use.

    Args:
        name: the host as the operator named it (starts the message). key: the key the server
            presents (None when it could not be fetched again). addr: the address connected to.
            reason: asyncssh's words (used when nothing better is known).
    """
    first = known.files[0] if known.files else "~/.ssh/known_hosts"
    where = target.host if target.port == 22 else f"{target.host}:{target.port}"
    scan = f"ssh-keyscan{'' if target.port == 22 else f' -p {target.port}'} {target.host}"
    if target.lookup != lookup_name(target.host, target.port, None):
        scan += f" | sed 's/^[^ ]*/{target.lookup}/'"  # HostKeyAlias: the entry is the alias
    mine = known.match(target.lookup)
    bare = known.match(target.bare) if target.bare is not None and not mine.keys else None
    what = "" if key is None else key_type(key.algorithm)
    if key is not None and (key in mine.revoked or (bare is not None and key in bare.revoked)):
        return f"{name}: the {what} host key of {where} is marked @revoked in {first}; upwatch will not use it."
    if mine.keys and (key is None or key not in mine.keys):
        recorded = sorted({key_type(k.algorithm) for k in mine.keys})
        shown = "" if key is None or what in recorded else \
            f" ({first} records {'/'.join(recorded)} for {target.lookup}; the server shows {what})"
        return (f"{name}: the host key of {where} CHANGED since it was recorded in {first}{shown} "
                f"(reinstalled host, or someone in between). If expected: ssh-keygen -f {first} "
                f"-R '{target.lookup}', then {scan} >> {first}.")
    known_here = key is not None and (key in mine.keys or (bare is not None and key in bare.keys))
    if known_here:
        for ip_name in (target.ip_name(addr), target.ip_name(addr, 22) if bare is not None else None):
            theirs = known.match(ip_name).keys if ip_name else ()
            if theirs and key not in theirs:
                return (f"{name}: the {what} host key of {target.lookup} matches, but {first} records "
                        f"a different key for its address {ip_name} (CheckHostIP yes). If the "
                        f"address was reused: ssh-keygen -f {first} -R '{ip_name}'.")
        return f"{name}: the host key of {where} is known but was not accepted ({reason})"
    return (f"{name}: No {what + ' ' if what else ''}host key is known for {target.lookup} in "
            f"{first}. Check it, then: {scan} >> {first}")


_SHA1_HOST_KEY_ALGS = {"ssh-rsa", "ssh-dss", "ssh-rsa-cert-v01@openssh.com", "ssh-dss-cert-v01@openssh.com"}


def no_common_alg_message(name: str, alias: str, reason: str) -> str:
    """Words for asyncssh's ``KeyExchangeFailed`` "No matching <kind> algorithm found, sent A and
    received B": what the server offers, and the fix (SHA-1 host keys named as such)."""
    head, _, rest = reason.partition(" algorithm found, sent ")
    kind = head.removeprefix("No matching ").strip() or "algorithm"
    sent, _, received = rest.partition(" and received ")
    offers = [a for a in received.split(",") if a]
    if kind == "host key" and offers and set(offers) <= _SHA1_HOST_KEY_ALGS:
        return (f"{name}: the server signs its host key only with {', '.join(offers)} (SHA-1), "
                f"which OpenSSH refuses since 8.8 and so does upwatch. Fix the server (an ed25519 "
                f"host key: ssh-keygen -A, or OpenSSH 7.2+ for rsa-sha2-256), or accept SHA-1 for "
                f"this host: 'HostKeyAlgorithms +ssh-rsa' under 'Host {alias}' in ~/.ssh/config.")
    return (f"{name}: no {kind} algorithm in common with the server: it offers "
            f"{', '.join(offers) or 'none'}; upwatch allows OpenSSH 9.2's defaults "
            f"({sent or 'none'}). Set {_OPTION.get(kind, 'the algorithm option')} under "
            f"'Host {alias}' in ~/.ssh/config to allow one of the server's.")


_OPTION = {"host key": "HostKeyAlgorithms", "key exchange": "KexAlgorithms",
           "encryption": "Ciphers", "MAC": "MACs"}
