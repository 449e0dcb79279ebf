"""Token costs of turns on the serialized form, cached by (counter, content hash).

A :class:`Coster` answers "how many tokens does this turn add to a request of this API?". The default,
:class:`SerializerCoster`, asks the target serializer (which adds the provider's framing) with a real
counter, and caches every count in process and, when given a store, in the store's token-count table,
keyed by the counter id and the hash of the turn's model-facing fields. Tests of the failure cases use
:class:`FixedCoster`, whose costs are the cases' reference counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ctxledger.hashing import content_hash, quick_content_hash
from ctxledger.serialize.base import Serializer, Turn
from ctxledger.serialize.undeclared_tools import is_minimal_definition
from ctxledger.tokens import TokenCounter
from ctxledger.units import DeferredToolTurn, renders_nothing


@runtime_checkable
class Coster(Protocol):
    """Costs turns and tool schemas in tokens for one API contract and one counter."""

    counter_id: str
    is_estimate: bool

    def turn_tokens(self, turn: Turn) -> int:
        """Tokens this turn adds to a request, framing included."""
        ...

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens the tool schemas add to a request."""
        ...

    def base_tokens(self) -> int:
        """Tokens every request costs (reply priming)."""
        ...

    def prefetch(self, turns: Sequence[Turn]) -> None:
        """Warm the cache for many turns at once (one store round trip)."""
        ...

    def merged_framing(self, turns: Sequence[Turn]) -> int:
        """Framing :meth:`turn_tokens` charged ``turns`` (in payload order) that the payload does not send.

        A format that merges consecutive turns of one role into one message sends their framing once; 0 for a
        format that sends every turn as its own message.
        """
        ...


def turn_key(turn: Turn) -> str:
    """Content hash of a turn's model-facing fields (its ``ref`` is excluded).

    ``relayed`` and ``thinking`` enter the hash only when set, so the keys of every other turn (persisted in the store's
    token-count table) are the same as before it existed. A tool result read from the blob store on demand
    (:class:`~ctxledger.units.DeferredToolTurn`) stands in the hash as its blob's sha256 and media type, which
    name its content, so it is keyed (and its count found) without reading it.
    """
    fields: list[object] = [
        turn.role,
        _content_field(turn),
        turn.name,
        [[c.call_id, c.name, c.arguments] for c in turn.tool_calls],
        turn.tool_call_id,
        turn.tool_name,
        turn.is_error,
    ]
    if turn.relayed:
        fields.append("relayed")
    if turn.thinking:
        fields.append([[at, dict(block)] for at, block in turn.thinking])
    return quick_content_hash(fields)  # encoded by msgspec when it can (long tool outputs): the same key


def _content_field(turn: Turn) -> object:
    """What stands for a turn's content in :func:`turn_key`."""
    if isinstance(turn, DeferredToolTurn) and turn.artifact is not None:
        art = turn.artifact
        return ["blob", art.sha256, art.media_type]
    content = turn.content
    return content if isinstance(content, str | None) else [dict(p) for p in content]


KEY_CACHE_SIZE = 65_536
"""Turn objects whose :func:`turn_key` a :class:`SerializerCoster` remembers at most (emptied when full)."""


UNSAVED_LIMIT = 4_096
"""Counts a :class:`SerializerCoster` holds before it writes them to the store without waiting for a flush."""


class SerializerCoster:
    """Costs turns with a serializer's framing rules and a real :class:`TokenCounter`.

    Args:
        serializer: the target API's serializer.
        counter: the tokenizer.
        store: optional :class:`~ctxledger.store.base.GraphStore` whose token-count table is used as a
            second-level cache (so counts survive the process).
    """

    def __init__(self, serializer: Serializer, counter: TokenCounter, store: Any = None) -> None:
        self.serializer = serializer
        self.counter = counter
        self.store = store
        # a serializer whose text names the recall tool frames some turns differently: its counts are its own
        variant = "+recall" if getattr(serializer, "recall", False) else ""
        self.counter_id = f"{serializer.name}{variant}/{counter.id}"
        self.is_estimate = counter.is_estimate
        self._cache: dict[str, int] = {}
        self._keys: dict[int, tuple[Turn, str]] = {}
        self._unsaved: dict[str, int] = {}

    def _key(self, turn: Turn) -> str:
        """:func:`turn_key`, remembered per turn object (turns are immutable; the entry holds the object)."""
        hit = self._keys.get(id(turn))
        if hit is not None and hit[0] is turn:
            return hit[1]
        key = turn_key(turn)
        if len(self._keys) >= KEY_CACHE_SIZE:
            self._keys.clear()
        self._keys[id(turn)] = (turn, key)
        return key

    def turn_tokens(self, turn: Turn) -> int:
        """Tokens of ``turn`` (cached; a new count reaches the store at the next :meth:`flush`)."""
        key = self._key(turn)
        tokens = self._cache.get(key)
        if tokens is None:
            tokens = self._count(turn)
            self._cache[key] = tokens
            if self.store is not None:
                self._unsaved[key] = tokens
                if len(self._unsaved) >= UNSAVED_LIMIT:
                    self.flush()
        return tokens

    def flush(self) -> None:
        """Write the counts :meth:`turn_tokens` made since the last flush to the store, in one transaction."""
        if self.store is not None and self._unsaved:
            unsaved, self._unsaved = self._unsaved, {}
            self.store.put_token_counts(self.counter_id, unsaved)

    def prefetch(self, turns: Sequence[Turn]) -> None:
        """Load cached counts for ``turns`` from the store and count (then store) the missing ones.

        Turns whose text is short in all (under :data:`COUNT_RATHER_THAN_READ` characters) are counted without
        asking the store first: counting them costs less than the round trip (the count is the same either way).
        The key cache is emptied first when the batch would not fit beside what it holds, so the keys of a batch
        of at most :data:`KEY_CACHE_SIZE` turns are all still there when each turn's count is taken.
        """
        if len(self._keys) + len(turns) > KEY_CACHE_SIZE:
            self._keys.clear()
        keys = {self._key(t): t for t in turns}
        missing = [k for k in keys if k not in self._cache]
        if self.store is not None and missing and not _short([keys[k] for k in missing]):
            self._cache.update(self.store.get_token_counts(self.counter_id, missing))
        fresh = {k: self._count(keys[k]) for k in missing if k not in self._cache}
        self._cache.update(fresh)
        if self.store is not None and fresh:
            self.store.put_token_counts(self.counter_id, fresh)

    def _count(self, turn: Turn) -> int:
        """The serializer's count; 0 for a turn that renders to nothing (the assembler never sends one)."""
        return 0 if renders_nothing(turn) else self.serializer.turn_tokens(turn, self.counter)

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the tool schemas."""
        return self.serializer.tools_tokens(tools, self.counter) if tools else 0

    def base_tokens(self) -> int:
        """Reply priming of the serializer."""
        return self.serializer.base_tokens(self.counter)

    def merged_framing(self, turns: Sequence[Turn]) -> int:
        """The serializer's ``merged_framing`` of ``turns``, or 0 when it sends every turn as its own message."""
        merged = getattr(self.serializer, "merged_framing", None)
        return merged(turns, self.counter) if merged is not None else 0


