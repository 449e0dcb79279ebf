"""Links and protected-state entries of appended records: what every backend writes beside them.

Shared by the SQL and in-memory stores, like ``ctxledger.store._rules``. :func:`links_of` gives the
supersession, contradiction and derivation links a record holds; :func:`entries_of` the protected-state
entries it opens; :func:`closes` which open entries it closes. An entry is closed once, by the first record
that closes it (a tool result answering a call; a later success of the same tool after a failure).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from ctxledger.facts import direct_sources
from ctxledger.records import Checkpoint, Message, Record, Role, ToolArtifact, ToolCall, ToolStatus
from ctxledger.store.base import LineageHop, ProtectedEntry, RecordLink


def links_of(rec: Record) -> list[RecordLink]:
    """The links ``rec`` holds (``supersedes``, ``conflicts_with``, ``derived_from``), each target once per relation."""
    out: list[RecordLink] = []
    for relation, targets in (
        ("supersedes", getattr(rec, "supersedes", ()) or ()),
        ("conflicts_with", getattr(rec, "conflicts_with", ()) or ()),
        ("derived_from", direct_sources(rec)),
    ):
        for target in dict.fromkeys(str(t) for t in targets):
            out.append(RecordLink(rec.id, relation, target, rec.branch_id, rec.seq))
    return out


def _tags(rec: Record) -> list[str]:
    value = rec.meta.get("tags")
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return sorted({str(v) for v in value})
    return []


def entries_of(rec: Record) -> list[ProtectedEntry]:
    """The protected-state entries ``rec`` opens (see ``store.base.PROTECTED_STATES``)."""
    out: list[ProtectedEntry] = []

    def add(state: str, subject: str) -> None:
        out.append(ProtectedEntry(rec.id, state, rec.branch_id, rec.seq, subject))

    if isinstance(rec, ToolCall):
        add("call", rec.id)
    elif isinstance(rec, ToolArtifact) and rec.status is ToolStatus.FAILED:
        add("failed_call", rec.name)
    elif isinstance(rec, Checkpoint):
        add("checkpoint", rec.run_id)
    elif isinstance(rec, Message) and rec.role in (Role.SYSTEM, Role.DEVELOPER):
        add("instruction", rec.role.value)
    tags = _tags(rec)
    if tags:
        add("tagged", ",".join(tags))
    return out


def closes(rec: Record, entry: ProtectedEntry) -> bool:
    """Whether ``rec`` (appended after ``entry``'s record) closes the open ``entry``."""
    if not isinstance(rec, ToolArtifact) or entry.closed_by is not None or rec.seq <= entry.seq:
        return False
    if entry.state == "call":
        return rec.tool_call_id == entry.subject
    return entry.state == "failed_call" and rec.status is ToolStatus.SUCCEEDED and rec.name == entry.subject


def closers(rec: Record) -> Iterator[tuple[str, str]]:
    """``(state, subject)`` of the entries ``rec`` may close (what a store looks up among open entries)."""
    if isinstance(rec, ToolArtifact):
        yield "call", rec.tool_call_id
        if rec.status is ToolStatus.SUCCEEDED:
            yield "failed_call", rec.name


def closed(entry: ProtectedEntry, by: Record) -> ProtectedEntry:
    """``entry`` closed by ``by``."""
    return ProtectedEntry(
        entry.record_id, entry.state, entry.branch_id, entry.seq, entry.subject, by.id, by.branch_id, by.seq
    )


def _within(branch_id: str, seq: int, lineage: Sequence[LineageHop] | None, as_of_seq: int | None) -> bool:
    if as_of_seq is not None and seq > as_of_seq:
        return False
    if lineage is None:
        return True
    return any(h.branch_id == branch_id and (h.max_seq is None or seq <= h.max_seq) for h in lineage)


def open_in(entry: ProtectedEntry, lineage: Sequence[LineageHop] | None, as_of_seq: int | None) -> bool:
    """Whether ``entry`` was opened and not closed in ``lineage`` as of ``as_of_seq`` (``None``: no bound)."""
    if not _within(entry.branch_id, entry.seq, lineage, as_of_seq):
        return False
    if entry.closed_by is None or entry.closed_seq is None or entry.closed_branch_id is None:
        return True
    return not _within(entry.closed_branch_id, entry.closed_seq, lineage, as_of_seq)


def link_in(link: RecordLink, lineage: Sequence[LineageHop] | None, as_of_seq: int | None) -> bool:
    """Whether the record holding ``link`` is in ``lineage`` as of ``as_of_seq``."""
    return _within(link.branch_id, link.seq, lineage, as_of_seq)


_Key = tuple[str, str, str, str]


class OpenEntries:
    """Open protected-state entries while a batch is appended: new records close them and open new ones.

    Args:
        stored: ``(tenant_id, conversation_id, entry)`` of open entries written by earlier appends (only those
            the batch may close are needed).

    After :meth:`append` of every record in order: :attr:`new` holds the batch's entries (closed ones with
    their closer) with the record that opened them; :attr:`closed_stored` the stored entries the batch
    closed, with the record that closed them.
    """

    def __init__(self, stored: Iterable[tuple[str, str, ProtectedEntry]] = ()) -> None:
        self._open: dict[_Key, list[list]] = {}  # slot = [opener record or None, entry]
        self._new: list[list] = []
        self.closed_stored: list[tuple[Record, ProtectedEntry]] = []
        for tenant_id, conversation_id, entry in stored:
            self._open.setdefault((tenant_id, conversation_id, entry.state, entry.subject), []).append([None, entry])

    def append(self, rec: Record) -> None:
        """Close what ``rec`` answers, then open ``rec``'s own entries."""
        for state, subject in closers(rec):
            slots = self._open.get((rec.tenant_id, rec.conversation_id, state, subject))
            if not slots:
                continue
            still_open = []
            for slot in slots:
                if closes(rec, slot[1]):
                    slot[1] = closed(slot[1], rec)
                    if slot[0] is None:
                        self.closed_stored.append((rec, slot[1]))
                else:
                    still_open.append(slot)
            slots[:] = still_open
        for entry in entries_of(rec):
            slot = [rec, entry]
            self._new.append(slot)
            self._open.setdefault((rec.tenant_id, rec.conversation_id, entry.state, entry.subject), []).append(slot)

    @property
    def new(self) -> list[tuple[Record, ProtectedEntry]]:
        """The entries the appended records opened, in append order, with their current state."""
        return [(slot[0], slot[1]) for slot in self._new]
