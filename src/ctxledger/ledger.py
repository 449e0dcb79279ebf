"""The facade: one object that records history, assembles contexts and explains them.

Typical use::

    from ctxledger import Ledger

    ledger = Ledger.open("sqlite:///agent.db")
    ledger.import_messages(messages, tools=tools, conversation_id="chat-1")
    asm = ledger.assemble("chat-1", window_tokens=16_000, output_tokens=1_000)
    client.chat.completions.create(**asm.payload)          # the provider payload
    ledger.record_usage(asm.id, usage.prompt_tokens, usage.completion_tokens)
    ledger.explain(asm.id, "chat-1/7")                      # why was this in (or out)?

The facade owns a :class:`~ctxledger.assemble.snapshot.SnapshotLoader`, so repeated assemblies of a
growing conversation only read and index what was appended since the last one.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxledger._collector import collector_paused
from ctxledger.assemble import stability
from ctxledger.assemble.assembler import Assembly, AssemblyRequest, assemble, unit_turn_costs
from ctxledger.assemble.costing import Coster, SerializerCoster
from ctxledger.assemble.represent import Ladder, reach
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.assemble.version import ASSEMBLER_VERSION
from ctxledger.budget import MAX_TOKENS
from ctxledger.conversation_ids import check_new_conversations
from ctxledger.errors import ConfigurationError, ContentRetained, CtxledgerError, InputError, RecordNotFound
from ctxledger.exchange_cuts import exchange_cut, mark_whole_exchanges
from ctxledger.explain_tools import (
    check_ref,
    explain_after_snapshot,
    explain_skill_state,
    never_a_candidate,
    ref_candidates,
    resolve_ref,
)
from ctxledger.manifest import explain, has_full_trace
from ctxledger.policy.base import Policy
from ctxledger.policy.default import default_policy
from ctxledger.policy.message_redaction import shown
from ctxledger.policy.secrets import check_identifiers
from ctxledger.records import Branch, Compaction, Conversation, Record
from ctxledger.replay_mismatch import ReplayMismatch, relevance_mismatch, replay_remedy, retention_mismatch
from ctxledger.represent.compaction import Compactor
from ctxledger.retention.state import retained
from ctxledger.serialize import default_model, get_serializer
from ctxledger.store.base import GraphStore
from ctxledger.tokens import TokenCounter, counter_for_model

if TYPE_CHECKING:
    from ctxledger.recorder import Recorder
    from ctxledger.retention.engine import RetentionReport
    from ctxledger.retention.rules import RetentionRules
    from ctxledger.store.base import AuditEntry

DEFAULT_URL = "sqlite:///.ctxledger/ctxledger.db"
"""Where the embedded default store lives (relative to the working directory)."""


def default_url() -> str:
    """The store URL from ``CTXLEDGER_URL``, else :data:`DEFAULT_URL`."""
    return os.environ.get("CTXLEDGER_URL", DEFAULT_URL)


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One conversation of a tenant, as :meth:`Ledger.conversations` lists it.

    Attributes:
        id: the conversation id.
        events: records written to it (its last ``seq``; records retention deleted keep their numbers and count).
        title: its title (``""`` when it has none).
    """

    id: str
    events: int
    title: str


