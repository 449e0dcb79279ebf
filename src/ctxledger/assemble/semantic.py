"""Semantic relevance: a static embedding model shipped inside a registry package, read offline.

A static embedding model is a lookup table: one vector per vocabulary token, and a text's vector is the mean of
its tokens' vectors. That costs microseconds per text (a tokenizer pass and a row gather), so a record's vector
is computed once when it is written (:mod:`ctxledger.facts`) and the query's on every call.

The model is WordLlama ``l2_supercat`` at 256 dimensions (package ``wordllama``, MIT; the extra
``ctxledger[semantic]``): a 32,000 × 256 float16 table (16 MB) trained for sentence similarity with average
pooling over the Llama 2 tokenizer, whose configuration ships in the same wheel. Its files are read from the
installed package's folder; nothing is downloaded, and the ``wordllama`` package itself is not imported (its
import configures the root logger, and its loader looks for the tokenizer on the Hugging Face Hub). On this
machine loading took 0.45 s once per process and a text about 25 µs.

A text's vector here is what WordLlama's ``embed`` computes (the mean of its token rows, no special tokens),
L2-normalised; it is stored quantised to int8 (``round(127·v)``, 256 bytes per record, :func:`quantize`).
Without the package :func:`default_embedder` returns ``None`` and relevance is lexical only.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = "wordllama"
"""The registry package that ships the model."""

CONFIG = "l2_supercat"
DIM = 256
WEIGHTS = f"weights/{CONFIG}_{DIM}.safetensors"
TOKENIZER = f"tokenizers/{CONFIG}_tokenizer_config.json"
TENSOR = "embedding.weight"

LEXICAL = "bm25"
"""The name of lexical relevance (stemmed BM25 plus neighbours) in the manifest."""


class StaticEmbedder:
    """Mean-pooled static token embeddings (see the module docstring).

    Args:
        table: the token embedding table, ``(vocabulary, dim)``, any float precision (rows are averaged in float32).
        tokenizer: a ``tokenizers.Tokenizer`` for that vocabulary.
        model_id: the name recorded in stamps and manifests, e.g. ``"wordllama-l2_supercat-256@0.4.0.post1"``.
    """

    def __init__(self, table: np.ndarray, tokenizer: Any, model_id: str) -> None:
        self.table = np.ascontiguousarray(table)  # kept in its stored precision (float16: 16 MB, not 33)
        self.dim = int(self.table.shape[1])
        self.model_id = model_id
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``: float32 ``(len(texts), dim)``; a text without tokens gets the zero vector."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:  # a Tokenizer with padding settings is not meant to be shared across threads mid-call
            encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        last = self.table.shape[0] - 1
        for i, enc in enumerate(encodings):
            ids = enc.ids
            if not ids:
                continue
            rows = self.table[np.clip(np.asarray(ids, dtype=np.int64), 0, last)].astype(np.float32)
            vec = rows.mean(axis=0)
            norm = float(np.linalg.norm(vec))
            if norm > 0:
                out[i] = vec / norm
        return out


def package_root() -> Path | None:
    """The installed ``wordllama`` package's folder, found without importing it; ``None`` when not installed."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    return root if (root / WEIGHTS).is_file() and (root / TOKENIZER).is_file() else None


@cache
def model_id() -> str | None:
    """The model's name and package version (``"wordllama-l2_supercat-256@<version>"``), or ``None`` without it."""
    if package_root() is None:
        return None
    try:
        return f"{PACKAGE}-{CONFIG}-{DIM}@{version(PACKAGE)}"
    except PackageNotFoundError:
        return None


_LOADED: dict[str, StaticEmbedder | None] = {}
_LOAD_LOCK = threading.Lock()


def default_embedder() -> StaticEmbedder | None:
    """The packaged model, loaded once per process; ``None`` when the extra is not installed.

    Raises:
        ImportError: the package is there but ``safetensors`` or ``tokenizers`` cannot be imported.
    """
    with _LOAD_LOCK:
        if "default" not in _LOADED:
            _LOADED["default"] = _load()
        return _LOADED["default"]


def _load() -> StaticEmbedder | None:
    root, name = package_root(), model_id()
    if root is None or name is None:
        return None
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    table = load_file(str(root / WEIGHTS))[TENSOR]
    tokenizer = Tokenizer.from_file(str(root / TOKENIZER))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return StaticEmbedder(table, tokenizer, name)


def quantize(vector: np.ndarray) -> bytes:
    """A unit vector as int8 bytes (``round(127·v)``, clipped); the zero vector gives ``b""``."""
    if not np.any(vector):
        return b""
    return np.clip(np.rint(vector * 127.0), -127, 127).astype(np.int8).tobytes()


def dequantize(data: bytes) -> np.ndarray:
    """The float32 vector of :func:`quantize`'s bytes (scale 1/127; not re-normalised)."""
    return np.frombuffer(data, dtype=np.int8).astype(np.float32) / 127.0


class VectorIndex:
    """Unit vectors of a snapshot's units in unit order, append-only like the lexical index.

    Args:
        dim: vector length.
        model_id: the model the vectors come from.
    """

    def __init__(self, dim: int, model_id: str) -> None:
        self.dim = dim
        self.model_id = model_id
        self._rows = np.zeros((0, dim), dtype=np.float32)
        self._n = 0

    def __len__(self) -> int:
        """Number of vectors."""
        return self._n

    def add_many(self, vectors: np.ndarray) -> None:
        """Append ``(k, dim)`` vectors (a zero row for a unit without text)."""
        k = len(vectors)
        if self._n + k > len(self._rows):
            grown = np.zeros((max(2 * len(self._rows), self._n + k, 64), self.dim), dtype=np.float32)
            grown[: self._n] = self._rows[: self._n]
            self._rows = grown
        self._rows[self._n : self._n + k] = vectors
        self._n += k

    def truncate(self, n: int) -> None:
        """Forget every vector at position ``>= n``."""
        self._n = min(self._n, n)

    def scores(self, query: np.ndarray, n: int | None = None, *, centred: bool = False) -> np.ndarray:
        """Cosine of each of the first ``n`` vectors (default all) with the unit vector ``query``; float64.

        ``centred``: the cosine after subtracting the mean of those ``n`` vectors from them and from the query
        (what every unit of one conversation shares, a speaker's name, its register, says nothing about which
        unit answers).
        """
        n = self._n if n is None else min(n, self._n)
        rows = self._rows[:n]
        if not centred or n == 0:
            return (rows @ query).astype(np.float64)
        mean = rows.mean(axis=0)
        centred_rows = rows - mean
        q = query - mean
        norms = np.linalg.norm(centred_rows, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        return np.divide(centred_rows @ q, norms, out=np.zeros(n, dtype=np.float32), where=norms > 0).astype(np.float64)


def unit_vector(parts: Sequence[np.ndarray]) -> np.ndarray:
    """One unit's vector from its records' vectors: their mean, re-normalised (zero when they are all zero)."""
    vec = parts[0] if len(parts) == 1 else np.sum(parts, axis=0)
    norm = float(np.linalg.norm(vec))
    return (vec / norm).astype(np.float32) if norm > 0 else np.zeros_like(vec, dtype=np.float32)
