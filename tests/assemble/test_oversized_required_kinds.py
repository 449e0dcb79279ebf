"""Every kind of required item too large for its budget: an exact excerpt when one fits, else an itemised error.

The history ends on one huge required item of a generated kind: the latest user turn, the latest step as an
assistant message, a tool exchange or a checkpoint, a failed call no success has resolved, a pending call with
huge arguments, or a checkpoint that is not the latest step. Its verbatim form does not fit beside the other
required items (or not at all), so the assembly must either enter it as an exact excerpt of its stored bytes
(when the policy allows a cheaper form and that form fits) or raise ``RequiredBlocksDoNotFit`` naming it.

The end-to-end case is the real one: mini-swe-agent's exit checkpoint of sqlfluff-1763 (a 24 KB patch) at
``--window 8000 --output 1000``, which failed with 8,573 required tokens against ``B_input`` 6,488.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.records import Checkpoint, Message, ToolArtifact
from ctxledger.units import checkpoint_bytes

HUGE = 1_000_000
"""A window nothing in these histories comes near: every item enters verbatim."""

EXCERPT_ROOM = 450
"""Tokens that always hold the smallest excerpt (256 tokens of text) with its framing and its unit's call turn."""

EXCERPTABLE = {"assistant", "tool_latest", "failed", "checkpoint", "old_checkpoint"}
"""Kinds whose huge item may enter as an excerpt: required for a reason that admits cheaper forms, with a text."""

VERBATIM_ONLY = {"user", "pending"}
"""Kinds that enter verbatim or not at all: the latest user turn and a pending call whose only large text is its
arguments (the ladder never cuts a call)."""

WORDS = ["patch", "the", "linter", "ValueError", "fixed", "raise", "return", "config", "ünïcode", "42", "skip"]


@st.composite
def huge_texts(draw: Any) -> str:
    """A few thousand tokens of lines (some of them error lines), from a small drawn vocabulary of lines."""
    pool = draw(st.lists(st.lists(st.sampled_from(WORDS), min_size=3, max_size=12).map(" ".join), min_size=3))
    errors = draw(st.sets(st.integers(0, 399), max_size=4))
    lines = draw(st.integers(250, 700))
    out = []
    for i in range(lines):
        line = f"{i}: {pool[i % len(pool)]}"
        out.append(f"Traceback: ValueError at step {i}" if i in errors else line)
    return "\n".join(out) + "\n"


def _build(kind: str, huge: str, task: str) -> tuple[Ledger, str]:
    """A history ending on the huge required item of ``kind``; returns the ledger and the item's unit id."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=datetime(2026, 9, 1, tzinfo=UTC))
    rec.system("You are a coding agent.")
    rec.user(task)
    rec.tool_call("bash", {"command": "ls"}, "setup.py\nsrc\ntests\n")
    if kind == "user":
        return ledger, rec.user(huge)
    if kind == "assistant":
        return ledger, rec.assistant(huge)
    if kind == "tool_latest":
        return ledger, rec.tool_call("bash", {"command": "cat log"}, huge).message
    if kind == "failed":
        unit = rec.tool_call("bash", {"command": "make"}, huge, status="failed").message
        rec.user("Why did it fail?")
        return ledger, unit
    if kind == "pending":
        return ledger, rec.tool_call("write", {"path": "big.txt", "content": huge}).message
    unit = rec.checkpoint("run-1", {"exit_status": "Submitted", "submission": huge})
    if kind == "old_checkpoint":
        rec.assistant("Submitted.")
    return ledger, unit


def _required_costs(manifest: dict[str, Any]) -> dict[str, int]:
    """Unit id → verbatim tokens of every required unit (protection stage), from an assembly at :data:`HUGE`."""
    costs: dict[str, int] = defaultdict(int)
    for entry in manifest["included"]:
        if entry["stage"] == "protection":
            assert entry["representation"] == "verbatim"
            costs[entry["unit"]] += entry["tokens"]
    return dict(costs)


def _source_bytes(ledger: Ledger, ref: str) -> bytes:
    """The stored bytes an excerpt of record ``ref`` locates (independently of the rehydration path)."""
    rec = ledger.store.get("default", ref)
    if isinstance(rec, Checkpoint):
        return checkpoint_bytes(rec)
    if isinstance(rec, Message):
        return str(rec.content).encode()
    assert isinstance(rec, ToolArtifact)
    return ledger.store.blobs.get(rec.sha256)


def _assert_exact_excerpt(ledger: Ledger, asm: Any, unit: str) -> None:
    """The unit entered as an excerpt whose every shown run is its locator's stored bytes, in the payload."""
    entries = [e for e in asm.manifest["included"] if e["unit"] == unit and e["locators"]]
    assert entries, "the excerpted record must list its locators"
    payload = json.dumps(asm.payload, ensure_ascii=False)
    for entry in entries:
        assert entry["representation"] == "excerpt" and entry["transform"].startswith("excerpt@")
        data = _source_bytes(ledger, entry["ref"])
        assert ledger.rehydrate(entry["ref"]) == data
        for loc in entry["locators"]:
            assert loc["sha256"] == hashlib.sha256(data).hexdigest()
            piece = data[loc["byte_start"] : loc["byte_end"]]
            assert ledger.rehydrate(loc) == piece
            assert json.dumps(piece.decode().strip(), ensure_ascii=False)[1:-1] in payload


