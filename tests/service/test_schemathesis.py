"""Schemathesis against the running server's own OpenAPI schema (every /v1 operation, authorised)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance
from service_helpers import live_server

if TYPE_CHECKING:
    from service_helpers import Served


@pytest.fixture(scope="module")
def base_url(served: Served) -> Iterator[str]:
    with live_server(served.url) as base:
        yield base


def test_every_operation_conforms_to_its_own_schema(base_url: str, served: Served) -> None:
    """No 5xx; status codes, content types and bodies as documented (problems included), for every operation.

    The schema is read from the running server. Generated ids mostly name nothing, so a valid request
    answering 404 is expected: the positive data acceptance check is left out.
    """
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    auth = served.auth("acme")
    statuses: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case) -> None:
            response = case.call_and_validate(headers=auth, excluded_checks=[positive_data_acceptance])
            statuses.append(response.status_code)

        check()
    assert len(statuses) >= 5 * len(operations)
    assert {200, 404, 422} <= set(statuses)
