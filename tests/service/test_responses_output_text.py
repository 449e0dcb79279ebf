"""A Responses ``function_call_output`` array reads the same through the service as through the importer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.service.messages import Answered, read_events

_texts = st.lists(st.text(max_size=40), min_size=1, max_size=5)


def _answer(output: object) -> Answered:
    items = [
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]
    answered = [e for e in read_events("openai-responses", items) if isinstance(e, Answered)]
    assert len(answered) == 1
    return answered[0]


@given(_texts)
def test_an_array_of_text_parts_is_recorded_as_the_texts_joined(texts: list[str]) -> None:
    output = [{"type": "input_text", "text": t} for t in texts]
    assert _answer(output).output == "".join(texts)


@given(_texts, st.integers(min_value=0, max_value=5))
def test_an_array_holding_an_image_is_recorded_as_its_json(texts: list[str], at: int) -> None:
    output: list[dict[str, str]] = [{"type": "input_text", "text": t} for t in texts]
    output.insert(min(at, len(output)), {"type": "input_image", "image_url": "https://example.com/a.png"})
    assert json.loads(_answer(output).output) == output


@given(st.lists(st.tuples(st.booleans(), st.text(max_size=30)), min_size=1, max_size=4))
def test_an_assistants_refusal_parts_are_recorded_as_text_as_the_importers_keep_them(
    parts: list[tuple[bool, str]],
) -> None:
    content = [{"type": "refusal", "refusal": t} if r else {"type": "text", "text": t} for r, t in parts]
    for fmt in ("openai-chat", "openai-responses"):
        (said,) = read_events(fmt, [{"role": "assistant", "content": content}])
        assert said.text == "\n".join(t for _, t in parts)


@given(st.sampled_from(["thinking", "redacted_thinking"]), st.integers(0, 2))
def test_an_anthropic_reasoning_block_is_refused_saying_what_records_it(kind: str, at: int) -> None:
    blocks: list[dict[str, object]] = [{"type": "text", "text": "Let me look."}] * 2
    blocks.insert(at, {"type": kind, "thinking": "hm", "signature": "s"})
    with pytest.raises(InputError) as err:
        read_events("anthropic-messages", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": blocks}])
    assert err.value.field == f"messages[1].content[{at}].type"
    assert "Recorder.tool_calls(thinking=...)" in str(err.value) and "import" in str(err.value)


_NOT_BASE64 = st.text(alphabet="!@#$% -_.", min_size=0, max_size=8)


@given(_NOT_BASE64, st.integers(0, 2))
def test_a_tool_output_image_no_provider_takes_is_refused_naming_it(data: str, at: int) -> None:
    output: list[dict[str, str]] = [{"type": "input_text", "text": "see"}] * 2
    output.insert(at, {"type": "input_image", "image_url": f"data:image/png;base64,{data}"})
    items = [
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]
    with pytest.raises(InputError) as err:
        read_events("openai-responses", items)
    assert err.value.field == f"messages[1].output[{at}].image_url"


_PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _tool_result(blocks: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        {"role": "user", "content": "Take a screenshot."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": blocks}]},
    ]


@given(st.lists(st.text(max_size=20), max_size=3), st.integers(0, 3))
def test_an_anthropic_tool_result_image_is_kept_as_the_importer_keeps_it(texts: list[str], at: int) -> None:
    blocks: list[dict[str, object]] = [{"type": "text", "text": t} for t in texts]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG_B64}}
    blocks.insert(min(at, len(blocks)), image)
    (answered,) = [e for e in read_events("anthropic-messages", _tool_result(blocks)) if isinstance(e, Answered)]
    assert json.loads(answered.output) == blocks


@given(_NOT_BASE64)
def test_an_anthropic_tool_result_image_no_provider_takes_is_refused(data: str) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    with pytest.raises(InputError) as err:
        read_events("anthropic-messages", _tool_result([{"type": "text", "text": "see"}, image]))
    assert err.value.field == "messages[2].content[0].content[1].source"


def test_a_tool_result_image_written_by_the_endpoint_reaches_an_anthropic_payload_as_an_image() -> None:
    from ctxledger import Ledger
    from ctxledger.service.messages import write_events

    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG_B64}}
    ledger = Ledger.open("memory://")
    recorder = ledger.recorder("shots")
    events = read_events("anthropic-messages", _tool_result([{"type": "text", "text": "x"}, image]))
    recorder.atomic(lambda rec: write_events(rec, events))
    asm = ledger.assemble("shots", window_tokens=8_000, api="anthropic-messages")
    results = [b for m in asm.payload["messages"] for b in m["content"] if isinstance(b, dict)]
    (result,) = [b for b in results if b.get("type") == "tool_result"]
    assert any(part.get("type") == "image" for part in result["content"])
