"""``sent_messages`` marks a tool message ``is_error`` from the recorded result it was built from, so a call id
that two results share (one failed, one not) marks only the failed one."""

from __future__ import annotations

import pytest

from ctxledger import Ledger, Recorder
from ctxledger.integrations._payload import sent_messages


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_a_repeated_call_id_marks_only_the_failed_result(api: str) -> None:
    ledger = Ledger.open("memory://")
    rec = Recorder(ledger, "c")
    rec.user("Look it up twice.")
    rec.tool_call("lookup", {"q": 1}, "found", call_id="call_0")
    rec.tool_call("lookup", {"q": 2}, "backend down", call_id="call_0", status="failed")
    rec.tool_call("lookup", {"q": 3}, "timeout", call_id="call_9", status="failed")
    asm = ledger.assemble("c", window_tokens=8000, output_tokens=300, api=api)
    tools = [
        m for m in sent_messages(asm, api, {r.id: r for r in ledger.store.records("default", "c")}) if m.role == "tool"
    ]
    # Responses tool messages name no record, so a call id two results share marks neither of them
    expected = [False, False, True] if api == "openai-responses" else [False, True, True]
    assert [m.is_error for m in tools] == expected
