"""Semantic relevance: a static embedding model shipped inside a registry package, read offline.

A static embedding model is a lookup table: one vector per vocabulary token, and a text's vector is the mean of
its tokens' vectors. That costs microseconds per text (a tokenizer pass and a row gather), so a record's vector
is computed once when it is written (:mod:`ctxledger.facts`) and the query's on every call.

The model is WordLlama ``l2_supercat`` at 256 dimensions (package ``wordllama``, MIT; the extra
``ctxledger[semantic]``): a 32,000 × 256 float16 table (16 MB; held as float32, 33 MB) trained for sentence
similarity with average pooling over the Llama 2 tokenizer, whose configuration ships in the same wheel. Its files
are read from the installed package's folder; nothing is downloaded, and the ``wordllama`` package itself is not
imported (its import configures the root logger, and its loader looks for the tokenizer on the Hugging Face Hub).
On this machine loading took 0.45 s once per process and a text about 25 µs.

A text's vector here is what WordLlama's ``embed`` computes (the mean of its token rows, no special tokens),
L2-normalised; it is stored quantised to int8 (``round(127·v)``, 256 bytes per record, :func:`quantize`).
Without the package :func:`default_embedder` returns ``None`` and relevance is lexical only.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import threading
from collections import Counter
from collections.abc import Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

import ctxledger.text_windows as text_windows

PACKAGE = "wordllama"
"""The registry package that ships the model."""

CONFIG = "l2_supercat"
DIM = 256
WEIGHTS = f"weights/{CONFIG}_{DIM}.safetensors"
TOKENIZER = f"tokenizers/{CONFIG}_tokenizer_config.json"
TENSOR = "embedding.weight"

LEXICAL = "bm25"
"""The name of lexical relevance (stemmed BM25 plus neighbours) in the manifest."""


SPACE = "\u2581"
"""The sentencepiece word marker the model's normaliser writes for a space (and before the text)."""

_PIECE = re.compile(f"{SPACE}*[^{SPACE}]+|{SPACE}+")
"""A normalised text cut before every marker that follows another character: a run of markers and the word after it."""

_SPACED_PIECE = re.compile(" *[^ ]+| +")
""":data:`_PIECE` on a text not yet normalised, a space before it: the same pieces, with spaces for the markers (for
a text holding no marker of its own; such a text stays one byte per character and needs no replacing)."""

PIECE_CACHE = 100_000
"""Pieces whose token ids one embedder keeps at most, in two generations of half as many each (ids held as int32
bytes: about 20 MB when the pieces are log lines' ids and timestamps of 30 tokens each, less for words)."""

JOINED_CHARS = 4096
"""Characters of new pieces tokenized in one string (one tokenizer item per piece costs more than its merging)."""

_ID_BYTES = 4
"""Bytes of one token id as pieces' ids are held (native int32)."""

PIECE_CACHED_CHARS = 64
"""Longer pieces are tokenized every time (they rarely recur and would fill the cache)."""


def tokenizer_config(tokenizer: Any) -> dict[str, Any] | None:
    """The parsed JSON configuration of a ``tokenizers.Tokenizer`` (``None`` when it has none that parses).

    Parsed by msgspec (the packaged model's 2 MB configuration: about a third of the standard library's time).
    """
    import msgspec

    try:
        config = msgspec.json.decode(tokenizer.to_str())
    except (AttributeError, TypeError, ValueError):  # msgspec.DecodeError is a ValueError
        return None
    return config if isinstance(config, dict) else None


_MARK_AFTER_CHARACTER = re.compile(f"[^{SPACE}]{SPACE}")
"""A :data:`SPACE` marker after another character (a vocabulary token holding one joins two pieces)."""


