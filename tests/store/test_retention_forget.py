"""Forgetting a conversation or a participant, the assembly schedule, and retention rules in policy files.

On every backend: ``forget`` removes the records, memories derived only from them, assemblies and blobs no
record of any tenant references, and leaves the audit trail; manifests are kept whole, then as their
summary (``explain`` still answers), then deleted; a ``[retention]`` table is part of the policy hash and
bad rules are refused naming the field.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from retention_histories import NOW, rule_sets

from ctxledger import Ledger
from ctxledger.errors import ContentRetained, PolicyFileError, RecordNotFound
from ctxledger.policy import loads_policy
from ctxledger.policy.default import default_policy
from ctxledger.records import Conversation, Message, Participant, Role, ToolArtifact, ToolCall, ToolMemory
from ctxledger.retention.rules import AssemblyRetention, RetentionRule, RetentionRules
from ctxledger.store.base import GraphStore

REQUEST = {"window_tokens": 50_000, "output_tokens": 1_000, "counter": "chars/4", "now": NOW}


def _conversation(store: GraphStore, tenant: str, conv: str, data: bytes, owner: str | None = None) -> ToolArtifact:
    env = {"tenant_id": tenant, "conversation_id": conv, "branch_id": f"{conv}/main", "created_at": NOW}
    ref = store.blobs.put(data)
    art = ToolArtifact(id=f"{conv}/r", tool_call_id=f"{conv}/t", call_id="call_1", name="lookup", sha256=ref.sha256,
                       size_bytes=ref.size_bytes, **env)
    store.append([
        Conversation(id=conv, **env),
        Participant(id=f"{conv}/p-user", role="user", **env),
        Message(id=f"{conv}/u", role=Role.USER, content="find it", owner_participant_id=f"{conv}/p-user", **env),
        Message(id=f"{conv}/a", role=Role.ASSISTANT, content=None, **env),
        ToolCall(id=f"{conv}/t", message_id=f"{conv}/a", call_id="call_1", name="lookup", **env),
        art,
        Message(id=f"{conv}/u2", role=Role.USER, content="thanks", owner_participant_id=f"{conv}/p-user", **env),
    ])
    return art


def test_forgetting_a_conversation_removes_it_and_what_only_it_fed(store: GraphStore) -> None:
    ledger = Ledger(store)
    gone = _conversation(store, "t", "c1", b"private result")
    _conversation(store, "t", "c2", b"other result")
    kept_elsewhere = _conversation(store, "u", "c1", b"private result")  # another tenant, same bytes
    env = {"tenant_id": "t", "conversation_id": "c2", "branch_id": "c2/main", "created_at": NOW}
    only = ToolMemory(id="c2/m-only", summary="from c1", source_artifact_ids=(gone.id,), **env)
    both = ToolMemory(id="c2/m-both", summary="from both", source_artifact_ids=(gone.id, "c2/r"), **env)
    store.append([only, both])
    asm = ledger.assemble("c1", tenant_id="t", **REQUEST)
    report = ledger.forget(conversation_id="c1", tenant_id="t", now=NOW)
    assert report.by_rule["forget"]["delete"] == 7 + 1 + 1  # its records, its assembly, the memory fed only by it
    assert store.conversations("t") == ["c2"]
    with pytest.raises(RecordNotFound):
        store.get_assembly("t", asm.id)
    with pytest.raises(RecordNotFound):
        store.get("t", only.id)
    assert store.get("t", both.id).id == both.id
    assert store.blobs.exists(kept_elsewhere.sha256)  # tenant u still references the bytes
    with pytest.raises(ContentRetained, match="deleted by retention rule forget"):
        ledger.rehydrate(gone.id, tenant_id="t")
    audit = ledger.retention_audit(tenant_id="t")
    assert {e.ref for e in audit} >= {gone.id, asm.id, only.id, "c1"}
    assert next(e for e in audit if e.ref == gone.id).before_sha256 == gone.sha256
    ledger.forget(conversation_id="c1", tenant_id="u", now=NOW)
    assert not store.blobs.exists(gone.sha256)  # no record of any tenant references it now
    ledger.assemble("c2", tenant_id="t", **REQUEST)


def test_forgetting_a_participant_removes_their_records_everywhere(store: GraphStore) -> None:
    ledger = Ledger(store)
    for conv in ("c1", "c2"):
        _conversation(store, "t", conv, conv.encode())
    env = {"tenant_id": "t", "conversation_id": "c1", "branch_id": "c1/main", "created_at": NOW}
    store.append([Message(id="c1/u3", role=Role.USER, content="mine", owner_participant_id="c2/p-user", **env)])
    asm = ledger.assemble("c1", tenant_id="t", **REQUEST)
    ledger.forget(participant_id="c2/p-user", tenant_id="t", now=NOW)
    assert {r.id for r in store.records("t", "c2")} == {"c2", "c2/a", "c2/t", "c2/r"}
    assert "c1/u3" not in {r.id for r in store.records("t", "c1")}
    assert store.get_assembly("t", asm.id)["form"] == "summary"  # it showed c1/u3
    assert {e.rule for e in ledger.retention_audit(tenant_id="t")} == {"forget"}


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz-/0123456789", min_size=1, max_size=16), dry=st.booleans())
def test_forgetting_an_unknown_participant_names_it_and_changes_nothing(
    store: GraphStore, name: str, dry: bool
) -> None:
    """A participant no record is or is owned by (also one forgotten already) is not found, naming it."""
    ledger = Ledger(store)
    if "c1" not in store.conversations("t"):
        _conversation(store, "t", "c1", b"kept")
    known = {"c1/p-user", *(r.owner_participant_id for r in store.records("t", "c1") if r.owner_participant_id)}
    assume(name not in known)
    before = [r.id for r in store.records("t", "c1")]
    with pytest.raises(RecordNotFound) as missing:
        ledger.forget(participant_id=name, tenant_id="t", now=NOW, dry_run=dry)
    assert (missing.value.what, missing.value.record_id, missing.value.tenant_id) == ("participant", name, "t")
    assert f"participant {name!r} not found in tenant 't'" in str(missing.value)
    assert [r.id for r in store.records("t", "c1")] == before and not ledger.retention_audit(tenant_id="t")


def test_forgetting_a_participant_twice_finds_nobody_the_second_time(store: GraphStore) -> None:
    ledger = Ledger(store)
    _conversation(store, "t", "c1", b"gone")
    assert ledger.forget(participant_id="c1/p-user", tenant_id="t", now=NOW, dry_run=True).by_rule
    ledger.forget(participant_id="c1/p-user", tenant_id="t", now=NOW)
    audit = ledger.retention_audit(tenant_id="t")
    with pytest.raises(RecordNotFound, match="participant 'c1/p-user' not found"):
        ledger.forget(participant_id="c1/p-user", tenant_id="t", now=NOW)
    assert ledger.retention_audit(tenant_id="t") == audit


def test_forget_needs_exactly_one_target(store: GraphStore) -> None:
    with pytest.raises(Exception, match="forget one conversation_id or one participant_id"):
        Ledger(store).forget(tenant_id="t")


def test_assemblies_are_kept_whole_then_as_their_summary_then_deleted(store: GraphStore) -> None:
    ledger = Ledger(store)
    _conversation(store, "t", "c1", b"result")
    asm = ledger.assemble("c1", tenant_id="t", **REQUEST)
    whole = store.get_assembly("t", asm.id)
    policy = dataclasses.replace(default_policy(), retention=RetentionRules((), AssemblyRetention(7, 30)))
    whole_created = datetime.fromisoformat(whole["created_at"])
    assert ledger.retain(policy=policy, now=whole_created + timedelta(days=6)).by_rule == {}
    report = ledger.retain(policy=policy, now=whole_created + timedelta(days=8))
    assert dict(report.by_rule["assemblies.whole_days"]) == {"summary": 1}
    summary = store.get_assembly("t", asm.id)
    assert summary["form"] == "summary" and "payload" not in summary and "decisions" not in summary
    assert "assemblies.whole_days" in summary["retention"]["detail"]
    assert {e["ref"] for e in summary["included"]} == {e["ref"] for e in whole["included"]}
    why = ledger.explain(asm.id, "c1/u2", tenant_id="t")
    assert why["status"] == "included" and why["policy"].startswith(whole["policy"]["name"])
    ledger.retain(policy=policy, now=whole_created + timedelta(days=31))
    with pytest.raises(RecordNotFound):
        store.get_assembly("t", asm.id)
    actions = [(e.rule, e.action) for e in ledger.retention_audit(tenant_id="t", ref=asm.id)]
    assert actions == [("assemblies.whole_days", "summary"), ("assemblies.summary_days", "delete")]


def test_retention_rules_are_part_of_the_policy_and_its_hash() -> None:
    text = """
