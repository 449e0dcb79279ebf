"""The CLI's tables preview records; a line holding a secret is withheld there as it is in the payload.

``assemble --show omitted`` / ``--show included`` and ``explain ASSEMBLY`` print a short text of each record. A
record left out because it holds a secret (or a latest user turn sent redacted) must not show the secret in
that preview: generated secrets of every single-line format, placed in a user message, an assistant message and
a tool call's arguments of an imported OpenAI Chat transcript.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secret_corpus import FORMATS, MULTILINE, draw
from typer.testing import CliRunner

from ctxledger.cli import app

SINGLE_LINE = sorted(set(FORMATS) - MULTILINE)


def _transcript(secret: str) -> list[dict[str, object]]:
    call = {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": json.dumps({"value": secret})}}
    return [
        {"role": "user", "content": f"my key is {secret}, keep it safe"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "stored"},
        {"role": "assistant", "content": f"Your key is {secret} now."},
        {"role": "user", "content": f"and once more: {secret}"},
    ]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(SINGLE_LINE), seed=st.integers(0, 10_000))
def test_no_table_or_explanation_shows_a_secret(tmp_path_factory, fmt: str, seed: int) -> None:
    secret, fingerprints = draw(fmt, seed)
    folder = tmp_path_factory.mktemp("leak")
    source = folder / "leak.json"
    source.write_text(json.dumps(_transcript(secret)))
    url = f"sqlite:///{Path(folder, 'r.db')}"
    runner = CliRunner()
    imported = runner.invoke(app, ["--db", url, "import", str(source), "--conversation-id", "leak"])
    assert imported.exit_code == 0, imported.output
    outputs = []
    for show in ("omitted", "included"):
        result = runner.invoke(app, ["--db", url, "assemble", "leak", "--show", show], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout + result.stderr)
    asm_id = next(w for w in outputs[0].split() if w.startswith("asm_"))
    explained = runner.invoke(app, ["--db", url, "explain", asm_id], env={"COLUMNS": "400"})
    assert explained.exit_code == 0, explained.output
    outputs.append(explained.stdout + explained.stderr)
    assert "secret" in outputs[0]  # the omitted records are listed …
    for text in outputs:
        for fingerprint in fingerprints:  # … and no preview shows any run of the secret that identifies it
            assert fingerprint[-12:] not in text and fingerprint[:16] not in text
