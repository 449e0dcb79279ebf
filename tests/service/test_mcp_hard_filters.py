"""Every MCP tool answers under the hard filters of an assembly for the same reader.

Histories are generated with private, audit-only, provider-scoped, restricted, side-branch and secret-holding
messages and tool results. The oracle is a real assembly for the reader (full trace, a window large enough
that no budget omission hides a filter): nothing it withholds by a hard filter may come back from
``search_history`` or ``rehydrate``, no secret ever comes back, and what it let in is found.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from ctxledger.ledger import Ledger
from ctxledger.mcp_server import build_server, search_history
from ctxledger.policy.rehydration import READABLE_OMISSIONS
from ctxledger.records import Message, ToolArtifact
from ctxledger.service.withheld import Reader

TENANT = "acme"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape: the scanner finds it
WINDOW = {"window_tokens": 200_000, "output_tokens": 1_000, "margin_tokens": 200}
_ids = itertools.count()

ENVELOPE = st.fixed_dictionaries(
    {
        "visibility": st.sampled_from(["branch", "conversation", "participant_private", "audit_only"]),
        "owner": st.sampled_from(["p1", "p2"]),
        "privacy_class": st.sampled_from(["public", "internal", "confidential", "restricted", "secret"]),
        "provider_scope": st.sampled_from([None, "google", "openai"]),
        "secret": st.booleans(),
        "side": st.booleans(),
        "tool": st.booleans(),
    }
)
READER = st.builds(
    Reader, participant_id=st.sampled_from([None, "p1"]), provider=st.sampled_from([None, "anthropic", "google"])
)


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mcpf') / 'f.db'}"


@pytest.fixture(scope="module")
def ledger(db_url: str) -> Any:
    with Ledger.open(db_url) as led:
        yield led


def _history(ledger: Ledger, items: list[dict[str, Any]]) -> str:
    """A conversation of ``items``: each a message or a tool exchange holding the word ``needle``."""
    cid = f"h{next(_ids)}"
    rec = ledger.recorder(cid, tenant_id=TENANT)
    rec.participant("p1")
    rec.participant("p2")
    rec.system("You answer questions.")
    first = rec.user("needle opening question")
    rec.branch("side", fork_after=first, parent=rec.main)
    rec.on(rec.main)
    for i, item in enumerate(items):
        env = {"visibility": item["visibility"], "privacy_class": item["privacy_class"]}
        if item["visibility"] == "participant_private":
            env["owner"] = item["owner"]
        if item["provider_scope"]:
            env["provider_scope"] = item["provider_scope"]
        if item["side"]:
            env["branch"] = "side"
        text = f"needle item{i}" + (f"\ntoken {TOKEN}" if item["secret"] else "")
        if item["tool"]:
            rec.tool_call(
                "lookup",
                {"q": f"item{i}"},
                f'{{"needle": "item{i}"}}' + (f"\n{TOKEN}" if item["secret"] else ""),
                **env,
            )
        else:
            rec.user(text, **env)
    rec.user("needle closing question")
    return cid


def _oracle(ledger: Ledger, cid: str, reader: Reader) -> tuple[dict[str, Any], set[str], set[str]]:
    """The assembly for ``reader``, the ids a hard filter withheld, and the ids it included."""
    asm = ledger.assemble(
        cid, tenant_id=TENANT, participant_id=reader.participant_id, provider=reader.provider, trace="full", **WINDOW
    )
    m = asm.manifest
    hard = {e["ref"] for e in m["omitted"] if e["reason"] not in READABLE_OMISSIONS}
    return m, hard, {e["ref"] for e in m["included"]}


async def _tools(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async with Client(server) as client:
        return [await client.call_tool(name, args) for name, args in calls]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(ENVELOPE, min_size=1, max_size=6), reader=READER)
def test_no_mcp_tool_returns_what_the_assembly_withholds(ledger: Ledger, items: list, reader: Reader) -> None:
    cid = _history(ledger, items)
    manifest, hard, included = _oracle(ledger, cid, reader)
    hits = search_history(ledger, TENANT, "needle", cid, limit=100, reader=reader)
    found = {h["ref"] for h in hits}
    assert not found & hard, (found & hard, manifest["omitted_by_reason"])
    assert all(TOKEN not in h["text"] for h in hits)
    texts = {
        r.id for r in ledger.store.records(TENANT, cid) if isinstance(r, Message) and "needle" in (r.content or "")
    }
    secretless = {
        r.id for r in ledger.store.records(TENANT, cid) if isinstance(r, Message) and TOKEN not in str(r.content)
    }
    assert (texts & included & secretless) <= found  # what the assembly let in is found
    artifacts = [r.id for r in ledger.store.records(TENANT, cid) if isinstance(r, ToolArtifact)]
    server = build_server(ledger, TENANT, reader)
    calls = [("rehydrate", {"assembly_id": manifest["id"], "ref": a}) for a in artifacts]
    calls.append(("search_history", {"query": "needle token", "conversation_id": cid, "limit": 100}))
    calls.append(("search_history", {"query": TOKEN}))
    answers = anyio.run(_tools, server, calls)
    for ref, answer in zip(artifacts, answers, strict=False):
        body = " ".join(getattr(c, "text", "") for c in answer.content)
        assert TOKEN not in body
        if ref in hard:
            assert answer.is_error and "refused" in body, (ref, body)
        else:
            assert not answer.is_error, (ref, body)
    for answer in answers[len(artifacts) :]:
        assert not answer.is_error
        assert TOKEN not in str(answer.structured_content) and TOKEN not in str(answer.content)
        assert not {h["ref"] for h in (answer.structured_content or {}).get("result", [])} & hard


def test_an_assembly_for_another_participant_does_not_open_its_private_results(ledger: Ledger) -> None:
    cid = f"h{next(_ids)}"
    rec = ledger.recorder(cid, tenant_id=TENANT)
    rec.participant("p1")
    rec.user("needle question")
    private = rec.tool_call(
        "lookup", {"q": "x"}, '{"needle": "private to p1"}', visibility="participant_private", owner="p1"
    )
    note = rec.assistant("needle note p1 keeps", visibility="participant_private", owner="p1")
    rec.user("needle follow-up")
    aid = ledger.assemble(cid, tenant_id=TENANT, participant_id="p1", **WINDOW).id
    assert private.artifact in {e["ref"] for e in ledger.get_assembly(aid, tenant_id=TENANT)["included"]}
    for reader, opened in ((Reader("p1"), True), (Reader(), False), (Reader("p1", provider="google"), True)):
        (answer,) = anyio.run(
            _tools, build_server(ledger, TENANT, reader), [("rehydrate", {"assembly_id": aid, "ref": private.artifact})]
        )
        assert answer.is_error is not opened, (reader, answer.content)
        found = {h["ref"] for h in search_history(ledger, TENANT, "needle", cid, reader=reader)}
        assert (note in found) is opened


def test_the_mcp_server_needs_only_the_mcp_extra() -> None:
    """``ctxledger[mcp]`` without ``[serve]``: the tools import although FastAPI is missing."""
    code = "import sys; sys.modules['fastapi'] = None; import ctxledger.mcp_server, ctxledger.cli.mcp"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def http(ledger: Ledger, db_url: str) -> Any:
    """A test client of the service on the same store, and the auth header of a key for ``TENANT``."""
    from fastapi.testclient import TestClient

    from ctxledger.service import create_app
    from ctxledger.store.keys import create_key

    key = create_key(ledger.store, TENANT)[0]
    with TestClient(create_app(db_url)) as client:
        yield client, {"Authorization": f"Bearer {key}"}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(ENVELOPE, min_size=1, max_size=5), reader=READER)
def test_the_service_rehydrate_route_refuses_what_the_assembly_withholds(
    ledger: Ledger, http: Any, items: list, reader: Reader
) -> None:
    """``GET /v1/rehydrate/{ref}`` answers 403 exactly for the tool results a hard filter withholds from the reader
    and those whose bytes hold a secret (shown redacted in assemblies); the others' exact bytes otherwise."""
    client, auth = http
    cid = _history(ledger, items)
    _, hard, _ = _oracle(ledger, cid, reader)
    params = {k: v for k, v in (("participant", reader.participant_id), ("provider", reader.provider)) if v}
    for art in (r for r in ledger.store.records(TENANT, cid) if isinstance(r, ToolArtifact)):
        on_branch = _oracle_on(ledger, cid, reader, art.branch_id)
        answer = client.get(f"/v1/rehydrate/{art.id}", headers=auth, params=params)
        assert TOKEN not in answer.text
        holds_secret = TOKEN.encode() in ledger.rehydrate(art.id, tenant_id=TENANT)
        if art.id in on_branch or holds_secret:
            assert answer.status_code == 403 and "refused" in answer.text, (art.id, answer.text)
        else:
            assert answer.status_code == 200, (art.id, answer.text)
            assert answer.content == ledger.rehydrate(art.id, tenant_id=TENANT)
        if art.branch_id == ledger.store.get(TENANT, cid).branch_id:
            assert (art.id in hard) == (art.id in on_branch)


def _oracle_on(ledger: Ledger, cid: str, reader: Reader, branch_id: str) -> set[str]:
    """The ids a hard filter withholds from ``reader`` in an assembly of ``branch_id``."""
    asm = ledger.assemble(
        cid,
        tenant_id=TENANT,
        branch_id=branch_id,
        participant_id=reader.participant_id,
        provider=reader.provider,
        trace="full",
        **WINDOW,
    )
    return {e["ref"] for e in asm.manifest["omitted"] if e["reason"] not in READABLE_OMISSIONS}
