"""Stored write-path facts give the assembler exactly what rescanning gave: every scenario graph, every case.

For every unit of every scenario snapshot and shared failure case: the secret findings read from the facts
equal the scanner's on the rendered turns, the trust stage's instruction-like verdicts equal those without
facts, and the BM25 document built from stored terms equals the tokenized unit text.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from ctxledger.assemble import snapshot
from ctxledger.assemble.relevance import tokenize
from ctxledger.assemble.snapshot import SnapshotLoader, unit_facts
from ctxledger.assemble.term_keys import term_key
from ctxledger.errors import RecordNotFound
from ctxledger.eval.cases import read_case_file, run_case
from ctxledger.ledger import Ledger
from ctxledger.policy.base import StageContext
from ctxledger.policy.derivation import restricting_sources
from ctxledger.policy.secrets import default_scanner, redact_text
from ctxledger.policy.stages.secrets import findings_from_facts, name_findings, unit_findings
from ctxledger.policy.stages.trust import TrustStage
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS
from ctxledger.store.base import GraphStore
from ctxledger.testing import MemoryStore

_SHARED = os.environ.get("CTXLEDGER_SHARED_DIR") or Path(__file__).resolve().parents[2].parent / "shared"
CASES = sorted((Path(_SHARED) / "cases").glob("*.json"))
"""The shared failure cases (where the root conftest looks), listed at collection to parametrize."""


def _scenario_store(scenario) -> tuple[GraphStore, str, str]:
    ledger = Ledger(MemoryStore(), policy=scenario.policy() if scenario.policy else None)
    builder = GraphBuilder(ledger, scenario.name)
    scenario.build(builder)
    return ledger.store, builder.conversation_id, builder.branch_id


def _unit_terms(unit, facts) -> tuple[dict[int, int], int] | None:
    """The BM25 document of ``unit`` from its records' stored terms: ``(term key → frequency, length)``."""
    parts = unit_facts(unit, facts)
    if parts is None:
        return None
    counts: dict[int, int] = {}
    for found in parts:
        keys = np.frombuffer(found.term_keys, dtype="<i8").tolist()
        tfs = np.frombuffer(found.term_counts, dtype="<i4").tolist()
        for key, tf in zip(keys, tfs, strict=True):
            counts[key] = counts.get(key, 0) + tf
    return counts, sum(f.length for f in parts)


def _check(store: GraphStore, conversation_id: str, branch_id: str) -> int:
    snap = SnapshotLoader(store).load("default", conversation_id, branch_id)
    scanner = default_scanner()
    trust = TrustStage()
    assert set(snap.facts) == {r.id for r in snap.records}
    assert all(f.current for f in snap.facts.values())
    stored_terms = store.record_facts("default", conversation_id)
    for position, unit in enumerate(snap.units):
        assert findings_from_facts(unit, snap.facts, scanner) == (
            name_findings(unit, scanner),
            unit_findings(unit, scanner),
        ), unit.id
        assert trust._decide(unit, snap.facts) == trust._decide(unit, {}), unit.id
        tokens = tokenize([redact_text(unit.text)])[0]  # no secret enters the index
        doc = _unit_terms(unit, stored_terms)
        if doc is None:  # tokenized at load: a result shown as a reference, a notice or content parts
            assert unit.transforms or any(not isinstance(t.content, str) for t in unit.turns if t.role == "tool")
        else:
            keyed = {term_key(t): n for t, n in Counter(tokens).items()}
            assert (dict(doc[0]), doc[1]) == (keyed, len(tokens)), unit.id
        assert snap.index._lengths[position] == len(tokens), unit.id
    find = _finder(store)
    stored = StageContext(None, snap.records, snap.units, snap.lineage_branches, find_record=find, facts=snap.facts)
    walked = StageContext(None, snap.records, snap.units, snap.lineage_branches, find_record=find)
    for rec in snap.records:
        assert list(restricting_sources(stored, rec)) == list(restricting_sources(walked, rec)), rec.id
    return len(snap.units)


