"""A required unit too large to enter verbatim enters as an exact excerpt.

The failed output is real: SWE-agent's answer to a rejected ``edit`` in the marshmallow-1867 demonstration
(9,063 bytes: an ``E999 IndentationError`` followed by the whole would-be file listing). The budget is made
small instead of the output large, so the output costs more than ``B_dynamic`` (and more than the ladder's
reach of two input budgets, the shape that made every later call fail with ``RequiredBlocksDoNotFit``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxledger import Ledger
from ctxledger.assemble.assembler import REQUIRED_VERBATIM_SHARE
from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.records import Message, Role
from ctxledger.units import data_block_body

DEMO = (
    "swe-agent-demos/trajectories/demonstrations/replay__marshmallow-code__marshmallow-1867__function_calling__"
    "install-1/marshmallow-code__marshmallow-1867.traj"
)
ERROR_LINE = "- E999 IndentationError: unexpected indent"
SMALL_FAILURE = "mini-swe-agent-deepseek/sqlfluff__sqlfluff-1517.traj.json"


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


@pytest.fixture(scope="module")
def failed_edit(data_dir: Path) -> tuple[dict[str, Any], str]:
    """The real ``edit`` call (its arguments) and the real error output it got back."""
    history = json.loads((data_dir / DEMO).read_text())["history"]
    call = history[14]["tool_calls"][0]["function"]
    output = _text(history[15]["content"])
    assert call["name"] == "edit" and ERROR_LINE in output and len(output) > 9000
    return call, output


def _history(call: dict[str, Any], output: str) -> list[dict[str, Any]]:
    """Anthropic-form history: the failed call, the agent's reply, then a new user turn (bug_huge.py's shape)."""
    return [
        {"role": "user", "content": "Fix the rounding of TimeDelta serialization in src/marshmallow/fields.py."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": call["name"], "input": json.loads(call["arguments"])}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": output}],
        },
        {"role": "assistant", "content": "The edit was rejected with a syntax error."},
        {"role": "user", "content": "What went wrong with the edit?"},
    ]


def _ledger(call: dict[str, Any], output: str) -> Ledger:
    ledger = Ledger.open("memory://")
    ledger.import_messages(
        _history(call, output), api="anthropic-messages", system="You are a coding agent.", conversation_id="c"
    )
    return ledger


def _artifact_entry(manifest: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in manifest["included"] if e["kind"] == "tool_artifact")


def test_failed_output_larger_than_the_budget_enters_as_an_exact_excerpt(failed_edit: tuple[dict, str]) -> None:
    call, output = failed_edit
    ledger = _ledger(call, output)
    kwargs: dict[str, Any] = {"window_tokens": 1800, "output_tokens": 500, "margin_tokens": 100}
    asm = ledger.assemble("c", **kwargs)
    manifest = ledger.get_assembly(asm.id)
    entry = _artifact_entry(manifest)
    verbatim = ledger.coster("openai-chat", "gpt-4o").counter.count(output)
    assert verbatim > manifest["budget"]["dynamic"]  # the output alone does not fit: the old failure
    assert entry["reason"] == "unresolved_tool_error" and entry["stage"] == "protection"
    assert entry["representation"] == "excerpt" and entry["transform"].startswith("excerpt@")
    assert "does not fit B_dynamic" in entry["note"]
    unit_tokens = int(re.search(r"verbatim form \((\d+) tokens\)", entry["note"]).group(1))
    assert unit_tokens >= verbatim  # the whole unit: the call, its framing and the output
    assert asm.input_tokens <= manifest["budget"]["input"]
    # The tool message carries the error line and exact slices of the stored bytes, each at its locator.
    tool_msg = next(m for m in asm.payload["messages"] if m["role"] == "tool")
    assert ERROR_LINE in tool_msg["content"]
    assert entry["locators"]
    for loc in entry["locators"]:
        piece = ledger.rehydrate(entry["ref"], byte_range=(loc["byte_start"], loc["byte_end"]))
        assert piece == output.encode()[loc["byte_start"] : loc["byte_end"]]
        assert piece.decode().strip().splitlines()[0] in tool_msg["content"]
    assert any(ERROR_LINE.encode() in output.encode()[loc["byte_start"] : loc["byte_end"]] for loc in entry["locators"])
    why = ledger.explain(asm.id, entry["ref"])
    assert why["note"] == entry["note"] and entry["note"] in why["chain"]
    # The latest user turn and the failed call's request stay verbatim and in place.
    reps = {e["ref"]: e["representation"] for e in manifest["included"]}
    assert reps["c/6"] == "verbatim" and asm.payload["messages"][-1]["content"] == "What went wrong with the edit?"
    # Every later call works too (it used to raise forever).
    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    ledger.append([Message(id="c/again", role=Role.USER, content="Try the edit again.", **env)])
    assert _artifact_entry(ledger.get_assembly(ledger.assemble("c", **kwargs).id))["representation"] == "excerpt"


def test_the_same_output_stays_verbatim_when_it_takes_at_most_the_share(failed_edit: tuple[dict, str]) -> None:
    call, output = failed_edit
    ledger = _ledger(call, output)
    asm = ledger.assemble("c", window_tokens=16_000, output_tokens=1_000, margin_tokens=200)
    manifest = ledger.get_assembly(asm.id)
    entry = _artifact_entry(manifest)
    assert entry["representation"] == "verbatim" and "note" not in entry
    tool_msg = next(m for m in asm.payload["messages"] if m["role"] == "tool")
    assert data_block_body(tool_msg["content"]) == output


def test_a_small_real_failure_is_kept_verbatim_exactly_as_before(data_dir: Path) -> None:
    messages = json.loads((data_dir / SMALL_FAILURE).read_text())["messages"]
    output = messages[65]["content"]
    assert output.startswith("<returncode>1</returncode>")
    ledger = _ledger({"name": "bash", "arguments": '{"command": "python reproduce.py"}'}, output)
    asm = ledger.assemble("c", window_tokens=4_000, output_tokens=500, margin_tokens=100)
    entry = _artifact_entry(ledger.get_assembly(asm.id))
    assert (entry["representation"], entry["reason"]) == ("verbatim", "unresolved_tool_error")
    assert data_block_body(next(m for m in asm.payload["messages"] if m["role"] == "tool")["content"]) == output


def test_a_required_output_that_fits_stays_whole_however_large(failed_edit: tuple[dict, str]) -> None:
    """Nearly all of ``B_dynamic`` but still fitting: the required output is sent verbatim, not excerpted."""
    call, output = failed_edit
    ledger = _ledger(call, output)
    verbatim = ledger.coster("openai-chat", "gpt-4o").counter.count(output)
    window = int(verbatim * 1.25) + 900  # B_dynamic a little over the output's verbatim cost
    asm = ledger.assemble("c", window_tokens=window, output_tokens=500, margin_tokens=100)
    manifest = ledger.get_assembly(asm.id)
    assert REQUIRED_VERBATIM_SHARE * manifest["budget"]["dynamic"] > verbatim > manifest["budget"]["dynamic"] / 2
    entry = _artifact_entry(manifest)
    assert entry["representation"] == "verbatim" and not entry.get("note")


def test_an_oversized_latest_user_turn_still_fails_loudly_never_cut(data_dir: Path) -> None:
    """Verbatim-only reasons (the latest user turn, case B15) are not excerpted: the error names the turn."""
    task = json.loads((data_dir / "mini-swe-agent-deepseek/sqlfluff__sqlfluff-1763.traj.json").read_text())
    ledger = Ledger.open("memory://")
    ledger.import_messages(
        [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": task["messages"][1]["content"]},
        ],
        conversation_id="u",
    )
    with pytest.raises(RequiredBlocksDoNotFit) as err:
        ledger.assemble("u", window_tokens=1500, output_tokens=300, margin_tokens=100)
    assert "u/1 (latest_user_turn)" in str(err.value)


def test_a_required_unit_with_nothing_to_excerpt_still_fails_itemised() -> None:
    """Huge tool-call arguments are not a text the ladder excerpts: the budget error names the unit."""
    ledger = Ledger.open("memory://")
    args = json.dumps({"rows": [f"row {i}" for i in range(3000)]})
    ledger.import_messages(
        [
            {"role": "user", "content": "load the rows"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "load", "arguments": args}}],
            },
        ],
        conversation_id="p",
    )
    with pytest.raises(RequiredBlocksDoNotFit) as err:
        ledger.assemble("p", window_tokens=2000, output_tokens=500, margin_tokens=100)
    assert "p/1" in str(err.value)
