"""A JSON body that parses as JSON text but is beyond what can be read (nested too deeply, an integer of more
than 4,300 digits) is a 422 saying so, not a claim that the body is not UTF-8."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import Served

from ctxledger.errors import ConfigurationError
from ctxledger.ledger import Ledger
from ctxledger.service import create_app
from ctxledger.store.keys import create_key


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"window_tokens": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than"),
        ('{"window_tokens": ' + "9" * 5000 + "}", "digits"),
    ],
)
def test_a_body_beyond_the_reading_limits_says_which_limit(served: Served, body: str, words: str) -> None:
    answer = served.client.post(
        "/v1/conversations/any/assemble",
        headers={**served.auth("acme"), "content-type": "application/json"},
        content=body.encode("utf-8"),
    )
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["field"] == "body", problem
    assert words in problem["detail"] and "UTF-8" not in problem["detail"], problem


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A service whose bodies are bounded at :data:`LIMIT` bytes, and the headers of a key."""
    url = f"sqlite:///{tmp_path_factory.mktemp('limit') / 's.db'}"
    with Ledger.open(url) as ledger:
        key = create_key(ledger.store, "acme")[0]
    with TestClient(create_app(url, max_body_bytes=LIMIT)) as client:
        yield client, {"Authorization": f"Bearer {key}", "content-type": "application/json"}


LIMIT = 4_096


def _message_body(size: int) -> bytes:
    """A JSON append body of exactly ``size`` bytes (``size`` >= 64)."""
    head, tail = b'{"messages": [{"role": "user", "content": "', b'"}]}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(64, 3 * LIMIT), chunked=st.booleans())
def test_a_body_over_the_bound_is_413_whether_or_not_its_length_is_declared(
    small: tuple[TestClient, dict[str, str]], size: int, chunked: bool
) -> None:
    client, headers = small
    body = _message_body(size)
    content = iter([body[i : i + 1000] for i in range(0, len(body), 1000)]) if chunked else body
    answer = client.post("/v1/conversations/c-limit/messages", headers=headers, content=content)
    if size > LIMIT:
        assert answer.status_code == 413, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert f"{LIMIT:,} bytes" in answer.json()["detail"]
    else:
        assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "32"])
def test_a_bound_that_is_no_positive_number_of_bytes_is_refused(bad: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="max_body_bytes"):
        create_app(f"sqlite:///{tmp_path / 's.db'}", max_body_bytes=bad)  # type: ignore[arg-type]
