"""Hard filters hold on random graphs (hypothesis): nothing out of scope, off the lineage, private to another
participant, superseded, secret or restricted for the chosen provider reaches a payload, nor does anything
derived from such a record unless declared safe; every omitted candidate has exactly one recorded reason."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.policy import ReasonCode
from ctxledger.records import Compaction, ToolMemory
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

AWS = "AKIAIOSFODNN7EXAMPLE"
TRUST_RANK = {"user": 2, "verified_internal": 3, "generated_summary": 6}

item = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["user", "assistant", "tool", "memory"]),
        "visibility": st.sampled_from(["branch", "conversation", "participant_private", "shared", "audit_only"]),
        "owner": st.sampled_from([None, "p1", "p2"]),
        "shared_with": st.sampled_from([(), ("p1",), ("p2",)]),
        "user": st.sampled_from([None, "u1", "u2"]),
        "privacy": st.sampled_from(["internal", "confidential", "restricted", "mystery"]),
        "origin": st.sampled_from([None, None, "google"]),
        "secret": st.booleans(),
        "branch": st.sampled_from(["main", "b1", "b2"]),
        "trust": st.sampled_from(["user", "verified_internal", "generated_summary"]),
        "supersedes": st.integers(0, 30),
        "replaces": st.booleans(),
    }
)
request = st.fixed_dictionaries(
    {
        "participant": st.sampled_from([None, "p1", "p2"]),
        "user": st.sampled_from(["u1", "u2"]),
        "provider": st.sampled_from(["openai", "google"]),
        "branch": st.sampled_from(["main", "b1"]),
        "window": st.sampled_from([700, 4000, 16000]),
    }
)


def _build(items, req):
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "prop")
    g.system("sys", "You are a careful assistant.", visibility="conversation")
    g.user("u0", "Start.", visibility="conversation")
    branches = {
        "main": g.main,
        "b1": g.branch("b1", fork_after="u0"),
        "b2": g.branch("b2", fork_after="u0", parent=g.main),
    }
    memories: list[int] = []
    for i, it in enumerate(items):
        g.on(branches[it["branch"]])
        env = {
            "visibility": it["visibility"],
            "owner": g.id(it["owner"]) if it["owner"] else None,
            "shared_with": [g.id(p) for p in it["shared_with"]],
            "scope": {"user_id": it["user"]} if it["user"] else {},
            "privacy_class": it["privacy"],
            "provider_scope": it["origin"],
        }
        text = f"note tok{i}x"
        if it["secret"]:
            text += f"\nexport AWS_ACCESS_KEY_ID={AWS}"
        if it["kind"] == "user":
            g.user(f"r{i}", text, **env)
        elif it["kind"] == "assistant":
            g.assistant(f"r{i}", text, **env)
        elif it["kind"] == "tool":
            g.tool(f"r{i}", "lookup", {"q": f"tok{i}x"}, text, **env)
        else:
            old = [m for m in memories if m < i]
            sup = [f"r{old[it['supersedes'] % len(old)]}"] if old and it["replaces"] else []
            it["superseded"] = int(sup[0][1:]) if sup else None
            g.memory(f"r{i}", text, supersedes=sup, trust=it["trust"], **env)
            memories.append(i)
    g.on(branches[req["branch"]])
    g.user("last", "Go on.", visibility="conversation")
    return ledger, g


def _passes_filters(it, req):
    """What the attribute filters alone let through (scope, lineage, visibility, privacy, provider)."""
    who = req["participant"]
    if it["user"] is not None and it["user"] != req["user"]:
        return False
    if it["branch"] not in ("main", req["branch"]) and it["visibility"] not in ("conversation", "shared"):
        return False
    if it["branch"] == "main" and req["branch"] == "b1" and it["visibility"] not in ("conversation", "shared"):
        return False  # main after the fork point is not in b1's lineage
    if it["visibility"] == "audit_only":
        return False
    if it["visibility"] == "participant_private" and (who is None or it["owner"] != who):
        return False
    if it["visibility"] == "shared" and (who is None or (who not in it["shared_with"] and it["owner"] != who)):
        return False
    if it["privacy"] not in ("internal", "confidential"):
        return False
    return not (it["origin"] and req["provider"] != it["origin"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items=st.lists(item, min_size=1, max_size=14), req=request)
def test_hard_filters_hold_and_every_omission_has_one_reason(items, req):
    """No excluded record's text reaches the payload; candidates split into included and omitted, once each."""
    ledger, g = _build(items, req)
    asm = ledger.assemble(
        g.conversation_id,
        branch_id=g.id(req["branch"]) if req["branch"] != "main" else g.main,
        participant_id=g.id(req["participant"]) if req["participant"] else None,
        scope={"user_id": req["user"]},
        provider=req["provider"],
        window_tokens=req["window"],
        output_tokens=200,
        margin_tokens=50,
        now=g.now,
    )
    body = canonical_json(asm.payload)
    assert AWS not in body
    for i, it in enumerate(items):
        if not _passes_filters(it, req):
            assert f"tok{i}x" not in body, f"record r{i} {it} reached the payload"
    for it in items:
        old = it.get("superseded")
        if old is not None and _passes_filters(it, req) and TRUST_RANK[it["trust"]] <= TRUST_RANK[items[old]["trust"]]:
            assert f"tok{old}x" not in body, f"superseded r{old} reached the payload"
    manifest = asm.manifest
    omitted = [e["ref"] for e in manifest["omitted"]]
    included = {e["ref"] for e in manifest["included"]}
    assert len(omitted) == len(set(omitted)) and not included & set(omitted)
    assert set(manifest["candidates"]) == included | set(omitted)
    codes = {c.value for c in ReasonCode}
    assert all(e["reason"] in codes and e["stage"] for e in manifest["omitted"])
    assert sum(manifest["omitted_by_reason"].values()) == len(omitted)


