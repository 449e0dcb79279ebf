"""``explain`` on a skill state says what the call did with its tool schemas, never "not found".

A skill state is no selection candidate: the newest one on the lineage that holds tool schemas gives the call
its tools (part of the fixed blocks F) unless the request names its own, and a working-set contract may
withhold some. The answer is the same from a summary manifest and from a full trace, and through the CLI, the
HTTP service and the MCP server.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.policy.contracts import tool_name
from ctxledger.records import SkillState
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS, _contract_policy, _support_graph
from ctxledger.scenarios.runner import DEFAULT_REQUEST
from ctxledger.testing import MemoryStore

TOOLS = ("search", "lookup", "refund", "notify")


def _sent_tools(payload: dict[str, Any]) -> list[str]:
    return [tool_name(t) for t in payload.get("tools") or ()]


def _skill_states(ledger: Ledger, conversation_id: str) -> list[SkillState]:
    return [r for r in ledger.store.records("default", conversation_id) if isinstance(r, SkillState)]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_scenario_skill_state_is_explained_alike_from_summary_and_full_trace(scenario: Any) -> None:
    ledger = Ledger(MemoryStore(), policy=scenario.policy() if scenario.policy else None)
    builder = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, "now": None, **scenario.build(builder)}
    request["now"] = request["now"] or builder.now
    request.setdefault("branch_id", builder.branch_id)
    full = ledger.assemble(builder.conversation_id, trace="full", **request)
    summary = ledger.assemble(builder.conversation_id, **request)
    for state in _skill_states(ledger, builder.conversation_id):
        answer = ledger.explain(summary.id, state.id)
        assert answer == ledger.explain(full.id, state.id)
        assert answer["status"] in ("included", "omitted") and answer["chain"]
        if answer["status"] == "included":
            renamed = full.manifest["tools"].get("renamed", {})
            named = [renamed.get(n, n) for n in full.manifest["tools"]["exposed"] if n in answer["detail"]]
            assert named and set(named) <= set(_sent_tools(full.payload))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    states=st.lists(st.lists(st.sampled_from(TOOLS), unique=True, max_size=3), min_size=1, max_size=4),
    own_tools=st.booleans(),
)
def test_the_newest_skill_state_with_schemas_is_the_one_sent(states: list[list[str]], own_tools: bool) -> None:
    """Any run of skill states (some without schemas): one answer per state, and it matches the payload."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "skills")
    g.system("sys", "You help with orders.")
    ids = []
    for k, tools in enumerate(states):
        g.user(f"u{k}", f"Step {k}: please check order {k}.")
        ids.append(g.skills(f"skills-{k}", ["orders"], tools))
    g.user("last", "Which order is late?")
    extra: dict[str, Any] = {}
    if own_tools:
        extra["tools"] = [{"type": "function", "function": {"name": "ask", "parameters": {"type": "object"}}}]
    asm = ledger.assemble(g.conversation_id, window_tokens=4000, output_tokens=200, **extra)
    answers = [ledger.explain(asm.id, rid) for rid in ids]
    supplier = max((k for k, tools in enumerate(states) if tools), default=None)
    for k, (tools, answer) in enumerate(zip(states, answers, strict=True)):
        if not tools:
            expected = "no_tool_schemas"
        elif own_tools:
            expected = "request_tools"
        elif k == supplier:
            expected = "tool_schemas"
        else:
            expected = "superseded"
            assert ids[supplier] in answer["detail"]
        assert answer["reason"] == expected, answer
        assert (answer["status"] == "included") is (expected == "tool_schemas")
    if supplier is not None and not own_tools:
        assert _sent_tools(asm.payload) == states[supplier]
        assert all(name in answers[supplier]["detail"] for name in states[supplier])


def test_a_contract_withholding_a_tool_is_named_and_a_later_state_is_outside_the_snapshot() -> None:
    ledger = Ledger(MemoryStore(), policy=_contract_policy())
    g = GraphBuilder(ledger, "support")
    _support_graph(g)
    later = g.skills("skills-later", ["support"], ["kb.search"])
    request = {"agent": "support", "call_type": "action", "phase": "investigation", "now": g.now}
    before_later = ledger.store.head_seq("default", g.conversation_id) - 1
    asm = ledger.assemble(g.conversation_id, as_of_seq=before_later, **request)
    why = ledger.explain(asm.id, g.id("skills"))
    assert (why["status"], why["stage"], why["reason"]) == ("included", "fixed", "tool_schemas")
    assert "orders.lookup (named orders_lookup for the provider), kb.search (named kb_search" in why["detail"]
    assert "withheld by the working-set contract: refunds.issue (checks:eligibility,approval)" in why["detail"]
    assert sorted(_sent_tools(asm.payload)) == ["kb_search", "orders_lookup"]
    after = ledger.explain(asm.id, later)
    assert (after["status"], after["reason"]) == ("omitted", "not_in_lineage")
    assert "after the snapshot" in after["detail"]


def test_cli_service_and_mcp_explain_a_skill_state(tmp_path: Any) -> None:
    """The short name completes as ``<conversation>/<ref>`` everywhere, and every front end gives the answer."""
    import anyio
    from fastapi.testclient import TestClient
    from mcp import Client
    from typer.testing import CliRunner

    from ctxledger.cli import app
    from ctxledger.mcp_server import build_server
    from ctxledger.service import create_app
    from ctxledger.store.keys import create_key

    url = f"sqlite:///{tmp_path / 'ctx.db'}"
    with Ledger.open(url) as ledger:
        g = GraphBuilder(ledger, "shop")
        g.system("sys", "You help with orders.")
        g.skills("skills", ["orders"], ["lookup"])
        g.user("u", "Where is my order?")
        asm_id = ledger.assemble(g.conversation_id).id
        key = create_key(ledger.store, "default")[0]
    cli = CliRunner().invoke(app, ["--db", url, "explain", asm_id, "skills"])
    assert cli.exit_code == 0, cli.output
    assert "INCLUDED" in cli.output and "tool_schemas" in cli.output
    with TestClient(create_app(url)) as client:
        served = client.get(f"/v1/assemblies/{asm_id}/explain/skills", headers={"Authorization": f"Bearer {key}"})
    assert served.status_code == 200, served.text
    assert (served.json()["status"], served.json()["reason"]) == ("included", "tool_schemas")

    async def call() -> Any:
        with Ledger.open(url) as ledger:
            async with Client(build_server(ledger, "default")) as client:
                return await client.call_tool("explain", {"assembly_id": asm_id, "ref": "skills"})

    result = anyio.run(call)
    assert not result.is_error and "tool_schemas" in str(result.structured_content or result.content)
