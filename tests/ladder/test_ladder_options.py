"""The representation ladder's options on real tool outputs: exact costs, utilities, locators, pairing."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.costing import FixedCoster
from ctxledger.assemble.represent import EXCERPT_TOKENS, Ladder, error_lines
from ctxledger.assemble.select import Option
from ctxledger.units import Unit, UnitKind


def _snapshot(swe):
    ledger, cid = swe
    return ledger.snapshots.load("default", cid, ledger.store.get("default", cid).branch_id)


def _verbatim(unit: Unit, coster, utility: float = 0.5) -> Option:
    costs = tuple(coster.turn_tokens(t) for t in unit.turns)
    return Option("verbatim", sum(costs), utility, unit.turns, turn_tokens=costs)


def _failing_run(swe) -> Unit:
    return next(u for u in _snapshot(swe).units if "test_sapm_series FAILED" in u.text)


def test_every_rung_is_priced_exactly_by_the_same_coster(swe):
    """Each option's tokens are the coster's count of its own turns, and cheaper than verbatim."""
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    unit = _failing_run(swe)
    verbatim = _verbatim(unit, coster)
    options = ledger.ladder(unit, verbatim, coster)
    assert [o.representation for o in options] == ["excerpt", "excerpt", "extraction", "memory", "reference"]
    for option in options:
        assert option.turn_tokens == tuple(coster.turn_tokens(t) for t in option.turns)
        assert option.tokens == sum(option.turn_tokens) < verbatim.tokens


def test_utilities_stay_below_verbatim_and_follow_what_is_kept(swe):
    """Utility falls with what a rung keeps: the larger excerpt, which keeps every error line, is worth most."""
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    unit = _failing_run(swe)
    options = ledger.ladder(unit, _verbatim(unit, coster), coster)
    utilities = [o.utility for o in options]
    assert all(u < 0.5 for u in utilities)
    assert utilities == sorted(utilities, reverse=True)
    first = options[0]
    assert first.detail["error_lines"] == first.detail["error_lines_kept"] > 0


def test_the_excerpt_keeps_the_failing_test_and_its_error(swe):
    """The 512-token excerpt of the pytest run shows the FAILED summary line and the pandas ValueError."""
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    unit = _failing_run(swe)
    excerpt = ledger.ladder(unit, _verbatim(unit, coster), coster)[0]
    text = excerpt.turns[1].content
    assert "FAILED pvlib/tests/test_temperature.py::test_sapm_series" in text
    assert "E   ValueError: Invalid frequency: 12H." in text
    assert "ctxledger rehydrate" in text


def test_the_assistant_call_is_untouched_so_pairing_holds(swe):
    """Every rung keeps the assistant turn and its tool call ids; only the tool result's content changes."""
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    unit = _failing_run(swe)
    for option in ledger.ladder(unit, _verbatim(unit, coster), coster):
        assert option.turns[0] == unit.turns[0]
        assert [(t.ref, t.tool_call_id, t.role) for t in option.turns] == [
            (t.ref, t.tool_call_id, t.role) for t in unit.turns
        ]


def test_small_and_marked_units_get_no_rungs(swe):
    """Turns under the size floor, and turns a policy mark changed (e.g. a stale flag), are never re-derived.

    A ``secret_redacted`` tool result is the exception: its excerpts withhold the secret lines themselves
    (tests/assemble/test_oversized_secret.py), so it still gets rungs.
    """
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    units = _snapshot(swe).units
    small = next(u for u in units if u.kind is UnitKind.TOOL_EXCHANGE and len(u.turns[1].content) < 200)
    assert ledger.ladder(small, _verbatim(small, coster), coster) == []
    unit = _failing_run(swe)
    marked = dataclasses.replace(unit, transforms={unit.turns[1].ref: "stale_marked"})
    assert ledger.ladder(marked, _verbatim(marked, coster), coster) == []
    redacted = dataclasses.replace(unit, transforms={unit.turns[1].ref: "delimited+secret_redacted"})
    assert any(o.representation == "excerpt" for o in ledger.ladder(redacted, _verbatim(redacted, coster), coster))


