"""Canonical JSON and content hashes.

Two things in ctxledger are named by a hash: raw tool outputs in the blob store (sha256 of the exact
bytes) and derived values such as a serialized provider payload or a policy (sha256 of their
*canonical JSON*). "The same snapshot and the same policy give the same payload hash" only
holds if there is exactly one canonical form, so this module is that contract:

* keys sorted, no insignificant whitespace (``separators=(",", ":")``);
* UTF-8, non-ASCII kept as is (``ensure_ascii=False``);
* NaN and infinities are refused (they have no JSON form);
* the digest is written with its algorithm tag, ``"sha256:<hex>"``, so a later change of algorithm
  is visible in stored data.

Long manifests repeat most of their entries from one call to the next; :class:`EncodedList` lets the
code that builds such a list hand over each item's canonical JSON (cached by the builder), and
:func:`canonical_json` of a mapping holding one joins those texts instead of encoding the items again.
The text is the same either way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

ALGORITHM = "sha256"


class EncodedList(list[Any]):
    """A list whose items come with their canonical JSON, made when the items were built.

    The items are treated as immutable: the texts are used only while the list holds the very item
    objects it was made with (same length, same objects in the same places); after any change to the
    list itself they are ignored and the items are encoded afresh.

    Args:
        items: the JSON-able items.
        texts: ``canonical_json(item)`` of each item, in the same order.

    Raises:
        ValueError: ``texts`` and ``items`` differ in length.
    """

    def __init__(self, items: Iterable[Any], texts: Sequence[str]) -> None:
        super().__init__(items)
        if len(texts) != len(self):
            raise ValueError(f"EncodedList: {len(self)} items but {len(texts)} texts")
        self.texts = tuple(texts)
        self.originals = tuple(self)

    def encoded(self) -> str | None:
        """The canonical JSON of the list from the items' texts, or ``None`` once the list was changed."""
        if len(self) != len(self.originals) or any(a is not b for a, b in zip(self, self.originals, strict=True)):
            return None
        return "[" + ",".join(self.texts) + "]"


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (see the module docstring).

    A mapping with string keys whose values include an :class:`EncodedList` is written key by key in
    sorted order, joining that list's item texts (the same text ``json.dumps`` would give).

    Raises:
        ValueError: if ``value`` holds NaN or an infinity.
        TypeError: if ``value`` holds something JSON cannot represent.
    """
    if (
        isinstance(value, dict)
        and any(isinstance(v, EncodedList) for v in value.values())
        and all(isinstance(k, str) for k in value)
    ):
        parts = []
        for key in sorted(value):
            item = value[key]
            text = item.encoded() if isinstance(item, EncodedList) else None
            parts.append(_dumps(key) + ":" + (text if text is not None else _dumps(item)))
        return "{" + ",".join(parts) + "}"
    return _dumps(value)


def sha256_hex(data: bytes) -> str:
    """Return the bare hex sha256 digest of ``data`` (64 characters)."""
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """Return ``"sha256:<hex>"`` of the canonical JSON of ``value`` (UTF-8 encoded)."""
    return f"{ALGORITHM}:{sha256_hex(canonical_json(value).encode('utf-8'))}"


_PLAIN_ENCODER = msgspec.json.Encoder(order="sorted")


def plain_content_hash(value: Any) -> str:
    """:func:`content_hash` of a value without floats, encoded by msgspec (faster on long strings).

    For strings, ``None``, booleans, integers, lists and string-keyed dicts of them msgspec writes the same
    canonical text as :func:`canonical_json`; floats it writes differently, so they are refused.

    Raises:
        TypeError: ``value`` holds something else (a float included), so the caller uses :func:`content_hash`.
        UnicodeEncodeError: a string holds a lone surrogate (as :func:`content_hash` raises).
    """
    if not _plain(value):
        raise TypeError("plain_content_hash: only strings, None, booleans, integers, lists and str-keyed dicts")
    return f"{ALGORITHM}:{sha256_hex(_PLAIN_ENCODER.encode(value))}"


def quick_content_hash(value: Any) -> str:
    """:func:`content_hash` of ``value`` (the same ``"sha256:<hex>"``), by :func:`plain_content_hash` when it can.

    Raises:
        ValueError, TypeError, UnicodeEncodeError: as :func:`content_hash`.
    """
    try:
        return plain_content_hash(value)
    except TypeError:  # a float, or an object only json encodes
        return content_hash(value)


def _plain(value: Any) -> bool:
    """Whether ``value`` is made of strings, ``None``, booleans, integers, lists, tuples and str-keyed dicts only.

    Those msgspec writes as :func:`canonical_json` does; a float it writes otherwise, and a set, bytes or a date it
    writes where ``json`` refuses. Walked without recursion.
    """
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            for child in item.values():  # the scalars are told here, only containers go on the stack
                kind = type(child)
                if not (kind is str or kind is int or kind is bool or child is None):
                    push(child)
        elif kind is list or kind is tuple:
            extend(item)
        elif not (kind is str or kind is int or kind is bool or item is None):
            return False
    return True


def text_hash(text: str) -> str:
    """Return ``"sha256:<hex>"`` of a text's UTF-8 bytes."""
    return f"{ALGORITHM}:{sha256_hex(text.encode('utf-8'))}"
