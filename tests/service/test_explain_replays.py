"""``explain`` over HTTP and MCP replays a summary manifest's assembly once per question, and only when needed.

An included record is answered from the stored manifest (no replay); an omitted one by one replay, whichever
form its ref takes (record id, number within the conversation, external id); a replay that is not the same
call answers ``status: "unknown"`` for a record of the conversation, as ``Ledger.explain`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client

from ctxledger.ledger import Ledger
from ctxledger.mcp_server import build_server
from ctxledger.replay_mismatch import ReplayMismatch

if TYPE_CHECKING:
    from service_helpers import Served

CONV = "tau-task2-trial1"


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The id of every manifest :meth:`Ledger.replay` is asked to replay, in any ledger of this process."""
    seen: list[str] = []
    original = Ledger.replay

    def counted(self: Ledger, manifest: Any, **kwargs: Any) -> Any:
        seen.append(manifest["id"])
        return original(self, manifest, **kwargs)

    monkeypatch.setattr(Ledger, "replay", counted)
    yield seen


def _assembly(served: Served) -> tuple[str, dict[str, Any]]:
    """A summary assembly of the demo conversation at 8,000 tokens, and its full trace (replayed once here)."""
    auth = served.auth("acme")
    body = {"window_tokens": 8000, "output_tokens": 1000, "margin_tokens": 200}
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json=body)
    assert answer.status_code == 200, answer.text
    aid = answer.json()["assembly_id"]
    full = served.client.get(f"/v1/assemblies/{aid}?full=true", headers=auth).json()
    assert full["omitted"] and full["included"]
    return aid, full


def test_the_service_replays_once_for_an_omitted_record_and_never_for_an_included_one(
    served: Served, replays: list[str]
) -> None:
    aid, full = _assembly(served)
    auth = served.auth("acme")
    omitted = full["omitted"][0]["ref"]
    included = next(e["ref"] for e in full["included"] if e["ref"].startswith(f"{CONV}/"))
    for ref in (omitted, omitted.removeprefix(f"{CONV}/")):
        replays.clear()
        why = served.client.get(f"/v1/assemblies/{aid}/explain/{ref}", headers=auth)
        assert why.status_code == 200, why.text
        assert why.json()["status"] == "omitted" and why.json()["reason"] == full["omitted"][0]["reason"]
        assert replays == [aid]
    replays.clear()
    why = served.client.get(f"/v1/assemblies/{aid}/explain/{included}", headers=auth)
    assert why.status_code == 200 and why.json()["status"] == "included"
    assert replays == []
    missing = served.client.get(f"/v1/assemblies/{aid}/explain/{CONV}/no-such-record", headers=auth)
    assert missing.status_code == 404
    assert len(replays) <= 1


def test_a_replay_that_differs_answers_unknown_for_an_omitted_record(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    aid, full = _assembly(served)
    monkeypatch.setattr(Ledger, "replay", lambda self, manifest, **kw: (None, "payload hash a then, b on replay"))
    auth = served.auth("acme")
    omitted = full["omitted"][0]["ref"]
    why = served.client.get(f"/v1/assemblies/{aid}/explain/{omitted}", headers=auth)
    assert why.status_code == 200, why.text
    assert (why.json()["status"], why.json()["reason"], why.json()["ref"]) == ("unknown", "replay_mismatch", omitted)
    included = next(e["ref"] for e in full["included"] if e["ref"].startswith(f"{CONV}/"))
    assert served.client.get(f"/v1/assemblies/{aid}/explain/{included}", headers=auth).json()["status"] == "included"


def test_the_mcp_explain_replays_once_for_an_omitted_record(served: Served, replays: list[str]) -> None:
    aid, full = _assembly(served)
    omitted = full["omitted"][0]["ref"]
    with Ledger.open(served.url) as ledger:
        server = build_server(ledger, "acme")

        async def ask() -> Any:
            async with Client(server) as client:
                return await client.call_tool("explain", {"assembly_id": aid, "ref": omitted.removeprefix(f"{CONV}/")})

        replays.clear()
        answer = anyio.run(ask)
    assert not answer.is_error, answer.content
    content = answer.structured_content or json.loads(answer.content[0].text)
    assert content["status"] == "omitted" and content["ref"] == omitted
    assert replays == [aid]


def test_the_inspector_shows_an_assembly_whose_replay_differs_and_says_why(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    aid, full = _assembly(served)
    monkeypatch.setattr(
        Ledger,
        "replay",
        lambda self, manifest, **kw: (None, ReplayMismatch("policy_hash", "policy hash a then, b now")),
    )
    client = served.client
    login = client.post("/inspect/login", data={"key": served.keys["acme"]}, follow_redirects=False)
    assert login.status_code == 303, login.text
    page = client.get(f"/inspect/assemblies/{aid}")
    assert page.status_code == 200, page.text
    assert "policy hash a then, b now" in page.text and "--policy FILE" in page.text
    omitted = full["omitted"][0]["ref"]
    item = client.get(f"/inspect/assemblies/{aid}/items/{omitted}")
    assert item.status_code == 200, item.text
    assert "UNKNOWN" in item.text and "--policy FILE" in item.text
