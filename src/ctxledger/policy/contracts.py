"""Working-set contracts: what one agent may see for one kind of call.

Seed 001 "Per-Agent Working Sets", "Context Budget Ledger", "Divulgación Progresiva", "Minimización".

A multi-agent system should not hand every agent the same prompt, memory, tools and history. A
:class:`WorkingSetContract` binds a policy to an ``agent`` and a ``call_type`` (``routing``,
``tool_selection``, ``synthesis`` …) and names:

* the **sources** the call may draw from (``instructions``, ``conversation``, ``latest_user_turn``,
  ``tool_results``, ``memory``, ``compaction``, ``checkpoint``, ``typed_request``, or ``tag:<name>`` for
  records carrying that tag in ``meta["tags"]``); anything else is omitted with ``out_of_contract``;
* its own **budget allocation**: ``max_input_tokens`` caps ``B_input`` and ``class_caps`` replace the
  policy's per-class caps (fractions of ``B_dynamic``);
* the **tools exposed by phase**: ``tools[phase]`` lists the tools a phase may see (read-only tools for
  investigation); ``write_tools`` are exposed only once every check in ``write_requires`` (eligibility,
  approval …) is in the request's ``checks_passed``. Withheld tools are recorded in the manifest.

Both fail closed:

* **Binding** (:func:`bind_contract`). A request that names neither an agent nor a call type is bound
  only by a contract that names neither. A request that names one or both is bound by the most specific
  contract that matches (a contract's ``None`` matches anything); failing that, a field the request leaves
  out matches any value, and exactly one contract must then match (an agent named without a call type
  binds that agent's only contract). No match, or several, is a ``ConfigurationError`` listing the
  contracts: an agent the policy does not know never assembles with the full history.
* **Tools** (:func:`expose_tools`). When a contract lists tools per phase, a call that gives no phase
  sees only the tools *every* phase lists (the intersection, withheld reason ``no_phase``), and a phase
  the contract does not list is a ``ConfigurationError``; a tool no phase lists is never exposed. A
  contract without a ``tools`` table does no phase filtering (write tools still wait for their checks).

Contracts are plain data and part of the policy hash, so "which contract shaped this call" is provable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.errors import ConfigurationError, InvalidSetting
from ctxledger.policy.checks import fractions, number, string_lists, strings
from ctxledger.policy.secrets import SecretScanner, redact_text
from ctxledger.units import ContextClass

SOURCES = (
    "instructions",
    "conversation",
    "latest_user_turn",
    "tool_results",
    "memory",
    "compaction",
    "checkpoint",
    "typed_request",
)
"""Source categories a contract may name (besides ``tag:<name>``)."""


@dataclass(frozen=True, slots=True)
class WorkingSetContract:
    """The working set one agent gets for one call type.

    Attributes:
        agent: the agent (participant id or name) the contract binds; ``None`` matches any agent.
        call_type: the call type it binds (``routing``, ``tool_selection``, ``synthesis`` …); ``None`` any.
        sources: allowed source categories (see :data:`SOURCES`); empty = every source.
        max_input_tokens: cap on ``B_input`` in tokens for this call type (its ledger allocation).
        class_caps: per-class caps (fractions of ``B_dynamic``) replacing the policy's.
        tools: phase → names of the tools exposed in that phase (empty = no phase filtering).
        write_tools: tools that change the world; exposed only after ``write_requires`` checks pass.
        write_requires: checks that must be in the request's ``checks_passed`` before write tools show.

    Raises:
        InvalidSetting: ``agent`` / ``call_type`` not a non-empty string (or ``None``); an unknown source;
            ``max_input_tokens`` not an integer > 0; ``class_caps`` with an unknown context class or a value
            outside (0, 1]; ``tools`` not a table of lists of tool names; ``write_tools`` / ``write_requires``
            not lists of strings.
    """

    agent: str | None = None
    call_type: str | None = None
    sources: tuple[str, ...] = ()
    max_input_tokens: int | None = None
    class_caps: Mapping[str, float] = field(default_factory=dict)
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    write_tools: tuple[str, ...] = ()
    write_requires: tuple[str, ...] = ("eligibility", "approval")

    def __post_init__(self) -> None:
        """Validate every field (see the class docstring)."""
        for key in ("agent", "call_type"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidSetting("contract", key, f"must be a non-empty string, got {value!r}")
        sources = strings(self.sources, "contract", "sources")
        bad = [s for s in sources if s not in SOURCES and not (s.startswith("tag:") and len(s) > 4)]
        if bad:
            raise InvalidSetting(
                "contract", "sources", f"unknown source {bad[0]!r}; known: {', '.join(SOURCES)} or tag:<name>"
            )
        if self.max_input_tokens is not None:
            number(self.max_input_tokens, "contract", "max_input_tokens", low=0, low_open=True, integer=True)
        caps = fractions(self.class_caps, "contract", "class_caps", [c.value for c in ContextClass])
        object.__setattr__(self, "sources", sources)
        object.__setattr__(self, "class_caps", caps)
        object.__setattr__(self, "tools", string_lists(self.tools, "contract", "tools"))
        object.__setattr__(self, "write_tools", strings(self.write_tools, "contract", "write_tools"))
        object.__setattr__(self, "write_requires", strings(self.write_requires, "contract", "write_requires"))

    def matches(self, agent: str | None, call_type: str | None) -> bool:
        """Whether the contract binds this agent and call type (``None`` on the contract matches anything)."""
        return (self.agent is None or self.agent == agent) and (self.call_type is None or self.call_type == call_type)

    def specificity(self) -> int:
        """How specific the binding is (2 = agent and call type), so the most specific contract wins."""
        return int(self.agent is not None) + int(self.call_type is not None)

    def label(self) -> str:
        """``agent/call_type`` with ``*`` for a field that matches anything."""
        return f"{self.agent or '*'}/{self.call_type or '*'}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash)."""
        return {
            "agent": self.agent,
            "call_type": self.call_type,
            "sources": list(self.sources),
            "max_input_tokens": self.max_input_tokens,
            "class_caps": dict(sorted(self.class_caps.items())),
            "tools": {k: list(v) for k, v in sorted(self.tools.items())},
            "write_tools": list(self.write_tools),
            "write_requires": list(self.write_requires),
        }


