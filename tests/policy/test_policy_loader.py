"""Policies as versioned values: TOML files, custom stages by import path, hashes, reason codes in manifests."""

from __future__ import annotations

import textwrap

import pytest

from ctxledger.errors import PolicyFileError
from ctxledger.eval.cases import read_case_file, run_case
from ctxledger.ledger import Ledger
from ctxledger.policy import ReasonCode, default_policy, load_policy, loads_policy
from ctxledger.policy.stages import STAGES, PrivacyStage, ScopeStage
from ctxledger.testing import MemoryStore

POLICY = textwrap.dedent(
    """
    [policy]
    name = "support-desk"
    version = "7"
    stages = ["scope", "lineage", "visibility", "privacy", "validity", "trust", "protection", "secrets", "memory_first"]

    [stages.scope]
    keys = ["app", "user_id", "org"]

    [stages.privacy]
    allow = { "*" = ["public", "internal"], google = ["public", "internal", "confidential"] }
    routes = { google = ["vertex"] }

    [selection]
    w_relevance = 0.5
    class_caps = { operational = 0.5 }

    [rehydration]
    max_bytes = 4096

    [[contracts]]
    agent = "router"
    call_type = "routing"
    sources = ["instructions", "latest_user_turn", "typed_request"]
    max_input_tokens = 2000
    tools = { investigation = ["search_orders"] }
    write_tools = ["issue_refund"]
    """
)

CUSTOM = textwrap.dedent(
    '''
    from ctxledger.policy.base import Outcome, PolicyDecision


    class DropWeekendNotes:
        """Omit records tagged weekend."""

        name = "drop_weekend"
        version = "3"

        def __init__(self, tag="weekend"):
            self.tag = tag

        def config(self):
            return {"tag": self.tag}

        def __call__(self, ctx):
            for rec in ctx.records:
                if self.tag in (rec.meta.get("tags") or ()):
                    yield PolicyDecision(rec.id, self.name, Outcome.OMIT, "out_of_scope", "weekend note")
    '''
)


def test_reason_codes_are_pinned():
    """Reason codes only grow: the built-in values (and the later additions) keep their exact spelling."""
    assert [c.value for c in ReasonCode] == [
        "out_of_scope", "not_in_lineage", "private_to_participant", "audit_only", "not_promoted",
        "privacy_restricted", "provider_restricted", "secret", "superseded", "stale", "conflict_suppressed",
        "untrusted_non_evidence", "redundant", "budget", "class_cap", "byte_budget", "role_order", "summarized",
        "covered_by_memory", "out_of_contract", "empty",
    ]  # fmt: skip


def test_toml_policy_loads_stages_config_selection_and_contracts(tmp_path):
    """A policy file gives a named, versioned policy whose stages, settings and contracts are the file's."""
    path = tmp_path / "support.toml"
    path.write_text(POLICY, encoding="utf-8")
    policy = load_policy(path)
    assert (policy.name, policy.version) == ("support-desk", "7")
    assert [s.name for s in policy.stages] == [
        "scope", "lineage", "visibility", "privacy", "validity", "trust", "protection", "secrets", "memory_first",
    ]  # fmt: skip
    scope = policy.stages[0]
    assert isinstance(scope, ScopeStage) and scope.keys == ("app", "user_id", "org")
    privacy = policy.stage("privacy")
    assert isinstance(privacy, PrivacyStage) and privacy.routes == {"google": ("vertex",)}
    assert policy.selection.w_relevance == 0.5 and policy.selection.class_caps == {"operational": 0.5}
    assert policy.rehydration.max_bytes == 4096
    (contract,) = policy.contracts
    assert contract.max_input_tokens == 2000 and contract.write_tools == ("issue_refund",)


def test_policy_hash_is_stable_and_changes_with_any_setting():
    """The same file hashes the same; changing one stage setting changes the hash; the version is in it."""
    a, b = loads_policy(POLICY), loads_policy(POLICY)
    assert a.hash == b.hash and a.hash.startswith("sha256:")
    changed = loads_policy(POLICY.replace('"org"]', '"tenant"]'))
    bumped = loads_policy(POLICY.replace('version = "7"', 'version = "8"'))
    assert len({a.hash, changed.hash, bumped.hash}) == 3


def test_default_policy_runs_every_builtin_stage_in_order():
    """Without a stage list a policy file runs every built-in stage, like the default policy."""
    policy = loads_policy('[policy]\nname = "p"\nversion = "1"\n')
    assert [s.name for s in policy.stages] == list(STAGES) == [s.name for s in default_policy().stages]
    assert policy.version == "1"


