"""Inspector sessions are server-side (a random token, its sha256 stored), and /inspect errors are HTML for browsers."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from service_helpers import Served, free_port, serve_process, wait_until_up
from sqlalchemy import create_engine, text

from ctxledger.ledger import Ledger
from ctxledger.service.auth import SESSION_COOKIE
from ctxledger.store.keys import create_key, find_key, revoke_key
from ctxledger.store.sessions import end_session, open_session, session_tenant, sessions_of_key, token_hash

CONV = "tau-task2-trial1"
HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def _login(client: TestClient, key: str) -> str:
    answer = client.post("/inspect/login", data={"key": key}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return answer.cookies[SESSION_COOKIE]


def test_only_the_tokens_hash_is_stored_and_it_ends_by_expiry_logout_or_revocation(served: Served) -> None:
    with Ledger.open(served.url) as ledger:
        store = ledger.store
        key, row = create_key(store, "acme", name="sessions")
        opened = open_session(store, key, ttl=timedelta(minutes=5))
        assert opened is not None
        token, session = opened
        assert token != key and session.tenant_id == "acme" and session.key_id == row.id
        with store.engine.connect() as conn:
            dump = " ".join(str(v) for r in conn.execute(text("SELECT * FROM inspector_sessions")) for v in r)
        assert token_hash(token) in dump and token not in dump and key not in dump
        assert session_tenant(store, token) == "acme"
        assert session_tenant(store, token, now=datetime.now(UTC) + timedelta(minutes=6)) is None
        assert session_tenant(store, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
        assert session_tenant(store, key) is None  # a key is no session token
        other = open_session(store, key)
        assert other is not None and end_session(store, other[0]) and session_tenant(store, other[0]) is None
        revoke_key(store, row.id)
        assert session_tenant(store, token) is None and sessions_of_key(store, row.id) == []
        assert find_key(store, key) is None and open_session(store, key) is None


def test_the_cookie_is_httponly_strict_and_secure_over_https(served: Served) -> None:
    client = TestClient(served.client.app, base_url="https://testserver")  # no lifespan: the app stays open
    answer = client.post("/inspect/login", data={"key": served.keys["acme"]}, follow_redirects=False)
    header = answer.headers["set-cookie"]
    assert header.startswith(f"{SESSION_COOKIE}=ctxs_") and served.keys["acme"] not in header
    assert "HttpOnly" in header and "SameSite=strict" in header and "Secure" in header
    plain = served.client.post("/inspect/login", data={"key": served.keys["acme"]}, follow_redirects=False)
    assert "Secure" not in plain.headers["set-cookie"]


def test_a_revoked_keys_session_is_refused_by_the_pages_and_the_api(served: Served) -> None:
    with Ledger.open(served.url) as ledger:
        key, row = create_key(ledger.store, "acme", name="revoked-later")
    client = TestClient(served.client.app)  # no lifespan: the app stays open
    token = _login(client, key)
    client.cookies.set(SESSION_COOKIE, token)
    assert client.get("/inspect").status_code == 200
    assert client.get("/v1/conversations").status_code == 200
    with Ledger.open(served.url) as ledger:
        revoke_key(ledger.store, row.id)
    assert client.get("/inspect").status_code == 401
    assert client.get("/v1/conversations").status_code == 401


def test_inspect_errors_are_html_for_a_browser_and_problem_json_otherwise(served: Served) -> None:
    acme, globex = served.auth("acme"), served.auth("globex")
    aid = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=acme, json={}).json()["assembly_id"]
    pages = []
    for path in (f"/inspect/assemblies/{aid}", "/inspect/assemblies/asm_missing", f"/inspect/conversations/{CONV}"):
        page = served.client.get(path, headers={**globex, **HTML})
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert aid not in page.text and "acme" not in page.text
        pages.append(page.text)
        api = served.client.get(path, headers=globex)
        assert api.status_code == 404 and api.headers["content-type"].startswith("application/problem+json")
        assert api.json()["type"].endswith("/not-found")
    assert pages[0] == pages[1].replace("asm_missing", aid)  # the same page whether the id is another's or nobody's
    assert (
        served.client.get("/inspect/no-such-page", headers={**acme, **HTML})
        .headers["content-type"]
        .startswith("text/html")
    )
    assert (
        served.client.get("/v1/assemblies/asm_missing", headers={**acme, **HTML})
        .headers["content-type"]
        .startswith("application/problem+json")
    )  # the API answers problem+json whatever the Accept


POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="needs CTXLEDGER_TEST_POSTGRES_URL")
def test_a_session_opened_on_one_process_works_on_another_until_logout(store_url: str, tmp_path: Path) -> None:
    with Ledger.open(store_url) as ledger:
        key = create_key(ledger.store, "acme")[0]
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"serve-{p}.log" for p in ports]
    procs = [serve_process(store_url, p, log) for p, log in zip(ports, logs, strict=True)]
    try:
        one, two = (f"http://127.0.0.1:{p}" for p in ports)
        for base, proc, log in zip((one, two), procs, logs, strict=True):
            wait_until_up(base, proc, log)
        login = httpx.post(f"{one}/inspect/login", data={"key": key})
        token = login.cookies[SESSION_COOKIE]
        assert token != key
        assert httpx.get(f"{two}/inspect", cookies={SESSION_COOKIE: token}).status_code == 200
        assert httpx.post(f"{two}/inspect/logout", cookies={SESSION_COOKIE: token}).status_code == 303
        assert httpx.get(f"{one}/inspect", cookies={SESSION_COOKIE: token}).status_code == 401
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(20)
    engine = create_engine(store_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM inspector_sessions")).scalar() == 0
    engine.dispose()
