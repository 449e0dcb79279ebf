"""The representation ladder: cheaper ways for a unit to enter the context.

Seed 002's table "Qué hacer cuando una pieza útil no cabe" lists the rungs and the risk of each; seed 000
asks that a large result enter as "lines 480–510, timeout connecting to db, file X, hash Y", never as
"full log: 20 MB". For every candidate unit the assembler asks :meth:`Ladder.__call__`
(``options_for(unit, verbatim, coster) -> list[Option]``) for the options besides verbatim, and selection
(:mod:`.select`) takes at most one option per unit. The rungs, most kept first:

* ``excerpt``: :func:`~ctxledger.represent.make_excerpt` of each large text at
  :data:`EXCERPT_TOKENS` (error lines, failing tests, head and tail first), with locators;
* ``extraction``: the artifact's :class:`~ctxledger.records.ToolMemory` (summary plus structured fields)
  from :func:`~ctxledger.represent.promote`, whose decision is kept with the option;
* ``memory``: that memory's summary only;
* ``reference``: id, size, lines, sha256, source version and how to read it back (a ``recall`` call when the
  policy exposes that tool, else the ``ctxledger rehydrate`` command; :mod:`ctxledger.fetch_hints`);
* dropping the unit is selection's business (``budget`` / ``class_cap``).

A *large text* is a tool result (its stored bytes), the text of a user or assistant message, or a
checkpoint's rendered state, that costs at least :data:`MIN_TOKENS`; an assistant turn's tool calls are never
touched (only its text may be excerpted), so tool-call pairing holds in every rung. A message or checkpoint
gets excerpts only: no extractor reads prose or run state, and a bare reference to either tells the model
nothing (a tool result's reference still answers its call and says what the output was). A message excerpt's
locators name the message: its bytes are its text as UTF-8. A checkpoint excerpt's locators name the
checkpoint: its bytes are its rendered text as UTF-8 (:func:`~ctxledger.units.checkpoint_bytes`, its state as
JSON; e.g. mini-swe-agent's exit checkpoint holding a 24 KB submitted patch), and the excerpt stays in the
checkpoint's data block. :func:`rehydrate_ref` reads both back. A turn the policy already marked (stale flag,
conflict flag …) is never re-derived from raw bytes: it stays as marked. Two marks are kept by the excerpts themselves:
delimiting (an excerpt of a data block stays in that block) and, for tool results, ``secret_redacted``:
the lines of the raw output that hold a secret (found once per output with the policy's scanner,
:func:`secret_lines`) are shown as ``[withheld by policy: <type> on line N]`` wherever an excerpt touches
them, so a huge failed output holding a key still enters as an exact excerpt (its error lines and
locators) and not even a fragment of the key, cut at an excerpt boundary, gets in. Such an output gets no
extraction or memory rung (an extractor reads the raw bytes); its locators stay exact raw byte ranges.
Memories, compactions and instructions are compact already and get no rungs.

**Costs** are exact: each option's turns are priced by the same coster as verbatim (the serializer's
framing and the model's counter). A :class:`~ctxledger.assemble.costing.FixedCoster` (reference counts
of the failure cases) has no tokenizer, so derived text is priced at its source turn's reference rate
(tokens per UTF-8 byte, rounded up) and registered in ``coster.derived``.

**Utilities** are verbatim's times a factor below 1 that grows with what the option keeps:
``floor + (0.95 − floor) × keep``, with floors excerpt 0.5, extraction ``0.4 × confidence``, memory
``0.3 × confidence``, reference 0.15. ``keep`` is, for texts that report errors, ``0.6 × (error lines
kept / error lines) + 0.4 × (bytes shown / bytes)`` (error lines as
:func:`~ctxledger.represent._patterns.is_error_line` reads them; an extraction or memory keeps an error
line when its text holds it), else the bytes shown (0 for an extraction, memory or reference). So an
excerpt or extraction that keeps every error line is worth nearly verbatim, one that keeps the head of a
file listing much less; selection (:mod:`.select`) takes verbatim when it fits, else the rung worth most
among those that fit, and :mod:`.room` then shrinks bulk to let left-out error output in when that gains
utility. Every option's ``detail`` holds, per record, its sha256, locators and (for extractions) the
promotion decision, plus the unit's ``error_lines`` and how many the option keeps.

**Redundancy** (:meth:`Ladder.redundant`): repeated identical calls (same tool, arguments and output
sha256), identical outputs of the same call, and near-duplicate outputs of the same call
(:func:`~ctxledger.represent.find_redundant`: alike by shingles *and* with the same
:func:`~ctxledger.represent.redundancy.outcome`, its outcome lines and values, so a failing test run and its
passing rerun are both kept, and so are two bookings that differ in their reservation id) enter once, the
newest kept; older copies leave as ``redundant`` with a pointer to the kept unit, whose detail says ``same
tool output as unit K`` for an exact copy and ``near-duplicate of unit K (same outcome lines and values)``
otherwise. Protected units are never redundant (they may be the kept copy). When the kept unit is
not sent either (left out for budget, role order …), the older copies take its reason instead, still at stage
``redundancy``, their detail saying that neither copy was sent (:func:`settle_redundant`).

**Reach** (:func:`reach`): rungs and redundancy checks are built only for the newest units, so a cold
assembly of a 100k-event history does not excerpt and sketch all of it. Walking back from the newest
unit, each counts ``min(verbatim tokens, B_input // REACH_SHARE)`` (:data:`REACH_SHARE` = 4) until the
count passes :data:`REACH` = 2 input budgets; the newest :data:`REACH_MIN_UNITS` = 8 units are always in.
The cap is what lets a huge recent output (30k tokens at ``B_input`` 15k) still enter as an excerpt or a
reference instead of exhausting the reach by itself; at most ``REACH × REACH_SHARE`` = 8 units count the
full cap, which bounds the work on huge outputs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxledger.assemble.costing import Coster, FixedCoster, turn_key
from ctxledger.assemble.rung_memo import Rung, decode_rungs, encode_rungs, memo_key
from ctxledger.assemble.select import Option, new_option
from ctxledger.errors import BlobNotFound, BudgetError, ContentRetained, InputError, IntegrityError, RecordNotFound
from ctxledger.fetch_hints import whole
from ctxledger.hashing import sha256_hex
from ctxledger.json_text import canonical_or_raw
from ctxledger.policy.base import Outcome, PolicyDecision, ReasonCode
from ctxledger.policy.secrets import SecretScanner, default_scanner
from ctxledger.records import Checkpoint, Message, Record, ToolArtifact, ToolCall, ToolMemory
from ctxledger.represent import Excerpter, LineIndex, Locator, promote, rehydrate
from ctxledger.represent._patterns import is_error_line
from ctxledger.represent.extract._base import query_terms
from ctxledger.represent.redundancy import _minhash, call_key, lsh_index, outcome
from ctxledger.represent.rehydrate import ByteRange, cut_range
from ctxledger.retention.state import retained
from ctxledger.serialize.base import Turn
from ctxledger.tokens import TokenCounter
from ctxledger.units import Unit, UnitKind, checkpoint_bytes, data_block_body, render_memory, rewrap_data_block

if TYPE_CHECKING:
    from datasketch import MinHash  # type: ignore[import-untyped]

LADDER_VERSION = "1"

EXCERPT_TOKENS: tuple[int, ...] = (1024, 512, 256)
"""Excerpt sizes offered, in tokens of the excerpt text (a size is offered when below 0.8 × verbatim)."""

MIN_TOKENS = 200
"""Turns cheaper than this (tokens, verbatim) stay verbatim in every rung."""

REDUNDANT_MIN_CHARS = 200
"""Near-duplicate detection applies to tool outputs at least this long (characters); shorter outputs
(``ok``, an empty ``<output>``) repeat for different actions and are redundant only as repeated calls."""

REDUNDANT_THRESHOLD = 0.9
"""Estimated Jaccard similarity of word 3-gram shingles from which two outputs are near-duplicates."""
REACH = 2
"""Rungs and redundancy checks go to the newest units worth this many input budgets (:func:`reach`)."""
REACH_SHARE = 4
"""In :func:`reach` a unit counts at most ``B_input // REACH_SHARE`` tokens, however large it is verbatim."""
REACH_MIN_UNITS = 8
"""The newest units always within reach, whatever they cost."""
SKETCH_CHARS = 4000
"""Outputs longer than twice this are sketched on their first and last ``SKETCH_CHARS`` characters (identical
outputs are still found whole, by sha256), so a 20 MB log costs no more to compare than an 8 KB one."""

