"""The journal probe: ``journalctl -u UNIT -o json -a -f`` followed into the model.

The record parser is :mod:`probes.logs.journal_json`; this is the command and the loop
(:class:`JournalSource`):

1. **Access.** Before the first follow, one plain-format look (``-n 1 -o cat``): ``-o json``
   prints nothing at all for a user who may not read the journal, the plain format says why
   (:func:`~probes.sources.journal_cmd.journal_access_problem`). Until it passes, the ``journal`` cell says what to do.
2. **Follow.** ``journalctl -f`` from the current start's beginning (``--since``, from the unit
   probe's ``InactiveExitTimestamp``) on first connect, after the last cursor delivered
   (``--after-cursor``) after a drop: no entry is lost or shown twice. A follow that ends on the
   host fails the ``journal`` cell with journalctl's exit status and first stderr line
   (:func:`~probes.sources.journal_cmd.failed_words`); the look that opens the next one (``journalctl -n 1``), when it
   answers, makes the journal read again at once: an idle unit logs no line to say so.
3. **Guard.** systemd 252's ``journalctl -f`` can fall behind the journal (systemd#25649): a follow
   that began with no entries may deliver none of the unit's first ones, and one that went quiet
   may have missed some. A follow that began empty is *untrusted*: its first line, or an entry seen
   by ``journalctl -n 1``, reopens it (after the cursor). A trusted one that has been quiet for
   :data:`JOURNAL_GUARD_S` is checked twice, :data:`JOURNAL_RECHECK_S` apart, and reopened when
   the journal has an entry it did not deliver.
4. **Fields.** Every look and follow asks only for the fields the record parser reads
   (``--output-fields=``, :data:`~probes.logs.journal_json.READ_FIELDS`; systemd 236+): a third of
   the bytes of a full record over SSH, and less JSON to parse per line. A journalctl that refuses
   the option (systemd 235 and older: ``journalctl: unrecognized option '--output-fields=…'``, exit
   1) is asked again without it, and from then on never with it (:attr:`JournalSource.fields`).

Each follow ends in a named :class:`FollowEnd`; from it the loop decides its next :class:`Step`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum

from probes.logs.journal_json import READ_FIELDS, RecordError, parse_record
from probes.sources.context import STOP_WAIT_S, SourceContext, wait_event
from probes.sources.journal_cmd import failed_words, journal_argv, output_fields_option, refuses_output_fields
from probes.sources.unit import access_problem
from probes.transport.runner import ProbeError, StreamEnd, stream_batches

#: Seconds without a journal entry after which the follow is checked for having fallen behind the
#: journal (systemd#25649), and seconds between the two looks that must agree.
JOURNAL_GUARD_S = 10.0
JOURNAL_RECHECK_S = 3.0
#: Seconds between looks (``journalctl -n 1``) while a follow that began with no entries has
#: delivered none: the unit's first entries may never come through it (systemd#25649).
JOURNAL_UNTRUSTED_POLL_S = 2.0
#: Real seconds the journal waits for the unit probe's first answer (for ``--since``).
UNIT_SEEN_WAIT_S = 10.0
def _has_entry(lines: list[bytes]) -> bool:
    """Whether a batch of ``journalctl -f`` lines holds more than blank lines and ``-- `` notes."""
    return any(_is_entry(raw) for raw in lines)


def _is_entry(raw: bytes) -> bool:
    """Whether a ``journalctl -f`` line is an entry (a record, or a line that fails as one): not
    blank, not a ``-- `` note. A record's ``{`` answers at once (no copy of the line)."""
    return raw[:1] == b"{" or bool(raw.strip() and not raw.startswith(b"-- "))


class Step(enum.Enum):
    """What the journal loop does next."""

    #: the plain-format access look (before the first follow, and until it passes)
    LOOK = "look"
    #: open a follow; ``journalctl -n 1`` says whether it can be trusted
    FOLLOW = "follow"
    #: open a follow at once, trusted: the last one (begun empty) has just seen entries arrive
    FOLLOW_TRUSTED = "follow_trusted"


class FollowEnd(enum.Enum):
    """How one ``journalctl -f`` ended."""

    #: the guard found entries the follow did not deliver: reopen after the cursor, checked again
    BEHIND = "behind"
    #: a follow that began empty got its first line: reopen at once, trusted (it has entries now)
    ARRIVED = "arrived"
    #: journalctl ended on the host after delivering entries (backoff starts over)
    ENDED = "ended"
    #: journalctl ended on the host without delivering an entry
    ENDED_EMPTY = "ended_empty"


