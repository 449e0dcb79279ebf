"""The budget's reach: an assembly of a long history visits the newest units, the best lexical matches and the
pinned ones; the rest is counted as one omission group and never visited.

Histories are generated (hypothesis) far longer than the budget, with a constraint, a failure no later call
repaired, a memory and the answer to the question placed deep in the past.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.assembler import FILL_TARGET
from ctxledger.assemble.reach import BEYOND_REACH, MATCH_BUDGETS, MAX_MATCHES, REACH_STAGE, ReachIndex, _matches
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.ledger import Ledger
from ctxledger.policy.stages.trust import TrustStage
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

REQUEST = {"window_tokens": 3_000, "output_tokens": 400, "margin_tokens": 100}
STEP = st.one_of(
    st.tuples(st.just("user"), st.integers(5, 80)),
    st.tuples(st.just("assistant"), st.integers(5, 80)),
    st.tuples(st.just("tool"), st.integers(40, 400)),
)


def _history(steps: list[tuple[str, int]], name: str = "long") -> tuple[Ledger, GraphBuilder]:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, name)
    g.system("sys", "You are a careful build engineer.")
    g.user("u0", "The nightly build fails; find out why.")
    g.user("rule", "Never push to the release branch.", tags=["constraint"])
    g.tool("broken", "deploy", {"target": "staging"}, '{"error": "permission denied"}', status="failed")
    g.tool("probe", "probe_cache", {"key": "zebra"}, '{"value": "the zebra cache holds the quokka token"}')
    for i in range(12):  # bulk: the history is always several times B_input
        rows = [{"line": k, "text": f"bulk {i} line {k} ok"} for k in range(150)]
        g.tool(f"bulk{i}", "read_log", {"bulk": i}, json.dumps(rows))
    for i, (kind, size) in enumerate(steps):
        if kind == "user":
            g.user(f"u{i + 1}", " ".join(f"question{i}-{k}" for k in range(size)))
        elif kind == "assistant":
            g.assistant(f"a{i}", " ".join(f"note{i}-{k}" for k in range(size)))
        else:
            rows = [{"line": k, "text": f"step {i} log line {k} ok"} for k in range(size)]
            g.tool(f"t{i}", "read_log", {"part": i}, json.dumps(rows))
    g.user("ulast", "What does the zebra cache hold?")
    return ledger, g


def _groups(manifest: dict) -> dict[tuple[str, str], dict]:
    out = {}
    for group in manifest["omissions"]:
        g = group if isinstance(group, dict) else group.as_dict()
        out[(g["reason"], g["stage"])] = g
    return out


LONG = st.lists(STEP, min_size=20, max_size=60)
QUICK = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "phases": [Phase.explicit, Phase.generate]}


@settings(max_examples=5, **QUICK)
@given(steps=LONG)
def test_a_long_history_is_visited_up_to_the_reach_and_the_rest_counted_once(steps):
    ledger, g = _history(steps)
    asm = ledger.assemble(g.conversation_id, branch_id=g.branch_id, now=g.now, **REQUEST)
    m = asm.manifest
    groups = _groups(m)
    beyond = groups[(BEYOND_REACH, REACH_STAGE)]
    included = {e["ref"] for e in m["included"]}
    # pinned far back: the constraint, the failure no later deploy repaired, and the lexical match
    assert {g.id("rule"), g.id("broken"), g.id("probe")} <= included
    assert len(m["candidates"]) == m["candidate_count"]  # the full trace lists the unvisited ones too
    assert m["omitted_by_reason"]["budget"] >= beyond["count"] > 0
    assert m["omitted_by_stage"][REACH_STAGE] == beyond["count"]
    assert beyond["first_seq"] <= beyond["last_seq"]
    dynamic = m["ledger"]["dynamic_tokens"]
    used = sum(e["tokens"] for e in m["included"] if e["stage"] != "fixed")
    assert used >= FILL_TARGET * dynamic or m["budget"]["fill"]
    # an unvisited record is explained by replay as left beyond the reach
    beyond_refs = [e["ref"] for e in m["omitted"] if e["reason"] == BEYOND_REACH]
    assert len(beyond_refs) == beyond["count"]
    answer = ledger.explain(asm.id, beyond_refs[0])
    assert answer["reason"] == BEYOND_REACH and answer["stage"] == REACH_STAGE


@settings(max_examples=3, **QUICK)
@given(steps=LONG, late=st.integers(1, 5))
def test_the_reach_index_kept_by_each_refresh_equals_one_built_from_scratch(steps, late):
    ledger, g = _history(steps, "grow")
    ledger.assemble(g.conversation_id, branch_id=g.branch_id, now=g.now, **REQUEST)
    for i in range(late):  # appended after the first assembly: pending calls completed later, more turns
        g.tool(f"late{i}", "read_log", {"part": f"late{i}"}, None, status="pending")
        ledger.assemble(g.conversation_id, branch_id=g.branch_id, now=g.now, **REQUEST)
        g.user(f"more{i}", f"and the zebra cache once more, round {i}?")
    warm = ledger.assemble(g.conversation_id, branch_id=g.branch_id, now=g.now, persist=False, **REQUEST)
    fresh_ledger = Ledger(ledger.store)
    fresh = fresh_ledger.assemble(g.conversation_id, branch_id=g.branch_id, now=g.now, persist=False, **REQUEST)
    assert warm.payload_hash == fresh.payload_hash
    kept = ledger.snapshots.load("default", g.conversation_id, g.branch_id).reach_index
    built = SnapshotLoader(ledger.store).load("default", g.conversation_id, g.branch_id).reach_index
    assert _index_state(kept) == _index_state(built)


def _index_state(index: ReachIndex) -> tuple:
    return (
        index.pins,
        index.failed,
        index.failed_tools,
        {k: v for k, v in index.successes.items() if v},
        index.users,
        index.unit_of,
        index.external,
        index.records_before,
        list(index.loose),
        index.moderators,
    )


def test_verdicts_about_units_stay_cached_when_another_branch_grows(monkeypatch):
    ledger, g = _history([("tool", 200), ("user", 20)] * 40, "fork")
    main = g.branch_id
    ledger.assemble(g.conversation_id, branch_id=main, now=g.now, **REQUEST)
    decided: list[str] = []
    original = TrustStage._decide

    def counting(self, unit, facts):
        decided.append(unit.id)
        return original(self, unit, facts)

    monkeypatch.setattr(TrustStage, "_decide", counting)
    ledger.assemble(g.conversation_id, branch_id=main, now=g.now, **REQUEST)
    assert decided == []  # warm: every verdict is cached per unit
    g.branch("experiment", fork_after="ulast")
    for i in range(5):
        g.user(f"side{i}", f"a side question {i}")
    g.branch_id = main
    ledger.assemble(g.conversation_id, branch_id=main, now=g.now, **REQUEST)
    assert decided == []  # records appended on another branch leave the main branch's verdicts valid


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.5, 1.0, 2.0]), min_size=1, max_size=700),
    cut=st.floats(0.0, 1.0),
)
def test_lexical_matches_are_the_best_scores_ties_to_the_oldest(scores, cut):
    import numpy as np

    from ctxledger.assemble.reach import MATCH_BUDGETS, MAX_MATCHES, _matches

    values = np.asarray(scores)
    start = int(cut * len(values))
    sums = list(range(0, len(values) + 1))  # every unit costs one token: the budget never stops the walk
    found = _matches(values, sums, start, input_tokens=10**6)
    older = values[:start]
    positive = np.flatnonzero(older > 0)
    best = positive[np.argsort(-older[positive], kind="stable")[:MAX_MATCHES]]  # the full sort
    expected = {p for b in best.tolist() for p in (b - 1, b, b + 1) if 0 <= p < start}
    assert len(values) < MATCH_BUDGETS * 10**6
    assert found == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1, allow_nan=False), st.integers(1, 300)), min_size=1, max_size=80),
    st.integers(0, 80),
    st.integers(1, 2_000),
)
def test_the_matches_and_their_neighbours_together_stay_within_the_match_budget(units, start, input_tokens):
    """Matches are taken best first with both neighbours; a neighbour's tokens count once, when it first enters,
    and taking stops once the matches and neighbours taken are worth more than ``MATCH_BUDGETS × B_input``."""
    scores = np.array([s for s, _ in units])
    sums = [0, *itertools.accumulate(t for _, t in units)]
    start = min(start, len(units))
    got = _matches(scores, sums, start, input_tokens)
    assert all(0 <= p < start for p in got)
    order = [p for p in np.argsort(-scores[:start], kind="stable").tolist() if scores[p] > 0][:MAX_MATCHES]
    taken: set[int] = set()
    for pos in order:  # replay: each match enters with its neighbours until the budget is passed
        if sum(sums[p + 1] - sums[p] for p in taken) > MATCH_BUDGETS * input_tokens:
            break
        taken.update(p for p in (pos - 1, pos, pos + 1) if 0 <= p < start)
    assert got == taken