CEILING = 0.95
"""The highest factor a rung reaches (it keeps everything that matters, yet is not verbatim)."""
EXCERPT_FLOOR = 0.5
EXTRACTION_FLOOR = 0.4
MEMORY_FLOOR = 0.3
REFERENCE_FLOOR = 0.15
ERROR_WEIGHT = 0.6
"""Share of ``keep`` given to error lines when the text reports errors (the rest: bytes shown)."""
MAX_ERROR_LINES = 64


class Pointer(NamedTuple):
    """Where a redundant unit points: the unit kept in its place, and whether the two outputs are identical.

    Attributes:
        kept: id of the newer unit that enters instead.
        exact: ``True`` for the same output (a repeated call, or identical text); ``False`` for a
            near-duplicate with the same outcome lines and values.
    """

    kept: str
    exact: bool


class RateCounter:
    """A :class:`~ctxledger.tokens.TokenCounter` pricing text at a fixed rate of tokens per UTF-8 byte.

    Used to price text derived from a record under reference counts (``FixedCoster``), where the rate is
    the record's reference tokens over its bytes. Counts round up, so an estimate never undercounts the
    rate.
    """

    is_estimate = True

    def __init__(self, tokens_per_byte: float) -> None:
        self.tokens_per_byte = tokens_per_byte
        self.id = f"rate/{tokens_per_byte:.6f}"

    def count(self, text: str) -> int:
        """``ceil(len(utf8(text)) × rate)`` tokens."""
        return math.ceil(len(text.encode("utf-8")) * self.tokens_per_byte)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """:meth:`count` of each text."""
        return [self.count(t) for t in texts]


@dataclass(frozen=True, slots=True)
class _Target:
    """One large text of a unit: the turn it renders to and the exact bytes behind it."""

    index: int
    record: Record
    data: bytes
    sha256: str
    tokens: int
    ref_uri: str | None
    errors: tuple[str, ...] = ()
    """The distinct error lines of ``data`` (:func:`error_lines`)."""
    withheld: Mapping[int, str] = field(default_factory=dict)
    """Line number → placeholder for each line of ``data`` holding a secret (:func:`secret_lines`)."""
    anchors: tuple[str, ...] = ()
    """Strings whose every occurrence an excerpt keeps first, with the request's focus (a checkpoint's state keys)."""

    @property
    def is_artifact(self) -> bool:
        return isinstance(self.record, ToolArtifact)

    @property
    def source_version(self) -> str | None:
        return getattr(self.record, "source_version", None)

    def label(self) -> str:
        rec = self.record
        if isinstance(rec, ToolArtifact):
            what = f"{rec.name or 'tool'} output, artifact {rec.id}"
        else:
            what = f"message {rec.id}"
        return f"{what} ({self.ref_uri})" if self.ref_uri else what

    def facts(self) -> str:
        lines = LineIndex(self.data).line_count
        version = f", source version {self.source_version}" if self.source_version else ""
        return f"{len(self.data)} bytes, {lines} lines, sha256:{self.sha256[:16]}{version}"

    def whole_locator(self) -> dict[str, Any]:
        index = LineIndex(self.data)
        return index.locator(self.record.id, self.sha256, 0, len(self.data), self.source_version).to_dict()


_LADDER_KINDS = frozenset({UnitKind.TOOL_EXCHANGE, UnitKind.MESSAGE, UnitKind.CHECKPOINT})
"""The unit kinds whose large turns get cheaper rungs (a checkpoint: excerpts only)."""


