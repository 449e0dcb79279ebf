"""Passwords in URLs (``scheme://user:password@host``) are secrets wherever the secrets stage looks.

New-user report 3 item 5: detect-secrets' Basic Auth rule misses a password with ``!`` (and ``#``, ``@`` …),
so ``postgresql://admin:S3cr3tPassw0rd!@db.internal:5432/prod`` reached both payload formats.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ctxledger import Ledger
from ctxledger.policy.secrets import SecretScanner

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
MODELS = {"openai-chat": "gpt-4o", "anthropic-messages": "claude-sonnet-4-5"}

URLS = {
    "S3cr3tPassw0rd!": "postgresql://admin:S3cr3tPassw0rd!@db.internal:5432/prod",
    "Rt#9x@Lq%21": "mysql://app_rw:Rt#9x@Lq%21@mysql-primary.prod:3306/orders",
    "Qm7!redisPw": "redis://:Qm7!redisPw@cache-01.internal:6379/0",
    "gu3st!@#pw": "amqp://svc-billing:gu3st!@#pw@rabbitmq.internal:5672/%2Fbilling",
    "Xk9$tr0ng%40": "https://deploy-bot:Xk9$tr0ng%40@artifacts.example.org/repo/releases",
}
"""password → a URL carrying it (real-looking DSNs of the kinds agents print: env dumps, configs, logs)."""

NOT_CREDENTIALS = (
    "see https://example.com/a@b for details",
    "ssh into deploy@bastion.internal and run the job",
    "git clone ssh://git@github.com/acme/api.git",
    "metrics at https://grafana.internal:3000/d/abc@latest",
    "store URL postgresql+psycopg://user@host/db (no password)",
    '{"homepage":"https://acme.dev","contact":"ops:oncall@acme.dev"}',
)


@pytest.mark.parametrize("password", list(URLS))
def test_a_url_password_is_found_whatever_its_characters(password):
    """Each URL's line is a finding of type ``URL Credentials``, inside JSON and prose alike."""
    scanner = SecretScanner()
    url = URLS[password]
    for text in (url, f"DATABASE_URL={url}", json.dumps({"dsn": url}), f"connecting to {url} ..."):
        types = {f.type for f in scanner.scan(text)}
        assert "URL Credentials" in types, text


@pytest.mark.parametrize("text", NOT_CREDENTIALS)
def test_urls_and_addresses_without_a_password_are_not_secrets(text):
    """An ``@`` in a path, a user without a password, or a port before a path is not a credential."""
    assert SecretScanner().scan(text) == ()


@pytest.mark.parametrize("api", list(MODELS))
def test_url_passwords_reach_no_payload_and_no_manifest(api):
    """In a message, tool arguments, a tool output, a memory, a tool schema and a speaker label: all withheld."""
    (p_msg, p_args, p_out, p_mem, p_schema) = list(URLS)
    ledger = Ledger.open("memory://")
    r = ledger.recorder("ops", clock=T0)
    schema = {
        "type": "function",
        "function": {
            "name": "query_db",
            "description": f"Run SQL. Connects with {URLS[p_schema]} by default.",
            "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}},
        },
    }
    r.skills(["sql"], schemas=[schema])
    r.system("You operate the billing service.")
    r.user(f"my db is {URLS[p_msg]}")
    ex = r.tool_call("connect", {"dsn": URLS[p_args]}, "connected")
    env = r.tool_call("env", {}, f"PATH=/usr/bin\nAMQP_URL={URLS[p_out]}\nLOG_LEVEL=info\n")
    r.memory(f"The broker is reachable at {URLS[p_mem]}.", sources=[env])
    r.assistant("noted", speaker="bot:" + URLS[p_msg])
    r.user("Is the database reachable?")
    asm = ledger.assemble("ops", api=api, model=MODELS[api], window_tokens=8000, output_tokens=300)
    sent = json.dumps(asm.payload)
    stored = json.dumps(ledger.get_assembly(asm.id), default=str)
    for password in URLS:
        assert password not in sent, password
        assert password not in stored, password
    omitted = {o["ref"] for o in asm.manifest["omitted"] if o["reason"] == "secret"}
    marks = {(m["ref"], m["reason"]) for m in asm.manifest["marks"]}
    assert {"ops/2", ex.message, ex.artifact, env.artifact, "ops/9"} <= omitted  # optional: left out
    assert ("tools/query_db", "secret_redacted") in marks and ("ops/10", "speaker_withheld") in marks
    assert "URL Credentials" in json.dumps(asm.manifest["marks"])
