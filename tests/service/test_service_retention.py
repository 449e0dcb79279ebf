"""``POST /v1/retain``, ``POST /v1/forget`` and ``GET /v1/retention/audit``: retention over HTTP, per tenant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import Served, serve_store

RULES = {"rules": [{"name": "raw-now", "kinds": ["tool_artifact"], "after_days": 0, "action": "redact"}]}


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Served]:
    yield from serve_store(f"sqlite:///{tmp_path / 'svc.db'}")


def test_retain_dry_run_then_run_only_touches_the_keys_tenant(fresh: Served) -> None:
    acme = fresh.auth("acme")
    dry = fresh.client.post("/v1/retain", headers=acme, json={"retention": RULES, "dry_run": True})
    assert dry.status_code == 200, dry.text
    planned = dry.json()["by_rule"]["raw-now"]["redact"]
    assert planned > 0 and fresh.client.get("/v1/retention/audit", headers=acme).json() == []
    done = fresh.client.post("/v1/retain", headers=acme, json={"retention": RULES}).json()
    assert done["by_rule"]["raw-now"]["redact"] == planned and not done["dry_run"]
    ref = next(a["ref"] for a in done["actions"] if a["kind"] == "tool_artifact")
    rows = fresh.client.get("/v1/retention/audit", headers=acme, params={"ref": ref}).json()
    assert [(r["rule"], r["action"]) for r in rows] == [("raw-now", "redact")]
    gone = fresh.client.get(f"/v1/rehydrate/{ref}", headers=acme)
    assert gone.status_code == 410 and "redacted by retention rule raw-now" in gone.json()["detail"]
    assert fresh.client.get("/v1/retention/audit", headers=fresh.auth("globex")).json() == []


def test_bad_rules_and_no_rules_are_refused_naming_the_field(fresh: Served) -> None:
    acme = fresh.auth("acme")
    bad = {"rules": [{"name": "r", "kinds": ["branch"], "action": "redact"}]}
    answer = fresh.client.post("/v1/retain", headers=acme, json={"retention": bad})
    assert answer.status_code == 422 and answer.json()["field"] == "retention.rules[0].kinds"
    none = fresh.client.post("/v1/retain", headers=acme, json={})
    assert none.status_code == 422 and none.json()["field"] == "retention"


def test_forget_a_conversation_over_http(fresh: Served) -> None:
    acme = fresh.auth("acme")
    (conv,) = [c["id"] for c in fresh.client.get("/v1/conversations", headers=acme).json()]
    other = fresh.client.post("/v1/forget", headers=fresh.auth("globex"), json={"conversation_id": conv})
    assert other.status_code == 404  # another tenant's conversation is not found
    done = fresh.client.post("/v1/forget", headers=acme, json={"conversation_id": conv})
    assert done.status_code == 200 and done.json()["by_rule"]["forget"]["delete"] > 0
    assert fresh.client.get("/v1/conversations", headers=acme).json() == []
    assert {r["rule"] for r in fresh.client.get("/v1/retention/audit", headers=acme).json()} == {"forget"}


def test_rehydrating_a_forgotten_record_answers_gone_naming_the_rule(fresh: Served) -> None:
    """A record deleted by forget is 410 Gone from the audit trail, as over the CLI; an unknown one stays 404."""
    acme = fresh.auth("acme")
    (conv,) = [c["id"] for c in fresh.client.get("/v1/conversations", headers=acme).json()]
    done = fresh.client.post("/v1/forget", headers=acme, json={"conversation_id": conv}).json()
    ref = next(a["ref"] for a in done["actions"] if a["kind"] == "tool_artifact")
    gone = fresh.client.get(f"/v1/rehydrate/{ref}", headers=acme)
    assert gone.status_code == 410 and "forget" in gone.json()["detail"]
    assert fresh.client.get("/v1/rehydrate/no-such-record", headers=acme).status_code == 404


def test_forgetting_an_unknown_participant_is_not_found_naming_it(fresh: Served) -> None:
    """An id no record of the key's tenant is or is owned by answers 404 naming the participant (another tenant's
    participant alike) and changes nothing; a participant of the tenant is forgotten."""
    from ctxledger.ledger import Ledger
    from ctxledger.records import Participant

    with Ledger.open(fresh.url) as ledger:
        (conv,) = ledger.store.conversations("acme")
        people = [r.id for r in ledger.store.records("acme", conv) if isinstance(r, Participant)]
    for key, pid in (("acme", "nobody"), ("globex", people[0])):
        for dry_run in (True, False):
            body = {"participant_id": pid, "dry_run": dry_run}
            answer = fresh.client.post("/v1/forget", headers=fresh.auth(key), json=body)
            assert answer.status_code == 404, answer.text
            assert answer.json()["detail"] == f"participant {pid!r} was not found"
    assert fresh.client.get("/v1/retention/audit", headers=fresh.auth("acme")).json() == []
    done = fresh.client.post("/v1/forget", headers=fresh.auth("acme"), json={"participant_id": people[0]})
    assert done.status_code == 200 and done.json()["by_rule"]["forget"]["delete"] > 0
