"""Snapshot and fork points that would cut a tool exchange written whole.

A tool exchange is an assistant message, its :class:`~ctxledger.records.ToolCall` records and their
:class:`~ctxledger.records.ToolArtifact` results. Every writer of this package writes the message and its calls
in one append, and the results too when it has them (the importers; ``Recorder.tool_call`` with an output,
``Recorder.tool_calls``, ``Recorder.record_response`` with known results). Such an artifact is marked with
``meta["written_with_call"] = True`` (:func:`mark_whole_exchanges`, called on every ``Ledger.append`` and import).

A point ``seq`` *cuts* an exchange when

* an assistant message is at or before ``seq`` and one of its calls after it (the message would be sent without
  the calls it made), or
* a call is at or before ``seq`` and its result, written in the same append, after it: the store never held the
  call without its result, so a snapshot there would show a call as unanswered that never was.

Such a snapshot (``as_of_seq``) or fork point (``fork_after`` / ``fork_seq``) is refused with an
:class:`~ctxledger.errors.InputError` naming the field and the exchange's boundaries; it is not moved, because
the caller asked for an exact point. A call whose result came in a later append (a pending or deferred call)
was really open at the points in between: those stay valid, which keeps every stored assembly replayable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ctxledger.records import Message, Record, ToolArtifact, ToolCall
from ctxledger.store._rules import get_or_none, visible_at
from ctxledger.store.base import GraphStore, LineageHop

WRITTEN_WITH_CALL = "written_with_call"
"""``ToolArtifact.meta`` key: the result was appended in the same transaction as its call."""


@dataclass(frozen=True, slots=True)
class ExchangeCut:
    """A tool exchange that a point cuts: its first record's ``seq`` and the ``seq`` of its last record."""

    message_id: str
    first_seq: int
    last_seq: int
    what: str

    def advice(self, seq: int) -> str:
        """The sentence an error gives: what is cut and which points are valid instead."""
        before = f"{self.first_seq - 1} or earlier" if self.first_seq > 1 else "none before it"
        return (
            f"seq {seq} is inside the tool exchange of {self.message_id} (seq {self.first_seq}-{self.last_seq}): "
            f"{self.what}; use {self.last_seq} (after the exchange) or {before} (before it)"
        )


def mark_whole_exchanges(records: Sequence[Record]) -> list[Record]:
    """``records`` with every artifact whose call is in the same batch marked ``written_with_call``."""
    calls = {r.id for r in records if isinstance(r, ToolCall)}
    out: list[Record] = []
    for rec in records:
        if isinstance(rec, ToolArtifact) and rec.tool_call_id in calls and not rec.meta.get(WRITTEN_WITH_CALL):
            rec = dataclasses.replace(rec, meta={**rec.meta, WRITTEN_WITH_CALL: True})
        out.append(rec)
    return out


def exchange_cut(
    store: GraphStore, tenant_id: str, conversation_id: str, lineage: Sequence[LineageHop], seq: int
) -> ExchangeCut | None:
    """The tool exchange ``seq`` cuts in ``lineage``, or ``None`` (see the module docstring).

    Reads the record right after ``seq``, the calls still open at ``seq`` (the protected-state index) and the
    records of a cut exchange, never the history.
    """
    following = store.records(tenant_id, conversation_id, lineage=lineage, after_seq=seq, as_of_seq=seq + 1)
    nxt = following[0] if following else None
    if isinstance(nxt, ToolCall):
        message = get_or_none(store, tenant_id, nxt.message_id)
        if isinstance(message, Message) and message.seq <= seq:
            return _cut(store, message, lineage, "its tool calls come after it")
    protected = getattr(store, "protected", None)
    if protected is None:
        return None
    for entry in protected(tenant_id, conversation_id, lineage=lineage, as_of_seq=seq):
        if entry.state != "call" or entry.closed_by is None or entry.closed_seq is None:
            continue
        if not visible_at(entry.closed_branch_id, entry.closed_seq, lineage):
            continue
        result = get_or_none(store, tenant_id, entry.closed_by)
        if not isinstance(result, ToolArtifact) or not result.meta.get(WRITTEN_WITH_CALL):
            continue
        call = get_or_none(store, tenant_id, entry.record_id)
        message = get_or_none(store, tenant_id, call.message_id) if isinstance(call, ToolCall) else None
        what = f"call {entry.record_id} was written with its result {result.id}"
        if isinstance(message, Message):
            return _cut(store, message, lineage, what, end=result.seq)
        return ExchangeCut(entry.record_id, entry.seq, result.seq, what)
    return None


SPAN_PAGE = 32
"""Records read per step while finding where a cut exchange ends."""


def _cut(store: GraphStore, message: Message, lineage: Sequence[LineageHop], what: str, end: int = 0) -> ExchangeCut:
    """The cut of ``message``'s exchange: it ends at the last of its calls and their results that follow it.

    ``end``: a result of the exchange known to be part of it (the span never ends before it).
    """
    calls: set[str] = set()
    after = message.seq
    end = max(end, after)
    while True:
        page = store.records(
            message.tenant_id, message.conversation_id, lineage=lineage, after_seq=after, as_of_seq=after + SPAN_PAGE
        )
        for rec in page:
            if isinstance(rec, ToolCall) and rec.message_id == message.id:
                calls.add(rec.id)
            elif not (isinstance(rec, ToolArtifact) and rec.tool_call_id in calls):
                return ExchangeCut(message.id, message.seq, end, what)
            end = max(end, rec.seq)
        if not page:
            return ExchangeCut(message.id, message.seq, end, what)
        after = page[-1].seq
