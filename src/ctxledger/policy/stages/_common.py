"""Small helpers every stage uses: decision constructors and record facts (tags, owners, units)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ctxledger.hashing import canonical_json
from ctxledger.policy.decisions import Outcome, PolicyDecision, StageContext
from ctxledger.records import Participant, Record

if TYPE_CHECKING:
    from ctxledger.units import Unit


def omit(stage: str, ref: str, reason: str, detail: str = "") -> PolicyDecision:
    """An ``omit`` decision."""
    return PolicyDecision(ref, stage, Outcome.OMIT, str(reason), detail)


def mark(stage: str, ref: str, reason: str, detail: str = "") -> PolicyDecision:
    """A ``mark`` decision (the record stays a candidate, flagged)."""
    return PolicyDecision(ref, stage, Outcome.MARK, str(reason), detail)


def require(stage: str, ref: str, reason: str, detail: str = "") -> PolicyDecision:
    """A ``require`` decision (protection; ``ref`` is a unit id)."""
    return PolicyDecision(ref, stage, Outcome.REQUIRE, str(reason), detail)


def omit_unit(stage: str, unit: Unit, reason: str, detail: str = "") -> Iterator[PolicyDecision]:
    """``omit`` decisions for every record of a unit (they share one fate)."""
    for rid in unit.record_ids:
        yield omit(stage, rid, reason, detail)


def tags(rec: Record) -> frozenset[str]:
    """The record's ``meta["tags"]`` as a set (empty when absent or not a list)."""
    value = rec.meta.get("tags")
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, Iterable):
        return frozenset(str(v) for v in value)
    return frozenset()


def unit_tags(unit: Unit) -> frozenset[str]:
    """Union of the tags of a unit's records."""
    out: set[str] = set()
    for rec in unit.records:
        out |= tags(rec)
    return frozenset(out)


def live_units(ctx: StageContext) -> list[Unit]:
    """Units none of whose records were omitted by an earlier stage."""
    return ctx.live_units()


def stage_key(stage: Any, *request_fields: Any) -> tuple[Any, ...]:
    """A memo namespace for one stage's verdicts: its name, version and settings, plus the request fields it reads."""
    return (stage.name, stage.version, canonical_json(dict(stage.config())), *request_fields)


def memo_unit_tags(ctx: StageContext, unit: Unit) -> frozenset[str]:
    """:func:`unit_tags`, cached per unit on the context's memo."""
    return ctx.memoized("unit_tags", unit, lambda: unit_tags(unit))


def participants(ctx: StageContext) -> dict[str, Participant]:
    """Participant records among the candidates, by id."""
    return ctx.participants()


def ancestors(pid: str, people: Mapping[str, Participant]) -> list[str]:
    """The parent chain of a participant (parent first), stopping at unknown ids or cycles."""
    chain: list[str] = []
    current = people.get(pid)
    while current is not None and current.parent_participant_id and current.parent_participant_id not in chain:
        chain.append(current.parent_participant_id)
        current = people.get(current.parent_participant_id)
    return chain


def request_attr(ctx: StageContext, name: str, default: Any = None) -> Any:
    """A request field, tolerating request objects that lack it."""
    return getattr(ctx.request, name, default)


API_PROVIDERS = {"openai-chat": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic"}
"""The provider an API contract sends to, used when a request names no ``provider``."""


def request_provider(request: Any) -> str | None:
    """The provider a request's payload goes to: its ``provider``, else the one its ``api`` implies."""
    provider = getattr(request, "provider", None)
    if provider:
        return str(provider)
    return API_PROVIDERS.get(str(getattr(request, "api", "")))
