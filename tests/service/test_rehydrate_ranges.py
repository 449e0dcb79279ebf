"""``GET /v1/rehydrate/{ref}?start=&end=``: the slice asked for, or the refusal the library gives, word for word.

The service checks a byte range where :meth:`Ledger.rehydrate` does, so a negative, reversed or too long range
(or one with a single bound, the other open) is refused with the library's problem, naming the query parameter
at fault (``start`` or ``end``, never the library's ``byte_range``), for a tool result
(named by record id or by ``sha256:``) and for a message's text alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.ledger import Ledger
from ctxledger.records import Message, ToolArtifact
from ctxledger.represent.rehydrate import bound_at_fault

if TYPE_CHECKING:
    from service_helpers import Served

CONV = "tau-task2-trial1"


@pytest.fixture(scope="module")
def refs(served: Served) -> list[tuple[str, bytes]]:
    """A tool result by id and by ``sha256:``, and a user message, each with its whole content."""
    with Ledger.open(served.url) as ledger:
        records = ledger.store.records("acme", CONV)
        art = next(r for r in records if isinstance(r, ToolArtifact))
        msg = next(r for r in records if isinstance(r, Message) and isinstance(r.content, str) and r.content)
        whole = ledger.rehydrate(art.id, tenant_id="acme")
    return [(art.id, whole), (f"sha256:{art.sha256}", whole), (msg.id, msg.content.encode("utf-8"))]


def _bound(size_of: int) -> st.SearchStrategy[int | None]:
    return st.none() | st.integers(-3, 3) | st.integers(size_of - 3, size_of + 3) | st.integers(-(2**40), 2**40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), which=st.integers(0, 2))
def test_the_service_refuses_a_bad_range_as_the_library_does(
    served: Served, refs: list[tuple[str, bytes]], data: st.DataObject, which: int
) -> None:
    ref, whole = refs[which]
    start = data.draw(_bound(len(whole)), "start")
    end = data.draw(_bound(len(whole)), "end")
    params: dict[str, Any] = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    answer = served.client.get(f"/v1/rehydrate/{ref}", headers=served.auth("acme"), params=params)
    a, b = 0 if start is None else start, len(whole) if end is None else end
    if 0 <= a <= b <= len(whole):
        assert answer.status_code == 200, answer.text
        assert answer.content == whole[a:b]
        return
    with Ledger.open(served.url) as ledger, pytest.raises(InputError) as library:
        ledger.rehydrate(ref, (start, end), tenant_id="acme")
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert library.value.field == "byte_range" and "byte_range" not in answer.text
    assert problem["field"] == ("start", "end")[bound_at_fault((start, end))]  # the query parameter at fault
    assert problem["detail"] == library.value.problem
