"""Explaining a record that was never a candidate names the assembly whose candidates were searched."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import RecordNotFound
from ctxledger.manifest import find_entry

_MANIFEST = {"id": "asm_1", "tenant_id": "t1", "included": [{"ref": "c/1"}], "omitted": [{"ref": "c/2"}]}


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=10).filter(lambda r: r not in ("c/1", "c/2")))
def test_an_unknown_ref_is_not_found_among_the_assembly_candidates(ref: str) -> None:
    try:
        find_entry(_MANIFEST, ref)
    except RecordNotFound as exc:
        assert str(exc) == f"record {ref!r} not found among the candidates of assembly asm_1 in tenant 't1'"
        assert exc.untenanted() == f"record {ref!r} was not found among the candidates of assembly asm_1"
    else:
        raise AssertionError("an unknown ref was found")
