"""The journal source alone: a canned ``journalctl`` (real records of a captured start) on a
ManualClock: the access look, the follow, its end and resume after the cursor, and the guard that
reopens a follow that fell behind (systemd#25649)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from canned_runner import CannedRunner, Stream
from probes.clock import ManualClock
from probes.fold.model import HostModel
from probes.sources.context import SourceContext
from probes.logs.journal_json import READ_FIELDS, parse_record
from probes.sources.journal import JOURNAL_GUARD_S, JOURNAL_RECHECK_S, JournalSource
from probes.sources.journal_cmd import output_fields_option
from probes.spec import HostSpec
from probes.transport.runner import ProbeError

RECORDS = (Path(__file__).resolve().parent / "fixtures" / "journal" / "sglang-startup.jsonl").read_bytes().splitlines()
T0 = 1_764_460_800.0
LOOK = ["journalctl", "-u", "sglang.service", "-n", "1", "-o", "cat"]  # the access look
HAS_MORE = ["journalctl", "-u", "sglang.service", "-o", "json", "-a", "--no-pager", "-n", "1"]
FOLLOW = ["journalctl", "-u", "sglang.service", "-o", "json", "-a", "-f"]
FIELDS = output_fields_option(READ_FIELDS)
DENIED = b"No journal files were opened due to insufficient permissions.\n"


def cursor_of(raw: bytes) -> str:
    return str(json.loads(raw)["__CURSOR"])


class Rig:
    """A journal source, its runner answering: readable, entries there, a follow of 10 records that
    then stays open. The test changes answers, then starts the loop (:meth:`start`)."""

    def __init__(self) -> None:
        self.clock, self.runner = ManualClock(T0), CannedRunner()
        spec = HostSpec("gpu-node-1", "sglang.service", ssh="gpu-node-1")
        self.model = HostModel(spec.name, spec.unit)
        #: the model's ``seq`` at each change said (``on_change``)
        self.changes: list[int] = []
        ctx = SourceContext(spec, self.runner, self.clock, self.model,
                            on_change=lambda: self.changes.append(self.model.seq))
        ctx.signals.unit_seen.set()  # no unit state: read the backlog, no --since
        self.runner.answer(LOOK, b"a line\n")
        self.runner.answer(HAS_MORE, RECORDS[0])
        self.runner.answer_stream(FOLLOW, Stream(RECORDS[:10], hold=True))
        self.source = JournalSource(ctx)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.source.run())


@pytest.fixture
async def journal() -> AsyncIterator[tuple[Rig, JournalSource, CannedRunner, ManualClock, HostModel]]:
    rig = Rig()
    yield rig, rig.source, rig.runner, rig.clock, rig.model
    if rig.task is not None:
        rig.task.cancel()
        await asyncio.gather(rig.task, return_exceptions=True)


async def test_the_follow_delivers_the_records_and_keeps_the_cursor(journal) -> None:
    rig, source, runner, clock, model = journal
    rig.start()
    await clock.settle()
    assert runner.streams_opened == [tuple(FOLLOW) + ("--no-pager", "-n", "5000", FIELDS)]
    assert source.is_open and source.cursor == cursor_of(RECORDS[9])
    assert model.seq == 10 and not model.failing("journal")
    assert source.reopened == 0


async def test_a_journal_it_may_not_read_fails_with_backoff_and_recovery_opens_the_follow(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer(LOOK, b"", returncode=1, stderr=DENIED)
    rig.start()
    await clock.settle()
    f = model.state(clock.now()).failure("journal")
    assert f is not None and (f.kind, f.reason) == ("permission", "no_journal_access")
    assert f.message.startswith("gpu-node-1: the SSH user may not read the system journal")
    await clock.advance(2)
    assert runner.ran(LOOK) == 2 and runner.streams_opened == []
    await clock.advance(3.9)
    assert runner.ran(LOOK) == 2  # the second retry waits 4 s
    runner.answer(LOOK, b"a line\n")
    await clock.advance(0.1)
    assert runner.ran(LOOK) == 3 and len(runner.streams_opened) == 1
    assert model.state(clock.now()).failure("journal") is None and model.seq == 10


async def test_a_follow_that_ends_on_the_host_fails_and_resumes_after_the_cursor(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer_stream(FOLLOW, Stream(RECORDS[:10]))  # journalctl -f ends after ten records
    rig.start()
    await clock.settle()
    f = model.state(clock.now()).failure("journal")
    assert f is not None and f.kind == "command" and "journalctl -f ended on the host" in f.message
    runner.answer_stream(FOLLOW, Stream(RECORDS[10:20], hold=True))
    await clock.advance(2)
    assert runner.streams_opened[1] == tuple(FOLLOW) + ("--no-pager", "--after-cursor", cursor_of(RECORDS[9]), FIELDS)
    assert model.state(clock.now()).failure("journal") is None
    assert model.seq == 20 and source.cursor == cursor_of(RECORDS[19]) and source.reopened == 0


async def test_a_follow_that_began_empty_is_reopened_at_its_first_line(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer(HAS_MORE, b"")  # the unit has no entry yet: the follow is not trusted
    rig.start()
    await clock.settle()
    # Its first line is not taken: the follow is opened again (trusted now, no second look).
    assert source.reopened == 1 and len(runner.streams_opened) == 2
    assert runner.ran(HAS_MORE) == 1
    assert model.seq == 10 and source.cursor == cursor_of(RECORDS[9])
    assert source.context.signals.log_known.is_set()


async def test_a_trusted_reopen_that_fails_is_checked_again_at_the_next_follow(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer(HAS_MORE, b"")  # begun empty: untrusted, reopened trusted at its first line ...
    runner.answer_stream(FOLLOW, Stream(RECORDS[:1], hold=True),
                         Stream(RECORDS[:5], then=ProbeError("closed", "gpu-node-1: connection lost")),
                         Stream(RECORDS[5:10], hold=True))
    rig.start()
    await clock.settle()
    assert source.reopened == 1 and runner.ran(HAS_MORE) == 1
    f = model.state(clock.now()).failure("journal")
    assert f is not None and f.kind == "closed"  # ... which then dropped
    runner.answer(HAS_MORE, RECORDS[5])  # the journal has entries after the cursor now
    await clock.advance(2)
    # The follow after the drop is not a reopen for entries: journalctl -n 1 decides again.
    assert len(runner.streams_opened) == 3 and runner.ran(HAS_MORE) == 2
    assert runner.streams_opened[2][-3:] == ("--after-cursor", cursor_of(RECORDS[4]), FIELDS)
    assert source.reopened == 1 and model.seq == 10 and not model.failing("journal")


async def test_a_quiet_follow_with_entries_it_did_not_deliver_is_reopened(journal) -> None:
    rig, source, runner, clock, model = journal
    rig.start()
    await clock.settle()
    assert source.reopened == 0 and len(runner.streams_opened) == 1
    # Quiet for the guard's time, and the journal has an entry after the cursor at both looks.
    await clock.advance(JOURNAL_GUARD_S + JOURNAL_RECHECK_S)
    assert source.reopened == 1 and len(runner.streams_opened) == 2
    assert runner.streams_opened[1][-3:] == ("--after-cursor", cursor_of(RECORDS[9]), FIELDS)
    assert not model.failing("journal")


async def test_an_open_follow_whose_entries_have_not_come_has_not_answered(journal) -> None:
    # The look (journalctl -n 1) finds an entry, but the follow brings nothing yet (a slow host):
    # the journal has not answered, so `upwatch status` does not judge the start without its log
    # (a fresh user saw "Unit failed; the log says nothing of it" for a restart loop whose log was
    # 4 s away).
    rig, source, runner, clock, model = journal
    runner.answer_stream(FOLLOW, Stream([], hold=True))
    rig.start()
    await clock.settle()
    assert source.is_open and source.awaiting_entries and not source.answered and model.seq == 0


async def test_an_open_follow_of_an_empty_journal_has_answered(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer(HAS_MORE, b"")
    runner.answer_stream(FOLLOW, Stream([], hold=True))
    rig.start()
    await clock.settle()
    assert source.is_open and source.answered and model.seq == 0


async def test_a_follow_that_delivered_has_answered(journal) -> None:
    rig, source, runner, clock, model = journal
    rig.start()
    await clock.settle()
    assert source.answered and model.seq == 10


async def test_a_journalctl_that_refuses_output_fields_is_asked_without_them_from_then_on(journal) -> None:
    # systemd 235 and older do not know --output-fields: the look is asked again without it, the
    # follow never asks for it, and later looks do not try again.
    rig, source, runner, clock, model = journal
    runner.answer([*HAS_MORE, FIELDS], b"", returncode=1,
                  stderr=f"journalctl: unrecognized option '{FIELDS}'\n".encode())
    rig.start()
    await clock.settle()
    assert source.fields is False and model.seq == 10 and not model.failing("journal")
    assert runner.streams_opened == [tuple(FOLLOW) + ("--no-pager", "-n", "5000")]
    await clock.advance(JOURNAL_GUARD_S + JOURNAL_RECHECK_S)  # the guard looks again, twice
    assert runner.ran([*HAS_MORE, FIELDS]) == 1 and runner.ran(HAS_MORE) >= 3


async def test_a_look_that_fails_otherwise_does_not_decide_the_fields(journal) -> None:
    # A failed look (here: the journal went away) says nothing of --output-fields: the follow asks
    # for every field (safe) and the next look asks with them again.
    rig, source, runner, clock, model = journal
    runner.answer([*HAS_MORE, FIELDS], b"", returncode=1, stderr=b"Failed to get journal: Bad message\n")
    rig.start()
    await clock.settle()
    assert source.fields is None
    assert runner.streams_opened == [tuple(FOLLOW) + ("--no-pager", "-n", "5000")]


# --- a read's lines at once ------------------------------------------------------------------------

BAD = b'{"MESSAGE": "cut mid-rec'  # a record cut short: not JSON


async def test_the_records_of_one_read_are_folded_in_order_and_the_change_said_once(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer_stream(FOLLOW, Stream(RECORDS[:10], hold=True, reads=(4, 6)))
    rig.start()
    await clock.settle()
    assert model.seq == 10 and source.cursor == cursor_of(RECORDS[9])
    assert [e.text for e in model.log] == [parse_record(r).text for r in RECORDS[:10]]
    # One change per read (4 records, then 6), none per record.
    assert [n for n in rig.changes if n > 0] == [4, 10]
    assert not model.failing("journal") and source.answered


async def test_a_bad_record_in_a_read_is_kept_in_place_and_the_others_delivered(journal) -> None:
    rig, source, runner, clock, model = journal
    lines = [*RECORDS[:2], BAD, b"", b"-- cursor: s=x", RECORDS[2]]
    runner.answer_stream(FOLLOW, Stream(lines, hold=True, reads=(6,)))
    rig.start()
    await clock.settle()
    texts = [e.text for e in model.log]
    assert model.seq == 4 and len(texts) == 4  # three records and the bad line; no blank, no note
    assert texts[2].startswith("[unreadable journal record] ") and BAD.decode() in texts[2]
    assert texts[3] == parse_record(RECORDS[2]).text
    assert source.cursor == cursor_of(RECORDS[2]) and not model.failing("journal")
    assert [n for n in rig.changes if n > 0] == [4]


async def test_the_cursor_of_a_reads_last_record_is_where_the_next_follow_resumes(journal) -> None:
    rig, source, runner, clock, model = journal
    # The follow ends after one read whose last lines are not records.
    runner.answer_stream(FOLLOW, Stream([*RECORDS[:5], BAD, b""], reads=(7,)),
                         Stream(RECORDS[5:10], hold=True, reads=(5,)))
    rig.start()
    await clock.settle()
    f = model.state(clock.now()).failure("journal")
    assert f is not None and "journalctl -f ended on the host" in f.message
    await clock.advance(2)
    assert runner.streams_opened[1][-3:] == ("--after-cursor", cursor_of(RECORDS[4]), FIELDS)
    assert model.seq == 11 and source.cursor == cursor_of(RECORDS[9]) and not model.failing("journal")


async def test_a_read_of_blank_lines_is_no_arrival_for_a_follow_that_began_empty(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer(HAS_MORE, b"")  # untrusted: reopened at its first entry, not at a blank read
    runner.answer_stream(FOLLOW, Stream([b"", b"  ", b"-- No entries --"], hold=True, reads=(3,)),
                         Stream(RECORDS[:3], hold=True, reads=(3,)))
    rig.start()
    await clock.settle()
    assert source.reopened == 0 and len(runner.streams_opened) == 1 and model.seq == 0


async def test_a_look_that_fails_for_no_access_reason_is_no_reading_and_says_the_hosts_words(journal) -> None:
    # Before: any exit status the access reasons did not name counted as readable.
    rig, source, runner, clock, model = journal
    runner.answer(LOOK, b"", returncode=1, stderr=b"\n\x1b[31mFailed to open journal: Input/output error\x1b[0m\n")
    rig.start()
    await clock.settle()
    f = model.state(clock.now()).failure("journal")
    assert f is not None and (f.kind, f.reason) == ("command", "unreadable")
    assert f.message == ("gpu-node-1: journalctl could not read the journal (exit status 1): "
                         "Failed to open journal: Input/output error (retrying)")
    assert runner.streams_opened == [] and not model.has_read("journal")
    runner.answer(LOOK, b"a line\n")
    await clock.advance(2)
    assert model.state(clock.now()).failure("journal") is None and model.seq == 10


def test_the_hosts_words_are_one_safe_line_and_bounded() -> None:
    from probes.sources.journal_cmd import HOST_WORDS_CHARS, failed_words, host_words

    assert host_words(b"") == "" and failed_words(1, b"") == "(exit status 1)"
    assert failed_words(-15, b"") == "(killed by signal 15)"
    words = host_words(b"\xff" + b"x" * 10_000 + b"\n2nd line\n")
    assert len(words) == HOST_WORDS_CHARS and words.endswith("\u2026") and words.startswith("\ufffd")
    assert host_words("a\x1b]8;;http://evil\x07b\u009b31mc\tz\n".encode()) == "abc    z"


async def test_a_journal_that_answers_again_is_read_at_once_without_a_new_entry(journal) -> None:
    # Before: it stayed failing ("cannot see") until the unit logged a new line.
    rig, source, runner, clock, model = journal
    runner.answer_stream(FOLLOW, Stream(RECORDS[:10]))  # journalctl -f ends after ten records
    rig.start()
    await clock.settle()
    assert model.failing("journal")
    runner.answer(HAS_MORE, b"")  # nothing new after the cursor: the unit logs nothing
    runner.answer_stream(FOLLOW, Stream([], hold=True))
    await clock.advance(2)
    assert len(runner.streams_opened) == 2 and source.is_open
    assert not model.failing("journal") and model.seq == 10


async def test_a_journal_whose_look_still_fails_stays_failing(journal) -> None:
    rig, source, runner, clock, model = journal
    runner.answer_stream(FOLLOW, Stream(RECORDS[:10]))
    rig.start()
    await clock.settle()
    runner.answer(HAS_MORE, b"", returncode=1, stderr=b"Failed to open journal: Input/output error\n")
    runner.answer_stream(FOLLOW, Stream([], hold=True))
    await clock.advance(2)
    assert len(runner.streams_opened) == 2 and model.failing("journal")
