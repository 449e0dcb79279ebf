"""Importers: agent transcripts and trajectories → execution-graph records.

Two phases, so that bad input never leaves a partial import behind:

1. **parse** — :func:`parse_file` (or :func:`parse_openai_messages` / :func:`parse_anthropic` for
   in-memory data) reads and validates the whole input and returns an :class:`ImportBatch` of records
   and blobs. Bad input (malformed JSON, a tool result whose call is unknown, a missing or wrong-typed
   field) raises :class:`~ctxledger.errors.InputError` naming the file, the record index and the field.
2. **write** — :func:`write_batch` puts the blobs and appends every record in one transaction.

Formats (``fmt``): ``openai-chat``, ``openai-responses``, ``anthropic-messages``, ``tau-bench``, ``mini-swe-agent``,
``swe-agent``, ``toolbench``, ``locomo``, ``bfcl-memory``; ``auto`` tells them apart by content (rules
in :mod:`ctxledger.ingest._sniff`). Each format's module documents its source and mapping.

Ids are deterministic: a conversation is ``<file stem>`` (``<file stem>-<key>`` for files holding many,
e.g. ``-task3-trial1`` for tau-bench, ``-conv-26`` for LoCoMo), its records ``<conversation>/<n>``, so
importing the same source twice is refused instead of duplicating history. Times come from the source, else from
``start_time`` (by default the fixed :data:`BASE_TIME`, 2024-01-01 UTC, so an import never reads the clock unless
the caller passes it).

Example::

    with rich_progress("tau-bench") as on_progress:
        batch = parse_file("gpt-4o-airline.json", on_progress=on_progress)
    result = write_batch(store, batch)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxledger.errors import ConfigurationError, InputError
from ctxledger.hashing import content_hash
from ctxledger.ingest import (
    anthropic_messages,
    bfcl_memory,
    locomo,
    mini_swe_agent,
    openai_chat,
    openai_responses,
    swe_agent,
    tau_bench,
    toolbench,
)
from ctxledger.ingest._batch import ImportBatch, ImportResult, ParsedConversation, check_batch, write_batch
from ctxledger.ingest._builder import BASE_TIME, ParseOptions, ProgressCallback
from ctxledger.ingest._load import Loaded, check_value, load_file, stem_of
from ctxledger.ingest._progress import rich_progress
from ctxledger.ingest._sniff import FORMATS, sniff

__all__ = [
    "BASE_TIME",
    "FORMATS",
    "ImportBatch",
    "ImportResult",
    "ParsedConversation",
    "ProgressCallback",
    "check_batch",
    "parse_anthropic",
    "parse_file",
    "parse_openai_messages",
    "parse_openai_responses",
    "rich_progress",
    "write_batch",
]

API_SOURCE = "<api>"

_PARSERS: Mapping[str, Callable[[Loaded, ParseOptions], ImportBatch]] = {
    anthropic_messages.FORMAT: anthropic_messages.parse,
    bfcl_memory.FORMAT: bfcl_memory.parse,
    locomo.FORMAT: locomo.parse,
    mini_swe_agent.FORMAT: mini_swe_agent.parse,
    openai_chat.FORMAT: openai_chat.parse,
    openai_responses.FORMAT: openai_responses.parse,
    swe_agent.FORMAT: swe_agent.parse,
    tau_bench.FORMAT: tau_bench.parse,
    toolbench.FORMAT: toolbench.parse,
}


def parse_file(
    path: str | Path,
    fmt: str = "auto",
    *,
    tenant_id: str = "default",
    conversation_id: str | None = None,
    on_progress: ProgressCallback | None = None,
    start_time: datetime | None = None,
) -> ImportBatch:
    """Read and validate one source file; nothing is written.

    Args:
        path: the file (JSON, or JSON Lines: see :mod:`ctxledger.ingest._load`).
        fmt: one of :data:`FORMATS`, or ``"auto"`` to tell it by content.
        tenant_id: tenant of every record.
        conversation_id: id of the conversation (default: the file stem); for files holding many
            conversations, the prefix of their ids.
        on_progress: called as ``on_progress(done, total)`` per message of a single-conversation file,
            or per conversation/trajectory of a multi-conversation file.
        start_time: aware time of the records that carry no timestamp and follow none (``start_time + n``
            seconds, ``n`` the history position); ``None`` = :data:`BASE_TIME` (2024-01-01 UTC), so the same
            file always gives the same records.

    Returns:
        The parsed batch (records and blobs of every conversation in the file).

    Raises:
        ConfigurationError: ``fmt`` is not a known format.
        InputError: the file is unreadable, malformed, of an undeterminable format (the message lists
            the formats), or holds bad records (names file, record index and field).
    """
    _check_format(fmt)
    path = Path(path)
    source = str(path)
    loaded = load_file(path, source)
    chosen = sniff(loaded.value, source) if fmt == "auto" else fmt
    options = ParseOptions(
        source=source,
        stem=stem_of(path),
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        on_progress=on_progress,
        start_time=start_time,
    )
    return _PARSERS[chosen](loaded, options)


def parse_openai_messages(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    tenant_id: str = "default",
    conversation_id: str | None = None,
    on_progress: ProgressCallback | None = None,
    start_time: datetime | None = None,
) -> ImportBatch:
    """Parse in-memory OpenAI Chat Completions messages (and ``tools``) as one conversation.

    The default conversation id is ``api-<12 hex>`` from the content hash of the input, so the same
    messages always get the same ids. Errors name the source ``"<api>"``, the message index and field.
    ``start_time`` dates the messages as in :func:`parse_file` (messages carry no timestamps).

    Raises:
        InputError: bad messages or tools, or values JSON cannot represent.
    """
    payload: dict[str, Any] = {"messages": _json_list(messages, "messages")}
    if tools is not None:
        payload["tools"] = _json_list(tools, "tools")
    check_value(payload, API_SOURCE)
    options = _api_options(payload, tenant_id, conversation_id, on_progress, start_time)
    return openai_chat.parse(Loaded(payload), options)


def parse_anthropic(
    payload_or_messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    tenant_id: str = "default",
    conversation_id: str | None = None,
    on_progress: ProgressCallback | None = None,
    start_time: datetime | None = None,
) -> ImportBatch:
    """Parse an in-memory Anthropic Messages request (``{system, tools, messages}``) or message list.

    Default conversation id and errors as in :func:`parse_openai_messages`.

    Raises:
        InputError: bad messages, blocks or tools, or values JSON cannot represent.
    """
    if isinstance(payload_or_messages, Mapping):
        payload: Any = dict(payload_or_messages)
    else:
        payload = _json_list(payload_or_messages, "messages")
    check_value(payload, API_SOURCE)
    options = _api_options(payload, tenant_id, conversation_id, on_progress, start_time)
    return anthropic_messages.parse(Loaded(payload), options)


def parse_openai_responses(
    payload_or_items: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    tenant_id: str = "default",
    conversation_id: str | None = None,
    on_progress: ProgressCallback | None = None,
    start_time: datetime | None = None,
) -> ImportBatch:
    """Parse an in-memory OpenAI Responses history (``{instructions, input, tools, output}``) or item list.

    Default conversation id and errors as in :func:`parse_openai_messages`.

    Raises:
        InputError: bad items, parts or tools, or values JSON cannot represent.
    """
    if isinstance(payload_or_items, Mapping):
        payload: Any = dict(payload_or_items)
    else:
        payload = _json_list(payload_or_items, "input items")
    options = _api_options(payload, tenant_id, conversation_id, on_progress, start_time)
    return openai_responses.parse(Loaded(payload), options)


def _check_format(fmt: str) -> None:
    if fmt != "auto" and fmt not in _PARSERS:
        raise ConfigurationError(f"unknown import format {fmt!r}; expected 'auto' or one of {', '.join(FORMATS)}")


def _json_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InputError(f"expected a sequence of {what}, got {type(value).__name__}", source=API_SOURCE)
    return list(value)


def _api_options(
    payload: Any,
    tenant_id: str,
    conversation_id: str | None,
    on_progress: ProgressCallback | None,
    start_time: datetime | None = None,
) -> ParseOptions:
    try:
        digest = content_hash(payload)
    except (TypeError, ValueError) as exc:
        raise InputError(f"input is not JSON-representable: {exc}", source=API_SOURCE) from exc
    stem = f"api-{digest.split(':', 1)[1][:12]}"
    return ParseOptions(
        source=API_SOURCE,
        stem=stem,
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        on_progress=on_progress,
        start_time=start_time,
    )