class Ladder:
    """Builds the cheaper options of each unit (see the module docstring) and finds redundant units.

    Args:
        read_blob: bare-hex sha256 → bytes (the blob store's ``get``).
        query: the current goal's text; its terms are the excerpt's focus and steer the extractors.
        excerpt_tokens: the excerpt sizes offered (tokens of excerpt text).
        min_tokens: turns below this cost (tokens, verbatim) are never re-represented.
        messages: also excerpt long user and assistant message texts (their locators name the message).
        scanner: finds the secrets of a ``secret_redacted`` tool result's raw bytes (default: the default
            scanner; :meth:`bind` takes the policy's).
        recall: the model has the ``recall`` tool: excerpts, extractions and references name a ``recall`` call
            instead of the ``ctxledger rehydrate`` command (:mod:`ctxledger.fetch_hints`).

    A ladder caches the options of every unit it has seen (by tenant, unit id, turn content, marks, coster and
    query), so repeated assemblies of a growing history only build options for new units. The tenant is part of
    the key because record ids are unique per tenant only: two tenants' units may share an id and content while
    their records differ (times, metadata), and one tenant's options must never be served to another.
    """

    def __init__(
        self,
        read_blob: Callable[[str], bytes],
        *,
        query: str | None = None,
        excerpt_tokens: Sequence[int] = EXCERPT_TOKENS,
        min_tokens: int = MIN_TOKENS,
        messages: bool = True,
        scanner: SecretScanner | None = None,
        recall: bool = False,
        memo: Any = None,
        _cache: dict[tuple[Any, ...], Any] | None = None,
        _unsaved: dict[str, tuple[str, str, bytes]] | None = None,
    ) -> None:
        self.read_blob = read_blob
        self.memo = memo
        self._unsaved: dict[str, tuple[str, str, bytes]] = {} if _unsaved is None else _unsaved
        """Rungs built since the last :meth:`flush`: stored key → (tenant, conversation, body)."""
        self.recall = recall
        self.query = query or ""
        self.focus = query_terms(self.query)
        self.excerpt_tokens = tuple(sorted(set(excerpt_tokens), reverse=True))
        self.min_tokens = min_tokens
        self.messages = messages
        self.scanner = scanner or default_scanner()
        self._scanner_key = (
            self.scanner.plugins,
            tuple(sorted((k, rx.pattern) for k, rx in self.scanner.extra.items())),
        )
        self.reach: frozenset[str] | None = None
        self._tables: dict[str, dict[str, tuple[Unit, list[tuple[Rung, int]]]]] = {}
        self._cache: dict[tuple[Any, ...], Any] = {} if _cache is None else _cache
        """Rungs by (tenant, unit, content, coster, query) and MinHash sketches by ("sketch", text), per ledger."""

    def bind(
        self,
        query: str | None,
        reach: frozenset[str] | None = None,
        scanner: SecretScanner | None = None,
        *,
        recall: bool = False,
    ) -> Ladder:
        """The same ladder (sharing its cache) for one request.

        Args:
            query: the request's goal (excerpt focus, extractor query).
            reach: the unit ids that get rungs and redundancy checks (see :func:`reach`); ``None`` = all.
            scanner: the policy's secret scanner (default: this ladder's).
            recall: the policy exposes the ``recall`` tool (the hints name it).
        """
        bound = Ladder(
            self.read_blob,
            query=query,
            excerpt_tokens=self.excerpt_tokens,
            min_tokens=self.min_tokens,
            messages=self.messages,
            scanner=scanner or self.scanner,
            recall=recall,
            memo=self.memo,
            _cache=self._cache,
            _unsaved=self._unsaved,
        )
        bound.reach = reach
        return bound

    def _rung_table(self, coster: Coster) -> dict[str, tuple[Unit, list[tuple[Rung, int]]]]:
        """Unit id → ``(unit object, its rungs with their tokens)`` for this ladder's inputs and ``coster``.

        A unit object stands for its tenant, id, content and marks (units are not changed once built); what
        else the rungs depend on (focus, query, scanner, recall, counter) names the table, shared by every
        ladder :meth:`bind` makes with the same inputs.
        """
        table = self._tables.get(coster.counter_id)
        if table is None:
            numbers = self._cache.setdefault(("rung inputs",), {})
            inputs = (self.focus, self.query, self._scanner_key, self.recall)
            number = numbers.get(inputs)
            if number is None:
                number = numbers[inputs] = len(numbers)
            table = self._tables[coster.counter_id] = self._cache.setdefault(
                ("rungs of unit", number, coster.counter_id), {}
            )
        return table  # type: ignore[no-any-return]

    def __call__(self, unit: Unit, verbatim: Option, coster: Coster, *, required: bool = False) -> list[Option]:
        """The options of ``unit`` besides verbatim, each with exact tokens and a utility below verbatim's.

        Args:
            unit: the candidate unit (possibly annotated by policy marks).
            verbatim: its verbatim option (the utility and per-turn tokens are taken from it).
            coster: the coster of this assembly; every option is priced by it.
            required: the assembler needs the rungs of a required unit too large to enter verbatim; such a
                unit gets them even when it lies outside :attr:`reach`.

        Returns:
            Options in rung order (excerpts largest first, extraction, memory, reference); empty when
            the unit has no large text.
        """
        if self.reach is not None and unit.id not in self.reach and not required:
            return []
        if unit.kind not in _LADDER_KINDS or (verbatim.turn_tokens and max(verbatim.turn_tokens) < self.min_tokens):
            return []  # no turn is large enough to excerpt (what :meth:`_targets` looks for first)
        table = self._rung_table(coster)
        known = table.get(unit.id)
        if known is not None and known[0] is unit:
            rungs = known[1]
        else:
            rungs = self._rungs_of(unit, verbatim, coster)
            table[unit.id] = (unit, rungs)
        if isinstance(coster, FixedCoster):
            for rung, _ in rungs:
                coster.derived.update(rung.derived)
        utility = verbatim.utility
        return [
            new_option(
                r.representation, tokens, round(utility * r.factor, 9), r.turns, r.transform, r.detail, r.turn_tokens
            )
            for r, tokens in rungs
        ]

    def _rungs_of(self, unit: Unit, verbatim: Option, coster: Coster) -> list[tuple[Rung, int]]:
        """The unit's rungs with their tokens, cached by tenant, unit id, content, marks and this ladder's inputs."""
        key = (
            _tenant_of(unit),
            unit.id,
            self._per_unit("content key", unit, _content_key),
            coster.counter_id,
            self.focus,
            self.query,
            self._scanner_key,
            self.recall,
        )
        rungs = self._cache.get(key)
        if rungs is None:
            rungs = self._cache[key] = self._stored_or_built(unit, verbatim, coster)
        return [(r, r.tokens) for r in rungs]

    def flush(self) -> None:
        """Write the rungs built since the last flush to :attr:`memo` (the store), one write per tenant."""
        if not self._unsaved:
            return
        unsaved = dict(self._unsaved)
        self._unsaved.clear()
        by_tenant: dict[str, dict[str, tuple[str, bytes]]] = {}
        for stored_key, (tenant_id, conversation_id, body) in unsaved.items():
            by_tenant.setdefault(tenant_id, {})[stored_key] = (conversation_id, body)
        for tenant_id, rows in by_tenant.items():
            self.memo.put_rungs(tenant_id, rows)

    def _stored_or_built(self, unit: Unit, verbatim: Option, coster: Coster) -> list[Rung]:
        """The unit's rungs as the store holds them for these inputs (:mod:`.rung_memo`), else built now."""
        if self.memo is None or not unit.records or getattr(coster, "counter", None) is None:
            return self._rungs(unit, verbatim, coster)  # no store, or reference counts: nothing kept
        tenant_id, conversation_id = unit.records[0].tenant_id, unit.records[0].conversation_id
        inputs = (coster.counter_id, self.focus, self.query, self._scanner_key, self.recall, self.excerpt_tokens)
        stored_key = memo_key(unit, (*inputs, self.min_tokens, self.messages))
        body = self.memo.get_rungs(tenant_id, stored_key)
        rungs = decode_rungs(body) if body is not None else None
        if rungs is None:
            rungs = self._rungs(unit, verbatim, coster)
            self._unsaved[stored_key] = (tenant_id, conversation_id, encode_rungs(rungs))
        return rungs

    # -- building rungs ------------------------------------------------------------------------------

    def _rungs(self, unit: Unit, verbatim: Option, coster: Coster) -> list[Rung]:
        costs = verbatim.turn_tokens or tuple(coster.turn_tokens(t) for t in unit.turns)
        targets = self._targets(unit, costs, coster)
        if not targets:
            return []
        rungs = self._excerpts(unit, targets, costs, coster)
        if unit.kind is UnitKind.TOOL_EXCHANGE:  # a message has no extractor, and a bare reference says nothing
            # an extractor reads the raw bytes: an output holding a secret gets no extraction or memory
            memories = {t.record.id: self._promote(t) for t in targets if t.is_artifact and not t.withheld}
            if any(m[0] is not None for m in memories.values()):
                rungs += [self._extraction(unit, targets, costs, coster, memories, full) for full in (True, False)]
            rungs.append(self._reference(unit, targets, costs, coster))
        verbatim_tokens = sum(costs)
        return [r for r in rungs if r.tokens < verbatim_tokens]

    def _targets(self, unit: Unit, costs: Sequence[int], coster: Coster) -> list[_Target]:
        if unit.kind not in _LADDER_KINDS:
            return []
        records = {r.id: r for r in unit.records}
        out = []
        for i, turn in enumerate(unit.turns):
            rec = records.get(turn.ref)
            marks = set(unit.transforms.get(turn.ref, "delimited").split("+"))
            redacted = "secret_redacted" in marks
            if (
                costs[i] < self.min_tokens
                or not isinstance(turn.content, str)
                or not marks <= {"delimited", "secret_redacted"}
            ):
                continue
            if isinstance(rec, ToolArtifact) and turn.role == "tool" and rec.sha256:
                data = self.read_blob(rec.sha256)
                ref_uri = rec.meta.get("artifact_ref")
                uri = str(ref_uri) if ref_uri else None
                withheld = secret_lines(data, self.scanner) if redacted else {}
                out.append(_Target(i, rec, data, rec.sha256, costs[i], uri, tuple(error_lines(data)), withheld))
            elif redacted:
                continue  # a message's redacted text is not its bytes: it stays verbatim as marked
            elif isinstance(rec, Checkpoint) and unit.kind is UnitKind.CHECKPOINT:
                data = checkpoint_bytes(rec)
                errors = tuple(error_lines(data))
                out.append(_Target(i, rec, data, sha256_hex(data), costs[i], None, errors, {}, _state_keys(rec)))
            elif isinstance(rec, Message) and turn.role in ("user", "assistant") and self.messages:
                target = self._message_target(i, rec, turn, costs[i], coster)
                if target is not None:
                    out.append(target)
        return out

    def _message_target(self, index: int, rec: Message, turn: Turn, tokens: int, coster: Coster) -> _Target | None:
        """A message's text as a target; for an assistant turn with tool calls, only its text is excerpted."""
        text = str(turn.content)
        if turn.tool_calls:
            counter = getattr(coster, "counter", None)
            if counter is None:  # reference counts price the whole turn: its text alone has no cost
                return None
            tokens = counter.count(text)
            if tokens < self.min_tokens:
                return None
        data = text.encode("utf-8")
        return _Target(index, rec, data, sha256_hex(data), tokens, None, tuple(error_lines(data)))

    def _counter(self, coster: Coster, target: _Target) -> TokenCounter:
        counter = getattr(coster, "counter", None)
        if counter is not None:
            return counter  # type: ignore[no-any-return]
        return RateCounter(target.tokens / max(1, len(target.data)))

    def _finish(
        self,
        unit: Unit,
        costs: Sequence[int],
        coster: Coster,
        contents: Mapping[int, tuple[str, RateCounter | None]],
        head: tuple[str, str, float, dict[str, Any]],
        targets: Sequence[_Target] = (),
        shown_bytes: int = 0,
    ) -> Rung:
        """Build a rung: new contents in, every turn priced, the floor turned into a factor by what it keeps.

        Derived costs are registered on a FixedCoster (module docstring).
        """
        representation, transform, floor, detail = head
        keep, errors, errors_kept = _keep(targets, contents, shown_bytes)
        factor = round(floor + (CEILING - floor) * keep, 6)
        detail = {**detail, "error_lines": errors, "error_lines_kept": errors_kept}
        turns, tokens, derived = list(unit.turns), list(costs), {}
        for i, (content, rate) in contents.items():
            if unit.kind is UnitKind.CHECKPOINT or "delimited" in unit.transforms.get(turns[i].ref, "").split("+"):
                # an excerpt of data stays data (a checkpoint is always a data block)
                content = rewrap_data_block(str(turns[i].content), content)
            turns[i] = dataclasses.replace(turns[i], content=content)
            if isinstance(coster, FixedCoster):
                rate = rate or RateCounter(costs[i] / max(1, len(str(unit.turns[i].content).encode("utf-8"))))
                tokens[i] = rate.count(content)
                derived[turn_key(turns[i])] = tokens[i]
            else:
                tokens[i] = coster.turn_tokens(turns[i])
        return Rung(representation, transform, factor, tuple(turns), tuple(tokens), detail, derived)

    def _rate(self, coster: Coster, target: _Target) -> RateCounter | None:
        counter = self._counter(coster, target)
        return counter if isinstance(counter, RateCounter) else None

    def _excerpts(self, unit: Unit, targets: Sequence[_Target], costs: Sequence[int], coster: Coster) -> list[Rung]:
        rungs = []
        excerpters: dict[int, Excerpter] = {}  # the sizes share each text's pieces, counts and priorities
        for size in self.excerpt_tokens:
            contents: dict[int, tuple[str, RateCounter | None]] = {}
            records: dict[str, Any] = {}
            shown = total = 0
            for t in targets:
                total += len(t.data)
                if size >= 0.8 * t.tokens:
                    shown += len(t.data)
                    continue  # this text is small for the size: it stays verbatim
                excerpter = excerpters.get(t.index)
                if excerpter is None:
                    excerpter = excerpters[t.index] = Excerpter(
                        t.data,
                        artifact_id=t.record.id,
                        sha256=t.sha256,
                        counter=self._counter(coster, t),
                        source_version=t.source_version,
                        focus=(*self.focus, *t.anchors),
                        ref_uri=t.ref_uri,
                        withheld=t.withheld,
                        recall=self.recall,
                    )
                try:
                    ex = excerpter.excerpt(size)
                except BudgetError:
                    contents = {}
                    break
                contents[t.index] = (ex.text, self._rate(coster, t))
                shown += sum(loc.byte_end - loc.byte_start for loc in ex.locators)
                records[t.record.id] = {
                    "sha256": t.sha256,
                    "bytes": len(t.data),
                    "max_tokens": size,
                    "locators": [loc.to_dict() for loc in ex.locators],
                }
                if t.withheld:
                    records[t.record.id]["withheld_lines"] = sorted(t.withheld)
            if not contents:
                continue
            redacted = "+secret_redacted" if any(t.withheld for t in targets) else ""
            head = ("excerpt", f"excerpt@{size}{redacted}", EXCERPT_FLOOR, {"records": records})
            rungs.append(self._finish(unit, costs, coster, contents, head, targets, shown))
        return _distinct(rungs)

    def _promote(self, target: _Target) -> tuple[ToolMemory | None, dict[str, Any]]:
        art = target.record
        assert isinstance(art, ToolArtifact)
        return promote(art, target.data, query=self.query, memory_id=f"{art.id}#memory", observed_at=art.created_at)

    def _extraction(
        self,
        unit: Unit,
        targets: Sequence[_Target],
        costs: Sequence[int],
        coster: Coster,
        memories: Mapping[str, tuple[ToolMemory | None, dict[str, Any]]],
        full: bool,
    ) -> Rung:
        contents: dict[int, tuple[str, RateCounter | None]] = {}
        records: dict[str, Any] = {}
        confidences = []
        for t in targets:
            mem, decision = memories.get(t.record.id, (None, {}))
            if mem is None:
                contents[t.index] = (_reference_text(t, self.recall), self._rate(coster, t))
                records[t.record.id] = {"sha256": t.sha256, "locators": [t.whole_locator()], "promotion": decision}
                continue
            extractor = str(mem.fields.get("extractor", ""))
            what = "extraction" if full else "memory"
            header = (
                f"[{what} of {t.label()}, {t.facts()}; extractor {extractor}, confidence {mem.confidence:.2f}; "
                f"full output: {whole(t.record.id, recall=self.recall)}]"
            )
            body = render_memory(mem) if full else mem.summary
            contents[t.index] = (f"{header}\n{body}", self._rate(coster, t))
            records[t.record.id] = {
                "sha256": t.sha256,
                "extractor": extractor,
                "confidence": mem.confidence,
                "freshness": str(mem.freshness),
                "locators": [dict(loc) for loc in mem.locators],
                "promotion": decision,
            }
            confidences.append(mem.confidence)
        kinds = sorted({str(r.get("extractor")) for r in records.values() if r.get("extractor")})
        floor = (EXTRACTION_FLOOR if full else MEMORY_FLOOR) * (sum(confidences) / len(confidences))
        representation = "extraction" if full else "memory"
        head = (representation, f"{representation}:{'+'.join(kinds)}", floor, {"records": records})
        return self._finish(unit, costs, coster, contents, head, targets)

    def _reference(self, unit: Unit, targets: Sequence[_Target], costs: Sequence[int], coster: Coster) -> Rung:
        contents = {t.index: (_reference_text(t, self.recall), self._rate(coster, t)) for t in targets}
        records = {
            t.record.id: {"sha256": t.sha256, "bytes": len(t.data), "locators": [t.whole_locator()]} for t in targets
        }
        head = ("reference", "reference", REFERENCE_FLOOR, {"records": records})
        return self._finish(unit, costs, coster, contents, head, targets)

    # -- redundancy ------------------------------------------------------------------------------------

    def redundant(self, units: Sequence[Unit], required: Mapping[str, str]) -> dict[str, Pointer]:
        """Map each redundant tool-exchange unit id to the newer unit kept in its place.

        Args:
            units: live candidate units in ``seq`` order.
            required: unit id → protection reason; these units are never redundant, and a pointer never
                passes through one (a required unit is kept, so what repeats it points at it).

        Returns:
            ``{redundant unit id: Pointer(kept unit id, exact)}``; a kept unit is never itself redundant;
            ``exact`` is false when some step from the unit to the kept one is a near-duplicate.
        """
        reach = self.reach
        exchanges = [
            u
            for u in units
            if u.kind is UnitKind.TOOL_EXCHANGE
            and (reach is None or u.id in reach)
            and self._per_unit("only delimited", u, _only_delimited)
        ]
        pointers = {uid: Pointer(kept, True) for uid, kept in _repeated_calls(exchanges, self._call_key).items()}
        groups: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = {}
        for u in exchanges:
            if u.id in pointers:
                continue
            signature = self._per_unit("output signature", u, self._large_output_signature)
            if signature is not None:
                groups.setdefault(signature, []).append((u.id, self._per_unit("outputs", u, _outputs)))
        for items in groups.values():  # near-duplicates only among outputs of the same call (a poll, a retry)
            if len(items) > 1:
                pointers.update(self._near_duplicates(items))
        out = {}
        for uid, pointer in pointers.items():
            if uid in required:
                continue
            kept, exact = pointer
            while kept in pointers and kept not in required:
                kept, exact = pointers[kept].kept, exact and pointers[kept].exact
            out[uid] = Pointer(kept, exact)
        return out

    def _call_key(self, unit: Unit) -> tuple[Any, ...] | None:
        """:func:`unit_call_key`, cached per unit object (records are immutable)."""
        return self._per_unit("call key", unit, unit_call_key)  # type: ignore[no-any-return]

    def _large_output_signature(self, unit: Unit) -> tuple[tuple[str, str], ...] | None:
        """:func:`_call_signature` of a unit whose outputs reach :data:`REDUNDANT_MIN_CHARS`, else ``None``."""
        outputs = self._per_unit("outputs", unit, _outputs)
        return _call_signature(unit) if len(outputs) >= REDUNDANT_MIN_CHARS else None

    def _per_unit(self, name: str, unit: Unit, compute: Callable[[Unit], Any]) -> Any:
        """``compute(unit)``, kept in the shared cache while ``unit`` is the very object it was computed for."""
        known = self._cache.get((name, unit.id))
        if known is None or known[0] is not unit:
            known = self._cache[(name, unit.id)] = (unit, compute(unit))
        return known[1]

    def _near_duplicates(self, items: Sequence[tuple[str, str]]) -> dict[str, Pointer]:
        """Older id → newest identical or similar id, as :func:`~ctxledger.represent.find_redundant` computes it.

        Same shingles, MinHash, threshold and outcome rule (:func:`~ctxledger.represent.redundancy.outcome`);
        each text's sketch and outcome are cached, so a growing history only sketches its new outputs.
        """
        lsh = lsh_index(REDUNDANT_THRESHOLD)
        order = {item_id: i for i, (item_id, _) in enumerate(items)}
        texts = dict(items)
        exact: dict[str, str] = {}
        sketches: dict[str, MinHash] = {}
        out: dict[str, Pointer] = {}
        for item_id, text in reversed(items):
            digest, sketch = self._sketch(text)
            if digest in exact:
                out[item_id] = Pointer(exact[digest], True)
                continue
            similar = [k for k in lsh.query(sketch) if sketch.jaccard(sketches[k]) >= REDUNDANT_THRESHOLD]
            if similar:
                outcome = self._outcome(text)
                similar = [k for k in similar if self._outcome(texts[k]) == outcome]
            if similar:
                out[item_id] = Pointer(max(similar, key=order.__getitem__), False)
                continue
            exact[digest] = item_id
            sketches[item_id] = sketch
            lsh.insert(item_id, sketch)
        return out

    def _outcome(self, text: str) -> tuple[frozenset[str], frozenset[str]]:
        """:func:`~ctxledger.represent.redundancy.outcome` of a text, cached like its sketch."""
        key = ("outcome", len(text), hash(text))
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = outcome(text)
        return found  # type: ignore[no-any-return]

    def _sketch(self, text: str) -> tuple[str, MinHash]:
        key = ("sketch", len(text), hash(text))
        found = self._cache.get(key)
        if found is None:
            sample = text if len(text) <= 2 * SKETCH_CHARS else text[:SKETCH_CHARS] + text[-SKETCH_CHARS:]
            found = (sha256_hex(text.encode("utf-8")), _minhash(sample))
            self._cache[key] = found
        return found


