"""Shared prefixes of consecutive calls and their priced cost under provider prompt caching."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.eval.base import EvalCase, EvalDataset, EvalItem
from ctxledger.eval.baselines import FullReplay, NewestThatFits
from ctxledger.eval.caching import (
    ANTHROPIC_SONNET_4,
    OPENAI_GPT_4O,
    cached_tokens,
    caching_costs,
    call_cost,
    shared_prefix,
)

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
    assert anthropic == pytest.approx((hit * 0.1 + (tokens - hit) * 1.25) * 3.0 / 1e6)


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
    assert {r.provider for r in window} == {OPENAI_GPT_4O.name, ANTHROPIC_SONNET_4.name}
