"""Hostile and careless input to every importer is refused with an InputError, never a crash, and nothing is
written (the importers' two phases: parse and validate whole, then one append).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.ingest import FORMATS, parse_anthropic, parse_file, parse_openai_messages, write_batch
from ctxledger.ingest._load import MAX_DEPTH
from ctxledger.records import ToolArtifact
from ctxledger.testing import MemoryStore

KEYS = [
    "messages", "role", "content", "tool_calls", "tool_call_id", "id", "function", "name", "arguments", "type",
    "text", "tool_use_id", "input", "system", "tools", "traj", "trajectory", "conversation", "speaker",
    "dia_id", "session_1", "question", "answer", "history", "observation", "action", "thought", "info",
]  # fmt: skip
"""Field names the importers look for, so generated values reach past the first shape check."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=25,
)
roles = st.sampled_from(["system", "user", "assistant", "tool", "developer", "function", "", "bot"])
messages = st.lists(
    st.fixed_dictionaries({"role": roles}, optional={"content": json_values, "tool_calls": json_values,
                                                     "tool_call_id": json_values, "name": json_values}),
    max_size=6,
)  # fmt: skip


def _refused_or_written(build) -> None:
    """Parsing either raises InputError or gives a batch that writes whole (or is refused whole)."""
    try:
        batch = build()
    except InputError:
        return
    store = MemoryStore()
    try:
        write_batch(store, batch)
    except InputError:
        for conv in batch.conversations:  # refused whole: no conversation of the batch has a record
            assert store.head_seq(conv.records[0].tenant_id, conv.conversation_id) == 0


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values | st.fixed_dictionaries({"messages": messages}) | messages)
def test_every_importer_refuses_or_imports_generated_input(fmt, value, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "input.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    _refused_or_written(lambda: parse_file(path, fmt))


@settings(max_examples=40, deadline=None)
@given(value=messages)
def test_the_in_memory_importers_refuse_or_import_generated_messages(value):
    _refused_or_written(lambda: parse_openai_messages(value))
    _refused_or_written(lambda: parse_anthropic(value))


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("fmt", ["auto", *FORMATS])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["deep", "deep_inside", "big_int", "surrogate", "surrogate_key"]),
    depth=st.integers(MAX_DEPTH + 1, 200_000),
    digits=st.integers(4301, 20_000),
    code=st.integers(0xD800, 0xDFFF),
)
def test_deep_nesting_huge_integers_and_lone_surrogates_are_input_errors(fmt, kind, depth, digits, code, tmp_path):
    text = {
        "deep": _nest(depth),
        "deep_inside": '{"messages": [{"role": "user", "content": ' + _nest(depth) + "}]}",
        "big_int": '{"messages": [{"role": "user", "content": "hi", "n": ' + "7" * digits + "}]}",
        "surrogate": '{"messages": [{"role": "user", "content": "a\\u' + f"{code:04x}" + '"}]}',
        "surrogate_key": '{"messages": [{"role": "user", "content": "a", "\\u' + f"{code:04x}" + '": 1}]}',
    }[kind]
    path = tmp_path / "hostile.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        parse_file(path, fmt)
    assert str(path) in str(caught.value)
    assert "sys." not in str(caught.value)  # the user's terms, not advice for a Python developer
    if kind != "deep":
        assert caught.value.field is not None and caught.value.field.startswith("messages[0]")
    if kind == "big_int":
        assert caught.value.field == "messages[0].n" and f"{digits} digits" in caught.value.problem


def test_a_lone_surrogate_in_memory_names_the_message_and_field():
    with pytest.raises(InputError) as caught:
        parse_openai_messages([{"role": "user", "content": "ok"}, {"role": "user", "content": "x\udc00"}])
    assert caught.value.field == "messages[1].content"


def test_deep_jsonl_records_name_their_line(tmp_path: Path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"a": 1}\n{"b": ' + _nest(300_000) + "}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        parse_file(path)
    assert caught.value.index == 1
    assert caught.value.field is not None and caught.value.field.startswith("b[0][0]")
    assert "(line 2)" in caught.value.problem


@pytest.mark.parametrize("kind", ["deep", "big_int"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(MAX_DEPTH + 1, 100_000), digits=st.integers(4301, 50_000), element=st.integers(0, 3))
def test_a_value_the_parser_gives_up_on_names_the_element_field_and_line(kind, depth, digits, element, tmp_path):
    """A top-level array whose element ``element`` holds the value: that element, its field and line are named."""
    value = _nest(depth) if kind == "deep" else "7" * digits
    good = '{"messages": [{"role": "user", "content": "hi"}]}'
    bad = '{"messages": [{"role": "user", "content": "hi", "x": ' + value + "}]}"
    path = tmp_path / "array.json"
    path.write_text("[\n" + ",\n".join([good] * element + [bad]) + "\n]", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        parse_file(path)
    error = caught.value
    assert "sys." not in str(error) and str(path) in str(error)
    if kind == "big_int":
        assert (error.index, error.field) == (element, "messages[0].x")
        assert f"an integer of {digits} digits" in error.problem and f"(line {element + 2})" in error.problem
    else:
        assert error.index == element and error.field is not None and error.field.startswith("messages[0].x")
        assert f"nested more than {MAX_DEPTH} levels deep" in error.problem


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "auto"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(MAX_DEPTH + 1, 5_000) | st.sampled_from([1_500]))
def test_a_tool_result_holding_deep_json_text_imports_as_text(fmt, depth, tmp_path):
    """A tool's output is data: ``'[' * n + ']' * n`` as a result's text imports whole, as text/plain."""
    output = _nest(depth)
    if fmt == "anthropic-messages":
        messages = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]},
        ]
    else:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        messages = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": output},
        ]
    path = tmp_path / "deepres.json"
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    (conv,) = parse_file(path, fmt).conversations
    (artifact,) = [r for r in conv.records if isinstance(r, ToolArtifact)]
    assert artifact.media_type.startswith("text/plain")
    assert conv.blobs[artifact.sha256][0] == output.encode("utf-8")


@settings(max_examples=20, deadline=None)
@given(depth=st.integers(MAX_DEPTH + 1, 2_000), key=st.sampled_from(["messages", "x"]))
def test_a_too_deep_value_names_a_short_path_with_its_length(depth: int, key: str) -> None:
    """The error names the first and last steps of the path and how many lie between, not every step."""
    from ctxledger.ingest._load import check_value

    value: list = []
    inner = value
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    with pytest.raises(InputError) as caught:
        check_value({key: value}, "deep.json")
    field = caught.value.field
    assert field is not None and len(field) < 60, field
    assert field.startswith(f"{key}[0][0]") and f"({MAX_DEPTH - 6} more steps)" in field
    assert "nested more than" in caught.value.problem
