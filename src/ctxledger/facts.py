"""Write-path facts: what depends on one record alone, computed once when it is written and stored with it.

A model call must not pay for the history it does not send, and a new process must not re-read every text
of it. So every fact about a record that depends on that record alone (and on records written before it) is
computed on append and kept beside the record (the store's ``record_facts`` table, the in-memory store's
map); the assembler reads it instead of rescanning:

* **secret findings** (:attr:`RecordFacts.texts`, :attr:`RecordFacts.block`, :attr:`RecordFacts.name`): what
  the secret scanner (:func:`ctxledger.policy.secrets.default_scanner`) finds in each model-facing text the
  record renders to: its plain turn texts (message content parts, a call's arguments, a tool result's raw
  text), the ``<data>`` block a memory, compaction, checkpoint or summary message is sent as, and a speaker
  name. Each finding keeps the scanner's fields (line number and secret type; never the secret).
* **instruction-like phrase** (:attr:`RecordFacts.instruction`): the first phrase
  :func:`ctxledger.policy.injection.instruction_like` finds in the text of a record shown as data (a tool
  result; a memory, compaction, checkpoint or summary message; a retrieved or untrusted message), or ``None``.
  Other records' text is never searched for one (they are instructions or conversation, not data).
* **lexical terms** (:attr:`RecordFacts.term_keys`, :attr:`RecordFacts.term_counts`, :attr:`RecordFacts.length`):
  the stemmed BM25 terms of its relevance text with every line holding a secret redacted
  (:func:`ctxledger.assemble.relevance.tokenize`, counted by :func:`ctxledger.assemble.relevance.term_counts`),
  stored in the lexical index's own form (:func:`ctxledger.assemble.term_keys.keyed_terms`: each term's
  64-bit key and its frequency), so the index is built from stored bytes without decoding a term and never
  holds a secret's value.
* **semantic vector** (:attr:`RecordFacts.vector`): the unit vector of its relevance text under the packaged static
  embedding model (:mod:`ctxledger.assemble.semantic`), int8-quantised; empty without the ``semantic`` extra.
* **derived restrictions** (:attr:`RecordFacts.sources`): every record whose restrictions a derived record
  inherits (its sources, transitively, stopping at a ``safe_summary``), nearest first. Sources are earlier
  records, so the list is known at append.

The facts are stamped with :data:`DETECTOR_STAMP`, a digest of the code that computed them (the modules of
the secret scanner, the instruction-like patterns and the regex structure both read, the renderers, the tokenizer,
its term counter and the terms' keys, the embedding, and the cutting of large texts into windows both use) and of
the versions of detect-secrets, bm25s and PyStemmer and of the embedding model (``none`` without it), so
installing or upgrading the ``semantic`` extra makes the stored facts stale and they are recomputed with vectors.
Facts with another stamp were computed by another detector: readers recompute them (and store the result) instead
of trusting them.

The computation calls the detectors and renderers; it does not copy them. It imports only
leaf modules (records, the scanner, the instruction-like patterns, the unit renderers, the tokenizer and its term
counter, the embedding), none of which imports the store, the policy stages or the assembler, so the store can call
it on append.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import msgspec

import ctxledger._blas as blas
import ctxledger._fact_workers as fact_workers
import ctxledger.assemble.relevance as relevance
import ctxledger.assemble.semantic as semantic
import ctxledger.assemble.term_keys as term_keys
import ctxledger.policy.injection as injection
import ctxledger.policy.regex_shape as regex_shape
import ctxledger.policy.secrets as secrets
import ctxledger.text_windows as text_windows
import ctxledger.units as units
from ctxledger.errors import BlobNotFound, InputError, IntegrityError
from ctxledger.records import (
    Branch,
    Checkpoint,
    Compaction,
    Conversation,
    Message,
    Participant,
    Record,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    Trust,
)
from ctxledger.retention.state import retained

FACTS_FORMAT = "5"
"""Version of the stored facts' shape and derivation (part of :data:`DETECTOR_STAMP`)."""

Finding = secrets.Finding
"""A secret finding as the scanner reports it (line number and type; never the value)."""

BlobReader = Callable[[str], bytes]