def test_custom_stage_by_import_path_runs_and_is_hashed(tmp_path, monkeypatch, cases_dir):
    """A stage class named by 'module:Class' is imported, configured, hashed, and its decisions reach the manifest."""
    (tmp_path / "acme_stages.py").write_text(CUSTOM, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = textwrap.dedent(
        """
        [policy]
        name = "acme"
        version = "1"
        stages = ["scope", "lineage", "visibility", "privacy", "validity", "trust", "drop_weekend", "protection",
                  "secrets"]
        [stage_classes]
        drop_weekend = "acme_stages:DropWeekendNotes"
        [stages.drop_weekend]
        tag = "user_constraint"
        """
    )
    policy = loads_policy(text, source="acme.toml", allow_modules=["acme_stages"])
    assert policy.describe()["stages"][6] == {
        "name": "drop_weekend",
        "version": "3",
        "config": {"tag": "user_constraint"},
    }
    run = run_case(read_case_file(cases_dir / "B09.json"), Ledger(MemoryStore(), policy=policy))
    manifest = run.assembly.manifest
    assert {k: v for k, v in manifest["policy"].items() if k != "relevance"} == {
        "name": "acme",
        "version": "1",
        "hash": policy.hash,
    }
    assert manifest["policy"]["relevance"].startswith("bm25")  # lexical, or lexical + the semantic model
    dropped = [e for e in manifest["omitted"] if e["stage"] == "drop_weekend"]
    assert [e["external_id"] for e in dropped] == ["m2"]


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('[policy]\nname = "p"\n', "policy.version", "non-empty string"),
        ('[policy]\nname = "p"\nversion = "1"\nstages = ["scope", "nope"]\n', "policy.stages", "unknown stage 'nope'"),
        ('[policy]\nname = "p"\nversion = "1"\n[stages.scope]\nbogus = 1\n', "stages.scope", "invalid settings"),
        (
            '[policy]\nname = "p"\nversion = "1"\n[stage_classes]\nx = "no_such_module_xyz:Stage"\n',
            "stage_classes.x",
            "cannot import",
        ),
        (
            '[policy]\nname = "p"\nversion = "1"\n[[contracts]]\nsources = ["everything"]\n',
            "contracts[0].sources",
            "unknown source",
        ),
        ('[policy]\nname = "p"\nversion = "1"\n[budget]\nx = 1\n', "budget", "unknown table"),
        ("[stages.scope]\nkeys = []\n", "policy", "missing [policy]"),
        (
            '[policy]\nname = "p"\nversion = "1"\n[rehydration]\nlocated_ranges = "no"\n',
            "rehydration.located_ranges",
            "true or false",
        ),
        ('[policy]\nname = "p"\nversion = "1"\n[rehydration]\nmax_bytes = 1.5\n', "rehydration.max_bytes", "integer"),
        ('[policy]\nname = "p"\nversion = "1"\n[selection]\nw_recency = "high"\n', "selection.w_recency", "number"),
        ('[policy]\nname = "p"\nversion = "1"\n[selection]\nclass_caps = 3\n', "selection.class_caps", "table"),
    ],
)
def test_invalid_policy_files_name_file_and_field(text, field, words):
    """Every problem in a policy file raises PolicyFileError naming the file and the offending field."""
    with pytest.raises(PolicyFileError) as info:
        loads_policy(text, source="bad.toml", allow_modules=["no_such_module_xyz"])
    assert info.value.field == field and info.value.source == "bad.toml"
    assert words in str(info.value) and "bad.toml" in str(info.value)


def test_invalid_toml_and_missing_file_are_policy_file_errors(tmp_path):
    """Broken TOML and unreadable files are reported as PolicyFileError with the file name."""
    with pytest.raises(PolicyFileError, match="invalid TOML"):
        loads_policy("[policy\nname=", source="broken.toml")
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(tmp_path / "absent.toml")


def test_manifest_counts_omissions_by_reason_and_stage(cases_dir):
    """The manifest counts omitted candidates per reason and per stage, and the counts match the entries."""
    run = run_case(read_case_file(cases_dir / "B09.json"), Ledger(MemoryStore()))
    manifest = run.assembly.manifest
    assert manifest["omitted_by_reason"] == {"summarized": len(manifest["omitted"])}
    assert manifest["omitted_by_stage"] == {"compaction": len(manifest["omitted"])}
    assert manifest["policy"]["name"] == "ctxledger-default" and manifest["policy"]["version"] == "4"


POLICY_YAML = textwrap.dedent(
    """
    # the same policy as POLICY, written as YAML
    policy:
      name: support-desk
      version: "7"
      stages: [scope, lineage, visibility, privacy, validity, trust, protection, secrets, memory_first]
    stages:
      scope:
        keys: [app, user_id, org]
      privacy:
        allow:
          "*": [public, internal]
          google: [public, internal, confidential]
        routes: {google: [vertex]}
    selection:
      w_relevance: 0.5
      class_caps: {operational: 0.5}
    rehydration:
      max_bytes: 4096
    contracts:
      - agent: router
        call_type: routing
        sources: [instructions, latest_user_turn, typed_request]
        max_input_tokens: 2000
        tools: {investigation: [search_orders]}
        write_tools: [issue_refund]
    """
)


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".YAML"])
def test_yaml_policy_equals_the_equivalent_toml_policy_and_hash(tmp_path, suffix):
    """A YAML file with the same tables as a TOML file gives the same policy, description and hash."""
    (tmp_path / "p.toml").write_text(POLICY, encoding="utf-8")
    (tmp_path / f"p{suffix}").write_text(POLICY_YAML, encoding="utf-8")
    toml, yml = load_policy(tmp_path / "p.toml"), load_policy(tmp_path / f"p{suffix}")
    assert yml.describe() == toml.describe() and yml.hash == toml.hash
    assert yml.hash != loads_policy(POLICY_YAML.replace("org]", "tenant]"), syntax="yaml").hash
    assert (
        loads_policy("policy: {name: p, version: '1'}\n", syntax="yaml").hash
        == loads_policy('[policy]\nname = "p"\nversion = "1"\n').hash
    )


