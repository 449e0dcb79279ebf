"""Fill the budget: whenever something is left out for budget, 95 % of B_dynamic is used or the manifest says why.

Histories are generated (hypothesis): user turns, assistant turns and tool exchanges whose outputs range from
a line to thousands of lines, under budgets from tight to roomy. The ladder's reach covers only the newest
units, so older large outputs are offered verbatim only; the fill phase must offer their cheaper rungs.
"""

from __future__ import annotations

from generated_histories import assemble_history, history, history_steps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.assembler import FILL_TARGET
from ctxledger.assemble.fill import fill_budget
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger
from ctxledger.policy.base import ReasonCode
from ctxledger.serialize.anthropic_messages import REPLY_PRIMING

STEP = history_steps(400, 3_000, fewest=5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=8, max_size=40), window=st.integers(3_000, 40_000))
def test_something_left_out_for_budget_means_the_budget_is_used_or_the_manifest_says_why(steps, window):
    asm = assemble_history(*history(steps, "fill"), window)
    m = asm.manifest
    dynamic = m["ledger"]["dynamic_tokens"]
    used = sum(e["tokens"] for e in m["included"] if e["stage"] != "fixed")
    if m["omitted_by_reason"].get("budget", 0):
        assert used >= FILL_TARGET * dynamic or m["budget"]["fill"], (used, dynamic)
    if m["budget"]["fill"]:
        cut = [e for e in m["included"] if e["representation"] != "verbatim"]
        assert m["omitted_by_reason"].get("budget", 0) > 0 or cut
    assert used <= dynamic


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(history_steps(30, 5), max_size=3),
    errors=st.integers(3_000, 6_000),
    window=st.integers(4_000, 16_000),
)
def test_a_unit_sent_cut_while_room_is_left_is_named_in_the_fill_note(before, errors, window):
    # a failed call whose output alone is larger than the window enters as a bounded excerpt: part of its bytes
    # is left out although B_dynamic has room, and the manifest says which unit and why
    asm = assemble_history(*history([*before, ("failed", errors)], "cut"), window)
    m = asm.manifest
    dynamic = m["ledger"]["dynamic_tokens"]
    used = sum(e["tokens"] for e in m["included"] if e["stage"] != "fixed")
    cut = {e["unit"] for e in m["included"] if e["representation"] != "verbatim"}
    assert cut, "the output larger than the window is sent cut"
    if used < FILL_TARGET * dynamic:
        assert m["budget"]["fill"], (used, dynamic)
        if not m["omitted_by_reason"].get("budget"):
            assert any(f"{unit} as " in m["budget"]["fill"] for unit in cut), m["budget"]["fill"]
    else:
        assert not m["budget"]["fill"]


def test_old_large_outputs_enter_at_a_cheaper_rung_when_the_budget_would_stay_empty():
    # forty large outputs, the newest of them far beyond what the budget holds: before the fill phase the
    # ladder's reach offered the older ones verbatim only, and most of B_dynamic stayed empty
    steps = [("tool", 2_500) for _ in range(40)]
    ledger, g = history(steps, "old-bulk")
    asm = ledger.assemble(
        g.conversation_id, window_tokens=24_000, output_tokens=500, margin_tokens=100, branch_id=g.branch_id
    )
    m = asm.manifest
    used = m["ledger"]["used_tokens"] - m["ledger"]["classes"].get("framing", {}).get("used", 0)
    representations = {e["representation"] for e in m["included"]}
    assert m["omitted_by_reason"].get("budget", 0) > 0
    assert used >= FILL_TARGET * m["ledger"]["dynamic_tokens"] or m["budget"]["fill"]
    assert representations - {"verbatim"}, "some output entered at a cheaper rung"


def _item(uid: str, seq: int, tokens: int, utility: float, cheaper: int | None) -> SelectionItem:
    options = [Option("verbatim", tokens, utility, ())]
    if cheaper is not None and cheaper < tokens:
        options.append(Option("excerpt", cheaper, utility / 2, ()))
    return SelectionItem(uid, seq, "conversation", options)


SIZE = st.tuples(st.integers(1, 300), st.floats(0.05, 1.0), st.none() | st.integers(1, 300))


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(SIZE, SIZE), min_size=1, max_size=6),
    loose=st.lists(SIZE, max_size=4),
    used=st.integers(0, 400),
    dynamic=st.integers(50, 1_200),
)
def test_fill_admits_half_of_a_question_answer_pair_only_with_the_other_half(pairs, loose, used, dynamic):
    items, partners = [], {}
    for k, (q, a) in enumerate(pairs):
        items += [_item(f"q{k}", 2 * k, *q), _item(f"a{k}", 2 * k + 1, *a)]
        partners[f"q{k}"], partners[f"a{k}"] = f"a{k}", f"q{k}"
    items += [_item(f"x{k}", 100 + k, *size) for k, size in enumerate(loose)]
    result = SelectionResult({"lead": Option("verbatim", used, 1.0, ())}, {i.unit_id: ReasonCode.BUDGET for i in items})
    ledger = BudgetLedger(dynamic)
    admitted = fill_budget(items, result, dynamic, ledger, lambda i: (), FILL_TARGET, partners=partners)
    for k in range(len(pairs)):
        assert (f"q{k}" in result.chosen) == (f"a{k}" in result.chosen), (k, admitted)
    assert sum(o.tokens for o in result.chosen.values()) <= max(dynamic, used)
    if len(pairs) == 1 and not loose and used < FILL_TARGET * dynamic:
        (q, a) = pairs[0]
        cheapest = min(q[0], q[2] or q[0]) + min(a[0], a[2] or a[0])
        assert ("q0" in result.chosen) == (cheapest <= dynamic - used)


