"""The span ``traced_assemble`` opens is named and attributed after the model the assembly is for: the API's own
default model when the request names none (``claude-sonnet-4-5`` for ``anthropic-messages``), or the ledger's
request defaults, not always ``gpt-4o``."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxledger import Ledger, Recorder
from ctxledger.errors import NoRoomForInput
from ctxledger.integrations.otel import traced_assemble


@pytest.mark.parametrize(
    ("request_fields", "model"),
    [
        ({}, "gpt-4o"),
        ({"api": "anthropic-messages"}, "claude-sonnet-4-5"),
        ({"api": "anthropic-messages", "model": "claude-opus-4-1"}, "claude-opus-4-1"),
    ],
)
def test_the_span_names_the_model_assembled_for(request_fields: dict[str, str], model: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ledger = Ledger.open("memory://")
    Recorder(ledger, "c").user("Hello!")
    tracer = provider.get_tracer("t")
    asm = traced_assemble(ledger, "c", tracer=tracer, window_tokens=8000, output_tokens=500, **request_fields)
    assert asm.manifest["model"] == model
    with pytest.raises(NoRoomForInput):
        traced_assemble(ledger, "c", tracer=tracer, window_tokens=100, output_tokens=500, **request_fields)
    for span in exporter.get_finished_spans():
        assert span.name == f"chat {model}"
        assert span.attributes["gen_ai.request.model"] == model
