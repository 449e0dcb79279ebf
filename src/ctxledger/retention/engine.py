"""Applying retention rules to a store, and forgetting a conversation or a participant (seed 004 §4.15).

:func:`retain` walks the records old enough for some rule in pages of ``batch_size`` (keyset order
``(tenant_id, id)``), decides each record's rule (:meth:`RetentionRules.rule_for`) and applies a page's
actions in **one transaction** (:meth:`GraphStore.apply_retention`) together with their audit rows. A
killed run leaves every page either applied whole or not at all; running again skips what is done (a
record only moves to a stronger action) and finishes the rest. Blobs whose last reference went are
queued in the same transaction and deleted after it commits, only when no record of any tenant references
them; a run first collects what an earlier, killed run queued.

What one action touches, so that nothing left behind points at content that is gone without saying so:

* ``redact`` / ``hash_only``: the record's content is replaced by its notice (:mod:`ctxledger.retention.state`);
  a tool artifact's blob is queued for collection;
* ``delete``: the record is removed; a tool result goes with its call and a call with its result (a
  provider rejects a call without an answer), and an assistant message with its calls; an assistant
  message left with neither text nor calls goes too;
* memories derived from a retained artifact get a note per source (``meta["retention_sources"]``), so
  their rehydration and explanation name the rule; compactions summarising a retained record are deleted
  (the history they covered is judged afresh, retained content as its notice);
* stored manifests of the conversation that included a retained record are reduced to their summary
  (their payload held the content).

:func:`forget` removes a conversation, or a participant's records in every conversation of the tenant,
with the memories derived only from them, the assemblies that showed them and the blobs no record
references any more; the audit trail (rule ``forget``) stays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ctxledger.errors import InputError, RecordNotFound
from ctxledger.hashing import canonical_json, sha256_hex
from ctxledger.records import (
    RAW_OUTPUT_META,
    Compaction,
    Message,
    Participant,
    Record,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    blob_references,
    utcnow,
)
from ctxledger.retention.rules import DAY, Action, RetentionRules
from ctxledger.retention.state import META_KEY, SOURCES_KEY, Retained, format_at, retained
from ctxledger.retention.summary import is_summary, summarize
from ctxledger.store.base import AuditEntry, GraphStore, RetentionChange

DEFAULT_BATCH = 200
"""Records scanned per transaction by default (one page of :func:`retain`)."""

FORGET_RULE = "forget"
"""The rule name the audit trail gives a request to be forgotten."""

Key = tuple[str, str]


@dataclass(slots=True)
class RetentionReport:
    """What a retention run did (or, with ``dry_run``, would do).

    Attributes:
        dry_run: nothing was written.
        now: the clock ages were measured at.
        by_rule: rule name → action → number of records or assemblies.
        actions: every action, in order (audit rows; for a dry run, the rows it would write).
        batches: transactions committed (pages applied).
        blobs_deleted: sha256 of the blobs removed.
    """

    dry_run: bool
    now: datetime
    by_rule: dict[str, Counter[str]] = field(default_factory=dict)
    actions: list[AuditEntry] = field(default_factory=list)
    batches: int = 0
    blobs_deleted: list[str] = field(default_factory=list)

    def _add(self, entries: Iterable[AuditEntry]) -> None:
        for e in entries:
            self.actions.append(e)
            self.by_rule.setdefault(e.rule, Counter())[e.action] += 1

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (the CLI's ``--json``)."""
        return {
            "dry_run": self.dry_run,
            "now": self.now.isoformat(),
            "by_rule": {rule: dict(sorted(c.items())) for rule, c in sorted(self.by_rule.items())},
            "batches": self.batches,
            "blobs_deleted": len(self.blobs_deleted),
            "actions": [
                {
                    "tenant_id": e.tenant_id,
                    "conversation_id": e.conversation_id,
                    "target": e.target,
                    "ref": e.ref,
                    "kind": e.kind,
                    "rule": e.rule,
                    "action": e.action,
                    "before_sha256": e.before_sha256,
                    "after_sha256": e.after_sha256,
                    "detail": e.detail,
                }
                for e in self.actions
            ],
        }


