"""The inspector's rehydrate button reads the bytes its provenance shows, for a call or a memory as for a result."""

from __future__ import annotations

import re
from html import unescape

from service_helpers import Served

from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact

CONV = "tau-task2-trial1"
MEMO = "memo-rehydrate"


def _buttons(served: Served, aid: str, ref: str) -> list[str]:
    page = served.client.get(f"/inspect/assemblies/{aid}/items/{ref}", headers=served.auth("acme"))
    assert page.status_code == 200, page.text
    return [unescape(a) for a in re.findall(r'<form method="get" action="([^"]+)"><button', page.text)]


def test_every_rehydrate_button_of_a_tool_exchange_gives_the_results_bytes(served: Served) -> None:
    """A tool call's page shows its result's bytes in its provenance; its button reads those bytes, never a 422."""
    acme = served.auth("acme")
    aid = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=acme, json={}).json()["assembly_id"]
    manifest = served.client.get(f"/v1/assemblies/{aid}", headers=acme).json()
    with Ledger.open(served.url) as ledger:
        records = {r.id: r for r in ledger.store.records("acme", CONV)}
    calls = [e["ref"] for e in manifest["included"] if records[e["ref"]].kind.value == "tool_call"]
    assert calls
    for call in calls:
        (target,) = _buttons(served, aid, call)
        answer = served.client.get(target, headers=acme)
        assert answer.status_code == 200, (call, answer.text)
        (result,) = [r for r in records.values() if isinstance(r, ToolArtifact) and r.tool_call_id == call]
        with Ledger.open(served.url) as ledger:
            assert answer.content == ledger.rehydrate(result.id, tenant_id="acme")


def test_a_memorys_button_reads_its_source_artifact(served: Served) -> None:
    acme = served.auth("acme")
    with Ledger.open(served.url) as ledger:
        rec = ledger.recorder(MEMO, tenant_id="acme")
        rec.user("What did the export log say?")
        logs = rec.tool_call("logs.search", {"job": "export"}, b'{"error": "disk full on /var/export"}')
        fact = rec.memory("The export failed: disk full on /var/export.", sources=[logs])
        rec.user("Summarise the cause.")
    aid = served.client.post(f"/v1/conversations/{MEMO}/assemble", headers=acme, json={}).json()["assembly_id"]
    (target,) = _buttons(served, aid, fact)
    answer = served.client.get(target, headers=acme)
    assert answer.status_code == 200, answer.text
    assert answer.content == b'{"error": "disk full on /var/export"}'
