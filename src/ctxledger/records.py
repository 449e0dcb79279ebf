"""The records of the execution graph (seed 004 §4.1).

Every record is immutable once written. A correction is a new record that links to the old one
(``supersedes`` on the new record; the old record's ``superseded_by`` is *derived* by the store from
the newer records, never written into the old row). Every record carries the same envelope:

* ``id``: a string unique within its tenant (a record's identity is ``(tenant_id, id)``; two tenants may
  use the same ids);
* ``tenant_id``, ``conversation_id``, ``branch_id``: its scope;
* ``seq``: monotonic per conversation, assigned by the store on append (0 until then). ``seq`` is the
  snapshot clock: "as of seq S" means every record with ``seq <= S`` (inclusive);
* ``created_at``: an aware UTC datetime;
* ``owner_participant_id`` / ``owner_model_run_id``: who produced it;
* ``visibility`` (+ ``shared_with``), ``privacy_class``, ``trust``;
* ``external_id``: the id the record had in its source (e.g. ``"m4"`` or LoCoMo ``"D1:3"``);
* ``meta``: store-only metadata (tags, source paths). Never reaches a provider payload;
* ``scope`` (labels such as app / user / session) and ``provider_scope`` (the provider account the data
  came from), read by the policy's scope and provider-routing stages.

Content lives on the record for messages; raw tool outputs live in the content-addressed blob store
and :class:`ToolArtifact` points to them by sha256.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar


class Kind(StrEnum):
    """The record kinds of the execution graph (values are stored; only ever extended)."""

    CONVERSATION = "conversation"
    BRANCH = "branch"
    PARTICIPANT = "participant"
    MESSAGE = "message"
    MODEL_RUN = "model_run"
    TOOL_CALL = "tool_call"
    TOOL_ARTIFACT = "tool_artifact"
    TOOL_MEMORY = "tool_memory"
    SKILL_STATE = "skill_state"
    CHECKPOINT = "checkpoint"
    COMPACTION = "compaction"


class Visibility(StrEnum):
    """Who may see a record.

    Values: ``participant_private`` (only its owner participant), ``branch`` (its branch lineage),
    ``conversation`` (every branch of its conversation), ``shared`` (the participants in
    ``shared_with``), ``audit_only`` (never sent to a model; kept for audit).
    """

    PARTICIPANT_PRIVATE = "participant_private"
    BRANCH = "branch"
    CONVERSATION = "conversation"
    SHARED = "shared"
    AUDIT_ONLY = "audit_only"


class Trust(StrEnum):
    """Source trust, highest first. Lower trust never overrides higher."""

    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    VERIFIED_INTERNAL = "verified_internal"
    TOOL_RESULT = "tool_result"
    RETRIEVED = "retrieved"
    GENERATED_SUMMARY = "generated_summary"
    UNTRUSTED = "untrusted"

    @property
    def rank(self) -> int:
        """0 for ``system`` (highest) … 7 for ``untrusted`` (lowest)."""
        return _TRUST_ORDER.index(self)


_TRUST_ORDER = list(Trust)


class Freshness(StrEnum):
    """How fast an observation goes stale (seed 004 §4.7)."""

    VOLATILE = "volatile"
    SESSION = "session"
    BOUNDED = "bounded"
    DURABLE = "durable"
    PERMANENT = "permanent"


class ToolStatus(StrEnum):
    """State of a tool call: ``pending`` (no result yet), ``succeeded``, ``failed``, ``deferred``."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEFERRED = "deferred"


