"""How a retained record says what happened to it (seed 004 §4.15: cleanup keeps references working).

A record a retention rule redacted or reduced to its hash keeps its id, envelope and ``seq``; its content is
replaced by a notice and ``meta["retention"]`` says what was done::

    {"rule": "raw-outputs-30d", "action": "redact", "at": "2026-12-01T20:00:00Z",
     "sha256": "<the original content's sha256>", "size_bytes": 5120}     # size only for redact

A memory whose source artifact was redacted or deleted keeps its own content and names what happened to
each source in ``meta["retention_sources"]`` (artifact id → the same mapping), so its rehydration and its
explanation say "redacted by retention rule R at T" instead of failing or pointing at bytes that are gone.
``meta`` never reaches a provider payload; the notice text does, in place of the content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ctxledger.records import Record, ToolMemory

META_KEY = "retention"
"""``meta`` key of a retained record's :class:`Retained` mapping."""
SOURCES_KEY = "retention_sources"
"""``meta`` key of a memory's retained sources (artifact id → :class:`Retained` mapping)."""

TRANSFORM = "retained"
"""Manifest transform of a turn whose content a retention rule replaced."""

_VERB = {"redact": "redacted", "hash_only": "reduced to its sha256", "delete": "deleted"}


def format_at(at: datetime) -> str:
    """``2026-12-01T20:00:00Z``: the time a notice names (UTC, whole seconds)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Retained:
    """What a retention rule did to a record.

    Attributes:
        rule: the rule's name (``"forget"`` for a request to be forgotten).
        action: ``redact``, ``hash_only`` or ``delete``.
        at: when (``format_at`` form).
        sha256: bare-hex sha256 of the content before (``None`` when it had none).
        size_bytes: its size (``redact`` only; ``hash_only`` keeps the hash alone).
    """

    rule: str
    action: str
    at: str
    sha256: str | None = None
    size_bytes: int | None = None

    @property
    def sentence(self) -> str:
        """``redacted by retention rule R at T`` (``reduced to its sha256 …``, ``deleted …``)."""
        return f"{_VERB.get(self.action, self.action)} by retention rule {self.rule} at {self.at}"

    @property
    def notice(self) -> str:
        """The text that stands in for the content in a payload (never the content itself)."""
        kept = []
        if self.size_bytes is not None:
            kept.append(f"{self.size_bytes} bytes")
        if self.sha256:
            kept.append(f"sha256:{self.sha256}")
        return f"[content {self.sentence}" + (f"; was {', '.join(kept)}" if kept else "") + "]"

    def as_dict(self) -> dict[str, Any]:
        """The ``meta`` form."""
        out: dict[str, Any] = {"rule": self.rule, "action": self.action, "at": self.at}
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        if self.size_bytes is not None:
            out["size_bytes"] = self.size_bytes
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Retained:
        """Inverse of :meth:`as_dict` (unknown keys ignored)."""
        size = data.get("size_bytes")
        return cls(
            rule=str(data.get("rule", "")),
            action=str(data.get("action", "")),
            at=str(data.get("at", "")),
            sha256=data.get("sha256"),
            size_bytes=size if isinstance(size, int) else None,
        )


def retained(record: Record | None) -> Retained | None:
    """What retention did to the record's own content, or ``None`` when it is intact."""
    if record is None:
        return None
    data = record.meta.get(META_KEY) if isinstance(record.meta, Mapping) else None
    return Retained.from_dict(data) if isinstance(data, Mapping) else None


def retained_sources(record: Record) -> dict[str, Retained]:
    """A memory's retained sources: artifact id → what retention did to it (empty for other records)."""
    if not isinstance(record, ToolMemory) or not isinstance(record.meta, Mapping):
        return {}
    data = record.meta.get(SOURCES_KEY)
    if not isinstance(data, Mapping):
        return {}
    return {str(k): Retained.from_dict(v) for k, v in data.items() if isinstance(v, Mapping)}


def source_retained(memory: Record, artifact_id: str, artifact: Record | None) -> Retained | None:
    """What retention did to one source of ``memory``: the artifact's own state, else the memory's note."""
    return retained(artifact) or retained_sources(memory).get(artifact_id)