def _finder(store: GraphStore):
    def find(record_id: str):
        try:
            return store.get("default", record_id)
        except RecordNotFound:
            return None

    return find


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_facts_equal_a_rescan(scenario) -> None:
    """Every unit of the scenario's snapshot: stored findings, phrases and terms equal the rescanned ones."""
    store, conv, branch = _scenario_store(scenario)
    assert _check(store, conv, branch) > 0


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_facts_equal_a_rescan(path: Path) -> None:
    """Every unit of each shared failure case's snapshot (imported as a user would) equals its rescan."""
    ledger = Ledger(MemoryStore())
    run = run_case(read_case_file(path), ledger)
    conv = next(iter(ledger.store.conversations("default")))
    branch = ledger.store.records("default", conv)[0].branch_id
    assert run.assembly is not None or run.error is not None
    assert _check(ledger.store, conv, branch) > 0


@pytest.mark.parametrize("window", [1, 2, 5])
def test_windowed_build_indexes_the_same_documents(window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading facts window by window (a long history's terms never all in memory) builds the same index."""
    scenario = next(s for s in SCENARIOS if s.name == "contradiction-and-supersession")
    store, conv, branch = _scenario_store(scenario)
    whole = SnapshotLoader(store).load("default", conv, branch)
    monkeypatch.setattr(snapshot, "FACTS_WINDOW", window)
    windowed = SnapshotLoader(store).load("default", conv, branch)
    assert windowed.facts == whole.facts
    assert len(windowed.index) == len(whole.index) == len(whole.units)
    for unit in whole.units:
        query = tokenize([unit.text])[0][:5]
        assert list(windowed.index.scores(query)) == list(whole.index.scores(query))


def test_facts_of_an_older_detector_are_recomputed_and_stored_again() -> None:
    """A new process that finds facts stamped by another detector recomputes them instead of trusting them."""
    scenario = next(s for s in SCENARIOS if s.name == "secrets-withheld")
    store, conv, branch = _scenario_store(scenario)
    good = store.record_facts("default", conv)
    forged = [
        dataclasses.replace(f, stamp="f0-older", texts=(), block=None, instruction="forged") for f in good.values()
    ]
    store.put_facts("default", forged)
    assert not any(f.current for f in store.record_facts("default", conv).values())
    snap = SnapshotLoader(store).load("default", conv, branch)
    # the snapshot keeps the facts the stages read; its indexes hold the terms and vectors
    kept = {"term_keys": b"", "term_counts": b"", "vector": b""}
    assert snap.facts == {rid: dataclasses.replace(f, **kept) for rid, f in good.items()}
    assert store.record_facts("default", conv) == good


def test_retention_keeps_the_facts_true() -> None:
    """After a rule redacts the tool results, stored facts are those of the notices; deleted records leave none."""
    from ctxledger.facts import compute_facts
    from ctxledger.retention.engine import retain
    from ctxledger.retention.rules import RetentionRule, RetentionRules

    scenario = next(s for s in SCENARIOS if s.name == "secrets-withheld")
    store, conv, branch = _scenario_store(scenario)
    before = store.record_facts("default", conv)
    rules = RetentionRules(
        (
            RetentionRule("redact-results", ("tool_artifact",), "redact"),
            RetentionRule("drop-memories", ("tool_memory",), "delete"),
        )
    )
    retain(store, rules, now=max(r.created_at for r in store.records("default", conv)) + timedelta(days=1))
    records = store.records("default", conv)
    after = store.record_facts("default", conv)
    assert set(after) == {r.id for r in records}
    assert after == {f.record_id: f for f in compute_facts(records, store.blobs.get)}
    assert after != {rid: f for rid, f in before.items() if rid in after}  # something was rewritten
    assert not any(lk.source_id not in after for lk in store.links("default", conv))
    assert _check(store, conv, branch) > 0
