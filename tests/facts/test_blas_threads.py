"""Semantic vectors do not depend on BLAS threads, and the write path's one-thread block restores what it changed."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import threadpoolctl
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxledger._blas as blas
from ctxledger import facts
from ctxledger.assemble import semantic

_WORDS = st.sampled_from(
    ["the", "token", "config", "deploy", "error", "0x7f", "id=42", '{"k":', "é", "日本", "😀", "return", "\tx", "  y"]
)
_UNIQUE = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)

# at least 40 distinct pieces per text: products of 40 × 256 elements or more, which OpenBLAS threads
_TEXTS = st.lists(
    st.lists(_WORDS | _UNIQUE, min_size=40, max_size=160).map(
        lambda words: " ".join(f"{w}{i}" for i, w in enumerate(words))
    ),
    min_size=1,
    max_size=4,
)


def _assert_blas_found() -> None:
    """numpy's wheels bundle OpenBLAS, which threadpoolctl (the test group installs it) finds and can set."""
    controller = blas._controller()
    assert controller is not None and controller.lib_controllers, "threadpoolctl found no BLAS library under numpy"


_HELD = blas._controller()


def _threads() -> int:
    """The most threads any BLAS library that ``one_thread`` controls may use (those loaded when first asked,
    numpy's among them; a library loaded later, such as SciPy's when a module imports it on first use, is not
    one of them and runs none of ctxledger's products)."""
    held = {lib.filepath for lib in _HELD.lib_controllers}
    return max((lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["filepath"] in held), default=1)


@settings(max_examples=40, deadline=None)
@given(_TEXTS)
def test_vectors_are_the_same_bits_on_one_blas_thread_and_on_several(texts: list[str]) -> None:
    embedder = semantic.default_embedder()
    assert embedder is not None, "the test group installs wordllama, the semantic extra's model"
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        one = embedder.embed(texts)
    with threadpoolctl.threadpool_limits(limits=max(2, _threads()), user_api="blas"):
        several = embedder.embed(texts)
        stored = facts._vectors(texts)
    assert one.tobytes() == several.tobytes()
    assert stored == [semantic.quantize(v) for v in several]


def test_one_thread_holds_one_thread_and_restores_the_setting_before() -> None:
    _assert_blas_found()
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _threads()
        with blas.one_thread():
            assert _threads() == 1
            with blas.one_thread():  # nested: shares the limit
                assert _threads() == 1
            assert _threads() == 1
        assert _threads() == before


def test_a_block_in_another_thread_restores_the_setting_it_found() -> None:
    _assert_blas_found()
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _threads()
        seen: list[int] = []

        def other() -> None:
            with blas.one_thread():
                seen.append(blas._nested.depth)
            seen.append(getattr(blas._nested, "depth", 0))

        with blas.one_thread():
            assert blas._nested.depth == 1
        worker = threading.Thread(target=other)
        worker.start()
        worker.join(60)
        assert seen == [1, 0]
        assert getattr(blas._nested, "depth", 0) == 0
        assert _threads() == before


def test_without_threadpoolctl_the_block_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "_controller", lambda: None)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _threads()
        with blas.one_thread():
            assert _threads() == before
    assert np.ones(3) @ np.ones(3) == 3.0


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 3_000),
    st.integers(0, 2**31 - 1),
    st.lists(st.floats(-1, 1, width=32), min_size=256, max_size=256),
)
def test_centred_scores_are_the_same_bits_on_one_blas_thread_and_on_several(n: int, seed: int, query: list[float]):
    """Relevance computes the semantic scores on one BLAS thread: the values must be those of several threads."""
    from ctxledger.assemble.centred_vectors import CentredVectorIndex

    index = CentredVectorIndex(256, "test-model")
    index.add_many(np.random.default_rng(seed).standard_normal((n, 256)).astype(np.float32))
    q = np.asarray(query, dtype=np.float32)
    with threadpoolctl.threadpool_limits(limits=max(2, _threads()), user_api="blas"):
        several = index.scores(q, centred=True)
    with blas.one_thread():
        one = index.scores(q, centred=True)
    assert one.tobytes() == several.tobytes()
