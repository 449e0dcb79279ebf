"""Identifiers are scanned together, and refused exactly as when each was scanned alone.

:func:`check_identifiers` first scans all ids and names of a batch as the lines of one text and looks at each only
when that text holds a finding. Generated batches (plain ids, ids holding a secret of any one-line format, line
breaks and separators, non-ASCII and case-changing text) must be refused at the same record and field, with the
same message, as by scanning every value on its own.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.policy.secrets import SecretScanner, _may_hold_secrets, check_identifiers
from ctxledger.records import Kind

_PLAIN = ["conv/0", "conv/main", "lookup_order", "call_7", "İstanbul-1", "ΣΟΦΊΑ", "a\x1eb", "line\nbreak", "end\r", ""]


@st.composite
def _value(draw_) -> str:
    if draw_(st.integers(0, 5)) == 0:
        fmt = draw_(st.sampled_from(sorted(set(FORMATS) - MULTILINE)))
        return draw_(st.sampled_from(["", "key-", "x/"])) + draw(fmt, draw_(st.integers(0, 999)))[0]
    return draw_(st.sampled_from(_PLAIN) | st.text(max_size=12))


class _Rec:
    """A record's identifier fields (what check_identifiers reads)."""

    def __init__(self, kind: Kind, values: list[str]) -> None:
        self.kind = kind
        self.id, self.conversation_id, self.branch_id, self.name, self.call_id = values


def _alone(records: list[_Rec]) -> tuple[int, str, str] | None:
    """The first (index, field, types) a scan of each value on its own refuses, as check_identifiers reports it."""
    scanner = SecretScanner()
    for index, rec in enumerate(records):
        named = ("name", "call_id") if rec.kind is Kind.TOOL_CALL else ("name",) if rec.kind is Kind.PARTICIPANT else ()
        for field in ("id", "conversation_id", "branch_id", *named):
            hits = scanner.scan(getattr(rec, field))
            if hits:
                return index, field, ", ".join(sorted({f.type for f in hits}))
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([Kind.MESSAGE, Kind.TOOL_CALL, Kind.PARTICIPANT]),
            st.lists(_value(), min_size=5, max_size=5),
        ),
        max_size=8,
    )
)
def test_identifiers_are_refused_as_when_scanned_alone(rows) -> None:
    records = [_Rec(kind, values) for kind, values in rows]
    want = _alone(records)
    if want is None:
        check_identifiers(records, source="gen", scanner=SecretScanner())
        return
    with pytest.raises(InputError) as caught:
        check_identifiers(records, source="gen", scanner=SecretScanner())
    assert (caught.value.index, caught.value.field) == want[:2]
    assert f"holds a secret ({want[2]})" in str(caught.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_value(), max_size=10))
def test_values_scanned_together_are_cleared_only_when_none_holds_a_finding(values) -> None:
    scanner = SecretScanner()
    if any(scanner.scan(v) for v in values):
        assert _may_hold_secrets(values, SecretScanner())


@settings(max_examples=25, deadline=None)
@given(
    before=st.integers(0, 6),
    fmt=st.sampled_from(sorted(set(FORMATS) - MULTILINE)),
    seed=st.integers(0, 999),
    field=st.sampled_from(["name", "id"]),
)
def test_an_imported_identifier_holding_a_secret_names_its_message_in_the_source(before, fmt, seed, field) -> None:
    """The error names the message of the file that holds the secret (its index there), not a built record's."""
    secret = draw(fmt, seed)[0]
    history: list[dict[str, object]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(before)
    ]
    name, call_id = (secret, "c1") if field == "name" else ("lookup", secret)
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    history += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "ok"},
    ]
    ledger = Ledger.open("memory://")
    with pytest.raises(InputError) as caught:
        ledger.import_messages(history, conversation_id="c")
    assert caught.value.index == before
    assert ledger.store.head_seq("default", "c") == 0
