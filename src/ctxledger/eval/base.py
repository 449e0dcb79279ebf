"""The interface the evaluation harness measures.

A :class:`Selector` chooses, for one model call, which turns of a conversation enter the context under a
token budget. The harness gives every selector the same :class:`SelectionTask` and keeps the gold
annotations (required evidence, recovery state) in :class:`EvalCase`, out of the selectors' reach, so a
selector can only be judged, never helped, by them.

Token units: every ``tokens`` / ``*_tokens`` value here is a count of model tokens on the serialized
form (per-message framing included) under the task's counter, never bytes or characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ctxledger.serialize.base import CallView
from ctxledger.tokens import TokenCounter

ItemRole = Literal["system", "developer", "user", "assistant", "tool"]

REQUEST_BASE_TOKENS = 3
"""Tokens every OpenAI Chat Completions request costs besides its messages (reply priming:
``<|start|>assistant<|message|>``), as in OpenAI's cookbook "How to count tokens with tiktoken"."""


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One turn of a conversation, as a candidate for the context.

    Attributes:
        id: unique within its conversation (LoCoMo ``dia_id``, ``"<trajectory>#<index>"`` …).
        role: ``system``, ``developer``, ``user``, ``assistant`` or ``tool`` (a tool result).
        text: the turn's text as it would be sent (``""`` for an assistant turn with only tool calls).
        seq: 0-based position in the conversation; items are given in ``seq`` order.
        tokens: cost of the turn on the serialized form (framing and tool-call JSON included).
        tool_call_id: for ``tool`` items, the call id this result answers.
        tool_calls: for ``assistant`` items, the calls it requested (parallel calls in order).
        is_error: for ``tool`` items, whether the result reports a failure.
        meta: source metadata (session date, source path …); never part of a payload.
    """

    id: str
    role: ItemRole
    text: str
    seq: int
    tokens: int
    tool_call_id: str | None = None
    tool_calls: tuple[CallView, ...] = ()
    is_error: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SelectionTask:
    """What a selector sees for one model call.

    Attributes:
        items: the conversation's turns before the call, in ``seq`` order.
        query: the text the call is about: the current user turn (LoCoMo, BFCL) or the latest turn of a
            trajectory. It is the retrieval query; it is already paid for by ``query_tokens``.
        budget_tokens: the input budget of the whole request (``B_input``).
        counter: the exact counter the item costs were measured with.
        query_tokens: tokens of the current user turn when it is not one of ``items`` (0 otherwise).
        base_tokens: tokens the request costs regardless of content (:data:`REQUEST_BASE_TOKENS`).
    """

    items: Sequence[EvalItem]
    query: str
    budget_tokens: int
    counter: TokenCounter
    query_tokens: int = 0
    base_tokens: int = REQUEST_BASE_TOKENS

    @property
    def item_budget(self) -> int:
        """Tokens left for items: ``budget_tokens - base_tokens - query_tokens`` (may be negative)."""
        return self.budget_tokens - self.base_tokens - self.query_tokens


@dataclass(frozen=True, slots=True)
class Selection:
    """A selector's answer for one task.

    Attributes:
        included_ids: ids of the items that enter the context (any order; the payload is in ``seq`` order).
        payload_tokens: the selector's own count of the request, base and query turn included.
        latency_s: the selector's own timing in seconds (the harness also measures wall time).
        payload_hash: ``"sha256:<hex>"`` of the serialized payload if the selector builds one; when
            ``None`` the harness hashes the included turns itself.
        violations: problems the selector itself reports (e.g. a peer's dropped pairing).
        fits: false when the selector declines because the context cannot fit (full history replay over
            budget); such a selection sends nothing and counts as omitting all evidence.
        details: optional manifest facts for the metrics only a policy can produce, by key:
            ``"derived"``: one mapping per derived item sent (summary, excerpt, memory) with its
            ``sources``, ``source_version`` and ``transform`` (provenance coverage);
            ``"rehydrations"``: ``(expected "sha256:<hex>", bytes read or None)`` pairs (rehydration
            success); ``"summaries"``: mappings with ``text`` and ``evidence_ids`` of each compaction
            record sent (compaction fidelity against the case's recovery state);
            ``"occupancy_tokens"``: tokens per context class from the budget ledger (replaces the
            harness's role-based classification); ``"sent_texts"``: item id → the text actually sent
            for an item that entered in a cheaper representation (an excerpt of a tool output): the
            harness recounts such an item on that text, with the exact counter, instead of charging
            its verbatim :attr:`EvalItem.tokens`; ``"relevance"``: the relevance the call was scored with,
            as the manifest's ``policy.relevance`` (``bm25``, or ``bm25+<embedding model>`` with the semantic
            extra, then ``+speaker`` …).
    """

    included_ids: list[str]
    payload_tokens: int
    latency_s: float
    payload_hash: str | None = None
    violations: list[str] = field(default_factory=list)
    fits: bool = True
    details: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Selector(Protocol):
    """A context-selection strategy under evaluation (ctxledger's policy, a baseline or a peer).

    Attributes:
        name: a stable label used in reports (e.g. ``"bm25"``).
    """

    name: str

    def select(self, task: SelectionTask) -> Selection:
        """Choose the items of ``task`` that enter the context; must not raise on valid input."""
        ...


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One model call to evaluate plus its gold annotations (hidden from selectors).

    Attributes:
        case_id: unique within its dataset (LoCoMo ``"conv-26/q12"``, trajectory ``"<file>@<step>"``).
        dataset: the dataset name (see :func:`ctxledger.eval.datasets.dataset_names`).
        items: the candidate turns (shared between cases of the same conversation).
        query: see :attr:`SelectionTask.query`.
        query_tokens: see :attr:`SelectionTask.query_tokens`.
        required_ids: ids of the items holding the required evidence (empty: recall is undefined).
        category: the breakdown key of the report (LoCoMo category label, BFCL scenario, dataset name).
        recovery: recovery state by kind (``goal``, ``constraints``, ``latest_error``,
            ``unresolved_calls``, ``system``): ids that must be in context for the run to resume.
        stale_ids: ids of items known to be superseded or stale at this call.
        provider_prompt_tokens: prompt tokens the provider reported for this very call, when recorded.
        notes: what was repaired or dropped while loading this case, in words.
    """

    case_id: str
    dataset: str
    items: tuple[EvalItem, ...]
    query: str
    query_tokens: int
    required_ids: frozenset[str] = frozenset()
    category: str = ""
    recovery: Mapping[str, frozenset[str]] = field(default_factory=dict)
    stale_ids: frozenset[str] = frozenset()
    provider_prompt_tokens: int | None = None
    notes: tuple[str, ...] = ()


DatasetKind = Literal["evidence", "trajectory"]


@dataclass(frozen=True, slots=True)
class EvalDataset:
    """A loaded dataset: its cases and the documented counts of what loading repaired or dropped.

    Attributes:
        name: the dataset name.
        kind: ``evidence`` (recall of annotated evidence) or ``trajectory`` (next call of an agent run).
        cases: the cases, in a deterministic order.
        default_budgets: the budgets (tokens) the issue asks for on this dataset.
        quirks: counts of data problems handled while loading (``{"evidence_ids_unresolvable": 3, …}``),
            over every record read (a ``max_cases`` slice keeps the counts of the records it was cut from).
        source: where the data was read from (a directory or file path).
        listed: for some quirks, what they counted, by quirk name (``{"quotes_unlocated": ("q12: 'I …'", …),
            "runs_skipped": ("G2_answer/10: failed run (no train_messages) …", …)}``).
    """

    name: str
    kind: DatasetKind
    cases: tuple[EvalCase, ...]
    default_budgets: tuple[int, ...]
    quirks: Mapping[str, int] = field(default_factory=dict)
    source: str = ""
    listed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