@pytest.mark.parametrize("kind", sorted(EXCERPTABLE | VERBATIM_ONLY))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    huge=huge_texts(),
    task_words=st.integers(3, 1500),
    share=st.floats(0.02, 1.3),
)
def test_a_required_item_larger_than_its_room_is_excerpted_exactly_or_named_in_the_error(
    kind: str, huge: str, task_words: int, share: float
) -> None:
    task = "Fix the linter so that " + " ".join(WORDS[i % len(WORDS)] for i in range(task_words))
    ledger, unit = _build(kind, huge, task)
    full = ledger.assemble("c", window_tokens=HUGE, output_tokens=0, margin_tokens=0)
    required = _required_costs(full.manifest)
    assert unit in required
    fixed = full.manifest["budget"]["fixed"]
    all_verbatim = fixed + sum(required.values())
    others = all_verbatim - required[unit]
    window = max(40, int(all_verbatim * share))
    try:
        asm = ledger.assemble("c", window_tokens=window, output_tokens=0, margin_tokens=0)
    except RequiredBlocksDoNotFit as err:
        event(f"{kind}: raised")
        assert err.required_tokens > err.budget_tokens == window
        (listed,) = [b for b in err.blocks if b.ref.split(" ")[0] == unit]
        if kind in VERBATIM_ONLY:
            assert listed.tokens == required[unit]  # no cheaper form is allowed: listed verbatim
            assert all_verbatim > window
        else:
            assert listed.tokens < required[unit]  # listed at its excerpt, which does not fit either
            assert window < others + EXCERPT_ROOM  # the smallest excerpt would have fitted otherwise
        return
    assert asm.input_tokens <= window
    entries = [e for e in asm.manifest["included"] if e["unit"] == unit]
    assert entries and all(e["stage"] == "protection" for e in entries)
    representations = {e["representation"] for e in entries}
    event(f"{kind}: {'+'.join(sorted(representations))}")
    if all_verbatim <= window:
        assert representations == {"verbatim"}  # a required item that fits is sent whole
        return
    assert kind in EXCERPTABLE  # a verbatim-only item that does not fit must have raised
    alone_too_large = required[unit] > asm.manifest["budget"]["dynamic"]
    if kind in {"assistant", "checkpoint", "old_checkpoint"} or alone_too_large:
        # only excerpts are offered: a message or checkpoint has no other rung, and a unit too large for all of
        # B_dynamic gets exact excerpts only, each saying so
        _assert_exact_excerpt(ledger, asm, unit)
        if kind in {"checkpoint", "old_checkpoint"}:  # the opening of every state value comes first
            (content,) = [m["content"] for m in asm.payload["messages"] if 'kind="checkpoint"' in str(m["content"])]
            opening = json.dumps({"submission": huge[:20]}, ensure_ascii=False)[1:-2]
            assert '"exit_status": "Submitted"' in content and opening in content
        if alone_too_large:
            assert all("does not fit B_dynamic" in e["note"] for e in entries if e["locators"])
    else:  # a tool output that fits alone but not beside the others may also take its extraction or reference
        assert "verbatim" not in representations


SQLFLUFF_1763 = Path("mini-swe-agent-deepseek") / "sqlfluff__sqlfluff-1763.traj.json"


