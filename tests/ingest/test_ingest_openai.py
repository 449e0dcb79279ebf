"""OpenAI Chat Completions import: the failure cases, parallel and legacy calls, container shapes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from ingest_helpers import load, of_type, only, shared_dir, write_json, write_lines

from ctxledger.ingest import BASE_TIME, parse_file, parse_openai_messages
from ctxledger.records import (
    Message,
    Role,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolStatus,
    Trust,
)

_PROVIDER_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name"}
CASES = sorted(p.name for p in (shared_dir() / "cases").glob("*.json"))  # every JSON file there is a case


@pytest.mark.parametrize("case", CASES)
def test_case_messages_keep_their_id_and_exact_content(cases_dir: Path, case: str) -> None:
    """Every case message maps to one record with external_id = its id and content exactly as given."""
    path = cases_dir / case
    raw = load(path)
    conv = only(parse_file(path))
    by_ext = {r.external_id: r for r in conv.records if r.external_id is not None}
    assert set(by_ext) == {m["id"] for m in raw["messages"]}
    for msg in raw["messages"]:
        record = by_ext[msg["id"]]
        if msg["role"] == "tool":
            assert isinstance(record, ToolArtifact)
            assert conv.blobs[record.sha256][0] == msg["content"].encode("utf-8")
            continue
        assert isinstance(record, Message) and record.role == Role(msg["role"])
        expected = tuple(msg["content"]) if isinstance(msg["content"], list) else msg["content"]
        assert record.content == expected


@pytest.mark.parametrize("case", CASES)
def test_case_store_fields_go_to_meta_not_content(cases_dir: Path, case: str) -> None:
    """Fields outside the provider schema (tokens, tags, covers …) land in meta and nowhere model-facing."""
    path = cases_dir / case
    raw = load(path)
    conv = only(parse_file(path))
    by_ext = {r.external_id: r for r in conv.records if r.external_id is not None}
    for msg in raw["messages"]:
        extras = {k: v for k, v in msg.items() if k not in _PROVIDER_KEYS and k != "id"}
        record = by_ext[msg["id"]]
        assert {k: record.meta[k] for k in extras} == extras
        if isinstance(record, Message) and isinstance(record.content, str):
            assert record.content == msg["content"]


def test_case_tool_schema_tokens_stay_out_of_the_schema(cases_dir: Path) -> None:
    """B06's tool definitions keep their reference token costs in meta, not in the OpenAI schema."""
    raw = load(cases_dir / "B06.json")
    conv = only(parse_file(cases_dir / "B06.json"))
    (skill,) = of_type(conv, SkillState)
    assert skill.enabled_tools == tuple(t["function"]["name"] for t in raw["tools"])
    assert all(set(schema) == {"type", "function"} for schema in skill.tool_schemas)
    assert [s["function"] for s in skill.tool_schemas] == [t["function"] for t in raw["tools"]]
    assert skill.meta["tool_extras"] == {t["function"]["name"]: {"tokens": t["tokens"]} for t in raw["tools"]}
    assert skill.trust is Trust.DEVELOPER


def test_skill_state_sits_right_after_the_system_message(cases_dir: Path) -> None:
    """The SkillState follows the system message and precedes the first user message."""
    conv = only(parse_file(cases_dir / "B06.json"))
    history = [r for r in conv.records if isinstance(r, Message | SkillState)]
    assert isinstance(history[0], Message) and history[0].role is Role.SYSTEM
    assert isinstance(history[1], SkillState)
    assert isinstance(history[2], Message) and history[2].role is Role.USER


def test_image_content_parts_are_kept_intact(cases_dir: Path) -> None:
    """B08's multi-part user message (text + base64 image) is stored part for part."""
    raw = load(cases_dir / "B08.json")
    conv = only(parse_file(cases_dir / "B08.json"))
    (m4,) = [r for r in of_type(conv, Message) if r.external_id == "m4"]
    original = next(m for m in raw["messages"] if m["id"] == "m4")
    assert m4.content == tuple(original["content"])
    assert "note" in m4.meta and all("note" not in part for part in m4.content)


def test_case_ids_and_roles_map_onto_trust(cases_dir: Path) -> None:
    """System → trust system, user → user, assistant and its calls → verified_internal, tool → tool_result."""
    conv = only(parse_file(cases_dir / "B01.json"))
    trust = {r.external_id: r.trust for r in conv.records if r.external_id}
    assert trust == {
        "m1": Trust.SYSTEM,
        "m2": Trust.USER,
        "m3": Trust.VERIFIED_INTERNAL,
        "m4": Trust.TOOL_RESULT,
        "m5": Trust.VERIFIED_INTERNAL,
        "m6": Trust.USER,
        "m7": Trust.VERIFIED_INTERNAL,
        "m8": Trust.USER,
    }
    (call,) = of_type(conv, ToolCall)
    assert call.trust is Trust.VERIFIED_INTERNAL and call.call_id == "call_w1"


def _parallel_messages() -> list[dict[str, object]]:
    calls = [
        {
            "id": f"call_{c}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": f'{{"city":"{c}"}}'},
        }
        for c in ("Oslo", "Lima", "Pune")
    ]
    return [
        {"role": "user", "content": "Weather in Oslo, Lima and Pune?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_Lima", "content": '{"c": 19}'},
        {"role": "tool", "tool_call_id": "call_Oslo", "content": "timeout"},
        {"role": "tool", "tool_call_id": "call_Pune", "content": '{"c": 31}'},
        {"role": "assistant", "content": "Lima 19 C, Pune 31 C; Oslo timed out."},
    ]