BatchBlobReader = Callable[[Sequence[str]], Mapping[str, bytes]]
"""Returns the intact stored bytes of each readable name, by name (a blob store's ``get_many``)."""


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """The write-path facts of one record (see the module docstring).

    Attributes:
        record_id: the record.
        stamp: the :data:`DETECTOR_STAMP` of the code that computed them.
        texts: secret findings per plain model-facing text of the record, in render order (a message's
            content parts, a call's arguments, a tool result's text); ``()`` for records without such text.
        block: secret findings in the ``<data>`` block the record renders as (memories, compactions,
            checkpoints, summary messages); ``None`` when it renders as no block.
        name: secret findings in its speaker name (a message's ``name``, a participant's ``name``).
        instruction: the first instruction-like phrase in its text (at most 80 characters), or ``None``; searched
            only in records shown as data (module docstring).
        term_keys: the :func:`~ctxledger.assemble.term_keys.term_key` of each distinct stemmed lexical term of
            its relevance text, little-endian int64 bytes (``b""`` when it has none).
        term_counts: each of those terms' frequency, little-endian int32 bytes in the same order.
        length: number of terms (the BM25 document length it contributes).
        vector: the int8 unit vector of its relevance text (:func:`ctxledger.assemble.semantic.quantize`);
            ``b""`` when it has no text or no embedding model is installed.
        sources: ids of the records whose restrictions it inherits (derived records only; nearest first).
        sources_complete: every source named on the way was found when the facts were computed (``False``: one
            was not stored yet, so a reader walks the sources instead of trusting ``sources``).
        raw_readable: for a tool result, whether its raw bytes were readable when the facts were computed
            (``False``: the findings and terms are those of the unavailable-bytes reference).
        parts: for a readable tool result, whether units show it as content parts (it holds images:
            :mod:`ctxledger.serialize.tool_images`), so its unit's text is not its raw text.
    """

    record_id: str
    stamp: str
    texts: tuple[tuple[Finding, ...], ...] = ()
    block: tuple[Finding, ...] | None = None
    name: tuple[Finding, ...] = ()
    instruction: str | None = None
    term_keys: bytes = b""
    term_counts: bytes = b""
    length: int = 0
    vector: bytes = b""
    sources: tuple[str, ...] = ()
    sources_complete: bool = True
    raw_readable: bool = True
    parts: bool = False

    @property
    def current(self) -> bool:
        """Whether the facts were computed by the running detectors (same :data:`DETECTOR_STAMP`)."""
        return self.stamp == DETECTOR_STAMP

    def text_findings(self) -> tuple[Finding, ...]:
        """Every finding of the plain texts, in render order."""
        return tuple(f for part in self.texts for f in part)

    def without_terms(self) -> RecordFacts:
        """The same facts without the lexical terms and the vector (once they are indexed, nothing needs them)."""
        if not self.term_keys and not self.term_counts and not self.vector:
            return self
        return RecordFacts(  # not dataclasses.replace, which costs several times more (a snapshot makes one per record)
            self.record_id,
            self.stamp,
            self.texts,
            self.block,
            self.name,
            self.instruction,
            length=self.length,
            sources=self.sources,
            sources_complete=self.sources_complete,
            raw_readable=self.raw_readable,
            parts=self.parts,
        )


def _source_file(obj: Any) -> bytes:
    path = inspect.getsourcefile(obj)
    return Path(path).read_bytes() if path else b""


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


@cache
def detector_stamp() -> str:
    """The digest of the code that computes the facts (module docstring); ``"f<format>-<16 hex>"``."""
    digest = hashlib.sha256(FACTS_FORMAT.encode())
    for obj in (
        secrets.default_scanner,
        injection.instruction_like,
        regex_shape.structure,
        units.render_data_block,
        relevance.tokenize,
        term_keys.term_key,
        semantic.StaticEmbedder,
        text_windows.windows,
        retained,
    ):
        digest.update(_source_file(obj))
    for package in ("detect-secrets", "bm25s", "PyStemmer"):
        digest.update(f"\0{package}={_package_version(package)}".encode())
    digest.update(f"\0embedding={semantic.model_id() or 'none'}".encode())
    return f"f{FACTS_FORMAT}-{digest.hexdigest()[:16]}"