def splits_at_words(tokenizer: Any, config: dict[str, Any] | None = None) -> bool:
    """Whether ``tokenizer`` gives the same ids for a text as for its pieces one by one (:class:`StaticEmbedder`).

    True for a sentencepiece-style BPE whose only normalisation is "prepend ``▁``, spaces to ``▁``", that has no
    pre-tokenizer, and whose vocabulary holds no token with a ``▁`` after another character: no merge can then
    join two pieces, so byte-pair merging a whole text and merging each piece give the same tokens. ``config``:
    the tokenizer's parsed configuration (:func:`tokenizer_config`), when the caller has it.
    """
    config = tokenizer_config(tokenizer) if config is None else config
    if config is None:
        return False
    model, normalizer = config.get("model") or {}, config.get("normalizer") or {}
    steps = normalizer.get("normalizers") if normalizer.get("type") == "Sequence" else None
    expected = [
        {"type": "Prepend", "prepend": SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
    ]
    if model.get("type") != "BPE" or config.get("pre_tokenizer") is not None or steps != expected:
        return False
    if model.get("dropout") is not None or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return False
    vocab = model.get("vocab") or {}
    return not any(map(_MARK_AFTER_CHARACTER.search, vocab))


def separator(config: dict[str, Any] | None) -> tuple[str, int] | None:
    """A character that is a token of a BPE ``config`` and takes part in no merge, and its id (``None``: none).

    Such a character is a token of its own wherever it stands, and no merge reaches across it: byte-pair merging
    texts joined by it gives each text's own tokens with its token between them. Of those characters the one
    with the highest code point is taken (the rarest in text, ``🌍`` in the packaged model). ``None`` for a
    configuration that is not a plain BPE (byte-pair dropout, merges ignored, another model).
    """
    model = (config or {}).get("model") or {}
    if model.get("type") != "BPE" or model.get("dropout") is not None or model.get("ignore_merges"):
        return None
    # every character of every merge's sides (a merge is "left right", cut at its first space, or a pair)
    merges = model.get("merges") or ()
    merged = set("".join(m.replace(" ", "", 1) if isinstance(m, str) else "".join(m) for m in merges))
    vocab = model.get("vocab") or {}
    alone = [token for token in vocab if len(token) == 1 and token not in merged]
    return (max(alone), int(vocab[max(alone)])) if alone else None


class StaticEmbedder:
    """Mean-pooled static token embeddings (see the module docstring).

    Args:
        table: the token embedding table, ``(vocabulary, dim)``, any float precision (held and summed in float32).
        tokenizer: a ``tokenizers.Tokenizer`` for that vocabulary.
        model_id: the name recorded in stamps and manifests, e.g. ``"wordllama-l2_supercat-256@0.4.0.post1"``.

    When the tokenizer cuts texts at words (:func:`splits_at_words`: the packaged model's), a text is cut into
    pieces (a word with the markers before it), each distinct piece is tokenized once and its token ids kept,
    and the text's vector is the count-weighted sum of its pieces' row sums: the same tokens as tokenizing the
    whole text, without byte-pair merging every repeated word again.
    """

    def __init__(self, table: np.ndarray, tokenizer: Any, model_id: str) -> None:
        # held in float32 (33 MB for the packaged float16 table, not 16): converting gathered float16 rows costs
        # more than the rest of summing them, and the values are the same
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.dim = int(self.table.shape[1])
        self.model_id = model_id
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        config = tokenizer_config(tokenizer)
        self._by_piece = splits_at_words(tokenizer, config)
        self._separator = separator(config) if self._by_piece else None
        self._specials = (
            tuple(t.content for t in tokenizer.get_added_tokens_decoder().values()) if self._by_piece else ()
        )
        self._pieces: dict[str, bytes] = {}
        self._old_pieces: dict[str, bytes] = {}
        self._raw: Any = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``: float32 ``(len(texts), dim)``; a text without tokens gets the zero vector.

        A text longer than :data:`ctxledger.text_windows.WINDOW` characters is embedded window by window when the
        tokenizer cuts texts at words (:meth:`_large_sum`).
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        whole = list(range(len(texts)))
        if self._by_piece:  # a text naming an added token (``<s>`` …) is cut there by the tokenizer: tokenize it whole
            large = [i for i, t in enumerate(texts) if len(t) > text_windows.WINDOW]
            whole = [i for i, t in enumerate(texts) if t and any(s in t for s in self._specials) and i not in large]
            self._embed_pieces(texts, {*whole, *large}, out)
            for i in large:
                out[i] = _unit(self._large_sum(texts[i]))
        if whole:
            encodings = self._encode_whole([texts[i] for i in whole])
            for i, enc in zip(whole, encodings, strict=True):
                if enc.ids:
                    out[i] = _unit(self._rows(np.asarray(enc.ids, dtype=np.int64)).sum(axis=0))
        return out

    def _encode_whole(self, texts: list[str]) -> list[Any]:
        """The tokenizer's encodings of ``texts`` (normalised, added tokens split out, no special tokens added)."""
        with self._lock:  # a Tokenizer with padding settings is not meant to be shared across threads mid-call
            return self._tokenizer.encode_batch(texts, add_special_tokens=False)

    def _large_sum(self, text: str) -> np.ndarray:
        """The sum of ``text``'s token rows (float64), summed window by window.

        The text is cut before runs of spaces (:func:`ctxledger.text_windows.before_spaces`), where the
        tokenizer's pieces begin, so each window's pieces are the whole text's there. The first window is
        normalised as a text (a marker prepended); a later one is not, since it continues the text. An added token
        (``<s>`` …) holds no space, so none spans a cut; the tokenizer splits the text at those tokens and prepends
        a marker to each part after one, so a window holding one is tokenized whole from its first added token
        on (the first window: whole), the part before it by pieces. The tokens are those of the whole text;
        only the order the rows are added in differs, so the vector differs from the whole text's by float
        rounding alone (the int8 :func:`quantize` bytes by at most 1 per component). A window with no space in it
        is cut at :data:`~ctxledger.text_windows.WINDOW` characters, inside a piece: the tokens next to that cut
        may differ from the whole text's.
        """
        total = np.zeros(self.dim, dtype=np.float64)
        start = 0
        for window in text_windows.windows(text, text_windows.before_spaces):
            # a marker begins the text and each part of it after an added token
            begins = start == 0 or any(text.endswith(s, 0, start) for s in self._specials)
            found = [at for at in map(window.find, self._specials) if at >= 0]
            split = (0 if start == 0 else min(found)) if found else len(window)
            if split:
                total += self._bag_sum((SPACE if begins else "") + window[:split].replace(" ", SPACE))
            if split < len(window):
                ids = self._encode_whole([window[split:]])[0].ids
                total += self._rows(np.asarray(ids, dtype=np.int64)).sum(axis=0, dtype=np.float64)
            start += len(window)
        return total

    def _bag_sum(self, normalised: str) -> np.ndarray:
        """The float32 sum of the token rows of a normalised text's pieces, each piece's tokens its own."""
        counts = Counter(_PIECE.findall(normalised))
        if not counts:
            return np.zeros(self.dim, dtype=np.float32)
        sums = self._sums(self._piece_ids(list(counts)))
        return np.fromiter(counts.values(), dtype=np.float32, count=len(counts)) @ sums

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """Float32 rows of token ``ids`` (ids past the table are clipped to its last row)."""
        return self.table[np.clip(ids, 0, self.table.shape[0] - 1)]

    def _embed_pieces(self, texts: Sequence[str], skip: set[int], out: np.ndarray) -> None:
        # a text's pieces counted with spaces for the markers where it holds no marker of its own (every such piece
        # begins with a space, every normalised piece with a marker: the two forms never meet)
        bags: list[tuple[int, Counter[str]]] = []
        for i, text in enumerate(texts):
            if text and i not in skip:
                if SPACE in text:
                    bags.append((i, Counter(_PIECE.findall(SPACE + text.replace(" ", SPACE)))))
                else:
                    bags.append((i, Counter(_SPACED_PIECE.findall(" " + text))))
        if not bags:
            return
        # every bag's pieces and counts in two arrays (one pass at C speed), each text's a slice of them; a piece is
        # first labelled by the position of its first occurrence, then numbered among the distinct pieces in order
        sizes = np.fromiter((len(c) for _, c in bags), dtype=np.intp, count=len(bags))
        ends = np.cumsum(sizes).tolist()
        total = ends[-1]
        chained = itertools.chain.from_iterable
        first: dict[str, int] = {}
        labels = np.fromiter(
            map(first.setdefault, chained(c for _, c in bags), itertools.count()), dtype=np.intp, count=total
        )
        number = np.zeros(total, dtype=np.intp)
        number[np.fromiter(first.values(), dtype=np.intp, count=len(first))] = np.arange(len(first))
        index = number[labels]
        weights = np.fromiter(chained(c.values() for _, c in bags), dtype=np.float32, count=total)
        sums = self._sums(self._piece_ids([piece.replace(" ", SPACE) for piece in first]))
        for (i, _), begin, end in zip(bags, [0, *ends[:-1]], ends, strict=True):
            # the same operands as a text's own arrays: a fresh weight vector and a gathered row matrix
            out[i] = _unit(weights[begin:end].copy() @ sums[index[begin:end]])

    def _sums(self, ids: Sequence[bytes]) -> np.ndarray:
        """Float32 ``(len(ids), dim)``: each id list's rows summed in order (lists of one length are summed together).

        ``ids``: each list as native int32 bytes (:meth:`_piece_ids`). The rows are added one after another in
        float32 (``((r0 + r1) + r2) …``), whatever the batch.
        """
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)) // _ID_BYTES
        starts = np.zeros(len(ids), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        flat = np.frombuffer(b"".join(ids), dtype=np.int32).astype(np.int64)
        np.clip(flat, 0, self.table.shape[0] - 1, out=flat)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for length in np.unique(lengths):
            if length == 0:
                continue
            which = np.flatnonzero(lengths == length)
            first = starts[which]
            acc = self.table[flat[first]]
            for k in range(1, int(length)):
                acc += self.table[flat[first + k]]
            out[which] = acc
        return out

    def _piece_ids(self, pieces: list[str]) -> list[bytes]:
        """Token ids of each normalised piece as native int32 bytes, from the cache or the tokenizer's model.

        The cache holds two generations: when the current one is full it becomes the old one (the one before is
        dropped), and a piece found only in the old one is carried into the current one, so pieces that recur
        (words) stay while one-off pieces (ids, hashes) age out.
        """
        with self._lock:
            current, old = self._pieces, self._old_pieces
            out: list[bytes | None] = list(map(current.get, pieces))
            missing: list[int] = []
            for i in [i for i, ids in enumerate(out) if ids is None]:
                ids = old.get(pieces[i])
                if ids is None:
                    missing.append(i)
                else:
                    out[i] = current[pieces[i]] = ids
            if missing:
                if self._raw is None:  # the model alone: no normalisation again, no added-token split
                    from tokenizers import Tokenizer

                    self._raw = Tokenizer(self._tokenizer.model)
                new = [pieces[i] for i in missing]
                encoded = self._encode_pieces(new)
                for i, ids in zip(missing, encoded, strict=True):
                    out[i] = ids
                # bytes: a tuple would hold an int object per id
                current.update((p, ids) for p, ids in zip(new, encoded, strict=True) if len(p) <= PIECE_CACHED_CHARS)
            if len(current) > PIECE_CACHE // 2:
                self._old_pieces, self._pieces = current, {}
            return out  # type: ignore[return-value]

    def _encode_pieces(self, pieces: list[str]) -> list[bytes]:
        """Token ids of each piece as the tokenizer's model gives them for the piece alone (native int32 bytes).

        The pieces are tokenized joined by the :func:`separator` in runs of about :data:`JOINED_CHARS` characters
        (one tokenizer item per piece costs more than its merging), and each run's tokens are cut at the
        separator's. A piece holding the separator, a run not cut as many times as it was joined, and every piece
        of a tokenizer without a separator are tokenized alone.
        """
        alone = list(range(len(pieces)))
        out: list[bytes] = [b""] * len(pieces)
        if self._separator is not None:
            mark, mark_id = self._separator
            alone = [i for i, piece in enumerate(pieces) if mark in piece]
            runs: list[list[int]] = []
            size = JOINED_CHARS
            for i in [i for i, piece in enumerate(pieces) if mark not in piece]:
                if size + len(pieces[i]) > JOINED_CHARS:
                    runs.append([])
                    size = 0
                runs[-1].append(i)
                size += len(pieces[i]) + 1
            joined = [mark.join([pieces[i] for i in run]) for run in runs]
            for run, enc in zip(runs, self._encode_batch(joined), strict=True):
                ids = np.array(enc.ids, dtype=np.int32)
                ends = np.flatnonzero(ids == mark_id)
                if len(ends) != len(run) - 1:  # not cut at every separator (no character no merge involves does that)
                    alone += run
                    continue
                # each piece's ids are the bytes between two separators (a separator's bytes are left out)
                data = ids.tobytes()
                cuts = (ends * _ID_BYTES).tolist()
                begins = [0, *(cut + _ID_BYTES for cut in cuts)]
                for i, begin, end in zip(run, begins, [*cuts, len(data)], strict=True):
                    out[i] = data[begin:end]
        if alone:
            encodings = self._encode_batch([pieces[i] for i in alone])
            for i, enc in zip(alone, encodings, strict=True):
                out[i] = np.array(enc.ids, dtype=np.int32).tobytes()
        return out

    def _encode_batch(self, texts: list[str]) -> list[Any]:
        """The model's encodings of ``texts`` (without offsets where the installed ``tokenizers`` can leave them)."""
        fast = getattr(self._raw, "encode_batch_fast", None)  # tokenizers 0.20 and later
        return (fast or self._raw.encode_batch)(texts, add_special_tokens=False)


def _unit(vec: np.ndarray) -> np.ndarray:
    """``vec`` scaled to length 1 (the zero vector stays zero)."""
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


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


def quantize_rows(vectors: np.ndarray) -> np.ndarray:
    """Int8 ``(n, dim)``: each row of ``vectors`` as :func:`quantize` rounds it (a zero row stays zero)."""
    return np.clip(np.rint(vectors * 127.0), -127, 127).astype(np.int8)


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
