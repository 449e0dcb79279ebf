"""Centred cosine scores of a snapshot's unit vectors from running sums, not from a pass over every vector.

:meth:`VectorIndex.scores(centred=True) <ctxledger.assemble.semantic.VectorIndex.scores>` subtracts the mean of
all the units' vectors from each of them before the cosine: a mean, a centred copy of every vector and every
centred vector's norm on each call, about five passes over ``n × dim`` floats and a copy of them. With
``m`` the mean, ``q`` the query and ``r`` a unit's vector,

* ``(r − m)·(q − m) = r·q − r·m − m·q + m·m`` and
* ``|r − m|² = |r|² − 2 r·m + m·m``,

so one product of the vectors with ``[q, m]`` gives every score once ``|r|²`` of each vector and the sum of the
vectors are kept as vectors are appended (and taken back when the index is truncated).
:class:`CentredVectorIndex` keeps them, and the vectors' int8 codes where they have them
(:class:`~ctxledger.assemble.coded_rows.CodedRows`: when most vectors have one, the product reads a quarter of the
bytes). Its scores equal the plain ones up to float32 rounding (about 1e-6; up to a few 1e-5 when the vectors
cluster tightly around their mean, since ``r·m`` then nearly cancels ``m·m``),
except that a vector within rounding of the mean (a single unit, or all of them alike) scores 0 instead of a
cosine of rounding noise.
"""

from __future__ import annotations

import numpy as np

from ctxledger.assemble.coded_rows import CodedRows
from ctxledger.assemble.semantic import VectorIndex

NOISE = 1e-6
"""A centred squared norm below this share of ``|r|² + |m|²`` is rounding (float32 products), taken as 0."""


class CentredVectorIndex(VectorIndex):
    """A :class:`~ctxledger.assemble.semantic.VectorIndex` that keeps each vector's squared norm and their sum.

    Args:
        dim: vector length.
        model_id: the model the vectors come from.
    """

    def __init__(self, dim: int, model_id: str) -> None:
        super().__init__(dim, model_id)
        self._squares = np.zeros(0, dtype=np.float64)
        self._sum = np.zeros(dim, dtype=np.float64)
        self._coded = CodedRows(dim)

    def add_many(self, vectors: np.ndarray, codes: np.ndarray | None = None) -> None:
        """Append ``(k, dim)`` vectors (a zero row for a unit without text), updating the running sums.

        ``codes``: int8 ``(k, dim)``, each vector's records' summed stored codes (zeros where there are none), of
        which the vector is a multiple up to rounding (:meth:`CodedRows.add <.coded_rows.CodedRows.add>`).
        """
        start = len(self)
        super().add_many(vectors)
        added = self._rows[start : len(self)]
        self._coded.add(added, codes)
        if len(self._squares) < len(self._rows):
            grown = np.zeros(len(self._rows), dtype=np.float64)
            grown[:start] = self._squares[:start]
            self._squares = grown
        self._squares[start : len(self)] = np.einsum("ij,ij->i", added, added, dtype=np.float64)
        self._sum += added.sum(axis=0, dtype=np.float64)

    def truncate(self, n: int) -> None:
        """Forget every vector at position ``>= n`` (their share of the sum too)."""
        if n < len(self):
            self._sum -= self._rows[max(n, 0) : len(self)].sum(axis=0, dtype=np.float64)
        super().truncate(n)
        self._coded.truncate(len(self))

    def scores(self, query: np.ndarray, n: int | None = None, *, centred: bool = False) -> np.ndarray:
        """As :meth:`VectorIndex.scores`; the centred cosine of all the vectors comes from the running sums."""
        count = len(self)
        if not centred or count == 0 or (n is not None and n != count):
            return super().scores(query, n, centred=centred)
        mean = self._sum / count
        vectors = np.ascontiguousarray(np.stack([query, mean]).astype(np.float32).T)
        if self._coded.plain <= count // 2:
            products = self._coded.products(vectors)
        else:  # mostly vectors embedded from text: the codes would save little
            products = (self._rows[:count] @ vectors).astype(np.float64)
        with_query, with_mean = products[:, 0], products[:, 1]
        query_mean, mean_mean = float(query @ mean), float(mean @ mean)
        dots = with_query - with_mean  # r·q − r·m − m·q + m·m, in place, in that order
        dots -= query_mean
        dots += mean_mean
        query_norm = max(float(np.sqrt(max(float(query @ query) - 2 * query_mean + mean_mean, 0.0))), 1e-12)
        squares = self._squares[:count]
        centred_squares = np.multiply(with_mean, 2)  # |r|² − 2 r·m + m·m
        np.subtract(squares, centred_squares, out=centred_squares)
        centred_squares += mean_mean
        # below float32's rounding of r·m a vector is its mean (one unit, or all alike): no direction, score 0
        noise = squares + mean_mean
        noise *= NOISE
        centred_squares[centred_squares <= noise] = 0.0
        norms = np.sqrt(centred_squares, out=centred_squares)
        norms *= query_norm
        return np.divide(dots, norms, out=np.zeros(count, dtype=np.float64), where=norms > 0)
