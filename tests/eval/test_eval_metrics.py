"""Every metric of ctxledger.eval.metrics on tiny inputs whose answer is computed by hand."""

from __future__ import annotations

import dataclasses

import pytest

from ctxledger.eval import metrics
from ctxledger.hashing import text_hash


def test_evidence_recall_is_share_of_required_included() -> None:
    """Recall = |R ∩ I| / |R|: two of three required ids included gives 2/3."""
    assert metrics.evidence_recall({"a", "b", "x"}, {"a", "b", "c"}) == pytest.approx(2 / 3)


def test_evidence_recall_undefined_without_required_evidence() -> None:
    """A call with no required evidence has no recall (None), not 0 or 1."""
    assert metrics.evidence_recall({"a"}, set()) is None


def test_critical_omission_flags_any_missing_required_item() -> None:
    """Omission is true when one required id is missing and false when all are present."""
    assert metrics.critical_omission({"a"}, {"a", "b"}) is True
    assert metrics.critical_omission({"a", "b", "z"}, {"a", "b"}) is False
    assert metrics.critical_omission({"a"}, []) is None


def test_precision_and_irrelevant_inclusion_are_complements() -> None:
    """One required id among four included: precision 1/4, irrelevant inclusion 3/4."""
    included, required = {"a", "x", "y", "z"}, {"a", "b"}
    assert metrics.context_precision(included, required) == pytest.approx(0.25)
    assert metrics.irrelevant_inclusion(included, required) == pytest.approx(0.75)
    assert metrics.context_precision(set(), required) is None


def test_stale_incidence_true_only_when_a_stale_item_is_included() -> None:
    """Stale incidence is |I ∩ S| > 0, undefined when nothing is stale."""
    assert metrics.stale_incidence({"a", "old"}, {"old"}) is True
    assert metrics.stale_incidence({"a", "new"}, {"old"}) is False
    assert metrics.stale_incidence({"a"}, set()) is None


def test_provenance_coverage_requires_every_field_non_empty() -> None:
    """Of three derived items only the one with sources, version and transform counts: 1/3."""
    derived = [
        {"sources": ["m1"], "source_version": "v1", "transform": "summary"},
        {"sources": [], "source_version": "v1", "transform": "summary"},
        {"sources": ["m2"], "transform": "excerpt"},
    ]
    assert metrics.provenance_coverage(derived) == pytest.approx(1 / 3)
    assert metrics.provenance_coverage([]) is None


def test_rehydration_success_compares_sha256_of_returned_bytes() -> None:
    """Exact bytes succeed; different bytes and failed reads do not: 1/3."""
    expected = text_hash("raw csv")
    attempts = [(expected, b"raw csv"), (expected, b"raw csv "), (expected, None)]
    assert metrics.rehydration_success(attempts) == pytest.approx(1 / 3)
    assert metrics.rehydration_success([]) is None


def test_compaction_fidelity_counts_invariants_by_text_or_evidence_id() -> None:
    """Goal found in text (case and spacing ignored), error found by id, one decision missing: 2/3."""
    fidelity = metrics.compaction_fidelity(
        {"goal": ["Book  the FLIGHT"], "tool_errors": ["m7"], "decisions": ["use certificates first"]},
        "We must book the flight to Seattle.",
        evidence_ids={"m7"},
    )
    assert (fidelity.preserved, fidelity.total) == (2, 3)
    assert fidelity.missing == (("decisions", "use certificates first"),)
    assert fidelity.score == pytest.approx(2 / 3)
    assert metrics.compaction_fidelity({}, "anything").score is None


def test_tool_units_group_parallel_results_with_their_call(tool_history) -> None:
    """The assistant with calls a and b forms one unit with both results; plain turns form none."""
    assert metrics.tool_units(tool_history) == [("a1", "ta", "tb")]


def test_tool_pair_integrity_counts_split_units(tool_history) -> None:
    """Including the call and one of its two results touches one unit and breaks it."""
    split = metrics.tool_pair_integrity(tool_history, {"a1", "ta", "u2"})
    assert (split.touched, split.broken, split.score) == (1, 1, 0.0)
    whole = metrics.tool_pair_integrity(tool_history, {"a1", "ta", "tb"})
    assert (whole.touched, whole.broken, whole.score) == (1, 0, 1.0)
    assert metrics.tool_pair_integrity(tool_history, {"u1"}).score is None


def test_provider_violations_clean_payload_has_none(tool_history) -> None:
    """The whole history, or the history without the tool unit, breaks no rule."""
    assert metrics.provider_violations(tool_history, [i.id for i in tool_history]) == []
    assert metrics.provider_violations(tool_history, {"s", "u1", "a2", "u2"}) == []


