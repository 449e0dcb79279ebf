"""What every extractor receives and returns, and how an extraction becomes a ToolMemory.

An extractor is a pure function ``(Source) -> Extraction | None``: it returns ``None`` when the artifact
is not of its kind, so the dispatcher can try the next one. The :class:`Extraction` holds only what the
extractor knows (summary, fields, confidence, freshness, locators); :func:`to_memory` adds the envelope,
trust and staleness that every memory carries (seed 004 §4.3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ctxledger.records import Freshness, ToolArtifact, ToolMemory, Trust
from ctxledger.represent._lines import LineIndex

EXTRACTOR_VERSION = "1"

STALE_AFTER: Mapping[Freshness, timedelta | None] = {
    Freshness.VOLATILE: timedelta(minutes=15),
    Freshness.SESSION: None,
    Freshness.BOUNDED: timedelta(days=1),
    Freshness.DURABLE: None,
    Freshness.PERMANENT: None,
}
"""Default ``stale_after - observed_at`` per freshness class; ``None`` = no clock (session-bound or
version-bound: staleness then comes from a session end or a ``source_version`` change)."""

_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "what",
        "which",
        "from",
        "that",
        "this",
        "are",
        "was",
        "were",
        "have",
        "has",
        "does",
        "show",
        "find",
        "get",
        "list",
        "please",
        "about",
        "into",
        "need",
        "want",
        "can",
        "you",
        "your",
        "there",
        "their",
        "them",
        "then",
        "than",
        "how",
        "why",
        "when",
        "where",
        "who",
        "will",
        "would",
        "could",
        "should",
        "all",
        "any",
        "some",
        "more",
        "most",
        "other",
    ]
)
_TERM_RE = re.compile(r"[\w][\w.\-/:@]*[\w]|\w")


def query_terms(query: str) -> tuple[str, ...]:
    """Casefolded search terms of a query: words of 3+ characters (2+ with a digit), no stopwords."""
    terms: list[str] = []
    for raw in _TERM_RE.findall(query.casefold()):
        long_enough = len(raw) >= 3 or (len(raw) == 2 and any(c.isdigit() for c in raw))
        if long_enough and raw not in _STOPWORDS and raw not in terms:
            terms.append(raw)
    return tuple(terms)


def term_hits(text: str, terms: Sequence[str]) -> int:
    """How many distinct ``terms`` occur in ``text`` (case-insensitive substring match)."""
    folded = text.casefold()
    return sum(1 for t in terms if t in folded)


@dataclass(frozen=True, slots=True)
class Source:
    """One artifact as extractors see it.

    Attributes:
        artifact: the ToolArtifact record.
        data: its exact bytes.
        text: ``data`` decoded as UTF-8 (undecodable bytes replaced).
        index: line/byte coordinates of ``data``.
        terms: the query's search terms (see :func:`query_terms`).
        observed_at: when the output was observed (aware UTC).
    """

    artifact: ToolArtifact
    data: bytes
    text: str
    index: LineIndex
    terms: tuple[str, ...]
    observed_at: datetime

    def locate(self, byte_start: int, byte_end: int, **extra: Any) -> dict[str, Any]:
        """Locator dict for bytes ``[byte_start, byte_end)``, plus extra keys (e.g. ``json_pointer``)."""
        loc = self.index.locator(
            self.artifact.id, self.artifact.sha256, byte_start, byte_end, self.artifact.source_version
        )
        return {**loc.to_dict(), **extra}

    def locate_lines(self, first: int, last: int | None = None, **extra: Any) -> dict[str, Any]:
        """Locator dict for lines ``first..last`` (1-based, inclusive)."""
        return self.locate(*self.index.line_span(first, last), **extra)

    def whole(self) -> dict[str, Any]:
        """Locator dict for the whole artifact."""
        return self.locate(0, len(self.data))


@dataclass(frozen=True, slots=True)
class Extraction:
    """What one extractor found in one artifact.

    Attributes:
        kind: the extractor (``json``, ``csv``, ``logs``, ``testrun``, ``search``).
        summary: one short model-facing paragraph.
        fields: structured, JSON-able facts (extractor-specific; see each module).
        confidence: 0..1, how sure the parse is (1.0 = exact parse of a known format).
        freshness: the freshness class of what was observed.
        locators: locator dicts back into the artifact (see :class:`~ctxledger.represent.Locator`).
    """

    kind: str
    summary: str
    fields: Mapping[str, Any]
    confidence: float
    freshness: Freshness
    locators: tuple[Mapping[str, Any], ...] = field(default=())


def to_memory(source: Source, found: Extraction, *, memory_id: str, observed_at: datetime) -> ToolMemory:
    """Build the ToolMemory of an extraction, in the artifact's envelope (tenant, branch, visibility …).

    ``created_at`` is ``observed_at`` so that the same inputs always give the same record.
    """
    art = source.artifact
    ttl = STALE_AFTER[found.freshness]
    revalidate = found.freshness in (Freshness.VOLATILE, Freshness.BOUNDED)
    return ToolMemory(
        id=memory_id,
        tenant_id=art.tenant_id,
        conversation_id=art.conversation_id,
        branch_id=art.branch_id,
        created_at=observed_at,
        owner_participant_id=art.owner_participant_id,
        owner_model_run_id=art.owner_model_run_id,
        visibility=art.visibility,
        shared_with=art.shared_with,
        privacy_class=art.privacy_class,
        trust=Trust.TOOL_RESULT,
        summary=found.summary,
        fields={"extractor": found.kind, **found.fields},
        confidence=found.confidence,
        trust_source=f"tool_result:{art.name}" if art.name else "tool_result",
        freshness=found.freshness,
        observed_at=observed_at,
        stale_after=observed_at + ttl if ttl is not None else None,
        revalidation_tool=(art.name or None) if revalidate else None,
        source_artifact_ids=(art.id,),
        source_version=art.source_version,
        locators=found.locators,
        meta={"extractor": found.kind, "extractor_version": EXTRACTOR_VERSION},
    )


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
