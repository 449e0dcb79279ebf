"""Loading the real datasets into evaluation cases: counts, quirks, recovery state, and clear input errors."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ctxledger.errors import ConfigurationError, InputError
from ctxledger.eval.datasets import (
    ADVERSARIAL,
    chat_tokens,
    dataset_names,
    load_dataset,
    load_locomo,
    load_trajectories,
    locate_quote,
    quote_pieces,
    recovery_state,
    resolve_evidence_ids,
)
from ctxledger.serialize.base import CallView


@pytest.fixture(scope="module")
def locomo(data_dir, counter):
    """The whole LoCoMo development subset (7 conversations, 1,347 questions)."""
    return load_dataset("locomo", data_dir, counter)


def test_chat_tokens_follows_the_cookbook_rule(counter) -> None:
    """3 framing + role + content (+ name + 1) + each call's JSON, under cl100k."""
    plain = chat_tokens(counter, "user", "hello world")
    assert plain == 3 + counter.count("user") + counter.count("hello world")
    named = chat_tokens(counter, "user", "hello world", name="bob")
    assert named == plain + counter.count("bob") + 1
    call = CallView(call_id="c1", name="search", arguments='{"q":"x"}')
    with_call = chat_tokens(counter, "assistant", "", tool_calls=[call])
    assert with_call == 3 + counter.count("assistant") + counter.count(
        '{"arguments":"{\\"q\\":\\"x\\"}","name":"search"}'
    )


def test_locomo_has_one_case_per_question_with_readme_category_counts(locomo) -> None:
    """1,347 questions with the README's category counts 1:192, 2:214, 3:66, 4:563, 5:312."""
    assert len(locomo.cases) == 1347
    counts = Counter(case.category for case in locomo.cases)
    assert counts == {"1-multi-hop": 192, "2-temporal": 214, "3-open-domain": 66, "4-single-hop": 563, ADVERSARIAL: 312}
    assert locomo.default_budgets == (1000, 2000, 4000, 8000)


def test_locomo_quirks_are_counted_not_dropped(locomo) -> None:
    """The README's malformed ids: one split, one repaired, three unresolvable, two questions without evidence."""
    assert locomo.quirks == {
        "evidence_ids_split": 1,
        "evidence_ids_repaired": 1,
        "evidence_ids_unresolvable": 3,
        "questions_without_evidence": 2,
        "questions_adversarial": 312,
    }


def test_locomo_items_are_turns_and_evidence_resolves_to_them(locomo, counter) -> None:
    """Every required id is a turn of its conversation; a turn costs its 'Speaker: text' message."""
    for case in locomo.cases:
        assert case.required_ids <= {item.id for item in case.items}
    first = locomo.cases[0].items[0]
    assert first.id == "D1:1" and first.text == "Caroline: Hey Mel! Good to see you! How have you been?"
    assert first.tokens == chat_tokens(counter, "user", first.text)
    assert sum(len(c.items) for c in {id(c.items): c for c in locomo.cases}.values()) == 4124


def test_resolve_evidence_ids_repairs_splits_and_drops() -> None:
    """'D8:6; D9:17' splits, 'D:11:26' becomes D11:26, 'D' and unknown ids are dropped with notes."""
    quirks: Counter[str] = Counter()
    known = {"D8:6", "D9:17", "D11:26"}
    resolved, notes = resolve_evidence_ids(["D8:6; D9:17", "D:11:26", "D", "D4:36"], known, quirks)
    assert resolved == {"D8:6", "D9:17", "D11:26"}
    assert quirks == {"evidence_ids_split": 1, "evidence_ids_repaired": 1, "evidence_ids_unresolvable": 2}
    assert len(notes) == 4


def test_locomo_bad_field_names_file_record_and_field(tmp_path, counter) -> None:
    """A question without 'evidence' raises an InputError naming the file, record 0 and the field."""
    record = {
        "sample_id": "x",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
        },
        "qa": [{"question": "q?", "category": 4}],
    }
    (tmp_path / "bad.json").write_text(json.dumps([record]))
    with pytest.raises(InputError) as info:
        load_locomo(tmp_path, counter, file_name="bad.json")
    assert info.value.index == 0 and info.value.field == "qa[0].evidence"
    assert "bad.json" in str(info.value)


def test_quote_pieces_split_ellipsis_and_heading() -> None:
    """An abridged quote splits at '...'; a 'Label:' heading becomes its own piece; quotes, case and the spaces
    next to punctuation are folded."""
    assert quote_pieces("My name is Michael, and this is my first...") == ["my name is michael,and this is my first"]
    assert quote_pieces("Daycare: Monthly payment due Friday.") == ["daycare:", "monthly payment due friday."]
    assert quote_pieces("the ‘Tech for Good’ day — fun") == ["the'tech for good'day-fun"]


def test_locate_quote_needs_every_piece_in_one_turn(make_item) -> None:
    """The heading and the sentence are both in the first note; a turn with only one piece does not match."""
    items = [
        make_item("n1", "user", 0, text="Daycare: Drop-off at 8 AM. Monthly payment due Friday."),
        make_item("n2", "user", 1, text="Monthly payment due Friday."),
    ]
    assert locate_quote("Daycare: Monthly payment due Friday.", items) == ["n1"]


