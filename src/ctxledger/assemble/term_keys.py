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
"""Terms whose :func:`term_key` is remembered at most (the cache is emptied when full)."""

_KEYS: dict[str, int] = {}


def term_key(term: str) -> int:
    """The index's key of a term: the first 8 bytes of its UTF-8 BLAKE2b digest as a signed little-endian int.

    Stable across processes and versions (stored keys stay valid), unlike ``hash(term)``.
    """
    key = _KEYS.get(term)
    if key is None:
        if len(_KEYS) >= KEY_CACHE:
            _KEYS.clear()
        digest = hashlib.blake2b(term.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        key = _KEYS[term] = int.from_bytes(digest, "little", signed=True)
    return key


def keyed_terms(counts: Mapping[str, int]) -> tuple[bytes, bytes]:
    """``(keys, frequencies)`` of a term → frequency mapping as little-endian int64 and int32 bytes, in its order."""
    if not counts:
        return b"", b""
    keys = list(map(_KEYS.get, counts))  # the remembered keys at C speed; term_key for a term not remembered
    if None in keys:
        keys = list(map(term_key, counts))
    return np.array(keys, dtype="<i8").tobytes(), np.fromiter(counts.values(), dtype="<i4", count=len(counts)).tobytes()
