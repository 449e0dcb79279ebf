"""Over HTTP, in the inspector and on the command line, a record written after an assembly's snapshot is answered
as ``explain`` answers it in the library: omitted at stage ``lineage``, naming its seq and the snapshot's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger

if TYPE_CHECKING:
    from service_helpers import Served

CONV = "tau-task2-trial1"


def test_every_front_door_says_a_later_record_was_written_after_the_snapshot(served: Served, tmp_path: Path) -> None:
    auth = served.auth("acme")
    body = {"window_tokens": 8000, "output_tokens": 1000, "margin_tokens": 200}
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json=body)
    assert answer.status_code == 200, answer.text
    aid = answer.json()["assembly_id"]
    with Ledger.open(served.url) as ledger:
        ref = ledger.recorder(CONV, tenant_id="acme").user("One more question, written after the assembly.")
        seq = ledger.store.get("acme", ref).seq
        snapshot = ledger.get_assembly(aid, tenant_id="acme")["snapshot_seq"]
    said = f"written at seq {seq}, after the snapshot (seq {snapshot})"
    why = served.client.get(f"/v1/assemblies/{aid}/explain/{ref}", headers=auth)
    assert why.status_code == 200, why.text
    assert (why.json()["status"], why.json()["reason"]) == ("omitted", "not_in_lineage")
    assert said in why.json()["detail"]
    login = served.client.post("/inspect/login", data={"key": served.keys["acme"]}, follow_redirects=False)
    assert login.status_code == 303, login.text
    item = served.client.get(f"/inspect/assemblies/{aid}/items/{ref}")
    assert item.status_code == 200, item.text
    assert "OMITTED" in item.text and said in item.text
    cli = CliRunner().invoke(app, ["--db", served.url, "--tenant", "acme", "explain", aid, ref])
    assert cli.exit_code == 0, cli.output
    assert said in " ".join(cli.stdout.split())
