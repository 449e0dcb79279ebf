"""Peer libraries as selectors: their documented behaviour, measured on real and hand-made histories."""

from __future__ import annotations

import sys

import pytest

from ctxledger.errors import ConfigurationError
from ctxledger.eval.base import SelectionTask
from ctxledger.eval.baselines import NewestThatFits
from ctxledger.eval.peers import PEER_NAMES, LangchainTrim, LlamaIndexMemory, make_peer


@pytest.fixture(scope="module")
def locomo_case(data_dir, counter):
    """The last question of the first LoCoMo conversation (its whole dialogue as candidates)."""
    from ctxledger.eval.datasets import load_dataset

    return load_dataset("locomo", data_dir, counter, limit=1).cases[-1]


def _task(case, budget, counter) -> SelectionTask:
    return SelectionTask(case.items, case.query, budget, counter, query_tokens=case.query_tokens)


def test_langchain_exact_is_newest_window_starting_on_a_human_turn(locomo_case, counter) -> None:
    """With exact costs, trim_messages(strategy='last', start_on='human') is the newest-fit window
    minus its leading non-user turns."""
    task = _task(locomo_case, 2000, counter)
    ours = NewestThatFits().select(task).included_ids
    roles = {i.id: i.role for i in locomo_case.items}
    while ours and roles[ours[0]] != "user":
        ours = ours[1:]
    selection = LangchainTrim(approximate=False).select(task)
    assert selection.included_ids == ours
    assert selection.payload_tokens <= 2000


def test_langchain_approx_uses_four_chars_a_token(make_item, words) -> None:
    """A 40-character user message costs ceil((40 + len('user')) / 4) + 3 = 14: 42 tokens keep three, 41 two."""
    items = [make_item(f"u{n}", "user", n, tokens=1, text="x" * 40) for n in range(5)]
    peer = LangchainTrim(approximate=True)
    assert peer.select(SelectionTask(items, "", 42, words, base_tokens=0)).included_ids == ["u2", "u3", "u4"]
    assert peer.select(SelectionTask(items, "", 41, words, base_tokens=0)).included_ids == ["u3", "u4"]


def test_langchain_maps_tool_calls_and_keeps_pairs(data_dir, counter) -> None:
    """On a tau-bench step with tool calls the peer keeps call/result pairs whole (start_on='human')."""
    from ctxledger.eval.datasets import load_dataset
    from ctxledger.eval.metrics import provider_violations

    case = load_dataset("tau-bench", data_dir, counter, limit=1).cases[-1]
    for approximate in (False, True):
        selection = LangchainTrim(approximate=approximate).select(_task(case, 4000, counter))
        assert selection.included_ids[0] == case.items[0].id  # the system policy is kept
        assert provider_violations(case.items, selection.included_ids) == []


def test_llamaindex_memory_keeps_a_suffix_within_its_chat_share(locomo_case, counter) -> None:
    """Memory keeps the newest turns whose text fits 70% of the token limit, plus the current question."""
    selection = LlamaIndexMemory(counter).select(_task(locomo_case, 2000, counter))
    ids = [i.id for i in locomo_case.items]
    kept = selection.included_ids
    assert kept == ids[len(ids) - len(kept) :]
    text_tokens = sum(counter.count(i.text) for i in locomo_case.items if i.id in set(kept))
    assert text_tokens + counter.count(locomo_case.query) <= 0.7 * (2000 - 3 - locomo_case.query_tokens)
    assert selection.payload_tokens <= 2000


def test_llamaindex_memory_passes_system_outside_memory(data_dir, counter) -> None:
    """The system policy of a tau-bench run is always sent, as FunctionAgent(system_prompt=…) does."""
    from ctxledger.eval.datasets import load_dataset

    case = load_dataset("tau-bench", data_dir, counter, limit=1).cases[3]
    selection = LlamaIndexMemory(counter).select(_task(case, 4000, counter))
    assert selection.included_ids[0] == case.items[0].id


def test_make_peer_builds_each_name_and_refuses_unknown(counter) -> None:
    """Every listed peer builds with its name; an unknown name is a configuration error."""
    assert [make_peer(n, counter).name for n in PEER_NAMES] == list(PEER_NAMES)
    with pytest.raises(ConfigurationError, match="unknown peer"):
        make_peer("autogen", counter)


def test_missing_peer_library_names_the_bench_extra(monkeypatch, counter) -> None:
    """Without langchain-core installed the error says to install ctxledger[bench]."""
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)
    with pytest.raises(ConfigurationError, match=r"ctxledger\[bench\]"):
        make_peer("langchain-trim-exact", counter)