def _call_signature(unit: Unit) -> tuple[tuple[str, str], ...]:
    """The calls of a tool exchange as ``(name, canonical arguments)`` pairs.

    Outputs of *different* calls are never redundant, however alike they look: a booking and the
    cancellation of the same reservation return near-identical JSON, and dropping either would hide a
    state change from the model.
    """
    calls = []
    for rec in unit.records:
        if isinstance(rec, ToolCall):
            calls.append((rec.name, canonical_or_raw(rec.arguments)))
    return tuple(calls)


def error_lines(data: bytes) -> list[str]:
    """The distinct error lines of a text (stripped, at most :data:`MAX_ERROR_LINES`, first ones first)."""
    found: dict[str, None] = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        if is_error_line(line) and line.strip():
            found[line.strip()] = None
            if len(found) >= MAX_ERROR_LINES:
                break
    return list(found)


def _keep(
    targets: Sequence[_Target], contents: Mapping[int, tuple[str, Any]], shown_bytes: int
) -> tuple[float, int, int]:
    """``(keep, error lines, error lines kept)`` of a rung: ``keep`` in [0, 1] as in the module docstring."""
    total = sum(len(t.data) for t in targets)
    shown = shown_bytes / total if total else 0.0
    errors = [(t.index, line) for t in targets for line in t.errors]
    if not errors:
        return shown, 0, 0
    kept = sum(1 for index, line in errors if line in contents.get(index, ("",))[0])
    return ERROR_WEIGHT * kept / len(errors) + (1 - ERROR_WEIGHT) * shown, len(errors), kept


