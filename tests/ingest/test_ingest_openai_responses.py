"""Importing OpenAI Responses histories: items to records, reasoning pinned to its calls, round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.ingest import parse_file, parse_openai_responses
from ctxledger.records import Message, SkillState, ToolArtifact, ToolCall

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look up both cities."}],
    "encrypted_content": "gAAAAABpZ0xyZW5jcnlwdGVk",
}
HISTORY = {
    "instructions": "You are a weather bot.",
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "strict": True,
        }
    ],
    "input": [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        REASONING,
        {"type": "function_call", "call_id": "call_p", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call", "call_id": "call_o", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_p", "output": "18C sunny"},
        {"type": "function_call_output", "call_id": "call_o", "output": [{"type": "input_text", "text": "4C rain"}]},
    ],
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Paris 18C, Oslo 4C.", "annotations": []}],
        }
    ],
}


def test_items_become_records_with_reasoning_on_the_calling_message() -> None:
    batch = parse_openai_responses(HISTORY, conversation_id="w")
    records = batch.conversations[0].records
    messages = [r for r in records if isinstance(r, Message)]
    assert [(m.role.value, m.content) for m in messages] == [
        ("system", "You are a weather bot."),
        ("user", "Weather in Paris and Oslo?"),
        ("assistant", None),
        ("assistant", "Paris 18C, Oslo 4C."),
    ]
    caller = messages[2]
    assert caller.meta["thinking"] == [REASONING] and caller.meta["thinking_at"] == [0]
    calls = [r for r in records if isinstance(r, ToolCall)]
    assert [(c.call_id, c.message_id, c.index) for c in calls] == [("call_p", caller.id, 0), ("call_o", caller.id, 1)]
    assert len([r for r in records if isinstance(r, ToolArtifact)]) == 2
    (skills,) = [r for r in records if isinstance(r, SkillState)]
    assert skills.tool_schemas[0]["function"]["strict"] is True
    assert messages[3].external_id == "msg_1"


def test_a_round_trip_sends_the_reasoning_back_with_its_calls(tmp_path: Path) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        ledger.import_messages(
            HISTORY["input"] + HISTORY["output"],
            tools=HISTORY["tools"],
            api="openai-responses",
            system=HISTORY["instructions"],
            conversation_id="w",
        )
        asm = ledger.assemble("w", api="openai-responses", model="gpt-5", window_tokens=8000, output_tokens=500)
        items = asm.payload["input"]
        assert asm.payload["instructions"] == "You are a weather bot."
        assert [i["type"] for i in items] == [
            "message",
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message",
        ]
        assert items[1] == REASONING
        assert ["18C sunny" in items[4]["output"], "4C rain" in items[5]["output"]] == [True, True]
        assert asm.payload["tools"][0]["strict"] is True
        chat = ledger.assemble("w", api="openai-chat", window_tokens=8000, output_tokens=500)
        assert "thinking_dropped" in json.dumps(chat.manifest)  # Chat has no place for reasoning items


def test_a_file_is_sniffed_as_responses(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps(HISTORY))
    assert parse_file(path).format == "openai-responses"
    (tmp_path / "items.json").write_text(json.dumps(HISTORY["input"]))
    assert parse_file(tmp_path / "items.json").format == "openai-responses"


@pytest.mark.parametrize(
    ("items", "index", "field"),
    [
        ([{"role": "user", "content": "x"}, {"type": "web_search_call", "id": "ws"}], 1, "type"),
        ([{"role": "user", "content": "x"}, {"type": "function_call", "name": "f", "arguments": "{}"}], 1, "call_id"),
        ([{"role": "user", "content": "x"}, {"type": "function_call_output", "call_id": "nope", "output": "r"}], 1, None),
        ([{"role": "user", "content": [{"type": "input_audio"}]}], 0, "content[0].type"),
        ([{"role": "user", "content": "x"}, REASONING], 1, "type"),
    ],
)
def test_bad_items_name_the_item_and_field(items: list, index: int, field: str | None) -> None:
    with pytest.raises(InputError) as caught:
        parse_openai_responses(items)
    assert caught.value.index == index
    if field:
        assert caught.value.field == field
