"""The service's assemble takes the library's fields, bounds and defaults: ``trace``, and one budget rule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.budget import DEFAULT_BUDGET, MAX_TOKENS, TOKEN_BOUNDS, Budget
from ctxledger.errors import ConfigurationError

if TYPE_CHECKING:
    from service_helpers import Served

CONV = "tau-task2-trial1"


@pytest.mark.parametrize("trace", ["summary", "full", None])
def test_trace_full_persists_every_omitted_record(served: Served, trace: str | None) -> None:
    auth = served.auth("acme")
    body: dict[str, Any] = {"window_tokens": 10_000}
    if trace is not None:
        body["trace"] = trace
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json=body)
    assert answer.status_code == 200, answer.text
    made = answer.json()
    stored = served.client.get(f"/v1/assemblies/{made['assembly_id']}", headers=auth).json()
    assert stored["trace"] == (trace or "summary")
    assert ("omitted" in stored) is (trace == "full")
    assert made["omitted"] == sum(stored["omitted_by_reason"].values()) > 0
    if trace == "full":
        assert made["omitted"] == len(stored["omitted"]) and stored["payload"] == made["payload"]


def test_an_unknown_trace_level_is_refused_naming_the_field(served: Served) -> None:
    answer = served.client.post(
        f"/v1/conversations/{CONV}/assemble", headers=served.auth("acme"), json={"trace": "verbose"}
    )
    assert answer.status_code == 422 and answer.json()["field"] == "body.trace"


def test_omitted_fields_take_the_library_defaults_as_the_cli_does(served: Served) -> None:
    auth = served.auth("acme")
    made = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={}).json()
    stored = served.client.get(f"/v1/assemblies/{made['assembly_id']}", headers=auth).json()
    asked = stored["budget"]["requested"]
    default = DEFAULT_BUDGET
    assert (asked["window"], asked["output"], asked["margin"]) == (
        default.window_tokens,
        default.output_tokens,
        default.margin_tokens,
    )
    schema = served.client.get("/openapi.json").json()["components"]["schemas"]["AssembleRequest"]["properties"]
    for name, (least, most) in TOKEN_BOUNDS.items():
        numeric = next(s for s in schema[name]["anyOf"] if s.get("type") == "integer")
        assert (numeric["minimum"], numeric["maximum"]) == (least, most)


COUNT = st.one_of(st.integers(-2, 3), st.sampled_from([0, 1, MAX_TOKENS, MAX_TOKENS + 1]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=COUNT, output=COUNT, margin=COUNT)
def test_the_service_refuses_exactly_the_budgets_the_library_refuses(
    served: Served, window: int, output: int, margin: int
) -> None:
    """One rule: a budget the library's :class:`Budget` refuses is a 422 naming a budget field; any other is not.

    Budgets the library accepts are asked with ``as_of_seq`` past the head, so nothing is assembled: the answer
    is then a 422 about ``as_of_seq``, never about the budget.
    """
    try:
        Budget(window, output, margin)
        refused = False
    except ConfigurationError:
        refused = True
    body = {"window_tokens": window, "output_tokens": output, "margin_tokens": margin, "as_of_seq": 10**9}
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    about_budget = problem.get("field") != "as_of_seq" and "as_of_seq" not in problem["detail"]
    assert about_budget is refused, (window, output, margin, problem)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model=st.from_regex(r"(?:llama|mistral|qwen|my-model)-[0-9]{1,2}(?:\.[0-9])?(?:-[a-z0-9]{1,8})?", fullmatch=True),
    counter=st.sampled_from([None, "no-such-counter"]),
)
def test_an_unknown_model_or_counter_is_refused_naming_the_field_to_change(
    served: Served, model: str, counter: str | None
) -> None:
    """A model without an offline tokenizer names ``body.model``; an unknown counter name ``body.counter``."""
    body: dict[str, Any] = {"model": model, **({"counter": counter} if counter else {})}
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422, answer.text
    field = "body.counter" if counter else "body.model"
    problem = answer.json()
    assert problem["field"] == field and [e["field"] for e in problem["errors"]] == [field]
    assert (counter or model) in problem["detail"]
