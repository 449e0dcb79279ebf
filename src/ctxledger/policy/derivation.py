"""Provenance of derived records: what a memory or compaction was made from, transitively (seed 004 §4.5, §8 R3).

A *derived* record carries the content of other records: a :class:`~ctxledger.records.ToolMemory` its
``source_artifact_ids``, a :class:`~ctxledger.records.Compaction` its ``source_ids`` (the records it covers).
Restrictions flow along that provenance, failing closed: the privacy stage holds a derived record to its own
restrictions *and* every source's (provider scope, privacy class), and the visibility stage hides it from
whoever may not see a source (a participant-private or shared source of another participant, an audit-only
source). Sources are followed transitively (a memory of a compaction of a tool result), each record at most
once, so a cycle of sources ends.

**Declaring a summary safe.** A derived record tagged ``safe_summary`` (``meta["tags"]``; the Recorder's
``tags=["safe_summary"]``) declares that its content carries none of its sources' restricted data — the seed's
*resumen seguro*, e.g. "12 unread client emails, 6 IMPORTANT; bodies not copied". Its sources' restrictions
then stop at it: only its own envelope (visibility, privacy class, provider scope) applies, and records derived
from it inherit only those. The tag is the one mechanism; nothing else lifts an inherited restriction.

The walk is made once, when the derived record is written (its sources are earlier records): the list is
part of its write-path facts (``ctxledger.facts``), and the walk below runs only for a record without them.
A source is found among the assembly's candidates (omitted or not), else through
:attr:`~ctxledger.policy.base.StageContext.find_record` (the request tenant's store). A source found nowhere
does not restrict: there is nothing left to inherit from (the validity stage reports broken provenance).
"""

from __future__ import annotations

from collections.abc import Iterator

from ctxledger.policy.decisions import StageContext
from ctxledger.policy.stages._common import tags
from ctxledger.records import Branch, Compaction, Conversation, Participant, Record, ToolMemory

SAFE_SUMMARY_TAG = "safe_summary"
"""The tag that declares a derived record free of its sources' restrictions (module docstring)."""


def direct_sources(rec: Record) -> tuple[str, ...]:
    """The ids a record was derived from: a memory's source artifacts, a compaction's covered records; else ``()``."""
    if isinstance(rec, ToolMemory):
        return tuple(rec.source_artifact_ids)
    if isinstance(rec, Compaction):
        return tuple(rec.source_ids)
    return ()


def declared_safe(rec: Record) -> bool:
    """Whether ``rec`` is tagged ``safe_summary`` (its sources' restrictions do not flow into it)."""
    return SAFE_SUMMARY_TAG in tags(rec)


def lookup(ctx: StageContext, record_id: str) -> Record | None:
    """A record by id: a candidate of the assembly, else the tenant store's (``ctx.find_record``), else ``None``."""
    found = ctx.record(record_id)
    if found is None and ctx.find_record is not None:
        found = ctx.find_record(record_id)
    return found


def restricting_sources(ctx: StageContext, rec: Record) -> Iterator[Record]:
    """Every record whose restrictions ``rec`` inherits, nearest first (breadth-first over the sources).

    Nothing when ``rec`` is declared safe or derived from nothing. A source declared safe is yielded (its own
    envelope counts) but its own sources are not followed. Each record is yielded at most once; ``rec``
    itself never is (a cycle back to it ends there). Sources found nowhere are skipped (module docstring).
    """
    stored = ctx.facts.get(rec.id)
    if stored is not None and stored.current and stored.sources_complete:
        for rid in stored.sources:  # the same walk, made when ``rec`` was written (``ctxledger.facts``)
            src = lookup(ctx, rid)
            if src is not None:
                yield src
        return
    if declared_safe(rec):
        return
    seen = {rec.id}
    queue = list(direct_sources(rec))
    while queue:
        rid = queue.pop(0)
        if rid in seen:
            continue
        seen.add(rid)
        src = lookup(ctx, rid)
        if src is None or isinstance(src, Conversation | Branch | Participant):
            continue
        yield src
        if not declared_safe(src):
            queue.extend(direct_sources(src))
