"""The lexical index's term keys: each key is the term's digest, whether the key was remembered or not."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble import term_keys

_TERMS = st.text(min_size=1, max_size=12) | st.sampled_from(["run", "ΣΑΣ", "a_b", "\ud800", "日本"])


def _digest_key(term: str) -> int:
    digest = hashlib.blake2b(term.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


@settings(max_examples=200, deadline=None)
@given(
    counts=st.dictionaries(_TERMS, st.integers(1, 2**31 - 1), max_size=20),
    remembered=st.lists(_TERMS, max_size=10),
)
def test_keyed_terms_give_each_terms_digest_and_count_in_order(counts: dict[str, int], remembered: list[str]) -> None:
    term_keys._KEYS.clear()
    for term in remembered:  # some keys remembered, some not
        term_keys.term_key(term)
    keys, freqs = term_keys.keyed_terms(counts)
    assert np.frombuffer(keys, "<i8").tolist() == [_digest_key(t) for t in counts]
    assert np.frombuffer(freqs, "<i4").tolist() == list(counts.values())
    again, _ = term_keys.keyed_terms(counts)  # every key remembered now
    assert again == keys


@settings(max_examples=200, deadline=None)
@given(
    counts=st.dictionaries(_TERMS, st.integers(1, 2**31 - 1), max_size=20),
    remembered=st.lists(_TERMS, max_size=10),
    limit=st.integers(1, 12),
)
def test_keyed_terms_are_the_digests_when_the_cache_is_emptied_on_the_way(
    counts: dict[str, int], remembered: list[str], limit: int
) -> None:
    term_keys._KEYS.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(term_keys, "KEY_CACHE", limit)
        for term in remembered:
            assert term_keys.term_key(term) == _digest_key(term)
        keys, _ = term_keys.keyed_terms(counts)
        assert len(term_keys._KEYS) <= max(limit, len(counts))
    assert np.frombuffer(keys, "<i8").tolist() == [_digest_key(t) for t in counts]
