"""An Anthropic tool_result image no provider takes is refused at import, naming it, with nothing written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.ledger import Ledger

B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _messages(image_data: str, at: int) -> list[dict[str, object]]:
    blocks: list[dict[str, object]] = [{"type": "text", "text": "the screen"}] * 2
    blocks.insert(at, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image_data}})
    return [
        {"role": "user", "content": "Take a screenshot."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": blocks}]},
    ]


@settings(max_examples=20, deadline=None)
@given(st.text(alphabet="!@#$% -_.", max_size=8), st.integers(0, 2))
def test_bad_base64_in_a_tool_result_image_is_refused_and_nothing_written(data: str, at: int) -> None:
    ledger = Ledger.open("memory://")
    with pytest.raises(InputError) as err:
        ledger.import_messages(_messages(data, at), api="anthropic-messages", conversation_id="c")
    assert str(err.value.field).endswith(f"content[{at}].source.data")
    assert ledger.conversations() == []


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2))
def test_a_good_tool_result_image_still_imports_and_assembles_for_anthropic(at: int) -> None:
    ledger = Ledger.open("memory://")
    ledger.import_messages(_messages(B64, at), api="anthropic-messages", conversation_id="c")
    asm = ledger.assemble("c", window_tokens=8_000, api="anthropic-messages")
    assert asm.input_tokens > 0
