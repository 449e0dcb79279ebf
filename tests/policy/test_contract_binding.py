"""Working-set contracts fail closed: binding and tools by phase."""

from __future__ import annotations

from functools import partial

import pytest
from policy_helpers import graph

from ctxledger.errors import ConfigurationError
from ctxledger.policy import Policy, WorkingSetContract, default_policy
from ctxledger.policy.contracts import bind_contract, expose_tools

_graph = partial(graph, system_visibility="conversation")


# -- items 13-14: contracts fail closed --------------------------------------------------------------------


def _tools(*names):
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]


def test_no_phase_exposes_only_the_tools_every_phase_lists():
    contract = WorkingSetContract(
        agent="worker",
        tools={"investigation": ("search",), "action": ("search", "refund")},
        write_tools=("refund",),
    )
    tools = _tools("search", "refund", "delete_everything")
    shown, held = expose_tools(contract, tools, phase=None, checks_passed=("eligibility", "approval"))
    assert [t["function"]["name"] for t in shown] == ["search"]
    assert {"name": "delete_everything", "reason": "no_phase"} in held
    assert {"name": "refund", "reason": "no_phase"} in held
    shown, _ = expose_tools(contract, tools, phase="action", checks_passed=("eligibility", "approval"))
    assert [t["function"]["name"] for t in shown] == ["search", "refund"]
    with pytest.raises(ConfigurationError, match=r"phase 'cleanup' is not a phase .* action, investigation"):
        expose_tools(contract, tools, phase="cleanup", checks_passed=())


def test_an_unmatched_agent_or_call_type_is_refused_listing_the_contracts():
    router = WorkingSetContract(agent="router", call_type="routing")
    worker = WorkingSetContract(agent="worker", call_type="synthesis")
    worker_check = WorkingSetContract(agent="worker", call_type="check")
    contracts = (router, worker, worker_check)
    assert bind_contract(contracts, None, None) is None  # unbound call: as before
    assert bind_contract(contracts, "router", None) is router  # its only contract
    with pytest.raises(ConfigurationError, match=r"several .*worker/synthesis, worker/check"):
        bind_contract(contracts, "worker", None)
    with pytest.raises(ConfigurationError, match=r"agent='nobody'.*router/routing, worker/synthesis, worker/check"):
        bind_contract(contracts, "nobody", "routing")
    base = default_policy()
    policy = Policy(base.name, base.version, base.stages, contracts=contracts)
    ledger, g = _graph(policy)
    g.user("u1", "Route this.")
    with pytest.raises(ConfigurationError, match="no working-set contract"):
        ledger.assemble(g.conversation_id, agent="nobody", call_type="routing", now=g.now)
    asm = ledger.assemble(g.conversation_id, agent="router", now=g.now)
    assert asm.manifest["contract"]["call_type"] == "routing"


def test_a_policy_without_contracts_ignores_agent_and_call_type():
    ledger, g = _graph()
    g.user("u1", "Hi.")
    asm = ledger.assemble(g.conversation_id, agent="anyone", call_type="anything", now=g.now)
    assert asm.manifest["contract"] is None