def test_provider_violations_orphan_missing_and_unknown(tool_history) -> None:
    """A result without its call is orphan; a call without an existing result is missing; stray ids are unknown."""
    assert metrics.provider_violations(tool_history, {"u1", "tb"}) == ["orphan_tool_result:tb"]
    assert metrics.provider_violations(tool_history, {"u1", "a1", "ta", "u2"}) == ["missing_tool_result:b"]
    assert metrics.provider_violations(tool_history, {"u1", "ghost"}) == ["unknown_id:ghost"]


def test_provider_violations_result_must_follow_its_call(make_item) -> None:
    """A user turn between a call and its result breaks adjacency (and leaves the call unanswered there)."""
    items = [
        make_item("a1", "assistant", 0, call_ids=("c",)),
        make_item("u", "user", 1),
        make_item("t", "tool", 2, answers="c"),
    ]
    assert metrics.provider_violations(items, {"a1", "u", "t"}) == [
        "missing_tool_result:c",
        "result_not_adjacent:t",
    ]


def test_unanswered_call_is_recovery_state_not_a_violation(make_item) -> None:
    """A call with no result anywhere among the candidates is not a provider violation here."""
    items = [make_item("u", "user", 0), make_item("a1", "assistant", 1, call_ids=("c",))]
    assert metrics.provider_violations(items, {"u", "a1"}) == []


def test_budget_overflow_is_strictly_greater() -> None:
    """A payload equal to the budget fits; one token more overflows."""
    assert metrics.budget_overflow(100, 100) is False
    assert metrics.budget_overflow(101, 100) is True


def test_context_class_by_role_and_explicit_meta(tool_history, make_item) -> None:
    """System→policy, error result→recovery, call and result→operational, text→conversation; meta wins."""
    by_id = {i.id: metrics.context_class(i) for i in tool_history}
    assert by_id == {
        "s": "policy",
        "u1": "conversation",
        "a1": "operational",
        "ta": "operational",
        "tb": "recovery",
        "a2": "conversation",
        "u2": "conversation",
    }
    planned = dataclasses.replace(make_item("p", "assistant", 0), meta={"context_class": "planning"})
    assert metrics.context_class(planned) == "planning"


def test_occupancy_is_tokens_per_class_over_budget(tool_history) -> None:
    """s (10) + a1, ta (20) + tb (10) + query 5 in a 100-token budget."""
    shares = metrics.occupancy(tool_history, {"s", "a1", "ta", "tb"}, 100, query_tokens=5)
    assert shares == {"policy": 0.1, "operational": 0.2, "recovery": 0.1, "conversation": 0.05}
    with pytest.raises(ValueError, match="budget_tokens"):
        metrics.occupancy(tool_history, set(), 0)


def test_replay_ratio_divides_payload_by_replay() -> None:
    """250 of 1000 replay tokens is a ratio of 0.25; an empty replay is refused."""
    assert metrics.replay_ratio(250, 1000) == 0.25
    with pytest.raises(ValueError, match="replay_tokens"):
        metrics.replay_ratio(1, 0)


def test_recovery_preservation_per_kind() -> None:
    """Goal kept, one of two constraints lost, empty kinds absent."""
    preserved = metrics.recovery_preservation(
        {"g", "c1"}, {"goal": {"g"}, "constraints": {"c1", "c2"}, "latest_error": set()}
    )
    assert preserved == {"goal": True, "constraints": False}


def test_determinism_is_share_of_equal_hash_pairs() -> None:
    """Two of three re-assemblies matched."""
    assert metrics.determinism([("h1", "h1"), ("h2", "h2"), ("h3", "hX")]) == pytest.approx(2 / 3)
    assert metrics.determinism([]) is None


def test_counter_error_is_signed_relative() -> None:
    """Counting 90 where the provider reported 100 is −10%; 110 is +10%."""
    assert metrics.counter_error(90, 100) == pytest.approx(-0.1)
    assert metrics.counter_error(110, 100) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="reported_tokens"):
        metrics.counter_error(1, 0)


def test_mean_skips_undefined_and_counts_booleans() -> None:
    """None values are left out; True/False count as 1/0; no defined value gives None."""
    assert metrics.mean([1.0, None, 0.0, True]) == pytest.approx(2 / 3)
    assert metrics.mean([None, None]) is None


def test_percentile_interpolates_between_ranks() -> None:
    """p50 of 1..4 is 2.5, p95 of 0..100 is 95, p100 is the max."""
    assert metrics.percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert metrics.percentile([float(v) for v in range(101)], 95) == pytest.approx(95.0)
    assert metrics.percentile([1.0, 9.0], 100) == 9.0
    assert metrics.percentile([], 50) is None
