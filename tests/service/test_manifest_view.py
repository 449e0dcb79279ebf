"""The inspector's manifest adapter: omissions by reason, diff between calls, rehydration under the policy."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxledger.policy.rehydration import READABLE_OMISSIONS
from ctxledger.service import manifest_view as mv

REASONS = sorted(READABLE_OMISSIONS | {"secret", "privacy_restricted", "not_in_lineage", "audit_only", "superseded"})
refs = st.lists(st.sampled_from([f"c/{i}" for i in range(30)]), unique=True, max_size=30)


@st.composite
def manifests(draw) -> dict:
    chosen = draw(refs)
    split = draw(st.integers(0, len(chosen)))
    included = [{"ref": r, "stage": "selection", "reason": "selected", "tokens": draw(st.integers(0, 500))}
                for r in chosen[:split]]  # fmt: skip
    omitted = [{"ref": r, "stage": "s", "reason": draw(st.sampled_from(REASONS)),
                "utility": draw(st.none() | st.floats(0, 1))} for r in chosen[split:]]  # fmt: skip
    return {"id": draw(st.uuids()).hex, "conversation_id": "c", "included": included, "omitted": omitted}


@given(manifests())
def test_omission_groups_count_every_omitted_record_once(m: dict) -> None:
    groups = mv.omissions(m, notable=3)
    assert sum(g.count for g in groups) == len(m["omitted"])
    assert all(len(g.notable) == min(3, g.count) for g in groups)
    assert [g.count for g in groups] == sorted((g.count for g in groups), reverse=True)


@given(manifests(), manifests())
def test_the_diff_is_exactly_what_entered_and_what_left(before: dict, after: dict) -> None:
    d = mv.diff(before, after)
    was, now = {e["ref"] for e in before["included"]}, {e["ref"] for e in after["included"]}
    assert {e["ref"] for e in d.entered} == now - was
    assert {e["ref"] for e in d.left} == was - now
    assert d.kept == len(was & now)
    omitted_after = {e["ref"]: e["reason"] for e in after["omitted"]}
    assert all(e["reason"] == omitted_after.get(e["ref"], "not a candidate") for e in d.left)


@given(manifests(), st.sampled_from([f"c/{i}" for i in range(32)]))
def test_rehydration_is_refused_exactly_for_hard_filters_and_non_candidates(m: dict, ref: str) -> None:
    refusal = mv.rehydration_refusal(m, ref)
    found = mv.entry(m, ref)
    if found is None:
        assert refusal == "not a candidate of this assembly"
    elif found[0] == "omitted" and found[1]["reason"] not in READABLE_OMISSIONS:
        assert refusal is not None and found[1]["reason"] in refusal
    else:
        assert refusal is None


def test_a_redacted_secret_is_never_rehydrated() -> None:
    m = {"candidates": ["c/1"], "included": [{"ref": "c/1", "reason": "selected"}], "omitted": [],
         "marks": [{"ref": "c/1", "stage": "secrets", "reason": "secret_redacted"}]}  # fmt: skip
    assert mv.rehydration_refusal(m, "c/1") == "holds a redacted secret"


def test_a_later_stages_hard_omission_refuses_even_after_a_readable_reason() -> None:
    m = {"candidates": ["c/1"], "included": [], "omitted": [{"ref": "c/1", "stage": "selection", "reason": "budget"}],
         "decisions": [{"ref": "c/1", "stage": "privacy", "outcome": "omit", "reason": "privacy_restricted",
                        "detail": ""}]}  # fmt: skip
    assert mv.rehydration_refusal(m, "c/1") == "omitted by a hard filter: privacy_restricted"


@given(st.integers(0, 10**8), st.integers(0, 10**8), st.integers(0, 10**8))
def test_tokens_read_the_usage_stored_beside_a_listed_manifest(estimated: int, observed: int, output: int) -> None:
    listed = {"tokens": {"estimated_input": estimated, "replay": estimated, "observed_input": None},
              "observed_usage": {"input_tokens": observed, "output_tokens": output}}  # fmt: skip
    t = mv.tokens(listed)
    assert (t["estimated_input"], t["observed_input"], t["observed_output"]) == (estimated, observed, output)
    assert mv.tokens({"tokens": {"estimated_input": estimated}})["observed_input"] is None
