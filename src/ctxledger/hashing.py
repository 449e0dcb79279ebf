"""Canonical JSON and content hashes.

Two things in ctxledger are named by a hash: raw tool outputs in the blob store (sha256 of the exact
bytes) and derived values such as a serialized provider payload or a policy (sha256 of their
*canonical JSON*). "The same snapshot and the same policy give the same payload hash" (DESIGN §5) only
holds if there is exactly one canonical form, so this module is that contract:

* keys sorted, no insignificant whitespace (``separators=(",", ":")``);
* UTF-8, non-ASCII kept as is (``ensure_ascii=False``);
* NaN and infinities are refused (they have no JSON form);
* the digest is written with its algorithm tag, ``"sha256:<hex>"``, so a later change of algorithm
  is visible in stored data.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

ALGORITHM = "sha256"


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (see the module docstring).

    Raises:
        ValueError: if ``value`` holds NaN or an infinity.
        TypeError: if ``value`` holds something JSON cannot represent.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(data: bytes) -> str:
    """Return the bare hex sha256 digest of ``data`` (64 characters)."""
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """Return ``"sha256:<hex>"`` of the canonical JSON of ``value`` (UTF-8 encoded)."""
    return f"{ALGORITHM}:{sha256_hex(canonical_json(value).encode('utf-8'))}"


def text_hash(text: str) -> str:
    """Return ``"sha256:<hex>"`` of a text's UTF-8 bytes."""
    return f"{ALGORITHM}:{sha256_hex(text.encode('utf-8'))}"
