"""Broken provenance repaired by content from the tenant's whole store, or marked stale."""

from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.assembler import AssemblyRequest
from ctxledger.hashing import sha256_hex
from ctxledger.ledger import Ledger
from ctxledger.policy.base import StageContext
from ctxledger.policy.stages import ValidityStage
from ctxledger.records import ToolArtifact, ToolMemory
from ctxledger.scenarios._graph import T0, GraphBuilder
from ctxledger.testing import MemoryStore

REPORT = "region,deals,pipeline_eur\nnorth,21,2900000\nsouth,43,5200000\n"


def _ledger():
    return Ledger(MemoryStore())


def _export(g, name="export", text=REPORT, **env):
    g.tool(name, "reports.export", {"report": "pipeline"}, text, media_type="text/csv", **env)
    return g.records[g.id(f"art-{name}")]


def _broken_memory(g, name, sha, sources=("art-gone",)):
    g.memory(
        name,
        "Q3 pipeline EUR 8.1M across 64 deals.",
        sources=list(sources),
        locators=[{"artifact_id": g.id(s), "sha256": sha} for s in sources],
        revalidation_tool="reports.export",
    )


def _marks(asm, ref):
    return {m["reason"]: m["detail"] for m in asm.manifest["marks"] if m["ref"] == ref}


def _main(ledger, name="main"):
    g = GraphBuilder(ledger, name)
    g.system("sys", "Be brief.")
    g.user("u1", "Compare the pipeline with last quarter.")
    return g


def test_an_earlier_conversation_repairs_and_the_memory_rehydrates_from_it():
    """The artifact found in another conversation is named with it, and exact evidence reads its bytes."""
    ledger = _ledger()
    earlier = GraphBuilder(ledger, "earlier")
    art = _export(earlier)
    g = _main(ledger)
    _broken_memory(g, "mem", art.sha256)
    g.user("u2", "Quote the exact export.")
    asm = ledger.assemble("main", now=g.now, exact_evidence=(g.id("mem"),))
    detail = _marks(asm, g.id("mem"))["provenance_repaired"]
    assert detail == (
        f"source artifact {g.id('art-gone')} is missing; its locator's sha256 matches artifact "
        f"{art.id} in conversation earlier"
    )
    (entry,) = asm.manifest["rehydrations"]
    assert (entry["artifact"], entry["decision"], entry["repaired_from"]) == (art.id, "rehydrated", g.id("art-gone"))
    assert "south,43,5200000" in json.dumps(asm.payload)
    included = {e["ref"]: e for e in asm.manifest["included"]}
    assert included[g.id("mem")]["transform"] == "provenance_repaired+rehydrated"
    block = next(m["content"] for m in asm.payload["messages"] if "south,43,5200000" in m["content"])
    assert f'provenance="source artifact {g.id("art-gone")} is missing' in block
    assert ledger.explain(asm.id, g.id("mem"))["rehydrations"][0]["artifact"] == art.id


def test_a_candidate_match_wins_over_other_conversations_and_rehydrates_too():
    """A matching artifact among the call's candidates is preferred; its detail names no conversation."""
    ledger = _ledger()
    other = _export(GraphBuilder(ledger, "earlier"))
    g = _main(ledger)
    local = _export(g, "local")
    assert local.sha256 == other.sha256
    _broken_memory(g, "mem", local.sha256)
    g.user("u2", "Show the exact export.")
    asm = ledger.assemble("main", now=g.now, exact_evidence=(g.id("mem"),))
    detail = _marks(asm, g.id("mem"))["provenance_repaired"]
    assert detail.endswith(f"matches artifact {local.id}") and "conversation" not in detail
    assert [(r["artifact"], r["decision"]) for r in asm.manifest["rehydrations"]] == [(local.id, "rehydrated")]


def test_another_tenants_artifact_with_the_same_sha256_is_never_used():
    """Only the other tenant holds the bytes: the memory is stale, and no id of that tenant appears anywhere."""
    ledger = _ledger()
    art = _export(GraphBuilder(ledger, "theirs", tenant_id="tenant-b"))
    g = _main(ledger)
    _broken_memory(g, "mem", art.sha256)
    g.user("u2", "Go.")
    asm = ledger.assemble("main", now=g.now, exact_evidence=(g.id("mem"),))
    marks = _marks(asm, g.id("mem"))
    assert "provenance_repaired" not in marks and "provenance cannot be repaired" in marks["stale"]
    assert "theirs/" not in json.dumps(asm.manifest) and "theirs/" not in json.dumps(asm.payload)
    assert asm.manifest["rehydrations"][0]["decision"] == "reference"


def test_cross_conversation_repairs_respect_visibility_scope_and_the_request_clock():
    """Audit-only, someone else's private, out-of-scope or future artifacts cannot repair; a plain one can."""
    ledger = _ledger()
    e = GraphBuilder(ledger, "earlier")
    e.now = T0 - timedelta(days=1)  # last week's session
    texts = [f"{REPORT}# variant {i}\n" for i in range(5)]
    arts = [
        _export(e, "audit", texts[0], visibility="audit_only"),
        _export(e, "private", texts[1], visibility="participant_private", owner="earlier/someone"),
        _export(e, "scoped", texts[2], scope={"user_id": "u-42"}),
        _export(e, "plain", texts[3]),
        _export(e, "future", texts[4]),
    ]
    g = _main(ledger)
    for i, art in enumerate(arts):
        _broken_memory(g, f"mem{i}", art.sha256, sources=(f"art-gone{i}",))
    g.user("u2", "Go.")
    now = arts[4].created_at - timedelta(seconds=1)
    asm = ledger.assemble("main", now=now, scope={"user_id": "u-7"})
    fates = [_marks(asm, g.id(f"mem{i}")) for i in range(5)]
    assert ["provenance_repaired" in f for f in fates] == [False, False, False, True, False]
    assert all("provenance cannot be repaired" in fates[i]["stale"] for i in (0, 1, 2, 4))
    scoped = ledger.assemble("main", now=g.now, scope={"user_id": "u-42"})
    assert "provenance_repaired" in _marks(scoped, g.id("mem2"))


