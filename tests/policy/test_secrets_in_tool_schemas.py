"""Secrets in tool schemas never reach the payload or the stored manifest.

The schemas are BFCL's real memory-suite function docs (``multi_turn_func_doc/memory_kv.json``) in OpenAI
``tools`` form; one of them gets credentials planted in its description, an enum and a default, as a
careless tool author might leave them. The tokens are the documented example formats, not live keys.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger import Ledger
from ctxledger.records import SkillState

GITHUB = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
AWS = "AKIAIOSFODNN7EXAMPLE"
OPENAI = "sk-proj-" + "a1B2" * 10
SECRETS = (GITHUB, AWS, OPENAI)
BUDGET: dict[str, Any] = {"window_tokens": 16_000, "output_tokens": 1_000, "margin_tokens": 200}


@pytest.fixture(scope="module")
def schemas(data_dir: Path) -> list[dict[str, Any]]:
    """Real function docs as OpenAI tools; the first one carries three planted secrets."""
    path = data_dir / "bfcl-memory/multi_turn_func_doc/memory_kv.json"
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    tools = [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d["description"],
                "parameters": {**d["parameters"], "type": "object"},
            },
        }
        for d in docs
    ]
    leaky = tools[0]["function"]
    leaky["description"] += f"\nUse header Authorization: token {GITHUB} when calling the backing store."
    props = leaky["parameters"]["properties"]
    props["region"] = {"type": "string", "enum": ["eu-west-1", f"aws_access_key_id={AWS}"]}
    props["api_key"] = {"type": "string", "default": f"api_key = {OPENAI}"}
    return tools


def _ledger() -> tuple[Ledger, str]:
    ledger = Ledger.open("memory://")
    conv = "kv"
    ledger.import_messages(
        [
            {"role": "system", "content": "You keep notes for the user."},
            {"role": "user", "content": "Remember that my locker code is on the blue card."},
        ],
        conversation_id=conv,
    )
    return ledger, conv


def _check(ledger: Ledger, asm: Any, schemas: list[dict[str, Any]]) -> None:
    sent = json.dumps(asm.payload)
    stored = json.dumps(ledger.get_assembly(asm.id), default=str)
    for secret in SECRETS:
        assert secret not in sent and secret not in stored
    leaky = next(t for t in asm.payload["tools"] if t["function"]["name"] == schemas[0]["function"]["name"])
    fn = leaky["function"]
    assert "withheld by policy: Authorization Header, GitHub Token on line" in fn["description"]
    assert fn["description"].startswith(schemas[0]["function"]["description"].splitlines()[0])  # the rest is kept
    assert fn["parameters"]["properties"]["region"]["enum"][0] == "eu-west-1"
    assert "withheld by policy" in fn["parameters"]["properties"]["region"]["enum"][1]
    assert "withheld by policy" in fn["parameters"]["properties"]["api_key"]["default"]
    assert asm.payload["tools"][1:] == schemas[1:]  # schemas without secrets are untouched
    marks = [m for m in ledger.get_assembly(asm.id)["marks"] if m["ref"].startswith("tools/")]
    assert [(m["ref"], m["stage"], m["reason"]) for m in marks] == [
        (f"tools/{schemas[0]['function']['name']}", "secrets", "secret_redacted")
    ]
    detail = marks[0]["detail"]
    assert "function.description" in detail and "function.parameters.properties.region.enum[1]" in detail
    assert "function.parameters.properties.api_key.default" in detail and "GitHub Token" in detail


def test_secrets_in_request_tools_are_redacted_and_never_stored(schemas: list[dict[str, Any]]) -> None:
    ledger, conv = _ledger()
    original = copy.deepcopy(schemas)
    asm = ledger.assemble(conv, tools=tuple(schemas), **BUDGET)
    _check(ledger, asm, schemas)
    assert schemas == original  # the caller's schemas are not changed in place
    # the budget charged the redacted schemas the payload carries
    assert asm.input_tokens == ledger.get_assembly(asm.id)["tokens"]["estimated_input"]


def test_secrets_in_skill_state_schemas_are_redacted_and_never_stored(schemas: list[dict[str, Any]]) -> None:
    ledger, conv = _ledger()
    env = {"tenant_id": "default", "conversation_id": conv, "branch_id": f"{conv}/main"}
    ledger.append(
        [SkillState(id=f"{conv}/skills", enabled_tools=("archival_memory_add",), tool_schemas=tuple(schemas), **env)]
    )
    asm = ledger.assemble(conv, **BUDGET)
    _check(ledger, asm, schemas)


def test_clean_schemas_are_sent_unchanged(schemas: list[dict[str, Any]]) -> None:
    ledger, conv = _ledger()
    asm = ledger.assemble(conv, tools=tuple(schemas[1:]), **BUDGET)
    assert asm.payload["tools"] == schemas[1:]
    assert not [m for m in ledger.get_assembly(asm.id)["marks"] if m["ref"].startswith("tools/")]


SINGLE_LINE = sorted(set(FORMATS) - MULTILINE)


@settings(max_examples=15, deadline=None)
@given(fmt=st.sampled_from(SINGLE_LINE), seed=st.integers(0, 10_000))
def test_a_tool_named_by_a_secret_is_named_by_its_withheld_name_in_the_manifest(fmt: str, seed: int) -> None:
    """Decisions, marks, the tools block and the request's schemas all name the tool as the redacted schema does."""
    secret, fingerprints = draw(fmt, seed)
    ledger, conv = _ledger()
    schema = {"type": "function", "function": {"name": secret, "parameters": {"type": "object", "properties": {}}}}
    asm = ledger.assemble(conv, tools=(schema,), **BUDGET)
    stored = ledger.get_assembly(asm.id)
    for text in (json.dumps(asm.payload), json.dumps(stored, default=str), json.dumps(asm.manifest, default=str)):
        assert not any(f in text for f in fingerprints)
    (name,) = stored["tools"]["exposed"]
    assert name.startswith("[withheld by policy:")
    assert stored["request"]["tools"][0]["function"]["name"] == name
    refs = {e["ref"] for e in [*stored["decisions"], *stored["marks"]] if e["ref"].startswith("tools/")}
    assert refs == {f"tools/{name}"}


