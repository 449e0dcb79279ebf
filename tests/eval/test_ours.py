"""ctxledger's default policy as a harness selector: records, budgets the judge agrees with, excerpts, recall."""

from __future__ import annotations

import pytest

from ctxledger.eval import harness, metrics
from ctxledger.eval.base import EvalCase, EvalItem, Selection, SelectionTask
from ctxledger.eval.baselines import BM25Only
from ctxledger.eval.datasets import ADVERSARIAL, chat_tokens, load_dataset
from ctxledger.eval.ours import EVAL_NOW, ItemCoster, PolicySelector, register
from ctxledger.records import Message, ToolArtifact, ToolCall, ToolStatus
from ctxledger.serialize.base import CallView, Turn


def _task(case: EvalCase, budget: int, counter) -> SelectionTask:
    return SelectionTask(case.items, case.query, budget, counter, query_tokens=case.query_tokens)


def _case(items, query: str, counter, required=()) -> EvalCase:
    """An evidence-style case whose question is the current user turn (not an item)."""
    return EvalCase(
        "hand/q0", "hand", tuple(items), query, chat_tokens(counter, "user", query), required_ids=frozenset(required)
    )


@pytest.fixture(scope="module")
def locomo(data_dir, counter):
    """The first LoCoMo conversation (conv-26) and its questions."""
    return load_dataset("locomo", data_dir, counter, limit=1)


def _records(selector: PolicySelector):
    (history,) = selector._histories
    return history, history.ledger.store.records("default", history.conversation_id)


def test_items_become_messages_calls_and_artifacts(tool_history, make_item, words) -> None:
    """Every turn becomes a graph record; results join their call, errors fail, an orphan result is left out."""
    items = [*tool_history, make_item("orphan", "tool", 7, answers="gone")]
    selector = PolicySelector(words)
    selection = selector.select(SelectionTask(items, "q", 10_000, words, query_tokens=1))
    history, records = _records(selector)
    calls = [r for r in records if isinstance(r, ToolCall)]
    results = {r.external_id: r for r in records if isinstance(r, ToolArtifact)}
    assert [r.external_id for r in records if isinstance(r, Message)] == ["s", "u1", "a1", "a2", "u2"]
    assistant = f"{history.conversation_id}/2"
    assert [(c.call_id, c.message_id) for c in calls] == [("a", assistant), ("b", assistant)]
    assert results["ta"].status is ToolStatus.SUCCEEDED and results["tb"].status is ToolStatus.FAILED
    assert selection.details["orphan_results"] == 1
    assert selection.included_ids == [i.id for i in tool_history]
    assert metrics.provider_violations(items, selection.included_ids) == []


def test_item_coster_charges_the_harness_cost_for_verbatim_turns_only(counter) -> None:
    """A recorded turn costs its item's tokens; the same ref with other content is counted on its own text."""
    coster = ItemCoster(counter)
    coster.register("c/1", "the verbatim text", 42)
    assert coster.turn_tokens(Turn(ref="c/1", role="tool", content="the verbatim text", tool_call_id="x")) == 42
    excerpt = Turn(ref="c/1", role="tool", content="an excerpt", tool_call_id="x")
    assert coster.turn_tokens(excerpt) == chat_tokens(counter, "tool", "an excerpt")
    assert coster.base_tokens() == 3 and coster.tools_tokens([]) == 0


def test_payload_is_what_the_harness_counts_and_never_overflows(locomo, counter) -> None:
    """On real LoCoMo questions our own count equals the judge's recount, within every budget, with no rule broken."""
    selector = PolicySelector(counter)
    for case in locomo.cases[:8]:
        for budget in (1000, 2000, 8000):
            row = harness.evaluate_case(case, selector, budget, counter, check_determinism=True)
            assert row.fits and not row.overflow and row.violations == ()
            assert row.claimed_tokens == row.payload_tokens <= budget
            assert row.deterministic is True


def test_growing_trajectory_is_appended_and_matches_a_fresh_assembly(data_dir, counter) -> None:
    """Later calls of one run extend the recorded history; each payload equals one assembled from scratch."""
    dataset = load_dataset("tau-bench", data_dir, counter, limit=1)
    selector = PolicySelector(counter)
    hashes = [selector.select(_task(case, 4000, counter)).payload_hash for case in dataset.cases]
    history, records = _records(selector)
    assert len(history.ids) == len(dataset.cases[-1].items)
    assert len([r for r in records if r.external_id]) == len(dataset.cases[-1].items)
    fresh = [PolicySelector(counter).select(_task(case, 4000, counter)).payload_hash for case in dataset.cases[::7]]
    assert fresh == hashes[::7]


def test_another_conversation_gets_its_own_history(tool_history, words) -> None:
    """Items that do not extend a recorded history are recorded apart (ids are not reused across them)."""
    selector = PolicySelector(words, cache_size=2)
    selector.select(SelectionTask(tool_history, "q", 1000, words))
    selector.select(SelectionTask(tool_history[:3][::-1], "q", 1000, words))
    selector.select(SelectionTask(tool_history, "q", 1000, words))
    assert len(selector._histories) == 2 and selector._made == 2


