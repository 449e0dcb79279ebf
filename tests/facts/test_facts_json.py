"""Stored facts survive their JSON exactly, and a body of another shape is never trusted."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.facts import DETECTOR_STAMP, RecordFacts, decode_facts, encode_facts
from ctxledger.policy.secrets import Finding

_FINDINGS = st.lists(st.builds(Finding, line=st.integers(1, 10_000), type=st.text(min_size=1, max_size=20)), max_size=3)
_TEXT = st.text(max_size=30)


def _tuple(strategy):
    return strategy.map(tuple)


_FACTS = st.builds(
    RecordFacts,
    record_id=st.text(min_size=1, max_size=10),
    stamp=st.just(DETECTOR_STAMP),
    texts=_tuple(st.lists(_tuple(_FINDINGS), max_size=3)),
    block=st.none() | _tuple(_FINDINGS),
    name=_tuple(_FINDINGS),
    instruction=st.none() | _TEXT,
    term_keys=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8).map(lambda k: np.asarray(k, "<i8").tobytes()),
    term_counts=st.lists(st.integers(1, 50), max_size=8).map(lambda c: np.asarray(c, "<i4").tobytes()),
    length=st.integers(0, 1_000),
    vector=st.binary(max_size=64),
    sources=_tuple(st.lists(st.text(min_size=1, max_size=10), max_size=3)),
    sources_complete=st.booleans(),
    raw_readable=st.booleans(),
)


@given(_FACTS)
def test_facts_round_trip_through_the_stored_json(facts: RecordFacts) -> None:
    back = decode_facts(facts.record_id, facts.stamp, encode_facts(facts))
    assert back.length == (facts.length if facts.term_keys else 0)  # the length is stored with the terms only
    assert back.texts == facts.texts and back.block == facts.block and back.name == facts.name
    assert (back.instruction, back.term_keys, back.vector, back.sources) == (
        facts.instruction,
        facts.term_keys,
        facts.vector,
        facts.sources,
    )
    assert (back.sources_complete, back.raw_readable, back.current) == (
        facts.sources_complete,
        facts.raw_readable,
        True,
    )
    assert back.term_counts == (facts.term_counts if facts.term_keys else b"")
    assert decode_facts(facts.record_id, facts.stamp, encode_facts(facts), terms=False).term_keys == b""
    # every other field survives leaving the terms out (a field added later must be copied too)
    assert facts.without_terms() == dataclasses.replace(facts, term_keys=b"", term_counts=b"", vector=b"")


@given(st.sampled_from(['{"texts": "not a list"}', '{"length": "x"}', '{"block": [{"line": "one"}]}', "[]"]))
def test_a_body_of_another_shape_is_not_current(body: str) -> None:
    facts = decode_facts("r", DETECTOR_STAMP, body)
    assert not facts.current and facts.record_id == "r"
