"""The semantic vector is a write-path fact: computed on append, stored and read back by every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ctxledger.assemble import semantic
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.facts import decode_facts, encode_facts
from ctxledger.records import Branch, Conversation, Message, Record
from ctxledger.store.base import GraphStore

pytestmark = pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")

T, C, MAIN = "t", "c", "c/main"


def _env(**extra: Any) -> dict[str, Any]:
    return {"tenant_id": T, "conversation_id": C, "branch_id": MAIN, **extra}


def _history() -> list[Record]:
    return [
        Conversation(id="c", **_env()),
        Branch(id=MAIN, name="main", **_env()),
        Message(id="m1", content="I adopted a puppy from the shelter last week.", **_env()),
        Message(id="m2", content="The quarterly tax return is due on Friday.", **_env()),
        Message(id="m3", content="", **_env()),
    ]


def test_each_record_stores_the_vector_of_its_relevance_text(store: GraphStore) -> None:
    store.append(_history())
    facts = store.record_facts(T, C)
    embedder = semantic.default_embedder()
    assert embedder is not None
    expected = embedder.embed(["I adopted a puppy from the shelter last week."])[0]
    stored = semantic.dequantize(facts["m1"].vector)
    assert len(facts["m1"].vector) == embedder.dim
    assert np.max(np.abs(stored - expected)) <= 0.5 / 127 + 1e-6  # int8 rounding, nothing else
    assert facts["m3"].vector == b""  # no text, no vector
    assert store.record_facts(T, C, terms=False)["m1"].vector == b""  # left out with the terms


def test_the_snapshot_indexes_the_stored_vectors(store: GraphStore) -> None:
    store.append(_history())
    snap = SnapshotLoader(store).load(T, C, MAIN)
    assert snap.vectors is not None and len(snap.vectors) == len(snap.units)
    facts = store.record_facts(T, C)
    position = {u.id: i for i, u in enumerate(snap.units)}
    query = semantic.dequantize(facts["m1"].vector)
    query /= np.linalg.norm(query)
    scores = snap.vectors.scores(query)
    assert scores[position["m1"]] > scores[position["m2"]]


def test_vector_survives_the_stored_json() -> None:
    embedder = semantic.default_embedder()
    assert embedder is not None
    from ctxledger.facts import compute_facts

    [facts] = compute_facts([_history()[2]], lambda sha: b"")
    back = decode_facts(facts.record_id, facts.stamp, encode_facts(facts))
    assert back == facts and back.vector
