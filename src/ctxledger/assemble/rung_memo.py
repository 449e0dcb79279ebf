"""The representation ladder's rungs kept in the store, so a new process reads them instead of rebuilding them.

A unit's rungs (its excerpts at each size, the extraction, the memory and the reference, :mod:`.represent`)
depend only on the unit's turns and marks, the token counter, the request's focus and query, the secret
scanner and whether the model has the ``recall`` tool. Building them reads the unit's raw bytes and runs the
excerpter and the extractors, which is most of a new process's first call on a long history; what the same
inputs gave before is read back instead.

* :func:`memo_key`: the sha256 of those inputs plus :data:`RUNGS_STAMP`, the digest of the code that builds
  rungs (so rungs built by other code are never read back: they are built again under a new key);
* :func:`encode_rungs` / :func:`decode_rungs`: MessagePack via msgspec; a body that does not decode is
  treated as absent.

The store keeps them by ``(tenant, key)`` with the conversation they came from (``rung_memo`` in SQL);
retention drops a conversation's rungs whenever it rewrites or removes one of its records, since rungs hold
excerpts of record content.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ctxledger import fetch_hints, represent, units
from ctxledger.assemble.costing import turn_key
from ctxledger.serialize import base as serialize_base
from ctxledger.serialize.base import Turn
from ctxledger.units import Unit

RUNGS_FORMAT = 1
"""Version of the stored shape (:class:`Rung` as MessagePack)."""


@dataclass(slots=True)
class Rung:
    """A representation of a unit before utility is applied (:mod:`.represent`).

    Attributes:
        representation: ``excerpt``, ``extraction``, ``memory`` or ``reference``.
        transform: what the manifest records (``excerpt@512``, ``extraction:logs`` …).
        factor: the share of verbatim's utility it keeps (below 1).
        turns: the unit's turns with the large ones replaced.
        turn_tokens: tokens of each turn (the coster's count).
        detail: per record its sha256, locators and (for extractions) the promotion decision, plus the unit's
            ``error_lines`` and ``error_lines_kept``.
        derived: :func:`~ctxledger.assemble.costing.turn_key` → tokens of turns priced at a reference rate
            (a ``FixedCoster``'s derived costs).
    """

    representation: str
    transform: str
    factor: float
    turns: tuple[Turn, ...]
    turn_tokens: tuple[int, ...]
    detail: dict[str, Any]
    derived: dict[str, int] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Tokens of all its turns."""
        return sum(self.turn_tokens)


def _code_digest() -> str:
    """Digest of the source that builds rungs, with the tokenizer packages' versions.

    The files: this module, the ladder, the represent package and the texts the rungs embed (fetch hints,
    data blocks, turns).
    """
    digest = hashlib.sha256(f"rungs {RUNGS_FORMAT}".encode())
    files = [Path(__file__), Path(__file__).with_name("represent.py")]
    files += sorted(Path(inspect.getfile(represent)).parent.rglob("*.py"))
    files += [Path(inspect.getfile(m)) for m in (fetch_hints, units, serialize_base)]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for package in ("quicktok", "tiktoken"):
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "none"
        digest.update(f"\0{package}={version}".encode())
    return digest.hexdigest()[:16]


RUNGS_STAMP = _code_digest()
"""What rungs built by this code are stamped with (part of every :func:`memo_key`)."""


def memo_key(unit: Unit, inputs: Sequence[Any]) -> str:
    """The stored key of ``unit``'s rungs built with ``inputs`` (counter id, focus, query, scanner, recall).

    It covers the unit's id, each turn's ref and :func:`~ctxledger.assemble.costing.turn_key`, the unit's
    marks and :data:`RUNGS_STAMP`; ``inputs`` must be plain values (str, int, bool, None, tuples of them).
    """
    body = [
        RUNGS_STAMP,
        unit.id,
        [[t.ref, turn_key(t)] for t in unit.turns],
        sorted(unit.transforms.items()),
        list(inputs),
    ]
    return hashlib.sha256(msgspec.json.encode(body)).hexdigest()


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(list[Rung])


def encode_rungs(rungs: Sequence[Rung]) -> bytes:
    """The stored body of a unit's rungs."""
    return _ENCODER.encode(list(rungs))


def decode_rungs(body: bytes) -> list[Rung] | None:
    """Rungs back from :func:`encode_rungs`; ``None`` for a body that does not decode to them."""
    try:
        return _DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
