"""Protection of recovery state: what must be kept, verbatim, never summarised away.

seed 000 "Lo que merece protección"; seed 001 "Compresión" (approval state, tool
errors, policy constraints, user corrections, open questions … are never compressed); seed 004 §4.6
(recovery context is not trimmed while unresolved); cases B02, B09, B10.

Required, with the reason recorded on the unit:

* ``instruction``: system and developer instructions;
* ``latest_user_turn``; ``latest_step``: the newest message, tool exchange or checkpoint when it follows
  that turn (the step the model continues from). Older steps of a long tool loop are not pinned: in an agent
  trajectory the only user turn is often the task itself;
* ``unresolved_tool_call``: a pending or deferred call (an attempted send must not be forgotten);
  ``unresolved_tool_error``: a failed exchange not yet followed by a success of the same tool;
* by tag (``meta["tags"]``): ``user_constraint`` / ``constraint``, ``correction`` / ``user_correction``,
  ``approval``, ``goal`` / ``active_goal``, ``pending_operation``, ``environment_constraint`` (a read-only
  environment found forty steps back is still read-only), ``retry_critical``, ``moderator_directive``;
* ``user_constraint`` / ``user_correction`` also by wording, for user messages (``detect_wording``):
  prohibitions and corrections (see :data:`PROHIBITION` and :data:`CORRECTION`). A prohibition is an
  instruction or a stated wish, not any negative sentence: "Do not push", "never use sudo", "you must
  not", "I don't want to fly before 11 AM", "I don't need insurance" are constraints; "I don't remember
  the reservation id", "I never knew turtles were interesting", "things don't go my way" report facts and
  are not. On real turns, a negative word anywhere had protected 123 of 1,160 tau-bench user turns (most
  of them "I don't have my reservation id") and 67 of 2,069 LoCoMo speaker turns; this rule protects 19
  (every "I don't want / need …" kept) and 25;
* ``moderator_directive``: messages of a participant whose role is ``moderator`` (autonomous discussion);
* ``checkpoint``: every live checkpoint (older ones of a run were superseded by validity): the restored
  run state of a continuation or a parent resume.

Reasons in :data:`~ctxledger.policy.base.VERBATIM_REASONS` admit only the verbatim representation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.checks import flag
from ctxledger.policy.decisions import PolicyDecision, StageContext
from ctxledger.policy.stages._common import live_units, memo_unit_tags, participants, require
from ctxledger.records import Message, Role, ToolStatus
from ctxledger.units import Unit, UnitKind

TAG_REASONS: Mapping[str, str] = {
    "user_constraint": "user_constraint",
    "constraint": "user_constraint",
    "correction": "user_correction",
    "user_correction": "user_correction",
    "approval": "approval",
    "goal": "active_goal",
    "active_goal": "active_goal",
    "pending_operation": "pending_operation",
    "environment_constraint": "environment_constraint",
    "retry_critical": "retry_critical",
    "moderator_directive": "moderator_directive",
}
"""Tag → protection reason (first matching tag in this order wins)."""

_NOT = r"(?:do not|don't|dont|don’t)"
_CLAUSE = r"(?:^|[.!?;:]\s+|\n\s*|\bplease\s+|\band\s+|\bbut\s+|\bso\s+)"
PROHIBITION = re.compile(
    rf"{_CLAUSE}(?:{_NOT}|never|avoid)\b(?!\s+(?:worry|get me wrong))"
    r"|\b(?:must not|mustn't|may not|not allowed|under no circumstances)\b"
    rf"|\b(?:i|we)\s+(?:{_NOT}|would not|wouldn't|won't|will not)\s+(?:want|wish|need|like)\b"
    r"|\b(?:i|we)(?:'d| would) rather not\b",
    re.I,
)
"""A prohibition by wording: a clause that opens with "do not" / "don't" / "never" / "avoid" (an
imperative; the idioms "don't worry" and "don't get me wrong" excepted), a modal prohibition ("must not",
"may not", "not allowed", "under no circumstances"), or a negated wish of the user ("I don't want", "we do
not need", "I'd rather not")."""
CORRECTION = re.compile(r"^\s*(no[,.!]|actually\b|correction\b|i meant\b|that's wrong|that is wrong)", re.I)
"""A correction by wording: the message opens with "No,", "Actually", "Correction", "I meant" …"""
_STEP_KINDS = (UnitKind.MESSAGE, UnitKind.TOOL_EXCHANGE, UnitKind.CHECKPOINT)


class ProtectionStage:
    """Require recovery state, constraints and the turn in progress (see the module docstring).

    Args:
        detect_wording: also protect user prohibitions and corrections found by wording, not only by tag.

    Raises:
        InvalidSetting: ``detect_wording`` is not a boolean.
    """

    name: ClassVar[str] = "protection"
    version: ClassVar[str] = "3"

    def __init__(self, detect_wording: bool = True) -> None:
        self.detect_wording = flag(detect_wording, self.name, "detect_wording")

    def config(self) -> Mapping[str, Any]:
        """Whether wording detection is on, and the tag table."""
        return {"detect_wording": self.detect_wording, "tags": dict(TAG_REASONS)}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Emit ``require`` decisions for protected units (on the unit id), newest first."""
        units = live_units(ctx)
        moderators = {p.id for p in participants(ctx).values() if p.role == "moderator"}
        last_user = _latest_user_index(units)
        newest_step = max((i for i, u in enumerate(units) if u.kind in _STEP_KINDS), default=None)
        succeeded_after: set[str] = set()
        # what a unit's content says depends on the unit, the stage's settings and who moderates
        content_key = (self.name, self.version, self.detect_wording, tuple(sorted(moderators)))
        said = ctx.scan(content_key, ctx.units, lambda u: self._content_reason(u, moderators, ctx))
        content = {id(u): why for u, why in said}
        for i in range(len(units) - 1, -1, -1):
            unit = units[i]
            reason = _position_reason(unit, i, last_user, newest_step) or _state_reason(unit, succeeded_after)
            reason = reason or content.get(id(unit))
            if unit.kind is UnitKind.TOOL_EXCHANGE and unit.status is ToolStatus.SUCCEEDED:
                succeeded_after.update(unit.tool_names)
            if reason:
                yield require(self.name, unit.id, reason)

    def _content_reason(self, unit: Unit, moderators: set[str], ctx: StageContext) -> str | None:
        found = memo_unit_tags(ctx, unit)
        for tag, reason in TAG_REASONS.items():
            if tag in found:
                return reason
        first = unit.records[0]
        if unit.kind is UnitKind.MESSAGE and first.owner_participant_id in moderators:
            return "moderator_directive"
        if unit.kind is UnitKind.CHECKPOINT:
            return "checkpoint"
        if self.detect_wording and unit.kind is UnitKind.MESSAGE and _is_user(first):
            return wording_reason(unit.text)
        return None


@functools.lru_cache(maxsize=65_536)
def wording_reason(text: str) -> str | None:
    """``user_correction`` or ``user_constraint`` when a user message's wording says so, else ``None``.

    Cached by text: history is append-only, so every later assembly asks again about the same turns.
    """
    if CORRECTION.search(text):
        return "user_correction"
    if _may_prohibit(text) and _prohibits(text):
        return "user_constraint"
    return None


_KEY = re.compile(rf"(?:{_NOT}|never|avoid)\b(?!\s+(?:worry|get me wrong))", re.I)
""":data:`PROHIBITION`'s first branch after its clause opening."""
_CLAUSE_BEFORE = re.compile(rf"{_CLAUSE}\Z", re.I)
"""A clause opening that ends where the string (or the searched part of it) ends."""
_MODAL = re.compile(r"\b(?:must not|mustn't|may not|not allowed|under no circumstances)\b", re.I)
""":data:`PROHIBITION`'s second branch."""
_WISH = re.compile(rf"(?:{_NOT}|would not|wouldn't|won't|will not)\s+(?:want|wish|need|like)\b", re.I)
""":data:`PROHIBITION`'s third branch after its subject and the spaces after it."""
_SUBJECT_BEFORE = re.compile(r"\b(?:i|we)\Z", re.I)
_RATHER = re.compile(r"rather not\b", re.I)
_RATHER_BEFORE = re.compile(r"\b(?:i|we)(?:'d| would) \Z", re.I)
_ANCHORS = (
    *((word, "clause") for word in ("do not", "don't", "dont", "never", "avoid")),
    *((word, "modal") for word in ("must not", "mustn't", "may not", "not allowed", "under no circumstances")),
    *((word, "wish") for word in ("do not", "don't", "dont", "would not", "wouldn't", "won't", "will not")),
    ("rather not", "rather"),
)
"""Where a :data:`PROHIBITION` match of ASCII text must hold a literal (lower case), and which branch it starts."""


def _prohibits(text: str) -> bool:
    """``PROHIBITION.search(text) is not None``, found from the few places a match can hold one of its words.

    The regex tries its branches at every position of the text; in ASCII text (where ``re.I`` is ASCII case)
    each branch holds a literal at a known place (:data:`_ANCHORS`), so only the places where the lower-cased
    text holds one are checked, with the branch's parts before and after that place.
    """
    if not text.isascii():
        return PROHIBITION.search(text) is not None
    lowered = text.lower()
    for word, branch in _ANCHORS:
        at = lowered.find(word)
        while at >= 0:
            if _branch_at(text, at, branch):
                return True
            at = lowered.find(word, at + 1)
    return False


def _branch_at(text: str, at: int, branch: str) -> bool:
    """Whether a match of :data:`PROHIBITION`'s ``branch`` has its literal at ``at``."""
    if branch == "modal":
        return _MODAL.match(text, at) is not None
    if branch == "rather":
        return _RATHER.match(text, at) is not None and _RATHER_BEFORE.search(text, max(0, at - 9), at) is not None
    spaces = at
    while spaces > 0 and text[spaces - 1].isspace():
        spaces -= 1
    if branch == "clause":  # the opening's longest form before its spaces is "please" (6 characters)
        return _KEY.match(text, at) is not None and _CLAUSE_BEFORE.search(text, max(0, spaces - 6), at) is not None
    return (  # "wish": the subject, then at least one space
        spaces < at
        and _WISH.match(text, at) is not None
        and _SUBJECT_BEFORE.search(text, max(0, spaces - 2), spaces) is not None
    )


_PROHIBITION_WORDS = ("not", "n't", "dont", "never", "avoid", "circumstances")
"""A piece of text every :data:`PROHIBITION` match holds, in ASCII lower case."""


def _may_prohibit(text: str) -> bool:
    """``False`` only when ``text`` cannot match :data:`PROHIBITION` (a substring test, far cheaper than the regex).

    Only ASCII text is ruled out: under ``re.I`` a few other letters (``ſ``, ``ı``, ``İ``) match ASCII ones.
    """
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(word in lowered for word in _PROHIBITION_WORDS)


def _is_user(rec: Any) -> bool:
    return isinstance(rec, Message) and rec.role is Role.USER


def _latest_user_index(units: list[Unit]) -> int | None:
    for i in range(len(units) - 1, -1, -1):
        if units[i].kind is UnitKind.MESSAGE and _is_user(units[i].records[0]):
            return i
    return None


def _position_reason(unit: Unit, index: int, last_user: int | None, newest_step: int | None) -> str | None:
    if unit.kind is UnitKind.INSTRUCTION:
        return "instruction"
    if last_user is not None and index == last_user:
        return "latest_user_turn"
    if last_user is not None and newest_step is not None and index == newest_step > last_user:
        return "latest_step"
    return None


def _state_reason(unit: Unit, succeeded_after: set[str]) -> str | None:
    if unit.kind is not UnitKind.TOOL_EXCHANGE:
        return None
    if unit.status in (ToolStatus.PENDING, ToolStatus.DEFERRED):
        return "unresolved_tool_call"
    if unit.status is ToolStatus.FAILED and not set(unit.tool_names) & succeeded_after:
        return "unresolved_tool_error"
    return None