[policy]
name = "p"
version = "1"

[[retention.rules]]
name = "raw-30d"
kinds = ["tool_artifact"]
privacy = ["confidential"]
after_days = 30
action = "redact"

[retention.assemblies]
whole_days = 7
summary_days = 90
"""
    policy = loads_policy(text)
    (rule,) = policy.retention.rules
    assert (rule.name, rule.kinds, rule.privacy, rule.after_days, rule.action) == (
        "raw-30d", ("tool_artifact",), ("confidential",), 30.0, "redact",
    )
    assert policy.describe()["retention"]["assemblies"] == {"whole_days": 7.0, "summary_days": 90.0}
    assert policy.hash != loads_policy(text.replace("after_days = 30", "after_days = 31")).hash
    assert loads_policy(text, syntax="toml").hash == policy.hash
    plain = '[policy]\nname = "p"\nversion = "1"\n'
    assert "retention" not in loads_policy(plain).describe()  # no rules: hashes of existing policies unchanged


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ('[[retention.rules]]\nname = "r"\nkinds = ["branch"]\naction = "redact"', "retention.rules[0].kinds"),
        ('[[retention.rules]]\nname = "r"\nkinds = ["message"]\naction = "shred"', "retention.rules[0].action"),
        ('[[retention.rules]]\nname = "r"\nkinds = ["message"]\naction = "delete"\nafter_days = -1',
         "retention.rules[0].after_days"),
        ('[[retention.rules]]\nkinds = ["message"]\naction = "delete"', "retention.rules[0].name"),
        ('[[retention.rules]]\nname = "r"\nkinds = "message"\naction = "delete"', "retention.rules[0].kinds"),
        ("[retention.assemblies]\nwhole_days = 30\nsummary_days = 7", "retention.assemblies.summary_days"),
        ("[retention]\nforever = true", "retention.forever"),
    ],
)
def test_bad_retention_rules_are_refused_naming_the_field(table: str, field: str) -> None:
    with pytest.raises(PolicyFileError) as err:
        loads_policy('[policy]\nname = "p"\nversion = "1"\n' + table)
    assert err.value.field == field


@settings(max_examples=200, deadline=None)
@given(rules=rule_sets(), age=st.integers(0, 130), kind=st.sampled_from(["message", "tool_artifact", "tool_memory"]),
       privacy=st.sampled_from(["internal", "confidential"]))
def test_the_rule_that_applies_is_the_oldest_matching_rule_reached(
    rules: RetentionRules, age: int, kind: str, privacy: str
) -> None:
    record = {
        "message": Message(id="m", role=Role.USER, content="x", tenant_id="t", conversation_id="c", branch_id="b"),
        "tool_artifact": ToolArtifact(id="m", tenant_id="t", conversation_id="c", branch_id="b"),
        "tool_memory": ToolMemory(id="m", tenant_id="t", conversation_id="c", branch_id="b"),
    }[kind]
    record = dataclasses.replace(record, privacy_class=privacy, created_at=NOW - timedelta(days=age))
    chosen = rules.rule_for(record, NOW)
    reached = [r for r in rules.rules if kind in r.kinds and (not r.privacy or privacy in r.privacy)
               and age >= r.after_days]
    if not reached:
        assert chosen is None
    else:
        assert chosen is not None and chosen.after_days == max(r.after_days for r in reached)
        assert chosen is next(r for r in reached if r.after_days == chosen.after_days)  # ties: first in the file


def test_a_compaction_of_redacted_history_goes_and_the_history_shows_its_notices(tmp_path: Path) -> None:
    from ctxledger.demo import demo_source

    with Ledger.open(f"sqlite:///{tmp_path}/c.db") as ledger, demo_source() as path:
        conv = ledger.import_file(path, "tau-bench", conversation_id="tau").conversation_ids[0]
        compaction = ledger.compact(conv)
        covered = [r for r in ledger.store.records("default", conv) if r.id in compaction.source_ids]
        users = [r for r in covered if isinstance(r, Message) and r.role is Role.USER and isinstance(r.content, str)]
        assert users, "the compaction covers user turns"
        rules = RetentionRules((RetentionRule(name="chat-now", kinds=("message",), action="redact"),))
        report = ledger.retain(policy=dataclasses.replace(default_policy(), retention=rules))
        gone = [e for e in report.actions if e.ref == compaction.id]
        assert [(e.action, e.rule) for e in gone] == [("delete", "chat-now")]
        with pytest.raises(RecordNotFound):
            ledger.store.get("default", compaction.id)
        asm = ledger.assemble(conv, window_tokens=16_000, output_tokens=1_000, counter="chars/4")
        shown = str(asm.payload)
        assert not any(u.content in shown for u in users if len(u.content) > 20)
        assert "redacted by retention rule chat-now" in shown


@pytest.mark.parametrize("action", ["redact", "hash_only", "delete"])
def test_explaining_an_included_record_says_what_retention_did_to_it_since(tmp_path: Path, action: str) -> None:
    """The manifest says what the model saw then; the explanation adds what the record's content is now."""
    from typer.testing import CliRunner

    from ctxledger.cli import app
    from ctxledger.demo import demo_source

    url = f"sqlite:///{tmp_path}/e.db"
    with Ledger.open(url) as ledger, demo_source() as path:
        conv = ledger.import_file(path, "tau-bench", conversation_id="tau").conversation_ids[0]
        asm = ledger.assemble(conv, window_tokens=16_000, output_tokens=1_000, counter="chars/4")
        result = next(e["ref"] for e in asm.manifest["included"] if e["kind"] == "tool_artifact")
        user = next(e["ref"] for e in asm.manifest["included"] if e["kind"] == "message")
        assert "content_now" not in ledger.explain(asm.id, result)
        rules = RetentionRules((RetentionRule(name="results-now", kinds=("tool_artifact",), action=action),))
        ledger.retain(policy=dataclasses.replace(default_policy(), retention=rules))
        why = ledger.explain(asm.id, result)
        assert why["status"] == "included"
        assert "by retention rule results-now" in why["content_now"]
        assert "content_now" not in ledger.explain(asm.id, user)  # messages were not touched
    shown = CliRunner().invoke(app, ["--db", url, "explain", asm.id, result])
    assert shown.exit_code == 0, shown.output
    assert "content now" in shown.stdout and "results-now" in shown.stdout


