"""Rehydration: from a reference or an excerpt's locator back to the exact stored bytes.

Seed 004 §4.11: raw artifacts come back only after selection, bounded, and exactly. "Exactly" is the
contract here: a whole blob is returned only if it still hashes to its name, and a range is cut only from
a parent whose hash has just been checked, so a range can never silently come from altered bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.errors import InputError, IntegrityError
from ctxledger.hashing import sha256_hex
from ctxledger.represent._lines import Locator
from ctxledger.store.base import BlobStore

Reference = Locator | Mapping[str, Any] | str
"""A :class:`Locator`, its dict form (as in ``ToolMemory.locators``), or a sha256 (bare or ``sha256:``)."""

ByteRange = tuple[int | None, int | None]
"""``(start, end)`` byte offsets (0-based, end exclusive); a missing start is 0, a missing end the content's end."""


def parse_byte_range(text: str, *, source: str = "<api>") -> ByteRange:
    """Parse ``"START:END"``, ``"START:"`` or ``":END"`` (0-based, end exclusive), as ``ctxledger rehydrate --bytes``.

    An open bound means what the service's and the MCP server's missing ``start`` / ``end`` mean: a missing start
    is 0, a missing end the content's end (``None`` in the result; :meth:`ctxledger.ledger.Ledger.rehydrate`
    reads it so).

    Raises:
        InputError: (field ``byte_range``) not one colon between non-negative integers (either may be left out,
            not both), or ``START > END``; a reversed range in the words of :func:`check_range`.
    """
    start, sep, end = (part.strip() for part in text.partition(":"))
    if not sep or not (start or end) or not all(p.isdigit() for p in (start, end) if p):
        raise InputError(
            f"byte range must look like START:END, START: or :END (non-negative integers), got {text!r}",
            source=source,
            field="byte_range",
        )
    a, b = (int(start) if start else None), (int(end) if end else None)
    problem = None if a is None or b is None else _order_problem(a, b)
    if problem is not None:
        raise InputError(problem, source=source, field="byte_range")
    return a, b


def _target(ref: Reference) -> tuple[str, tuple[int, int] | None]:
    if isinstance(ref, str):
        sha = ref.removeprefix("sha256:")
        return sha, None
    locator = ref if isinstance(ref, Locator) else Locator.from_dict(ref)
    return locator.sha256, (locator.byte_start, locator.byte_end)


def rehydrate(blobs: BlobStore, locator_or_sha: Reference, *, byte_range: ByteRange | None = None) -> bytes:
    """Return exactly the stored bytes a reference names, or the requested range of them.

    Args:
        blobs: the blob store holding the artifact.
        locator_or_sha: a :class:`Locator` (its own ``[byte_start, byte_end)`` is the default range), a
            locator dict, or a sha256 (bare hex or ``sha256:<hex>``; default: the whole blob).
        byte_range: ``(start, end)`` byte offsets into the whole blob (:data:`ByteRange`: 0-based, end
            exclusive, a missing bound open); overrides the locator's range.

    Returns:
        The bytes. Whole blobs and ranges alike are cut from a parent whose sha256 was verified.

    Raises:
        RecordNotFound: no blob with that sha256.
        IntegrityError: the stored bytes no longer hash to their name.
        InputError: the locator is malformed or the range falls outside the blob.
    """
    sha, own_range = _target(locator_or_sha)
    wanted = byte_range if byte_range is not None else own_range
    whole = blobs.get(sha)
    if sha256_hex(whole) != sha:
        raise IntegrityError(f"blob {sha} no longer matches its sha256")
    return cut_range(whole, wanted, f"blob {sha[:16]}")


def cut_range(data: bytes, wanted: ByteRange | None, name: str) -> bytes:
    """The bytes of ``data`` (the content of ``name``) that ``wanted`` names; all of them for ``None``.

    Raises:
        InputError: the range is not within ``data`` (:func:`check_range`).
    """
    if wanted is None:
        return data
    start = 0 if wanted[0] is None else wanted[0]
    end = len(data) if wanted[1] is None else wanted[1]
    check_range(start, end, len(data), name)
    return data[start:end]


def check_range(start: int, end: int, size: int, name: str) -> None:
    """Check that ``[start, end)`` is a byte range within ``size`` bytes of ``name``.

    Every surface that takes a range (library, CLI, HTTP service, MCP server) checks it here, so a bad range
    gets the same words everywhere.

    Raises:
        InputError: (field ``byte_range``) a negative offset, a start after the end, or an end past ``size``;
            the message says which.
    """
    problem = _order_problem(start, end)
    if problem is None and end > size:
        problem = f"byte range {start}:{end} ends past the end of {name} ({size} bytes)"
    if problem is not None:
        raise InputError(problem, field="byte_range")


def bound_at_fault(span: ByteRange) -> int:
    """Which bound of a range :func:`check_range` refused is at fault: ``0`` (its start) or ``1`` (its end).

    A negative bound is at fault; else a start after the end (a missing end is the content's end); else the end
    (it runs past the content).
    """
    start, end = span
    if start is not None and start < 0:
        return 0
    if end is not None and end < 0:
        return 1
    if start is not None and (end is None or start > end):
        return 0
    return 1


def as_given(exc: InputError, span: ByteRange | None, *, source: str, names: tuple[str, str] | None) -> InputError:
    """``exc`` re-addressed to the range as the caller gave it, when it refuses that range (else ``exc``).

    The library names its parameter ``byte_range``; an edge names what its user typed: ``names`` are the edge's
    own fields for the start and the end (the HTTP query's and the MCP tool's ``start`` / ``end``: the one at
    fault, :func:`bound_at_fault`), or ``None`` when ``source`` alone names it (the CLI's ``--bytes``).
    """
    if exc.field != "byte_range" or span is None:
        return exc
    field = None if names is None else names[bound_at_fault(span)]
    return InputError(exc.problem, source=source, field=field)


def _order_problem(start: int, end: int) -> str | None:
    """What is wrong with ``[start, end)`` whatever the content's size (``None``: nothing)."""
    if start < 0 or end < 0:
        return f"byte range {start}:{end} has a negative offset"
    if start > end:
        return f"byte range start {start} is after its end {end}"
    return None
