"""Unit tests of the budget arithmetic, the relevance index, selection and incremental snapshots."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest

from ctxledger.assemble.lexical_index import IncrementalBM25
from ctxledger.assemble.relevance import stemmer, tokenize
from ctxledger.assemble.select import Option, SelectionItem, select
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.budget import Budget, BudgetLedger
from ctxledger.errors import BudgetItem, ConfigurationError, RequiredBlocksDoNotFit
from ctxledger.ingest import parse_file, write_batch
from ctxledger.ledger import Ledger
from ctxledger.policy.base import ReasonCode
from ctxledger.records import Message, Role
from ctxledger.testing import MemoryStore


def test_budget_arithmetic_and_itemised_error():
    """B_input = W - O - M, and required blocks over it raise an error listing every block."""
    budget = Budget(1000, 200, 50)
    assert budget.input_tokens == 750
    assert budget.check_required([BudgetItem("a", "instruction", 500)]) == 250
    with pytest.raises(RequiredBlocksDoNotFit) as err:
        budget.check_required([BudgetItem("sys", "instruction", 500), BudgetItem("m9", "latest_user_turn", 300)])
    assert (
        err.value.required_tokens == 800 and "sys" in str(err.value) and "m9 (latest_user_turn): 300" in str(err.value)
    )
    with pytest.raises(ConfigurationError):
        Budget(100, 90, 10)


def test_incremental_bm25_matches_bm25s(data_dir):
    """Our append-only BM25 gives bm25s' Lucene scores on real (stemmed) turns, also after truncation."""
    import json

    conv = json.loads((data_dir / "locomo" / "locomo10_conv0-6.json").read_text())[0]["conversation"]
    texts = [t["text"] for t in conv["session_1"] + conv["session_2"]]
    docs = tokenize(texts)
    ours = IncrementalBM25()
    for d in docs:
        ours.add(d)
    ours.add(["extra", "doc"])
    ours.truncate(len(docs))
    ref = bm25s.BM25()
    ref.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer(), show_progress=False), show_progress=False)
    query = tokenize(["What did Caroline research about adoption agencies?"])[0]
    np.testing.assert_allclose(ours.scores(query), ref.get_scores(query), rtol=1e-5, atol=1e-6)


def _scalar_bm25(docs, query, n, k1=1.5, b=0.75):
    """The per-posting BM25 loop the vectorised index must reproduce bit for bit."""
    import math
    from collections import Counter

    lengths = [len(d) for d in docs[:n]]
    avgdl = sum(lengths) / n if sum(lengths) else 1.0
    out = np.zeros(n)
    for term in set(query):
        postings = [(i, Counter(d)[term]) for i, d in enumerate(docs[:n]) if term in d]
        if not postings:
            continue
        idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
        for i, tf in postings:
            out[i] += idf * tf / (tf + k1 * (1 - b + b * lengths[i] / avgdl))
    return out


def test_incremental_bm25_vectorised_scores_equal_the_scalar_formula(data_dir):
    """Scores of a prefix, and after truncating and re-adding, equal the scalar loop bit for bit."""
    import json

    conv = json.loads((data_dir / "locomo" / "locomo10_conv0-6.json").read_text())[0]["conversation"]
    docs = tokenize([t["text"] for t in conv["session_1"] + conv["session_2"] + conv["session_3"]])
    index = IncrementalBM25()
    for d in docs[:-5]:
        index.add(d)
    query = tokenize(["Caroline said she went to a support group and researched adoption agencies?"])[0]
    assert np.array_equal(index.scores(query), _scalar_bm25(docs, query, len(docs) - 5))
    index.truncate(len(docs) - 9)
    for d in docs[-9:]:
        index.add(d)
    for n in (len(docs), len(docs) - 7, 1):
        got = index.scores(query, n)
        assert got.any() or n == 1
        assert np.array_equal(got, _scalar_bm25(docs, query, n))


def test_selection_takes_required_then_utility_and_explains_omissions():
    """Required items are placed first; optional ones by utility; what does not fit is omitted (budget, class_cap)."""

    def item(uid, seq, tokens, utility, cls="conversation", required=False):
        return SelectionItem(uid, seq, cls, [Option("verbatim", tokens, utility, ())], required)

    ledger = BudgetLedger(100, {"operational": 0.3})
    items = [
        item("req", 9, 40, 0.1, required=True),
        item("big", 8, 50, 0.9),
        item("small", 2, 10, 0.5),
        item("tool", 7, 40, 0.95, cls="operational"),
        item("late", 1, 20, 0.2),
    ]
    result = select(items, 100, ledger)
    assert set(result.chosen) == {"req", "big", "small"}
    assert result.omitted == {"tool": ReasonCode.CLASS_CAP, "late": ReasonCode.BUDGET}
    assert result.used_tokens == 100


