"""Prefix-stable selection: a grown selection keeps the previous payload whole; cache breakpoints follow the rules."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble import stability
from ctxledger.assemble.select import Option, SelectionItem, select
from ctxledger.budget import BudgetLedger
from ctxledger.errors import ProviderContractError
from ctxledger.serialize.anthropic_cache import MAX_BREAKPOINTS, breakpoints, check_breakpoints, with_breakpoints
from ctxledger.serialize.base import Turn


def _item(i: int, tokens: int, utility: float, required: bool = False) -> SelectionItem:
    turn = Turn(role="user", content=f"turn {i}", ref=f"u{i}")
    return SelectionItem(f"u{i}", i, "conversation", [Option("verbatim", tokens, utility, (turn,))], required)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 60), st.floats(0, 1, allow_nan=False)), min_size=2, max_size=25),
    st.integers(1, 10),
    st.integers(50, 600),
)
def test_a_grown_selection_keeps_the_previous_one_and_adds_every_new_unit(
    units: list[tuple[int, float]], new: int, dynamic: int
) -> None:
    old = [_item(i, t, u) for i, (t, u) in enumerate(units)]
    first = select(old, dynamic, BudgetLedger(dynamic))
    prev = stability.PreviousAssembly("a1", len(old) - 1, dict(first.chosen), ())
    added = [_item(len(old) + k, 10, 0.5) for k in range(new)]
    items = old + added
    fresh = select(items, dynamic, BudgetLedger(dynamic))
    grown = stability.grow(prev, items, fresh, dynamic, {})
    need = sum(o.tokens for o in first.chosen.values()) + 10 * new
    if need > dynamic:
        assert grown is None
        return
    assert grown is not None
    result, ledger = grown
    assert set(first.chosen) | {i.unit_id for i in added} == set(result.chosen)
    assert result.used_tokens == need == sum(ledger.used.values())
    assert set(result.omitted) == {i.unit_id for i in items} - set(result.chosen)


def test_nothing_written_since_means_a_fresh_choice() -> None:
    items = [_item(i, 10, 0.5) for i in range(5)]
    fresh = select(items, 100, BudgetLedger(100))
    prev = stability.PreviousAssembly("a1", 4, dict(fresh.chosen), ())
    assert stability.grow(prev, items, fresh, 100, {}) is None  # a new question on the same history re-ranks
    assert stability.grow(None, items, fresh, 100, {}) is None


def test_a_unit_sent_in_another_form_forces_a_fresh_choice() -> None:
    items = [_item(i, 10, 0.5) for i in range(3)]
    fresh = select(items, 100, BudgetLedger(100))
    changed = dict(fresh.chosen)
    changed["u1"] = dataclasses.replace(changed["u1"], tokens=11)
    prev = stability.PreviousAssembly("a1", 1, changed, ())
    assert stability.grow(prev, items, fresh, 100, {}) is None


def test_keep_prefix_requires_the_leading_units_and_offers_only_newer_ones() -> None:
    items = [_item(i, 10, 0.1 * i) for i in range(8)]
    sent = {f"u{i}": items[i].options[0] for i in (0, 1, 2, 5)}
    prev = stability.PreviousAssembly("a1", 6, sent, ())
    offered, left_out = stability.keep_prefix(prev, items, 50, 0.5) or ([], frozenset())
    kept = {i.unit_id for i in offered if i.required}
    assert kept == {"u0", "u1"}  # 25 tokens of a 50-token target: two 10-token units fit, the third does not
    assert left_out == frozenset()  # nothing older than u1 exists
    offered_ids = {i.unit_id for i in offered}
    assert offered_ids == {f"u{i}" for i in range(8)}
    assert stability.keep_prefix(None, items, 50, 0.5) is None
    # nothing kept (share 0): every unit is offered, and the essentials enter whatever the target ranks in
    offered, left_out = stability.keep_prefix(prev, items, 50, 0.0, frozenset({"u3"})) or ([], frozenset({"x"}))
    assert {i.unit_id for i in offered if i.required} == {"u3"}
    assert {i.unit_id for i in offered} == {f"u{i}" for i in range(8)} and left_out == frozenset()
    ledger = BudgetLedger(15, {})
    chosen = select(offered, 15, ledger).chosen
    assert "u3" in chosen  # the lowest-utility unit but one still enters a 15-token selection
    assert "u3" not in select(items, 15, BudgetLedger(15, {})).chosen


def test_shared_prefix_counts_leading_equal_parts_only() -> None:
    prev = stability.PreviousAssembly("a1", 3, {}, ((("s", ()), 5), (("u1", ()), 7), (("u2", ()), 9)))
    assert stability.shared_prefix_tokens(prev, [(("s", ()), 5), (("u1", ()), 7), (("u3", ()), 4)]) == 12
    assert stability.shared_prefix_tokens(None, [(("s", ()), 5)]) == 0


def _growing(policy: Any, calls: int = 6) -> list[Any]:
    from ctxledger.ledger import Ledger
    from ctxledger.records import Branch, Conversation, Message, Role
    from ctxledger.store.memory import MemoryStore

    ledger = Ledger(MemoryStore(), policy=policy)
    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    ledger.append([Conversation(id="c", **env), Branch(id="c/main", name="main", **env)])
    out = []
    for k in range(calls * 2):
        role = Role.USER if k % 2 == 0 else Role.ASSISTANT
        text = f"Step {k}: " + " ".join(f"word{k}-{j}" for j in range(40))
        ledger.append([Message(id=f"m{k}", role=role, content=text, **env)])
        if role is Role.USER:
            out.append(ledger.assemble("c", window_tokens=1500, output_tokens=0, margin_tokens=0, persist=False,
                                       api="anthropic-messages", model="claude-sonnet-4"))  # fmt: skip
    return out


def test_consecutive_calls_grow_the_payload_and_the_manifest_says_how_much_is_shared() -> None:
    from ctxledger.policy.default import default_policy

    base = default_policy()
    stable = dataclasses.replace(base, selection=dataclasses.replace(base.selection, stable_prefix=True))
    asms = _growing(stable)
    grown = [a for a in asms if a.manifest["prefix"]["grown"]]
    assert grown, "no call grew the previous selection"
    for before, after in itertools.pairwise(asms):
        prefix = after.manifest["prefix"]
        assert prefix["previous"] == before.id
        if prefix["grown"]:
            kept = iter(after.turn_refs)
            assert all(ref in kept for ref in before.turn_refs)  # the old payload, whole and in order
            assert prefix["shared_tokens"] > 0
    for asm in asms:
        check_breakpoints(asm.payload)
        assert len(breakpoints(asm.payload)) <= 2


def test_without_stable_prefix_the_manifest_still_measures_the_shared_prefix() -> None:
    asms = _growing(None, calls=3)
    assert asms[0].manifest["prefix"] == {"previous": None, "grown": False, "shared_tokens": 0, "shared_messages": 0}
    assert asms[1].manifest["prefix"]["previous"] == asms[0].id
    assert asms[1].manifest["prefix"]["grown"] is False


def _payload(n: int) -> dict[str, Any]:
    messages = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"message {i}" if i % 3 else [{"type": "text", "text": f"m{i}"}]})
    return {"model": "m", "messages": messages}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.integers(0, 12), st.integers(0, 3000), st.integers(0, 3000), st.integers(0, 3000),
       st.sampled_from(["none", "string", "blocks", "tools only"]))  # fmt: skip
def test_breakpoints_mark_the_instructions_the_shared_end_and_the_last_message_only_above_the_minimum(
    n: int, stable: int, stable_tokens: int, total: int, head: int, head_form: str
) -> None:
    payload = _payload(n)
    if head_form in ("string", "blocks"):
        payload["system"] = "rules" if head_form == "string" else [{"type": "text", "text": "a"},
                                                                   {"type": "text", "text": "b"}]  # fmt: skip
    if head_form != "none":
        payload["tools"] = [{"name": "t1", "input_schema": {}}, {"name": "t2", "input_schema": {}}]
    before = copy.deepcopy(payload)
    out = with_breakpoints(payload, stable_messages=stable, stable_tokens=stable_tokens, input_tokens=total,
                           head_tokens=head)  # fmt: skip
    check_breakpoints(out)
    expected = set()
    if 0 < stable < n and stable_tokens >= 1024:
        expected.add(("messages", stable - 1))
    if n and total >= 1024:
        expected.add(("messages", n - 1))
    if n and head >= 1024 and head_form != "none":
        # the last system block, else the last tool: one marker on the instructions
        expected.add(("tools", 1) if head_form == "tools only" else ("system", 0 if head_form == "string" else 1))
    assert set(breakpoints(out)) == expected
    assert payload == before  # the input is not changed
    for i, message in enumerate(out["messages"]):
        text = message["content"] if isinstance(message["content"], str) else message["content"][0]["text"]
        original = payload["messages"][i]["content"]
        assert text == (original if isinstance(original, str) else original[0]["text"])
    system = out.get("system")
    if head_form == "string":  # the same text, as one block when it carries the marker
        assert system == "rules" or [b["text"] for b in system] == ["rules"]


def test_breakpoint_rules_are_checked() -> None:
    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    too_many = {"messages": [{"role": "user", "content": [dict(block) for _ in range(MAX_BREAKPOINTS + 1)]}]}
    with pytest.raises(ProviderContractError, match="at most 4"):
        check_breakpoints(too_many)
    thinking = {"messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "t",
                                                                "cache_control": {"type": "ephemeral"}}]}]}  # fmt: skip
    with pytest.raises(ProviderContractError) as err:
        check_breakpoints(thinking)
    assert err.value.rule == "cache_control_on_thinking"
    bad = {"messages": [{"role": "user", "content": [{**block, "cache_control": {"type": "forever"}}]}]}
    with pytest.raises(ProviderContractError) as err:
        check_breakpoints(bad)
    assert err.value.rule == "bad_cache_control"
    last = {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "t"}]}
    marked = with_breakpoints({"messages": [last]}, stable_messages=0, stable_tokens=0, input_tokens=5000)
    assert "cache_control" in marked["messages"][0]["content"][0]  # the last block that may carry it
    assert "cache_control" not in marked["messages"][0]["content"][1]


def _stable_policy() -> Any:
    from ctxledger.policy.default import default_policy

    base = default_policy()
    return dataclasses.replace(base, selection=dataclasses.replace(base.selection, stable_prefix=True))


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_a_new_process_grows_the_selection_the_store_recorded(api: str) -> None:
    from ctxledger.ledger import Ledger
    from ctxledger.records import Branch, Conversation, Message, Role
    from ctxledger.store.memory import MemoryStore

    policy = _stable_policy()
    store = MemoryStore()
    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    first = Ledger(store, policy=policy)
    first.append([Conversation(id="c", **env), Branch(id="c/main", name="main", **env)])
    ask = {"window_tokens": 1500, "output_tokens": 0, "margin_tokens": 0, "api": api, "model": "claude-sonnet-4"}
    same, grown = [], 0
    for k in range(24):
        role = Role.USER if k % 2 == 0 else Role.ASSISTANT
        text = f"Step {k}: " + " ".join(f"word{k}-{j}" for j in range(40))
        first.append([Message(id=f"m{k}", role=role, content=text, **env)])
        if role is Role.USER:
            kept = first.assemble("c", persist=True, **ask)
            # a process that never assembled: it reads the previous selection from the stored manifests
            fresh = Ledger(store, policy=policy).assemble("c", persist=False, **ask)
            assert fresh.manifest["prefix"]["previous"] == kept.manifest["prefix"]["previous"]
            assert fresh.manifest["prefix"]["grown"] == kept.manifest["prefix"]["grown"]
            same.append(fresh.turn_refs == kept.turn_refs)
            grown += kept.manifest["prefix"]["grown"]
    assert grown >= 3, "no call grew the previous selection"
    assert all(same)


def test_latest_stored_picks_the_first_manifest_at_the_largest_seq_below_the_call() -> None:
    def m(i: str, seq: int, branch: str = "b", api: str = "openai-chat", asked: int = 100) -> dict[str, Any]:
        requested = {"requested": {"input": asked}}
        return {"id": i, "snapshot_seq": seq, "branch_id": branch, "api": api, "budget": requested}

    stored = [m("a", 3), m("b", 5), m("c", 5), m("d", 7), m("e", 4, branch="x"), m("f", 6, asked=200),
              m("g", 6, api="anthropic-messages")]  # fmt: skip
    key = ("openai-chat", 100)
    assert stability.latest_stored(stored, "b", key, 7)["id"] == "b"  # type: ignore[index]
    assert stability.latest_stored(stored, "b", key, 8)["id"] == "d"  # type: ignore[index]
    assert stability.latest_stored(stored, "b", key, 3) is None
    assert stability.latest_stored(stored, "x", key, 5)["id"] == "e"  # type: ignore[index]


@pytest.mark.parametrize("words", [30, 900])
def test_a_long_system_prompt_carries_its_own_breakpoint_on_anthropic(words: int) -> None:
    """The instructions marker sits on the system block only when tools and system reach 1,024 tokens."""
    from ctxledger.ledger import Ledger
    from ctxledger.records import Branch, Conversation, Message, Role, Trust
    from ctxledger.store.memory import MemoryStore

    ledger = Ledger(MemoryStore())
    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    ledger.append([Conversation(id="c", **env), Branch(id="c/main", name="main", **env)])
    rules = " ".join(f"rule{j} applies" for j in range(words))
    ledger.append([Message(id="sys", role=Role.SYSTEM, trust=Trust.SYSTEM, content=rules, **env),
                   Message(id="u", role=Role.USER, content="Book the flight.", **env)])  # fmt: skip
    asm = ledger.assemble("c", window_tokens=8000, output_tokens=0, margin_tokens=0, persist=False,
                          api="anthropic-messages", model="claude-sonnet-4")  # fmt: skip
    check_breakpoints(asm.payload)
    marks = breakpoints(asm.payload)
    assert (("system", 0) in marks) == (words == 900)
    system = asm.payload["system"]
    text = system if isinstance(system, str) else "".join(b["text"] for b in system)
    assert text == rules  # the marker changes the form, not the text


@given(st.integers(0, 20_000), st.floats(0.0, 0.9, allow_nan=False), st.integers(0, 6), st.integers(0, 6))
def test_headroom_is_left_only_when_the_history_grew(dynamic: int, headroom: float, prev_seq: int, newest: int) -> None:
    items = [_item(i, 10, 0.5) for i in range(newest + 1)]
    prev = stability.PreviousAssembly("a1", prev_seq, {}, ())
    assert stability.target_budget(dynamic, headroom, None, items) == dynamic  # a first call fills B_dynamic
    target = stability.target_budget(dynamic, headroom, prev, items)
    if newest > prev_seq:  # units written since: the re-choice leaves room to grow into
        assert target == max(0, int(dynamic * (1 - headroom)))
    else:  # a question of an unchanged history is chosen with the whole budget
        assert target == dynamic
