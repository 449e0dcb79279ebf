"""Context-selection metrics (seed 001 "Evaluación"; seed 002 "Cómo evaluar una política").

Selection is judged directly, not through final answers. Every metric here is a small pure function of
one selection (or of a list of per-call values) and its docstring gives the formula. Notation:
``I`` is the set of included item ids, ``R`` the required-evidence ids, ``S`` the stale ids, ``|X|`` a
set's size. A metric that is undefined on an input (no evidence, nothing included) returns ``None``,
and :func:`mean` leaves ``None`` out, so undefined cases never count as successes or failures.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctxledger.eval.base import EvalItem
from ctxledger.hashing import ALGORITHM, sha256_hex

CONTEXT_CLASSES = ("conversation", "operational", "epistemic", "provenance", "policy", "recovery", "planning")
"""The context classes of the budget ledger."""

PROVENANCE_FIELDS = ("sources", "source_version", "transform")
"""What a derived item must carry for its origin to be recoverable (seed 002: origin, version, transform)."""


def evidence_recall(included: Collection[str], required: Collection[str]) -> float | None:
    """Required-evidence recall of one call: ``|R ∩ I| / |R|``; ``None`` when ``R`` is empty."""
    req = set(required)
    if not req:
        return None
    return len(req & set(included)) / len(req)


def critical_omission(included: Collection[str], required: Collection[str]) -> bool | None:
    """Whether the call misses available required evidence: ``R ⊄ I``; ``None`` when ``R`` is empty.

    The mean over calls is the critical-evidence omission rate (seed 002).
    """
    req = set(required)
    if not req:
        return None
    return not req <= set(included)


def context_precision(included: Collection[str], required: Collection[str]) -> float | None:
    """Precision of the context: ``|R ∩ I| / |I|``; ``None`` when ``I`` or ``R`` is empty."""
    inc = set(included)
    if not inc or not required:
        return None
    return len(inc & set(required)) / len(inc)


def irrelevant_inclusion(included: Collection[str], required: Collection[str]) -> float | None:
    """Share of the context that is not required evidence: ``|I − R| / |I| = 1 − precision``."""
    precision = context_precision(included, required)
    return None if precision is None else 1.0 - precision


def stale_incidence(included: Collection[str], stale: Collection[str]) -> bool | None:
    """Whether the call is conditioned on stale context: ``|I ∩ S| > 0``; ``None`` when ``S`` is empty.

    The mean over calls that had a stale candidate is the stale-context incidence (seed 002).
    """
    if not stale:
        return None
    return bool(set(included) & set(stale))


def provenance_coverage(derived: Sequence[Mapping[str, object]]) -> float | None:
    """Share of derived items whose origin is recoverable (seed 002 "provenance coverage").

    ``|{d : every field of PROVENANCE_FIELDS is present and non-empty in d}| / |derived|``; ``None``
    when nothing derived (summary, excerpt, memory) entered the context.
    """
    if not derived:
        return None
    covered = sum(1 for d in derived if all(d.get(f) for f in PROVENANCE_FIELDS))
    return covered / len(derived)


def rehydration_success(attempts: Sequence[tuple[str, bytes | None]]) -> float | None:
    """Share of pointers that gave back exactly the expected source (seed 002 "rehydration success").

    Each attempt is ``(expected "sha256:<hex>", bytes returned or None if the read failed)``; an attempt
    succeeds when ``"sha256:" + sha256(bytes) == expected``. ``None`` when there were no attempts.
    """
    if not attempts:
        return None
    ok = sum(1 for expected, got in attempts if got is not None and f"{ALGORITHM}:{sha256_hex(got)}" == expected)
    return ok / len(attempts)


@dataclass(frozen=True, slots=True)
class Fidelity:
    """Compaction fidelity on critical invariants (seed 002 "compaction fidelity").

    Attributes:
        preserved: invariants found in the summary.
        total: invariants checked.
        missing: ``(kind, value)`` of every invariant not found, in input order.
    """

    preserved: int
    total: int
    missing: tuple[tuple[str, str], ...]

    @property
    def score(self) -> float | None:
        """``preserved / total``; ``None`` when there was nothing to preserve."""
        return None if self.total == 0 else self.preserved / self.total


def _normalize_text(text: str) -> str:
    return " ".join(text.casefold().split())


def compaction_fidelity(
    invariants: Mapping[str, Sequence[str]], summary: str, evidence_ids: Collection[str] = ()
) -> Fidelity:
    """Check a summary against the invariants it must keep (goal, pending steps, errors, decisions …).

    An invariant ``(kind, value)`` is preserved when ``value`` is one of the summary's ``evidence_ids``
    or occurs in ``summary`` (case-folded, whitespace collapsed). Fidelity = preserved / total. This
    measures invariants, not stylistic similarity (seed 002).
    """
    text = _normalize_text(summary)
    ids = set(evidence_ids)
    missing: list[tuple[str, str]] = []
    total = 0
    for kind, values in invariants.items():
        for value in values:
            total += 1
            if value not in ids and _normalize_text(value) not in text:
                missing.append((kind, value))
    return Fidelity(preserved=total - len(missing), total=total, missing=tuple(missing))


def tool_units(items: Sequence[EvalItem]) -> list[tuple[str, ...]]:
    """Atomic tool units: each assistant item with calls plus every result of them.

    Returns one tuple of item ids per assistant item that has tool calls, the assistant id first, then
    its results in ``seq`` order. Results whose call is in no assistant item are not part of any unit.
    """
    owner: dict[str, str] = {}
    units: dict[str, list[str]] = {}
    for item in items:
        if item.tool_calls:
            units[item.id] = [item.id]
            for call in item.tool_calls:
                owner[call.call_id] = item.id
        elif item.role == "tool" and item.tool_call_id in owner:
            units[owner[item.tool_call_id]].append(item.id)
    return [tuple(ids) for ids in units.values()]


@dataclass(frozen=True, slots=True)
class PairIntegrity:
    """Tool-pair integrity of one selection.

    Attributes:
        touched: tool units with at least one member included.
        broken: touched units not included whole.
    """

    touched: int
    broken: int

    @property
    def score(self) -> float | None:
        """``1 − broken / touched``; ``None`` when no tool unit was touched. Must be 1.0."""
        return None if self.touched == 0 else 1.0 - self.broken / self.touched


def tool_pair_integrity(items: Sequence[EvalItem], included: Collection[str]) -> PairIntegrity:
    """Count the tool units (see :func:`tool_units`) a selection touched and how many it split."""
    inc = set(included)
    touched = broken = 0
    for unit in tool_units(items):
        present = sum(1 for i in unit if i in inc)
        if present:
            touched += 1
            broken += present < len(unit)
    return PairIntegrity(touched=touched, broken=broken)


def provider_violations(items: Sequence[EvalItem], included: Collection[str]) -> list[str]:
    """Rule violations of the payload the included items form, in ``seq`` order (OpenAI Chat Completions).

    Codes (each ``"<code>:<id>"``): ``unknown_id`` (not a candidate), ``orphan_tool_result`` (a
    ``tool`` message whose call is not in an included assistant message), ``missing_tool_result`` (an
    included call whose result exists among the candidates but was left out), ``result_not_adjacent``
    (another message sits between a call and its result; the API requires the results to follow the
    assistant message directly). A call with no result among the candidates is unresolved state, not a
    violation here: it is reported by recovery preservation. Must be empty for ctxledger.
    """
    inc = set(included)
    known = {item.id for item in items}
    out = [f"unknown_id:{i}" for i in sorted(inc - known)]
    answered = {item.tool_call_id for item in items if item.role == "tool"}
    kept = [item for item in items if item.id in inc]
    kept_calls = {c.call_id for item in kept for c in item.tool_calls}
    open_calls: set[str] = set()
    for item in kept:
        if item.role == "tool":
            if item.tool_call_id not in open_calls:
                code = "result_not_adjacent" if item.tool_call_id in kept_calls else "orphan_tool_result"
                out.append(f"{code}:{item.id}")
            open_calls.discard(item.tool_call_id or "")
            continue
        out.extend(f"missing_tool_result:{c}" for c in sorted(open_calls))
        open_calls = {c.call_id for c in item.tool_calls if c.call_id in answered}
    out.extend(f"missing_tool_result:{c}" for c in sorted(open_calls))
    return out


def budget_overflow(payload_tokens: int, budget_tokens: int) -> bool:
    """Whether a payload exceeds its budget under the exact counter: ``payload > budget``. Must be false."""
    return payload_tokens > budget_tokens


def context_class(item: EvalItem) -> str:
    """The context class of an item for occupancy.

    ``item.meta["context_class"]`` when set; else ``policy`` for system/developer turns, ``recovery``
    for error results, ``operational`` for tool calls and results, ``conversation`` otherwise.
    """
    explicit = item.meta.get("context_class")
    if isinstance(explicit, str):
        return explicit
    if item.role in ("system", "developer"):
        return "policy"
    if item.role == "tool":
        return "recovery" if item.is_error else "operational"
    return "operational" if item.tool_calls else "conversation"


def occupancy(
    items: Sequence[EvalItem], included: Collection[str], budget_tokens: int, query_tokens: int = 0
) -> dict[str, float]:
    """Context occupancy per class: ``tokens of included items of class c / budget_tokens``.

    The current user turn (``query_tokens``) counts as ``conversation``. Classes with no tokens are
    absent. Raises ``ValueError`` for a budget that is not positive.
    """
    if budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be positive, got {budget_tokens}")
    inc = set(included)
    tokens: dict[str, int] = {"conversation": query_tokens} if query_tokens else {}
    for item in items:
        if item.id in inc:
            cls = context_class(item)
            tokens[cls] = tokens.get(cls, 0) + item.tokens
    return {cls: t / budget_tokens for cls, t in tokens.items()}


def replay_ratio(payload_tokens: int, replay_tokens: int) -> float:
    """Tokens against full history replay: ``payload_tokens / replay_tokens`` (1.0 = no saving).

    Raises ``ValueError`` when ``replay_tokens`` is not positive.
    """
    if replay_tokens <= 0:
        raise ValueError(f"replay_tokens must be positive, got {replay_tokens}")
    return payload_tokens / replay_tokens


def recovery_preservation(included: Collection[str], recovery: Mapping[str, Collection[str]]) -> dict[str, bool]:
    """Per recovery kind (goal, constraints, latest error, unresolved calls …): are all its ids included?

    Kinds with no ids at this call are absent (undefined, not preserved-by-default).
    """
    inc = set(included)
    return {kind: set(ids) <= inc for kind, ids in recovery.items() if ids}


def determinism(hash_pairs: Sequence[tuple[str, str]]) -> float | None:
    """Share of re-assemblies that gave the same payload hash: ``|{(a, b) : a == b}| / |pairs|``."""
    if not hash_pairs:
        return None
    return sum(1 for a, b in hash_pairs if a == b) / len(hash_pairs)


def counter_error(estimated_tokens: int, reported_tokens: int) -> float:
    """Signed relative error of our count against the provider's: ``(estimated − reported) / reported``.

    Positive means we over-count (safe for budgets). Raises ``ValueError`` when ``reported_tokens`` is
    not positive.
    """
    if reported_tokens <= 0:
        raise ValueError(f"reported_tokens must be positive, got {reported_tokens}")
    return (estimated_tokens - reported_tokens) / reported_tokens


def mean(values: Iterable[float | bool | None]) -> float | None:
    """Arithmetic mean of the defined values (``None`` left out; booleans count as 0/1); ``None`` if none."""
    defined = [float(v) for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) by linear interpolation between closest ranks; ``None`` if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
