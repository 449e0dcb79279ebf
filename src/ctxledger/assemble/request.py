"""What one model call asks for (:class:`AssemblyRequest`) and what it gets back (:class:`Assembly`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ctxledger.budget import DEFAULT_BUDGET, Budget
from ctxledger.errors import ConfigurationError
from ctxledger.manifest import ManifestView


@dataclass(frozen=True, slots=True)
class AssemblyRequest:
    """What one model call needs.

    Attributes:
        tenant_id, conversation_id: the scope; nothing outside it is ever read.
        branch_id: the active branch (default: the conversation's main branch).
        as_of_seq: snapshot ``seq`` (inclusive); ``None`` = the head.
        participant_id: the participant the call is for (visibility rules).
        model: model name (recorded; selects the counter when not given).
        api: the provider contract: ``openai-chat`` or ``anthropic-messages``.
        window_tokens, output_tokens, margin_tokens: ``W``, ``O``, ``M`` in tokens.
        query: the current goal for relevance (default: the latest user turn's text).
        tools: tool schemas (OpenAI ``tools`` form) overriding those found in the graph.
        provider: the provider the payload goes to (privacy routing; default: implied by ``api``).
        scope: scope labels of the caller (``{"app": …, "user_id": …}``) compared with records' ``scope``.
        agent, call_type: bind the policy's working-set contract for this agent and call type.
        phase: the phase of the run (``investigation``, ``action`` …) for tool exposure.
        checks_passed: checks passed so far (``eligibility``, ``approval`` …); write tools need them.
        now: the request's clock (aware UTC) for freshness; default: the current time.
        exact_evidence: ``True`` (the most relevant selected memory) or ids / external ids of memories or
            artifacts whose raw artifact should be read back if policy allows (rehydration phase two).
        source_versions: current version per source (``{"repo": "d4e5f6"}``); derived records of older
            versions are stale.
    """

    tenant_id: str
    conversation_id: str
    branch_id: str | None = None
    as_of_seq: int | None = None
    participant_id: str | None = None
    model: str = "gpt-4o"
    api: str = "openai-chat"
    window_tokens: int = DEFAULT_BUDGET.window_tokens
    output_tokens: int = DEFAULT_BUDGET.output_tokens
    margin_tokens: int = DEFAULT_BUDGET.margin_tokens
    query: str | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None
    provider: str | None = None
    scope: Mapping[str, str] = field(default_factory=dict)
    agent: str | None = None
    call_type: str | None = None
    phase: str | None = None
    checks_passed: tuple[str, ...] = ()
    now: datetime | None = None
    exact_evidence: bool | tuple[str, ...] = ()
    source_versions: Mapping[str, str] = field(default_factory=dict)

    def budget(self) -> Budget:
        """The :class:`Budget` of this request."""
        return Budget(self.window_tokens, self.output_tokens, self.margin_tokens)


@dataclass(slots=True)
class Assembly:
    """One assembled context: the provider payload and its manifest.

    Attributes:
        id: assembly id (``asm_<uuid>``).
        payload: the provider request body (JSON-able).
        payload_hash: ``"sha256:<hex>"`` of the payload's canonical JSON.
        input_tokens: the payload's tokens counted on its serialized form (an estimate when the counter is one).
        manifest: the manifest (:class:`~ctxledger.manifest.ManifestView`): the persisted record's keys plus
            the full trace (``omitted``, ``candidates``, every decision and mark), built when first read.
    """

    id: str
    payload: dict[str, Any]
    payload_hash: str
    input_tokens: int
    manifest: dict[str, Any] = field(default_factory=dict)
    turn_refs: list[str] = field(default_factory=list)
    """Record id of each turn in payload order (for OpenAI Chat: one per message)."""
    phases: Any = None
    """The typed result of each phase (:class:`~ctxledger.assemble.assembler.PhaseTrace`), in process only."""

    def persisted(self) -> dict[str, Any]:
        """The manifest as the store keeps it (the summary record, or everything with ``trace="full"``)."""
        m = self.manifest
        return m.persisted() if isinstance(m, ManifestView) else dict(m)


def new_assembly_request(**kwargs: Any) -> AssemblyRequest:
    """Build an :class:`AssemblyRequest`, raising ``ConfigurationError`` on unknown fields."""
    try:
        return AssemblyRequest(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(str(exc)) from exc