def _tenant_of(unit: Unit) -> str:
    """The tenant of a unit's records (``""`` for a unit built without records)."""
    return unit.records[0].tenant_id if unit.records else ""


def _content_key(unit: Unit) -> tuple[Any, ...]:
    """A cheap identity of a unit's model-facing content (Python caches a string's hash on the string)."""
    turns = tuple(
        (
            t.ref,
            t.role,
            hash(t.content) if isinstance(t.content, str) else turn_key(t),
            tuple((c.call_id, c.name, hash(c.arguments)) for c in t.tool_calls),
        )
        for t in unit.turns
    )
    return turns, tuple(sorted(unit.transforms.items()))


def reach(units: Sequence[Unit], costs: Sequence[Sequence[int]], input_tokens: int) -> frozenset[str]:
    """The newest units that get rungs and redundancy checks (ids), as the module docstring's *Reach* says.

    Walking from the newest unit back, each unit counts ``min(verbatim tokens, input_tokens // REACH_SHARE)``;
    the walk stops once the count passes :data:`REACH` × ``input_tokens``, but never before it has taken the
    newest :data:`REACH_MIN_UNITS` units. Older units can enter only where the budget is nearly spent,
    verbatim if small; building their excerpts and sketches would cost time on every cold assembly of a long
    history for nothing. The cap keeps a huge output from exhausting the reach: it still gets its cheaper
    rungs, and so do the units around it.

    Args:
        units: the snapshot's units in ``seq`` order.
        costs: per-turn verbatim costs of each unit (aligned with ``units``), in tokens.
        input_tokens: ``B_input`` in tokens.
    """
    cap = max(1, input_tokens // REACH_SHARE)
    out: list[str] = []
    total = 0
    for unit, turn_costs in zip(reversed(units), reversed(costs), strict=True):
        total += min(sum(turn_costs), cap)
        if len(out) >= REACH_MIN_UNITS and total > REACH * input_tokens:
            break
        out.append(unit.id)
    return frozenset(out)


def secret_lines(data: bytes, scanner: SecretScanner) -> dict[int, str]:
    r"""The lines of ``data`` holding a secret, each with the placeholder an excerpt shows in its place.

    Args:
        data: raw bytes (a tool output); lines are ``\n``-terminated, numbered from 1 as locators number them.
        scanner: the policy's scanner; the default scanner is consulted too, as the verbatim redaction is.

    Returns:
        ``{line: "[withheld by policy: <types> on line <line>]"}``; empty when no secret is found. The text is
        scanned once (decoded with ``surrogateescape``, so its lines map back to exact byte ranges).
    """
    text = data.decode("utf-8", errors="surrogateescape")
    findings = list(scanner.scan(text))
    default = default_scanner()
    if default is not scanner:
        findings += default.scan(text)
    if not findings:
        return {}
    pieces = text.splitlines(keepends=True)  # the scanner numbers lines as str.splitlines does
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece.encode("utf-8", errors="surrogateescape")))
    index = LineIndex(data)
    types: dict[int, set[str]] = {}
    for f in findings:
        if not 1 <= f.line <= len(pieces):
            continue
        a, b = starts[f.line - 1], starts[f.line]
        for line in range(index.line_of(a), index.line_of(max(a, b - 1)) + 1):
            types.setdefault(line, set()).add(f.type)
    return {line: f"[withheld by policy: {', '.join(sorted(t))} on line {line}]" for line, t in types.items()}


