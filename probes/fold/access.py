"""Why upwatch cannot read a host's unit or journal: the command's own words → a reason id, with
the sentence and the fix an operator needs.

Sources of truth for the texts matched (all measured or quoted from the tools):

* bash / dash when a command is missing: ``bash: line 1: sudo: command not found`` /
  ``sh: 1: sudo: not found``, exit 127 (measured on the sshd test host, Debian 12 bash 5.2);
  sudo when the command it runs is missing: ``sudo: systemctl: command not found``, exit 1.
* sudo 1.9 with ``-n``: ``sudo: a password is required`` / ``sudo: a terminal is required to
  read the password``; a user sudoers does not name: ``USER is not in the sudoers file``,
  ``Sorry, user USER may not run sudo on HOST.``, ``Sorry, user USER is not allowed to execute
  '...' as root on HOST.``
* systemctl 252 on a host whose PID 1 is not systemd (measured here): ``System has not been
  booted with systemd as init system (PID 1). Can't operate.`` then ``Failed to connect to bus:
  Host is down``, exit 1; a ``--user`` manager that is not running: ``Failed to connect to bus:
  No medium found`` (or ``$DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined``).
* journalctl 252 (``src/shared/journal-util.c``): ``No journal files were opened due to
  insufficient permissions.`` (exit 1, measured as an unprivileged user on a 0640 root journal),
  and the hint ``Hint: You are currently not seeing messages from other users and the system.``
  (exit 0; ``-o json`` prints nothing at all then).
"""

from __future__ import annotations

import re

#: Reason ids, each with (what is missing, the fix), for sentences. ``unreadable`` is any other
#: failure of the command (its own message is the "what").
REASONS: dict[str, tuple[str, str]] = {
    "sudo_missing": ("sudo is not installed on the host, and sudo = true is set for it",
                     "install sudo there, or set sudo = false (root reads the journal and the unit without it; "
                     "another user needs the systemd-journal group)"),
    "sudo_refused": ("sudo -n refused",
                     "allow journalctl and systemctl for the SSH user without a password (NOPASSWD in sudoers)"),
    "no_systemd": ("systemd is not running on the host",
                   ("upwatch reads systemd units: run the server as a unit on a host booted with systemd "
                    "(a user_unit needs the user's manager: loginctl enable-linger USER)")),
    "no_journal_access": ("the SSH user may not read the system journal",
                          ("add it to the systemd-journal (or adm) group, or set sudo = true with NOPASSWD "
                           "for journalctl and systemctl")),
    "unreadable": ("the command failed", "see the message; upwatch tries again"),
}

#: Reasons that do not go away by waiting (``upwatch wait`` gives up on them at once).
LASTING = frozenset({"sudo_missing", "sudo_refused", "no_systemd", "no_journal_access"})

_SUDO_MISSING_RE = re.compile(r"(?:^|[\s:])sudo: (?:command )?not found", re.IGNORECASE | re.MULTILINE)
_SUDO_REFUSED_RE = re.compile(r"a password is required|a terminal is required|is not in the sudoers|"
                              r"may not run sudo|is not allowed to execute", re.IGNORECASE)
_NO_SYSTEMD_RE = re.compile(r"has not been booted with systemd|failed to connect to bus|"
                            r"\b(?:systemctl|journalctl): (?:command )?not found|"
                            r"DBUS_SESSION_BUS_ADDRESS and \$?XDG_RUNTIME_DIR", re.IGNORECASE)
_NO_JOURNAL_RE = re.compile(r"no journal files were opened due to insufficient permissions|"
                            r"not seeing messages from other users", re.IGNORECASE)


def classify(text: str, returncode: int | None, *, sudo: bool) -> str | None:
    """The reason a ``systemctl`` or ``journalctl`` command (run as the probes run it, with
    ``sudo -n`` in front when ``sudo``) could not read the host, from its stdout and stderr.

    Args:
        text: the command's stderr and stdout together (host text, any case).
        returncode: its exit status, or None when unknown. sudo: it ran through ``sudo -n``.

    Returns:
        ``sudo_missing``, ``sudo_refused``, ``no_systemd``, ``no_journal_access``, or None when the
        text names none of them (the caller decides whether the command failed at all).
    """
    if sudo and (_SUDO_MISSING_RE.search(text) or (returncode == 127 and "sudo" in text.lower()
                                                    and not _NO_SYSTEMD_RE.search(text))):
        return "sudo_missing"
    if sudo and _SUDO_REFUSED_RE.search(text):
        return "sudo_refused"
    if _NO_SYSTEMD_RE.search(text):
        return "no_systemd"
    if _NO_JOURNAL_RE.search(text):
        return "no_journal_access"
    return None


def first_line(text: str, *, limit: int = 160) -> str:
    """The first non-empty line of ``text``, stripped and cut to ``limit`` characters ("" if none)."""
    return next((ln.strip()[:limit] for ln in text.splitlines() if ln.strip()), "")


def reason_words(reason: str, detail: str = "") -> str:
    """``what (detail): fix`` for ``reason`` (a :data:`REASONS` id; an unknown id reads as
    ``unreadable``); ``detail`` is the tool's own line (host text), shown in parentheses."""
    what, fix = REASONS.get(reason, REASONS["unreadable"])
    if reason not in REASONS or reason == "unreadable":
        return detail or what
    head = f"{what} ({detail})" if detail else what
    return f"{head}: {fix}"


__all__ = ["LASTING", "REASONS", "classify", "first_line", "reason_words"]
