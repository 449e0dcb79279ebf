"""Bad input: every error names file, record index and field, and nothing of the import is written."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ingest_helpers import load, write_json, write_lines

from ctxledger.errors import ConfigurationError, InputError
from ctxledger.ingest import parse_file, write_batch
from ctxledger.testing import MemoryStore


def _import(store: MemoryStore, path: Path, fmt: str = "auto") -> None:
    write_batch(store, parse_file(path, fmt))


def _assert_nothing_written(store: MemoryStore) -> None:
    assert store.conversations("default") == []
    assert len(store.blobs) == 0


def _case_variant(cases_dir: Path, tmp_path: Path, change: Callable[[list[dict[str, Any]]], None]) -> Path:
    raw = load(cases_dir / "B10.json")
    change(raw["messages"])
    return write_json(tmp_path / "b10-bad.json", raw)


BAD_MESSAGES: list[tuple[str, Callable[[list[dict[str, Any]]], None], int, str, str]] = [
    (
        "unknown-call-id",
        lambda m: m[5].update(tool_call_id="call_zz"),
        5,
        "tool_call_id",
        "no earlier tool call",
    ),
    ("answered-twice", lambda m: m.insert(6, copy.deepcopy(m[5])), 6, "tool_call_id", "already answered"),
    ("missing-role", lambda m: m[3].pop("role"), 3, "role", "missing required field"),
    ("content-wrong-type", lambda m: m[1].update(content={"text": "hi"}), 1, "content", "got object"),
    (
        "content-part-type",
        lambda m: m[1].update(content=[{"type": "audio"}]),
        1,
        "content[0].type",
        "'audio'",
    ),
    ("unknown-role", lambda m: m[2].update(role="robot"), 2, "role", "unknown role"),
    (
        "arguments-not-text",
        lambda m: m[4]["tool_calls"][0]["function"].update(arguments={"a": 1}),
        4,
        "tool_calls[0].function.arguments",
        "got object",
    ),
    ("tool-name-mismatch", lambda m: m[5].update(name="delete_all"), 5, "name", "called 'send_email'"),
]


@pytest.mark.parametrize(
    ("change", "index", "field", "words"), [b[1:] for b in BAD_MESSAGES], ids=[b[0] for b in BAD_MESSAGES]
)
def test_bad_message_names_file_index_field_and_writes_nothing(
    cases_dir: Path,
    tmp_path: Path,
    change: Callable[[list[dict[str, Any]]], None],
    index: int,
    field: str,
    words: str,
) -> None:
    """A bad message of a real case raises InputError(file, message index, field); the store stays empty."""
    path = _case_variant(cases_dir, tmp_path, change)
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        _import(store, path)
    error = caught.value
    assert (error.source, error.index, error.field) == (str(path), index, field)
    assert str(path) in str(error) and f"record {index}" in str(error) and repr(field) in str(error)
    assert words in error.problem
    _assert_nothing_written(store)


def test_malformed_json_names_the_broken_element(cases_dir: Path, tmp_path: Path) -> None:
    """A JSON array with a broken element: the error names the file, that element and the line."""
    messages = load(cases_dir / "B01.json")["messages"]
    lines = ["["] + [json.dumps(m) + "," for m in messages[:3]] + ['{"role": "user", "content": "oops}', "]"]
    path = write_lines(tmp_path / "broken.json", lines)
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        _import(store, path)
    assert (caught.value.source, caught.value.index) == (str(path), 3)
    assert "malformed JSON at line 5" in str(caught.value)
    _assert_nothing_written(store)


def test_jsonl_with_one_bad_line_names_that_line(cases_dir: Path, tmp_path: Path) -> None:
    """One unparsable line of a JSON Lines file fails the whole import, naming its record index and line."""
    messages = load(cases_dir / "B01.json")["messages"]
    lines = [json.dumps(m) for m in messages]
    lines[4] = lines[4][:-3]
    path = write_lines(tmp_path / "b01.jsonl", lines)
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        _import(store, path)
    assert (caught.value.source, caught.value.index) == (str(path), 4)
    assert "line 5" in caught.value.problem
    _assert_nothing_written(store)


def test_nested_trajectory_error_names_the_trajectory_and_path(tau_path: Path, tmp_path: Path) -> None:
    """In a multi-trajectory file the index is the trajectory and the field a path inside it."""
    raw = load(tau_path)[:3]
    tool_index = next(j for j, m in enumerate(raw[2]["traj"]) if m["role"] == "tool")
    raw[2]["traj"][tool_index]["tool_call_id"] = "call_missing"
    path = write_json(tmp_path / "tau.json", raw)
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        _import(store, path)
    assert (caught.value.index, caught.value.field) == (2, f"traj[{tool_index}].tool_call_id")
    _assert_nothing_written(store)


def test_locomo_bad_turn_names_the_sample_and_turn(locomo_path: Path, tmp_path: Path) -> None:
    """A LoCoMo turn without text names the sample index and the session/turn path."""
    raw = load(locomo_path)[:2]
    del raw[1]["conversation"]["session_2"][3]["text"]
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        _import(store, write_json(tmp_path / "locomo.json", raw))
    assert (caught.value.index, caught.value.field) == (1, "conversation.session_2[3].text")
    _assert_nothing_written(store)


def test_ambiguous_input_lists_the_formats(tmp_path: Path) -> None:
    """Content of no known shape is refused with the list of formats to choose from."""
    path = write_json(tmp_path / "mystery.json", {"rows": [1, 2, 3]})
    with pytest.raises(InputError) as caught:
        parse_file(path)
    assert "openai-chat" in str(caught.value) and "tau-bench" in str(caught.value)


def test_mixed_provider_traits_are_ambiguous(tmp_path: Path) -> None:
    """A transcript with both OpenAI tool_calls and Anthropic tool_use blocks needs an explicit format."""
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
    ]
    with pytest.raises(InputError, match="cannot tell the format"):
        parse_file(write_json(tmp_path / "mixed.json", messages))


def test_unknown_format_name_is_a_configuration_error(cases_dir: Path) -> None:
    """Asking for a format that does not exist is developer misuse, not bad input."""
    with pytest.raises(ConfigurationError, match="openai-chat"):
        parse_file(cases_dir / "B01.json", "openai")


def test_wrong_explicit_format_fails_with_a_located_error(cases_dir: Path) -> None:
    """Reading a case file as tau-bench reports what the tau-bench reader expected."""
    with pytest.raises(InputError) as caught:
        parse_file(cases_dir / "B01.json", "tau-bench")
    assert (
        caught.value.source == str(cases_dir / "B01.json") and "array of trajectories" in caught.value.problem
    )
