"""Retention rules: what is kept, for how long, and in what form (seed 004 §4.15; risk R2).

The ``[retention]`` table of a policy file declares them; they are part of the policy and of its hash::

    [[retention.rules]]
    name = "raw-outputs-redact-30d"      # named in the audit trail and in every explanation
    kinds = ["tool_artifact"]            # record kinds: message, tool_artifact, tool_memory
    privacy = ["confidential", "pii"]    # privacy classes; omitted or [] = every class
    after_days = 30                      # age of the record (its created_at) before the action applies
    action = "redact"                    # keep | redact | hash_only | delete

    [retention.assemblies]
    whole_days = 30                      # manifests kept whole this long …
    summary_days = 365                   # … then reduced to their summary, deleted after this age

Actions, from weakest to strongest (a record only ever moves to a stronger one):

* ``keep``: nothing happens; a ``keep`` rule older than another matching rule holds the record where it is;
* ``redact``: the content is replaced by a notice ("redacted by retention rule R at T"); the original's
  sha256 and size stay on the record, so a copy can still be verified against it;
* ``hash_only``: the content is replaced by a notice and only the original's sha256 stays;
* ``delete``: the record is removed (a tool result with its call: a call is never left without its answer).

For each record the rule that applies is the matching rule with the largest ``after_days`` the record's age
has reached (ties: the first in the file), so a ladder ``keep`` 0 → ``redact`` 30 → ``delete`` 365 reads as
written. Structural records (conversations, branches, participants, tool calls, skill states, checkpoints,
compactions) are not retained by rules; forgetting a conversation or a participant removes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from ctxledger.errors import InvalidSetting
from ctxledger.records import Kind, Record


class Action(StrEnum):
    """What a retention rule does to a record once it is old enough (weakest first)."""

    KEEP = "keep"
    REDACT = "redact"
    HASH_ONLY = "hash_only"
    DELETE = "delete"

    @property
    def level(self) -> int:
        """0 for ``keep`` … 3 for ``delete``: a record only moves to a higher level."""
        return _LEVELS.index(self)


_LEVELS = list(Action)

RETAINABLE_KINDS = (Kind.MESSAGE.value, Kind.TOOL_ARTIFACT.value, Kind.TOOL_MEMORY.value)
"""Record kinds a rule may name (the ones that hold content)."""

DAY = timedelta(days=1)


def _days(value: Any, owner: str, setting: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidSetting(owner, setting, f"must be a number of days >= 0, got {value!r}")
    return float(value)


def _names(value: Any, owner: str, setting: str, known: Sequence[str] | None = None) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidSetting(owner, setting, f"must be a list of strings, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise InvalidSetting(owner, setting, f"must be a list of non-empty strings; {item!r} is not one")
        if known is not None and item not in known:
            raise InvalidSetting(owner, setting, f"unknown value {item!r}; known: {', '.join(known)}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """One rule: records of ``kinds`` (and ``privacy`` classes) older than ``after_days`` get ``action``.

    Attributes:
        name: the rule's name, unique in the policy (the audit trail and explanations name it).
        kinds: record kinds (:data:`RETAINABLE_KINDS`).
        action: :class:`Action` value.
        after_days: age in days (of ``created_at``) from which it applies; ``0`` = at once.
        privacy: privacy classes it applies to; empty = every class.

    Raises:
        InvalidSetting: an empty name, an unknown kind or action, a negative or non-numeric age.
    """

    name: str
    kinds: tuple[str, ...]
    action: str
    after_days: float = 0.0
    privacy: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate and normalise (see the class docstring)."""
        owner = f"retention rule {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise InvalidSetting("retention", "rules.name", "every rule needs a non-empty name")
        kinds = _names(self.kinds, owner, "kinds", RETAINABLE_KINDS)
        if not kinds:
            raise InvalidSetting(owner, "kinds", f"name at least one kind ({', '.join(RETAINABLE_KINDS)})")
        if self.action not in {a.value for a in Action}:
            known = ", ".join(a.value for a in Action)
            raise InvalidSetting(owner, "action", f"unknown action {self.action!r}; known: {known}")
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "privacy", _names(self.privacy, owner, "privacy"))
        object.__setattr__(self, "after_days", _days(self.after_days, owner, "after_days"))

    def matches(self, record: Record) -> bool:
        """Whether the rule names the record's kind and privacy class (its age is not checked)."""
        return record.kind.value in self.kinds and (not self.privacy or record.privacy_class in self.privacy)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash)."""
        return {
            "name": self.name,
            "kinds": list(self.kinds),
            "privacy": list(self.privacy),
            "after_days": self.after_days,
            "action": self.action,
        }


@dataclass(frozen=True, slots=True)
class AssemblyRetention:
    """How long assembly manifests are kept whole, then as their summary (days; ``None`` = forever).

    Raises:
        InvalidSetting: a negative age, or ``summary_days`` < ``whole_days``.
    """

    whole_days: float | None = None
    summary_days: float | None = None

    def __post_init__(self) -> None:
        """Validate (see the class docstring)."""
        for name in ("whole_days", "summary_days"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _days(value, "retention", f"assemblies.{name}"))
        if self.whole_days is not None and self.summary_days is not None and self.summary_days < self.whole_days:
            raise InvalidSetting(
                "retention", "assemblies.summary_days", "must be >= whole_days (a summary follows the whole manifest)"
            )

    @property
    def active(self) -> bool:
        """Whether it ever changes a manifest."""
        return self.whole_days is not None or self.summary_days is not None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash)."""
        return {"whole_days": self.whole_days, "summary_days": self.summary_days}