def test_every_broken_source_must_be_repaired():
    """One repairable source and one unrepairable source leave the memory stale, with no partial repair."""
    ledger = _ledger()
    art = _export(GraphBuilder(ledger, "earlier"))
    g = _main(ledger)
    g.memory(
        "mem",
        "Q3 and Q2 pipelines.",
        sources=["art-a", "art-b"],
        locators=[
            {"artifact_id": g.id("art-a"), "sha256": art.sha256},
            {"artifact_id": g.id("art-b"), "sha256": "e" * 64},
        ],
    )
    g.user("u2", "Go.")
    asm = ledger.assemble("main", now=g.now, exact_evidence=(g.id("mem"),))
    marks = _marks(asm, g.id("mem"))
    assert "provenance_repaired" not in marks
    assert marks["stale"].startswith(f"source artifact {g.id('art-b')} is missing; provenance cannot be repaired")
    assert {r["artifact"] for r in asm.manifest["rehydrations"]} == {g.id("art-a"), g.id("art-b")}


def test_a_snapshot_does_not_see_a_later_artifact_of_its_own_conversation():
    """An artifact appended after ``as_of_seq`` cannot repair that snapshot; at the head it does."""
    ledger = _ledger()
    g = _main(ledger)
    _broken_memory(g, "mem", sha256_hex(REPORT.encode()))
    g.user("u2", "Go.")
    snapshot = g.seq("u2")
    art = _export(g, "later")
    g.user("u3", "And now?")
    old = ledger.assemble("main", now=g.now, as_of_seq=snapshot)
    assert "provenance cannot be repaired" in _marks(old, g.id("mem"))["stale"]
    head = ledger.assemble("main", now=g.now)
    assert _marks(head, g.id("mem"))["provenance_repaired"].endswith(f"matches artifact {art.id}")


# -- the stage on its own: ordering and the tenant guard ---------------------------------------------


def _artifact(rid, tenant, conv, seq, sha, **extra):
    return ToolArtifact(
        id=rid,
        tenant_id=tenant,
        conversation_id=conv,
        branch_id=f"{conv}/main",
        seq=seq,
        created_at=T0,
        sha256=sha,
        size_bytes=10,
        **extra,
    )


def _memory(sha):
    return ToolMemory(
        id="c/mem",
        tenant_id="t",
        conversation_id="c",
        branch_id="c/main",
        seq=5,
        created_at=T0,
        summary="pipeline",
        source_artifact_ids=("c/gone",),
        locators=({"artifact_id": "c/gone", "sha256": f"sha256:{sha}"},),
    )


def _run(sha, found, snapshot_seq=10):
    mem = _memory(sha)
    ctx = StageContext(
        AssemblyRequest(tenant_id="t", conversation_id="c"),
        [mem],
        [],
        frozenset({"c/main"}),
        now=T0 + timedelta(days=1),
        find_artifacts=lambda s: [a for a in found if a.sha256 == s],
        snapshot_seq=snapshot_seq,
    )
    decisions = list(ValidityStage()(ctx))
    return {d.reason: d.detail for d in decisions if d.ref == mem.id}, ctx.repairs.get(mem.id, {})


def test_same_conversation_beats_elsewhere_and_ties_break_by_seq_then_id():
    """Within a place the lowest (seq, id) wins; the request's conversation beats a lower seq elsewhere."""
    sha = "a" * 64
    elsewhere = [_artifact("x/art9", "t", "x", 9, sha), _artifact("w/art", "t", "w", 2, sha)]
    same = [
        _artifact("c/late", "t", "c", 8, sha),
        _artifact("c/b", "t", "c", 7, sha),
        _artifact("c/a", "t", "c", 7, sha),
    ]
    _, repairs = _run(sha, [*elsewhere, *same])
    assert repairs["c/gone"].id == "c/a"
    _, repairs = _run(sha, elsewhere)
    assert repairs["c/gone"].id == "w/art"
    marks, repairs = _run(sha, same, snapshot_seq=6)
    assert repairs == {} and "provenance cannot be repaired" in marks["stale"]


def test_the_stage_refuses_another_tenants_artifact_even_if_the_lookup_returns_it():
    """A lookup that leaks another tenant's artifact (a misbound callable) still never repairs with it."""
    sha = "b" * 64
    marks, repairs = _run(sha, [_artifact("evil/art", "other", "c", 1, sha)])
    assert repairs == {} and "evil/art" not in json.dumps(marks)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["t", "u", "v"]), st.sampled_from(["c", "d", "e"]), st.integers(1, 9)),
        max_size=8,
    )
)
def test_a_repair_never_names_an_artifact_outside_the_request_tenant(placed):
    """Whatever artifacts of whichever tenants share the sha256, the repair is in tenant t or there is none."""
    sha = "c" * 64
    found = [_artifact(f"{t}:{c}/art{i}", t, c, seq, sha) for i, (t, c, seq) in enumerate(placed)]
    marks, repairs = _run(sha, found)
    ours = [a for a in found if a.tenant_id == "t" and (a.conversation_id != "c" or a.seq <= 10)]
    if ours:
        assert repairs["c/gone"].tenant_id == "t" and "provenance_repaired" in marks
    else:
        assert repairs == {} and "provenance cannot be repaired" in marks["stale"]
    named = json.dumps(marks)
    assert not any(a.id in named for a in found if a.tenant_id != "t")
