"""OpenTelemetry: one span per assembly, with the GenAI attributes and ``ctxledger.*`` ones.

Needs only ``opentelemetry-api`` (extra ``otel``); the application configures the SDK and exporters.
:func:`traced_assemble` wraps :meth:`~ctxledger.Ledger.assemble` in a span; :func:`set_assembly_attributes`
puts an assembly's attributes on any span (e.g. one a framework integration opened).

Attribute names are defined here and nowhere else: the OpenTelemetry *Semantic conventions for generative
AI* are at Development stability and may rename them. Message content (the assembled payload's messages or
input items, and its instructions) is recorded only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
is ``true``, the variable those conventions' instrumentations use; otherwise spans carry counts and hashes only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

from ctxledger.assemble.assembler import Assembly
from ctxledger.ledger import Ledger
from ctxledger.serialize import default_model

# -- GenAI semantic conventions (Development stability) ---------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

OPERATION = "chat"
"""The GenAI operation an assembly prepares (``gen_ai.operation.name``)."""

# -- ctxledger attributes -----------------------------------------------------------------------------
ASSEMBLY_ID = "ctxledger.assembly.id"
PAYLOAD_HASH = "ctxledger.payload.hash"
POLICY_HASH = "ctxledger.policy.hash"
POLICY_NAME = "ctxledger.policy.name"
API = "ctxledger.api"
BUDGET_PREFIX = "ctxledger.budget."
"""``ctxledger.budget.{window,output,margin,input,fixed,dynamic}`` (tokens)."""
ESTIMATED_INPUT_TOKENS = "ctxledger.tokens.estimated_input"
INCLUDED_COUNT = "ctxledger.included.count"
OMITTED_COUNT = "ctxledger.omitted.count"
OMITTED_REASON_PREFIX = "ctxledger.omitted.reason."
"""``ctxledger.omitted.reason.<reason>``: how many candidates were left out for that reason."""

_PROVIDERS = {"openai-chat": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic"}
TRACER_NAME = "ctxledger"


def traced_assemble(
    ledger: Ledger, conversation_id: str, *, tracer: trace.Tracer | None = None, **request: Any
) -> Assembly:
    """:meth:`~ctxledger.Ledger.assemble` inside a span ``"chat <model>"`` carrying the assembly's attributes.

    A failed assembly (e.g. ``RequiredBlocksDoNotFit``) is recorded on the span as an exception and re-raised.
    """
    tracer = tracer or trace.get_tracer(TRACER_NAME)
    fields = {**ledger.request_defaults, **request}
    model = fields.get("model") or default_model(str(fields.get("api") or "openai-chat"))
    with tracer.start_as_current_span(f"{OPERATION} {model}", kind=trace.SpanKind.INTERNAL) as span:
        span.set_attribute(GEN_AI_OPERATION_NAME, OPERATION)
        span.set_attribute(GEN_AI_CONVERSATION_ID, conversation_id)
        span.set_attribute(GEN_AI_REQUEST_MODEL, model)
        asm = ledger.assemble(conversation_id, **request)
        set_assembly_attributes(span, asm)
        return asm


def assembly_attributes(asm: Assembly) -> dict[str, Any]:
    """The span attributes of an assembly, from its manifest (content only when capture is on)."""
    manifest = asm.manifest
    budget: Mapping[str, Any] = manifest.get("budget") or {}
    api = str(manifest.get("api", ""))
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: OPERATION,
        GEN_AI_PROVIDER_NAME: str((manifest.get("request") or {}).get("provider") or _PROVIDERS.get(api, api)),
        GEN_AI_REQUEST_MODEL: str(manifest.get("model", "")),
        GEN_AI_CONVERSATION_ID: str(manifest.get("conversation_id", "")),
        GEN_AI_REQUEST_MAX_TOKENS: int(budget.get("output", 0)),
        ASSEMBLY_ID: asm.id,
        PAYLOAD_HASH: asm.payload_hash,
        POLICY_HASH: str((manifest.get("policy") or {}).get("hash", "")),
        POLICY_NAME: str((manifest.get("policy") or {}).get("name", "")),
        API: api,
        ESTIMATED_INPUT_TOKENS: int(asm.input_tokens),
        INCLUDED_COUNT: len(manifest.get("included") or ()),
        OMITTED_COUNT: len(manifest.get("omitted") or ()),
    }
    for part in ("window", "output", "margin", "input", "fixed", "dynamic"):
        if isinstance(budget.get(part), int):
            attributes[BUDGET_PREFIX + part] = budget[part]
    for reason, count in (manifest.get("omitted_by_reason") or {}).items():
        attributes[OMITTED_REASON_PREFIX + str(reason)] = int(count)
    if os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true":
        payload = asm.payload
        attributes[GEN_AI_INPUT_MESSAGES] = json.dumps(
            payload.get("messages", payload.get("input", [])), ensure_ascii=False
        )
        system = payload.get("instructions") or payload.get("system")
        if system:
            attributes[GEN_AI_SYSTEM_INSTRUCTIONS] = system if isinstance(system, str) else json.dumps(system)
    return attributes


def set_assembly_attributes(span: trace.Span, asm: Assembly) -> None:
    """Put :func:`assembly_attributes` on ``span``."""
    span.set_attributes(assembly_attributes(asm))