@pytest.mark.parametrize("short", [False, True])
def test_explaining_a_record_deleted_before_a_later_assembly_names_the_rule(tmp_path: Path, short: bool) -> None:
    """A later assembly never saw the deleted record: explain says it is no candidate, and which rule deleted it."""
    from ctxledger.demo import demo_source

    with Ledger.open(f"sqlite:///{tmp_path}/d.db") as ledger, demo_source() as path:
        conv = ledger.import_file(path, "tau-bench", conversation_id="tau").conversation_ids[0]
        before = ledger.assemble(conv, window_tokens=16_000, output_tokens=1_000, counter="chars/4")
        result = next(e["ref"] for e in before.manifest["included"] if e["kind"] == "tool_artifact")
        rules = RetentionRules((RetentionRule(name="results-gone", kinds=("tool_artifact",), action="delete"),))
        ledger.retain(policy=dataclasses.replace(default_policy(), retention=rules))
        after = ledger.assemble(conv, window_tokens=16_000, output_tokens=1_000, counter="chars/4")
        with pytest.raises(RecordNotFound) as caught:
            ledger.explain(after.id, result.removeprefix(f"{conv}/") if short else result)
        assert "not found among the candidates" in str(caught.value)
        assert "deleted by retention rule results-gone" in str(caught.value)