STATE_KEYS = 16
"""At most this many top-level keys of a checkpoint's state anchor its excerpts (:func:`_state_keys`)."""


def _state_keys(ckpt: Checkpoint) -> tuple[str, ...]:
    """Each top-level key of a checkpoint's state as its rendered JSON shows it (``"submission": ``), sorted.

    The state is one JSON line, cut by bytes when excerpted; anchoring its keys keeps the opening of every
    value (the first lines of a submitted patch, a status) ahead of error words deep inside the values.
    """
    keys = sorted(str(k) for k in ckpt.state)[:STATE_KEYS]
    return tuple(json.dumps(k, ensure_ascii=False) + ": " for k in keys)


def _reference_text(t: _Target, recall: bool) -> str:
    return f"[not shown: {t.label()}, {t.facts()}; fetch: {whole(t.record.id, recall=recall)}]"


def _distinct(rungs: list[Rung]) -> list[Rung]:
    """Drop excerpts identical to a larger one (a text too short to differ between sizes)."""
    out: list[Rung] = []
    for rung in rungs:
        if not out or rung.turns != out[-1].turns:
            out.append(rung)
    return out


def _only_delimited(unit: Unit) -> bool:
    """Whether every record of ``unit`` is rendered as it is but for the data-block framing."""
    return all(t == "delimited" for t in unit.transforms.values())


