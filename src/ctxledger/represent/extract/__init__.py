"""Extractors: from a raw ToolArtifact to a compact, model-facing ToolMemory with provenance.

Extractors turn artifacts into ToolMemories with provenance locators. One module per kind:
:mod:`.json_` (keys, counts, the records asked about), :mod:`.csv_` (schema, row count, the rows asked
about), :mod:`.logs` (errors, warnings, exit status), :mod:`.testrun` (failures with file and line) and
:mod:`.search` (ids, titles, ranks, observed_at). :func:`extract` dispatches on the artifact's media type,
then on the bytes themselves:

* JSON (declared ``application/json`` / ``+json``, or parseable): search results if it holds a result
  list, otherwise generic JSON;
* declared CSV/TSV: CSV;
* other text: a test run if a test runner printed it, else CSV if it sniffs as CSV, else logs;
* binary bytes (a NUL in the first 8 KiB) or empty output: no memory.

Whether a memory is then *used* is a policy decision: see :func:`ctxledger.represent.promote.promote`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ctxledger.errors import InputError, IntegrityError
from ctxledger.hashing import sha256_hex
from ctxledger.records import ToolArtifact, ToolMemory
from ctxledger.represent._lines import LineIndex
from ctxledger.represent.extract._base import Extraction, Source, query_terms, to_memory
from ctxledger.represent.extract.csv_ import CSV_MEDIA_TYPES, extract_csv
from ctxledger.represent.extract.json_ import extract_json, parse_json
from ctxledger.represent.extract.logs import extract_logs
from ctxledger.represent.extract.search import extract_search
from ctxledger.represent.extract.testrun import extract_testrun

Extractor = Callable[[Source], Extraction | None]


def make_source(artifact: ToolArtifact, data: bytes, *, query: str, observed_at: datetime) -> Source:
    """Check the inputs and wrap them for the extractors.

    Raises:
        InputError: ``observed_at`` is naive, or the artifact has no sha256.
        IntegrityError: ``data`` does not hash to ``artifact.sha256``.
    """
    if observed_at.tzinfo is None or observed_at.utcoffset() is None:
        raise InputError("observed_at must be an aware UTC datetime", source="<api>", field="observed_at")
    if not artifact.sha256:
        raise InputError(f"artifact {artifact.id} has no sha256", source="<api>", field="sha256")
    if sha256_hex(data) != artifact.sha256:
        raise IntegrityError(f"bytes given for artifact {artifact.id} do not hash to {artifact.sha256}")
    text = data.decode("utf-8", errors="replace")
    return Source(artifact, data, text, LineIndex(data), query_terms(query), observed_at)


def _json_chain(source: Source) -> list[Extractor] | None:
    parsed = parse_json(source.data)
    if parsed is None:
        return None
    return [lambda s: extract_search(s, parsed), lambda s: extract_json(s, parsed)]


def extractors_for(source: Source) -> list[Extractor]:
    """The extractors to try for this source, in order (see the module docstring)."""
    if b"\x00" in source.data[:8192] or not source.data.strip():
        return []
    media = source.artifact.media_type.split(";")[0].strip().lower()
    if media in CSV_MEDIA_TYPES:
        return [extract_csv]
    json_chain = _json_chain(source)
    if json_chain is not None:
        return json_chain
    return [extract_testrun, extract_csv, extract_logs]


def run(source: Source) -> Extraction | None:
    """The first extraction any applicable extractor returns, or ``None``."""
    for extractor in extractors_for(source):
        found = extractor(source)
        if found is not None:
            return found
    return None


def extract(
    artifact: ToolArtifact, data: bytes, *, query: str = "", memory_id: str, observed_at: datetime
) -> ToolMemory | None:
    """Turn one artifact into a ToolMemory with provenance locators, or ``None`` if nothing applies.

    Args:
        artifact: the ToolArtifact record (its envelope, tool name, media type, source version).
        data: the artifact's exact bytes (must hash to ``artifact.sha256``).
        query: what the current goal asks about; records/rows/results matching its terms are kept.
        memory_id: id for the new ToolMemory.
        observed_at: when the output was observed (aware UTC); also the memory's ``created_at``.

    Returns:
        A ToolMemory in the artifact's tenant/conversation/branch/visibility, ``trust=tool_result``,
        ``source_artifact_ids=(artifact.id,)``, with ``fields["extractor"]`` naming the extractor and
        ``locators`` as locator dicts; ``None`` for empty or binary output.

    Raises:
        InputError: naive ``observed_at`` or missing sha256.
        IntegrityError: ``data`` does not match the artifact's sha256.
    """
    source = make_source(artifact, data, query=query, observed_at=observed_at)
    found = run(source)
    return None if found is None else to_memory(source, found, memory_id=memory_id, observed_at=observed_at)


__all__ = ["Extraction", "Extractor", "Source", "extract", "extractors_for", "make_source", "run"]