@dataclass(frozen=True, slots=True)
class RetentionRules:
    """The retention part of a policy: record rules and the assembly schedule.

    Raises:
        InvalidSetting: two rules share a name.
    """

    rules: tuple[RetentionRule, ...] = ()
    assemblies: AssemblyRetention = field(default_factory=AssemblyRetention)

    def __post_init__(self) -> None:
        """Rule names are unique (the audit trail names rules)."""
        object.__setattr__(self, "rules", tuple(self.rules))
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise InvalidSetting("retention", "rules", f"two rules are named {rule.name!r}; names must be unique")
            seen.add(rule.name)

    @property
    def empty(self) -> bool:
        """No rule and no assembly schedule: retention changes nothing."""
        return not self.rules and not self.assemblies.active

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every record kind some rule names (what a retention run scans)."""
        return tuple(k for k in RETAINABLE_KINDS if any(k in r.kinds for r in self.rules))

    @property
    def min_age(self) -> timedelta:
        """The youngest age at which any rule acts (records younger than this are never scanned)."""
        acting = [r.after_days for r in self.rules if r.action != Action.KEEP]
        return DAY * min(acting) if acting else DAY * 0

    def rule_for(self, record: Record, now: datetime) -> RetentionRule | None:
        """The rule that applies to ``record`` at ``now``: the matching rule with the largest age reached."""
        age = now - record.created_at
        best: RetentionRule | None = None
        for rule in self.rules:
            if (
                rule.matches(record)
                and age >= DAY * rule.after_days
                and (best is None or rule.after_days > best.after_days)
            ):
                best = rule
        return best

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash)."""
        return {"rules": [r.as_dict() for r in self.rules], "assemblies": self.assemblies.as_dict()}


def rules_from_table(**table: Any) -> RetentionRules:
    """Build :class:`RetentionRules` from a policy file's ``[retention]`` table (its keys as arguments).

    Raises:
        InvalidSetting: an unknown key, a rule that is not a table, or an invalid value; the setting is
            named (``rules[2].action``, ``assemblies.whole_days``).
    """
    unknown = sorted(set(table) - {"rules", "assemblies"})
    if unknown:
        raise InvalidSetting("retention", unknown[0], "unknown key; expected rules, assemblies")
    raw_rules = table.get("rules", [])
    if not isinstance(raw_rules, list):
        raise InvalidSetting("retention", "rules", "must be an array of tables ([[retention.rules]])")
    rules = [_rule(raw, i) for i, raw in enumerate(raw_rules)]
    raw_asm = table.get("assemblies", {})
    if not isinstance(raw_asm, Mapping):
        raise InvalidSetting("retention", "assemblies", "must be a table")
    extra = sorted(set(raw_asm) - {"whole_days", "summary_days"})
    if extra:
        raise InvalidSetting("retention", f"assemblies.{extra[0]}", "unknown key; expected whole_days, summary_days")
    return RetentionRules(tuple(rules), AssemblyRetention(raw_asm.get("whole_days"), raw_asm.get("summary_days")))


_RULE_KEYS = ("name", "kinds", "privacy", "after_days", "action")


def _rule(raw: Any, index: int) -> RetentionRule:
    where = f"rules[{index}]"
    if not isinstance(raw, Mapping):
        raise InvalidSetting("retention", where, "must be a table")
    extra = sorted(set(raw) - set(_RULE_KEYS))
    if extra:
        raise InvalidSetting("retention", f"{where}.{extra[0]}", f"unknown key; expected {', '.join(_RULE_KEYS)}")
    for key in ("name", "kinds", "action"):
        if key not in raw:
            raise InvalidSetting("retention", f"{where}.{key}", "required")
    try:
        return RetentionRule(
            name=raw["name"],
            kinds=raw["kinds"],
            action=raw["action"],
            after_days=raw.get("after_days", 0),
            privacy=raw.get("privacy", ()),
        )
    except InvalidSetting as exc:
        setting = exc.setting.split(".")[-1]
        raise InvalidSetting("retention", f"{where}.{setting}", exc.problem) from exc
