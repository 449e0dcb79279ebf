"""The budget ledger accounts for every token of the request, framing included."""

from __future__ import annotations

import pytest

from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore


@pytest.mark.parametrize(("api", "model"), [("openai-chat", "gpt-4o"), ("anthropic-messages", "claude-sonnet-4-5")])
def test_ledger_total_covers_the_counted_payload(data_dir, api, model):
    """OpenAI: the ledger's total equals the exact count; Anthropic merges adjacent turns, so it may only be over."""
    ledger = Ledger(MemoryStore())
    result = ledger.import_file(data_dir / "mini-swe-agent-deepseek" / "marshmallow-code__marshmallow-1359.traj.json")
    asm = ledger.assemble(result.conversation_ids[0], api=api, model=model, window_tokens=8000, output_tokens=800)
    used, exact = asm.manifest["ledger"]["used_tokens"], asm.manifest["tokens"]["estimated_input"]
    assert asm.manifest["ledger"]["classes"]["framing"]["used"] > 0
    if api == "openai-chat":
        assert used == exact
    else:
        assert exact <= used <= exact + 40
