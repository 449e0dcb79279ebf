"""A snapshot's unit vectors as int8 codes and a scale each: a product with them reads a quarter of the bytes.

A unit's float32 vector is its records' stored int8 vectors (:func:`~ctxledger.assemble.semantic.quantize`) summed,
dequantised and re-normalised (:func:`~ctxledger.assemble.semantic.unit_vector`), so it is the sum of those codes
times one scale, up to float32 rounding. The product of every unit vector with the query and the vectors' mean
(:class:`~ctxledger.assemble.centred_vectors.CentredVectorIndex`) reads every vector once and is bound by memory:
1 KB a vector in float32, 256 bytes as an int8 code. :class:`CodedRows` keeps each vector's code and scale when the
vector is within :data:`TOLERANCE` of their product, and multiplies the codes :data:`BLOCK_ROWS` at a time, each
block converted to float32 in a buffer the cache holds; a vector without such a code (embedded from its text, or
whose summed code leaves the int8 range) is multiplied as it is, from a copy of those vectors kept side by side
(gathering them from every vector's rows cost about as much as the codes' product). The products equal those of
the float32 vectors up to float32 rounding.
"""

from __future__ import annotations

import numpy as np

TOLERANCE = 1e-6
"""Largest ``|v − scale·code|`` of a coded vector's components, as a share of its largest ``|v|`` component (float32
rounding of a dequantised, summed and re-normalised code is a few 1e-7 of it)."""

BLOCK_ROWS = 1024
"""Codes converted to float32 at once (1 MB with 256 dimensions, a buffer the cache holds; on this machine 1,024 took
3.4 ms for 45,000 vectors where 512 took 3.6 and 128 4.2, and the float32 product 7.1)."""

_EMPTY_POSITIONS = np.zeros(0, dtype=np.int64)


class CodedRows:
    """Int8 codes and float64 scales of the rows of a float32 ``(n, dim)`` array, appended and cut back with it.

    Args:
        dim: the rows' length.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._codes = np.zeros((0, dim), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float64)
        self._plain = _EMPTY_POSITIONS  # positions of the rows without a code, ascending
        self._plain_rows = np.zeros((0, dim), dtype=np.float32)  # those rows, in that order
        self._n = 0

    def __len__(self) -> int:
        """Number of rows."""
        return self._n

    @property
    def plain(self) -> int:
        """Number of rows without a code (multiplied as float32 rows)."""
        return len(self._plain)

    def add(self, rows: np.ndarray, codes: np.ndarray | None) -> None:
        """Append float32 ``rows`` (``(k, dim)``) and their candidate ``codes`` (int8 ``(k, dim)``, or ``None``).

        A row is coded when its code is a multiple of it within :data:`TOLERANCE` (the scale is the least-squares
        one, ``row·code / code·code``); a zero row is coded by a zero code. Every other row is kept plain.
        """
        k = len(rows)
        start = self._n
        if start + k > len(self._codes):
            capacity = max(2 * len(self._codes), start + k, 64)
            for name, shape in (("_codes", (capacity, self.dim)), ("_scales", (capacity,))):
                old = getattr(self, name)
                grown = np.zeros(shape, dtype=old.dtype)
                grown[:start] = old[:start]
                setattr(self, name, grown)
        wide = rows.astype(np.float64)
        given = np.zeros((k, self.dim), dtype=np.float64) if codes is None else codes.astype(np.float64)
        squares = np.einsum("ij,ij->i", given, given)
        scales = np.divide(
            np.einsum("ij,ij->i", wide, given), squares, out=np.zeros(k, dtype=np.float64), where=squares > 0
        )
        error = np.abs(wide - scales[:, None] * given).max(axis=1, initial=0.0)
        coded = error <= TOLERANCE * np.abs(wide).max(axis=1, initial=0.0)
        self._codes[start : start + k] = np.where(coded[:, None], given, 0).astype(np.int8)
        self._scales[start : start + k] = np.where(coded, scales, 0.0)
        plain = np.flatnonzero(~coded)
        if len(plain):
            held = len(self._plain)
            if held + len(plain) > len(self._plain_rows):
                grown = np.zeros((max(2 * len(self._plain_rows), held + len(plain), 64), self.dim), dtype=np.float32)
                grown[:held] = self._plain_rows[:held]
                self._plain_rows = grown
            self._plain_rows[held : held + len(plain)] = rows[plain]
            self._plain = np.concatenate((self._plain, start + plain))
        self._n = start + k

    def truncate(self, n: int) -> None:
        """Forget every row at position ``>= n``."""
        self._n = min(self._n, max(n, 0))
        self._plain = self._plain[: int(np.searchsorted(self._plain, self._n))]

    def products(self, vectors: np.ndarray) -> np.ndarray:
        """Float64 ``(n, m)``: each of the ``n`` rows times float32 ``vectors`` (``(dim, m)``).

        Equal to ``rows @ vectors`` up to float32 rounding.
        """
        n = self._n
        out = np.empty((n, vectors.shape[1]), dtype=np.float32)
        block = np.empty((min(BLOCK_ROWS, n), self.dim), dtype=np.float32)
        for begin in range(0, n, BLOCK_ROWS):
            end = min(begin + BLOCK_ROWS, n)
            converted = block[: end - begin]
            converted[...] = self._codes[begin:end]
            np.matmul(converted, vectors, out=out[begin:end])
        products = np.multiply(out, self._scales[:n, None], dtype=np.float64)
        if len(self._plain):
            products[self._plain] = self._plain_rows[: len(self._plain)] @ vectors
        return products