def test_reference_counts_price_derived_text_at_the_source_rate(swe):
    """Under a FixedCoster a rung costs its bytes at the source turn's tokens per byte, and is registered."""
    ledger, _ = swe
    unit = _failing_run(swe)
    coster = FixedCoster({t.ref: 1000 for t in unit.turns})
    ladder = Ladder(ledger.store.blobs.get)
    options = ladder(unit, _verbatim(unit, coster), coster)
    rate = 1000 / len(unit.turns[1].content.encode("utf-8"))
    for option in options:
        assert option.turn_tokens[0] == 1000
        assert option.turn_tokens[1] == -(-len(option.turns[1].content.encode("utf-8")) * rate // 1)
        assert coster.turn_tokens(option.turns[1]) == option.turn_tokens[1]


def test_error_lines_reads_real_failures(swe):
    """The error lines of the failing run include pytest's E line and the FAILED summary, not the passing tests."""
    ledger, _ = swe
    unit = _failing_run(swe)
    art = unit.records[-1]
    found = error_lines(ledger.store.blobs.get(art.sha256))
    assert any(line.startswith("E   ValueError") for line in found)
    assert any(line.startswith("FAILED pvlib/tests/test_temperature.py") for line in found)
    assert not any("PASSED" in line for line in found)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pick=st.integers(min_value=0, max_value=10_000),
    size=st.sampled_from(EXCERPT_TOKENS),
    focus=st.sampled_from(["", "numpy", "error", "temperature"]),
)
def test_every_locator_rehydrates_to_bytes_the_option_shows(swe, pick, size, focus):
    """Property: for any large output, size and focus, each excerpt locator rehydrates to bytes shown verbatim."""
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    large = [u for u in _snapshot(swe).units if u.kind is UnitKind.TOOL_EXCHANGE and len(u.turns[-1].content) > 1500]
    unit = large[pick % len(large)]
    ladder = Ladder(ledger.store.blobs.get, query=focus, excerpt_tokens=(size,))
    for option in ladder(unit, _verbatim(unit, coster), coster):
        shown = "".join(str(t.content) for t in option.turns)
        for facts in option.detail["records"].values():
            for loc in facts["locators"]:
                data = ledger.rehydrate(loc)
                assert len(data) == loc["byte_end"] - loc["byte_start"]
                if option.representation == "excerpt":
                    assert data.decode("utf-8", errors="replace") in shown


def _in_tenant(unit: Unit, tenant_id: str, **artifact_fields) -> Unit:
    """The same unit (same ids, same turns) as another tenant holds it, its artifacts changed by ``artifact_fields``."""
    records = tuple(
        dataclasses.replace(r, tenant_id=tenant_id, **(artifact_fields if r.kind.value == "tool_artifact" else {}))
        for r in unit.records
    )
    return dataclasses.replace(unit, records=records)


def test_options_are_cached_per_tenant_not_per_unit_id(swe):
    """Two tenants may hold a unit with one id and one content; each gets options built from its own records."""
    ledger, _ = swe
    coster = ledger.coster("openai-chat", "gpt-4o")
    unit = _failing_run(swe)
    ladder = Ladder(ledger.store.blobs.get)
    mine = _in_tenant(unit, "tenant-a", source_version="a-v1", meta={"artifact_ref": "s3://tenant-a/run.log"})
    theirs = _in_tenant(unit, "tenant-b", source_version="b-v9", meta={"artifact_ref": "s3://tenant-b/run.log"})
    assert (mine.id, mine.turns) == (theirs.id, theirs.turns)
    first = ladder(mine, _verbatim(mine, coster), coster)
    second = ladder(theirs, _verbatim(theirs, coster), coster)
    shown_first = "\n".join(str(t.content) for o in first for t in o.turns)
    shown_second = "\n".join(str(t.content) for o in second for t in o.turns)
    assert "s3://tenant-a/run.log" in shown_first and "b-v9" not in shown_first
    assert "s3://tenant-b/run.log" in shown_second and "tenant-a" not in shown_second and "a-v1" not in shown_second
