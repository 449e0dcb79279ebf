"""``sent_messages`` marks a tool message ``is_error`` from the recorded result it was built from, so a call id
that two results share (one failed, one not) marks only the failed one; a Responses tool output made of parts
(an image) reads back as the parts' text."""

from __future__ import annotations

import base64
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

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


@settings(max_examples=15, deadline=None)
@given(width=st.integers(1, 80), height=st.integers(1, 80), note=st.sampled_from(["Screenshot:", "chart", ""]))
def test_a_responses_tool_image_reads_back_as_its_text_never_its_base64(width: int, height: int, note: str) -> None:
    """The assembled ``function_call_output`` holds the image as a part; the framework gets the parts' text."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (3, width % 256, height % 256)).save(buffer, "PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    ledger = Ledger.open("memory://")
    rec = Recorder(ledger, "c")
    rec.user("Take a screenshot.")
    rec.tool_call("shot", {}, json.dumps({"note": note, "image": f"data:image/png;base64,{data}"}), call_id="call_1")
    asm = ledger.assemble("c", window_tokens=8000, output_tokens=300, api="openai-responses")
    (output,) = [i["output"] for i in asm.payload["input"] if i["type"] == "function_call_output"]
    assert [p["type"] for p in output] == ["input_text", "input_image"]
    records = {r.id: r for r in ledger.store.records("default", "c")}
    (tool,) = [m for m in sent_messages(asm, "openai-responses", records) if m.role == "tool"]
    assert tool.text == tool.content == output[0]["text"] and "[image 1: image/png" in tool.text
    assert data[:40] not in tool.text
