"""Secrets never enter a payload; what was withheld is recorded without its content.

Seed 000 "Instrucciones y evidencia no tienen la misma autoridad" (a credential stays with the server
that uses it); seed 004 §8 R3. Every live unit's model-facing text (message content, tool arguments, tool
results, memory and compaction text) is scanned with :class:`~ctxledger.policy.secrets.SecretScanner`
(detect-secrets). For each record holding a secret:

* if its unit is required (the turn in progress, an unresolved call …) or ``action`` is ``"redact"``, the
  record is marked ``secret_redacted`` and the assembler replaces each affected line with
  ``[withheld by policy: <type> on line N]``;
* otherwise (``action = "omit"``, the default) the unit is left out with reason ``secret``.

Tool schemas (the request's ``tools=`` or the newest ``SkillState.tool_schemas``, as exposed to this call)
are scanned too, every string value (descriptions, enums, defaults …): a schema holding a secret is marked
``secret_redacted`` under its ref ``tools/<name>``, and the assembler redacts those strings before the
schemas are costed and sent.

Speaker names are scanned too: a turn's ``name`` (``Message.name``, a ``speaker=`` label) and the ``name`` of
every :class:`~ctxledger.records.Participant` among the candidates (used as the speaker label of its turns).
A name holding a secret is marked ``speaker_withheld`` (on the message, or on the participant id), and the
assembler sends :data:`~ctxledger.policy.secrets.SPEAKER_WITHHELD` instead — as OpenAI's ``name`` field and
as the ``"<name>: "`` label both providers show; the record's content is judged on its own.

The decision's detail lists the secret types and line numbers (for a schema: the JSON path), never the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ctxledger.errors import InvalidSetting
from ctxledger.policy.checks import choice, strings
from ctxledger.policy.contracts import tool_ref
from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.secrets import (
    DEFAULT_PLUGINS,
    SPEAKER_WITHHELD,
    Finding,
    SecretScanner,
    default_scanner,
    describe,
    describe_json,
    known_plugins,
    scan_json,
)
from ctxledger.policy.stages._common import mark, omit, stage_key
from ctxledger.records import Message, Participant, ToolArtifact, ToolCall
from ctxledger.retention.state import TRANSFORM as RETAINED
from ctxledger.serialize.base import Turn
from ctxledger.units import BLOB_MISMATCH, BLOB_MISSING, Unit, UnitKind, content_is_parts


def turn_texts(turn: Turn) -> list[str]:
    """Every model-facing string of a turn: its text content and its tool-call arguments."""
    out: list[str] = []
    if isinstance(turn.content, str):
        out.append(turn.content)
    elif turn.content:
        out += [str(p.get("text", "")) for p in turn.content if p.get("type") == "text"]
    out += [c.arguments for c in turn.tool_calls]
    return out


def unit_findings(unit: Unit, scanner: SecretScanner) -> dict[str, tuple[Finding, ...]]:
    """Record id → findings, over the unit's rendered turns (a turn's ``ref`` names its record)."""
    found: dict[str, list[Finding]] = {}
    for turn in unit.turns:
        for text in turn_texts(turn):
            hits = scanner.scan(text)
            if hits:
                found.setdefault(turn.ref, []).extend(hits)
    return {ref: tuple(v) for ref, v in found.items()}


def name_findings(unit: Unit, scanner: SecretScanner) -> dict[str, tuple[Finding, ...]]:
    """Record id → findings in the speaker ``name`` of the unit's turns."""
    found: dict[str, tuple[Finding, ...]] = {}
    for turn in unit.turns:
        hits = scanner.scan(turn.name) if turn.name else ()
        if hits:
            found[turn.ref] = hits
    return found


_DATA_KINDS = (UnitKind.MEMORY, UnitKind.COMPACTION, UnitKind.CHECKPOINT)
_UNREADABLE = (BLOB_MISSING, BLOB_MISMATCH, RETAINED)


def stored_turn_findings(turn: Turn, unit: Unit, facts: Mapping[str, Any]) -> tuple[Finding, ...] | None:
    """The findings in a turn's texts from its records' write-path facts (``ctxledger.facts``), or ``None``.

    The same findings :func:`unit_findings` gives for the turn: a data block's from the record's ``block``; a
    tool result's from its raw text's (unless it renders as an unavailable-bytes reference); an assistant
    turn's from its content's then each call's arguments', in call order. ``None`` when a record has no facts
    or the turn is not the record's own rendering (a call's status stub): scan the turn instead.
    """
    found = facts.get(turn.ref)
    if found is None:
        return None
    if unit.kind in _DATA_KINDS:
        return found.block
    rec = next((r for r in unit.records if r.id == turn.ref), None)
    if rec is None or isinstance(rec, ToolCall):
        return None
    if isinstance(rec, ToolArtifact) and (
        unit.transforms.get(rec.id) in _UNREADABLE
        or not found.raw_readable
        or content_is_parts(turn, found.parts)  # a result not read yet: its facts say (same bytes)
    ):
        return None  # shown as a reference, a notice or content parts: not the text the facts were computed on
    hits = list(found.text_findings())
    if turn.tool_calls:
        calls = [r for r in unit.records if isinstance(r, ToolCall)]
        if [c.call_id for c in calls] != [v.call_id for v in turn.tool_calls]:
            return None
        for call in calls:
            call_facts = facts.get(call.id)
            if call_facts is None:
                return None
            hits += call_facts.text_findings()
    return tuple(hits)


def _stored_name_findings(turn: Turn, unit: Unit, facts: Mapping[str, Any]) -> tuple[Finding, ...] | None:
    found = facts.get(turn.ref)
    rec = next((r for r in unit.records if r.id == turn.ref), None)
    if found is None or not isinstance(rec, Message) or rec.name != turn.name:
        return None
    return found.name


