"""Unit vectors multiplied through their int8 codes give the float32 vectors' products and centred scores."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.centred_vectors import CentredVectorIndex
from ctxledger.assemble.coded_rows import CodedRows
from ctxledger.assemble.semantic import VectorIndex, dequantize, quantize, unit_vector
from ctxledger.assemble.snapshot import summed_codes

DIM = 16


def _unit(rng: np.random.Generator, common: np.ndarray) -> np.ndarray:
    v = rng.standard_normal(DIM) + common
    return (v / np.linalg.norm(v)).astype(np.float32)


@st.composite
def _units(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Rows as a snapshot makes them, with their candidate codes: one or several stored records' vectors summed
    and re-normalised (the code their bytes' sum), a row embedded from text (no code), a sum that leaves int8
    (no code), a row without text (zeros), and a code that is not the row's."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    common = rng.standard_normal(DIM) * draw(st.floats(0, 4))
    k = draw(st.integers(1, 40))
    rows = np.zeros((k, DIM), dtype=np.float32)
    codes = np.zeros((k, DIM), dtype=np.int8)
    for i in range(k):
        kind = draw(st.sampled_from(["stored", "stored", "records", "text", "zero", "wrong"]))
        if kind in ("stored", "records", "wrong"):
            stored = [quantize(_unit(rng, common)) for _ in range(1 if kind != "records" else draw(st.integers(2, 4)))]
            rows[i] = unit_vector([dequantize(v) for v in stored])
            codes[i] = summed_codes([(0, stored)], 1, DIM)[0]
            if kind == "wrong":
                codes[i, 0] = codes[i, 0] // 2 + 1
        elif kind == "text":
            rows[i] = _unit(rng, common)
    return rows, codes


@settings(max_examples=150, deadline=None)
@given(units=_units(), block=st.sampled_from([1, 3, 512]), seed=st.integers(0, 1000))
def test_products_through_codes_equal_the_float_products(units: tuple[np.ndarray, np.ndarray], block: int, seed: int):
    rows, codes = units
    vectors = np.random.default_rng(seed).standard_normal((DIM, 2)).astype(np.float32)
    coded = CodedRows(DIM)
    with mock.patch("ctxledger.assemble.coded_rows.BLOCK_ROWS", block):
        coded.add(rows[: len(rows) // 2], codes[: len(rows) // 2])
        coded.add(rows[len(rows) // 2 :], codes[len(rows) // 2 :])
        got = coded.products(vectors)
    expected = rows.astype(np.float64) @ vectors.astype(np.float64)
    # float32 rounding of a 16-term product of unit vectors with vectors of norm about 4
    assert np.allclose(got, expected, rtol=0, atol=1e-5)
    # a row no code stands for is multiplied as it is: a code that is not the row's never gives its product
    plain = [i for i in range(len(rows)) if rows[i].any() and not (codes[i].any() and _multiple(rows[i], codes[i]))]
    assert coded.plain == len(plain)


def _multiple(row: np.ndarray, code: np.ndarray) -> bool:
    scale = float(row.astype(np.float64) @ code) / float(code.astype(np.float64) @ code)
    return bool(np.abs(row - scale * code.astype(np.float64)).max() <= 1e-6 * np.abs(row).max())


@settings(max_examples=80, deadline=None)
@given(
    units=_units(),
    steps=st.lists(st.one_of(st.integers(1, 40), st.integers(-40, -1)), min_size=1, max_size=6),
    seed=st.integers(0, 1000),
)
def test_centred_scores_through_codes_follow_appends_and_cuts(
    units: tuple[np.ndarray, np.ndarray], steps: list[int], seed: int
):
    """Positive steps append that many of the rows (with codes), negative ones cut the index back by that many.

    Compared with the same index given no codes (it scores 0 where every vector is alike, as a full pass would
    not) and, where the vectors differ, with a full pass."""
    rows, codes = units
    plain, uncoded, coded = VectorIndex(DIM, "m"), CentredVectorIndex(DIM, "m"), CentredVectorIndex(DIM, "m")
    taken = 0
    with mock.patch("ctxledger.assemble.coded_rows.BLOCK_ROWS", 4):
        for step in steps:
            if step > 0:
                part = slice(taken % len(rows), min(taken % len(rows) + step, len(rows)))
                plain.add_many(rows[part])
                uncoded.add_many(rows[part])
                coded.add_many(rows[part], codes[part])
                taken += step
            else:
                plain.truncate(max(len(plain) + step, 0))
                uncoded.truncate(max(len(uncoded) + step, 0))
                coded.truncate(max(len(coded) + step, 0))
        query = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        got = coded.scores(query, centred=True)
    # as for the running sums alone (tests/assemble/test_centred_vectors.py): float32 rounding, a few 1e-5 at worst
    assert np.allclose(got, uncoded.scores(query, centred=True), atol=1e-4)
    kept = plain._rows[: len(plain)]
    if len(np.unique(kept, axis=0)) > 1:
        assert np.allclose(got, plain.scores(query, centred=True), atol=1e-4)


def test_a_summed_code_leaving_int8_or_of_another_length_is_no_code():
    high = np.full(DIM, 100, dtype=np.int8).tobytes()
    low = np.full(DIM, -3, dtype=np.int8).tobytes()
    codes = summed_codes([(0, [high, low]), (2, [high, high]), (3, [high[:-1]]), (4, [low]), (5, [])], 7, DIM)
    assert codes.tolist() == [[97] * DIM, [0] * DIM, [0] * DIM, [0] * DIM, [-3] * DIM, [0] * DIM, [0] * DIM]


@settings(max_examples=60, deadline=None)
@given(units=st.lists(st.lists(st.binary(min_size=DIM, max_size=DIM), max_size=5), max_size=12))
def test_summed_codes_are_each_units_own_sum(units: list[list[bytes]]):
    """Units of any number of vectors, summed at once, get the sums one by one would give (or zeros off int8)."""
    codes = summed_codes(list(enumerate(units)), len(units), DIM)
    for i, found in enumerate(units):
        total = sum((np.frombuffer(v, dtype=np.int8).astype(np.int64) for v in found), np.zeros(DIM, dtype=np.int64))
        expected = total if np.abs(total).max() <= 127 else np.zeros(DIM)
        assert codes[i].tolist() == expected.tolist()
