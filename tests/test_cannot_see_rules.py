"""``probes.fold.access.classify``: each text a host prints when upwatch cannot read it has its own
reason (the texts are the tools' own, see the module's docstring), and nothing else is taken for one."""

from __future__ import annotations

import pytest

from probes.fold.access import LASTING, REASONS, classify, reason_words
from probes.sources.unit import access_problem


@pytest.mark.parametrize(("text", "rc", "sudo", "reason"), [
    # sudo missing: the remote shell's own words (bash, dash, the runner's exec), exit 127
    ("bash: line 1: sudo: command not found\n", 127, True, "sudo_missing"),
    ("sh: 1: exec: sudo: not found\n", 127, True, "sudo_missing"),
    ("zsh:1: command not found: sudo\n", 127, True, "sudo_missing"),
    # sudo refusing (sudo 1.9 with -n)
    ("sudo: a password is required\n", 1, True, "sudo_refused"),
    ("sudo: a terminal is required to read the password; either use the -S option\n", 1, True, "sudo_refused"),
    ("ops is not in the sudoers file.  This incident will be reported.\n", 1, True, "sudo_refused"),
    ("Sorry, user ops may not run sudo on gpu-b.\n", 1, True, "sudo_refused"),
    ("Sorry, user ops is not allowed to execute '/usr/bin/journalctl -u x' as root on gpu-b.\n", 1, True,
     "sudo_refused"),
    # no systemd (measured: systemctl 252 on this machine), or the tool itself missing
    (("System has not been booted with systemd as init system (PID 1). Can't operate.\n"
      "Failed to connect to bus: Host is down\n"), 1, False, "no_systemd"),
    ("Failed to connect to bus: No medium found\n", 1, False, "no_systemd"),
    ("sudo: systemctl: command not found\n", 1, True, "no_systemd"),
    ("bash: line 1: systemctl: command not found\n", 127, False, "no_systemd"),
    # no journal access (journalctl 252, src/shared/journal-util.c; measured as nobody)
    ("No journal files were opened due to insufficient permissions.\n", 1, False, "no_journal_access"),
    (("Hint: You are currently not seeing messages from other users and the system.\n"
      "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"), 0, False, "no_journal_access"),
    # nothing to say
    ("", 0, False, None),
    ("Failed to get properties: Connection timed out\n", 1, False, None),
    # without sudo configured, a "sudo" word is host text, not sudo's refusal
    ("sudo: a password is required\n", 0, False, None),
])
def test_each_text_has_its_reason(text: str, rc: int, sudo: bool, reason: str | None) -> None:
    assert classify(text, rc, sudo=sudo) == reason


def test_zsh_style_missing_sudo_is_found_by_its_exit_status() -> None:
    # zsh words it "command not found: sudo": the exit status 127 with sudo named decides
    assert classify("zsh:1: command not found: sudo\n", 1, sudo=True) is None
    assert classify("zsh:1: command not found: sudo\n", 127, sudo=True) == "sudo_missing"


def test_every_reason_has_its_own_sentence_and_fix() -> None:
    texts = {r: reason_words(r, "line") for r in LASTING}
    assert len(set(texts.values())) == len(LASTING)
    assert "NOPASSWD" in texts["sudo_refused"] and "NOPASSWD" not in texts["sudo_missing"]
    assert "install sudo" in texts["sudo_missing"]
    assert "systemd-journal" in texts["no_journal_access"]
    assert texts["no_systemd"].startswith("systemd is not running on the host (line): ")
    assert reason_words("unreadable", "Failed to get properties") == "Failed to get properties"
    assert set(LASTING) < set(REASONS)


def test_access_problem_quotes_the_tool_and_keeps_host_text_plain() -> None:
    found = access_problem(b"", b"System has not been booted with systemd as init system (PID 1). Can't operate.\n"
                                b"Failed to connect to bus: Host is down\n", 1, sudo=False)
    assert found == ("no_systemd", "systemd is not running on the host (System has not been booted with systemd as "
                                   "init system (PID 1). Can't operate.): " + REASONS["no_systemd"][1])
    assert access_problem(b"loaded weights\n", b"", 0, sudo=True) is None
    bad = access_problem(b"", b"sudo: a password is required \xff\n", 1, sudo=True)
    assert bad is not None and bad[0] == "sudo_refused"  # a bad byte is replaced, never raised


# --- the fold and the verdict: knowledge, and "cannot see" first ------------------------------------

T0 = 1_764_460_800.0


def _model():
    from probes.fold.model import HostModel
    from probes.data.events import Health, UnitState

    m = HostModel("gpu-b", "sglang.service")
    m.apply(Health(T0, "port_closed", detail="connection refused"))
    return m, UnitState, Health


def test_knowledge_is_read_failing_since_or_never() -> None:
    from probes.data.events import ProbeFailure, ProbeOk

    m, UnitState, _ = _model()
    s = m.state(T0)
    assert [(k.probe, k.status) for k in s.knowledge] == [("unit", "never"), ("journal", "never"), ("gpu", "never"),
                                                          ("health", "read")]
    m.apply(ProbeFailure(T0 + 1, "unit", "command", "systemctl show: boom", reason="no_systemd"))
    m.apply(ProbeFailure(T0 + 5, "unit", "command", "systemctl show: boom again", reason="no_systemd"))
    m.apply(ProbeOk(T0 + 2, "journal"))  # the follow opened on an empty journal: read, no entry yet
    s = m.state(T0 + 6)
    assert s.known("unit") == type(s.known("unit"))("unit", "failing", T0 + 1, "systemctl show: boom again", "no_systemd")
    assert (s.known("journal").status, s.known("journal").since) == ("read", T0 + 2)
    m.apply(UnitState(T0 + 7, "sglang.service", "loaded", "active", "running"))
    m.apply(ProbeOk(T0 + 7, "unit"))
    assert (m.state(T0 + 8).known("unit").status, m.state(T0 + 8).known("unit").since) == ("read", T0 + 7)