def test_required_blocks_that_do_not_fit_send_nothing(make_item, counter) -> None:
    """A system prompt larger than the budget: the policy declines (fits=False) and says why; nothing overflows."""
    prompt = "Follow the release checklist exactly. " * 60
    items = [
        EvalItem("sys", "system", prompt, 0, chat_tokens(counter, "system", prompt)),
        EvalItem("u", "user", "Ship it.", 1, chat_tokens(counter, "user", "Ship it.")),
    ]
    case = _case(items, "Is it shipped?", counter)
    row = harness.evaluate_case(case, PolicySelector(counter), 200, counter)
    assert row.fits is False and row.payload_tokens == 0 and row.overflow is False
    selection = PolicySelector(counter).select(_task(case, 200, counter))
    assert "required blocks" in selection.details["error"] and "sys" not in selection.included_ids


def _build_log() -> str:
    lines = [f"[{i:04d}] compiling module_{i}.c ok" for i in range(700)]
    lines[350] = "[0350] ERROR: undefined reference to `ssl_ctx_new' in net/tls.c:88"
    return "\n".join(lines)


def test_long_tool_output_enters_as_an_excerpt_the_harness_recounts(counter) -> None:
    """A 10k-token build log at 3,000 tokens: excerpted with the error line, recounted on what was sent."""
    log = _build_log()
    call = CallView("call_1", "run", '{"cmd": "make"}')
    items = [
        EvalItem("u1", "user", "Build the project.", 0, chat_tokens(counter, "user", "Build the project.")),
        EvalItem(
            "a1", "assistant", "", 1, chat_tokens(counter, "assistant", "", tool_calls=(call,)), tool_calls=(call,)
        ),
        EvalItem("t1", "tool", log, 2, chat_tokens(counter, "tool", log), tool_call_id="call_1", is_error=True),
    ]
    case = _case(items, "Why did the build fail?", counter, required=["t1"])
    selection = PolicySelector(counter).select(_task(case, 3000, counter))
    sent = selection.details["sent_texts"]["t1"]
    assert "ERROR: undefined reference" in sent and len(sent) < len(log) / 3
    assert metrics.provenance_coverage(selection.details["derived"]) == 1.0
    row = harness.evaluate_case(case, PolicySelector(counter), 3000, counter)
    assert row.recall == 1.0 and row.violations == () and not row.overflow
    assert row.payload_tokens == row.claimed_tokens < items[2].tokens


def test_every_derived_turn_of_real_runs_is_recounted_as_sent(data_dir, counter) -> None:
    """Real tau-bench calls at 4,000 tokens (references, JSON excerpts): the judge's count is ours, never over."""
    dataset = load_dataset("tau-bench", data_dir, counter, limit=4, step_stride=3)
    selector = PolicySelector(counter)
    rows = [harness.evaluate_case(case, selector, 4000, counter) for case in dataset.cases]
    assert sum(r.provenance is not None for r in rows) >= 3
    assert all(r.claimed_tokens == r.payload_tokens <= 4000 and r.violations == () for r in rows)
    assert all(r.provenance == 1.0 for r in rows if r.provenance is not None)


def test_harness_recounts_sent_texts_with_the_exact_counter(tool_history, words) -> None:
    """An item reported with a shorter sent text costs that text's tokens, not its verbatim tokens."""
    case = EvalCase("c", "hand", tuple(tool_history), "q", 0)

    class Sends:
        name = "sends"

        def select(self, task: SelectionTask) -> Selection:
            """Send a1 with ta shortened to two words and tb verbatim."""
            details = {"sent_texts": {"ta": "two words"}}
            return Selection(["a1", "ta", "tb"], 0, 0.0, details=details)

    row = harness.evaluate_case(case, Sends(), 100, words)
    assert row.payload_tokens == 3 + 10 + chat_tokens(words, "tool", "two words") + 10


def test_locomo_recall_beats_bm25_on_the_same_questions(locomo, counter) -> None:
    """At 2,000 tokens the default policy finds more annotated evidence than BM25 alone on conv-26."""
    cases = [c for c in locomo.cases if c.required_ids and c.category != ADVERSARIAL][:60]
    ours = PolicySelector(counter)
    bm25 = BM25Only()
    mine = [harness.evaluate_case(c, ours, 2000, counter).recall for c in cases]
    theirs = [harness.evaluate_case(c, bm25, 2000, counter).recall for c in cases]
    assert metrics.mean(mine) >= metrics.mean(theirs) + 0.05


def test_register_makes_the_default_policy_a_harness_selector(monkeypatch, counter) -> None:
    """After register(), make_selectors builds a PolicySelector under the OURS name (listed first)."""
    monkeypatch.setattr(harness, "_FACTORIES", {})
    register()
    (selector,) = harness.make_selectors([harness.OURS], counter)
    assert isinstance(selector, PolicySelector) and selector.name == harness.OURS
    assert harness.selector_names()[0] == harness.OURS
    register()  # replacing is allowed


def test_evaluation_clock_is_fixed() -> None:
    """Every evaluation assembly sees the same request time (freshness is reproducible)."""
    assert EVAL_NOW.isoformat() == "2026-01-01T00:00:00+00:00"


def test_a_locomo_turn_is_recorded_under_its_speakers_name(locomo, counter) -> None:
    """The speaker of each LoCoMo turn becomes its message's name, which relevance reads as the unit's speaker."""
    case = locomo.cases[0]
    selector = PolicySelector(counter)
    selector.select(_task(case, 2000, counter))
    _, records = _records(selector)
    by_item = {i.id: i for i in case.items}
    messages = [r for r in records if isinstance(r, Message)]
    assert messages and all(r.name == by_item[r.external_id].meta["speaker"] for r in messages)