@pytest.mark.parametrize(
    ("toml", "yml"),
    [
        ('[policy]\nname = "p"\n', "policy: {name: p}\n"),
        (
            '[policy]\nname = "p"\nversion = "1"\nstages = ["scope", "nope"]\n',
            "policy: {name: p, version: '1', stages: [scope, nope]}\n",
        ),
        (
            '[policy]\nname = "p"\nversion = "1"\n[stages.scope]\nbogus = 1\n',
            "policy: {name: p, version: '1'}\nstages:\n  scope: {bogus: 1}\n",
        ),
        (
            '[policy]\nname = "p"\nversion = "1"\n[[contracts]]\nsources = ["everything"]\n',
            "policy: {name: p, version: '1'}\ncontracts:\n  - sources: [everything]\n",
        ),
        ('[policy]\nname = "p"\nversion = "1"\n[budget]\nx = 1\n', "policy: {name: p, version: '1'}\nbudget: {x: 1}\n"),
        ("[stages.scope]\nkeys = []\n", "stages: {scope: {keys: []}}\n"),
    ],
)
def test_yaml_policy_errors_are_the_toml_ones(toml, yml):
    """The same mistake in TOML and in YAML gives the same field and the same message (with its own file name)."""
    errors = []
    for text, source, syntax in ((toml, "bad.toml", "toml"), (yml, "bad.yaml", "yaml")):
        with pytest.raises(PolicyFileError) as info:
            loads_policy(text, source=source, syntax=syntax)
        assert info.value.source == source and source in str(info.value)
        errors.append((info.value.field, info.value.problem))
    assert errors[0] == errors[1] and errors[0][0] is not None


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("policy:\n  name: p\n  version: [1\n", 4, "invalid YAML"),
        ("policy:\n  name: p\n\tversion: 1\n", 3, "invalid YAML"),
        ("policy:\n  name: p\n  name: q\n  version: 1\n", 3, "duplicate key 'name'"),
        (
            "policy: {name: p, version: '1'}\nstages:\n  privacy:\n    allow: {1: [public]}\n",
            4,
            "key 1 is not a string",
        ),
    ],
)
def test_bad_yaml_names_file_and_line(tmp_path, text, line, words):
    """YAML syntax errors, duplicate keys and non-string keys raise PolicyFileError with the file and line."""
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyFileError) as info:
        load_policy(path)
    assert info.value.line == line and info.value.source == str(path)
    assert f"{path}, line {line}: " in str(info.value) and words in str(info.value)


def test_yaml_document_must_be_a_mapping_and_empty_means_no_policy_table():
    """A YAML list or scalar is refused; an empty file lacks the [policy] table, as an empty TOML file does."""
    with pytest.raises(PolicyFileError, match="must be a mapping of tables"):
        loads_policy("- policy\n- stages\n", source="list.yaml", syntax="yaml")
    with pytest.raises(PolicyFileError) as empty:
        loads_policy("", source="empty.yaml", syntax="yaml")
    assert empty.value.field == "policy" and "missing [policy] table" in str(empty.value)
    with pytest.raises(PolicyFileError, match="unknown policy syntax 'json'"):
        loads_policy("{}", syntax="json")


@pytest.mark.parametrize(
    ("text", "syntax", "field"),
    [
        ('[policy]\nname = "p"\nversion = 1.10\n', "toml", "policy.version"),
        ('[policy]\nname = "p"\nversion = 7\n', "toml", "policy.version"),
        ("policy: {name: p, version: 1.10}\n", "yaml", "policy.version"),
        ('[policy]\nname = 42\nversion = "1"\n', "toml", "policy.name"),
        ("policy: {name: 42, version: '1'}\n", "yaml", "policy.name"),
    ],
)
def test_numeric_policy_name_or_version_is_refused_not_coerced(text, syntax, field):
    """version = 1.10 would be recorded as "1.1": a number is a PolicyFileError asking to quote it."""
    with pytest.raises(PolicyFileError) as info:
        loads_policy(text, source=f"p.{syntax}", syntax=syntax)
    assert info.value.field == field
    assert "must be a string" in str(info.value) and "quote it" in str(info.value)
    quoted = loads_policy('[policy]\nname = "p"\nversion = "1.10"\n')
    assert quoted.version == "1.10"
