"""Anthropic Messages import: system, tools, tool_use/tool_result blocks, images, and their errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ingest_helpers import of_type, only, write_json

from ctxledger.errors import InputError
from ctxledger.ingest import parse_anthropic, parse_file
from ctxledger.records import Message, Role, SkillState, ToolArtifact, ToolCall, ToolStatus, Trust

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _payload() -> dict[str, Any]:
    """A request in the shape of the Anthropic Messages API docs (parallel tool use, an error result)."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [
            {"type": "text", "text": "You are a weather assistant.", "cache_control": {"type": "ephemeral"}}
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome? Here is a photo too."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both cities."},
                    {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {"city": "Rome"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "content": [{"type": "text", "text": "24 C"}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": "service down",
                        "is_error": True,
                    },
                    {"type": "text", "text": "And this picture?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                ],
            },
            {"role": "assistant", "content": "Rome is 24 C; Paris is unavailable. Nice picture."},
        ],
    }


def test_anthropic_payload_maps_onto_graph_records() -> None:
    """System, tools, parallel tool_use, tool_result and the trailing user text land in source order."""
    conv = only(parse_anthropic(_payload()))
    history = conv.records[4:]
    kinds = [r.kind.value for r in history]
    assert kinds == [
        "message",
        "skill_state",
        "message",
        "message",
        "tool_call",
        "tool_call",
        "tool_artifact",
        "tool_artifact",
        "message",
        "message",
    ]
    system = history[0]
    assert isinstance(system, Message) and system.role is Role.SYSTEM and system.trust is Trust.SYSTEM
    assert system.content == "You are a weather assistant."
    assert system.meta["block_extras"] == {"0": {"cache_control": {"type": "ephemeral"}}}
    assert conv.records[0].meta["model"] == "claude-sonnet-4-5"


def test_anthropic_tools_become_openai_form_schemas() -> None:
    """input_schema becomes parameters of an OpenAI function tool."""
    (skill,) = of_type(only(parse_anthropic(_payload())), SkillState)
    tool = _payload()["tools"][0]
    assert skill.tool_schemas == (
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": tool["description"],
                "parameters": tool["input_schema"],
            },
        },
    )


def test_anthropic_tool_use_and_results_pair_by_id() -> None:
    """tool_use blocks become indexed calls; results pair by tool_use_id; is_error makes them failed."""
    conv = only(parse_anthropic(_payload()))
    calls = of_type(conv, ToolCall)
    assert [(c.call_id, c.index, json.loads(c.arguments)) for c in calls] == [
        ("toolu_01", 0, {"city": "Paris"}),
        ("toolu_02", 1, {"city": "Rome"}),
    ]
    by_id = {c.id: c for c in calls}
    results = [
        (by_id[a.tool_call_id].call_id, a.status, conv.blobs[a.sha256][0])
        for a in of_type(conv, ToolArtifact)
    ]
    assert results == [
        ("toolu_02", ToolStatus.SUCCEEDED, b"24 C"),
        ("toolu_01", ToolStatus.FAILED, b"service down"),
    ]
    assistant = of_type(conv, Message)[2]
    assert assistant.content == "Checking both cities." and calls[0].message_id == assistant.id


def test_anthropic_user_text_and_image_follow_the_results() -> None:
    """A user message's text and image blocks become one user Message after its tool results."""
    conv = only(parse_anthropic(_payload()))
    user = of_type(conv, Message)[3]
    assert user.role is Role.USER
    assert user.content == (
        {"type": "text", "text": "And this picture?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    )


def test_anthropic_file_is_sniffed(tmp_path: Path) -> None:
    """A saved Anthropic request is recognized by its top-level system and tool_use blocks."""
    batch = parse_file(write_json(tmp_path / "claude.json", _payload()))
    assert batch.format == "anthropic-messages" and batch.tool_calls == 2 and batch.artifacts == 2


@pytest.mark.parametrize(
    ("mutate", "index", "field"),
    [
        (
            lambda p: p["messages"][2]["content"][0].update(tool_use_id="toolu_99"),
            2,
            "content[0].tool_use_id",
        ),
        (
            lambda p: p["messages"][2]["content"][1].update(tool_use_id="toolu_02"),
            2,
            "content[1].tool_use_id",
        ),
        (lambda p: p["messages"][1].pop("role"), 1, "role"),
        (lambda p: p["messages"][1].update(content=7), 1, "content"),
        (lambda p: p["messages"][1]["content"][1].update(input="Paris"), 1, "content[1].input"),
        (lambda p: p["messages"][2]["content"].append({"type": "video"}), 2, "content[4].type"),
        (lambda p: p["system"][0].update(text=None), None, "system[0].text"),
    ],
    ids=[
        "unknown-tool-use-id",
        "answered-twice",
        "missing-role",
        "content-not-list",
        "input-not-object",
        "bad-block",
        "system-text-null",
    ],
)
def test_anthropic_bad_input_names_message_and_field(mutate: Any, index: int | None, field: str) -> None:
    """Bad Anthropic input raises InputError naming '<api>', the message index and the block field."""
    payload = _payload()
    mutate(payload)
    with pytest.raises(InputError) as caught:
        parse_anthropic(payload)
    assert (caught.value.source, caught.value.index, caught.value.field) == ("<api>", index, field)
    assert field in str(caught.value) and (index is None or f"record {index}" in str(caught.value))
