"""Each framework example of the README's "Inside the agent loop" section runs as written and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re

import pytest


@pytest.mark.parametrize(
    "marker",
    [
        "LedgerInputFilter(ledger",
        "LedgerMiddleware(ledger",
        "LedgerCapability(ledger",
        "traced_assemble(ledger",
        "rec.record_response(completion)",
    ],
)
def test_readme_integration_example_runs_as_written(readme_block, marker: str, monkeypatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    code = readme_block("python", marker)
    expected = [
        re.search(r"#\s*(.+)$", line).group(1).strip() for line in code.splitlines() if line.startswith("print(")
    ]
    out = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), scope)  # the README's own example
    scope["ledger"].close()
    assert out.getvalue().splitlines() == expected


def test_the_agents_sdk_example_records_no_trace_for_openais_exporter(readme_block, monkeypatch) -> None:
    """With OPENAI_API_KEY set, the SDK exports run traces to OpenAI unless the run disables tracing."""
    pytest.importorskip("agents")
    from agents.tracing import get_trace_provider

    provider = get_trace_provider()
    create_trace = provider.create_trace
    asked: list[bool] = []

    def recording(*args, **kwargs):
        asked.append(bool(kwargs.get("disabled", False)))
        return create_trace(*args, **kwargs)

    monkeypatch.setattr(provider, "create_trace", recording)
    code = readme_block("python", "LedgerInputFilter(ledger")
    scope: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "README.md", "exec"), scope)  # the README's own example
    scope["ledger"].close()
    assert asked and all(asked), asked


def test_the_otel_example_says_it_needs_the_sdk(readme_block) -> None:
    """The example builds a TracerProvider from opentelemetry-sdk, which the otel extra (API only) does not install."""
    from pathlib import Path

    code = readme_block("python", "traced_assemble(ledger")
    assert "opentelemetry.sdk" in code
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    before = readme[: readme.index(code)]
    assert "opentelemetry-sdk" in before[before.rindex("**OpenTelemetry**") :]