@given(
    dynamic=st.integers(1, 50_000),
    share=st.floats(0.0, 1.0),
    merged_share=st.floats(0.0, 0.3),
    left=st.booleans(),
)
def test_the_fill_note_names_framing_a_merged_payload_did_not_send(dynamic, share, merged_share, left):
    from ctxledger.assemble.phases.repair import fill_note
    from ctxledger.units import Unit

    used = int(dynamic * share)
    merged = min(used, int(dynamic * merged_share))
    chosen = [(Unit.__new__(Unit), Option("verbatim", used, 0.5, ()))]
    left_out = [SelectionItem("u9", 9, "conversation", [Option("verbatim", 10**6, 0.1, ())])] if left else []
    note = fill_note(dynamic, chosen, left_out, merged)
    if not left or used - merged >= FILL_TARGET * dynamic:
        assert note is None
    elif used >= FILL_TARGET * dynamic:
        assert note is not None and f"{merged} tokens of message framing" in note and f"{used - merged} sent" in note
    else:
        assert note is not None and "framing" not in note


@settings(max_examples=12, deadline=None)
@given(
    turns=st.integers(20, 160),
    window=st.integers(400, 3_000),
    speakers=st.integers(1, 3),
    words=st.integers(1, 12),
)
def test_merged_framing_is_filled_and_the_payload_still_fits_on_anthropic(turns, window, speakers, words):
    """Speakers relayed as user turns merge into one message: the framing charged per turn fills with more turns,
    and the counted payload stays within ``B_input``."""
    from ctxledger.ledger import Ledger
    from ctxledger.records import Branch, Conversation, Message, Role
    from ctxledger.store.memory import MemoryStore

    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    ledger = Ledger(MemoryStore())
    ledger.append([Conversation(id="c", **env), Branch(id="c/main", name="main", **env)])
    names = ("Caroline", "Melanie", "Nate")[:speakers]
    for k in range(turns):
        text = f"Day {k}: " + " ".join(["went hiking"] * (1 + (k * 7) % words))
        ledger.append([Message(id=f"m{k}", role=Role.USER, name=names[k % speakers], content=text, **env)])
    ask = {"window_tokens": window, "output_tokens": 0, "margin_tokens": 0, "persist": False}
    asm = ledger.assemble("c", api="anthropic-messages", counter="estimate/quicktok/o200k_base", **ask)
    m = asm.manifest
    assert asm.input_tokens <= m["budget"]["input"]
    used = sum(e["tokens"] for e in m["included"] if e["stage"] != "fixed")
    assert used - m["budget"]["framing_credit"] <= m["budget"]["dynamic"]
    if m["omitted_by_reason"].get("budget", 0):
        sent = asm.input_tokens - (m["budget"]["input"] - m["budget"]["dynamic"])
        assert sent >= FILL_TARGET * m["budget"]["dynamic"] or m["budget"]["fill"], (sent, m["budget"])


def test_speakers_relayed_as_user_turns_fill_the_framing_merging_saves_on_anthropic():
    from ctxledger.ledger import Ledger
    from ctxledger.records import Branch, Conversation, Message, Role
    from ctxledger.store.memory import MemoryStore

    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    ledger = Ledger(MemoryStore())
    ledger.append([Conversation(id="c", **env), Branch(id="c/main", name="main", **env)])
    for k in range(200):
        speaker = ("Caroline", "Melanie")[k % 2]
        ledger.append([Message(id=f"m{k}", role=Role.USER, name=speaker, content=f"Day {k}: went hiking.", **env)])
    ask = {"window_tokens": 1_500, "output_tokens": 0, "margin_tokens": 0, "persist": False}
    anthropic = ledger.assemble("c", api="anthropic-messages", counter="estimate/quicktok/o200k_base", **ask)
    openai = ledger.assemble("c", api="openai-chat", **ask)
    assert len(anthropic.payload["messages"]) == 1  # every turn is a block of one user message
    charged = sum(e["tokens"] for e in anthropic.manifest["included"]) + REPLY_PRIMING
    credit = anthropic.manifest["budget"]["framing_credit"]
    assert credit > 0 and charged - anthropic.input_tokens >= credit  # the framing given back is never sent
    assert anthropic.input_tokens <= 1_500 and anthropic.input_tokens >= FILL_TARGET * 1_500
    assert len(anthropic.manifest["included"]) > len(openai.manifest["included"])  # ~5 tokens a turn, refilled
    assert openai.manifest["budget"]["framing_credit"] == 0 and openai.manifest["budget"]["fill"] is None
