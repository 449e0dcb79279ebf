"""One span per assembly, checked with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxledger import Ledger
from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.integrations import otel


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider.get_tracer("test")
    provider.shutdown()


def _conversation(ledger: Ledger) -> None:
    rec = ledger.recorder("c")
    rec.system("You are terse.")
    for k in range(30):
        rec.user(f"question {k}: " + "words " * 60)
        rec.assistant(f"answer {k}")
    rec.user("the latest question")


def test_an_assembly_span_carries_genai_and_ctxledger_attributes(spans, monkeypatch) -> None:
    monkeypatch.delenv(otel.CAPTURE_CONTENT_ENV, raising=False)
    exporter, tracer = spans
    with Ledger.open("memory://") as ledger:
        _conversation(ledger)
        asm = otel.traced_assemble(ledger, "c", tracer=tracer, model="gpt-4o", window_tokens=1500, output_tokens=200)
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == "chat gpt-4o"
    assert (a[otel.GEN_AI_OPERATION_NAME], a[otel.GEN_AI_PROVIDER_NAME], a[otel.GEN_AI_REQUEST_MODEL]) == ("chat", "openai", "gpt-4o")
    assert (a[otel.GEN_AI_CONVERSATION_ID], a[otel.GEN_AI_REQUEST_MAX_TOKENS]) == ("c", 200)
    assert (a[otel.ASSEMBLY_ID], a[otel.PAYLOAD_HASH]) == (asm.id, asm.payload_hash)
    assert a[otel.POLICY_HASH] == asm.manifest["policy"]["hash"]
    assert a[otel.BUDGET_PREFIX + "window"] == 1500 and a[otel.ESTIMATED_INPUT_TOKENS] == asm.input_tokens
    assert a[otel.INCLUDED_COUNT] == len(asm.manifest["included"])
    omitted = {k.removeprefix(otel.OMITTED_REASON_PREFIX): v for k, v in a.items() if k.startswith(otel.OMITTED_REASON_PREFIX)}
    assert omitted == asm.manifest["omitted_by_reason"] and sum(omitted.values()) == a[otel.OMITTED_COUNT] > 0
    assert otel.GEN_AI_INPUT_MESSAGES not in a  # no content unless capture is on


def test_content_only_when_the_capture_variable_is_set(spans, monkeypatch) -> None:
    monkeypatch.setenv(otel.CAPTURE_CONTENT_ENV, "true")
    exporter, tracer = spans
    with Ledger.open("memory://") as ledger:
        _conversation(ledger)
        asm = otel.traced_assemble(ledger, "c", tracer=tracer, api="anthropic-messages", model="claude-sonnet-4-5", window_tokens=1500, output_tokens=200)
    (span,) = exporter.get_finished_spans()
    assert span.attributes[otel.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert json.loads(span.attributes[otel.GEN_AI_INPUT_MESSAGES]) == asm.payload["messages"]
    assert span.attributes[otel.GEN_AI_SYSTEM_INSTRUCTIONS] == "You are terse."


def test_a_failed_assembly_is_an_errored_span(spans) -> None:
    exporter, tracer = spans
    with Ledger.open("memory://") as ledger:
        _conversation(ledger)
        ledger.recorder("c").user("a latest question far larger than the window: " + "token " * 800)
        with pytest.raises(RequiredBlocksDoNotFit):
            otel.traced_assemble(ledger, "c", tracer=tracer, window_tokens=300, output_tokens=200, margin_tokens=10)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert span.events[0].name == "exception"