@settings(max_examples=15, deadline=None)
@given(
    fmt=st.sampled_from(SINGLE_LINE),
    seed=st.integers(0, 10_000),
    api=st.sampled_from(["openai-chat", "anthropic-messages"]),
)
def test_a_property_named_by_a_secret_never_reaches_the_payload_or_the_manifest(fmt: str, seed: int, api: str) -> None:
    """A schema key (a property name) is scanned like a value: sent under a provider-valid withheld name, two such
    keys kept apart, and the mark's path shows the key redacted."""
    secret, fingerprints = draw(fmt, seed)
    other, more = draw(fmt, seed + 1)
    fingerprints = [*fingerprints, *more]
    ledger, conv = _ledger()
    props = {secret: {"type": "string"}, other: {"type": "integer"}, "city": {"type": "string"}}
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": props}}}
    asm = ledger.assemble(conv, tools=(schema,), api=api, trace="full", **BUDGET)
    stored = ledger.get_assembly(asm.id)
    for text in (json.dumps(asm.payload), json.dumps(stored, default=str), json.dumps(asm.manifest, default=str)):
        assert not any(f in text for f in fingerprints)
    (tool,) = asm.payload["tools"]
    sent = (tool.get("input_schema") or tool["function"]["parameters"])["properties"]
    assert sent["city"] == {"type": "string"} and len(sent) == len(props)
    assert all(re.fullmatch(r"[a-zA-Z0-9_.-]{1,64}", key) for key in sent)
    marks = [m for m in stored["marks"] if m["ref"] == "tools/lookup"]
    assert marks and "function.parameters.properties.[withheld by policy:" in marks[0]["detail"]
