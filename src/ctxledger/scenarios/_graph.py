"""The scenarios' builder: a :class:`~ctxledger.recorder.Recorder` with a fixed clock and short names.

Every record gets the id ``<conversation>/<name>`` and ``external_id`` ``name`` (participants too), so
scenarios and their expectations speak in short names (``mem-csv``, ``art-search``); every method takes the
name first. The clock is fixed (``T0`` plus one minute per record), so the same scenario always builds the
same graph, payload and payload hash.

References are taken as written, never checked: a scenario may name an artifact that does not exist
(broken provenance), promote an unknown id, or own records by a participant id that has no record, because
those are the cases the policy must handle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxledger.hashing import sha256_hex
from ctxledger.ledger import Ledger
from ctxledger.recorder import Recorder, ToolExchange
from ctxledger.records import Checkpoint

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
"""The scenarios' clock starts here."""


class GraphBuilder(Recorder):
    """Writes records into ``ledger`` for one conversation (see the module docstring).

    Args:
        ledger: the ledger (its store receives the records and blobs).
        conversation_id: the conversation to create.
        tenant_id: its tenant.
    """

    strict = False

    def __init__(self, ledger: Ledger, conversation_id: str, tenant_id: str = "default") -> None:
        super().__init__(ledger, conversation_id, tenant_id, clock=T0, step=timedelta(minutes=1))

    def _participant_id(self, name: str) -> str:
        return self.id(name)

    def _ref(self, value: Any, field: str, kind: str, source: str, *, exchange: str = "artifact") -> str:
        """Names are short names of this conversation; participant and branch ids are taken as given."""
        if isinstance(value, ToolExchange):
            return super()._ref(value, field, kind, source, exchange=exchange)
        if kind in ("participant", "branch") and not (kind == "participant" and field == "parent"):
            return value
        return self.id(value)

    # -- the name comes first ----------------------------------------------------------------------------

    def system(self, name: str, text: str, **env: Any) -> str:  # type: ignore[override]
        """A system instruction."""
        return super().system(text, name=name, **env)

    def user(self, name: str, text: str, *, speaker: str | None = None, **env: Any) -> str:  # type: ignore[override]
        """A user message (``speaker``: an author label, e.g. a moderator's name)."""
        return super().user(text, name=name, speaker=speaker, **env)

    def assistant(self, name: str, text: str, *, speaker: str | None = None, **env: Any) -> str:  # type: ignore[override]
        """A visible assistant message (``speaker`` is the author label)."""
        return super().assistant(text, name=name, speaker=speaker, **env)

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
        if output is None and status == "succeeded":
            status = "pending"
        exchange = self.tool_call(
            tool,
            args,
            output,
            name=name,
            status=status,
            media_type=media_type,
            source_version=source_version,
            result_env=dict(result_env or {}),  # type: ignore[arg-type]
            **env,
        )
        return exchange.message

    def memory(  # type: ignore[override]
        self,
        name: str,
        summary: str,
        *,
        observed_at: datetime | None = None,
        **kwargs: Any,
    ) -> str:
        """A ToolMemory derived from artifacts ``sources`` (short names); locators default to their sha256."""
        return super().memory(
            summary, name=name, observed_at=observed_at or self.now, trust_source=f"tool:{name}", **kwargs
        )

    def checkpoint(  # type: ignore[override]
        self, name: str, run_id: str, state: Mapping[str, Any], *, through: str | None = None, **env: Any
    ) -> str:
        """A checkpoint of ``run_id`` covering history through record ``through`` (inclusive); ``state`` as given."""
        through_seq = self.seq(through) if through else 0
        env.setdefault("trust", "verified_internal")
        rid = self.id(name)
        return self._write(
            Checkpoint, name, env, record_id=rid, run_id=run_id, through_seq=through_seq, state=dict(state)
        ).id

    def compaction(self, name: str, text: str, *, covers: Sequence[str], **env: Any) -> str:  # type: ignore[override]
        """A compaction record covering the named records (``through_seq`` = the last one's seq)."""
        return super().compaction(text, covers=covers, name=name, policy_version="2", **env)

    def skills(self, name: str, skills: Sequence[str], tools: Sequence[str], **env: Any) -> str:  # type: ignore[override]
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
        return super().skills(skills, tools=tools, schemas=schemas, name=name, **env)

    def sha256(self, text: str) -> str:
        """Bare-hex sha256 of a text's UTF-8 bytes."""
        return sha256_hex(text.encode("utf-8"))