def _outputs(unit: Unit) -> str:
    """The tool results' text, without the data-block framing (its ``observed_at`` differs between copies)."""
    return "\n".join(data_block_body(str(t.content)) for t in unit.turns if t.role == "tool")


def _repeated_calls(
    exchanges: Sequence[Unit], keys: Callable[[Unit], tuple[Any, ...] | None] | None = None
) -> dict[str, str]:
    """Units whose calls (tool, canonical arguments, output sha256) all repeat in one newer unit.

    ``keys``: a unit's :func:`unit_call_key` (a cached one; default computed).
    """
    newest: dict[tuple[Any, ...], str] = {}
    out: dict[str, str] = {}
    for unit in reversed(exchanges):
        key = (keys or unit_call_key)(unit)
        if key is None:
            continue
        if key in newest:
            out[unit.id] = newest[key]
        else:
            newest[key] = unit.id
    return out


def unit_call_key(unit: Unit) -> tuple[Any, ...] | None:
    """The :func:`call_key` of each call of a tool-exchange unit; ``None`` when a call has no result."""
    calls = [r for r in unit.records if isinstance(r, ToolCall)]
    arts = {r.tool_call_id: r for r in unit.records if isinstance(r, ToolArtifact)}
    if not calls or any(c.id not in arts for c in calls):
        return None
    return tuple(call_key(c, arts[c.id]) for c in calls)


def omit_redundant(
    units: Sequence[Unit],
    pointers: Mapping[str, str | Pointer],
    omitted: dict[str, tuple[str, str, str]],
    decisions: list[PolicyDecision],
) -> list[Unit]:
    """Leave out redundant units as ``redundant`` (stage ``redundancy``) with a pointer to the kept unit.

    The detail reads ``same tool output as unit K (kept)`` for an exact copy and ``near-duplicate of unit K
    (same outcome lines and values; kept)`` for a near-duplicate.

    Args:
        units: live units.
        pointers: redundant unit id → kept unit id (an exact copy) or :class:`Pointer` (from
            :meth:`Ladder.redundant`).
        omitted: the plan's record id → ``(reason, stage, detail)``; every record of a redundant unit is added.
        decisions: the plan's decisions; one ``omit`` decision per redundant unit is appended.

    Returns:
        The units still live.
    """
    for unit in units:
        pointer = pointers.get(unit.id)
        if pointer is None:
            continue
        kept, exact = (pointer, True) if isinstance(pointer, str) else pointer
        if exact:
            detail = f"same tool output as unit {kept} (kept)"
        else:
            detail = f"near-duplicate of unit {kept} (same outcome lines and values; kept)"
        decisions.append(PolicyDecision(unit.id, "redundancy", Outcome.OMIT, ReasonCode.REDUNDANT, detail))
        for rid in unit.record_ids:
            omitted.setdefault(rid, (str(ReasonCode.REDUNDANT), "redundancy", detail))
    return [u for u in units if u.id not in pointers]


