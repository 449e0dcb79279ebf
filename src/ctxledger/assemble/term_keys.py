"""The lexical index's key of a term, stable across processes: how stored lexical terms are written.

The write path stores each record's terms as :func:`keyed_terms` bytes (:class:`~ctxledger.facts.RecordFacts`) and
the lexical index (:mod:`ctxledger.assemble.lexical_index`) compares keys, never strings. This module's source is
part of the write-path facts' stamp, so it holds nothing else: changing it makes every stored term stale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

KEY_CACHE = 200_000
"""Terms whose digest is remembered at most (the cache is emptied when a term would not fit)."""

_KEYS: dict[str, bytes] = {}
"""Term → the 8 bytes of its digest (:func:`term_key`'s key as little-endian int64 bytes)."""


def _digest(term: str) -> bytes:
    return hashlib.blake2b(term.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def term_key(term: str) -> int:
    """The index's key of a term: the first 8 bytes of its UTF-8 BLAKE2b digest as a signed little-endian int.

    Stable across processes and versions (stored keys stay valid), unlike ``hash(term)``.
    """
    digest = _KEYS.get(term)
    if digest is None:
        if len(_KEYS) >= KEY_CACHE:
            _KEYS.clear()
        digest = _KEYS[term] = _digest(term)
    return int.from_bytes(digest, "little", signed=True)


def keyed_terms(counts: Mapping[str, int]) -> tuple[bytes, bytes]:
    """``(keys, frequencies)`` of a term → frequency mapping as little-endian int64 and int32 bytes, in its order.

    A key's little-endian int64 bytes are its digest's bytes, so the keys are the terms' digests joined.
    """
    if not counts:
        return b"", b""
    digests = list(map(_KEYS.get, counts))  # the remembered digests at C speed
    if None in digests:
        fresh = {term: _digest(term) for term, digest in zip(counts, digests, strict=True) if digest is None}
        if len(_KEYS) + len(fresh) > KEY_CACHE:
            _KEYS.clear()
        _KEYS.update(fresh)
        digests = list(map(fresh.get, counts, digests))  # a fresh digest, else the one remembered before
    return b"".join(digests), np.fromiter(counts.values(), dtype="<i4", count=len(counts)).tobytes()
