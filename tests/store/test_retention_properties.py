"""Retention over random histories and rule sets, on every backend (seed 004 §4.15).

After ``retain``: every assembly still succeeds; no payload shows the content of a record a rule redacted,
reduced to its hash or deleted; ``explain`` of a retained record names its rule, and so does the audit
trail of a deleted one; a blob another tenant's record still uses survives; a second run changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retention_histories import NOW, History, acted, histories, rule_sets, write
from sqlalchemy import create_engine, text
from store_backends import BACKENDS

from ctxledger import Ledger
from ctxledger.errors import ContentRetained, RecordNotFound
from ctxledger.policy.base import Policy
from ctxledger.policy.default import default_policy
from ctxledger.records import Message, Role, ToolArtifact
from ctxledger.retention.rules import RetentionRules
from ctxledger.retention.state import retained
from ctxledger.store import open_store
from ctxledger.store.schema import metadata

EXAMPLES = {"memory": 60, "sqlite": 20, "postgres": 12}
REQUEST = {"window_tokens": 100_000, "output_tokens": 1_000, "counter": "chars/4", "now": NOW}


@contextmanager
def _ledger(backend: str, request: pytest.FixtureRequest) -> Iterator[Ledger]:
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "memory":
            url = "memory://"
        elif backend == "sqlite":
            url = f"sqlite:///{tmp}/db.sqlite"
        else:
            url = request.getfixturevalue("postgres_url")
        store = open_store(url, blobs_dir=Path(tmp) / "blobs")
        try:
            yield Ledger(store)
        finally:
            store.close()
            if backend == "postgres":
                engine = create_engine(url)
                with engine.begin() as conn:
                    conn.execute(text(f"TRUNCATE {', '.join(t.name for t in metadata.sorted_tables)}"))
                engine.dispose()


def _check(ledger: Ledger, h: History, rules: RetentionRules) -> None:
    expected = acted(h, rules)
    turn = Message(id="c/next", role=Role.USER, content="go on", tenant_id="a", conversation_id="c", branch_id="c/main")
    ledger.append([dataclasses.replace(turn, created_at=NOW)])  # the next turn arrives after retention
    memories = [r.id for r in h.records if r.kind.value == "tool_memory" and r.id not in expected]
    asm = ledger.assemble("c", tenant_id="a", exact_evidence=tuple(memories), **REQUEST)
    shown = json.dumps(asm.payload)
    manifest = ledger.get_assembly(asm.id, tenant_id="a", full=True)  # the summary's trace, by replay
    candidates = {e["ref"] for e in manifest["included"]} | {e["ref"] for e in manifest["omitted"]}
    for rid, rule in expected.items():
        assert h.markers[rid] not in shown, f"{rid} ({rule.action} by {rule.name}) is shown"
        try:
            rec = ledger.store.get("a", rid)
        except RecordNotFound:
            audit = ledger.retention_audit(tenant_id="a", ref=rid)
            assert audit and audit[-1].action == "delete" and "by retention rule" in audit[-1].detail
            continue
        state = retained(rec)
        assert state is not None and state.rule == rule.name and state.action == rule.action
        if rid in candidates:
            chain = ledger.explain(asm.id, rid, tenant_id="a")["chain"]
            assert any(f"by retention rule {rule.name} at" in line for line in chain), chain
        if isinstance(rec, ToolArtifact):
            with pytest.raises(ContentRetained, match=f"retention rule {rule.name}"):
                ledger.rehydrate(rid, tenant_id="a")
    for entry in manifest["rehydrations"]:
        if entry["artifact"] in expected and entry["decision"] == "reference":  # named by the rule that acted
            audit = ledger.retention_audit(tenant_id="a", ref=entry["artifact"])
            assert f"by retention rule {audit[-1].rule} at" in entry["detail"]
        assert entry["decision"] != "rehydrated" or entry["artifact"] not in expected
    for rec in ledger.store.records("a", "c"):
        if isinstance(rec, ToolArtifact) and retained(rec) is None:
            assert ledger.store.blobs.exists(rec.sha256), f"{rec.id} points at a blob that is gone"
    if h.shared is not None:
        assert ledger.store.blobs.exists(h.shared.sha256)
        b = ledger.assemble("c", tenant_id="b", **REQUEST)
        assert h.markers[h.shared.id] in json.dumps(b.payload)


@pytest.mark.parametrize("backend", BACKENDS)
def test_after_retention_every_assembly_succeeds_and_shows_nothing_retained(
    backend: str, request: pytest.FixtureRequest
) -> None:
    @settings(
        max_examples=EXAMPLES[backend],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(h=histories(), rules=rule_sets(), batch=st.integers(1, 12))
    def run(h: History, rules: RetentionRules, batch: int) -> None:
        with _ledger(backend, request) as ledger:
            write(ledger.store, h)
            before = ledger.assemble("c", tenant_id="a", **REQUEST)
            dry = ledger.retain(policy=_with(rules), now=NOW, dry_run=True, batch_size=batch)
            report = ledger.retain(policy=_with(rules), now=NOW, batch_size=batch)
            record_actions = lambda r: sorted((e.ref, e.action, e.rule) for e in r.actions if e.target == "record")  # noqa: E731
            assert record_actions(dry) == record_actions(report)
            for rid in acted(h, rules):
                assert any(e.ref == rid for e in report.actions), f"{rid} was not acted on"
            _check(ledger, h, rules)
            touched = {e.ref for e in report.actions if e.target == "record"}
            if touched & {e["ref"] for e in before.manifest["included"]}:  # it showed content now retained
                assert ledger.get_assembly(before.id, tenant_id="a").get("form") == "summary"
            again = ledger.retain(policy=_with(rules), now=NOW, batch_size=batch)
            assert [e for e in again.actions if e.target == "record"] == []

    run()


def _with(rules: RetentionRules) -> Policy:
    return dataclasses.replace(default_policy(), retention=rules)