def settle_redundant(
    units: Sequence[Unit],
    pointers: Mapping[str, str | Pointer],
    sent: Container[str],
    omitted: dict[str, tuple[str, str, str]],
    decisions: list[PolicyDecision],
) -> None:
    """Account each redundant unit whose kept copy was not sent under the reason that copy was left out for.

    ``redundant`` says the content is in the payload in another unit. When selection (or a later phase) leaves
    the kept copy out as well, neither copy is sent, so the older copy's records take the kept unit's reason
    (``budget``, ``role_order`` …) at stage ``redundancy``, with the detail ``same tool output as unit K, which
    was left out too (stage selection: budget); neither copy was sent``; its decision is replaced to match.

    Args:
        units: every candidate unit (the redundant ones included).
        pointers: redundant unit id → kept unit id or :class:`Pointer`, as given to :func:`omit_redundant`.
        sent: ids of the units the payload carries.
        omitted: the plan's record id → ``(reason, stage, detail)``, updated in place.
        decisions: the plan's decisions, updated in place.
    """
    by_id = {u.id: u for u in units}
    changed: dict[str, PolicyDecision] = {}
    for uid, pointer in pointers.items():
        kept, exact = (pointer, True) if isinstance(pointer, str) else pointer
        if kept in sent or uid not in by_id:
            continue
        kept_records = by_id[kept].record_ids if kept in by_id else (kept,)
        why = next((omitted[rid] for rid in kept_records if rid in omitted), None)
        reason, stage = (why[0], why[1]) if why is not None else (str(ReasonCode.BUDGET), "selection")
        near = f"near-duplicate of unit {kept} (same outcome lines and values)"
        copy = f"same tool output as unit {kept}" if exact else near
        detail = f"{copy}, which was left out too (stage {stage}: {reason}); neither copy was sent"
        for rid in by_id[uid].record_ids:
            if omitted.get(rid, ("", ""))[:2] == (str(ReasonCode.REDUNDANT), "redundancy"):
                omitted[rid] = (reason, "redundancy", detail)
        changed[uid] = PolicyDecision(uid, "redundancy", Outcome.OMIT, reason, detail)
    if changed:
        decisions[:] = [changed.get(d.ref, d) if d.stage == "redundancy" else d for d in decisions]


def charge_savings(saved: dict[str, int], chosen: Mapping[str, Option], verbatim_tokens: Mapping[str, int]) -> None:
    """Add, per transform, the tokens each chosen non-verbatim option saved against verbatim.

    Args:
        saved: the budget ledger's ``saved`` (transform → tokens), updated in place.
        chosen: unit id → the chosen option.
        verbatim_tokens: unit id → verbatim tokens.
    """
    for uid, option in chosen.items():
        if option.representation == "verbatim" or uid not in verbatim_tokens:
            continue
        name = option.transform or option.representation
        saved[name] = saved.get(name, 0) + verbatim_tokens[uid] - option.tokens


def _record_facts(option: Option | None, record_id: str) -> Mapping[str, Any]:
    records = option.detail.get("records") if option is not None else None
    facts = records.get(record_id) if isinstance(records, Mapping) else None
    return facts if isinstance(facts, Mapping) else {}


def record_locators(option: Option | None, record_id: str) -> list[dict[str, Any]]:
    """The locators an option shows for one record (empty for verbatim)."""
    return [dict(loc) for loc in _record_facts(option, record_id).get("locators", ())]


def record_promotion(option: Option | None, record_id: str) -> dict[str, Any] | None:
    """The promotion decision behind an extraction or memory option for one record, if any."""
    decision = _record_facts(option, record_id).get("promotion")
    return json.loads(json.dumps(decision, default=str)) if decision else None


def rehydrate_ref(
    store: Any, tenant_id: str, ref: str | Mapping[str, Any], byte_range: ByteRange | None = None
) -> bytes:
    """Exactly the bytes a reference names (see :meth:`ctxledger.ledger.Ledger.rehydrate`).

    Every read goes through a record the tenant owns: a locator's record is looked up in the tenant first
    and must carry the locator's sha256, and a bare ``sha256:<hex>`` is read only when one of the tenant's
    tool artifacts has that sha256 (blobs are content-addressed and shared by tenants, so without the
    check a tenant could read, or learn of, bytes only another tenant stored). A message's bytes are its
    text as UTF-8 and a checkpoint's its rendered text as UTF-8 (:func:`~ctxledger.units.checkpoint_bytes`):
    the bytes their excerpts locate, checked against the locator's sha256 when one is given.

    Raises:
        RecordNotFound: no such record or blob in the tenant (also for a blob only other tenants reference; a
            missing blob of an artifact names the artifact).
        ContentRetained: a retention rule redacted the record's content or reduced it to its hash.
        IntegrityError: stored bytes no longer match their hash, or a locator's sha256 does not match.
        InputError: malformed locator, range outside the content, or a record without content.
    """
    if isinstance(ref, str) and ref.startswith("sha256:"):
        if not store.artifacts_by_sha256(tenant_id, ref.removeprefix("sha256:")):
            raise RecordNotFound(tenant_id, ref, what="artifact with sha256")
        return rehydrate(store.blobs, ref, byte_range=byte_range)
    locator = Locator.from_dict(ref) if not isinstance(ref, str) else None
    rec = store.get(tenant_id, locator.artifact_id if locator is not None else ref)
    state = retained(rec)
    if state is not None:
        raise ContentRetained(tenant_id, rec.id, state.sentence)
    wanted = byte_range or ((locator.byte_start, locator.byte_end) if locator is not None else None)
    if isinstance(rec, ToolArtifact):
        if locator is not None and locator.sha256 != rec.sha256:
            raise IntegrityError(f"locator sha256 {locator.sha256[:16]} is not artifact {rec.id}'s")
        try:
            return rehydrate(store.blobs, rec.sha256, byte_range=wanted)
        except BlobNotFound as exc:
            raise BlobNotFound(rec.sha256, exc.where, rec.id) from None
    text_bytes = _text_bytes(rec)
    if text_bytes is not None:
        if locator is not None and sha256_hex(text_bytes) != locator.sha256:
            raise IntegrityError(f"{rec.kind.value} {rec.id} no longer matches the locator's sha256")
        return cut_range(text_bytes, wanted, rec.id)
    raise InputError(_no_content(store, tenant_id, rec), field="ref")


def _text_bytes(rec: Record) -> bytes | None:
    """The bytes excerpts of a message or checkpoint locate: its text as UTF-8; ``None`` for other records."""
    if isinstance(rec, Message) and isinstance(rec.content, str):
        return rec.content.encode("utf-8")
    if isinstance(rec, Checkpoint):
        return checkpoint_bytes(rec)
    return None


RESULT_SEARCH = 256
"""Records after a tool call searched for its result when a caller asks to rehydrate the call itself."""


def _no_content(store: Any, tenant_id: str, rec: Record) -> str:
    """Why ``rec`` has no bytes to give back, naming the record that holds a tool call's result when one is near."""
    sentence = f"record {rec.id} is a {rec.kind.value} with no stored content to rehydrate"
    if not isinstance(rec, ToolCall):
        return sentence
    after = store.records(tenant_id, rec.conversation_id, after_seq=rec.seq, as_of_seq=rec.seq + RESULT_SEARCH)
    results = [r.id for r in after if isinstance(r, ToolArtifact) and r.tool_call_id == rec.id]
    if results:
        return f"{sentence}; its result is {', '.join(results)} (rehydrate that)"
    return f"{sentence}, and no result of it was recorded in the {RESULT_SEARCH} records after it"