def test_bfcl_memory_locates_all_but_the_paraphrased_quotes(data_dir, counter) -> None:
    """128 of 130 source quotes resolve to one prerequisite turn; the two paraphrased ones are counted."""
    dataset = load_dataset("bfcl-memory", data_dir, counter)
    assert len(dataset.cases) == 130
    assert dataset.quirks == {"quotes_unlocated": 2}
    unlocated = sorted(c.case_id for c in dataset.cases if not c.required_ids)
    assert unlocated == ["memory_109-student-29", "memory_123-student-43"]
    assert [e.split(":")[0] for e in dataset.listed["quotes_unlocated"]] == unlocated
    assert all(len(c.required_ids) == 1 for c in dataset.cases if c.required_ids)
    assert Counter(c.category for c in dataset.cases) == {"customer": 30, "finance": 25, "notetaker": 25, "student": 50}


def test_tau_bench_cases_are_next_calls_with_recovery_state(data_dir, counter) -> None:
    """Each case ends before an assistant message; the goal is the first user turn; every user turn constrains."""
    dataset = load_dataset("tau-bench", data_dir, counter, limit=1)
    first = dataset.cases[0]
    assert first.items[0].role == "system" and first.case_id == "task0-trial0@2"
    assert first.recovery["goal"] == {"task0-trial0#1"} and "constraints" not in first.recovery
    later = dataset.cases[-1]
    users = {i.id for i in later.items if i.role == "user"}
    assert later.recovery["constraints"] == users - later.recovery["goal"]
    assert all(case.query == case.items[-1].text and case.query_tokens == 0 for case in dataset.cases)


def test_recovery_state_tracks_latest_error_and_unresolved_calls(tool_history, make_item) -> None:
    """The latest error result and an assistant whose call has no result yet are recovery state."""
    prefix = [*tool_history, make_item("a3", "assistant", 7, call_ids=("late",))]
    state = recovery_state(prefix, ["u1", "u2"])
    assert state == {
        "goal": {"u1"},
        "constraints": {"u2"},
        "latest_error": {"tb"},
        "unresolved_calls": {"a3"},
        "system": {"s"},
    }


def test_mini_swe_agent_records_provider_prompt_tokens(data_dir, counter) -> None:
    """Every call of a mini-swe-agent run carries the provider's prompt tokens; the exit message is skipped."""
    dataset = load_dataset("mini-swe-agent", data_dir, counter, limit=1)
    assert dataset.quirks == {"non_model_messages_skipped": 1}
    assert all(case.provider_prompt_tokens and case.provider_prompt_tokens > 0 for case in dataset.cases)
    raw = json.loads(
        (data_dir / "mini-swe-agent-deepseek" / "marshmallow-code__marshmallow-1343.traj.json").read_text()
    )
    reported = [m["extra"]["response"]["usage"]["prompt_tokens"] for m in raw["messages"] if m["role"] == "assistant"]
    assert [case.provider_prompt_tokens for case in dataset.cases] == reported
    errors = [i for i in dataset.cases[-1].items if i.is_error]
    assert errors and all("<returncode>0</returncode>" not in i.text for i in errors)


def test_toolbench_function_calls_get_synthesized_pairing_ids(data_dir, counter) -> None:
    """Legacy function_call/function messages become paired tool calls and results."""
    dataset = load_dataset("toolbench", data_dir, counter, limit=1)
    items = dataset.cases[-1].items
    calls = {c.call_id for i in items for c in i.tool_calls}
    results = {i.tool_call_id for i in items if i.role == "tool"}
    assert calls and results <= calls


def test_swe_agent_and_stride_keep_every_nth_call(data_dir, counter) -> None:
    """A stride of 2 keeps half the calls (rounded up) of the same trajectories."""
    full = load_dataset("swe-agent", data_dir, counter, limit=3)
    half = load_dataset("swe-agent", data_dir, counter, limit=3, step_stride=2)
    assert 0 < len(half.cases) < len(full.cases)
    assert {c.case_id for c in half.cases} <= {c.case_id for c in full.cases}


def test_unknown_dataset_and_bad_stride_are_configuration_errors(data_dir, counter) -> None:
    """An unknown name lists the known ones; a stride of 0 is refused."""
    with pytest.raises(ConfigurationError, match="locomo"):
        load_dataset("nope", data_dir, counter)
    with pytest.raises(ConfigurationError, match="step_stride"):
        load_dataset("tau-bench", data_dir, counter, step_stride=0)
    assert dataset_names() == [
        "bfcl-memory", "locomo", "locomo-memory", "mini-swe-agent", "swe-agent", "tau-bench", "toolbench"
    ]  # fmt: skip


def test_tool_message_without_call_id_names_the_record(tmp_path, counter) -> None:
    """A tool message with no tool_call_id raises an InputError naming file, message index and field."""
    record = {"messages": [{"role": "user", "content": "go"}, {"role": "tool", "content": "out"}]}
    (tmp_path / "x.traj.json").write_text(json.dumps(record))
    with pytest.raises(InputError) as info:
        load_trajectories("mini-swe-agent", tmp_path, counter)
    assert info.value.index == 1 and info.value.field == "tool_call_id"
