"""A ledger that assembled after every append (its snapshot, policy and manifest caches warm) decides exactly
as a fresh ledger does: the caches kept on the snapshot change the cost of an assembly, never its result."""

from __future__ import annotations

from typing import Any

import pytest

from ctxledger.errors import CtxledgerError
from ctxledger.ledger import Ledger
from ctxledger.policy.default import default_policy
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS
from ctxledger.scenarios.runner import DEFAULT_REQUEST
from ctxledger.testing import MemoryStore

# ``prefix`` compares a payload with the previous assembly made in this process: a warm ledger has one, a fresh one not.
_VOLATILE = ("id", "created_at", "timings", "prefix")


def _comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k not in _VOLATILE}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_warm_ledger_assembles_like_a_fresh_one_while_history_grows(scenario):
    """Every scenario graph, written record by record with an assembly after each append, ends as a fresh build."""
    store = MemoryStore()
    policy = scenario.policy() if scenario.policy else None
    ledger = Ledger(store, policy=policy)
    append = ledger.append
    warmups = 0

    def append_then_assemble(records: Any, **kwargs: Any) -> Any:
        nonlocal warmups
        stored = append(records, **kwargs)
        try:
            ledger.assemble(scenario.name, persist=False, **DEFAULT_REQUEST)
            warmups += 1
        except CtxledgerError:
            pass  # too early: no branch yet, or the instructions alone do not fit
        return stored

    ledger.append = append_then_assemble  # type: ignore[method-assign]
    builder = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, "now": None, **scenario.build(builder)}
    request["now"] = request["now"] or builder.now
    request.setdefault("branch_id", builder.branch_id)
    assert warmups > 3
    warm = [ledger.assemble(builder.conversation_id, persist=False, **request) for _ in range(2)]
    fresh = Ledger(store, policy=policy).assemble(builder.conversation_id, persist=False, **request)
    for asm in warm:
        assert asm.payload_hash == fresh.payload_hash
        assert _comparable(asm.manifest) == _comparable(fresh.manifest)


def test_manifest_policy_hash_follows_a_stage_changed_in_place():
    """The policy hash a manifest records is that of the policy as it is now, not as it was first hashed."""
    scenario = SCENARIOS[0]
    policy = scenario.policy() if scenario.policy else default_policy()
    ledger = Ledger(MemoryStore(), policy=policy)
    builder = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, "now": None, **scenario.build(builder)}
    request["now"] = request["now"] or builder.now
    request.setdefault("branch_id", builder.branch_id)
    before = policy.hash
    assert ledger.assemble(builder.conversation_id, persist=False, **request).manifest["policy"]["hash"] == before
    stage = policy.stage("lineage")
    stage.fill_from_other_branches = not stage.fill_from_other_branches  # type: ignore[union-attr]
    assert policy.hash != before
    assert ledger.assemble(builder.conversation_id, persist=False, **request).manifest["policy"]["hash"] == policy.hash