class JournalSource:
    """The journal probe's loop (see the module docstring). Sets ``signals.log_known`` once the
    log has named the port (or the engine, 30 entries in), or cannot (no entries, a failure).

    Args:
        context: the host's :class:`~probes.sources.context.SourceContext`.

    Attributes:
        cursor: the cursor of the last entry delivered (None before the first).
        reopened: times a follow was reopened because it had fallen behind (systemd#25649).
        is_open: whether a follow has been opened.
        awaiting_entries: the open follow's look (``journalctl -n 1``) found entries, and none of
            them has arrived yet (a slow host: the backlog is still on its way).
        fields: whether the host's journalctl takes ``--output-fields``: None until a look has
            told (follows ask for every field meanwhile), then True or False for good.
    """

    def __init__(self, context: SourceContext) -> None:
        self.context = context
        self.cursor: str | None = None
        self.reopened = 0
        self.is_open = False
        self.awaiting_entries = False
        self.fields: bool | None = None
        self._last_line_at = 0.0  # clock time of the last line the open follow delivered
        self.ended = StreamEnd()  # how the last follow's journalctl ended (filled by the runner)
        flag = "--user-unit" if context.spec.user_unit else "-u"
        self._unit_args = [flag, context.spec.unit]

    async def run(self) -> None:
        """Follow until cancelled: the access look until it passes, then follow after follow, each
        next :class:`Step` decided by how the last one ended."""
        ctx = self.context
        delay = ctx.cadence.retry_s
        step = Step.LOOK
        while True:
            try:
                if step is Step.LOOK:
                    if not await self._readable():
                        delay = await ctx.retry(delay)
                        continue
                    step = Step.FOLLOW
                trusted, step = step is Step.FOLLOW_TRUSTED, Step.FOLLOW
                end = await self._follow(trusted)
                if end in (FollowEnd.BEHIND, FollowEnd.ARRIVED):
                    self.reopened += 1
                    step = Step.FOLLOW_TRUSTED if end is FollowEnd.ARRIVED else Step.FOLLOW
                    delay = ctx.cadence.retry_s
                    continue
                if end is FollowEnd.ENDED:
                    delay = ctx.cadence.retry_s
                # The stream ended while the connection held (a dropped link raises ``closed``):
                # journalctl itself stopped, on the host. The host is not stale, its journal is
                # not being read: say that, in journalctl's own words when it failed, and retry
                # with backoff.
                kind = self._fail_follow()
            except ProbeError as exc:
                ctx.fail("journal", exc.kind, exc.message)
                kind = exc.kind
            ctx.signals.log_known.set()
            delay = await ctx.retry(delay, kind)

    def _fail_follow(self) -> str:
        """Fail the ``journal`` cell for a follow that ended on the host: with the access reason
        its stderr gives (:func:`~probes.sources.journal_cmd.journal_access_problem`), else, when it failed (exit status not 0),
        with its exit status and first stderr line (reason ``unreadable``); returns the kind."""
        ctx = self.context
        name, rc, err = ctx.spec.name, self.ended.returncode, self.ended.stderr
        found = access_problem(b"", err, rc, sudo=ctx.spec.sudo) if rc else None
        if found is not None:
            reason, words = found
            kind = "permission" if reason != "no_systemd" else "command"
            ctx.fail("journal", kind, f"{name}: {words}", reason)
            return kind
        if rc:
            ctx.fail("journal", "command", f"{name}: journalctl -f ended on the host {failed_words(rc, err)}; "
                     "the journal is not being followed (retrying)", "unreadable" if rc > 0 else "")
            return "command"
        ctx.fail("journal", "command", f"{name}: journalctl -f ended on the host; "
                 "the journal is not being followed (retrying)")
        return "command"

    async def _readable(self) -> bool:
        """Look once at the journal in a plain format, which (unlike ``-o json``) says when the
        user may not read it: the ``journal`` cell fails with that, or is known as read.

        Raises:
            ProbeError: the look could not be run.
        """
        ctx = self.context
        done = await ctx.runner.run(ctx.privileged(
            ["journalctl", *self._unit_args, "-n", "1", "-o", "cat", "--no-pager"]), timeout=30.0)
        problem = access_problem(done.stdout, done.stderr, done.returncode, sudo=ctx.spec.sudo)
        if problem is not None:
            reason, words = problem
            ctx.fail("journal", "permission" if reason != "no_systemd" else "command",
                     f"{ctx.spec.name}: {words}", reason)
            return False
        if done.returncode != 0:
            # A failure no access reason names (a broken journal file: "Failed to open journal:
            # Input/output error", exit 1) is no reading either: its own words, and retry.
            ctx.fail("journal", "command", f"{ctx.spec.name}: journalctl could not read the journal "
                     f"{failed_words(done.returncode, done.stderr)} (retrying)", "unreadable")
            return False
        ctx.ok("journal", first=True)  # readable: known as read even before an entry
        return True

    async def _follow(self, trusted: bool) -> FollowEnd:
        """Open one follow and read it (beside its guard) until one of them ends it.

        Args:
            trusted: the follow is known to begin with entries (a reopen after :attr:`FollowEnd.ARRIVED`);
                otherwise ``journalctl -n 1`` decides.

        Raises:
            ProbeError: the stream failed.
        """
        ctx = self.context
        since = None if self.cursor else await self.since()
        # A follow that begins with nothing to show is not trusted (systemd#25649), except right
        # after a reopen for that reason (it had entries then). The look also tells whether
        # journalctl takes --output-fields.
        if not trusted:
            found = await self.look(since)
            if found is not None:
                # The journal answered a look: it is read again now (a journal that failed and
                # came back, with no new entry to say so, is not "cannot see" any longer).
                ctx.ok("journal", first=True)
            trusted = found if found is not None else True
        argv = ctx.privileged(journal_argv(ctx.spec.unit, self.cursor, ctx.spec.backlog,
                                           since=since, user_unit=ctx.spec.user_unit,
                                           fields=READ_FIELDS if self.fields else None))
        if not trusted:
            ctx.signals.log_known.set()  # nothing in the log yet: the default port it is
        self.awaiting_entries = trusted
        self.is_open = True
        self._last_line_at = ctx.clock.now()
        reader = asyncio.ensure_future(self._read(argv, trusted))
        guard = asyncio.ensure_future(self._guard(since, trusted))
        try:
            finished, _ = await asyncio.wait({reader, guard}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, guard):
                task.cancel()
            await asyncio.wait({reader, guard}, timeout=STOP_WAIT_S)
        if reader in finished:
            return reader.result()
        return FollowEnd.BEHIND

    async def _read(self, argv: list[str], trusted: bool) -> FollowEnd:
        """Read one ``journalctl -f`` stream into the model until it ends (the remote process is
        ended when this is cancelled). A follow that is not ``trusted`` ends at its first line
        (:attr:`FollowEnd.ARRIVED`), which is not taken: it is read again by the trusted reopen.

        The lines come in batches, one per read of the stream
        (:func:`~probes.transport.runner.stream_batches`): each record is folded into the model
        in order and :attr:`cursor` follows it, and what is said once per delivery (the journal
        is OK, the model changed, the log may now name the port) is said once per batch. A batch
        is folded with no wait in between: a cancellation never leaves half of one.

        Raises:
            ProbeError: the stream failed.
        """
        ctx = self.context
        delivered = False
        self.ended = StreamEnd()
        async with contextlib.aclosing(stream_batches(ctx.runner, argv, self.ended)) as batches:  # type: ignore[type-var]
            async for batch in batches:
                if not _has_entry(batch):
                    continue
                if not trusted:
                    return FollowEnd.ARRIVED
                delivered = self._fold(batch) or delivered
        return FollowEnd.ENDED if delivered else FollowEnd.ENDED_EMPTY

    def _fold(self, batch: list[bytes]) -> bool:
        """Fold one batch of a trusted follow's lines into the model (blank lines and ``-- ``
        notes skipped; a line that is not a record kept as such); True when it held a record."""
        ctx = self.context
        now = ctx.clock.now()
        self.awaiting_entries = False
        self._last_line_at = now
        fold = ctx.fold
        records = False
        for raw in batch:
            if not _is_entry(raw):
                continue
            try:
                rec = parse_record(raw)
            except RecordError:
                ctx.fold_bad_record(raw, now)
                continue
            if rec.cursor:
                self.cursor = rec.cursor
            fold(rec)
            records = True
        if records:
            ctx.ok("journal")
        ctx.changed()
        if records:
            self._note_log_known()
        return records

    @property
    def answered(self) -> bool:
        """Whether the journal has answered once: a follow is open and, when its look found
        entries, one of them has arrived (an open follow whose backlog has not come yet has not
        answered: a verdict then would be made without the log)."""
        return self.is_open and not self.awaiting_entries

    def _note_log_known(self) -> None:
        """Set ``log_known`` once the log named the port, or the engine 30 entries in."""
        ctx = self.context
        known = ctx.signals.log_known
        if not known.is_set() and (ctx.log_reading().port is not None or (
                ctx.log_count() >= 30 and ctx.log_engine() is not None)):
            known.set()

    async def _guard(self, since: float | None, trusted: bool) -> None:
        """Return when the open ``journalctl -f`` has fallen behind the journal. A follow that is
        not ``trusted`` (it began with no entries) is given up as soon as the unit has an entry
        (looks every :data:`JOURNAL_UNTRUSTED_POLL_S`). Otherwise: after
        :data:`JOURNAL_GUARD_S` seconds without an entry, ``journalctl -n 1`` (after our cursor, or
        since the start) finds an entry, and :data:`JOURNAL_RECHECK_S` seconds later it still does
        and the stream has still delivered nothing. Failures of the look are ignored (the stream's
        own errors speak for the connection)."""
        clock = self.context.clock
        while not trusted:
            await clock.sleep(JOURNAL_UNTRUSTED_POLL_S)
            if await self.has_more(since):
                return
        while True:
            await clock.sleep(JOURNAL_GUARD_S)
            if clock.now() - self._last_line_at < JOURNAL_GUARD_S:
                continue
            seen = self._last_line_at
            if not await self.has_more(since):
                continue
            await clock.sleep(JOURNAL_RECHECK_S)
            if self._last_line_at == seen and await self.has_more(since):
                return

    async def has_more(self, since: float | None, on_error: bool = False) -> bool:
        """Whether the journal holds an entry of the unit after the cursor (or since ``since``,
        epoch seconds, or at all): :meth:`look`; a look that fails answers ``on_error``."""
        found = await self.look(since)
        return on_error if found is None else found

    async def look(self, since: float | None) -> bool | None:
        """Whether the journal holds an entry of the unit after the cursor (or since ``since``,
        epoch seconds, or at all): one ``journalctl -n 1``, which also tells :attr:`fields` (asked
        with ``--output-fields`` until refused); None when the look failed."""
        ctx = self.context
        argv = ["journalctl", *self._unit_args, "-o", "json", "-a", "--no-pager", "-n", "1"]
        if self.cursor:
            argv += ["--after-cursor", self.cursor]
        elif since is not None:
            argv.append(f"--since=@{int(since)}")
        asked = self.fields is not False
        try:
            done = await ctx.runner.run(ctx.privileged(
                [*argv, output_fields_option(READ_FIELDS)] if asked else argv), timeout=30.0)
            if asked and refuses_output_fields(done.returncode, done.stderr):
                self.fields, asked = False, False
                done = await ctx.runner.run(ctx.privileged(argv), timeout=30.0)
        except ProbeError:
            return None
        if done.returncode != 0:
            return None
        if asked:
            self.fields = True
        return any(line.lstrip().startswith(b"{") for line in done.stdout.splitlines())

    async def since(self) -> float | None:
        """When the current start began (for ``--since`` on first connect, epoch seconds): the
        unit's ``InactiveExitTimestamp`` (the activation's beginning), else
        ``ExecMainStartTimestamp``; None when unknown, and None in a restart loop (``NRestarts``
        above 0, auto-restart, or failed), where the ``backlog`` is read so the loop's earlier
        starts are seen. Waits up to :data:`UNIT_SEEN_WAIT_S` for the unit probe's first answer."""
        ctx = self.context
        if not await wait_event(ctx.signals.unit_seen, UNIT_SEEN_WAIT_S):
            return None
        u = ctx.unit()
        if u is None or u.load_state == "not-found":
            return None
        if u.n_restarts or u.sub_state == "auto-restart" or u.active_state == "failed":
            # A restart loop: every automatic restart passes through "inactive" (systemd 252,
            # measured), so InactiveExitTimestamp is only the last start. Read the backlog instead,
            # which holds the loop's earlier starts.
            return None
        t = u.inactive_exit_at or u.started_at
        return t - 1.0 if t is not None else None  # timestamps are printed in whole seconds
