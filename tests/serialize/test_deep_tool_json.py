"""Call arguments and tool output holding JSON nested past what the decoder handles are opaque text.

A stored record must never make every later assembly fail: arguments the model wrote and output a tool
returned are kept as written when they do not decode (too deep, malformed), the assembly succeeds in every
format, and the payload passes the provider SDK's request types.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serialize_helpers import sdk_valid_anthropic, sdk_valid_openai, sdk_valid_responses

from ctxledger import Ledger
from ctxledger.ingest import parse_openai_messages, write_batch
from ctxledger.json_text import MAX_DEPTH, UNDECODABLE, canonical_or_raw, decode_json, is_json
from ctxledger.serialize import SERIALIZER_NAMES
from ctxledger.testing import MemoryStore

VALID = {
    "openai-chat": sdk_valid_openai,
    "anthropic-messages": sdk_valid_anthropic,
    "openai-responses": sdk_valid_responses,
}

depths = st.integers(MAX_DEPTH + 1, 2_500) | st.sampled_from([1_200, 1_500])
"""Nesting past :data:`MAX_DEPTH`, and past the interpreter's recursion limit (about 1,000)."""
shapes = st.sampled_from(["object", "array"])


def _nested(depth: int, shape: str) -> str:
    return '{"a":' * depth + "1" + "}" * depth if shape == "object" else "[" * depth + "]" * depth


def _assembles_everywhere(ledger: Ledger, conversation: str, arguments: str) -> None:
    """Assembly succeeds in every format, the payload is SDK-valid, and the arguments reach the model whole."""
    for api in SERIALIZER_NAMES:
        asm = ledger.assemble(conversation, window_tokens=40_000, output_tokens=100, margin_tokens=0, api=api)
        VALID[api](asm.payload)
        body = json.dumps(asm.payload)
        if api == "anthropic-messages":  # tool_use input must be an object: the text rides in _raw_arguments
            blocks = [b for m in asm.payload["messages"] if isinstance(m["content"], list) for b in m["content"]]
            inputs = [b["input"] for b in blocks if b["type"] == "tool_use"]
            assert inputs and all(i == {"_raw_arguments": arguments} for i in inputs)
        else:
            assert json.dumps(arguments)[1:-1] in body


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=depths, shape=shapes, twice=st.booleans())
def test_imported_deep_arguments_assemble_in_every_format(depth: int, shape: str, twice: bool) -> None:
    """``arguments`` holding JSON nested ``depth`` levels: the import is accepted and every assembly succeeds."""
    deep = _nested(depth, shape)
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for n in range(2 if twice else 1):  # twice: the repeated-call check compares the arguments too
        call = {"id": f"c{n}", "type": "function", "function": {"name": "g", "arguments": deep}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "ok"},
        ]
    messages.append({"role": "assistant", "content": "done"})
    ledger = Ledger(MemoryStore())
    write_batch(ledger.store, parse_openai_messages(messages, conversation_id="deepargs"))
    _assembles_everywhere(ledger, "deepargs", deep)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=depths, shape=shapes, output_depth=depths)
def test_recorded_deep_arguments_and_output_assemble_in_every_format(depth: int, shape: str, output_depth: int):
    """``Recorder.tool_call`` with deep arguments, then with a deep output: recorded, output kept as text."""
    deep, output = _nested(depth, shape), _nested(output_depth, "array")
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("c")
    rec.user("go")
    rec.tool_call("g", deep, "ok")
    exchange = rec.tool_call("g", deep, output)
    rec.assistant("done")
    artifact = ledger.store.get("default", exchange.artifact)
    assert artifact.media_type.startswith("text/plain")
    assert ledger.store.blobs.get(artifact.sha256) == output.encode("utf-8")
    _assembles_everywhere(ledger, "c", deep)


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(1, 2 * MAX_DEPTH), shape=shapes)
def test_decode_json_gives_values_up_to_the_depth_limit_and_text_beyond(depth: int, shape: str) -> None:
    text = _nested(depth, shape)
    value = decode_json(text)
    if depth <= MAX_DEPTH:
        assert value == json.loads(text) and is_json(text)
        assert canonical_or_raw(text) == json.dumps(value, separators=(",", ":"))
    else:
        assert value is UNDECODABLE and not is_json(text) and canonical_or_raw(text) == text


@pytest.mark.parametrize("text", ["{", "NaN", '{"a": NaN}', "9" * 5_000, "[" * 100_000, "", "null"])
def test_decode_json_never_raises(text: str) -> None:
    value = decode_json(text)
    assert value is UNDECODABLE or json.loads(text) == value or text in ("NaN", '{"a": NaN}')
    assert isinstance(canonical_or_raw(text), str)


@settings(max_examples=10, deadline=None)
@given(depth=depths, shape=shapes)
def test_the_integrations_and_toolbench_read_deep_text_as_no_arguments_and_no_error(depth: int, shape: str):
    """Where an integration reads a recorded call's arguments, or ToolBench a result's error, deep text is opaque."""
    from types import SimpleNamespace

    from ctxledger.ingest.toolbench import result_error
    from ctxledger.integrations._loop import _arguments
    from ctxledger.integrations.langchain import _args

    deep = _nested(depth, shape)
    assert _arguments(SimpleNamespace(arguments=deep)) == {} and _args(deep) == {}
    assert result_error(deep) == ""
