"""The MCP rehydrate tool's byte ranges (a bad one refused in the library's words, naming the tool's own ``start`` or
``end`` argument), and the wording of its not-found answers."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from ctxledger.errors import InputError
from ctxledger.ledger import Ledger
from ctxledger.mcp_server import build_server
from ctxledger.represent.rehydrate import bound_at_fault

TENANT = "acme"
OUTPUT = b'{"rows": ["alpha", "beta", "gamma", "delta"], "total": 4}'
_ids = itertools.count()


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Ledger.open(f"sqlite:///{tmp_path_factory.mktemp('mcpr') / 'r.db'}") as led:
        yield led


@pytest.fixture(scope="module")
def assembled(ledger: Ledger) -> tuple[str, str]:
    rec = ledger.recorder("ranges", tenant_id=TENANT)
    rec.user("list the rows")
    exchange = rec.tool_call("rows.list", {}, OUTPUT)
    rec.user("and now?")
    aid = ledger.assemble("ranges", tenant_id=TENANT, window_tokens=50_000, output_tokens=500).id
    return aid, exchange.artifact


def _call(ledger: Ledger, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    async def run() -> Any:
        async with Client(build_server(ledger, TENANT)) as client:
            return await client.call_tool(name, args)

    answer = anyio.run(run)
    return bool(answer.is_error), " ".join(getattr(c, "text", "") for c in answer.content)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.none() | st.integers(-3, len(OUTPUT) + 3), end=st.none() | st.integers(-3, len(OUTPUT) + 3))
def test_a_range_is_the_slice_asked_for_or_the_refusal_every_rehydration_gives(
    ledger: Ledger, assembled: tuple[str, str], start: int | None, end: int | None
) -> None:
    """A bad range is refused as ``ctxledger rehydrate --bytes`` and ``Ledger.rehydrate`` refuse it (same words)."""
    aid, artifact = assembled
    args: dict[str, Any] = {"assembly_id": aid, "ref": artifact}
    args |= {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    failed, text = _call(ledger, "rehydrate", args)
    a = 0 if start is None else start
    b = len(OUTPUT) if end is None else end
    if 0 <= a <= b <= len(OUTPUT):
        assert not failed, text
        assert text == OUTPUT[a:b].decode()
        return
    assert failed
    with pytest.raises(InputError) as library:
        ledger.rehydrate(artifact, (start, end), tenant_id=TENANT)
    assert library.value.field == "byte_range" and "byte_range" not in text  # the tool's own argument is named
    assert f"field {('start', 'end')[bound_at_fault((start, end))]!r}" in text
    assert library.value.problem in text, (library.value.problem, text)


def test_not_found_answers_name_what_was_looked_for(ledger: Ledger, assembled: tuple[str, str]) -> None:
    failed, text = _call(ledger, "last_assembly", {"conversation_id": "no-such-chat"})
    assert failed and "conversation 'no-such-chat' not found" in text
    failed, text = _call(ledger, "explain", {"assembly_id": "asm_missing", "ref": "1"})
    assert failed and "assembly 'asm_missing' not found" in text