@pytest.fixture(scope="module")
def sqlfluff_1763(data_dir: Path) -> tuple[Ledger, str]:
    """The real trajectory imported as the CLI imports it (``import … --conversation-id run-ds``)."""
    path = data_dir / SQLFLUFF_1763
    assert path.is_file(), f"{path} not found in the shared data"
    ledger = Ledger.open("memory://")
    ledger.import_file(path, conversation_id="run-ds")
    return ledger, "run-ds"


def test_mini_swe_agent_exit_checkpoint_enters_as_an_exact_excerpt_at_8k(sqlfluff_1763: tuple[Ledger, str]) -> None:
    """``assemble run-ds --window 8000 --output 1000`` (B_input 6,488) now succeeds: the patch is excerpted."""
    ledger, conv = sqlfluff_1763
    full = ledger.assemble(conv, window_tokens=HUGE, output_tokens=1000)
    required = _required_costs(full.manifest)
    checkpoint = next(e["unit"] for e in full.manifest["included"] if e["kind"] == "checkpoint")
    assert full.manifest["budget"]["fixed"] + sum(required.values()) > 6488  # the shape that failed
    assert required[checkpoint] <= 6488 - full.manifest["budget"]["fixed"]  # … though it would fit alone
    asm = ledger.assemble(conv, window_tokens=8000, output_tokens=1000)
    assert asm.manifest["budget"]["input"] == 6488 and asm.input_tokens <= 6488
    (entry,) = [e for e in asm.manifest["included"] if e["unit"] == checkpoint]
    assert (entry["kind"], entry["reason"], entry["representation"]) == ("checkpoint", "latest_step", "excerpt")
    _assert_exact_excerpt(ledger, asm, checkpoint)
    last = asm.payload["messages"][-1]
    assert last["role"] == "user" and f'source="{checkpoint}" kind="checkpoint"' in last["content"]
    assert f"ctxledger rehydrate {checkpoint}" in last["content"]
    assert '{"exit_status": "Submitted", "submission": "diff --git a/src/' in last["content"]  # the patch's opening
    reps = {e["unit"]: e["representation"] for e in asm.manifest["included"] if e["stage"] == "protection"}
    assert all(rep == "verbatim" for unit, rep in reps.items() if unit != checkpoint)  # task, open call whole
    assert ledger.explain(asm.id, checkpoint)["status"] == "included"


def test_the_exit_checkpoint_stays_an_excerpt_after_the_user_writes_again(data_dir: Path) -> None:
    """A turn after the checkpoint makes it an older checkpoint, not the latest step: still excerpted, no failure."""
    ledger = Ledger.open("memory://")
    ledger.import_file(data_dir / SQLFLUFF_1763, conversation_id="run-ds")
    checkpoint = "run-ds/401"
    assert ledger.store.get("default", checkpoint).kind.value == "checkpoint"
    ledger.recorder("run-ds").user("Thanks. Now run the tests again.")
    asm = ledger.assemble("run-ds", window_tokens=8000, output_tokens=1000)
    assert asm.input_tokens <= asm.manifest["budget"]["input"] == 6488
    (entry,) = [e for e in asm.manifest["included"] if e["unit"] == checkpoint]
    assert (entry["reason"], entry["representation"]) == ("checkpoint", "excerpt")
    _assert_exact_excerpt(ledger, asm, checkpoint)
    assert ledger.explain(asm.id, checkpoint)["status"] == "included"


def test_mini_swe_agent_budget_below_the_task_still_fails_itemised(sqlfluff_1763: tuple[Ledger, str]) -> None:
    """Below the task turn's verbatim size nothing helps: the error lists every block, the checkpoint at its excerpt."""
    ledger, conv = sqlfluff_1763
    with pytest.raises(RequiredBlocksDoNotFit) as err:
        ledger.assemble(conv, window_tokens=3500, output_tokens=1000)
    blocks = {b.ref.split(" ")[0]: b for b in err.value.blocks}
    assert blocks[f"{conv}/1"].what == "latest_user_turn" and blocks[f"{conv}/1"].tokens > 2488
    assert blocks[f"{conv}/0"].what == "instruction" and "request" in blocks
    ckpt = next(b for b in err.value.blocks if b.what == "latest_step")
    assert ckpt.tokens < 400  # its smallest excerpt, never its 5,792-token verbatim form
    assert err.value.required_tokens == sum(b.tokens for b in err.value.blocks) > err.value.budget_tokens
