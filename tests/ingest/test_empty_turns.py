"""Histories holding turns that render to nothing import, and every later assembly drops those turns with a
manifest note instead of failing with ``ProviderContractError``, for every payload format.

The turns: an empty or blank system prompt, an assistant turn with empty content and no tool calls,
``"content": []``, blank user turns — written by the OpenAI and Anthropic importers, by the Recorder and by
``Ledger.append``, in random places among ordinary turns and tool exchanges.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger import Ledger
from ctxledger.assemble.assembler import EMPTY_TURN_NOTE
from ctxledger.cli import app
from ctxledger.records import Message, Role

APIS = (("openai-chat", "gpt-4o"), ("anthropic-messages", "claude-sonnet-4-5"), ("openai-responses", "gpt-4o"))

BLANK_TEXT = st.sampled_from(["", " ", "\n\t "])
EMPTY_CONTENT = {
    # what each source may carry for a turn with nothing in it
    "openai-user": BLANK_TEXT | st.just([]) | st.just([{"type": "text", "text": " "}]),
    "openai-assistant": BLANK_TEXT | st.none() | st.just([]) | st.just([{"type": "text", "text": ""}]),
    "openai-system": BLANK_TEXT | st.just([]) | st.just([{"type": "text", "text": "  "}]),
    "anthropic-user": BLANK_TEXT | st.just([{"type": "text", "text": " "}]),
    "anthropic-assistant": BLANK_TEXT | st.just([]) | st.just([{"type": "text", "text": "\n"}]),
    "anthropic-system": BLANK_TEXT | st.just([]) | st.just([{"type": "text", "text": " "}]),
}

STEPS = st.sampled_from(["user", "assistant", "tool", "empty_user", "empty_assistant", "empty_system"])
histories = st.lists(STEPS, min_size=1, max_size=10)


def _assemble_everywhere(ledger: Ledger, conversation_id: str, empty: int) -> None:
    """Every payload format assembles; the empty turns are left out with reason ``empty``, none is sent."""
    for api, model in APIS:
        asm = ledger.assemble(
            conversation_id, api=api, model=model, counter="chars/4", window_tokens=20_000, output_tokens=500
        )
        persisted = asm.persisted()
        assert persisted["omitted_by_reason"].get("empty", 0) == empty, (api, persisted["omitted_by_reason"])
        if empty:
            groups = [g for g in persisted["omissions"] if g["reason"] == "empty"]
            assert groups and groups[0]["stage"] == "empty_turn" and groups[0]["count"] == empty


def _openai_messages(steps: list[str], data: st.DataObject) -> tuple[list[dict], int]:
    out: list[dict] = []
    empty = 0
    for k, step in enumerate(steps):
        if step == "user":
            out.append({"role": "user", "content": f"question {k}"})
        elif step == "assistant":
            out.append({"role": "assistant", "content": f"answer {k}"})
        elif step == "tool":
            call = {"id": f"call_{k}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            text = data.draw(st.none() | st.just(""), label="text beside the call")
            out.append({"role": "assistant", "content": text, "tool_calls": [call]})
            out.append({"role": "tool", "tool_call_id": f"call_{k}", "content": json.dumps({"n": k})})
        else:
            role = step.removeprefix("empty_")
            out.append({"role": role, "content": data.draw(EMPTY_CONTENT[f"openai-{role}"], label=step)})
            empty += 1
    out.append({"role": "user", "content": "what next?"})
    return out, empty


def _anthropic_messages(steps: list[str], data: st.DataObject) -> tuple[list[dict], object, int]:
    out: list[dict] = []
    empty = 0
    system = None
    for k, step in enumerate(steps):
        if step == "user":
            out.append({"role": "user", "content": f"question {k}"})
        elif step == "assistant":
            out.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {k}"}]})
        elif step == "tool":
            use = {"type": "tool_use", "id": f"toolu_{k}", "name": "lookup", "input": {}}
            out.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": "42"}
            out.append({"role": "user", "content": [result]})
        elif step == "empty_system":
            if system is None:  # the Messages API has one system prompt, at the top
                system = data.draw(EMPTY_CONTENT["anthropic-system"], label=step)
                empty += 1
        else:
            role = step.removeprefix("empty_")
            out.append({"role": role, "content": data.draw(EMPTY_CONTENT[f"anthropic-{role}"], label=step)})
            empty += 1
    out.append({"role": "user", "content": "what next?"})
    return out, system, empty


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=histories, data=st.data())
def test_openai_import_with_empty_turns_assembles_for_every_provider(steps, data):
    messages, empty = _openai_messages(steps, data)
    with Ledger.open("memory://") as ledger:
        ledger.import_messages(messages, conversation_id="c")
        _assemble_everywhere(ledger, "c", empty)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=histories, data=st.data())
def test_anthropic_import_with_empty_turns_assembles_for_every_provider(steps, data):
    messages, system, empty = _anthropic_messages(steps, data)
    payload: dict = {"messages": messages}
    if system is not None:
        payload["system"] = system
    with Ledger.open("memory://") as ledger:
        from ctxledger.ingest import parse_anthropic, write_batch

        write_batch(ledger.store, parse_anthropic(payload, conversation_id="c"))
        _assemble_everywhere(ledger, "c", empty)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=histories, blanks=st.lists(st.sampled_from([" ", "\n", "\t "]), min_size=10, max_size=10))
def test_recorded_empty_turns_assemble_for_every_provider(steps, blanks):
    with Ledger.open("memory://") as ledger:
        rec = ledger.recorder("c", clock=datetime(2025, 1, 1, tzinfo=UTC))
        empty = 0
        for k, step in enumerate(steps):
            if step == "user":
                rec.user(f"question {k}")
            elif step == "assistant":
                rec.assistant(f"answer {k}")
            elif step == "tool":
                rec.tool_call("lookup", {"k": k}, json.dumps({"n": k}), text=None)
            else:
                getattr(rec, step.removeprefix("empty_"))(blanks[k])
                empty += 1
        rec.user("what next?")
        _assemble_everywhere(ledger, "c", empty)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    contents=st.lists(st.sampled_from([None, (), "", " ", ({"type": "text", "text": " "},)]), min_size=1, max_size=4),
    roles=st.lists(st.sampled_from([Role.ASSISTANT, Role.USER, Role.SYSTEM]), min_size=4, max_size=4),
)
def test_appended_empty_messages_assemble_for_every_provider(contents, roles):
    with Ledger.open("memory://") as ledger:
        rec = ledger.recorder("c", clock=datetime(2025, 1, 1, tzinfo=UTC))
        rec.user("first question")
        env = {"tenant_id": "default", "conversation_id": "c", "branch_id": rec.main}
        at = datetime(2025, 1, 2, tzinfo=UTC)
        ledger.append(
            [
                Message(id=f"c/empty-{k}", created_at=at, role=role, content=content, **env)
                for k, (content, role) in enumerate(zip(contents, roles, strict=False))
            ]
        )
        rec.user("what next?")
        _assemble_everywhere(ledger, "c", len(contents))


def test_an_empty_turn_is_named_in_the_manifest_and_not_sent():
    with Ledger.open("memory://") as ledger:
        ledger.import_messages(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}, {"role": "user", "content": "?"}],
            api="anthropic-messages",
            system="  ",
            conversation_id="c",
        )
        asm = ledger.assemble("c", api="anthropic-messages", model="claude-sonnet-4-5", counter="chars/4")
        assert "system" not in asm.payload
        assert [m["role"] for m in asm.payload["messages"]] == ["user"]
        assert asm.turn_refs == ["c/1", "c/3"]
        reasons = {e["ref"]: (e["reason"], e["stage"], e["detail"]) for e in asm.manifest["omitted"]}
        assert reasons["c/0"] == reasons["c/2"] == ("empty", "empty_turn", EMPTY_TURN_NOTE)


def test_a_responses_history_with_empty_items_assembles_for_every_provider():
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ""}]},
        {"type": "message", "role": "user", "content": "   "},
        {"type": "message", "role": "user", "content": "what next?"},
    ]
    with Ledger.open("memory://") as ledger:
        ledger.import_messages(items, api="openai-responses", system=" ", conversation_id="c")
        _assemble_everywhere(ledger, "c", 3)


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages"])
def test_cli_imports_a_file_with_empty_turns_and_assembles_it(tmp_path, fmt):
    if fmt == "openai-chat":
        body = {
            "messages": [
                {"role": "system", "content": ""},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None},
                {"role": "user", "content": "again"},
            ]
        }
    else:
        body = {"system": "  ", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []},
                                              {"role": "user", "content": "again"}]}  # fmt: skip
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(body))
    db = f"sqlite:///{tmp_path}/ctx.db"
    runner = CliRunner()
    imported = runner.invoke(app, ["--db", db, "import", str(path), "--format", fmt])
    assert imported.exit_code == 0, imported.output
    for api in ("openai-chat", "anthropic-messages"):
        out = tmp_path / f"{api}.json"
        result = runner.invoke(
            app, ["--db", db, "assemble", "chat", "--format", api, "--counter", "chars/4", "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        payload = json.loads(out.read_text())
        assert "system" not in payload and all(m["role"] != "system" for m in payload["messages"])
        texts = json.dumps(payload["messages"])
        assert "hi" in texts and "again" in texts