@pytest.mark.parametrize(("probe", "kind", "blind"), [
    ("unit", "command", True), ("unit", "permission", True), ("journal", "permission", True),
    ("gpu", "command", False), ("health", "command", False),  # their own cell only
    ("unit", "unreachable", False),  # the connection: the stale rule says it
    ("unit", "unparsable", False),  # read, with one value it cannot parse: that value's cell says it
    ("unit", "crashed", True),  # the probe's task died: nothing of the unit is being read
])
def test_cannot_see_is_said_only_for_the_unit_or_journal_on_the_host(probe: str, kind: str, blind: bool) -> None:
    from probes.data.events import ProbeFailure
    from probes.fold.headline import headline

    m, _, _ = _model()
    m.apply(ProbeFailure(T0 + 1, probe, kind, "x: sudo is not installed on the host: install it",
                         reason="sudo_missing" if kind != "unreachable" else ""))
    s = m.state(T0 + 2)
    assert (s.verdict is not None and s.verdict.kind == "cannot_see") is blind, s.verdict
    if blind:
        assert s.verdict.level == "warning" and headline(s) == "cannot see"
        assert s.verdict.sentence == f"Cannot read the {probe}: sudo is not installed on the host: install it."
        assert s.verdict.evidence[0].startswith(f"{probe}: failing since ")


def test_cannot_see_comes_before_every_other_rule_but_the_connection() -> None:
    import dataclasses

    from probes.data.events import ProbeFailure, UnitState
    from probes.fold.verdict import verdict_for

    m, _, _ = _model()
    m.apply(UnitState(T0, "sglang.service", "not-found", "inactive", "dead"))
    m.apply(ProbeFailure(T0 + 1, "journal", "permission", "gpu-b: the SSH user may not read ...: fix",
                         reason="no_journal_access"))
    s = m.state(T0 + 2)
    assert s.verdict is not None and s.verdict.kind == "cannot_see"  # before not_found
    stale = dataclasses.replace(s, stale_since=T0 + 1, failures=s.failures + (
        ProbeFailure(T0 + 1, "gpu", "unreachable", "connection refused"),))
    assert verdict_for(stale, T0 + 2).kind == "stale"
    # The stale sentence gives the connection's failure, not another probe's own trouble.
    odd = dataclasses.replace(stale, failures=(ProbeFailure(T0, "gpu", "unparsable", "unparsable value in x"),)
                              + stale.failures)
    assert "connection refused" in verdict_for(odd, T0 + 2).sentence
    both = dataclasses.replace(s, failures=(
        ProbeFailure(T0, "journal", "permission", "gpu-b: sudo -n refused (x): allow", reason="sudo_refused"),
        ProbeFailure(T0, "unit", "permission", "systemctl show: sudo -n refused (x): allow", reason="sudo_refused")))
    assert verdict_for(both, T0).sentence == "Cannot read the unit or the journal: sudo -n refused (x): allow."


def test_wait_gives_up_at_once_on_a_lasting_reason_and_after_a_while_on_another() -> None:
    from probes.data.state import HostState
    from probes.data.events import ProbeFailure
    from tui.wait_rules import BLIND_GIVE_UP_S, EXIT_UNREACHABLE, outcome

    base = HostState(host="gpu-b", unit="sglang.service", updated=T0)
    lasting = HostState(host="gpu-b", unit="sglang.service", updated=T0, failures=(
        ProbeFailure(T0, "unit", "command", "systemctl show: ...", reason="no_systemd"),))
    other = HostState(host="gpu-b", unit="sglang.service", updated=T0, failures=(
        ProbeFailure(T0, "unit", "command", "systemctl show: Failed to get properties"),))
    download = HostState(host="gpu-b", unit="sglang.service", updated=T0, failures=(
        ProbeFailure(T0, "download", "permission", "/root/.cache: the SSH user may not read it"),))
    assert outcome(base, 0, "ready", now=T0) is None
    assert outcome(lasting, 0, "ready", now=T0) == EXIT_UNREACHABLE
    assert outcome(other, 0, "ready", now=T0 + 1) is None
    assert outcome(other, 0, "ready", now=T0 + BLIND_GIVE_UP_S) == EXIT_UNREACHABLE
    assert outcome(download, 0, "ready", now=T0 + 999) is None  # a download folder is not the unit


def test_a_refused_host_key_or_login_is_not_called_unreachable() -> None:
    """The host answered and its key (or the login) was refused: the card's word says that, not
    UNREACHABLE (a new user took a changed host key for a dead link)."""
    from probes.data.events import ProbeFailure
    from probes.fold.headline import headline

    for kind in ("host_key", "auth"):
        m, _, _ = _model()
        m.apply(ProbeFailure(T0 + 1, "unit", kind, "the host key of 127.0.0.1:2203 CHANGED ...: ssh-keygen -R ...",
                             attempt=1))
        s = m.state(T0 + 2)
        assert s.verdict is not None and s.verdict.kind == "ssh" and headline(s) == "ssh refused"
