"""Secrets named in an error are withheld wherever the error is shown: CLI, HTTP problem, server log.

An error names the value at fault; when that value is a secret (a role, call id or record id that holds a
token), the CLI's ``error:`` line, the service's problem+json ``detail`` and ``errors`` and the server's access
log must not carry it. Secrets are generated from the secret corpus's single-line formats.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import Served
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy"))
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger.cli import app
from ctxledger.policy.message_redaction import redact_message
from ctxledger.policy.secrets import default_scanner
from ctxledger.service.access_log import WithholdSecrets

SINGLE_LINE = sorted(set(FORMATS) - MULTILINE)
secrets = st.builds(draw, st.sampled_from(SINGLE_LINE), st.integers(0, 10_000))


def _absent(fingerprints: list[str], text: str) -> bool:
    return all(f[-12:] not in text and f[:16] not in text for f in fingerprints)


@settings(max_examples=40, deadline=None)
@given(secret=secrets, before=st.sampled_from(["unknown role", "record", "call id"]), after=st.text(max_size=30))
def test_a_quoted_secret_is_withheld_and_the_sentence_kept(secret, before: str, after: str) -> None:
    value, fingerprints = secret
    after = after.replace("'", "").replace('"', "").replace("\n", " ")
    message = f"{before} {value!r} was refused; {after}"
    out = redact_message(message)
    assert _absent(fingerprints, out) and not default_scanner().scan(out)
    if "[withheld by policy:" in out and "on line" not in out:  # the quoted value alone was withheld
        assert out.startswith(f"{before} [withheld by policy:") and out.endswith(f"was refused; {after}")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=secrets, where=st.sampled_from(["role", "tool_call_id"]))
def test_the_cli_error_line_withholds_a_secret(tmp_path_factory, secret, where: str) -> None:
    value, fingerprints = secret
    messages: list[dict[str, object]] = [{"role": "user", "content": "hi"}]
    if where == "role":
        messages.append({"role": value, "content": "x"})
    else:
        messages.append({"role": "tool", "tool_call_id": value, "content": "x"})
    folder = tmp_path_factory.mktemp("err")
    source = folder / "bad.json"
    source.write_text(json.dumps(messages))
    result = CliRunner().invoke(app, ["--db", f"sqlite:///{folder / 'r.db'}", "import", str(source)])
    assert result.exit_code != 0
    assert "error" in result.stderr and _absent(fingerprints, result.stdout + result.stderr)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=secrets)
def test_a_not_found_problem_withholds_a_secret_id(served: Served, secret) -> None:
    value, fingerprints = secret
    answer = served.client.get(f"/v1/assemblies/{value}", headers=served.auth("acme"))
    assert answer.status_code in (404, 422)
    assert _absent(fingerprints, answer.text)


@settings(max_examples=20, deadline=None)
@given(secret=secrets)
def test_the_access_log_withholds_a_secret_in_the_path(secret) -> None:
    value, fingerprints = secret
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/v1/assemblies/{value}", "1.1", 404), None,
    )  # fmt: skip
    assert WithholdSecrets().filter(record)
    line = record.getMessage()
    assert _absent(fingerprints, line) and "404" in line


def test_a_secret_conversation_id_in_the_path_is_named_as_the_path_parameter(served: Served) -> None:
    value = "sk-proj-Abc123XyZ987QweRty456UioP0asdfGhjkLzxcvBnm1234"
    body = {"format": "openai-chat", "messages": [{"role": "user", "content": "hi"}]}
    answer = served.client.post(f"/v1/conversations/{value}/messages", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem.get("field") == "conversation_id" and problem.get("index") is None, problem
    assert value not in answer.text


WORDS = sorted(f for f in SINGLE_LINE if not any(c in draw(f, 0)[0] for c in " '\""))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(WORDS), seed=st.integers(0, 10_000))
def test_an_unknown_body_key_that_is_a_secret_is_withheld_from_the_field_path(served: Served, fmt, seed) -> None:
    value, fingerprints = draw(fmt, seed)
    answer = served.client.post(
        "/v1/conversations/c/assemble", json={"window_tokens": 8000, value: 1}, headers=served.auth("acme")
    )
    assert answer.status_code == 422 and _absent(fingerprints, answer.text)
    problem = answer.json()
    assert problem["field"].startswith("body.[withheld by policy: ")
    assert problem["errors"][0]["field"] == problem["field"]
    assert problem["detail"].startswith(problem["field"] + ":")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from([f for f in WORDS if "/" not in draw(f, 0)[0]]), seed=st.integers(0, 10_000))
def test_the_cli_error_line_withholds_only_the_secret_in_a_path(tmp_path_factory, fmt, seed) -> None:
    value, fingerprints = draw(fmt, seed)  # a file name (a path would fold a URL's "//")
    folder = tmp_path_factory.mktemp("err")
    missing = folder / "nope" / f"{value}.json"
    result = CliRunner().invoke(app, ["--db", f"sqlite:///{folder / 'r.db'}", "import", str(missing)])
    assert result.exit_code != 0 and _absent(fingerprints, result.stdout + result.stderr)
    line = " ".join(result.stderr.split())
    assert f"{folder}/nope/[withheld by policy:" in line and "no such file" in line
