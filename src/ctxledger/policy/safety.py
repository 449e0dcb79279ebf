"""Safety rails of policies: mandatory stages, explicit opt-outs, and checks on what custom stages decide.

The hard filters (scope/tenant, lineage, visibility and promotion, privacy and
provider routing, secrets, validity), trust (lower trust never overrides higher; tool and retrieved content
is data) and protection (what is required is never dropped) are what make an assembly safe to send. A policy
can reorder, configure and extend them, but not lose them by accident:

* **Mandatory stages.** Every stage in :data:`SAFETY_STAGES` must be in a policy's stage list, as the
  built-in class (a custom class cannot take a built-in's name). Leaving one out needs an explicit opt-out,
  ``unsafe_without`` (``[policy] unsafe_without = ["secrets"]`` in a file), which is part of the policy hash
  and written into every manifest's ``policy`` block. A stage listed twice is an error.
* **Contracts.** Two working-set contracts for the same agent and call type are an error (the second
  one could never bind).
* **Custom stages at run time** (:func:`run_stage`): an exception inside a custom stage becomes a
  :class:`~ctxledger.errors.PolicyError` naming the stage; every decision must be a
  :class:`~ctxledger.policy.base.PolicyDecision` carrying the stage's own name and a known outcome; an
  ``omit`` decision's reason must be a :class:`~ctxledger.policy.base.ReasonCode` value or a custom code
  ``custom:<name>`` (lowercase letters, digits and ``_``), so operators can tell extension codes from
  the manifest's vocabulary; every decision's ``ref`` must be a candidate of the call (a record of ``ctx.records``, or
  ``tools/<name>`` of an exposed tool), so a typo is not silently accepted; and a custom stage may not
  omit the instructions, the latest user turn or a unit already required (:func:`protected_records`) —
  protection cannot be overridden.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ctxledger.errors import CtxledgerError, PolicyError
from ctxledger.policy.contracts import tool_ref
from ctxledger.policy.decisions import Outcome, PolicyDecision, ReasonCode, StageContext, protected_records
from ctxledger.policy.stages import STAGES

if TYPE_CHECKING:
    from ctxledger.policy.contracts import WorkingSetContract

SAFETY_STAGES = ("scope", "lineage", "visibility", "privacy", "validity", "trust", "protection", "secrets")
"""Built-in stages every policy runs unless it names them in ``unsafe_without``."""

CUSTOM_REASON = re.compile(r"custom:[a-z0-9_]+")
"""The form of an omission reason a custom stage may coin besides :class:`ReasonCode` (``custom:no_pii``)."""

_REASONS = frozenset(c.value for c in ReasonCode)
_BUILTIN = frozenset(STAGES.values())


def is_builtin(stage: Any) -> bool:
    """Whether ``stage`` is an instance of a built-in stage class (exactly that class, not a subclass)."""
    return type(stage) in _BUILTIN


def stage_list_problem(stages: Sequence[Any], unsafe_without: Sequence[str]) -> tuple[str, str] | None:
    """What is wrong with a policy's stages and opt-outs, as ``(field, problem)``; ``None`` when nothing.

    ``field`` is ``"policy.stages"`` or ``"policy.unsafe_without"`` (the keys of a policy file).
    """
    for i, name in enumerate(unsafe_without):
        if name not in SAFETY_STAGES:
            return "policy.unsafe_without", (
                f"{name!r} is not a safety stage; unsafe_without may name {', '.join(SAFETY_STAGES)}"
            )
        if name in unsafe_without[:i]:
            return "policy.unsafe_without", f"{name!r} is listed twice"
    seen: set[str] = set()
    for stage in stages:
        name = stage.name
        if name in seen:
            return "policy.stages", f"stage {name!r} is listed twice"
        seen.add(name)
        builtin = STAGES.get(name)
        if builtin is not None and type(stage) is not builtin:
            return "policy.stages", (
                f"stage {name!r} is a {type(stage).__name__}, not the built-in {builtin.__name__}; "
                "a custom stage cannot take a built-in stage's name"
            )
        if name in unsafe_without:
            return "policy.unsafe_without", f"{name!r} is in policy.stages; unsafe_without names only stages left out"
    missing = [s for s in SAFETY_STAGES if s not in seen and s not in unsafe_without]
    if missing:
        names = ", ".join(map(repr, missing))
        return "policy.stages", (
            f"leaves out the safety stage(s) {names}; list them, or opt out explicitly with "
            f"[policy] unsafe_without = [{names.replace(chr(39), chr(34))}] (recorded in every manifest)"
        )
    return None


def contracts_problem(contracts: Sequence[WorkingSetContract]) -> tuple[int, str] | None:
    """``(index, problem)`` for the first contract binding the same agent and call type as an earlier one."""
    first: dict[tuple[str | None, str | None], int] = {}
    for i, c in enumerate(contracts):
        key = (c.agent, c.call_type)
        if key in first:
            return i, (
                f"binds agent {c.agent or '*'} and call type {c.call_type or '*'} like contracts[{first[key]}]; "
                "only one contract may bind a pair"
            )
        first[key] = i
    return None




def run_stage(stage: Any, ctx: StageContext) -> Iterator[PolicyDecision]:
    """Run one stage, yielding its decisions; a custom stage's are checked (see the module docstring).

    Built-in stages run as they are. For a custom stage, decisions are yielded one by one as the stage
    produces them (so it sees its own earlier omissions in ``ctx``, as built-ins do).

    Raises:
        PolicyError: a custom stage raised (the original exception is chained), returned something that is
            not a decision, decided under another stage's name, used an unknown outcome or omission reason,
            decided about a ref that is not a candidate of the call, or tried to omit a protected record.
    """
    if is_builtin(stage):
        yield from stage(ctx)
        return
    name = getattr(stage, "name", type(stage).__name__)
    protected = protected_records(ctx)
    try:
        for d in _call(stage, ctx):
            d = _checked(name, d, protected)
            _check_ref(name, d, ctx)
            yield d
    except CtxledgerError:
        raise
    except Exception as exc:
        raise PolicyError(f"policy stage {name!r} failed: {type(exc).__name__}: {exc}") from exc


def _check_ref(name: str, d: PolicyDecision, ctx: StageContext) -> None:
    """Refuse a decision about something that is not a candidate of the call: a record or an exposed tool."""
    if ctx.record(d.ref) is not None:
        return
    tools = {tool_ref(i, t) for i, t in enumerate(ctx.tools)}
    if d.ref in tools:
        return
    raise PolicyError(
        f"policy stage {name!r} decided {d.outcome.value} about {d.ref!r}, which is not a candidate of this call "
        f"(conversation {ctx.request.conversation_id}, up to seq {ctx.snapshot_seq}): a decision's ref must be the "
        "id of a record in ctx.records or tools/<name> of an exposed tool"
    )


def _call(stage: Any, ctx: StageContext) -> Iterable[Any]:
    result = stage(ctx)
    if result is None:
        return ()
    if not isinstance(result, Iterable) or isinstance(result, str | bytes | Mapping):
        raise PolicyError(
            f"policy stage {stage.name!r} returned {type(result).__name__}; a stage returns PolicyDecision values"
        )
    return result


def _checked(name: str, d: Any, protected: Mapping[str, str]) -> PolicyDecision:
    if not isinstance(d, PolicyDecision):
        raise PolicyError(f"policy stage {name!r} returned {type(d).__name__} {d!r}, not a PolicyDecision")
    if d.stage != name:
        raise PolicyError(f"policy stage {name!r} returned a decision under another stage's name, {d.stage!r}")
    try:
        outcome = Outcome(d.outcome)
    except ValueError:
        raise PolicyError(
            f"policy stage {name!r} returned outcome {d.outcome!r} for {d.ref}; "
            f"known: {', '.join(o.value for o in Outcome)}"
        ) from None
    reason = str(d.reason)
    if outcome is Outcome.OMIT:
        if reason not in _REASONS and not CUSTOM_REASON.fullmatch(reason):
            raise PolicyError(
                f"policy stage {name!r} omitted {d.ref} with reason {reason!r}, which is not a reason code "
                f"({', '.join(sorted(_REASONS))}) nor a custom code 'custom:<lowercase_name>'"
            )
        why = protected.get(d.ref)
        if why is not None:
            raise PolicyError(
                f"policy stage {name!r} tried to omit {d.ref} ({why}); a custom stage may not omit the instructions, "
                "the latest user turn or a unit required by protection"
            )
    if outcome is not d.outcome or reason is not d.reason:
        d = replace(d, outcome=outcome, reason=reason)
    return d
