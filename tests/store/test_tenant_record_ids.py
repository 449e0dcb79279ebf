"""Record ids are unique per tenant, on every backend: a property over interleaved appends of two tenants."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.records import Conversation, Message
from ctxledger.store.base import GraphStore

_APPENDS = st.lists(
    st.tuples(st.sampled_from("ab"), st.sampled_from(["m1", "m2", "m3", "conv"]), st.text(max_size=8)),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(appends=_APPENDS)
def test_an_append_is_refused_only_for_an_id_its_own_tenant_holds(
    store: GraphStore, appends: list[tuple[str, str, str]]
) -> None:
    """Each append succeeds iff its tenant lacks the id; a refusal names that tenant only; reads stay per tenant."""
    run = uuid.uuid4().hex[:10]
    tenants = {letter: f"{run}-{letter}" for letter in "ab"}
    for tenant in tenants.values():
        store.append([Conversation(id="conv", tenant_id=tenant, conversation_id="conv", branch_id="conv/main")])
    held: dict[tuple[str, str], str] = {(tenant, "conv"): "" for tenant in tenants.values()}
    for letter, record_id, text in appends:
        tenant, other = tenants[letter], tenants["b" if letter == "a" else "a"]
        message = Message(id=record_id, content=text, tenant_id=tenant, conversation_id="conv", branch_id="conv/main")
        if (tenant, record_id) in held:
            try:
                store.append([message])
            except InputError as exc:
                assert exc.field == "id" and repr(tenant) in str(exc) and other not in str(exc)
            else:
                raise AssertionError(f"{record_id!r} was appended twice to {tenant!r}")
        else:
            assert store.append([message])[0].id == record_id
            held[(tenant, record_id)] = text
    for tenant in tenants.values():
        stored = store.records(tenant, "conv")
        assert all(r.tenant_id == tenant for r in stored)
        texts = {r.id: (r.content if isinstance(r, Message) else "") for r in stored}
        assert texts == {rid: text for (t, rid), text in held.items() if t == tenant}
        assert store.get(tenant, "conv").tenant_id == tenant
