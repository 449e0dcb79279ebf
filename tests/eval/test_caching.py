"""Shared prefixes of consecutive calls and their priced cost under provider prompt caching."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.eval.base import EvalCase, EvalDataset, EvalItem
from ctxledger.eval.baselines import FullReplay, NewestThatFits
from ctxledger.eval.caching import (
    ANTHROPIC_SONNET_4,
    ANTHROPIC_SONNET_4_BREAKPOINTS,
    FLOOR,
    OPENAI_GPT_4O,
    breakpoint_hits,
    breakpoint_marks,
    cached_tokens,
    caching_costs,
    call_cost,
    content_blocks,
    floor_rows,
    shared_prefix,
)
from ctxledger.serialize.base import CallView

TURNS = st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 500)), max_size=12)


@given(a=TURNS, b=TURNS)
def test_shared_prefix_is_the_leading_run_of_equal_turns(a, b):
    shared = shared_prefix(a, b)
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    assert shared == sum(t for _, t in b[:k])
    assert shared_prefix(b, b) == sum(t for _, t in b)


@given(tokens=st.integers(0, 50_000), shared=st.integers(0, 50_000))
def test_priced_cost_follows_each_providers_rule(tokens, shared):
    shared = min(shared, tokens)
    openai = call_cost(tokens, shared, OPENAI_GPT_4O)
    cached = cached_tokens(shared, OPENAI_GPT_4O)
    assert cached == (0 if shared < 1024 else shared - shared % 128)
    assert openai == pytest.approx((cached * 0.5 + tokens - cached) * 2.5 / 1e6)
    anthropic = call_cost(tokens, shared, ANTHROPIC_SONNET_4)
    hit = shared if shared >= 1024 else 0
    write = 1.25 if tokens >= 1024 else 1.0  # below the minimum no breakpoint is set and nothing is written
    assert anthropic == pytest.approx((hit * 0.1 + (tokens - hit) * write) * 3.0 / 1e6)


def _trajectory(n_calls: int, turn_tokens: int) -> EvalDataset:
    items = [EvalItem(id="s", role="system", text="policy", seq=0, tokens=1500)]
    for k in range(1, 2 * n_calls + 2):
        items.append(EvalItem(id=f"t{k}", role="user" if k % 2 else "assistant", text=f"turn {k}", seq=k,
                              tokens=turn_tokens))  # fmt: skip
    cases = [
        EvalCase(f"run@{k}", "synthetic", tuple(items[:k]), items[k - 1].text, 0, category="synthetic")
        for k in range(2, len(items), 2)
    ]
    return EvalDataset("synthetic", "trajectory", tuple(cases), (4000,))


def test_full_replay_costs_what_replay_costs_and_a_sliding_window_shares_only_its_pinned_head(counter):
    dataset = _trajectory(8, 400)
    rows = caching_costs(dataset, [FullReplay(), NewestThatFits()], 100_000, counter)
    replay = {r.provider: r for r in rows if r.selector == "full-replay"}
    assert all(r.ratio == pytest.approx(1.0) for r in replay.values())
    window = caching_costs(dataset, [NewestThatFits()], 3000, counter)
    for row in window:
        assert row.calls == len(dataset.cases) - 1
        assert row.mean_shared < row.mean_input
    assert {r.provider for r in window} == {OPENAI_GPT_4O.name, ANTHROPIC_SONNET_4.name,
                                            ANTHROPIC_SONNET_4_BREAKPOINTS.name}  # fmt: skip


def _turns(*spec: str) -> list[tuple[str, int]]:
    return [(name, 600) for name in spec]


def test_the_cache_is_found_only_where_an_earlier_call_set_a_breakpoint():
    calls = [
        _turns("s", "a", "b"),  # breakpoint after b (1,800 tokens)
        _turns("s", "a", "b", "c"),  # appends: reads s..b, marks s..b and s..c
        _turns("s", "a", "x", "y"),  # diverges after a: no earlier call marked s..a, nothing is read; marks s..a
        _turns("s", "a", "x", "y", "z"),  # reads s..y (the previous call's end)
        _turns("s", "a", "b", "c", "w"),  # the second call marked s..c, two turns before this call's end
    ]
    prices = ANTHROPIC_SONNET_4_BREAKPOINTS
    assert breakpoint_hits(calls, prices) == [0, 1800, 0, 2400, 2400]
    # without looking back, the last call finds only the entry at its own shared end (s..a, marked by the third)
    assert breakpoint_hits(calls, dataclasses.replace(prices, lookback=0)) == [0, 1800, 0, 2400, 1200]


@given(st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=8), min_size=1, max_size=8))
def test_breakpoint_hits_never_exceed_the_shared_prefix_of_some_earlier_call(runs):
    calls = [[(x, 300) for x in run] for run in runs]
    hits = breakpoint_hits(calls, ANTHROPIC_SONNET_4_BREAKPOINTS)
    assert hits[0] == 0
    for k in range(1, len(calls)):
        best = max(shared_prefix(calls[j], calls[k]) for j in range(k))
        assert hits[k] <= best
        assert hits[k] == 0 or hits[k] >= 1024


def test_look_back_counts_content_blocks_not_turns():
    def run(blocks: int) -> list[int]:
        entry = [("s", 1200, 1), *[(f"o{k}", 100, blocks) for k in range(8)]]
        other = [("s", 1200, 1), ("q", 100, 1)]  # shares only s with the first call: reads nothing, marks s
        later = [*entry, *[(f"n{k}", 100, blocks) for k in range(8)]]  # shares only s with the previous call
        return breakpoint_hits([entry, other, later], ANTHROPIC_SONNET_4_BREAKPOINTS)

    # from the last call's end, the first call's entry is 8 turns back: 8 blocks are within the 20-block
    # look-back, 24 blocks (each turn a text and two tool_use blocks) are not, and only s is read
    assert run(1) == [0, 0, 2000]
    assert run(3) == [0, 0, 1200]


def test_the_instructions_carry_their_own_breakpoint_so_a_compaction_still_reads_them():
    system = ("s", 1500, 1, True)
    first = [system, *[(f"a{k}", 200, 2, False) for k in range(15)]]
    compacted = [system, *[(f"b{k}", 200, 2, False) for k in range(15)]]
    assert breakpoint_marks([], first, 1024) == [1, 16]
    # the first call marked s alone: the compacted call, 30 blocks past it, still reads the instructions
    assert breakpoint_hits([first, compacted], ANTHROPIC_SONNET_4_BREAKPOINTS) == [0, 1500]
    plain = [(t[0], t[1], t[2]) for t in first]
    assert breakpoint_hits([plain, [(t[0], t[1], t[2]) for t in compacted]], ANTHROPIC_SONNET_4_BREAKPOINTS) == [0, 0]


@given(text=st.sampled_from(["", "thinking"]), calls=st.integers(0, 4),
       role=st.sampled_from(["assistant", "tool", "user"]))  # fmt: skip
def test_content_blocks_are_the_text_block_and_one_block_per_call(text, calls, role):
    views = tuple(CallView(f"c{k}", "bash", "{}") for k in range(calls)) if role == "assistant" else ()
    item = EvalItem(id="i", role=role, text=text, seq=1, tokens=10, tool_calls=views)
    expected = max(1, (1 if text else 0) + calls) if role == "assistant" else 1
    assert content_blocks(item) == expected


@given(turn_tokens=st.integers(50, 900), n_calls=st.integers(2, 8))
def test_the_floor_never_costs_more_than_replay_and_sends_the_required_state(counter, turn_tokens, n_calls):
    dataset = _trajectory(n_calls, turn_tokens)
    recovery = {"system": frozenset({"s"})}
    cases = tuple(dataclasses.replace(c, recovery=recovery) for c in dataset.cases)
    dataset = dataclasses.replace(dataset, cases=cases)
    rows = floor_rows(dataset)
    assert {r.selector for r in rows} == {FLOOR}
    for row in rows:
        assert row.calls == len(dataset.cases) - 1
        assert row.mean_cost <= row.replay_cost + 1e-12  # per call the cheaper of the required state and replay
    # each later call sends the instructions (cached) and the two turns written since (fresh)
    anthropic = next(r for r in rows if r.provider == ANTHROPIC_SONNET_4.name)
    assert anthropic.mean_shared == 1500
    assert anthropic.mean_input == 1500 + 2 * turn_tokens
    assert anthropic.mean_cost == pytest.approx((1500 * 0.1 + 2 * turn_tokens * 1.25) * 3.0 / 1e6)
