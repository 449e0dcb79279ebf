"""A small builder that writes a scenario's execution graph into a ledger, record by record.

Every record gets the id ``<conversation>/<name>`` and ``external_id`` ``name``, so scenarios and their
expectations speak in short names (``mem-csv``, ``art-search``). The clock is fixed (``T0`` plus one minute
per record), so the same scenario always builds the same graph, payload and payload hash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxledger.hashing import sha256_hex
from ctxledger.ledger import Ledger
from ctxledger.records import (
    Branch,
    Checkpoint,
    Compaction,
    Conversation,
    Freshness,
    Message,
    Participant,
    Record,
    Role,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    ToolStatus,
    Trust,
    Visibility,
)

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
"""The scenarios' clock starts here."""

_ENV = ("visibility", "owner", "shared_with", "privacy_class", "provider_scope", "trust", "tags", "scope", "branch")


class GraphBuilder:
    """Writes records into ``ledger`` for one conversation (see the module docstring).

    Args:
        ledger: the ledger (its store receives the records and blobs).
        conversation_id: the conversation to create.
        tenant_id: its tenant.
    """

    def __init__(self, ledger: Ledger, conversation_id: str, tenant_id: str = "default") -> None:
        self.ledger = ledger
        self.conversation_id = conversation_id
        self.tenant_id = tenant_id
        self.now = T0
        self.records: dict[str, Record] = {}
        self.main = f"{conversation_id}/main"
        self.branch_id = self.main
        self._add(Conversation, "conversation", branch=self.main, title=conversation_id, record_id=conversation_id)
        self._add(Branch, "main", record_id=self.main, branch=self.main, name="main")

    # -- ids and envelope ------------------------------------------------------------------------------

    def id(self, name: str) -> str:
        """The record id of a short name."""
        return f"{self.conversation_id}/{name}"

    def seq(self, name: str) -> int:
        """The ``seq`` the store gave a record."""
        return self.records[self.id(name)].seq

    def tick(self, minutes: float = 1.0) -> datetime:
        """Advance the clock and return the new time."""
        self.now += timedelta(minutes=minutes)
        return self.now

    def _add(self, cls: type[Record], ext: str, *, record_id: str | None = None, **fields: Any) -> Record:
        env = {k: fields.pop(k) for k in list(fields) if k in _ENV}
        meta = dict(fields.pop("meta", {}))
        if env.get("tags"):
            meta["tags"] = list(env["tags"])
        rec = cls(
            id=record_id or self.id(ext),
            tenant_id=self.tenant_id,
            conversation_id=self.conversation_id,
            branch_id=env.get("branch") or self.branch_id,
            created_at=self.tick(),
            owner_participant_id=env.get("owner"),
            visibility=Visibility(env.get("visibility", "branch")),
            shared_with=tuple(env.get("shared_with", ())),
            privacy_class=env.get("privacy_class", "internal"),
            provider_scope=env.get("provider_scope"),
            trust=Trust(env.get("trust", _default_trust(cls, fields))),
            scope=dict(env.get("scope", {})),
            external_id=ext,
            meta=meta,
            **fields,
        )
        (stored,) = self.ledger.append([rec])
        self.records[stored.id] = stored
        return stored

    # -- structure -------------------------------------------------------------------------------------

    def participant(
        self, name: str, role: str = "assistant", *, parent: str | None = None, model: str | None = None
    ) -> str:
        """Add a participant (``role``: user, assistant, subagent, moderator …); returns its id."""
        pid = self.id(name)
        self._add(
            Participant,
            name,
            role=role,
            name=name,
            model=model,
            parent_participant_id=self.id(parent) if parent else None,
            visibility="conversation",
        )
        return pid

    def branch(self, name: str, *, fork_after: str, parent: str | None = None) -> str:
        """Fork a branch after record ``fork_after`` (inclusive) of ``parent`` (default: main); switch to it."""
        bid = self.id(name)
        parent_id = parent or self.main
        self._add(
            Branch,
            name,
            record_id=bid,
            branch=bid,
            parent_branch_id=parent_id,
            fork_seq=self.seq(fork_after),
            name=name,
        )
        self.branch_id = bid
        return bid

    def on(self, branch_id: str) -> None:
        """Write the following records on ``branch_id``."""
        self.branch_id = branch_id

    # -- history ---------------------------------------------------------------------------------------

    def system(self, name: str, text: str, **env: Any) -> str:
        """A system instruction."""
        return self._add(Message, name, role=Role.SYSTEM, content=text, **env).id

    def user(self, name: str, text: str, *, speaker: str | None = None, **env: Any) -> str:
        """A user message (``speaker``: an author label, e.g. a moderator's name)."""
        return self._add(Message, name, role=Role.USER, content=text, name=speaker, **env).id

    def assistant(self, name: str, text: str, *, speaker: str | None = None, **env: Any) -> str:
        """A visible assistant message (``speaker`` is the author label)."""
        return self._add(Message, name, role=Role.ASSISTANT, content=text, name=speaker, **env).id

    def tool(
        self,
        name: str,
        tool: str,
        args: Mapping[str, Any],
        output: str | None,
        *,
        status: str = "succeeded",
        media_type: str = "application/json",
        source_version: str | None = None,
        result_env: Mapping[str, Any] | None = None,
        **env: Any,
    ) -> str:
        """A tool exchange: the assistant message ``name``, its call ``name#call`` and result ``art-<name>``.

        With ``output=None`` the call has no result (``status`` pending or deferred). ``result_env``
        overrides the envelope of the artifact only (e.g. a more private raw result).
        """
        msg = self._add(Message, name, role=Role.ASSISTANT, content=None, **env).id
        call_status = ToolStatus(status) if output is None else ToolStatus.PENDING
        call = self._add(
            ToolCall,
            f"{name}#call",
            message_id=msg,
            call_id=f"call_{name.replace('-', '_')}",
            name=tool,
            arguments=json.dumps(dict(args), sort_keys=True),
            status=call_status,
            **env,
        ).id
        if output is not None:
            data = output.encode("utf-8")
            ref = self.ledger.store.blobs.put(data, media_type)
            art_env = {**env, "trust": "tool_result", **(result_env or {})}
            self._add(
                ToolArtifact,
                f"art-{name}",
                tool_call_id=call,
                call_id=f"call_{name.replace('-', '_')}",
                name=tool,
                sha256=ref.sha256,
                size_bytes=len(data),
                media_type=media_type,
                status=ToolStatus(status),
                source_version=source_version,
                **art_env,
            )
        return msg

    def memory(
        self,
        name: str,
        summary: str,
        *,
        fields: Mapping[str, Any] | None = None,
        sources: Sequence[str] = (),
        freshness: str = "bounded",
        observed_at: datetime | None = None,
        stale_after: datetime | None = None,
        revalidation_tool: str | None = None,
        source_version: str | None = None,
        locators: Sequence[Mapping[str, Any]] | None = None,
        conflicts_with: Sequence[str] = (),
        supersedes: Sequence[str] = (),
        confidence: float = 0.9,
        **env: Any,
    ) -> str:
        """A ToolMemory derived from artifacts ``sources`` (short names); locators default to their sha256."""
        ids = [self.id(s) for s in sources]
        if locators is None:
            locators = [
                {"artifact_id": i, "sha256": self.records[i].sha256}  # type: ignore[attr-defined]
                for i in ids
                if i in self.records
            ]
        env.setdefault("trust", "verified_internal")
        return self._add(
            ToolMemory,
            name,
            summary=summary,
            fields=dict(fields or {}),
            confidence=confidence,
            trust_source=f"tool:{name}",
            freshness=Freshness(freshness),
            observed_at=observed_at or self.now,
            stale_after=stale_after,
            revalidation_tool=revalidation_tool,
            source_artifact_ids=tuple(ids),
            source_version=source_version,
            locators=tuple(locators),
            conflicts_with=tuple(self.id(c) for c in conflicts_with),
            supersedes=tuple(self.id(s) for s in supersedes),
            **env,
        ).id

    def checkpoint(
        self, name: str, run_id: str, state: Mapping[str, Any], *, through: str | None = None, **env: Any
    ) -> str:
        """A checkpoint of ``run_id`` covering history through record ``through`` (inclusive)."""
        through_seq = self.seq(through) if through else 0
        env.setdefault("trust", "verified_internal")
        return self._add(Checkpoint, name, run_id=run_id, through_seq=through_seq, state=dict(state), **env).id

    def compaction(self, name: str, text: str, *, covers: Sequence[str], **env: Any) -> str:
        """A compaction record covering the named records (``through_seq`` = the last one's seq)."""
        ids = tuple(self.id(c) for c in covers)
        through = max(self.records[i].seq for i in ids)
        env.setdefault("trust", "generated_summary")
        return self._add(Compaction, name, through_seq=through, source_ids=ids, text=text, policy_version="2", **env).id

    def skills(self, name: str, skills: Sequence[str], tools: Sequence[str], **env: Any) -> str:
        """A SkillState enabling ``tools`` (simple JSON-schema function tools)."""
        schemas = tuple(
            {
                "type": "function",
                "function": {
                    "name": t,
                    "description": f"{t.replace('_', ' ')}.",
                    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
                },
            }
            for t in tools
        )
        return self._add(
            SkillState, name, skills=tuple(skills), enabled_tools=tuple(tools), tool_schemas=schemas, **env
        ).id

    def sha256(self, text: str) -> str:
        """Bare-hex sha256 of a text's UTF-8 bytes."""
        return sha256_hex(text.encode("utf-8"))


def _default_trust(cls: type[Record], fields: Mapping[str, Any]) -> str:
    role = fields.get("role")
    if cls is Message and role is not None:
        return {"system": "system", "developer": "developer", "assistant": "verified_internal"}.get(str(role), "user")
    return "verified_internal"