def content_bytes(record: Record) -> bytes | None:
    """The bytes a record's content hash covers (``None`` for a record without content of its own).

    A message's text as UTF-8 (content parts as canonical JSON); a memory's summary and fields as
    canonical JSON. A tool artifact's bytes are its blob (its ``sha256`` names them).
    """
    if isinstance(record, Message):
        if record.content is None:
            return None
        if isinstance(record.content, str):
            return record.content.encode("utf-8")
        return canonical_json([dict(p) for p in record.content]).encode("utf-8")
    if isinstance(record, ToolMemory):
        return canonical_json({"summary": record.summary, "fields": dict(record.fields)}).encode("utf-8")
    return None


def _before(record: Record) -> tuple[str | None, int | None]:
    if isinstance(record, ToolArtifact):
        return record.sha256 or None, record.size_bytes
    data = content_bytes(record)
    return (sha256_hex(data), len(data)) if data is not None else (None, None)


def _redacted(record: Record, state: Retained) -> Record:
    """The record with its content replaced by the notice and ``meta["retention"]`` set."""
    # a raw output an importer kept beside the record holds the same content: its reference goes too
    meta = {k: v for k, v in record.meta.items() if k not in (RAW_OUTPUT_META, "raw_output_bytes")}
    meta[META_KEY] = state.as_dict()
    notice = state.notice
    if isinstance(record, Message):
        return replace(record, content=notice, meta=meta)
    if isinstance(record, ToolMemory):
        return replace(record, summary=notice, fields={}, meta=meta)
    if isinstance(record, ToolArtifact):
        size = record.size_bytes if state.size_bytes is not None else 0
        return replace(record, size_bytes=size, meta=meta)
    raise InputError(f"{record.kind.value} {record.id} holds no content retention can replace", field="kind")


