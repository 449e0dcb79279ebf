"""Builds the records of one imported conversation with deterministic ids and times.

Shape: one source conversation becomes ``Conversation(id=C, branch_id=C/main)``,
``Branch(id=C/main)``, its ``Participant`` records (``C/participant/<key>``), then the history in
source order with ids ``C/0``, ``C/1`` … The same input therefore always yields the same ids, so a
re-import is detected by the store instead of duplicating history.

Times: a record takes the source's timestamp when it has one; a record without one takes the last
timestamp seen before it; with no timestamp seen yet it takes ``start + n`` seconds (``n`` its history position),
``start`` being :attr:`ParseOptions.start_time`, by default :data:`BASE_TIME`. By default imports never read the
wall clock, so they are reproducible; a caller whose retention rules count age from the import passes the import
time as ``start_time``.

Tool pairing: a result must answer a call that exists and is still open; a call may be answered
once; a call id may be reused after its earlier call was answered (sequential pairing: tau-bench's
real logs reuse ids). A call never answered stays a pending ``ToolCall`` (e.g. mini-swe-agent's final
submit call).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ctxledger.conversation_ids import check_conversation_id
from ctxledger.errors import InputError
from ctxledger.hashing import sha256_hex
from ctxledger.ingest._batch import ParsedConversation
from ctxledger.ingest._fields import Loc
from ctxledger.records import (
    Branch,
    Conversation,
    Message,
    Participant,
    Record,
    ToolArtifact,
    ToolCall,
    ToolStatus,
    Trust,
)

BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)
"""Time of the first history record of a source without timestamps (later ones: +1 s each)."""


ProgressCallback = Callable[[int, int], None]
"""``on_progress(done, total)``: units done so far and the total (records or trajectories)."""

R = TypeVar("R", bound=Record)


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """What every format parser needs besides the data.

    Attributes:
        source: file name (or ``"<api>"``) used in errors and in ``meta["source_file"]``.
        stem: default conversation id (file name without ``.json``/``.jsonl``/``.traj`` suffixes).
        tenant_id: tenant of every record.
        conversation_id: overrides ``stem`` (for multi-conversation inputs it replaces the prefix).
        on_progress: called as ``on_progress(done, total)`` while parsing.
        start_time: the time of records without a timestamp of their own when none was seen before them
            (``start_time + n`` seconds, ``n`` the record's history position); ``None`` = :data:`BASE_TIME`.
    """

    source: str
    stem: str
    tenant_id: str = "default"
    conversation_id: str | None = None
    on_progress: ProgressCallback | None = None
    start_time: datetime | None = None

    def __post_init__(self) -> None:
        """Refuse a given ``conversation_id`` that cannot be one (never fall back to the stem silently).

        Raises:
            InputError: names ``source`` and ``conversation_id`` (empty, blank, padded, control characters,
                empty ``/`` segments; see :mod:`ctxledger.conversation_ids`), or ``start_time`` without a
                time zone.
        """
        if self.conversation_id is not None:
            check_conversation_id(self.conversation_id, source=self.source)
        if self.start_time is not None and self.start_time.utcoffset() is None:
            raise InputError(
                f"start_time must be a timezone-aware datetime, got {self.start_time.isoformat()}",
                source=self.source,
                field="start_time",
            )

    def single_id(self) -> str:
        """Conversation id of a single-conversation input: the override or the stem."""
        return self.conversation_id or self.stem

    def multi_id(self, key: str) -> str:
        """Conversation id of one conversation of a multi-conversation input: ``<prefix>-<key>``."""
        return f"{self.single_id()}-{key}"

    def progress(self, done: int, total: int) -> None:
        """Report progress if a callback was given."""
        if self.on_progress is not None:
            self.on_progress(done, total)



def epoch_time(value: float) -> datetime:
    """An aware UTC datetime from POSIX seconds."""
    return datetime.fromtimestamp(value, tz=UTC)


class ConversationBuilder:
    """Collects the records and blobs of one conversation (see the module docstring)."""

    def __init__(
        self,
        conversation_id: str,
        options: ParseOptions,
        fmt: str,
        *,
        title: str = "",
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Start a conversation ``conversation_id`` read as format ``fmt``; ``meta`` goes on its record."""
        self.conversation_id = conversation_id
        self.branch_id = f"{conversation_id}/main"
        self.options = options
        self._fmt = fmt
        self._title = title
        self._meta = dict(meta or {})
        self._participants: dict[str, Participant] = {}
        self._history: list[Record] = []
        self._blobs: dict[str, tuple[bytes, str]] = {}
        self._open_calls: dict[str, ToolCall] = {}
        self._closed_calls: set[str] = set()
        self._last_time: datetime | None = None

    # -- participants and envelope -------------------------------------------------------------

    def participant(self, key: str, *, role: str, name: str, model: str | None = None) -> str:
        """Return the id of participant ``key``, creating its record on first use."""
        pid = f"{self.conversation_id}/participant/{key}"
        if key not in self._participants:
            self._participants[key] = Participant(
                **self._scope(pid),
                trust=Trust.SYSTEM,
                role=role,
                name=name,
                model=model,
                meta={"source_file": self.options.source},
            )
        return pid

    def start_clock(self, at: datetime) -> None:
        """Make records without their own timestamp start at ``at`` instead of ``BASE_TIME``."""
        self._last_time = at

    def add(
        self,
        cls: type[R],
        loc: Loc,
        *,
        owner: str | None,
        trust: Trust,
        at: datetime | None = None,
        external_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> R:
        """Append a history record of type ``cls`` with the next id and the envelope filled in.

        ``meta`` is merged with ``source_file``, ``source_index`` and ``source_path`` (from ``loc``).
        """
        record = cls(
            **self._scope(f"{self.conversation_id}/{len(self._history)}"),
            created_at=self._time(at),
            owner_participant_id=owner,
            trust=trust,
            external_id=external_id,
            meta=self._meta_for(loc, meta),
            **fields,
        )
        self._history.append(record)
        return record

    # -- tool calls and results ----------------------------------------------------------------

    def add_call(
        self,
        message: Message,
        loc: Loc,
        field: str,
        *,
        call_id: str,
        name: str,
        arguments: str,
        index: int,
        meta: Mapping[str, Any] | None = None,
    ) -> ToolCall:
        """Record a call of ``message`` (pending until a result answers it).

        A call id may be reused once its earlier call was answered (tau-bench's real logs do this);
        results pair with the open call of that id.

        Raises:
            InputError: a call with ``call_id`` is still unanswered (names ``field``).
        """
        if call_id in self._open_calls:
            raise loc.error(f"tool call id {call_id!r} is reused while its earlier call is unanswered", field)
        call = self.add(
            ToolCall,
            loc,
            owner=message.owner_participant_id,
            trust=Trust.VERIFIED_INTERNAL,
            at=message.created_at,
            meta=meta,
            owner_model_run_id=message.owner_model_run_id,
            message_id=message.id,
            call_id=call_id,
            name=name,
            arguments=arguments,
            index=index,
            status=ToolStatus.PENDING,
        )
        self._open_calls[call_id] = call
        return call

    def open_call(self, call_id: str) -> ToolCall | None:
        """The unanswered call with ``call_id``, if any."""
        return self._open_calls.get(call_id)

    def add_result(
        self,
        loc: Loc,
        field: str,
        *,
        call_id: str,
        data: bytes,
        media_type: str,
        status: ToolStatus,
        owner: str | None,
        at: datetime | None = None,
        external_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> ToolArtifact:
        """Record the raw result ``data`` of the open call ``call_id`` and close that call.

        Raises:
            InputError: no call ``call_id`` was made, or it was already answered (names ``field``).
        """
        call = self._open_calls.pop(call_id, None)
        if call is None:
            known = (
                "was already answered" if call_id in self._closed_calls else "matches no earlier tool call"
            )
            raise loc.error(f"tool result for call id {call_id!r} {known}", field)
        self._closed_calls.add(call_id)
        sha256 = self.put_blob(data, media_type)
        return self.add(
            ToolArtifact,
            loc,
            owner=owner,
            trust=Trust.TOOL_RESULT,
            at=at,
            external_id=external_id,
            meta=meta,
            tool_call_id=call.id,
            call_id=call_id,
            name=call.name,
            sha256=sha256,
            size_bytes=len(data),
            media_type=media_type,
            status=status,
        )

    def put_blob(self, data: bytes, media_type: str) -> str:
        """Keep ``data`` for the blob store and return its sha256 hex."""
        sha256 = sha256_hex(data)
        self._blobs.setdefault(sha256, (data, media_type))
        return sha256

    # -- finishing -----------------------------------------------------------------------------

    def finish(self) -> ParsedConversation:
        """Return the conversation: Conversation, Branch, Participants, then history records."""
        at = self._history[0].created_at if self._history else self._start()
        conv_meta = {**self._meta, "source_file": self.options.source, "format": self._fmt}
        head: list[Record] = [
            Conversation(
                **self._scope(self.conversation_id),
                created_at=at,
                trust=Trust.SYSTEM,
                title=self._title,
                meta=conv_meta,
            ),
            Branch(
                **self._scope(self.branch_id),
                created_at=at,
                trust=Trust.SYSTEM,
                name="main",
                meta={"source_file": self.options.source},
            ),
        ]
        participants = [dataclasses.replace(p, created_at=at) for p in self._participants.values()]
        return ParsedConversation(
            conversation_id=self.conversation_id,
            records=[*head, *participants, *self._history],
            blobs=dict(self._blobs),
        )

    # -- helpers -------------------------------------------------------------------------------

    def _scope(self, record_id: str) -> dict[str, Any]:
        return {
            "id": record_id,
            "tenant_id": self.options.tenant_id,
            "conversation_id": self.conversation_id,
            "branch_id": self.branch_id,
        }

    def _time(self, at: datetime | None) -> datetime:
        if at is not None:
            self._last_time = at
            return at
        if self._last_time is not None:
            return self._last_time
        return self._start() + timedelta(seconds=len(self._history))

    def _start(self) -> datetime:
        return self.options.start_time if self.options.start_time is not None else BASE_TIME

    def _meta_for(self, loc: Loc, meta: Mapping[str, Any] | None) -> dict[str, Any]:
        out = {k: v for k, v in (meta or {}).items() if v is not None}
        out["source_file"] = loc.source
        if loc.index is not None:
            out["source_index"] = loc.index
        path = loc.path()
        if path is not None:
            out["source_path"] = path
        return out