class Ledger:
    """Records an agent's history and assembles budgeted, explained contexts from it.

    Args:
        store: an open :class:`GraphStore`.
        policy: the policy to assemble under (default: :func:`default_policy`).
        counter: the token counter; default: chosen per request from the model name
            (:func:`ctxledger.tokens.get_counter`).
        request_defaults: :class:`AssemblyRequest` fields applied to every :meth:`assemble` call unless
            the call names them (e.g. a service's ``scope`` ``{"app": …, "user_id": …}`` or ``provider``).
    """

    def __init__(
        self,
        store: GraphStore,
        *,
        policy: Policy | None = None,
        counter: TokenCounter | None = None,
        request_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.policy = policy or default_policy()
        self.counter = counter
        self.request_defaults = dict(request_defaults or {})
        self.snapshots = SnapshotLoader(store)
        self.ladder = _ladder(store)
        """The representation ladder (its option cache lives as long as the ledger; rungs are kept in the store)."""
        self._costers: dict[tuple[str, str], Coster] = {}
        self._conversations: OrderedDict[tuple[Any, ...], tuple[int, list[Record]]] = OrderedDict()
        self._main_branches: dict[tuple[str, str], str] = {}
        self._policies: OrderedDict[str, Policy] = OrderedDict()
        """Policies assembled with in this process, by the hash their manifests record (for replays)."""

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        blobs_dir: str | os.PathLike[str] | None = None,
        create: bool = True,
        **kwargs: Any,
    ) -> Ledger:
        """Open (and migrate) the store at ``url`` (default :func:`default_url`) and wrap it.

        Args:
            url: the store URL (``sqlite:///…``, ``postgresql+psycopg://…``, ``memory://``).
            blobs_dir: where raw tool outputs (blobs) live: a folder, ``"database"`` (inside the store's
                own database) or a ``postgresql+psycopg://`` URL; default ``CTXLEDGER_BLOBS`` if set, else
                the backend's default (the folder ``<db>.blobs`` next to a SQLite file; inside the
                database for PostgreSQL, so every process and host sees the same blobs).
            create: make a SQLite file that does not exist, with its missing folders (default, as
                ``ctxledger import`` does); ``False`` refuses it and creates nothing (as the CLI's reading
                commands do), so a mistyped path to an existing store fails instead of opening an empty one.
            **kwargs: passed to :class:`Ledger` (``policy=`` …).

        Raises:
            ConfigurationError: unknown URL scheme or missing driver extra, or (``create=False``) no SQLite file
                at the path.
            StoreConnectionError: the database cannot be reached.
        """
        from ctxledger.store import open_store

        blobs = blobs_dir if blobs_dir is not None else os.environ.get("CTXLEDGER_BLOBS") or None
        return cls(open_store(url or default_url(), blobs_dir=blobs, create=create), **kwargs)

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def __enter__(self) -> Ledger:
        """Use as a context manager; closes the store on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        self.close()

    def conversations(self, tenant_id: str = "default") -> list[ConversationSummary]:
        """The tenant's conversations, oldest first, with their events and titles (``ctxledger conversations``)."""
        out = []
        for cid in self.store.conversations(tenant_id):
            head = self.store.get(tenant_id, cid)
            out.append(ConversationSummary(cid, self.store.head_seq(tenant_id, cid), str(getattr(head, "title", ""))))
        return out

    # -- recording ---------------------------------------------------------------------------------

    def append(self, records: Sequence[Record]) -> list[Record]:
        """Append records in one transaction; return them with ``seq`` assigned (see ``GraphStore.append``).

        A :class:`~ctxledger.records.ToolArtifact` names its raw bytes by sha256; put them first with
        ``ledger.store.blobs.put(data)`` (its ``sha256`` and ``size_bytes`` go on the artifact).

        An artifact appended together with its call is marked ``meta["written_with_call"]``: no snapshot or fork
        may fall between them (:mod:`ctxledger.exchange_cuts`).

        Raises:
            InputError: names the record index and field: a duplicate id, an unknown conversation, or a
                tool artifact whose ``sha256`` is not in the blob store, an id or participant name holding a
                secret, a branch whose ``fork_seq`` cuts a tool exchange, a new conversation whose id is empty,
                a record's id or nests with another conversation's (:mod:`ctxledger.conversation_ids`).
                Nothing is written.
        """
        check_identifiers(records)
        check_new_conversations(self.store, records, source="<api>")
        for index, record in enumerate(records):
            if isinstance(record, Branch) and record.parent_branch_id is not None and isinstance(record.fork_seq, int):
                self.check_fork_point(
                    record.tenant_id, record.conversation_id, record.parent_branch_id, record.fork_seq, index=index
                )
        return self.store.append(mark_whole_exchanges(records))

    def check_fork_point(
        self,
        tenant_id: str,
        conversation_id: str,
        parent_branch_id: str,
        fork_seq: int,
        *,
        field: str = "fork_seq",
        source: str = "<api>",
        index: int | None = None,
    ) -> None:
        """Refuse a fork of ``parent_branch_id`` after ``fork_seq`` that would cut a tool exchange written whole.

        Raises:
            InputError: names ``field`` and the exchange's boundaries (:mod:`ctxledger.exchange_cuts`).
        """
        try:
            lineage = self.store.lineage(tenant_id, parent_branch_id)
        except RecordNotFound:
            return  # the store's append rules refuse an unknown parent
        cut = exchange_cut(self.store, tenant_id, conversation_id, lineage, fork_seq)
        if cut is not None:
            raise InputError(
                f"a branch forked there would cut a tool exchange: {cut.advice(fork_seq)}",
                source=source,
                index=index,
                field=field,
            )

    def recorder(
        self,
        conversation_id: str,
        tenant_id: str = "default",
        clock: datetime | Callable[[], datetime] | None = None,
        **kwargs: Any,
    ) -> Recorder:
        """A :class:`~ctxledger.recorder.Recorder` that writes a live agent's history of ``conversation_id``.

        The conversation (with its main branch) is created on first use and continued when it exists.

        Args:
            conversation_id: the conversation.
            tenant_id: its tenant.
            clock: ``None`` (current UTC time per record), a callable returning aware datetimes, or an aware
                start datetime for a reproducible stepping clock (``step=`` per record, default 1 s).
            **kwargs: ``step``, ``title`` and ``create`` (see :class:`~ctxledger.recorder.Recorder`).

        Raises:
            ConfigurationError: a naive or unusable ``clock``.
            InputError: an empty or unusable ``conversation_id`` (one that is another record's id, or nests with another
                conversation's: :mod:`ctxledger.conversation_ids`) or an empty ``tenant_id``.
        """
        from ctxledger.recorder import Recorder

        return Recorder(self, conversation_id, tenant_id, clock, **kwargs)

    def import_file(
        self,
        path: str | Path,
        fmt: str = "auto",
        *,
        tenant_id: str = "default",
        conversation_id: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        count_tokens_for: str | None = "gpt-4o",
        counter: str | None = None,
        start_time: datetime | None = None,
    ) -> Any:
        """Import a transcript or trajectory file: parse and validate all of it, then write it in one transaction.

        Token counts of the imported turns are computed on the way for ``count_tokens_for`` (a model
        name; ``None`` skips), with ``counter`` if given (see :meth:`assemble`), and cached in the
        store, so the first assembly is warm.

        Records without a timestamp of their own (OpenAI and Anthropic messages carry none) take the last one
        seen before them, else ``start_time + n`` seconds (``n`` their position; an aware datetime). The
        default ``None`` is the fixed ``ctxledger.ingest.BASE_TIME`` (2024-01-01 UTC), so importing a file
        twice gives the same records; pass ``datetime.now(UTC)`` when retention rules by age
        (``after_days``) should count from the import.

        Returns:
            :class:`ctxledger.ingest.ImportResult`.

        Raises:
            InputError: invalid input (names file, record index and field); nothing was written.
            ConfigurationError: ``count_tokens_for`` has no known tokenizer and no ``counter`` was given;
                checked before anything is written.
        """
        from ctxledger.ingest import check_batch, parse_file, write_batch

        coster = self.coster("openai-chat", count_tokens_for, counter) if count_tokens_for else None
        with collector_paused():  # what the import builds stays alive to its end (see ctxledger._collector)
            batch = parse_file(
                path,
                fmt,
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                on_progress=on_progress,
                start_time=start_time,
            )
            if coster is not None:  # counted before the write: a count that fails leaves nothing written
                check_batch(self.store, batch)
                self.warm_counts(batch, coster)
            return write_batch(self.store, batch)

    def import_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        api: str = "openai-chat",
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tenant_id: str = "default",
        conversation_id: str | None = None,
        start_time: datetime | None = None,
    ) -> Any:
        """Import in-memory provider messages (OpenAI Chat Completions, OpenAI Responses or Anthropic Messages form).

        ``start_time`` dates the messages as in :meth:`import_file` (default: the fixed 2024-01-01 UTC base).

        OpenAI form (``api="openai-chat"``, the default) carries the system prompt as a message; the
        Anthropic form (``api="anthropic-messages"``) takes it as ``system=`` (a string or text blocks),
        as the Messages API does; the Responses form (``api="openai-responses"``) takes input items as
        ``messages`` and the instructions as ``system=`` (a string).

        Raises:
            InputError: invalid messages (names the index and field); nothing was written.
        """
        from ctxledger.ingest import parse_anthropic, parse_openai_messages, parse_openai_responses, write_batch

        if system and api == "openai-chat":
            raise ConfigurationError("system= is for api='anthropic-messages'; OpenAI form carries it as a message")

        if api == "openai-chat":
            batch = parse_openai_messages(
                messages, tools, tenant_id=tenant_id, conversation_id=conversation_id, start_time=start_time
            )
        elif api == "anthropic-messages":
            payload: dict[str, Any] = {"messages": list(messages)}
            if system:
                payload["system"] = system if isinstance(system, str) else list(system)
            if tools:
                payload["tools"] = list(tools)
            batch = parse_anthropic(
                payload, tenant_id=tenant_id, conversation_id=conversation_id, start_time=start_time
            )
        elif api == "openai-responses":
            request: dict[str, Any] = {"input": list(messages)}
            if system:
                request["instructions"] = system
            if tools:
                request["tools"] = list(tools)
            batch = parse_openai_responses(
                request, tenant_id=tenant_id, conversation_id=conversation_id, start_time=start_time
            )
        else:
            raise ConfigurationError(
                f"unknown api {api!r}; use 'openai-chat', 'openai-responses' or 'anthropic-messages'"
            )
        return write_batch(self.store, batch)

    def warm_counts(self, batch: Any, coster: Coster) -> None:
        """Count every turn of a parsed import batch once and cache the counts in the store (one round trip).

        Counted from the batch (:class:`ctxledger.ingest.ImportBatch`), not from the store, so an import can count
        before it writes; the first assembly after the import then finds every count stored. The counts are tokens of
        ``coster``'s counter with its serializer's framing (:class:`~ctxledger.assemble.costing.Coster`), keyed by turn.

        Raises:
            InputError: a turn its serializer cannot send (names the turn and field); nothing of the batch is written.
        """
        from ctxledger.units import build_units

        turns = []
        for conv in batch.conversations:
            blobs = conv.blobs
            units, _ = build_units(conv.records, lambda sha, blobs=blobs: blobs[sha][0])
            turns.extend(t for u in units for t in u.turns)
        coster.prefetch(turns)

    # -- assembling --------------------------------------------------------------------------------

    def coster(
        self, api: str, model: str, counter: str | TokenCounter | None = None, *, recall: bool = False
    ) -> Coster:
        """The (cached) coster for an API contract and model: serializer framing + a token counter.

        The counter is ``counter`` (a name :func:`ctxledger.tokens.get_counter` accepts, or a counter),
        else the ledger's, else the model's own tokenizer (:func:`ctxledger.tokens.counter_for_model`).
        ``recall``: the serializer's text names the ``recall`` tool (a policy with ``recall_tool = true``).

        Raises:
            ConfigurationError: unknown ``api`` or counter name, or a model with no known tokenizer
                and no counter (the message lists the counter names).
        """
        if counter is None:
            counter = self.counter
        chosen = counter_for_model(model, counter) if counter is None or isinstance(counter, str) else counter
        key = (api, chosen.id, recall)
        if key not in self._costers:
            self._costers[key] = SerializerCoster(get_serializer(api, recall=recall), chosen, self.store)
        return self._costers[key]

    def assemble(
        self,
        conversation_id: str | AssemblyRequest,
        *,
        tenant_id: str = "default",
        persist: bool = True,
        policy: Policy | None = None,
        coster: Coster | None = None,
        counter: str | TokenCounter | None = None,
        trace: str = "summary",
        **request: Any,
    ) -> Assembly:
        """Assemble the context of the next model call and (by default) persist its manifest.

        Args:
            conversation_id: the conversation, or a complete :class:`AssemblyRequest`.
            tenant_id: the tenant.
            persist: store the manifest (needed for ``explain`` and ``record_usage`` later).
            policy: override the ledger's policy for this call.
            coster: override how turns are costed (e.g. :class:`~ctxledger.assemble.costing.FixedCoster`).
            counter: the tokenizer to count with, by name (``"o200k_base"``, ``"cl100k_base"``,
                ``"estimate/quicktok/o200k_base"``, ``"chars/4"`` …; see :func:`ctxledger.tokens.get_counter`)
                or as a counter; default the ledger's, else the model's own. Needed for a model whose
                tokenizer is not known (``model="llama-3.1-70b"``), which is otherwise refused.
            trace: ``"summary"`` persists the manifest record (included items, budget, request, omissions
                summarised by reason and stage, notable omissions); ``"full"`` also persists every omitted
                candidate, decision and mark, and the payload. Either way the returned assembly's
                ``manifest`` reads the full trace in process, and :meth:`explain` answers for any record.
            **request: other :class:`AssemblyRequest` fields (``window_tokens``, ``output_tokens``,
                ``margin_tokens``, ``api``, ``model``, ``branch_id``, ``as_of_seq``, ``participant_id``,
                ``query``, ``tools``, ``provider``, ``scope``, ``agent``, ``call_type``, ``phase``,
                ``checks_passed``, ``now``, ``exact_evidence``, ``source_versions``).

        Raises:
            RequiredBlocksDoNotFit, ConfigurationError, RecordNotFound: see :func:`assemble`; also
                ConfigurationError for a model with no known tokenizer and no ``counter`` (it lists the
                counter names).
        """
        req = self._request(conversation_id, tenant_id, request)
        return self._assemble(req, persist=persist, policy=policy, coster=coster, counter=counter, trace=trace)

    def _assemble(
        self,
        req: AssemblyRequest,
        *,
        persist: bool,
        policy: Policy | None,
        coster: Coster | None,
        counter: str | TokenCounter | None,
        trace: str,
        recorded_prefix: stability.RecordedPrefix | None = None,
    ) -> Assembly:
        """:meth:`assemble` of a built request; a replay passes what the stored manifest's ``prefix`` recorded."""
        with collector_paused():  # what an assembly makes dies with it, unwalked (see ctxledger._collector)
            _check_snapshot(req.as_of_seq)
            req.budget()  # the arguments are checked before anything is read (ConfigurationError: see Budget)
            head = self.store.head_seq(req.tenant_id, req.conversation_id)
            if head == 0:
                raise RecordNotFound(req.tenant_id, req.conversation_id, what="conversation")
            branch = req.branch_id or self._main_branch(req.tenant_id, req.conversation_id)
            if req.branch_id is not None:
                self._check_branch_conversation(req, req.branch_id)
            if req.as_of_seq is not None:
                self._check_snapshot_bounds(req, branch, head)
                self._check_snapshot_cut(req, branch)
            snap = self.snapshots.load(req.tenant_id, req.conversation_id, branch, req.as_of_seq, head=head)
            policy = policy or self.policy
            recall = policy.rehydration.recall_tool  # the model can read records back: the hints name the recall tool
            coster = coster or self.coster(req.api, req.model, counter, recall=recall)
            ladder = self.ladder.bind(
                req.query,
                reach(snap.units, unit_turn_costs(snap, coster), req.budget().input_tokens),
                getattr(policy.stage("secrets"), "scanner", None),
                recall=recall,
            )
            asm = assemble(
                req,
                snap,
                policy=policy,
                coster=coster,
                serializer=get_serializer(req.api, recall=recall),
                extra_records=self._off_lineage(snap),
                read_blob=self.store.blobs.get,
                options_for=ladder,
                redundancy=ladder.redundant,
                find_artifacts=lambda sha: self.store.artifacts_by_sha256(req.tenant_id, sha),
                find_record=lambda rid: self._find_record(req.tenant_id, rid),
                trace=trace,
                stored_previous=lambda key, seq: stability.latest_stored(
                    self.store.list_assemblies(req.tenant_id, req.conversation_id), branch, key, seq
                ),
                recorded_prefix=recorded_prefix,
            )
            flush = getattr(coster, "flush", None)
            if flush is not None:
                flush()  # the counts this call made (excerpts, extractions …), one write for the call
            ladder.flush()  # and the rungs it built
            self._policies[asm.manifest["policy"]["hash"]] = policy
            self._policies.move_to_end(asm.manifest["policy"]["hash"])
            while len(self._policies) > 32:
                self._policies.popitem(last=False)
            if persist:
                self.store.put_assembly(asm.persisted())
            return asm

    def _find_record(self, tenant_id: str, record_id: str) -> Record | None:
        """The tenant's record with that id, or ``None`` (sources of derived records outside the candidates)."""
        try:
            return self.store.get(tenant_id, record_id)
        except RecordNotFound:
            return None

    def _off_lineage(self, snap: Any) -> list[Record]:
        """Records of the conversation outside the snapshot's lineage, up to its ``seq`` (cached incrementally).

        They let the policy record branch exclusions and let conversation-visible records of other
        branches fill remaining room. Only they are read (``GraphStore.records(outside_lineage=True)``),
        and each call reads only those written since the previous one.
        """
        key = (snap.tenant_id, snap.conversation_id, tuple((h.branch_id, h.max_seq) for h in snap.lineage))
        seen, found = self._conversations.pop(key, (0, []))
        if seen < snap.seq:
            found = found + self.store.records(
                snap.tenant_id,
                snap.conversation_id,
                lineage=snap.lineage,
                outside_lineage=True,
                as_of_seq=snap.seq,
                after_seq=seen,
            )
            seen = snap.seq
        self._conversations[key] = (seen, found)
        while len(self._conversations) > 32:
            self._conversations.popitem(last=False)
        return [r for r in found if r.seq <= snap.seq]

    def _request(
        self, conversation_id: str | AssemblyRequest, tenant_id: str, fields: Mapping[str, Any]
    ) -> AssemblyRequest:
        if isinstance(conversation_id, AssemblyRequest):
            return conversation_id
        fields = {**self.request_defaults, **fields}
        check_request_types({"tenant_id": tenant_id, "conversation_id": conversation_id, **fields})
        if fields.get("model") is None:  # the API contract's own model, so its payload names a model it accepts
            fields["model"] = default_model(str(fields.get("api") or "openai-chat"))
        try:
            return AssemblyRequest(tenant_id=tenant_id, conversation_id=conversation_id, **fields)
        except TypeError as exc:
            raise ConfigurationError(f"invalid assembly request: {exc}") from exc

    def _main_branch(self, tenant_id: str, conversation_id: str) -> str:
        """The conversation's main branch (its record is written once and never changed: kept per conversation)."""
        key = (tenant_id, conversation_id)
        known = self._main_branches.get(key)
        if known is not None:
            return known
        try:
            conv = self.store.get(tenant_id, conversation_id)
        except RecordNotFound:
            raise RecordNotFound(tenant_id, conversation_id, what="conversation") from None
        if not isinstance(conv, Conversation):
            raise RecordNotFound(tenant_id, conversation_id, what="conversation")
        if len(self._main_branches) >= 4096:
            self._main_branches.clear()
        self._main_branches[key] = conv.branch_id
        return conv.branch_id

    def _check_branch_conversation(self, req: AssemblyRequest, branch_id: str) -> None:
        """Refuse a ``branch_id`` that is a branch of another conversation of the tenant.

        Its lineage holds none of this conversation's records, so the assembly would have nothing to send.
        A branch the tenant does not hold is left to the lineage walk (``RecordNotFound``).

        Raises:
            InputError: names ``branch_id`` and the conversation the branch belongs to.
        """
        try:
            record = self.store.branch(req.tenant_id, branch_id)
        except RecordNotFound:
            return
        if record.conversation_id != req.conversation_id:
            raise InputError(
                f"branch {branch_id!r} is a branch of conversation {record.conversation_id!r}, "
                f"not of {req.conversation_id!r}",
                source="assemble",
                field="branch_id",
            )

    def _check_snapshot_bounds(self, req: AssemblyRequest, branch_id: str, head: int) -> None:
        """Refuse a snapshot past the conversation's head, or from before ``branch_id`` existed.

        A forked branch begins at its Branch record's ``seq``: before it the branch did not exist, so a
        snapshot there would hold nothing of it (at most an inherited prefix no call was ever made from).

        Raises:
            InputError: names ``as_of_seq``, the head or the seq the branch begins at.
            RecordNotFound: ``branch_id`` is no branch of the tenant.
        """
        seq = req.as_of_seq
        assert seq is not None
        if seq > head:
            raise InputError(
                f"snapshot {seq} is past the head of conversation {req.conversation_id} (seq {head}); "
                "omit it to assemble at the head",
                source="assemble",
                field="as_of_seq",
            )
        try:
            record = self.store.branch(req.tenant_id, branch_id)
        except RecordNotFound:
            self.store.lineage(req.tenant_id, branch_id)  # a main branch without a Branch record passes
            return
        if record.parent_branch_id is not None and seq < record.seq:
            raise InputError(
                f"branch {branch_id} begins at seq {record.seq} (forked from {record.parent_branch_id} after seq "
                f"{record.fork_seq}); snapshot {seq} is before it existed; use --snapshot/as_of_seq >= {record.seq}",
                source="assemble",
                field="as_of_seq",
            )

    def _check_snapshot_cut(self, req: AssemblyRequest, branch_id: str) -> None:
        """Refuse a snapshot between a tool call and the result written with it (:mod:`ctxledger.exchange_cuts`).

        Raises:
            InputError: names ``as_of_seq`` and the exchange's boundaries.
        """
        seq = req.as_of_seq
        assert seq is not None
        lineage = self.store.lineage(req.tenant_id, branch_id)
        cut = exchange_cut(self.store, req.tenant_id, req.conversation_id, lineage, seq)
        if cut is not None:
            raise InputError(
                f"snapshot {seq} would cut a tool exchange: {cut.advice(seq)}", source="assemble", field="as_of_seq"
            )

    # -- compacting and rehydrating -----------------------------------------------------------------

    def compact(
        self,
        conversation_id: str,
        through_seq: int | None = None,
        compactor: Compactor | None = None,
        *,
        tenant_id: str = "default",
        branch_id: str | None = None,
        policy: Policy | None = None,
        now: datetime | None = None,
    ) -> Compaction:
        """Compact the history up to a stable boundary and write the Compaction, only if it is faithful.

        The compaction carries lineage (``through_seq``, ``source_ids``, ``policy_version``) and its
        fidelity report; later assemblies include it and leave the history it covers out as
        ``summarized``, except protected records (user constraints, corrections …), which stay verbatim
        (seed 001 "Compactación"; case B09). Validity is judged at ``now`` by the policy's own
        validity stage: superseded records and records it omits as stale are not summarised (they stay in
        the history, judged afresh by each assembly); records it marks stale are summarised with a verbatim
        stale flag and the revalidation hint (``meta["validity"]`` lists what was left out). See
        :mod:`ctxledger.assemble.compaction`.

        Args:
            conversation_id: the conversation.
            through_seq: last ``seq`` covered, inclusive; default: the end of the last unit before the
                latest user turn (an earlier compaction counts as ending at its own ``through_seq``).
            compactor: default the deterministic offline compactor; e.g. an ``LLMCompactor``.
            tenant_id: the tenant.
            branch_id: the branch (default: the conversation's main branch).
            policy: the policy whose version is recorded and whose validity stage judges the sources
                (default: the ledger's).
            now: the clock validity is judged at (aware UTC; default: the current time).

        Returns:
            The Compaction as written (``seq`` assigned).

        Raises:
            CompactionRefused: an invariant was lost (or the compactor failed); nothing was written.
            InputError: ``through_seq`` splits a tool exchange, lies beyond the head, or covers nothing; or,
                with the default boundary, an earlier compaction already covers it ("nothing new to
                compact": record more turns, or pass ``through_seq``).
            RecordNotFound: no such conversation or branch in the tenant.
        """
        from ctxledger.assemble.compaction import build_compaction

        branch = branch_id or self._main_branch(tenant_id, conversation_id)
        snap = self.snapshots.load(tenant_id, conversation_id, branch)
        rec = build_compaction(
            snap,
            policy=policy or self.policy,
            through_seq=through_seq,
            compactor=compactor,
            now=now,
            find_artifacts=lambda sha: self.store.artifacts_by_sha256(tenant_id, sha),
            find_record=lambda rid: self._find_record(tenant_id, rid),
        )
        written = self.store.append([rec])[0]
        assert isinstance(written, Compaction)
        return written

    def rehydrate(
        self,
        ref: str | Mapping[str, Any],
        byte_range: tuple[int | None, int | None] | None = None,
        *,
        tenant_id: str = "default",
    ) -> bytes:
        """Exactly the stored bytes behind a reference or an excerpt's locator, or a range of them.

        Args:
            ref: a tool artifact's record id, ``sha256:<hex>`` of a blob, a message id (its text as UTF-8,
                as excerpts of long messages locate it), a checkpoint id (its rendered text as UTF-8, as
                excerpts of a huge checkpoint locate it), or a locator dict (its own range by default).
            byte_range: ``(start, end)`` byte offsets (0-based, end exclusive) into the whole content; a
                ``None`` start is 0, a ``None`` end the content's end.
            tenant_id: the tenant.

        Returns:
            The bytes; whole blobs and ranges alike come from content whose sha256 was verified.

        Raises:
            RecordNotFound: no such record or blob in the tenant.
            ContentRetained: a retention rule redacted, hashed or deleted the content (the error names the
                rule and the time: "redacted by retention rule R at T").
            IntegrityError: the stored bytes no longer match their hash (or the locator's).
            InputError: the range falls outside the content (field ``byte_range``; the words of
                :func:`ctxledger.represent.rehydrate.check_range`, as every surface gives them), or the record
                holds no content.
        """
        from ctxledger.assemble.represent import rehydrate_ref

        try:
            return rehydrate_ref(self.store, tenant_id, ref, byte_range)
        except RecordNotFound as exc:
            if isinstance(exc, ContentRetained) or not isinstance(ref, str):
                raise
            if (deleted := self._deleted_by(ref, tenant_id)) is not None:
                raise ContentRetained(tenant_id, ref, deleted) from None
            raise

    def _deleted_by(self, record_id: str, tenant_id: str) -> str | None:
        """The retention audit's sentence for the deletion of ``record_id`` ("deleted by retention rule R at T")."""
        gone = [e for e in self.store.retention_audit(tenant_id, ref=record_id) if e.action == "delete"]
        return gone[-1].detail if gone else None

    # -- retention ---------------------------------------------------------------------------------

    def retain(
        self,
        *,
        policy: Policy | None = None,
        rules: RetentionRules | None = None,
        now: datetime | None = None,
        tenant_id: str | None = None,
        dry_run: bool = False,
        batch_size: int | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> RetentionReport:
        """Apply the policy's retention rules (``[retention]``) in bounded, resumable transactions.

        See :func:`ctxledger.retention.engine.retain`: each page of ``batch_size`` scanned records is one
        transaction with its audit rows; a killed run leaves every page whole or untouched and a new run
        finishes the rest.

        Args:
            policy: whose rules to apply (default the ledger's).
            rules: these rules instead of the policy's (e.g. a ``[retention]`` table sent to the service).
            now: the clock ages are measured at (aware UTC; default now).
            tenant_id: only this tenant (default: every tenant of the store).
            dry_run: report what would be done, by rule, and write nothing.
            batch_size: records per transaction (default :data:`~ctxledger.retention.engine.DEFAULT_BATCH`).
            on_progress: called with the records scanned so far after each page.

        Raises:
            InputError: a naive ``now`` or a ``batch_size`` < 1.
        """
        from ctxledger.retention.engine import DEFAULT_BATCH, retain

        report = retain(
            self.store,
            rules if rules is not None else (policy or self.policy).retention,
            now=now,
            tenant_id=tenant_id,
            dry_run=dry_run,
            batch_size=batch_size or DEFAULT_BATCH,
            on_progress=on_progress,
        )
        if not dry_run:
            self._forget_caches()
        return report

    def forget(
        self,
        *,
        conversation_id: str | None = None,
        participant_id: str | None = None,
        tenant_id: str = "default",
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> RetentionReport:
        """Remove a conversation, or a participant's data, keeping the audit trail (a request to be forgotten).

        See :func:`ctxledger.retention.engine.forget`: records, memories derived only from them, the
        assemblies that showed them and blobs no record references go; audit rows (rule ``forget``) stay.

        Raises:
            InputError: neither or both of ``conversation_id`` and ``participant_id``.
            RecordNotFound: no such conversation in the tenant (``what="conversation"``), or a participant no
                record of the tenant is, is owned by or was assembled for (``what="participant"``; also one
                forgotten already); nothing was changed.
        """
        from ctxledger.retention.engine import forget

        report = forget(
            self.store,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            participant_id=participant_id,
            now=now,
            dry_run=dry_run,
        )
        if participant_id is not None and not report.by_rule:  # nothing found: nothing was written either
            raise RecordNotFound(tenant_id, participant_id, what="participant")
        if not dry_run:
            self._forget_caches()
        return report

    def retention_audit(self, *, tenant_id: str = "default", ref: str | None = None) -> list[AuditEntry]:
        """The tenant's retention audit trail (optionally of one record or assembly), oldest first."""
        return self.store.retention_audit(tenant_id, ref=ref)

    def _forget_caches(self) -> None:
        """Retention rewrote or removed stored records: cached snapshots and options are stale."""
        self.snapshots = SnapshotLoader(self.store)
        self.ladder = _ladder(self.store)
        self._conversations.clear()
        self._main_branches.clear()

    # -- explaining --------------------------------------------------------------------------------

    def get_assembly(self, assembly_id: str, *, tenant_id: str = "default", full: bool = False) -> dict[str, Any]:
        """The persisted manifest, with observed usage and the estimate's error once recorded.

        Args:
            assembly_id: the assembly (manifest) id.
            tenant_id: the tenant it belongs to.
            full: for a summary manifest, re-derive the full trace (every omitted record, decision and
                mark) and the payload by :meth:`replay`; the stored ``id``, ``created_at``, ``timings`` and
                ``tokens`` are kept. A manifest stored with ``trace="full"`` is returned as stored.

        Raises:
            RecordNotFound: no such assembly in the tenant.
            ConfigurationError: ``full`` and the replay is not the same call (the message says what differs).
        """
        manifest = self.store.get_assembly(tenant_id, assembly_id)
        usage = manifest.get("observed_usage")
        if usage:
            tokens = manifest["tokens"]
            tokens["observed_input"] = usage["input_tokens"]
            tokens["observed_output"] = usage["output_tokens"]
            tokens["error"] = tokens["estimated_input"] - usage["input_tokens"]
            tokens["error_pct"] = (
                round(100.0 * tokens["error"] / usage["input_tokens"], 3) if usage["input_tokens"] else None
            )
        if full and not has_full_trace(manifest):
            replayed, mismatch = self.replay(manifest)
            if replayed is None:
                raise ConfigurationError(f"assembly {assembly_id} cannot be replayed: {mismatch}")
            return replayed
        return manifest

    def explain(
        self,
        assembly_id: str,
        ref: str,
        *,
        tenant_id: str = "default",
        coster: Coster | None = None,
        policy: Policy | None = None,
    ) -> dict[str, Any]:
        """Why a record was included or omitted in an assembly (see :func:`ctxledger.manifest.explain`).

        ``ref`` names a record of the assembly's conversation: its id, its number within the conversation
        (``"7"`` for ``"<conversation>/7"``), its external id, or a tool call id as the assembly's payload shows it
        (a repeated provider id renamed ``…_2``) or as recorded (:func:`ctxledger.explain_tools.resolve_ref`; the
        CLI, the service and the MCP server read it the same way).
        An included record, or any record of a ``trace="full"`` manifest, is answered from the stored
        manifest. A record written after the assembly's snapshot is answered ``omitted`` at stage ``lineage``,
        reason ``not_in_lineage``, ``detail`` "written at seq N, after the snapshot (seq M)"
        (:func:`ctxledger.explain_tools.explain_after_snapshot`). A skill state (the record whose tool schemas a
        call sends) is answered from the manifest's
        tools and the store (:func:`ctxledger.explain_tools.explain_skill_state`). Any other record is answered
        by replay (:meth:`replay`): the same snapshot, request and policy assembled again; when the replay's
        payload hash, policy hash or assembler version differs from the stored one, the answer says so
        (``status: "unknown"``, ``reason: "replay_mismatch"``, ``detail`` naming what differs and what to do)
        instead of guessing.

        Args:
            assembly_id: the assembly (manifest) id.
            ref: a record id string (see above).
            tenant_id: the tenant the assembly belongs to.
            coster: what the assembly was counted with, when not the ledger's default (a ``FixedCoster``).
            policy: the policy the assembly used, when not the ledger's default (a policy passed to
                :meth:`assemble`).

        Raises:
            InputError: ``ref`` is not a non-empty string (field ``ref``); or it names a record no assembly
                holds (a model run, participant, branch or the conversation record), or a call id several tool
                calls share that the payload does not show.
            RecordNotFound: no such assembly; no record of its conversation is named ``ref`` (checked before any
                replay; when a retention rule deleted it, the message ends with the audit's sentence, "deleted by
                retention rule R at T"); or the record was no candidate of the assembly.
        """
        return self.explain_as(assembly_id, ref, tenant_id=tenant_id, coster=coster, policy=policy)

    def explain_as(
        self,
        assembly_id: str,
        ref: object,
        *,
        tenant_id: str = "default",
        coster: Coster | None = None,
        policy: Policy | None = None,
        source: str = "explain",
    ) -> dict[str, Any]:
        """:meth:`explain`, naming ``source`` (``"ctxledger explain"``, ``"<request>"`` …) in an :class:`InputError`."""
        ref = check_ref(ref, source=source)
        manifest = self.get_assembly(assembly_id, tenant_id=tenant_id)
        candidates = ref_candidates(manifest, ref)
        listed = [c for c in candidates if any(c in (e["ref"], e.get("external_id")) for e in manifest["included"])]
        if listed:
            return self.with_content_now(explain(manifest, listed[0]), tenant_id=tenant_id)
        try:
            rid = resolve_ref(self.store, manifest, ref, source=source)
        except RecordNotFound as exc:
            gone = next(filter(None, (self._deleted_by(c, tenant_id) for c in candidates)), None)
            if gone is None:
                raise
            among = f"the candidates of assembly {manifest['id']} ({gone})"
            raise RecordNotFound(exc.tenant_id, exc.record_id, exc.what, among) from None
        never = never_a_candidate(self.store, manifest, rid)
        if never is not None:
            raise InputError(never, source=source, field="ref")
        tool_state = explain_after_snapshot(self.store, manifest, rid) or explain_skill_state(self.store, manifest, rid)
        if tool_state is not None:
            return tool_state
        if has_full_trace(manifest):
            return self.with_content_now(self._explained(manifest, rid, tenant_id), tenant_id=tenant_id)
        replayed, mismatch = self.replay(manifest, coster=coster, policy=policy)
        if mismatch is not None:
            return unexplained(manifest, rid, mismatch)
        assert replayed is not None
        return self.with_content_now(self._explained(replayed, rid, tenant_id), tenant_id=tenant_id)

    def _explained(self, manifest: Mapping[str, Any], ref: str, tenant_id: str) -> dict[str, Any]:
        """:func:`explain` of a full manifest; a ref that is no candidate because retention deleted it says so.

        Raises:
            RecordNotFound: ``ref`` was no candidate; ``among`` ends with the retention audit's sentence when a
                rule deleted the record.
        """
        try:
            return explain(manifest, ref)
        except RecordNotFound as exc:
            rid = ref if "/" in ref else f"{manifest.get('conversation_id')}/{ref}"
            gone = self._deleted_by(rid, tenant_id) or self._deleted_by(ref, tenant_id)
            if gone is None or exc.among is None:
                raise
            raise RecordNotFound(exc.tenant_id, exc.record_id, exc.what, f"{exc.among} ({gone})") from None

    def with_content_now(self, why: dict[str, Any], *, tenant_id: str = "default") -> dict[str, Any]:
        """``why`` (an explanation) with ``content_now`` when retention has since changed the record's content.

        A manifest says what the model saw when it was made; a retention rule may have redacted, hashed or deleted
        the record since. ``content_now`` is then the rule's sentence ("redacted by retention rule R at T"), so an
        explanation of an included record does not read as if its content were still there.

        Args:
            why: an answer of :meth:`explain` (``ref`` and ``status`` are read; other answers come back as they are).
            tenant_id: the tenant of the record.

        Returns:
            ``why``, or a copy of it with ``content_now`` (a sentence) added.
        """
        rid = why.get("ref")
        if not isinstance(rid, str) or why.get("status") not in ("included", "omitted"):
            return why
        try:
            state = retained(self.store.get(tenant_id, rid))
            now = state.sentence if state is not None else None
        except RecordNotFound:
            now = self._deleted_by(rid, tenant_id)
        return {**why, "content_now": now} if now else why

    def replay(
        self, manifest: Mapping[str, Any], *, coster: Coster | None = None, policy: Policy | None = None
    ) -> tuple[dict[str, Any] | None, ReplayMismatch | None]:
        """Assemble a stored manifest's call again, with the full trace, and check it is the same call.

        The request is rebuilt from the manifest (snapshot ``seq``, branch, participant, requested budget,
        clock, query, scope, tools …); nothing is persisted. The policy is ``policy`` if given, else the one
        this ledger assembled with under the recorded hash (in this process), else the ledger's.

        Returns:
            ``(manifest, None)``: the replay's full manifest under the stored id, its payload hash, policy
            hash and assembler version equal to the stored ones; or ``(None, why)``: a
            :class:`~ctxledger.replay_mismatch.ReplayMismatch` naming what differs (a sentence with its ``kind``).
        """
        if manifest.get("assembler_version") != ASSEMBLER_VERSION:
            return None, ReplayMismatch(
                "assembler_version",
                f"assembled by assembler version {manifest.get('assembler_version')}, this is {ASSEMBLER_VERSION}",
            )
        try:
            req = replay_request(manifest)
            counter = None if coster is not None else _counter_name(manifest)
            policy = policy or self._policies.get(manifest["policy"]["hash"])
            recorded = stability.RecordedPrefix.of(
                manifest.get("prefix"), self._previous_manifest(manifest, req.tenant_id)
            )
            asm = self._assemble(
                req,
                persist=False,
                coster=coster,
                policy=policy,
                counter=counter,
                trace="full",
                recorded_prefix=recorded,
            )
        except CtxledgerError as exc:
            failed = ReplayMismatch("replay_failed", f"the replay failed: {type(exc).__name__}: {exc}")
            return None, self._retention_since(manifest) or failed
        found = asm.manifest
        mismatch = self._mismatch(manifest, found)
        if mismatch is not None:
            return None, mismatch
        out = dict(found)
        for key in ("id", "created_at", "timings", "tokens"):
            out[key] = manifest[key]
        return out, None

    def _mismatch(self, stored: Mapping[str, Any], found: Mapping[str, Any]) -> ReplayMismatch | None:
        """What differs between a stored manifest and its replay ``found``, the certain causes first.

        The policy hash (the policy passed or found), then retention since the assembly (its audit trail), then
        the relevance scorer and its signals, then the payload hash; ``None`` when the replay is the same call.
        """
        if found["policy"]["hash"] != stored["policy"]["hash"]:
            then_hash, now_hash = stored["policy"]["hash"], found["policy"]["hash"]
            return ReplayMismatch("policy_hash", f"policy hash {then_hash} then, {now_hash} now")
        then, now = stored["policy"].get("relevance"), found["policy"].get("relevance")
        relevance_differs = then is not None and then != now
        if not relevance_differs and found["payload_hash"] == stored["payload_hash"]:
            return None
        gone = self._retention_since(stored)
        if gone is not None:
            return gone
        if relevance_differs:
            return relevance_mismatch(str(then), str(now))
        then_hash, now_hash = stored["payload_hash"], found["payload_hash"]
        return ReplayMismatch("payload_hash", f"payload hash {then_hash} then, {now_hash} on replay")

    def _retention_since(self, manifest: Mapping[str, Any]) -> ReplayMismatch | None:
        """:func:`~ctxledger.replay_mismatch.retention_mismatch` of ``manifest`` from its conversation's audit."""
        audit = self.store.retention_audit(manifest["tenant_id"], conversation_id=manifest["conversation_id"])
        return retention_mismatch(manifest, audit)

    def _previous_manifest(self, manifest: Mapping[str, Any], tenant_id: str) -> dict[str, Any] | None:
        """The stored manifest of the assembly ``manifest``'s ``prefix`` names as its previous one, if still there."""
        found = (manifest.get("prefix") or {}).get("previous")
        if not isinstance(found, str):
            return None
        try:
            return self.store.get_assembly(tenant_id, found)
        except RecordNotFound:
            return None

    def record_usage(
        self,
        assembly: str | Assembly,
        input_tokens: int,
        output_tokens: int,
        *,
        tenant_id: str = "default",
        overwrite: bool = False,
    ) -> None:
        """Store what the provider reported for the call made with ``assembly`` (tokens).

        The manifest then shows the estimate's error (``tokens.error`` = estimated − observed). One
        assembly is one call, so its usage is recorded once; replacing it (a corrected report) takes
        ``overwrite=True``.

        Raises:
            RecordNotFound: the assembly was not persisted.
            UsageAlreadyRecorded: usage is already recorded and ``overwrite`` is false (names the
                assembly and the usage kept).
            InputError: a token count is not an integer from 0 to :data:`~ctxledger.budget.MAX_TOKENS` (names
                the field; no call's usage is larger, and a store column could not hold an unbounded one).
        """
        assembly_id = assembly.id if isinstance(assembly, Assembly) else assembly
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
                raise InputError(
                    f"expected an integer from 0 to {MAX_TOKENS:,}, got {value!r}",
                    source=f"assembly {assembly_id}",
                    field=name,
                )
        self.store.record_usage(tenant_id, assembly_id, input_tokens, output_tokens, overwrite=overwrite)


_INTS = ("window_tokens", "output_tokens", "margin_tokens")  # as_of_seq: _check_snapshot
_STRINGS = ("tenant_id", "conversation_id", "branch_id", "participant_id", "model", "api", "query", "provider",
            "agent", "call_type", "phase")  # fmt: skip
_REQUIRED = ("tenant_id", "conversation_id", "model", "api", "window_tokens", "output_tokens", "margin_tokens")


def check_request_types(fields: Mapping[str, Any]) -> None:
    """Refuse ``assemble`` arguments of the wrong type before anything is read.

    Token counts are integers (not ``bool``, not ``float``, not ``"10000"``); ids, names
    and free text are non-empty strings (``query`` may be empty); ``now`` is a timezone-aware
    ``datetime``; ``tools`` is a list of JSON objects; ``checks_passed`` a list of strings; ``scope`` and
    ``source_versions`` map strings to strings; ``exact_evidence`` is a bool or a list of record ids.
    ``None`` is accepted where the field is optional.

    Raises:
        InputError: names the argument (``field``), the type expected and the value given.
    """

    def bad(name: str, wanted: str) -> InputError:
        value = fields[name]
        got = f"{type(value).__name__} {shown(value):.60}"
        return InputError(f"must be {wanted}, got {got}", source="assemble", field=name)

    for name, value in fields.items():
        if value is None:
            if name in _REQUIRED:
                raise bad(name, "given (it has no None form)")
            continue
        if name in _INTS and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad(name, "an integer")
        if name in _STRINGS and (not isinstance(value, str) or (not value and name != "query")):
            raise bad(name, "a non-empty string")
        if name == "now" and (not isinstance(value, datetime) or value.utcoffset() is None):
            raise bad(name, "a timezone-aware datetime (e.g. datetime.now(UTC))")
        if name == "tools" and (
            isinstance(value, str | bytes | Mapping)
            or not isinstance(value, Sequence)
            or not all(isinstance(t, Mapping) for t in value)
        ):
            raise bad(name, "a list of tool schemas (JSON objects)")
        if name == "checks_passed" and (
            isinstance(value, str | bytes)
            or not isinstance(value, Sequence)
            or not all(isinstance(c, str) for c in value)
        ):
            raise bad(name, "a list of strings")
        if name in ("scope", "source_versions") and (
            not isinstance(value, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            raise bad(name, "a mapping of strings to strings")
        if (
            name == "exact_evidence"
            and not isinstance(value, bool)
            and (
                isinstance(value, str | bytes)
                or not isinstance(value, Sequence)
                or not all(isinstance(e, str) for e in value)
            )
        ):
            raise bad(name, "true, false or a list of record ids")


def replay_request(manifest: Mapping[str, Any]) -> AssemblyRequest:
    """The :class:`AssemblyRequest` a stored manifest was assembled for (what :meth:`Ledger.replay` sends).

    Raises:
        ConfigurationError: the manifest lacks what a request needs (a record from before requests were kept).
    """
    facts = manifest.get("request") or {}
    asked = manifest.get("budget", {}).get("requested") or manifest.get("budget", {})
    evidence = facts.get("exact_evidence", ())
    try:
        return AssemblyRequest(
            tenant_id=manifest["tenant_id"],
            conversation_id=manifest["conversation_id"],
            branch_id=manifest["branch_id"],
            as_of_seq=manifest["snapshot_seq"],
            participant_id=manifest.get("participant_id"),
            model=manifest["model"],
            api=manifest["api"],
            window_tokens=asked["window"],
            output_tokens=asked["output"],
            margin_tokens=asked["margin"],
            query=facts.get("query"),
            tools=tuple(facts["tools"]) if facts.get("tools") else None,
            provider=facts.get("provider"),
            scope=dict(facts.get("scope") or {}),
            agent=facts.get("agent"),
            call_type=facts.get("call_type"),
            phase=facts.get("phase"),
            checks_passed=tuple(facts.get("checks_passed") or ()),
            now=datetime.fromisoformat(facts["now"]) if facts.get("now") else None,
            exact_evidence=evidence if isinstance(evidence, bool) else tuple(evidence),
            source_versions=dict(facts.get("source_versions") or {}),
        )
    except (KeyError, TypeError) as exc:
        raise ConfigurationError(f"manifest {manifest.get('id')} does not record its request: {exc}") from exc


def _counter_name(manifest: Mapping[str, Any]) -> str | None:
    """The counter name behind a manifest's coster id (``<api>/<counter id>``), for a replay to count alike."""
    found = (manifest.get("counter") or {}).get("id")
    prefix = f"{manifest.get('api')}/"
    return found[len(prefix) :] if isinstance(found, str) and found.startswith(prefix) else found


def unexplained(manifest: Mapping[str, Any], ref: str, why: ReplayMismatch) -> dict[str, Any]:
    """The answer for a record a summary manifest does not list when its replay is not the same call.

    ``detail`` is ``why`` (what differs, from :meth:`Ledger.replay`) and what to do about it
    (:func:`replay_remedy`); ``chain`` says the same in sentences.
    """
    policy = manifest["policy"]
    remedy = replay_remedy(why)
    return {
        "ref": ref,
        "external_id": None,
        "status": "unknown",
        "stage": None,
        "reason": "replay_mismatch",
        "detail": f"{why}; {remedy}",
        "policy": f"{policy['name']}@{policy['version']} ({policy['hash'][:19]})",
        "decisions": [],
        "marks": [],
        "rehydrations": [],
        "chain": [
            f"{ref} is not among the included items of assembly {manifest['id']}, whose manifest keeps a summary "
            "of what it left out",
            f"replaying the assembly to say why gave a different call ({why}); the code, the policy or the "
            "store changed since, so no answer is given rather than a guess",
            remedy,
        ],
    }


def _check_snapshot(as_of_seq: Any) -> None:
    """Refuse a snapshot ``seq`` that is not an integer >= 1 (``seq`` starts at 1; ``None`` is the head).

    Raises:
        InputError: names the field ``as_of_seq`` and the value.
    """
    if as_of_seq is None:
        return
    if isinstance(as_of_seq, bool) or not isinstance(as_of_seq, int) or as_of_seq < 1:
        raise InputError(
            f"a snapshot is a record seq >= 1 (seq counts from 1 per conversation; omit it for the head), "
            f"got {as_of_seq!r}",
            source="assemble",
            field="as_of_seq",
        )


def record_usage(
    ledger: Ledger, assembly: str | Assembly, input_tokens: int, output_tokens: int, *, overwrite: bool = False
) -> None:
    """Module-level form of :meth:`Ledger.record_usage` (default tenant)."""
    ledger.record_usage(assembly, input_tokens, output_tokens, overwrite=overwrite)


def _ladder(store: GraphStore) -> Ladder:
    """The ledger's ladder; it keeps rungs in the store when the store can (``get_rungs``/``put_rungs``)."""
    return Ladder(store.blobs.get, memo=store if hasattr(store, "get_rungs") else None)