DETECTOR_STAMP = detector_stamp()
"""The stamp facts computed by this process carry (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class _Texts:
    """What one record shows a model: plain texts, data block, speaker name, relevance and instruction text."""

    plain: tuple[str, ...] = ()
    block: str | None = None
    name: str | None = None
    relevance: str = ""
    instruction: str | None = None
    raw_readable: bool = True
    parts: bool = False


_SHOWN_AS_DATA = (Trust.RETRIEVED, Trust.UNTRUSTED)
"""Message trusts whose content is delimited as data (the trust stage looks for instruction-like text there)."""


def _content_parts(content: Any) -> tuple[str, ...]:
    """A turn's text content as the secrets stage reads it (the string, or each text part)."""
    if isinstance(content, str):
        return (content,)
    if content:
        return tuple(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return ()


def _raw_text(art: ToolArtifact, read_blob: BlobReader) -> tuple[str, bool]:
    """The result's text as units show it: a retained result's notice, its bytes, or the unavailable reference."""
    state = retained(art)
    if state is not None:
        return state.notice, True
    try:
        return read_blob(art.sha256).decode("utf-8", errors="replace"), True
    except (BlobNotFound, InputError):
        return units.unavailable_text(art, units.BLOB_MISSING), False
    except IntegrityError:
        return units.unavailable_text(art, units.BLOB_MISMATCH), False


def _texts(rec: Record, read_blob: BlobReader) -> _Texts:
    if isinstance(rec, Message):
        text = units.content_text(rec.content)
        summary = units.is_summary_message(rec)
        block = units.render_data_block(rec, text) if summary else None
        as_data = summary or rec.trust in _SHOWN_AS_DATA
        return _Texts(_content_parts(rec.content), block, rec.name, text, text if as_data else None)
    if isinstance(rec, ToolCall):
        return _Texts((rec.arguments,), relevance=f"{rec.name} {rec.arguments}")
    if isinstance(rec, ToolArtifact):
        text, readable = _raw_text(rec, read_blob)
        parts = readable and retained(rec) is None and units.shown_as_parts(rec, text, read_blob)
        return _Texts((text,), relevance=text, instruction=text, raw_readable=readable, parts=parts)
    if isinstance(rec, ToolMemory):
        text = units.render_memory(rec)
    elif isinstance(rec, Compaction):
        text = rec.text
    elif isinstance(rec, Checkpoint):
        text = units.render_checkpoint(rec)
    elif isinstance(rec, Participant):
        return _Texts(name=rec.name)
    else:
        return _Texts()
    return _Texts(block=units.render_data_block(rec, text), relevance=text, instruction=text)


SourceLookup = Callable[[str], "Record | None"]
"""Finds an earlier record of the same tenant by id (``None`` when there is none)."""

StoredLookup = Callable[[str, str], "Record | None"]
"""Finds a stored record by ``(tenant_id, record_id)`` (``None`` when there is none)."""


def direct_sources(rec: Record) -> tuple[str, ...]:
    """The ids a record was derived from: a memory's source artifacts, a compaction's covered records."""
    if isinstance(rec, ToolMemory):
        return tuple(rec.source_artifact_ids)
    if isinstance(rec, Compaction):
        return tuple(rec.source_ids)
    return ()


SAFE_SUMMARY_TAG = "safe_summary"
"""The tag that declares a derived record free of its sources' restrictions."""


def declared_safe(rec: Record) -> bool:
    """Whether ``rec`` is tagged ``safe_summary`` (``meta["tags"]``: a string or a list of strings)."""
    value = rec.meta.get("tags")
    if isinstance(value, str):
        return value == SAFE_SUMMARY_TAG
    return isinstance(value, Iterable) and SAFE_SUMMARY_TAG in {str(v) for v in value}


_NOT_SOURCES = (Conversation, Branch, Participant)


def restricting_sources(rec: Record, find: SourceLookup) -> tuple[tuple[str, ...], bool]:
    """Ids of every record whose restrictions ``rec`` inherits, nearest first (breadth-first over the sources).

    Nothing when ``rec`` is declared safe or derived from nothing. A source declared safe is listed (its own
    envelope counts) but its own sources are not followed. Each id appears once; ``rec`` itself never (a cycle
    back to it ends there). A source ``find`` does not know, or a conversation, branch or participant record,
    is skipped: there is nothing to inherit from it. Returns ``(ids, complete)``, ``complete`` false when a
    source was not found.
    """
    if declared_safe(rec):
        return (), True
    complete = True
    out: list[str] = []
    seen = {rec.id}
    queue = list(direct_sources(rec))
    while queue:
        rid = queue.pop(0)
        if rid in seen:
            continue
        seen.add(rid)
        src = find(rid)
        complete = complete and src is not None
        if src is None or isinstance(src, _NOT_SOURCES):
            continue
        out.append(rid)
        if not declared_safe(src):
            queue.extend(direct_sources(src))
    return tuple(out), complete


CHUNK = 512
"""Records whose texts are scanned, counted and embedded together (distinct texts and embedding pieces are
shared within a chunk; chunks keep the texts of a large import from being held all at once)."""

PARALLEL_RECORDS = 4 * CHUNK
"""Batches of at least this many records share their chunks between this process and worker processes
(:mod:`ctxledger._fact_workers`, one per further usable core); smaller batches are computed here alone."""


def compute_facts(
    records: Sequence[Record],
    read_blob: BlobReader,
    find: StoredLookup | None = None,
    *,
    read_blobs: BatchBlobReader | None = None,
) -> list[RecordFacts]:
    """The facts of ``records`` (one per record, same order), computed with the running detectors.

    Args:
        records: records in append order (a derived record's sources may precede it in the same list).
        read_blob: returns a blob's bytes by bare-hex sha256 (tool results' raw text).
        find: looks up stored records by ``(tenant_id, record_id)``; ``None`` = none known.
        read_blobs: returns the intact stored bytes of many blobs by sha256, leaving out what it cannot read
            (a blob store's ``get_many``); the tool results of a chunk are then read with one call, and
            ``read_blob`` reads (or refuses) only what it left out.

    A derived record's sources are looked up in its own tenant only, in ``records`` first.
    """
    batch = {(r.tenant_id, r.id): r for r in records}

    def lookup(tenant_id: str, rid: str) -> Record | None:
        found = batch.get((tenant_id, rid))
        if found is None and find is not None:
            found = find(tenant_id, rid)
        return found

    chunks = [records[start : start + CHUNK] for start in range(0, len(records), CHUNK)]

    def texts(index: int) -> list[_Texts]:
        chunk = chunks[index]
        reader = _prefetched(chunk, read_blob, read_blobs)
        return [_texts(r, reader) for r in chunk]

    workers = fact_workers.usable_workers() if len(records) >= PARALLEL_RECORDS else 1
    if workers > 1:
        detected = fact_workers.run(len(chunks), texts, _detect, workers - 1)
    else:
        detected = [_detect(texts(i)) for i in range(len(chunks))]
    out: list[RecordFacts] = []
    for chunk, found in zip(chunks, detected, strict=True):
        out += [_facts(rec, d, lookup) for rec, d in zip(chunk, found, strict=True)]
    return out


def _prefetched(chunk: Sequence[Record], read_blob: BlobReader, read_blobs: BatchBlobReader | None) -> BlobReader:
    """A reader of the chunk's tool results from one ``read_blobs`` call, ``read_blob`` for what it left out."""
    wanted = [r.sha256 for r in chunk if isinstance(r, ToolArtifact) and retained(r) is None]
    if read_blobs is None or not wanted:
        return read_blob
    try:
        got = read_blobs(wanted)
    except InputError:  # a malformed name: each is read (and refused) on its own
        return read_blob

    def read(sha256: str) -> bytes:
        data = got.get(sha256)
        return read_blob(sha256) if data is None else data

    return read


@dataclass(frozen=True, slots=True)
class _Detected:
    """What the detectors found in one record's texts (all of its facts but the derived sources)."""

    texts: tuple[tuple[Finding, ...], ...]
    block: tuple[Finding, ...] | None
    name: tuple[Finding, ...]
    instruction: str | None
    term_keys: bytes
    term_counts: bytes
    length: int
    vector: bytes
    raw_readable: bool
    parts: bool


def _detect(texts: Sequence[_Texts]) -> list[_Detected]:
    """Run the detectors over one chunk's texts; the same in every process.

    Each distinct text is looked at once: every text the chunk shows (plain texts, data blocks, speaker names,
    relevance texts) is scanned for secrets, and each distinct relevance text, its secret lines redacted, is
    counted into keyed terms and embedded, all texts of the chunk together (records with the same text get the
    same facts).
    """
    scan = secrets.default_scanner().scan
    shown = dict.fromkeys(s for text in texts for s in (*text.plain, text.block, text.name, text.relevance) if s)
    found: dict[str, tuple[Finding, ...]] = {text: scan(text) for text in shown}
    found[""] = ()
    relevant = list(dict.fromkeys(text.relevance for text in texts))
    # no secret enters the stored index: lines with findings are redacted before tokenizing
    searchable = [secrets.redact(text, found[text]) for text in relevant]
    terms = [(*term_keys.keyed_terms(counts), sum(counts.values())) for counts in relevance.term_counts(searchable)]
    indexed = dict(zip(relevant, zip(terms, _vectors(searchable), strict=True), strict=True))
    phrases: dict[str, str | None] = {}
    out: list[_Detected] = []
    for text in texts:
        (keys, counts, length), vector = indexed[text.relevance]
        instruction = None
        if text.instruction:
            if text.instruction not in phrases:
                phrases[text.instruction] = injection.instruction_like(text.instruction)
            instruction = phrases[text.instruction]
        out.append(
            _Detected(
                texts=tuple(found[p] for p in text.plain),
                block=found[text.block] if text.block is not None else None,
                name=found[text.name] if text.name else (),
                instruction=instruction,
                term_keys=keys,
                term_counts=counts,
                length=length,
                vector=vector,
                raw_readable=text.raw_readable,
                parts=text.parts,
            )
        )
    return out


def serve_worker() -> None:
    """The body of a fact worker process (:mod:`ctxledger._fact_workers`): detect chunks until told to stop."""
    fact_workers.serve(_detect)


def _vectors(texts: Sequence[str]) -> list[bytes]:
    """Quantised semantic vectors of ``texts`` (``b""`` each without an embedding model or text)."""
    embedder = semantic.default_embedder()
    if embedder is None:
        return [b""] * len(texts)
    with blas.one_thread():  # one small product per text: threads cost more than they share (ctxledger._blas)
        vectors = embedder.embed(texts)
    rows = semantic.quantize_rows(vectors)
    return [
        row.tobytes() if text and vector.any() else b"" for text, vector, row in zip(texts, vectors, rows, strict=True)
    ]


def _facts(rec: Record, found: _Detected, lookup: StoredLookup) -> RecordFacts:
    sources, complete = ((), True)
    if direct_sources(rec):
        sources, complete = restricting_sources(rec, lambda rid: lookup(rec.tenant_id, rid))
    return RecordFacts(
        record_id=rec.id,
        stamp=DETECTOR_STAMP,
        texts=found.texts,
        block=found.block,
        name=found.name,
        instruction=found.instruction,
        term_keys=found.term_keys,
        term_counts=found.term_counts,
        length=found.length,
        vector=found.vector,
        sources=sources,
        sources_complete=complete,
        raw_readable=found.raw_readable,
        parts=found.parts,
    )


def _finding_dict(finding: Finding) -> dict[str, Any]:
    return dataclasses.asdict(finding)


def encode_facts(facts: RecordFacts) -> bytes:
    """The stored JSON of ``facts`` (without ``record_id`` and ``stamp``, which are columns)."""
    body: dict[str, Any] = {}
    if facts.texts:
        body["texts"] = [[_finding_dict(f) for f in part] for part in facts.texts]
    if facts.block is not None:
        body["block"] = [_finding_dict(f) for f in facts.block]
    if facts.name:
        body["name"] = [_finding_dict(f) for f in facts.name]
    if facts.instruction is not None:
        body["instruction"] = facts.instruction
    if facts.term_keys:
        body["term_keys"] = base64.b64encode(facts.term_keys).decode("ascii")
        body["term_counts"] = base64.b64encode(facts.term_counts).decode("ascii")
        body["length"] = facts.length
    if facts.vector:
        body["vector"] = base64.b64encode(facts.vector).decode("ascii")
    if facts.sources:
        body["sources"] = list(facts.sources)
    if not facts.sources_complete:
        body["sources_complete"] = False
    if not facts.raw_readable:
        body["raw_readable"] = False
    if facts.parts:
        body["parts"] = True
    return _ENCODER.encode(body)


_ENCODER = msgspec.json.Encoder()


class _StoredFacts(msgspec.Struct, omit_defaults=True):
    """The shape :func:`encode_facts` writes (typed, so decoding builds the findings directly)."""

    texts: tuple[tuple[Finding, ...], ...] = ()
    block: tuple[Finding, ...] | None = None
    name: tuple[Finding, ...] = ()
    instruction: str | None = None
    term_keys: bytes = b""  # base64 in the JSON, decoded by msgspec
    term_counts: bytes = b""
    length: int = 0
    vector: bytes = b""
    sources: tuple[str, ...] = ()
    sources_complete: bool = True
    raw_readable: bool = True
    parts: bool = False


_DECODER = msgspec.json.Decoder(_StoredFacts)


def decode_facts(record_id: str, stamp: str, body: str | bytes, *, terms: bool = True) -> RecordFacts:
    """Rebuild facts from :func:`encode_facts`'s JSON; ``terms=False`` leaves the lexical terms and vector out.

    A body of another shape (written by another version) gives empty facts that are not
    :attr:`~RecordFacts.current`, so readers recompute them.
    """
    try:
        values = _DECODER.decode(body)
    except msgspec.ValidationError:
        return RecordFacts(record_id=record_id, stamp=f"unreadable {stamp}")
    return RecordFacts(
        record_id=record_id,
        stamp=stamp,
        texts=values.texts,
        block=values.block,
        name=values.name,
        instruction=values.instruction,
        term_keys=values.term_keys if terms else b"",
        term_counts=values.term_counts if terms else b"",
        length=values.length,
        vector=values.vector if terms else b"",
        sources=values.sources,
        sources_complete=values.sources_complete,
        raw_readable=values.raw_readable,
        parts=values.parts,
    )
