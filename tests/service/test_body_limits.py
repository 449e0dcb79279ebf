"""A JSON body that parses as JSON text but is beyond what can be read (nested too deeply, an integer of more
than 4,300 digits) is a 422 saying so, not a claim that the body is not UTF-8."""

from __future__ import annotations

import pytest
from service_helpers import Served


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