class _Batch:
    """The actions of one page, planned against the records of the conversations they touch."""

    def __init__(self, store: GraphStore, now: datetime, cache: _Cache | None = None) -> None:
        self.store = store
        self.at = format_at(now)
        self.now = now
        self.rewrites: dict[Key, Record] = {}
        self.deletes: dict[Key, Record] = {}
        self.audit: list[AuditEntry] = []
        self.blobs: set[str] = set()
        self.summaries: dict[Key, dict[str, Any]] = {}
        self.forgotten: list[Key] = []
        cache = cache if cache is not None else _Cache()
        self._conversations = cache.conversations
        self._shown = cache.shown
        self._summarised = cache.summarised

    # -- reading -----------------------------------------------------------------------------------

    def _index(self, tenant_id: str, conversation_id: str) -> _Index:
        key = (tenant_id, conversation_id)
        if key not in self._conversations:
            self._conversations[key] = _Index(self.store.records(tenant_id, conversation_id))
        return self._conversations[key]

    def conversation(self, tenant_id: str, conversation_id: str) -> list[Record]:
        """The conversation's records as this batch leaves them (rewrites applied; deleted ones included)."""
        index = self._index(tenant_id, conversation_id)
        return [self.rewrites.get((r.tenant_id, r.id), index.by_id[r.id]) for r in index.records if r.id in index.by_id]

    def live(self, record: Record) -> Record | None:
        key = (record.tenant_id, record.id)
        return None if key in self.deletes else self.rewrites.get(key, record)

    def _by_id(self, rec: Record, record_id: str) -> Record | None:
        found = self._index(rec.tenant_id, rec.conversation_id).by_id.get(record_id)
        return self.live(found) if found is not None else None

    def _referring(self, rec: Record) -> list[Record]:
        """Live records of the conversation that name ``rec`` (its results, calls, memories, compactions)."""
        index = self._index(rec.tenant_id, rec.conversation_id)
        found = (index.by_id.get(rid) for rid in index.refs.get(rec.id, ()))
        live = (self.live(r) for r in found if r is not None)
        return [r for r in live if r is not None]

    def committed(self) -> None:
        """The batch was applied: later batches of the run read the cached conversations as it left them."""
        for (tenant_id, record_id), rec in self.deletes.items():
            index = self._conversations.get((tenant_id, rec.conversation_id))
            if index is not None:
                index.by_id.pop(record_id, None)
        for (tenant_id, record_id), rec in self.rewrites.items():
            index = self._conversations.get((tenant_id, rec.conversation_id))
            if index is not None and record_id in index.by_id:
                index.by_id[record_id] = rec
        self._summarised.update(self.summaries)

    # -- acting ------------------------------------------------------------------------------------

    def _entry(self, rec: Record, rule: str, action: str, after: str | None, detail: str) -> None:
        before, _ = _before(rec)
        self.audit.append(
            AuditEntry(
                rec.tenant_id,
                rec.conversation_id,
                "record",
                rec.id,
                rec.kind.value,
                rule,
                action,
                self.now,
                before,
                after,
                detail,
            )
        )

    def redact(self, rec: Record, rule: str, action: Action) -> None:
        current = self.live(rec)
        if current is None:
            return
        sha, size = _before(current)
        state = Retained(rule, action.value, self.at, sha, size if action is Action.REDACT else None)
        new = _redacted(current, state)
        self.rewrites[(rec.tenant_id, rec.id)] = new
        after = content_bytes(new) if not isinstance(new, ToolArtifact) else state.notice.encode("utf-8")
        self._entry(current, rule, action.value, sha256_hex(after) if after is not None else None, state.sentence)
        self._release_blob(current)
        self._consequences(current, state)

    def delete(self, rec: Record, rule: str, detail: str | None = None) -> None:
        current = self.live(rec)
        if current is None:
            return
        key = (rec.tenant_id, rec.id)
        self.rewrites.pop(key, None)
        self.deletes[key] = current
        state = Retained(rule, Action.DELETE.value, self.at, *_before(current)[:1])
        self._entry(current, rule, Action.DELETE.value, None, detail or state.sentence)
        self._release_blob(current)
        self._cascade(current, rule, state)
        self._consequences(current, state)

    def _release_blob(self, rec: Record) -> None:
        """Queue the blob ``rec`` references (its bytes or kept raw output) for collection once unreferenced."""
        self.blobs.update(blob_references(rec))

    def _cascade(self, rec: Record, rule: str, state: Retained) -> None:
        """A tool result goes with its call, a call with its results, a message with its calls."""
        with_it = f"{state.sentence} (with {rec.kind.value} {rec.id})"
        if isinstance(rec, ToolArtifact):
            call = self._by_id(rec, rec.tool_call_id)
            if isinstance(call, ToolCall):
                self.delete(call, rule, with_it)
        elif isinstance(rec, ToolCall):
            for other in self._referring(rec):
                if isinstance(other, ToolArtifact):
                    self.delete(other, rule, with_it)
            msg = self._by_id(rec, rec.message_id)
            if (
                isinstance(msg, Message)
                and not msg.content
                and not any(isinstance(r, ToolCall) for r in self._referring(msg))
            ):
                self.delete(msg, rule, with_it)
        elif isinstance(rec, Message):
            for call in self._referring(rec):
                if isinstance(call, ToolCall):
                    self.delete(call, rule, with_it)

    def _consequences(self, rec: Record, state: Retained) -> None:
        """Notes on derived memories, compactions dropped, manifests that showed the record summarised."""
        for other in self._referring(rec):
            if isinstance(other, ToolMemory) and other.id != rec.id:
                notes = dict(other.meta.get(SOURCES_KEY) or {})
                notes[rec.id] = state.as_dict()
                self.rewrites[(other.tenant_id, other.id)] = replace(other, meta={**other.meta, SOURCES_KEY: notes})
            elif isinstance(other, Compaction):
                self.delete(other, state.rule, f"deleted: it summarised {rec.id}, {state.sentence}")
        self._summarise_showing(rec, state)

    def _summarise_showing(self, rec: Record, state: Retained) -> None:
        key = (rec.tenant_id, rec.conversation_id)
        if key not in self._shown:
            shown: dict[str, list[dict[str, Any]]] = {}
            for manifest in self.store.list_assemblies(*key):
                if not is_summary(manifest):
                    for ref in {e.get("ref") for e in manifest.get("included", [])}:
                        shown.setdefault(str(ref), []).append(manifest)
            self._shown[key] = shown
        for manifest in self._shown[key].get(rec.id, []):
            akey = (manifest["tenant_id"], manifest["id"])
            if akey not in self.summaries and akey not in self._summarised:
                why = Retained(state.rule, "summary", state.at)
                self.summarise(manifest, why, f"reduced to its summary: it showed {rec.id}, {state.sentence}")

    def summarise(self, manifest: Mapping[str, Any], state: Retained, detail: str) -> None:
        whole = {k: v for k, v in manifest.items() if k != "observed_usage"}
        summary = summarize(whole, state)
        self.summaries[(manifest["tenant_id"], manifest["id"])] = summary
        self.audit.append(
            AuditEntry(
                manifest["tenant_id"],
                manifest["conversation_id"],
                "assembly",
                manifest["id"],
                "assembly",
                state.rule,
                "summary",
                self.now,
                _manifest_sha(whole),
                _manifest_sha(summary),
                detail,
            )
        )

    def change(self, delete_assemblies: Iterable[Key] = ()) -> RetentionChange:
        return RetentionChange(
            rewrite=tuple(r for k, r in self.rewrites.items() if k not in self.deletes),
            delete=tuple(self.deletes),
            conversations=tuple(self.forgotten),
            assemblies=tuple(self.summaries.values()),
            delete_assemblies=tuple(delete_assemblies),
            audit=tuple(self.audit),
            blobs=tuple(sorted(self.blobs)),
        )


