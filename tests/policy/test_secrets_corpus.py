"""Every secret format, by every channel, is absent from the payload and the stored manifest of both providers.

Seed 000 (a credential stays with the server that uses it); seed 004 §8 R3. The corpus is generated
(:mod:`secret_corpus`): each format's value is drawn fresh per seed, and each channel places it where a
real agent's history would carry it. Both the default policy (optional records holding a secret are
omitted, required ones redacted) and ``action = "redact"`` (every record stays, its secret lines are
withheld) are checked, so the test exercises redaction, not only omission.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.policy.default import default_policy
from ctxledger.policy.stages.secrets import SecretsStage

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
MODELS = {"openai-chat": "gpt-4o", "anthropic-messages": "claude-sonnet-4-5"}


def _schema(description: str, name: str = "lookup") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": description}}},
        },
    }


def _tool_output(r: Any, text: str) -> dict[str, Any]:
    r.user("Go ahead.")
    r.tool_call("read_file", {"path": "config"}, output=text)
    r.user("What does it say?")
    return {}


def _tool_output_json(r: Any, text: str) -> dict[str, Any]:
    r.user("Go ahead.")
    r.tool_call("read_log", {"n": 2}, output=json.dumps({"log": "line1\n" + text, "status": "ok"}))
    r.user("Summarise the log.")
    return {}


def _double_json(r: Any, text: str) -> dict[str, Any]:
    r.user("Go ahead.")
    inner = json.dumps({"stdout": "started\n" + text})
    r.tool_call("run", {"cmd": "env"}, output=json.dumps({"result": inner}))
    r.user("Anything odd?")
    return {}


def _failed_output(r: Any, text: str) -> dict[str, Any]:
    r.user("Go ahead.")
    r.tool_call("deploy", {"env": "prod"}, output="Traceback: connection refused\n" + text, status="failed")
    r.user("Why did it fail?")
    return {}


def _arguments(r: Any, text: str) -> dict[str, Any]:
    r.user("Go ahead.")
    r.tool_call("write_config", {"content": text}, output="written")
    r.user("Done?")
    return {}


def _latest_user_turn(r: Any, text: str) -> dict[str, Any]:
    r.user("Use these settings:\n" + text)
    return {}


def _older_user_turn(r: Any, text: str) -> dict[str, Any]:
    r.user("Here is my config:\n" + text)
    r.assistant("Noted.")
    r.user("Go on.")
    return {}


def _system_prompt(r: Any, text: str) -> dict[str, Any]:
    r.user("hello")
    r.system("You deploy services.\n" + text)
    r.user("Deploy.")
    return {}


def _tool_schema(r: Any, text: str) -> dict[str, Any]:
    r.user("Look it up.")
    return {"tools": [_schema("Look up a record.\n" + text)]}


def _skill_schema(r: Any, text: str) -> dict[str, Any]:
    r.skills(["lookup"], schemas=[_schema("Look up a record.\n" + text)])
    r.user("Look it up.")
    return {}


def _memory(r: Any, text: str) -> dict[str, Any]:
    r.memory("The service config is:\n" + text)
    r.user("What is the config?")
    return {}


def _checkpoint(r: Any, text: str) -> dict[str, Any]:
    r.user("Resume the run.")
    r.checkpoint("run-1", state={"step": 3, "log": "connected\n" + text})
    return {}


def _query(r: Any, text: str) -> dict[str, Any]:
    r.user("Search.")
    return {"query": "find " + text}


def _source_version(r: Any, text: str) -> dict[str, Any]:
    r.user("Go ahead.")
    r.tool_call("read_file", {"path": "a"}, output="plain output", source_version="repo@" + text)
    r.memory("A fact.", source_version="repo@" + text)
    r.user("What changed?")
    return {}


def _speaker(r: Any, text: str) -> dict[str, Any]:
    r.user("hi", speaker=text)
    r.user("ok")
    return {}


CHANNELS: dict[str, Callable[[Any, str], dict[str, Any]]] = {
    "tool_output": _tool_output,
    "tool_output_json": _tool_output_json,
    "tool_output_double_json": _double_json,
    "failed_output": _failed_output,
    "arguments": _arguments,
    "latest_user_turn": _latest_user_turn,
    "older_user_turn": _older_user_turn,
    "system_prompt": _system_prompt,
    "tool_schema": _tool_schema,
    "skill_schema": _skill_schema,
    "memory": _memory,
    "checkpoint": _checkpoint,
    "query": _query,
}
NAME_CHANNELS: dict[str, Callable[[Any, str], dict[str, Any]]] = {
    "source_version": _source_version,
    "speaker": _speaker,
}
"""Channels that carry a one-line name or version (single-line formats only)."""


WRITERS: dict[str, Callable[[Any, str], Any]] = {
    "participant_name": lambda r, text: r.participant(text),
    "record_name": lambda r, text: r.user("a note", name=text),
    "tool_name": lambda r, text: r.tool_call(text, {"q": 1}, output="result"),
}
"""Writes whose identifiers (record id, participant name, tool name) would hold the secret."""


def _redact_policy():
    policy = default_policy()
    stages = tuple(SecretsStage(action="redact") if s.name == "secrets" else s for s in policy.stages)
    return dataclasses.replace(policy, stages=stages)


POLICIES = {"omit": default_policy, "redact": _redact_policy}


def _check(channel: Callable[[Any, str], dict[str, Any]], fmt: str, seed: int) -> None:
    text, fingerprints = draw(fmt, seed)
    for mode, make_policy in POLICIES.items():
        ledger = Ledger.open("memory://", policy=make_policy())
        for api, model in MODELS.items():
            cid = f"{api}-{mode}"
            r = ledger.recorder(cid, clock=T0)
            r.system("Be brief.")
            extra = channel(r, text)
            asm = ledger.assemble(cid, api=api, model=model, window_tokens=16_000, output_tokens=500, now=T0, **extra)
            payload = json.dumps(asm.payload, ensure_ascii=False)
            stored = json.dumps(ledger.get_assembly(asm.id), ensure_ascii=False)
            for fp in fingerprints:
                assert fp not in payload, f"{fmt} (seed {seed}) reached the {api} payload under {mode}"
                assert fp not in stored, f"{fmt} (seed {seed}) reached the stored {api} manifest under {mode}"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_no_secret_format_reaches_a_payload_or_manifest_by_any_channel(channel, fmt):
    _check(CHANNELS[channel], fmt, seed=zlib.crc32(f"{channel}:{fmt}".encode()) % 1000)


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - MULTILINE))
@pytest.mark.parametrize("channel", ["participant_name", "record_name", "tool_name"])
def test_an_id_or_participant_name_holding_a_secret_is_refused_before_anything_is_written(channel, fmt):
    """Ids and participant names are the refs every manifest stores, so they are refused at write time."""
    text, fingerprints = draw(fmt, zlib.crc32(f"{channel}:{fmt}".encode()) % 1000)
    ledger = Ledger.open("memory://")
    r = ledger.recorder("c", clock=T0)
    r.system("Be brief.")
    head = ledger.store.head_seq("default", "c")
    with pytest.raises(InputError) as caught:
        WRITERS[channel](r, text)
    argument = {"participant_name": "name", "record_name": "name", "tool_name": "tool"}[channel]
    assert caught.value.field == argument and "holds a secret" in str(caught.value)  # the argument passed
    assert all(fp not in str(caught.value) for fp in fingerprints)
    assert ledger.store.head_seq("default", "c") == head


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - MULTILINE))
@pytest.mark.parametrize("channel", sorted(NAME_CHANNELS))
def test_no_secret_in_a_name_or_version_reaches_a_payload_or_manifest(channel, fmt):
    _check(NAME_CHANNELS[channel], fmt, seed=zlib.crc32(f"{channel}:{fmt}".encode()) % 1000)