# -- derived records inherit their sources' restrictions ---------------------------

source_item = st.fixed_dictionaries(
    {
        "owner": st.sampled_from([None, "p1", "p2"]),
        "visibility": st.sampled_from(["branch", "branch", "participant_private", "shared", "audit_only"]),
        "shared_with": st.sampled_from([(), ("p1",), ("p2",)]),
        "privacy": st.sampled_from(["internal", "internal", "secret"]),
        "origin": st.sampled_from([None, None, "google"]),
    }
)
derived_item = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["memory", "compaction"]),
        "sources": st.lists(st.integers(0, 40), min_size=1, max_size=3),
        "safe": st.booleans(),
    }
)


def _restricted_source(it, who, provider):
    """Whether a source's own envelope keeps it from ``who`` or from ``provider`` (the attribute filters)."""
    if it["visibility"] == "audit_only":
        return True
    if it["visibility"] == "participant_private" and (who is None or it["owner"] != who):
        return True
    if it["visibility"] == "shared" and (who is None or (who not in it["shared_with"] and it["owner"] != who)):
        return True
    return it["privacy"] != "internal" or (it["origin"] is not None and it["origin"] != provider)


def _tainted(nodes, i, who, provider):
    """Whether derived node ``i`` inherits a restriction: some source reached without passing a safe record is
    restricted by its own envelope (independent re-statement of the rule, depth-first with a visited set)."""
    if nodes[i]["safe"]:
        return False
    seen, stack = {i}, list(nodes[i]["sources"])
    while stack:
        j = stack.pop()
        if j in seen:
            continue
        seen.add(j)
        node = nodes[j]
        if _restricted_source(node, who, provider):
            return True
        if not node.get("safe", True):
            stack.extend(node["sources"])
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    sources=st.lists(source_item, min_size=1, max_size=6),
    derived=st.lists(derived_item, min_size=1, max_size=8),
    who=st.sampled_from([None, "p1", "p2"]),
    provider=st.sampled_from(["openai", "google"]),
)
def test_nothing_derived_from_a_restricted_record_reaches_the_payload_unless_declared_safe(
    sources, derived, who, provider
):
    """Memories and compactions (of memories, of compactions …) of a record that is provider- or privacy-restricted
    for the chosen provider, or private to another participant, stay out unless tagged safe_summary."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "der")
    g.system("sys", "You are a careful assistant.", visibility="conversation")
    g.user("u0", "Start.", visibility="conversation")
    nodes: list[dict] = []
    ids: list[str] = []
    for i, it in enumerate(sources):
        g.tool(
            f"s{i}", "lookup", {"q": f"s{i}"}, f"raw stok{i}x",
            owner=g.id(it["owner"]) if it["owner"] else None, visibility=it["visibility"],
            shared_with=[g.id(p) for p in it["shared_with"]], privacy_class=it["privacy"],
            provider_scope=it["origin"],
        )  # fmt: skip
        nodes.append({**it, "owner": it["owner"]})
        ids.append(g.id(f"art-s{i}"))
    base = {"tenant_id": "default", "conversation_id": g.conversation_id, "branch_id": g.main}
    for k, it in enumerate(derived):
        picks = sorted({s % len(nodes) for s in it["sources"]})
        src_ids = tuple(ids[p] for p in picks)
        rid, text = g.id(f"d{k}"), f"derived dtok{k}x"
        meta = {"tags": ["safe_summary"]} if it["safe"] else {}
        env = {**base, "id": rid, "created_at": g.now, "visibility": "conversation", "meta": meta}
        if it["kind"] == "memory":
            rec = ToolMemory(summary=text, source_artifact_ids=src_ids, trust="verified_internal", **env)
        else:
            rec = Compaction(text=text, source_ids=src_ids, trust="generated_summary", **env)
        ledger.store.append([rec])
        nodes.append({"safe": it["safe"], "sources": picks, "visibility": "conversation", "owner": None,
                      "shared_with": (), "privacy": "internal", "origin": None})  # fmt: skip
        ids.append(rid)
    g.user("last", "Go on.", visibility="conversation")
    asm = ledger.assemble(
        g.conversation_id,
        participant_id=g.id(who) if who else None,
        provider=provider,
        window_tokens=16000,
        output_tokens=200,
        now=g.now,
    )
    body = canonical_json(asm.payload)
    reasons = {e["ref"]: e["reason"] for e in asm.manifest["omitted"]}
    restricting = {"provider_restricted", "privacy_restricted", "private_to_participant", "not_promoted", "audit_only"}
    for k in range(len(derived)):
        if _tainted(nodes, len(sources) + k, who, provider):
            assert f"dtok{k}x" not in body, f"derived d{k} {derived[k]} reached the payload"
        else:  # and no more than that: an untainted derived record is not held back by a restriction
            assert reasons.get(g.id(f"d{k}")) not in restricting, f"d{k} {derived[k]}: {reasons.get(g.id(f'd{k}'))}"