def find_contract(
    contracts: Sequence[WorkingSetContract], agent: str | None, call_type: str | None
) -> WorkingSetContract | None:
    """The most specific contract binding ``agent`` and ``call_type`` (first listed wins a tie), or ``None``."""
    matching = [c for c in contracts if c.matches(agent, call_type)]
    if not matching:
        return None
    best = max(c.specificity() for c in matching)
    return next(c for c in matching if c.specificity() == best)


def bind_contract(
    contracts: Sequence[WorkingSetContract], agent: str | None, call_type: str | None
) -> WorkingSetContract | None:
    """The contract a request for ``agent`` and ``call_type`` is bound by, failing closed (module docstring).

    Returns:
        The contract, or ``None`` when the policy has no contracts, or when the request names neither an
        agent nor a call type and no contract names neither.

    Raises:
        ConfigurationError: the request names an agent or call type that no contract matches, or
            (naming only one of them) several contracts match; the message lists the contracts.
    """
    found = find_contract(contracts, agent, call_type)
    if found is not None or not contracts or (agent is None and call_type is None):
        return found
    loose = [
        c
        for c in contracts
        if (agent is None or c.agent is None or c.agent == agent)
        and (call_type is None or c.call_type is None or c.call_type == call_type)
    ]
    asked = f"agent={agent!r}, call_type={call_type!r}"
    known = ", ".join(c.label() for c in contracts)
    if len(loose) == 1:
        return loose[0]
    if loose:
        names = ", ".join(c.label() for c in loose)
        raise ConfigurationError(
            f"{asked} matches several working-set contracts ({names}); name the "
            f"{'call_type' if call_type is None else 'agent'} too (contracts: {known})"
        )
    raise ConfigurationError(f"no working-set contract of the policy matches {asked}; the contracts are: {known}")


def tool_name(schema: Mapping[str, Any]) -> str:
    """Name of a tool schema in OpenAI (``{"function": {"name"}}``) or flat (``{"name"}``) form."""
    function = schema.get("function")
    return str(function.get("name") if isinstance(function, Mapping) else schema.get("name", ""))


def tool_ref(index: int, schema: Mapping[str, Any], scanner: SecretScanner | None = None) -> str:
    """The ref policy decisions use for a tool schema of a request: ``tools/<name>`` (``tools/<index>`` unnamed).

    A name holding a secret is named as the redacted schema names it (``[withheld by policy: <type> on line 1]``,
    :func:`~ctxledger.policy.secrets.redact_json`), so the ref of a schema and of its redacted copy are the same and
    no decision or mark carries the secret into a manifest. ``scanner``: the policy's secret scanner (default: the
    default scanner).
    """
    name = tool_name(schema)
    if name:
        name = redact_text(name, scanner)
    return f"tools/{name or index}"


def expose_tools(
    contract: WorkingSetContract | None,
    tools: Sequence[Mapping[str, Any]],
    *,
    phase: str | None,
    checks_passed: Sequence[str],
) -> tuple[tuple[Mapping[str, Any], ...], list[dict[str, str]]]:
    """Filter tool schemas by the contract's phases and write-tool checks (seed 001 "Divulgación Progresiva").

    With per-phase tools and no ``phase``, only the tools every phase lists are exposed (fail closed).

    Returns:
        ``(exposed, withheld)``: the schemas to send, and ``{name, reason}`` for each one held back
        (``reason`` is ``"phase"`` (not listed for this phase), ``"no_phase"`` (no phase given and not
        listed for every phase) or ``"checks:<missing,…>"``).

    Raises:
        ConfigurationError: ``phase`` is not one of the phases the contract lists tools for.
    """
    if contract is None:
        return tuple(tools), []
    exposed: list[Mapping[str, Any]] = []
    withheld: list[dict[str, str]] = []
    allowed: frozenset[str] | None = None
    held_as = "phase"
    if contract.tools and phase is None:
        allowed = frozenset.intersection(*(frozenset(v) for v in contract.tools.values()))
        held_as = "no_phase"
    elif contract.tools:
        if phase not in contract.tools:
            raise ConfigurationError(
                f"phase {phase!r} is not a phase of working-set contract {contract.label()}; "
                f"its phases are: {', '.join(sorted(contract.tools))}"
            )
        allowed = frozenset(contract.tools[phase])
    missing = [c for c in contract.write_requires if c not in checks_passed]
    for schema in tools:
        name = tool_name(schema)
        is_write = name in contract.write_tools
        if is_write and missing:
            withheld.append({"name": name, "reason": "checks:" + ",".join(missing)})
        elif allowed is not None and name not in allowed:
            withheld.append({"name": name, "reason": held_as})
        else:
            exposed.append(schema)
    return tuple(exposed), withheld
