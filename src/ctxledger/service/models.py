"""Request and response bodies of the HTTP API (pydantic models; they make the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from ctxledger.budget import DEFAULT_BUDGET, TOKEN_BOUNDS
from ctxledger.ingest import FORMATS as IMPORT_FORMATS
from ctxledger.manifest import TRACES
from ctxledger.serialize import SERIALIZER_NAMES
from ctxledger.service.messages import FORMATS

MessageFormat = Literal["openai-chat", "anthropic-messages", "openai-responses"]
assert MessageFormat.__args__ == FORMATS  # type: ignore[attr-defined]
ImportFormat = Literal[("auto", *IMPORT_FORMATS)]  # type: ignore[valid-type]
"""What ``/v1/imports`` takes: every format of the importers (:data:`ctxledger.ingest.FORMATS`), or ``auto``."""
Api = Literal[SERIALIZER_NAMES]  # type: ignore[valid-type]
"""What ``assemble`` serializes for: every API contract of :data:`ctxledger.serialize.SERIALIZER_NAMES`."""
Trace = Literal["summary", "full"]
assert Trace.__args__ == TRACES  # type: ignore[attr-defined]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """An error (RFC 9457 problem details); ``field`` names the request field at fault."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    errors: list[dict[str, Any]] | None = None


class AppendMessages(_Strict):
    """Messages to append to a conversation, in one provider format (created if it does not exist)."""

    format: MessageFormat = "openai-chat"
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=10_000)
    system: str | list[dict[str, Any]] | None = Field(None, description="Anthropic Messages only: the system prompt.")
    title: str | None = Field(None, max_length=500, description="Title of a new conversation.")


class Appended(BaseModel):
    """What an append wrote: the conversation, the new record ids in order, the conversation's head seq."""

    conversation_id: str
    records: list[str]
    head_seq: int


class ImportFile(_Strict):
    """A transcript or trajectory file's text, imported as the CLI's ``ctxledger import`` does."""

    content: str = Field(min_length=1, description="The file's text (JSON or JSONL).")
    filename: str = Field("upload.json", pattern=r"^[A-Za-z0-9._-]{1,120}$", description="Name; its suffix is kept.")
    format: ImportFormat = "auto"
    conversation_id: str | None = Field(None, min_length=1, max_length=300)


class Imported(BaseModel):
    """Conversations and records an import wrote."""

    format: str
    conversation_ids: list[str]
    records: int


def _tokens(name: str, what: str) -> Any:
    """A budget field: the library's bounds (:data:`ctxledger.budget.TOKEN_BOUNDS`) and default, in the schema."""
    least, most = TOKEN_BOUNDS[name]
    default = getattr(DEFAULT_BUDGET, name)
    return Field(None, ge=least, le=most, description=f"{what} (default {default:,}, as in the library and the CLI).")


class AssembleRequest(_Strict):
    """The same request fields as :meth:`ctxledger.Ledger.assemble`; omitted fields take the library's defaults.

    Token counts and ``as_of_seq`` are JSON integers: ``"8000"``, ``8000.5`` and ``true`` are refused (422).
    """

    window_tokens: StrictInt | None = _tokens("window_tokens", "W: the context window, tokens")
    output_tokens: StrictInt | None = _tokens("output_tokens", "O: tokens reserved for the reply")
    margin_tokens: StrictInt | None = _tokens("margin_tokens", "M: safety margin, tokens")
    api: Api | None = None
    model: str | None = Field(None, min_length=1, max_length=200)
    counter: str | None = Field(None, min_length=1, max_length=100, description="Tokenizer name (see the CLI).")
    as_of_seq: StrictInt | None = Field(None, ge=1, description="Assemble as of this seq (inclusive).")
    branch_id: str | None = Field(None, min_length=1)
    participant_id: str | None = Field(None, min_length=1)
    query: str | None = None
    provider: str | None = Field(None, min_length=1)
    agent: str | None = Field(None, min_length=1)
    call_type: str | None = Field(None, min_length=1)
    phase: str | None = Field(None, min_length=1)
    checks_passed: list[str] | None = None
    exact_evidence: StrictBool | list[str] | None = None
    scope: dict[str, str] | None = None
    source_versions: dict[str, str] | None = None
    now: datetime | None = Field(None, description="The call's clock for freshness (ISO 8601 with a zone).")
    tools: list[dict[str, Any]] | None = None
    trace: Trace | None = Field(
        None,
        description="What the stored manifest keeps: 'summary' (the default: included items, omissions counted by "
        "reason and stage; explain replays the rest) or 'full' (every omitted record, decision and mark, and the "
        "payload).",
    )


class Assembled(BaseModel):
    """An assembly: its id, the provider payload, and the token figures of its manifest."""

    assembly_id: str
    conversation_id: str
    payload: dict[str, Any]
    payload_hash: str
    tokens: dict[str, Any]
    included: int
    omitted: int


class Usage(_Strict):
    """Token usage the provider reported for the call made with an assembly."""

    input_tokens: StrictInt = Field(ge=0, le=100_000_000)
    output_tokens: StrictInt = Field(ge=0, le=100_000_000)
    overwrite: StrictBool = False


class ConversationSummary(BaseModel):
    """One conversation: id, number of records (head seq), title."""

    id: str
    events: int
    title: str


class AssemblySummary(BaseModel):
    """One assembly in a list: id, conversation, snapshot seq, when, tokens."""

    id: str
    conversation_id: str
    snapshot_seq: int | None
    created_at: str | None
    model: str | None
    estimated_input: int | None
    observed_input: int | None