COUNT_RATHER_THAN_READ = 4_096
"""Characters of text below which :meth:`SerializerCoster.prefetch` counts turns instead of reading their counts."""


def _short(turns: Sequence[Turn]) -> bool:
    """Whether ``turns`` are short text: no content parts or reasoning, under :data:`COUNT_RATHER_THAN_READ` chars.

    Tool-call arguments count with the texts.
    """
    total = 0
    for turn in turns:
        if isinstance(turn, DeferredToolTurn) and not turn.loaded:
            return False  # its length is not known without reading it
        if not isinstance(turn.content, str | None) or turn.thinking:
            return False
        total += len(turn.content or "") + sum(len(c.arguments) for c in turn.tool_calls)
        if total >= COUNT_RATHER_THAN_READ:
            return False
    return True


class FixedCoster:
    """Costs from a table: record id → tokens, tool name → tokens (the failure cases' reference counts).

    ``fallback`` prices a turn whose ``ref`` the table does not name (a turn the assembler writes itself, such as
    the status stub answering a call that has no result) by counting its text; without one, such a turn raises.

    Raises:
        KeyError: a turn whose ``ref`` has no cost in the table, and no ``fallback``.
    """

    def __init__(
        self,
        turn_costs: Mapping[str, int],
        tool_costs: Mapping[str, int] | None = None,
        fallback: TokenCounter | None = None,
    ) -> None:
        self.turn_costs = dict(turn_costs)
        self.tool_costs = dict(tool_costs or {})
        self.fallback = fallback
        table = [self.turn_costs, self.tool_costs] + ([getattr(fallback, "id", repr(fallback))] if fallback else [])
        self.counter_id = "fixed/" + content_hash(table)[7:19]
        self.is_estimate = False
        self.derived: dict[str, int] = {}
        """:func:`turn_key` → tokens of turns derived from a record (an excerpt, an extraction …), which
        the per-record table cannot price; filled by the representation ladder (:mod:`.represent`)."""

    def turn_tokens(self, turn: Turn) -> int:
        """The table's cost for the turn's record (a derived turn's registered cost first, ``fallback`` last)."""
        if self.derived:
            tokens = self.derived.get(turn_key(turn))
            if tokens is not None:
                return tokens
        if self.fallback is not None and turn.ref not in self.turn_costs:
            return self.fallback.count(turn.content if isinstance(turn.content, str) else str(turn.content or ""))
        return self.turn_costs[turn.ref]

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Sum of the table's cost per tool name.

        A minimal definition the assembler adds for a tool called without a schema
        (:mod:`ctxledger.serialize.undeclared_tools`) costs 0 unless the table names it: reference counts cover
        the schemas a case lists, and price no framing either (:meth:`base_tokens`).
        """
        return sum(self._tool_cost(t) for t in tools)

    def _tool_cost(self, tool: Mapping[str, Any]) -> int:
        function = tool.get("function", tool)
        name = str(function.get("name"))
        if name not in self.tool_costs and is_minimal_definition(tool):
            return 0
        return self.tool_costs[name]

    def base_tokens(self) -> int:
        """No priming in the reference counts."""
        return 0

    def merged_framing(self, turns: Sequence[Turn]) -> int:
        """Reference counts are per item: nothing is merged."""
        return 0

    def prefetch(self, turns: Sequence[Turn]) -> None:
        """Nothing to warm."""
