"""Unit vectors from stored int8 vectors, made for many units at once, equal the one-by-one ones bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.semantic import dequantize, quantize, unit_vector
from ctxledger.assemble.snapshot import BATCHED_PARTS, stored_unit_vectors

DIM = 24


@st.composite
def _stored(draw: st.DrawFn) -> list[tuple[int, list[bytes]]]:
    """Units as a snapshot reads them: each position with its records' stored vectors (one to a few more than are
    summed together), some alike, some opposite (a zero sum), some with a vector of another width."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    units = []
    for pos in sorted(draw(st.sets(st.integers(0, 59), min_size=1, max_size=40))):
        parts = []
        for _ in range(draw(st.integers(1, BATCHED_PARTS + 2))):
            v = rng.standard_normal(DIM)
            parts.append(quantize((v / np.linalg.norm(v)).astype(np.float32)))
        shape = draw(st.sampled_from(["plain", "plain", "opposite", "repeated", "wide"]))
        if shape == "opposite":
            parts = [parts[0], (-np.frombuffer(parts[0], dtype=np.int8)).astype(np.int8).tobytes()]
        elif shape == "repeated":
            parts = [parts[0]] * len(parts)
        elif shape == "wide":
            parts[-1] = parts[-1] + parts[-1][:3]
        units.append((pos, parts))
    return units


def _one_by_one(rows: np.ndarray, units: list[tuple[int, list[bytes]]]) -> None:
    for pos, parts in units:
        rows[pos] = unit_vector([dequantize(v) for v in parts])


@settings(max_examples=150, deadline=None)
@given(_stored())
def test_rows_are_unit_vector_of_the_dequantised_parts_bit_for_bit(units: list[tuple[int, list[bytes]]]) -> None:
    rows = np.full((60, DIM), 7.0, dtype=np.float32)
    want = rows.copy()
    try:
        _one_by_one(want, units)
    except ValueError:  # a vector of another width: one by one, it does not fit (or sum); nor all at once
        with pytest.raises(ValueError):
            stored_unit_vectors(rows, units)
        return
    stored_unit_vectors(rows, units)
    assert np.array_equal(rows.view(np.int32), want.view(np.int32))  # other units' rows are left as they were
