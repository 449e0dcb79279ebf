"""Baseline selectors on hand-sized histories: what each keeps at a given budget, and that units stay whole."""

from __future__ import annotations

import pytest

from ctxledger.eval.base import SelectionTask
from ctxledger.eval.baselines import BM25Only, FullReplay, HeadTail, NewestThatFits, baseline_selectors, make_units
from ctxledger.eval.metrics import provider_violations


def task(items, budget, words, query="", query_tokens=0) -> SelectionTask:
    """A task with no request base so budgets are plain sums of the 10-token items."""
    return SelectionTask(
        items=items, query=query, budget_tokens=budget, counter=words, query_tokens=query_tokens, base_tokens=0
    )


def test_make_units_joins_results_to_their_call_and_marks_orphans(tool_history, make_item) -> None:
    """The call with both results is one 30-token unit; a result without its call is not sendable."""
    units = make_units(tool_history)
    assert [u.ids for u in units] == [["s"], ["u1"], ["a1", "ta", "tb"], ["a2"], ["u2"]]
    assert units[2].tokens == 30
    orphan = make_units([make_item("t", "tool", 0, answers="gone"), make_item("u", "user", 1)])
    assert [u.sendable for u in orphan] == [False, True]


def test_full_replay_sends_all_when_it_fits(tool_history, words) -> None:
    """70 tokens of history + 5 query tokens fit in 75: everything is sent."""
    selection = FullReplay().select(task(tool_history, 75, words, "q", query_tokens=5))
    assert selection.fits and selection.payload_tokens == 75
    assert selection.included_ids == [i.id for i in tool_history]


def test_full_replay_declines_when_over_budget(tool_history, words) -> None:
    """At 74 tokens the replay does not fit: nothing is sent and the needed size is reported."""
    selection = FullReplay().select(task(tool_history, 74, words, "q", query_tokens=5))
    assert not selection.fits and selection.included_ids == [] and selection.payload_tokens == 75


def test_newest_fit_pins_system_and_keeps_a_contiguous_suffix(tool_history, words) -> None:
    """At 40 tokens: system (10) + u2, a2 (20); the 30-token tool unit does not fit, so the window stops."""
    selection = NewestThatFits().select(task(tool_history, 40, words))
    assert selection.included_ids == ["s", "a2", "u2"]
    assert selection.payload_tokens == 30


def test_newest_fit_takes_whole_tool_units(tool_history, words) -> None:
    """At 60 tokens the tool unit enters whole after a2 and u2; u1 no longer fits."""
    selection = NewestThatFits().select(task(tool_history, 60, words))
    assert selection.included_ids == ["s", "a1", "ta", "tb", "a2", "u2"]
    assert provider_violations(tool_history, selection.included_ids) == []


def test_head_tail_splits_budget_between_oldest_and_newest(tool_history, words) -> None:
    """At 40 tokens: head gets s, u1 (20 = half), tail gets u2, a2 (20)."""
    selection = HeadTail().select(task(tool_history, 40, words))
    assert selection.included_ids == ["s", "u1", "a2", "u2"]


def test_head_tail_rejects_a_share_outside_the_open_interval() -> None:
    """A head share of 1.0 would leave no tail and is refused."""
    with pytest.raises(ValueError, match="head_share"):
        HeadTail(head_share=1.0)


def test_bm25_ranks_lexical_matches_first_and_brings_their_unit(make_item, words) -> None:
    """The result mentioning 'invoice' brings its call; the unrelated turns score 0 and stay out."""
    items = [
        make_item("u1", "user", 0, text="hello there, how are you"),
        make_item("a1", "assistant", 1, text="checking", call_ids=("c",)),
        make_item("t1", "tool", 2, text="invoice 4471 total 99 EUR overdue", answers="c"),
        make_item("u2", "user", 3, text="what about the weather in Lisbon"),
    ]
    selection = BM25Only().select(task(items, 100, words, "which invoice is overdue"))
    assert selection.included_ids == ["a1", "t1"]


def test_bm25_skips_a_match_that_does_not_fit(make_item, words) -> None:
    """The best match costs 50 tokens and the budget is 30: the smaller second match enters alone."""
    items = [
        make_item("big", "user", 0, tokens=50, text="passport renewal passport renewal appointment"),
        make_item("small", "user", 1, tokens=20, text="renewal form"),
    ]
    selection = BM25Only().select(task(items, 30, words, "passport renewal"))
    assert selection.included_ids == ["small"]


def test_bm25_with_no_known_query_term_selects_nothing(tool_history, words) -> None:
    """A query whose words appear in no turn retrieves nothing (BM25-only has no fallback)."""
    selection = BM25Only().select(task(tool_history, 100, words, "zyzzyva"))
    assert selection.included_ids == []


def test_every_baseline_stays_within_budget_and_pairs_on_real_data(data_dir, counter) -> None:
    """On a real tau-bench trajectory at 4000 tokens no baseline overflows or splits a tool pair."""
    from ctxledger.eval.datasets import load_dataset

    dataset = load_dataset("tau-bench", data_dir, counter, limit=2)
    for case in dataset.cases[::3]:
        for selector in baseline_selectors():
            t = SelectionTask(items=case.items, query=case.query, budget_tokens=4000, counter=counter)
            selection = selector.select(t)
            if selection.fits:
                assert selection.payload_tokens <= 4000, (selector.name, case.case_id)
                assert provider_violations(case.items, selection.included_ids) == [], (selector.name, case.case_id)