class Role(StrEnum):
    """Author role of a :class:`Message`."""

    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """The envelope every graph record carries (see the module docstring)."""

    kind: ClassVar[Kind]

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    seq: int = 0
    created_at: datetime = field(default_factory=utcnow)
    owner_participant_id: str | None = None
    owner_model_run_id: str | None = None
    visibility: Visibility = Visibility.BRANCH
    shared_with: tuple[str, ...] = ()
    privacy_class: str = "internal"
    trust: Trust = Trust.USER
    external_id: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    scope: Mapping[str, str] = field(default_factory=dict)
    """Scope labels below the conversation (e.g. ``{"app": …, "user_id": …, "session_id": …}``); a request
    carries the same kind of mapping and the scope stage compares them (case B12)."""
    provider_scope: str | None = None
    """The provider whose account or OAuth scope this data was derived from (e.g. ``"google"``); provider
    routing keeps it away from other model providers unless the policy allows (seed 004 §8 R3)."""

    def with_seq(self, seq: int) -> Record:
        """Return a copy of this record with ``seq`` set (used by stores on append)."""
        return dataclasses.replace(self, seq=seq)


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation(Record):
    """A chat container; belongs to one tenant. Its ``branch_id`` is its main branch."""

    kind: ClassVar[Kind] = Kind.CONVERSATION
    title: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Branch(Record):
    """A path through a conversation. Its own ``id`` equals its ``branch_id``.

    A branch inherits every record of ``parent_branch_id`` with ``seq <= fork_seq`` (inclusive), and
    recursively that parent's lineage. The main branch has no parent.
    """

    kind: ClassVar[Kind] = Kind.BRANCH
    parent_branch_id: str | None = None
    fork_seq: int | None = None
    name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Participant(Record):
    """A model configuration, persona, user or subagent taking part in a conversation."""

    kind: ClassVar[Kind] = Kind.PARTICIPANT
    role: str = "assistant"
    """``user``, ``assistant``, ``subagent``, ``moderator`` …"""
    name: str = ""
    model: str | None = None
    parent_participant_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Message(Record):
    """A user-visible history node: system, developer, user or assistant text.

    ``content`` is a string, ``None`` (an assistant turn that only calls tools), or a tuple of content
    parts in OpenAI Chat Completions form (``{"type": "text", "text": …}``,
    ``{"type": "image_url", "image_url": {"url": …, "detail": …}}``) kept intact.
    An assistant message's tool calls are separate :class:`ToolCall` records with ``message_id`` set.
    ``supersedes`` names the instructions a system or developer message replaces (an agent's instructions
    that changed between calls): the validity stage then omits them as ``superseded``.
    """

    kind: ClassVar[Kind] = Kind.MESSAGE
    role: Role = Role.USER
    content: str | tuple[Mapping[str, Any], ...] | None = None
    name: str | None = None
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRun(Record):
    """One generation attempt: provider, model, the assembly it received, the usage reported."""

    kind: ClassVar[Kind] = Kind.MODEL_RUN
    provider: str = ""
    model: str = ""
    assembly_id: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall(Record):
    """A call the model requested.

    ``call_id`` is the provider's id (``call_…`` / ``toolu_…``), ``arguments`` the JSON text exactly as
    the model produced it, ``index`` its position among the parallel calls of ``message_id``.
    ``status`` is the status at creation (``pending`` or ``deferred``); the effective status is
    derived from the call's :class:`ToolArtifact` when one exists.
    """

    kind: ClassVar[Kind] = Kind.TOOL_CALL
    message_id: str = ""
    call_id: str = ""
    name: str = ""
    arguments: str = "{}"
    index: int = 0
    status: ToolStatus = ToolStatus.PENDING


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolArtifact(Record):
    """The raw result or error of one tool call, captured whole before any truncation.

    The bytes live in the blob store under ``sha256`` (bare hex); ``size_bytes`` is their length.
    ``status`` is ``succeeded``, ``failed`` (``is_error``) or ``deferred``.
    """

    kind: ClassVar[Kind] = Kind.TOOL_ARTIFACT
    tool_call_id: str = ""
    call_id: str = ""
    name: str = ""
    sha256: str = ""
    size_bytes: int = 0
    media_type: str = "text/plain; charset=utf-8"
    tool_version: str | None = None
    status: ToolStatus = ToolStatus.SUCCEEDED
    source_version: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMemory(Record):
    """A compact, model-facing record derived from one or more artifacts (seed 004 §4.3).

    ``observed_at`` and ``stale_after`` are aware UTC datetimes; ``locators`` point back into the
    source artifacts (artifact id, line/byte range, sha256, source version).
    """

    kind: ClassVar[Kind] = Kind.TOOL_MEMORY
    summary: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    confidence: float = 1.0
    trust_source: str = ""
    freshness: Freshness = Freshness.BOUNDED
    observed_at: datetime | None = None
    stale_after: datetime | None = None
    revalidation_tool: str | None = None
    source_artifact_ids: tuple[str, ...] = ()
    source_version: str | None = None
    locators: tuple[Mapping[str, Any], ...] = ()
    conflicts_with: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillState(Record):
    """Loaded skills, active tool profiles and enabled tools for a run."""

    kind: ClassVar[Kind] = Kind.SKILL_STATE
    skills: tuple[str, ...] = ()
    tool_profiles: tuple[str, ...] = ()
    enabled_tools: tuple[str, ...] = ()
    tool_schemas: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint(Record):
    """Resumable run state between action boundaries (continuation, parent resume after subagents)."""

    kind: ClassVar[Kind] = Kind.CHECKPOINT
    run_id: str = ""
    through_seq: int = 0
    state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction(Record):
    """A derived summary of a stretch of history, with lineage.

    ``through_seq`` (inclusive) and ``source_ids`` name what it covers; ``body`` holds the structured
    invariants. A compaction is a derived artifact, never the truth of the run.
    """

    kind: ClassVar[Kind] = Kind.COMPACTION
    through_seq: int = 0
    source_ids: tuple[str, ...] = ()
    policy_version: str = ""
    text: str = ""
    body: Mapping[str, Any] = field(default_factory=dict)


RECORD_TYPES: dict[Kind, type[Record]] = {
    cls.kind: cls
    for cls in (
        Conversation,
        Branch,
        Participant,
        Message,
        ModelRun,
        ToolCall,
        ToolArtifact,
        ToolMemory,
        SkillState,
        Checkpoint,
        Compaction,
    )
}
"""Map from :class:`Kind` to its record class (used by stores to rebuild records)."""


RAW_OUTPUT_META = "raw_output_sha256"
"""``meta`` key naming the blob of a provider's raw output an importer kept beside a message (mini-swe-agent's
``extra.raw_output``); the blob belongs to the record like an artifact's bytes."""

_HEX = frozenset("0123456789abcdef")


def blob_references(record: Record) -> tuple[str, ...]:
    """The blobs ``record`` references (empty when it references none).

    A tool artifact's ``sha256``, then a bare sha256 in ``meta`` under :data:`RAW_OUTPUT_META`. Blob
    collection, retention and ``forget`` count these references, so no blob a record keeps is collected and
    none stays behind once its record is gone.
    """
    refs: list[str] = []
    if isinstance(record, ToolArtifact) and record.sha256:
        refs.append(record.sha256)
    raw = record.meta.get(RAW_OUTPUT_META)
    if is_bare_sha256(raw) and raw not in refs:
        refs.append(raw)
    return tuple(refs)


def is_bare_sha256(value: object) -> bool:
    """Whether ``value`` is 64 lowercase hex characters (a blob's name)."""
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)
