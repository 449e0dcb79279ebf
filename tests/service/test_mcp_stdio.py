"""``ctxledger mcp`` over stdio with the official MCP client: read-only tools, tenant fixed by the key."""

from __future__ import annotations

import json
import os
import sys
from importlib.resources import as_file, files
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from ctxledger.ledger import Ledger
from ctxledger.store.keys import create_key

CONV = "tau-task2-trial1"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str], str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'mcp.db'}"
    with Ledger.open(url) as ledger, as_file(files("ctxledger._demo").joinpath("tau_bench_airline_task2.json")) as p:
        ledger.import_file(p, "tau-bench", tenant_id="acme", conversation_id="tau")
        aid = ledger.assemble(CONV, tenant_id="acme", window_tokens=6000, output_tokens=1000, margin_tokens=200).id
        keys = {t: create_key(ledger.store, t)[0] for t in ("acme", "globex")}
        mail = ledger.recorder("mail", tenant_id="acme")
        mail.participant("helper")
        mail.user("summarise my inbox")
        mail.user("inbox item: the quarterly report is late", provider_scope="google")
        mail.assistant("inbox note for the helper only", visibility="participant_private", owner="helper")
    return url, keys, aid


def _call(url: str, key: str, calls: list[tuple[str, dict]], *options: str) -> tuple[list[str], list]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxledger", "--db", url, "mcp", "--key", key, *options],
        env={**os.environ, "CTXLEDGER_URL": url}, cwd=str(Path(__file__).parent),
    )  # fmt: skip

    async def run() -> tuple[list[str], list]:
        async with Client(params) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def _json(result) -> object:
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) and len(content) == 1 else content
    return json.loads(result.content[0].text)


def test_the_tools_answer_for_the_keys_tenant_only(store) -> None:
    url, keys, aid = store
    tools, (last, why, raw, found, refused) = _call(url, keys["acme"], [
        ("last_assembly", {"conversation_id": CONV}),
        ("explain", {"assembly_id": aid, "ref": "16"}),
        ("rehydrate", {"assembly_id": aid, "ref": "16"}),
        ("search_history", {"query": "reservation JG7FMM"}),
        ("rehydrate", {"assembly_id": aid, "ref": "7"}),
    ])  # fmt: skip
    assert tools == ["explain", "last_assembly", "rehydrate", "search_history"]
    assert _json(last)["assembly_id"] == aid and _json(last)["omitted_by_reason"]["budget"] > 0
    assert _json(why)["status"] == "included"
    assert '"reservation_id": "JG7FMM"' in raw.content[0].text
    assert any(h["conversation_id"] == CONV for h in _json(found))
    # record 7 was omitted for role order (a readable omission): allowed; a non-candidate is refused
    assert not refused.is_error
    _, (other, missing) = _call(url, keys["globex"], [
        ("last_assembly", {"conversation_id": CONV}), ("explain", {"assembly_id": aid, "ref": "16"}),
    ])  # fmt: skip
    assert other.is_error and missing.is_error
    assert "acme" not in other.content[0].text and "acme" not in missing.content[0].text


def test_the_reader_fixed_at_start_decides_what_search_shows(store) -> None:
    url, keys, _ = store
    query = [("search_history", {"query": "inbox", "conversation_id": "mail"})]
    found = {}
    for options in ((), ("--provider", "google", "--participant", "helper")):
        _, (answer,) = _call(url, keys["acme"], query, *options)
        found[options] = {h["text"] for h in _json(answer)}
    assert found[()] == {"summarise my inbox"}  # the default reader: openai's provider, no participant
    assert found[("--provider", "google", "--participant", "helper")] == {
        "summarise my inbox", "inbox item: the quarterly report is late", "inbox note for the helper only",
    }  # fmt: skip