@dataclass(slots=True)
class _Cache:
    """What the batches of one run share: conversations read once, manifests by what they showed."""

    conversations: dict[Key, _Index] = field(default_factory=dict)
    shown: dict[Key, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    summarised: dict[Key, dict[str, Any]] = field(default_factory=dict)


class _Index:
    """One conversation's records by id, and which records name which (``refs``: id → ids naming it)."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_id = {r.id: r for r in records}
        self.refs: dict[str, list[str]] = {}
        for r in records:
            for target in _names(r):
                self.refs.setdefault(target, []).append(r.id)


def _names(rec: Record) -> set[str]:
    """Ids a record refers to: a memory's sources, a compaction's, a call's message, a result's call."""
    if isinstance(rec, ToolMemory):
        return _memory_sources(rec)
    if isinstance(rec, Compaction):
        return set(rec.source_ids)
    if isinstance(rec, ToolCall):
        return {rec.message_id}
    if isinstance(rec, ToolArtifact):
        return {rec.tool_call_id}
    return set()


def _memory_sources(mem: ToolMemory) -> set[str]:
    return set(mem.source_artifact_ids) | {
        str(loc.get("artifact_id")) for loc in mem.locators if loc.get("artifact_id")
    }


def _manifest_sha(manifest: Mapping[str, Any]) -> str:
    return sha256_hex(canonical_json(manifest).encode("utf-8"))


def _commit(
    store: GraphStore, batch: _Batch, report: RetentionReport, dry_run: bool, extra: Iterable[Key] = ()
) -> None:
    change = batch.change(extra)
    report._add(change.audit)
    if dry_run or not change.audit:
        return
    store.apply_retention(change)
    batch.committed()
    report.batches += 1
    _collect(store, report)


def _collect(store: GraphStore, report: RetentionReport) -> None:
    while True:
        gone = store.collect_blobs()
        report.blobs_deleted += gone
        if not gone:
            return


def retain(
    store: GraphStore,
    rules: RetentionRules,
    *,
    now: datetime | None = None,
    tenant_id: str | None = None,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Callable[[int], None] | None = None,
) -> RetentionReport:
    """Apply ``rules`` to the store (one tenant, or all) in transactions of ``batch_size`` scanned records.

    Args:
        store: the graph store.
        rules: the policy's retention rules (``policy.retention``).
        now: the clock ages are measured at (aware UTC; default now).
        tenant_id: only this tenant (default every tenant).
        dry_run: plan every action and report it, write nothing (the plan is the one a real run makes).
        batch_size: records scanned per transaction (>= 1).
        on_progress: called with the number of records scanned so far after each page.

    Returns:
        The :class:`RetentionReport` (``by_rule``: rule → action → count).

    Raises:
        InputError: ``batch_size`` < 1 or a naive ``now``.
    """
    now = _clock(now)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an integer >= 1, got {batch_size!r}", field="batch_size")
    run = _Run(store, now, dry_run)
    if not dry_run:
        _collect(store, run.report)
    if rules.kinds:
        _retain_records(run, rules, tenant_id, batch_size, on_progress)
    if rules.assemblies.active:
        _retain_assemblies(run, rules, tenant_id, batch_size)
    run.finish()
    return run.report


class _Run:
    """One retention run: a batch per page, committed page by page; a dry run keeps one batch throughout.

    A dry run writes nothing, so later pages must see what earlier pages planned (a call deleted on page 1
    leaves its message bare on page 2): its single batch carries the whole plan.
    """

    def __init__(self, store: GraphStore, now: datetime, dry_run: bool) -> None:
        self.store = store
        self.now = now
        self.dry_run = dry_run
        self.report = RetentionReport(dry_run=dry_run, now=now)
        self.cache = _Cache()
        self.batch = _Batch(store, now, self.cache)
        self.gone: list[Key] = []

    def page_done(self) -> None:
        if self.dry_run:
            return
        self.finish()
        self.batch = _Batch(self.store, self.now, self.cache)
        self.gone = []

    def finish(self) -> None:
        _commit(self.store, self.batch, self.report, self.dry_run, self.gone)


def _clock(now: datetime | None) -> datetime:
    if now is None:
        return utcnow()
    if now.tzinfo is None or now.utcoffset() is None:
        raise InputError("now must be an aware datetime (UTC)", field="now")
    return now


def _retain_records(
    run: _Run,
    rules: RetentionRules,
    tenant_id: str | None,
    batch_size: int,
    on_progress: Callable[[int], None] | None,
) -> None:
    after: Key | None = None
    scanned = 0
    while True:
        cutoff = run.now - rules.min_age
        page = run.store.retention_scan(rules.kinds, cutoff, tenant_id=tenant_id, after=after, limit=batch_size)
        if not page:
            return
        after = (page[-1].tenant_id, page[-1].id)
        scanned += len(page)
        for stored in page:
            rec = run.batch.live(stored)
            rule = rules.rule_for(stored, run.now)
            if rec is None or rule is None or rule.action == Action.KEEP:
                continue
            action = Action(rule.action)
            state = retained(rec)
            done = Action(state.action).level if state is not None and state.action in _ACTIONS else 0
            if action.level <= done or (action is not Action.DELETE and _before(rec)[0] is None):
                continue
            if action is Action.DELETE:
                run.batch.delete(rec, rule.name)
            else:
                run.batch.redact(rec, rule.name, action)
        run.page_done()
        if on_progress is not None:
            on_progress(scanned)


_ACTIONS = {a.value for a in Action}


def _retain_assemblies(run: _Run, rules: RetentionRules, tenant_id: str | None, batch_size: int) -> None:
    schedule = rules.assemblies
    horizon = min(d for d in (schedule.whole_days, schedule.summary_days) if d is not None)
    after: Key | None = None
    at = format_at(run.now)
    while True:
        page = run.store.assemblies_scan(run.now - DAY * horizon, tenant_id=tenant_id, after=after, limit=batch_size)
        if not page:
            return
        after = (page[-1]["tenant_id"], page[-1]["id"])
        for manifest in page:
            key = (manifest["tenant_id"], manifest["id"])
            age = run.now - datetime.fromisoformat(str(manifest["created_at"]))
            if schedule.summary_days is not None and age >= DAY * schedule.summary_days:
                run.gone.append(key)
                run.batch.audit.append(
                    AuditEntry(
                        key[0],
                        manifest["conversation_id"],
                        "assembly",
                        key[1],
                        "assembly",
                        "assemblies.summary_days",
                        "delete",
                        run.now,
                        _manifest_sha(manifest),
                        None,
                        f"deleted by retention rule assemblies.summary_days at {at}",
                    )
                )
            elif (
                schedule.whole_days is not None
                and age >= DAY * schedule.whole_days
                and not is_summary(manifest)
                and key not in run.batch.summaries
            ):
                state = Retained("assemblies.whole_days", "summary", at)
                run.batch.summarise(
                    manifest, state, f"manifest reduced to its summary by retention rule assemblies.whole_days at {at}"
                )
        run.page_done()


def forget(
    store: GraphStore,
    *,
    tenant_id: str,
    conversation_id: str | None = None,
    participant_id: str | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> RetentionReport:
    """Remove a conversation, or a participant's records in every conversation of the tenant.

    With them go the memories derived only from them (a memory with other, surviving sources keeps a note
    naming what was forgotten), the assemblies of the conversation or that showed the participant's records,
    and the blobs no record of any tenant references any more. One transaction; the audit trail (rule
    ``forget``, one row per record and assembly) stays.

    Raises:
        InputError: neither or both of ``conversation_id`` and ``participant_id`` given.
        RecordNotFound: no such conversation in the tenant.
    """
    if (conversation_id is None) == (participant_id is None):
        raise InputError("forget one conversation_id or one participant_id", field="conversation_id")
    now = _clock(now)
    report = RetentionReport(dry_run=dry_run, now=now)
    batch = _Batch(store, now)
    if conversation_id is not None:
        _forget_conversation(store, batch, tenant_id, conversation_id)
    else:
        assert participant_id is not None
        _forget_participant(store, batch, tenant_id, participant_id)
    _commit(store, batch, report, dry_run)
    return report


def _forget_conversation(store: GraphStore, batch: _Batch, tenant_id: str, conversation_id: str) -> None:
    if store.head_seq(tenant_id, conversation_id) == 0:
        raise RecordNotFound(tenant_id, conversation_id, what="conversation")
    gone = batch.conversation(tenant_id, conversation_id)
    sentence = Retained(FORGET_RULE, "delete", batch.at).sentence
    for rec in gone:
        batch.deletes[(rec.tenant_id, rec.id)] = rec
        batch._entry(rec, FORGET_RULE, "delete", None, sentence)
        batch._release_blob(rec)
    for manifest in store.list_assemblies(tenant_id, conversation_id):
        batch.audit.append(
            AuditEntry(
                tenant_id,
                conversation_id,
                "assembly",
                manifest["id"],
                "assembly",
                FORGET_RULE,
                "delete",
                batch.now,
                _manifest_sha(manifest),
                None,
                sentence,
            )
        )
    batch.forgotten.append((tenant_id, conversation_id))
    _derived_elsewhere(store, batch, tenant_id, {r.id for r in gone}, skip={conversation_id})


def _forget_participant(store: GraphStore, batch: _Batch, tenant_id: str, participant_id: str) -> None:
    for conv in store.conversations(tenant_id):
        for rec in batch.conversation(tenant_id, conv):
            owned = rec.owner_participant_id == participant_id
            if (owned or (isinstance(rec, Participant) and rec.id == participant_id)) and batch.live(rec) is not None:
                batch.delete(rec, FORGET_RULE)
    gone = {k[1] for k in batch.deletes}
    _derived_elsewhere(store, batch, tenant_id, gone, skip=set())
    for conv in store.conversations(tenant_id):
        for manifest in store.list_assemblies(tenant_id, conv):
            akey = (tenant_id, manifest["id"])
            shown = {e.get("ref") for e in manifest.get("included", [])} & {k[1] for k in batch.deletes}
            if (shown or manifest.get("participant_id") == participant_id) and akey not in batch.summaries:
                batch.summarise(
                    manifest,
                    Retained(FORGET_RULE, "summary", batch.at),
                    f"reduced to its summary: it showed "
                    f"records of participant {participant_id}, {Retained(FORGET_RULE, 'delete', batch.at).sentence}",
                )


def _derived_elsewhere(store: GraphStore, batch: _Batch, tenant_id: str, gone: set[str], skip: set[str]) -> None:
    """Memories derived only from forgotten records go; ones with other sources keep a note."""
    for conv in store.conversations(tenant_id):
        if conv in skip:
            continue
        for rec in batch.conversation(tenant_id, conv):
            if not isinstance(rec, ToolMemory) or batch.live(rec) is None:
                continue
            sources = _memory_sources(rec)
            if sources and sources <= gone:
                batch.delete(
                    rec, FORGET_RULE, f"deleted: derived only from forgotten records ({', '.join(sorted(sources))})"
                )
