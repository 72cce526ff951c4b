"""The journal probe's command line and what journalctl's output and exit say (pure; the loop is
:mod:`probes.sources.journal`): the follow's argv (:func:`journal_argv`, ``--output-fields``),
whether the journal may be read (:func:`journal_access_problem`), and journalctl's own words for a
failure (:func:`host_words`, :func:`failed_words`). Formats: journalctl's, systemd 235-257
(reference/FORMATS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.fold.access import first_line
from probes.hosttext import RAW_LIMIT, one_line
from probes.sources.unit import access_problem

#: Longest part of journalctl's own error line quoted in a failure (characters, after
#: :func:`probes.hosttext.one_line`): the verdict's evidence is cut at 200.
HOST_WORDS_CHARS = 160


def host_words(stderr: bytes) -> str:
    """journalctl's own words for a failure: the first non-empty line of its ``stderr``, made safe
    (:func:`probes.hosttext.one_line`) and cut to :data:`HOST_WORDS_CHARS`; "" when it said nothing."""
    return one_line(first_line(stderr[:RAW_LIMIT].decode("utf-8", "replace"), limit=RAW_LIMIT),
                    max_chars=HOST_WORDS_CHARS)


def failed_words(returncode: int, stderr: bytes) -> str:
    """``exit status 1): Failed to open journal: Input/output error``'s parts as one phrase:
    ``(exit status N): WORDS``, ``(killed by signal N)``, ``(exit status N)`` without words."""
    status = f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
    words = host_words(stderr)
    return f"({status}): {words}" if words else f"({status})"


def journal_argv(unit: str, cursor: str | None, backlog: int, *, since: float | None = None,
                 user_unit: bool = False, fields: Sequence[str] | None = None) -> list[str]:
    """``journalctl`` follow command for ``unit`` (``-o json -a -f``).

    Args:
        unit: the unit. cursor: resume after this journal cursor (``--after-cursor``); no entry is
            repeated or lost. backlog: without a cursor, at most this many entries of history
            (``-n``). since: without a cursor, only entries from this time on (epoch seconds,
            ``--since=@…``; the current start's beginning). user_unit: ``--user-unit`` instead of
            ``-u``. fields: ask only for these fields (``--output-fields=A,B``, last; systemd
            236+); None for all.

    Returns:
        The argv, e.g. ``["journalctl", "-u", "sglang.service", "-o", "json", "-a", "-f",
        "--no-pager", "--since=@1741436938", "-n", "5000"]``. With ``--since`` and ``-n`` both,
        journalctl (systemd 252, measured) prints the newest ``-n`` entries not older than since.
    """
    argv = ["journalctl", "--user-unit" if user_unit else "-u", unit, "-o", "json", "-a", "-f", "--no-pager"]
    if cursor:
        argv += ["--after-cursor", cursor]
    else:
        if since is not None:
            argv.append(f"--since=@{int(since)}")
        argv += ["-n", str(backlog)]
    if fields:
        argv.append(output_fields_option(fields))
    return argv


def output_fields_option(fields: Sequence[str]) -> str:
    """The ``--output-fields=A,B`` option for ``fields`` (journalctl, systemd 236+)."""
    return "--output-fields=" + ",".join(fields)


def refuses_output_fields(returncode: int, stderr: bytes) -> bool:
    """Whether a journalctl run failed because it does not know ``--output-fields`` (systemd 235
    and older; getopt's ``journalctl: unrecognized option '--output-fields=…'``, exit 1; musl's
    ``unrecognized option: output-fields``)."""
    return returncode != 0 and b"output-fields" in stderr


def journal_access_problem(stdout: bytes, stderr: bytes, returncode: int, *, sudo: bool) -> str | None:
    """Why the journal cannot be read, from ``journalctl -u UNIT -n 1 -o cat`` run as the probes
    run it (``-o json`` prints nothing at all for a user who may not read it, so a plain-format
    look detects it; the texts are :mod:`probes.fold.access`'s), or None when it can.

    Returns:
        One line for the operator with what to do, e.g. ``the SSH user may not read the system
        journal (No journal files were opened ...): add it to the systemd-journal (or adm) group,
        or set sudo = true with NOPASSWD for journalctl and systemctl``.
    """
    found = access_problem(stdout, stderr, returncode, sudo=sudo)
    return found[1] if found is not None else None
