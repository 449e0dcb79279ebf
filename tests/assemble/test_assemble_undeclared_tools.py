"""Assemblies for Anthropic define every tool their history calls, inside the budget and counted exactly.

Histories are generated: tool exchanges of several tools, some of whose schemas were recorded (a skill state)
and some never. The minimal definitions of the others are known before selection (every call of the payload
comes from a live unit), so they are part of ``F``: the ledger's framing, the payload's count and the budget
all hold them.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.serialize import get_serializer
from ctxledger.serialize.anthropic_messages import REPLY_PRIMING
from ctxledger.serialize.undeclared_tools import SCHEMA_NOT_RECORDED, minimal_definition
from ctxledger.testing import MemoryStore

TOOLS = ["read_log", "run_tests", "get_user_details", "deploy"]
STEP = st.tuples(st.sampled_from(TOOLS), st.integers(1, 400))


def history(steps: list[tuple[str, int]], recorded: list[str]) -> tuple[Ledger, GraphBuilder]:
    """Tool exchanges (tool, rows of output) between two user turns; ``recorded`` tools have schemas."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "undeclared")
    g.system("sys", "You are a careful build engineer.")
    if recorded:
        g.skills("skills", ["build"], recorded)
    g.user("u0", "The nightly build fails; find out why.")
    for i, (tool, rows) in enumerate(steps):
        g.tool(f"t{i}", tool, {"part": i}, json.dumps([{"line": k, "text": f"step {i} line {k}"} for k in range(rows)]))
    g.user("ulast", "What is the cause?")
    return ledger, g


def _tool_uses(payload: dict) -> set[str]:
    return {b["name"] for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"}  # fmt: skip


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(STEP, min_size=1, max_size=25),
    recorded=st.lists(st.sampled_from(TOOLS), unique=True),
    window=st.integers(2_500, 20_000),
)
def test_anthropic_payloads_define_every_called_tool_within_the_budget(steps, recorded, window):
    ledger, g = history(steps, recorded)
    asm = ledger.assemble(
        g.conversation_id, api="anthropic-messages", model="claude-sonnet-4-5", window_tokens=window,
        output_tokens=500, margin_tokens=100, branch_id=g.branch_id, now=g.now,
    )  # fmt: skip
    m, payload = asm.manifest, asm.payload
    serializer = get_serializer("anthropic-messages")
    serializer.validate(payload)
    sent = {t["name"] for t in payload.get("tools", ())}
    assert _tool_uses(payload) <= sent
    undeclared = m["tools"].get("undeclared", {})
    assert set(undeclared) <= set(TOOLS) - set(recorded)
    assert set(undeclared.values()) <= {SCHEMA_NOT_RECORDED}
    assert _tool_uses(payload) - set(recorded) <= set(undeclared)
    assert sent == set(recorded) | set(undeclared)
    counter = ledger.coster("anthropic-messages", "claude-sonnet-4-5").counter
    assert asm.input_tokens == serializer.count(payload, counter) <= m["budget"]["input"]
    tools_part = serializer.count({"messages": [], "tools": payload.get("tools", [])}, counter) - REPLY_PRIMING
    definitions = [minimal_definition(n) for n in sorted(undeclared)]
    assert tools_part >= serializer.tools_tokens(definitions, counter)
    assert m["ledger"]["classes"]["framing"]["used"] == serializer.base_tokens(counter) + tools_part


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=10), recorded=st.lists(st.sampled_from(TOOLS), unique=True))
def test_openai_payloads_are_left_as_they_were(steps, recorded):
    """OpenAI Chat accepts calls of tools the request does not define: only recorded schemas are sent."""
    ledger, g = history(steps, recorded)
    asm = ledger.assemble(g.conversation_id, api="openai-chat", model="gpt-4o", window_tokens=8_000,
                          output_tokens=500, branch_id=g.branch_id, now=g.now)  # fmt: skip
    assert {t["function"]["name"] for t in asm.payload.get("tools", ())} == set(recorded)
    assert "undeclared" not in asm.manifest["tools"]


def test_tau_bench_trajectory_without_schemas(data_dir, tmp_path):
    """The tau-bench airline logs record no tool schemas: the Anthropic payload defines the tools it calls."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())
    one = tmp_path / "airline.json"
    one.write_text(json.dumps([r for r in records if (r["task_id"], r["trial"]) == (5, 2)]))
    ledger = Ledger(MemoryStore())
    (conversation,) = ledger.import_file(one).conversation_ids
    asm = ledger.assemble(conversation, api="anthropic-messages", window_tokens=6_000, output_tokens=500)
    called = _tool_uses(asm.payload)
    assert called
    assert {t["name"] for t in asm.payload["tools"]} >= called
    assert set(asm.manifest["tools"]["undeclared"]) >= called