def test_parallel_tool_calls_pair_by_call_id_in_any_order() -> None:
    """Three parallel calls become indexed ToolCalls of one message; results out of order pair by id."""
    conv = only(parse_openai_messages(_parallel_messages()))
    (assistant, _final) = [m for m in of_type(conv, Message) if m.role is Role.ASSISTANT]
    calls = of_type(conv, ToolCall)
    assert [(c.call_id, c.index, c.message_id) for c in calls] == [
        ("call_Oslo", 0, assistant.id),
        ("call_Lima", 1, assistant.id),
        ("call_Pune", 2, assistant.id),
    ]
    assert assistant.content is None
    call_by_id = {c.id: c for c in calls}
    results = of_type(conv, ToolArtifact)
    assert [call_by_id[a.tool_call_id].call_id for a in results] == ["call_Lima", "call_Oslo", "call_Pune"]
    assert [a.media_type for a in results] == [
        "application/json",
        "text/plain; charset=utf-8",
        "application/json",
    ]
    assert [a.size_bytes for a in results] == [9, 7, 9]


def test_arguments_are_kept_as_the_exact_json_text() -> None:
    """ToolCall.arguments is the model's JSON text byte for byte (spacing, key order)."""
    args = '{ "b":1,  "a" : [2, 3] }'
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}],
        },
    ]
    (call,) = of_type(only(parse_openai_messages(messages)), ToolCall)
    assert call.arguments == args and call.status is ToolStatus.PENDING


def test_legacy_function_results_answer_the_latest_unanswered_call_of_that_name() -> None:
    """Legacy calls get call_id fc_<position>; a result pairs with the newest open call of its name."""
    messages = [
        {"role": "user", "content": "two lookups"},
        {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": '{"q": 1}'}},
        {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": '{"q": 2}'}},
        {"role": "function", "name": "lookup", "content": "second"},
        {"role": "function", "name": "lookup", "content": "first"},
    ]
    conv = only(parse_openai_messages(messages, [{"name": "lookup", "parameters": {"type": "object"}}]))
    calls = {c.id: c for c in of_type(conv, ToolCall)}
    assert [c.call_id for c in calls.values()] == ["fc_1", "fc_2"]
    assert all(c.meta["legacy_function_call"] is True for c in calls.values())
    answered = [
        (calls[a.tool_call_id].arguments, conv.blobs[a.sha256][0]) for a in of_type(conv, ToolArtifact)
    ]
    assert answered == [('{"q": 2}', b"second"), ('{"q": 1}', b"first")]
    (skill,) = of_type(conv, SkillState)
    assert skill.tool_schemas == (
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
    )


def test_records_get_deterministic_ids_and_times() -> None:
    """The same input always yields the same ids and created_at (base time + n seconds, no clock)."""
    first = only(parse_openai_messages(_parallel_messages()))
    second = only(parse_openai_messages(_parallel_messages()))
    assert first.records == second.records
    history = first.records[4:]
    assert [r.id for r in history] == [f"{first.conversation_id}/{n}" for n in range(len(history))]
    assert history[0].created_at == BASE_TIME
    assert history[1].created_at == BASE_TIME + timedelta(seconds=1)
    assert first.conversation_id.startswith("api-")


def test_the_conversation_envelope_comes_first(cases_dir: Path) -> None:
    """A conversation is Conversation, Branch(<id>/main), user and assistant Participants, then history."""
    conv = only(parse_file(cases_dir / "B04.json", tenant_id="t1", conversation_id="case-b04"))
    head = [(r.kind.value, r.id) for r in conv.records[:4]]
    assert head == [
        ("conversation", "case-b04"),
        ("branch", "case-b04/main"),
        ("participant", "case-b04/participant/user"),
        ("participant", "case-b04/participant/assistant"),
    ]
    assert {r.tenant_id for r in conv.records} == {"t1"}
    assert {r.branch_id for r in conv.records} == {"case-b04/main"}
    assert conv.records[0].meta["kind"] == "system_prompt_dropped"
    user = [m for m in of_type(conv, Message) if m.role is Role.USER]
    assert {m.owner_participant_id for m in user} == {"case-b04/participant/user"}


def test_jsonl_of_messages_is_one_conversation(tmp_path: Path, cases_dir: Path) -> None:
    """A JSON Lines file of messages imports like the JSON array of the same messages."""
    messages = load(cases_dir / "B10.json")["messages"]
    path = write_lines(tmp_path / "b10.jsonl", [json.dumps(m) for m in messages])
    conv = only(parse_file(path))
    assert conv.conversation_id == "b10"
    assert [r.external_id for r in conv.records if r.external_id] == [m["id"] for m in messages]
    (artifact,) = of_type(conv, ToolArtifact)
    assert artifact.meta["source_index"] == 5


def test_array_of_conversations_gives_one_conversation_each(tmp_path: Path, cases_dir: Path) -> None:
    """An array of objects with 'messages' becomes several conversations named <stem>-<id>."""
    cases = [load(cases_dir / name) for name in ("B01.json", "B02.json")]
    batch = parse_file(write_json(tmp_path / "pair.json", cases))
    assert [c.conversation_id for c in batch.conversations] == ["pair-B01", "pair-B02"]
    assert batch.messages == 7 + 5 and batch.tool_calls == 2 and batch.artifacts == 2
