"""What a scenario is: a graph builder, the request made on it, and what the assembly must show.

Seed 004 §8 R1 ("pruebas deterministas de escenarios") and §9.2–9.3: each scenario is a fixed execution
graph and one model call on it; its :class:`Expect` names, by short record name, what must be included,
what must be omitted and with which reason code, what the payload must and must not contain, how raw
artifacts were rehydrated, which marks were made and which tools were exposed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxledger.policy.base import Policy
    from ctxledger.scenarios._graph import GraphBuilder


@dataclass(frozen=True, slots=True)
class Expect:
    """Expectations of one scenario, by record short name (``external_id``).

    Attributes:
        include: records that must be in the payload: the scenario's required items (survival is
            reported as ``required_kept / required_total``).
        omit: record → the reason code its omission must carry.
        text_in / text_out: strings the canonical JSON of the payload must / must not contain.
        marks: record → a mark reason it must carry (``stale``, ``conflict``, ``secret_redacted`` …).
        rehydrated: artifacts that must have been read back whole.
        referenced: artifact → the reason phase-two rehydration gave for only referencing it.
        tools: exactly the tool names the payload must expose (``None``: not checked).
        withheld_tools: tools that must be recorded as withheld.
        min_reduction: the least token reduction against history replay (fraction; ``None``: not checked).
    """

    include: tuple[str, ...] = ()
    omit: Mapping[str, str] = field(default_factory=dict)
    text_in: tuple[str, ...] = ()
    text_out: tuple[str, ...] = ()
    marks: Mapping[str, str] = field(default_factory=dict)
    rehydrated: tuple[str, ...] = ()
    referenced: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    withheld_tools: tuple[str, ...] = ()
    min_reduction: float | None = 0.9


@dataclass(frozen=True, slots=True)
class Scenario:
    """One deterministic scenario.

    Attributes:
        name: short slug (also the conversation id).
        title: what it checks, in the seed's words.
        source: the seed section (or case) it comes from.
        build: writes the graph and returns the :class:`~ctxledger.assemble.assembler.AssemblyRequest`
            fields of the call (``participant_id``, ``branch_id``, ``provider`` …; ids as record ids).
        expect: what the assembly must show.
        policy: builds the policy to assemble under (default: :func:`~ctxledger.policy.default_policy`).
        check: optional extra check ``(assembly, builder) -> failures``.
        seed_reduction: the reduction seed 004 §9.1 reports for this scenario (fraction), where it reports
            one; the run must beat it (the issue's bar: a larger reduction than the seed's).
    """

    name: str
    title: str
    source: str
    build: Callable[[GraphBuilder], Mapping[str, Any]]
    expect: Expect
    policy: Callable[[], Policy] | None = None
    check: Callable[[Any, GraphBuilder], list[str]] | None = None
    seed_reduction: float | None = None
