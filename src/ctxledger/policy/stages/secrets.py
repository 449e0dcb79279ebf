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

from ctxledger.units import Unit
from ctxledger.errors import InvalidSetting
from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.checks import choice, strings
from ctxledger.policy.contracts import tool_ref
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
from ctxledger.records import Participant
from ctxledger.serialize.base import Turn


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
        self, unit: Unit
    ) -> tuple[dict[str, tuple[Finding, ...]], dict[str, tuple[Finding, ...]]] | None:
        """Findings in a unit's speaker names and in its texts (``None`` when both are empty); pure in the unit."""
        names, found = name_findings(unit, self.scanner), unit_findings(unit, self.scanner)
        return (names, found) if names or found else None

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Scan every live unit; decide per record."""
        omitted = ctx.omitted
        for unit, (names, findings) in ctx.scan(stage_key(self), ctx.units, self._unit_findings):
            if any(r in omitted for r in unit.record_ids):
                continue
            for ref, hits in names.items():
                yield mark(self.name, ref, SPEAKER_WITHHELD, f"speaker name: {describe(hits)}")
            if not findings:
                continue
            redact = self.action == "redact" or unit.id in ctx.required
            for ref, hits in findings.items():
                detail = describe(hits)
                if redact:
                    yield mark(self.name, ref, "secret_redacted", detail)
                else:
                    yield omit(self.name, ref, ReasonCode.SECRET, detail)
        for rec, _ in ctx.scan("named participants", ctx.records, lambda r: isinstance(r, Participant) and r.name):
            hits = self.scanner.scan(rec.name)
            if hits:
                yield mark(self.name, rec.id, SPEAKER_WITHHELD, f"participant name: {describe(hits)}")
        for index, schema in enumerate(ctx.tools):
            hits = scan_json(schema, self.scanner)
            if hits:
                yield mark(self.name, tool_ref(index, schema), "secret_redacted", describe_json(hits))
