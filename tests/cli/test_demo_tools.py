"""The demo's next call carries the trajectory's tools (tau-bench's airline tools), so the model can call them."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.semantic import default_embedder
from ctxledger.demo import DEMO_CONVERSATION, demo_tools, ensure_imported, ensure_tools, run_demo
from ctxledger.ledger import Ledger
from ctxledger.records import SkillState
from ctxledger.testing import MemoryStore

README = Path(__file__).resolve().parents[2] / "README.md"


def test_bundled_tools_cover_every_call_of_the_trajectory():
    """Each tool the trajectory calls has a bundled schema, and every schema is an OpenAI function tool."""
    ledger = Ledger(MemoryStore())
    ensure_imported(ledger)
    called = {r.name for r in ledger.store.records("default", DEMO_CONVERSATION) if r.kind.value == "tool_call"}
    names = [t["function"]["name"] for t in demo_tools()]
    assert len(names) == len(set(names)) == 14 and called <= set(names)
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in demo_tools())


def test_tools_are_written_once():
    """The SkillState is written on the first run only; a reused demo store keeps its one SkillState."""
    ledger = Ledger(MemoryStore())
    ensure_imported(ledger)
    assert ensure_tools(ledger) is True and ensure_tools(ledger) is False
    states = [r for r in ledger.store.records("default", DEMO_CONVERSATION) if isinstance(r, SkillState)]
    assert len(states) == 1 and len(states[0].tool_schemas) == 14


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window=st.integers(7_000, 20_000), api=st.sampled_from(["openai-chat", "anthropic-messages"]))
def test_the_demo_payload_can_call_the_tools_at_any_budget(window, api):
    """Whatever the window, the demo payload exposes the 14 tools, and they are counted in F."""
    result = run_demo(Ledger(MemoryStore()), window_tokens=window, api=api)
    payload = result.assembly.payload
    names = [t["function"]["name"] if "function" in t else t["name"] for t in payload["tools"]]
    assert sorted(names) == sorted(t["function"]["name"] for t in demo_tools())
    assert result.assembly.manifest["tools"]["exposed"] and result.required.lost == ()
    assert result.assembled_tokens <= window - 1_000 - 200


def test_the_readme_quotes_one_figure_for_the_demo_call():
    """The demo section and the benchmark table quote the same replay and assembled tokens, the ones measured
    (the figure with the semantic extra when it is installed)."""
    text = README.read_text(encoding="utf-8")
    demo = re.search(r"full replay ([\d,]+) tokens \(it would\s+not even fit\), assembled ([\d,]+) tokens", text)
    bench = re.search(r"bundled tau-bench trajectory at 8k[^|]*\| ([\d,]+) → ([\d,]+) tokens", text)
    assert demo and bench and demo.groups() == bench.groups()
    semantic = re.search(r"With the `semantic`\s+extra installed .*? assembles ([\d,]+) tokens", text, re.S)
    assert semantic
    result = run_demo(Ledger(MemoryStore()))
    assembled = semantic.group(1) if default_embedder() is not None else demo.group(2)
    assert (demo.group(1), assembled) == (f"{result.replay_tokens:,}", f"{result.assembled_tokens:,}")
    assert result.assembly.payload["tools"] == [{"type": "function", "function": t["function"]} for t in demo_tools()]