def test_incremental_snapshot_equals_fresh_build(data_dir):
    """A snapshot refreshed after appends has the same units as one built from scratch."""
    store = MemoryStore()
    batch = parse_file(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json")
    conv = batch.conversations[5]
    head, tail = conv.records[:-7], conv.records[-7:]
    conv.records[:] = head
    write_batch(store, batch.__class__(batch.source, batch.format, [conv]))
    loader = SnapshotLoader(store)
    branch = head[0].branch_id
    loader.load("default", conv.conversation_id, branch)
    store.append(tail)
    refreshed = loader.load("default", conv.conversation_id, branch)
    fresh = SnapshotLoader(store).load("default", conv.conversation_id, branch)
    assert [u.record_ids for u in refreshed.units] == [u.record_ids for u in fresh.units]
    assert [u.turns for u in refreshed.units] == [u.turns for u in fresh.units]
    q = tokenize(["cancel my reservation"])[0]
    np.testing.assert_allclose(refreshed.index.scores(q), fresh.index.scores(q))


def test_snapshot_as_of_seq_and_explain(data_dir):
    """An assembly as of an earlier seq sees only that history; explain answers for included and omitted items."""
    ledger = Ledger(MemoryStore())
    result = ledger.import_file(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json", count_tokens_for=None)
    conv = result.conversation_ids[7]
    records = ledger.store.records("default", conv)
    users = [r for r in records if isinstance(r, Message) and r.role is Role.USER]
    cut = users[2].seq
    asm = ledger.assemble(conv, as_of_seq=cut, window_tokens=4000, output_tokens=500, margin_tokens=100)
    assert asm.manifest["snapshot_seq"] == cut
    assert all(r.seq <= cut for r in records if r.id in asm.manifest["candidates"])
    assert asm.turn_refs[-1] == users[2].id
    why = ledger.explain(asm.id, users[2].id)
    assert why["status"] == "included" and why["stage"] == "protection" and why["reason"] == "latest_user_turn"
    small = ledger.assemble(conv, window_tokens=2600, output_tokens=500, margin_tokens=100)
    omitted = small.manifest["omitted"][0]
    why_not = ledger.explain(small.id, omitted["ref"])
    assert why_not["status"] == "omitted" and why_not["reason"] == "budget" and why_not["stage"] == "selection"


def test_a_required_assistant_lead_brings_its_user_turn_for_anthropic(data_dir):
    """A tight Anthropic budget whose newest required step is an assistant turn still starts with a user turn."""
    ledger = Ledger(MemoryStore())
    result = ledger.import_file(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json", count_tokens_for=None)
    conv = next(c for c in result.conversation_ids if c.endswith("task13-trial1"))
    # F holds the 1,252-token policy and the minimal definitions of the 4 tools it calls (505 tokens with the
    # tool-use system prompt: tau-bench records no schemas), so 2,100 tokens leave room for little of the rest
    asm = ledger.assemble(
        conv,
        window_tokens=2500,
        output_tokens=300,
        margin_tokens=100,
        api="anthropic-messages",
        model="claude-sonnet-4-5",
    )
    assert asm.payload["messages"][0]["role"] == "user"
    assert asm.manifest["omitted_by_reason"]["budget"] > 0
    assert asm.input_tokens <= 2100


def test_import_messages_in_anthropic_form_keeps_the_system_prompt():
    """Anthropic-form messages with system= import with their instructions, which lead the payload."""
    ledger = Ledger(MemoryStore())
    ledger.import_messages(
        [
            {"role": "user", "content": "Weather in Porto?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "forecast", "input": {"city": "Porto"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "19 C"}]},
            {"role": "user", "content": "And tomorrow?"},
        ],
        api="anthropic-messages",
        system="You are a travel helper.",
        conversation_id="an",
    )
    asm = ledger.assemble(
        "an", api="anthropic-messages", model="claude-sonnet-4-5", window_tokens=4000, output_tokens=500
    )
    assert asm.payload["system"] == "You are a travel helper."
    assert asm.payload["messages"][0]["role"] == "user"
