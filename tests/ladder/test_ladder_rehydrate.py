"""Ledger.rehydrate: exactly the stored bytes behind an artifact id, a sha256, a locator or a message excerpt."""

from __future__ import annotations

import pytest

from ctxledger.assemble.select import Option
from ctxledger.errors import InputError, IntegrityError, RecordNotFound
from ctxledger.hashing import sha256_hex
from ctxledger.records import Message, Role, ToolArtifact


def _artifact(swe) -> ToolArtifact:
    ledger, cid = swe
    return max(
        (r for r in ledger.store.records("default", cid) if isinstance(r, ToolArtifact)), key=lambda a: a.size_bytes
    )


def test_an_artifact_id_or_its_sha256_gives_the_stored_bytes(swe):
    """By record id, by ``sha256:``, whole or by range: the blob's bytes, hash-checked."""
    ledger, _ = swe
    art = _artifact(swe)
    whole = ledger.rehydrate(art.id)
    assert sha256_hex(whole) == art.sha256 and len(whole) == art.size_bytes
    assert ledger.rehydrate(f"sha256:{art.sha256}") == whole
    assert ledger.rehydrate(art.id, (100, 400)) == whole[100:400]


def test_a_sha256_is_read_only_through_an_artifact_of_the_tenant(swe):
    """Blobs are shared by content, but ``sha256:`` reads only what one of the tenant's own artifacts references."""
    ledger, _ = swe
    art = _artifact(swe)
    assert ledger.store.blobs.exists(art.sha256)
    with pytest.raises(RecordNotFound, match="other-tenant"):
        ledger.rehydrate(f"sha256:{art.sha256}", tenant_id="other-tenant")
    with pytest.raises(RecordNotFound):
        ledger.rehydrate(art.id, tenant_id="other-tenant")


def test_a_locator_gives_its_own_range_and_must_match_its_artifact(swe):
    """A manifest locator rehydrates its range; a locator whose sha256 is not its artifact's is refused."""
    ledger, _ = swe
    art = _artifact(swe)
    loc = {
        "artifact_id": art.id,
        "sha256": art.sha256,
        "line_start": 1,
        "line_end": 1,
        "byte_start": 5,
        "byte_end": 60,
        "source_version": None,
        "fetch": "",
    }
    assert ledger.rehydrate(loc) == ledger.rehydrate(art.id)[5:60]
    with pytest.raises(IntegrityError):
        ledger.rehydrate({**loc, "sha256": "0" * 64})


def test_a_message_excerpt_locator_rehydrates_the_message_text(swe):
    """The long task message's excerpt points into its UTF-8 text, and each run comes back exactly."""
    ledger, cid = swe
    snap = ledger.snapshots.load("default", cid, ledger.store.get("default", cid).branch_id)
    unit = next(u for u in snap.units if isinstance(u.records[0], Message) and u.records[0].role is Role.USER)
    coster = ledger.coster("openai-chat", "gpt-4o")
    costs = tuple(coster.turn_tokens(t) for t in unit.turns)
    option = ledger.ladder(unit, Option("verbatim", sum(costs), 0.5, unit.turns, turn_tokens=costs), coster)[-1]
    assert option.representation == "excerpt"
    (facts,) = option.detail["records"].values()
    text = unit.records[0].content
    for loc in facts["locators"]:
        data = ledger.rehydrate(loc)
        assert data == text.encode("utf-8")[loc["byte_start"] : loc["byte_end"]]
        assert data.decode("utf-8", errors="replace") in option.turns[0].content
    assert ledger.rehydrate(unit.id) == text.encode("utf-8")


def test_bad_references_are_refused_with_clear_errors(swe):
    """A range past the end, a record without content, an unknown id and another tenant's artifact are refused."""
    ledger, cid = swe
    art = _artifact(swe)
    with pytest.raises(InputError, match="ends past the end"):
        ledger.rehydrate(art.id, (0, art.size_bytes + 1))
    with pytest.raises(InputError, match="start 40 is after its end 0"):
        ledger.rehydrate(art.id, (40, 0))
    records = ledger.store.records("default", cid)
    for call in (r for r in records if r.kind.value == "tool_call"):
        results = [r.id for r in records if isinstance(r, ToolArtifact) and r.tool_call_id == call.id]
        with pytest.raises(InputError, match="no stored content") as info:
            ledger.rehydrate(call.id)
        assert all(rid in str(info.value) for rid in results)  # the call's result is named, to rehydrate instead
        assert results or "no result of it was recorded" in str(info.value)
    with pytest.raises(RecordNotFound):
        ledger.rehydrate(f"{cid}/no-such-record")
    with pytest.raises(RecordNotFound):
        ledger.rehydrate(art.id, tenant_id="someone-else")