def findings_from_facts(
    unit: Unit, facts: Mapping[str, Any], scanner: SecretScanner
) -> tuple[dict[str, tuple[Finding, ...]], dict[str, tuple[Finding, ...]]]:
    """``(name findings, text findings)`` of a unit by record id, read from its records' write-path facts.

    The same values :func:`name_findings` and :func:`unit_findings` give; a turn without usable facts is
    scanned with ``scanner``.
    """
    names: dict[str, tuple[Finding, ...]] = {}
    found: dict[str, list[Finding]] = {}
    for turn in unit.turns:
        if turn.name:
            hits = _stored_name_findings(turn, unit, facts)
            hits = scanner.scan(turn.name) if hits is None else hits
            if hits:
                names[turn.ref] = hits
        stored = stored_turn_findings(turn, unit, facts)
        texts = [stored] if stored is not None else [scanner.scan(text) for text in turn_texts(turn)]
        for hits in texts:
            if hits:
                found.setdefault(turn.ref, []).extend(hits)
    return names, {ref: tuple(v) for ref, v in found.items()}


ACTIONS = ("omit", "redact")
"""What the stage does with an optional unit that holds a secret."""


class SecretsStage:
    """Omit (or, for required units, redact) records whose text holds a secret.

    Args:
        action: ``"omit"`` (optional units leave with ``secret``) or ``"redact"`` (always redact lines).
        plugins: detect-secrets plugin names (default: :data:`~ctxledger.policy.secrets.DEFAULT_PLUGINS`).

    Raises:
        InvalidSetting: ``action`` is not ``"omit"`` or ``"redact"``; ``plugins`` is empty (to run without
            secret scanning, leave the stage out and list it in ``[policy] unsafe_without``) or names a
            plugin detect-secrets does not have.
    """

    name: ClassVar[str] = "secrets"
    version: ClassVar[str] = "3"
    """2: tool schemas are scanned and redacted too. 3: speaker names are scanned and withheld."""

    def __init__(self, action: str = "omit", plugins: Sequence[str] | None = None) -> None:
        self.action = choice(action, self.name, "action", ACTIONS)
        self.plugins = DEFAULT_PLUGINS
        if plugins is not None:
            self.plugins = strings(plugins, self.name, "plugins", known=known_plugins())
        if not self.plugins:
            why = "is empty, which scans for nothing; leave the stage out and list it in [policy] unsafe_without"
            raise InvalidSetting(self.name, "plugins", why)
        self.scanner = default_scanner() if plugins is None else SecretScanner(self.plugins)

    def config(self) -> Mapping[str, Any]:
        """Action and plugins."""
        return {"action": self.action, "plugins": list(self.plugins)}

    def _unit_findings(
        self, unit: Unit, facts: Mapping[str, Any]
    ) -> tuple[dict[str, tuple[Finding, ...]], dict[str, tuple[Finding, ...]]] | None:
        """Findings in a unit's speaker names and in its texts (``None`` when both are empty); pure in the unit.

        With the default plugins they come from the records' write-path facts (computed by the same scanner
        when the records were written); other plugins scan.
        """
        if facts and self._stored_usable():
            names, found = findings_from_facts(unit, facts, self.scanner)
        else:
            names, found = name_findings(unit, self.scanner), unit_findings(unit, self.scanner)
        return (names, found) if names or found else None

    def _stored_usable(self) -> bool:
        """Whether stored findings are this stage's (the facts are computed with the default scanner)."""
        return self.scanner is default_scanner()

    def _unit_decisions(self, unit: Unit, facts: Mapping[str, Any]) -> tuple[tuple[PolicyDecision, ...], ...] | None:
        """``(speaker name marks, redactions, omissions)`` of a unit's findings, or ``None``; pure in the unit.

        Both the redactions and the omissions of its texts are made: which apply depends on whether the unit is
        required in this call.
        """
        found = self._unit_findings(unit, facts)
        if found is None:
            return None
        names, findings = found
        speaker = tuple(
            mark(self.name, ref, SPEAKER_WITHHELD, f"speaker name: {describe(hits)}") for ref, hits in names.items()
        )
        details = [(ref, describe(hits)) for ref, hits in findings.items()]
        redactions = tuple(mark(self.name, ref, "secret_redacted", detail) for ref, detail in details)
        omissions = tuple(omit(self.name, ref, ReasonCode.SECRET, detail) for ref, detail in details)
        return speaker, redactions, omissions

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Scan every live unit; decide per record."""
        omitted = ctx.omitted
        facts = ctx.facts
        scan = ctx.scan(stage_key(self), ctx.units, lambda unit: self._unit_decisions(unit, facts))
        for unit, (speaker, redactions, omissions) in scan:
            if not omitted.isdisjoint(unit.record_ids):
                continue
            yield from speaker
            if redactions:
                yield from redactions if self.action == "redact" or unit.id in ctx.required else omissions
        for rec, _ in ctx.scan("named participants", ctx.records, lambda r: isinstance(r, Participant) and r.name):
            stored = facts.get(rec.id) if self._stored_usable() else None
            hits = stored.name if stored is not None else self.scanner.scan(rec.name)
            if hits:
                yield mark(self.name, rec.id, SPEAKER_WITHHELD, f"participant name: {describe(hits)}")
        for index, schema in enumerate(ctx.tools):
            hits = scan_json(schema, self.scanner)
            if hits:
                yield mark(self.name, tool_ref(index, schema, self.scanner), "secret_redacted", describe_json(hits))
