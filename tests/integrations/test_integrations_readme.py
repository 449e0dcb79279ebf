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
    expected = [re.search(r"#\s*(.+)$", line).group(1).strip() for line in code.splitlines() if line.startswith("print(")]
    out = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), scope)  # the README's own example
    scope["ledger"].close()
    assert out.getvalue().splitlines() == expected
