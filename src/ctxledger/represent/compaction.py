"""Compaction at stable boundaries, with a fidelity check against the run's invariants.

Seed 001 ("Compactación", "Límites de Compactación"): a compaction is not an ordinary summary; it keeps
the operating state needed to continue a run (goal, current state, completed and pending steps,
decisions, evidence and its source ids, tool errors, approval state, open questions, user corrections,
contradictions, stop reasons) and it happens at stable boundaries (after a plan is accepted, after a
checkpoint, before a handoff). Some things are never compressed: approval state, tool errors, user
corrections and constraints, open questions, contradictions, stop reasons. The result is a
*derived* record with lineage (``through_seq``, ``source_ids``, ``policy_version``), never the truth of
the run; case B09 is the failure this module exists for (a summary that kept the task and dropped the
user's "do not push").

:func:`find_invariants` reads the invariants off the records deterministically. The heuristics, in full:

* **goal**: the first user message (or the goal carried by an earlier compaction in the range);
  **latest_request**: the last user message when it is not the goal;
* **user_constraints**: user sentences with never / don't / do not / must / only / always / without /
  avoid / not allowed / may not / make sure / ensure / under no circumstances / no …; a message tagged
  ``user_constraint`` (``meta["tags"]``) counts whole;
* **user_corrections**: user sentences with actually / instead / I meant / correction / that's wrong /
  rather / a leading "No," …; tag ``correction``;
* **approvals**: short user sentences (≤ 100 characters) with approve / go ahead / proceed / confirm /
  lgtm / reject / hold off …; tag ``approval``;
* **completed_steps** / **pending_steps**: tool calls with a succeeded artifact (cited by id) / with
  none (or pending, deferred); **tool_errors**: failed artifacts, each with its error line when the
  artifact carries one in ``meta["error_line"]`` (``{"line": n, "text": …}``, which
  :func:`ctxledger.assemble.compaction.build_compaction` sets from the raw output with
  :func:`ctxledger.represent.extract.logs.primary_error`); **evidence**: tool memories, and artifacts that
  no call in the range answers;
* **decisions**: assistant sentences with decided / decision / I'll use / we will use / going with /
  chose / the fix is / plan: …; tag ``decision``;
* **open_questions**: the questions of the last message with text, when the assistant wrote it (the run
  is waiting for the user's answer);
* **contradictions**: tool memories with ``conflicts_with``; records tagged ``contradiction``;
* **stale**: records carrying ``meta["stale"]`` (the validity stage's detail: since when, why, the
  revalidation tool), which :func:`ctxledger.assemble.compaction.build_compaction` sets on the copies it
  passes of records the policy marks stale; such a memory's evidence line says ``[stale]`` too. A record
  the policy omits as stale or superseded never reaches the compactor;
* **stop_reasons**: ``stop_reason`` or ``exit_status`` in a checkpoint's state, ``stop_reason`` in a
  record's meta, a model run whose ``finish_reason`` is ``length``/``max_tokens``/``content_filter``/
  ``refusal``; assistant sentences with "stopped because", "cannot continue", "blocked by" …;
* **current_state**: the last assistant message with text (or the last checkpoint).

An earlier compaction inside the range carries its invariants forward (its goal, constraints,
corrections, approvals, decisions, errors, evidence, contradictions and stale flags).

:func:`check_fidelity` then verifies that each invariant survived in the compaction's *text* (the only
part a model sees): the kinds that must never be compressed must appear verbatim (whitespace, case and
quote style aside); the others verbatim or by their record id, except that an item's ``exact`` part (a
tool error's error line) must appear verbatim whatever its kind (seed 001: tool errors are never
compressed away). :func:`compact_checked` refuses a compaction that lost one, so a failed compaction never
becomes summary text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxledger.errors import CompactionRefused, InputError
from ctxledger.records import (
    Checkpoint,
    Compaction,
    Message,
    ModelRun,
    Record,
    Role,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    ToolStatus,
    Trust,
)

COMPACTOR_VERSION = "2"

KINDS: tuple[str, ...] = (
    "goal",
    "latest_request",
    "user_constraints",
    "user_corrections",
    "approvals",
    "decisions",
    "completed_steps",
    "pending_steps",
    "tool_errors",
    "evidence",
    "open_questions",
    "contradictions",
    "stale",
    "stop_reasons",
    "current_state",
)
"""Invariant kinds, in rendering order."""

VERBATIM_KINDS = frozenset(
    {"user_constraints", "user_corrections", "approvals", "open_questions", "stale", "stop_reasons"}
)
"""Kinds that must survive word for word (seed 001: "Algunas cosas nunca deben comprimirse")."""

CARRIED_KINDS = frozenset(
    {
        "goal",
        "user_constraints",
        "user_corrections",
        "approvals",
        "decisions",
        "tool_errors",
        "evidence",
        "contradictions",
        "stale",
    }
)
"""Kinds an earlier compaction in the range carries forward."""

_TITLES = {
    "goal": "Goal",
    "latest_request": "Latest user request",
    "user_constraints": "User constraints (verbatim)",
    "user_corrections": "User corrections (verbatim)",
    "approvals": "Approval state (verbatim)",
    "decisions": "Decisions",
    "completed_steps": "Completed steps",
    "pending_steps": "Pending steps",
    "tool_errors": "Tool errors",
    "evidence": "Evidence ids",
    "open_questions": "Open questions (verbatim)",
    "contradictions": "Contradictions",
    "stale": "Stale (verbatim; revalidate before relying on it)",
    "stop_reasons": "Stop reasons (verbatim)",
    "current_state": "Current state",
}

_I = re.IGNORECASE
CONSTRAINT_RE = re.compile(
    r"\b(?:never|don'?t|do not|does not|must|mustn'?t|shall not|should not|shouldn'?t|only|always|without"
    r"|avoid|not allowed|may not|make sure|ensure|under no circumstances|refrain|forbidden|prohibited"
    r"|at most|at least|no more than|no)\b",
    _I,
)
CORRECTION_RE = re.compile(
    r"\b(?:actually|instead|i meant|correction|that'?s (?:not|wrong)|not what i|rather than|wrong)\b"
    r"|^\s*no\b[,.!]",
    _I,
)
APPROVAL_RE = re.compile(
    r"\b(?:approved?|approval|go ahead|proceed|confirm(?:ed)?|lgtm|you may|authori[sz]ed?|reject(?:ed)?"
    r"|denied|hold off)\b",
    _I,
)
APPROVAL_MAX_CHARS = 100
"""Approvals are short replies ("Yes, please proceed with that booking."); longer sentences that merely
mention "confirm" or "proceed" are instructions, not approval state."""
DECISION_RE = re.compile(
    r"\b(?:decided|decision|i(?:'ll| will) (?:use|go with|keep|switch)|we(?:'ll| will) use|going with|chose"
    r"|the fix is|plan:)",
    _I,
)
STOP_RE = re.compile(
    r"\b(?:stopp(?:ed|ing) because|cannot continue|can'?t continue|giving up|blocked (?:on|by)"
    r"|unable to proceed)\b",
    _I,
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_TAG_KINDS = {
    "user_constraint": "user_constraints",
    "constraint": "user_constraints",
    "correction": "user_corrections",
    "approval": "approvals",
    "decision": "decisions",
    "contradiction": "contradictions",
    "goal": "goal",
}


@dataclass(frozen=True, slots=True)
class Item:
    """One invariant: its ``kind`` (see :data:`KINDS`), the ``record_id`` it comes from, and its ``text``.

    ``exact`` is the part of ``text`` that must survive verbatim even where the kind may survive by its
    record id (a tool error's error line); empty when there is none.
    """

    kind: str
    record_id: str
    text: str
    exact: str = ""


@dataclass(frozen=True, slots=True)
class Invariants:
    """The invariants of a stretch of history, in record order within each kind."""

    items: tuple[Item, ...]

    def of(self, kind: str) -> tuple[Item, ...]:
        """The items of one kind."""
        return tuple(i for i in self.items if i.kind == kind)

    def to_dict(self) -> dict[str, list[dict[str, str]]]:
        """``{kind: [{"record_id", "text"[, "exact"]}, …]}`` for every kind (JSON-able; the compaction body)."""
        return {k: [_item_dict(i) for i in self.of(k)] for k in KINDS}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Invariants:
        """Read invariants back from a compaction body (unknown keys are ignored)."""
        items = [
            Item(kind, str(entry["record_id"]), str(entry["text"]), str(entry.get("exact", "")))
            for kind in KINDS
            for entry in body.get(kind, ())
            if isinstance(entry, Mapping) and "record_id" in entry and "text" in entry
        ]
        return cls(tuple(items))


def _item_dict(item: Item) -> dict[str, str]:
    out = {"record_id": item.record_id, "text": item.text}
    if item.exact:
        out["exact"] = item.exact
    return out


def message_text(message: Message) -> str:
    """The text of a message (text parts joined; images and other parts skipped)."""
    if isinstance(message.content, str):
        return message.content
    if message.content is None:
        return ""
    return "\n".join(str(p.get("text", "")) for p in message.content if p.get("type") == "text")


def sentences(text: str) -> list[str]:
    """Sentences of a text (split after ``.``, ``!``, ``?`` and at line breaks), stripped."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s.strip()]


def _tags(record: Record) -> set[str]:
    tags = record.meta.get("tags", ())
    return {str(t) for t in tags} if isinstance(tags, list | tuple) else set()


def _user_items(message: Message) -> list[Item]:
    text = message_text(message)
    tagged = {_TAG_KINDS[t] for t in _tags(message) if t in _TAG_KINDS}
    items = [Item(kind, message.id, text) for kind in sorted(tagged) if kind != "goal"]
    for sentence in sentences(text):
        for kind, pattern in (
            ("user_constraints", CONSTRAINT_RE),
            ("user_corrections", CORRECTION_RE),
            ("approvals", APPROVAL_RE),
        ):
            short_enough = kind != "approvals" or len(sentence) <= APPROVAL_MAX_CHARS
            if kind not in tagged and short_enough and pattern.search(sentence):
                items.append(Item(kind, message.id, sentence))
    return items


def _assistant_items(message: Message) -> list[Item]:
    text = message_text(message)
    items = [Item("decisions", message.id, text)] if "decision" in _tags(message) and text else []
    for sentence in sentences(text):
        if DECISION_RE.search(sentence) and "decision" not in _tags(message):
            items.append(Item("decisions", message.id, sentence))
        if STOP_RE.search(sentence):
            items.append(Item("stop_reasons", message.id, sentence))
    return items


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_text(call: ToolCall) -> str:
    return f"{call.name}({_clip(call.arguments, 160)})"


def _artifact_of(call: ToolCall, artifacts: Sequence[ToolArtifact]) -> ToolArtifact | None:
    """The call's artifact: by record id, else by provider ``call_id`` (which some logs reuse)."""
    found = [a for a in artifacts if a.tool_call_id == call.id]
    if not found and call.call_id:
        found = [a for a in artifacts if not a.tool_call_id and a.call_id == call.call_id]
    return found[-1] if found else None


def _call_items(call: ToolCall, artifact: ToolArtifact | None) -> list[Item]:
    if artifact is None or artifact.status in (ToolStatus.PENDING, ToolStatus.DEFERRED):
        status = artifact.status if artifact is not None else call.status
        return [Item("pending_steps", call.id, f"{_call_text(call)} is {status}")]
    if artifact.status == ToolStatus.FAILED:
        text = f"{_call_text(call)} failed; artifact {artifact.id} sha256:{artifact.sha256[:12]}"
        return [_error_item(artifact, text)]
    return [Item("completed_steps", call.id, f"{_call_text(call)} succeeded; artifact {artifact.id}")]


def _artifact_items(artifact: ToolArtifact) -> list[Item]:
    """Items of an artifact that no call in the range answers (answered ones are cited by their step)."""
    name = artifact.name or "tool"
    text = f"{name} output {artifact.id}, {artifact.size_bytes} bytes, sha256:{artifact.sha256[:12]}"
    items = [Item("evidence", artifact.id, text)]
    if artifact.status == ToolStatus.FAILED:
        items.append(_error_item(artifact, f"{name} failed; artifact {artifact.id}"))
    return items


def _error_item(artifact: ToolArtifact, text: str) -> Item:
    """The ``tool_errors`` item of a failed artifact, with its error line verbatim when it carries one."""
    error = artifact.meta.get("error_line")
    if not isinstance(error, Mapping) or not str(error.get("text", "")).strip():
        return Item("tool_errors", artifact.id, text)
    line = " ".join(str(error["text"]).split())
    where = f"line {error['line']}" if error.get("line") else "error"
    return Item("tool_errors", artifact.id, f"{text}; {where}: {line}", exact=line)


def _memory_items(memory: ToolMemory) -> list[Item]:
    flag = " [stale]" if memory.meta.get("stale") else ""
    items = [Item("evidence", memory.id, f"memory {memory.id}{flag}: {_clip(memory.summary, 200)}")]
    if memory.conflicts_with:
        items.append(
            Item(
                "contradictions",
                memory.id,
                f"memory {memory.id} conflicts with {', '.join(memory.conflicts_with)}",
            )
        )
    return items


_STOP_FINISH_REASONS = frozenset({"length", "max_tokens", "content_filter", "refusal"})


def _stop_reason(record: Record) -> str | None:
    if isinstance(record, Checkpoint):
        for key in ("stop_reason", "exit_status"):
            if record.state.get(key):
                return f"{key}: {record.state[key]}"
    if isinstance(record, ModelRun) and record.meta.get("finish_reason") in _STOP_FINISH_REASONS:
        return f"model run stopped: finish_reason {record.meta['finish_reason']}"
    reason = record.meta.get("stop_reason")
    return f"stop_reason: {reason}" if reason else None


def _meta_items(record: Record) -> list[Item]:
    items = []
    if record.meta.get("stale"):
        items.append(Item("stale", record.id, f"{record.id} is stale: {record.meta['stale']}"))
    reason = _stop_reason(record)
    if reason:
        items.append(Item("stop_reasons", record.id, reason))
    if "contradiction" in _tags(record) and not isinstance(record, ToolMemory):
        items.append(Item("contradictions", record.id, f"record {record.id} is flagged as a contradiction"))
    return items


def _open_questions(messages: Sequence[Message]) -> list[Item]:
    """Questions of the last message with text, when the assistant wrote it (it awaits an answer)."""
    spoken = [m for m in messages if m.role in (Role.USER, Role.ASSISTANT) and message_text(m).strip()]
    if not spoken or spoken[-1].role != Role.ASSISTANT:
        return []
    last = spoken[-1]
    return [Item("open_questions", last.id, s) for s in sentences(message_text(last)) if s.endswith("?")]


def _current_state(records: Sequence[Record]) -> list[Item]:
    for record in reversed(records):
        if isinstance(record, Message) and record.role == Role.ASSISTANT and message_text(record).strip():
            return [Item("current_state", record.id, _clip(message_text(record), 600))]
        if isinstance(record, Checkpoint):
            reach = f"through seq {record.through_seq}" if record.through_seq else f"at seq {record.seq}"
            return [Item("current_state", record.id, f"checkpoint {record.id} of run {record.run_id} {reach}")]
    return []


def _goal_items(records: Sequence[Record], carried: Sequence[Item]) -> list[Item]:
    users = [r for r in records if isinstance(r, Message) and r.role == Role.USER]
    tagged = [m for m in users if "goal" in _tags(m)]
    goal: list[Item] = [i for i in carried if i.kind == "goal"][:1]
    if not goal and (tagged or users):
        first = (tagged or users)[0]
        goal = [Item("goal", first.id, message_text(first))]
    latest = users[-1] if users else None
    if latest is not None and (not goal or latest.id != goal[0].record_id):
        goal.append(Item("latest_request", latest.id, message_text(latest)))
    return goal


def _record_items(record: Record, answers: Mapping[str, ToolArtifact | None]) -> list[Item]:
    if isinstance(record, Message) and record.role == Role.USER:
        return _user_items(record)
    if isinstance(record, Message) and record.role == Role.ASSISTANT:
        return _assistant_items(record)
    if isinstance(record, ToolCall):
        return _call_items(record, answers[record.id])
    if isinstance(record, ToolArtifact):
        answered = any(a is not None and a.id == record.id for a in answers.values())
        return [] if answered else _artifact_items(record)
    if isinstance(record, ToolMemory):
        return _memory_items(record)
    return []


def find_invariants(records: Sequence[Record]) -> Invariants:
    """Read the invariants of a stretch of history (deterministic; heuristics in the module docstring).

    Args:
        records: the records to be compacted, in ``seq`` order.

    Returns:
        :class:`Invariants` whose items name the record each comes from; duplicates removed.
    """
    artifacts = [r for r in records if isinstance(r, ToolArtifact)]
    carried = [
        item
        for r in records
        if isinstance(r, Compaction)
        for item in Invariants.from_dict(r.body).items
        if item.kind in CARRIED_KINDS
    ]
    found: list[Item] = _goal_items(records, carried)
    found += [i for i in carried if i.kind != "goal"]
    answers = {r.id: _artifact_of(r, artifacts) for r in records if isinstance(r, ToolCall)}
    for record in records:
        found += _record_items(record, answers) + _meta_items(record)
    found += _open_questions([r for r in records if isinstance(r, Message)])
    found += _current_state(records)
    ordered = sorted(dict.fromkeys(found), key=lambda i: KINDS.index(i.kind))
    return Invariants(tuple(ordered))


def render(invariants: Invariants, *, compaction_id: str, policy_version: str, through_seq: int, sources: int) -> str:
    """The deterministic compaction text: a header, then one section per non-empty kind.

    Items are written ``- [record_id] text``; the goal, latest request and current state are clipped
    to 600 characters (they survive by id), verbatim kinds never are.
    """
    lines = [
        f"[compaction {compaction_id}: derived summary of {sources} records through seq {through_seq}, "
        f"policy {policy_version}; not the truth of the run: the raw records stay in the store]"
    ]
    for kind in KINDS:
        items = invariants.of(kind)
        if not items:
            continue
        lines.append(f"{_TITLES[kind]}:")
        for item in items:
            text = item.text if kind in VERBATIM_KINDS or item.exact else _clip(item.text, 600)
            lines.append(f"- [{item.record_id}] {text}")
    return "\n".join(lines)


def in_scope(records: Sequence[Record], through_seq: int | None) -> list[Record]:
    """Records with ``seq <= through_seq`` (all when ``None``; records not yet appended, seq 0, count)."""
    return [r for r in records if through_seq is None or r.seq <= through_seq]


def _privacy(records: Sequence[Record]) -> str:
    classes = sorted({r.privacy_class for r in records})
    return classes[0] if len(classes) == 1 else "mixed:" + ",".join(classes)


def _provider_scope(records: Sequence[Record]) -> str | None:
    scopes = sorted({r.provider_scope for r in records if r.provider_scope})
    if not scopes:
        return None
    return scopes[0] if len(scopes) == 1 else "mixed:" + ",".join(scopes)


def compaction_record(
    records: Sequence[Record],
    *,
    compaction_id: str,
    policy_version: str,
    through_seq: int | None,
    text: str,
    body: Mapping[str, Any],
    meta: Mapping[str, Any],
) -> Compaction:
    """Build a Compaction record with lineage over ``records`` (shared by every compactor).

    The envelope comes from the records: their single tenant/conversation, the last record's branch,
    ``created_at`` = the newest source's ``created_at`` (deterministic), ``trust=generated_summary``, and
    ``privacy_class`` = the sources' class, or ``"mixed:<a>,<b>"`` when they differ (no privacy class of a
    policy, so the privacy stage omits it: fail closed); ``provider_scope`` = the scope the scoped sources
    share (unscoped sources add no restriction), or ``"mixed:<a>,<b>"`` when they come from several providers'
    accounts: no provider is that scope, so the compaction goes to none unless a policy route names it.

    Raises:
        InputError: no records, or records from more than one tenant or conversation.
    """
    scoped = in_scope(records, through_seq)
    if not scoped:
        raise InputError("nothing to compact: no records at or before through_seq", source="<api>", field="records")
    for field in ("tenant_id", "conversation_id"):
        if len({getattr(r, field) for r in scoped}) != 1:
            raise InputError(f"records span more than one {field}", source="<api>", field=field)
    last = scoped[-1]
    return Compaction(
        id=compaction_id,
        tenant_id=last.tenant_id,
        conversation_id=last.conversation_id,
        branch_id=last.branch_id,
        created_at=max(r.created_at for r in scoped),
        trust=Trust.GENERATED_SUMMARY,
        privacy_class=_privacy(scoped),
        provider_scope=_provider_scope(scoped),
        through_seq=through_seq if through_seq is not None else max(r.seq for r in scoped),
        source_ids=tuple(r.id for r in scoped),
        policy_version=policy_version,
        text=text,
        body=dict(body),
        meta=dict(meta),
    )


def compact(
    records: Sequence[Record], *, compaction_id: str, policy_version: str, through_seq: int | None = None
) -> Compaction:
    """The default compactor: deterministic, offline; body = the invariants, text = their rendering.

    Args:
        records: the history to compact, in ``seq`` order (a stable boundary's prefix).
        compaction_id: id of the new record.
        policy_version: the policy version that asked for it (lineage).
        through_seq: last ``seq`` covered, inclusive (default: the newest record's).

    Returns:
        A :class:`~ctxledger.records.Compaction` whose ``body`` is :meth:`Invariants.to_dict` and
        whose ``text`` is :func:`render` of them.

    Raises:
        InputError: no records, or records of several tenants or conversations.
    """
    scoped = in_scope(records, through_seq)
    invariants = find_invariants(scoped)
    seq = through_seq if through_seq is not None else max((r.seq for r in scoped), default=0)
    text = render(
        invariants,
        compaction_id=compaction_id,
        policy_version=policy_version,
        through_seq=seq,
        sources=len(scoped),
    )
    return compaction_record(
        scoped,
        compaction_id=compaction_id,
        policy_version=policy_version,
        through_seq=through_seq,
        text=text,
        body=invariants.to_dict(),
        meta={"compactor": "deterministic", "compactor_version": COMPACTOR_VERSION},
    )


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """The result of checking a compaction against the invariants.

    Attributes:
        compaction_id: the compaction checked.
        checked: number of invariant items checked.
        missing: items that did not survive (empty when the compaction is faithful).
    """

    compaction_id: str
    checked: int
    missing: tuple[Item, ...]

    @property
    def ok(self) -> bool:
        """Whether every invariant survived."""
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (stored in the accepted compaction's body under ``"fidelity"``)."""
        return {
            "ok": self.ok,
            "checked": self.checked,
            "missing": [dataclasses.asdict(i) for i in self.missing],
        }


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _normal(text: str) -> str:
    return " ".join(text.translate(_QUOTES).casefold().split())


def _cites(text: str, record_id: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(record_id)}(?![\w-]|\.\w)", text) is not None


def survived(item: Item, text: str) -> bool:
    """Whether one invariant survived in a compaction text (verbatim, or by id where allowed).

    An item's ``exact`` part must be there verbatim in either case.
    """
    if item.exact and _normal(item.exact) not in _normal(text):
        return False
    if _normal(item.text) in _normal(text):
        return True
    return item.kind not in VERBATIM_KINDS and _cites(text, item.record_id)


def check_fidelity(invariants: Invariants, compaction: Compaction) -> FidelityReport:
    """Check that every invariant survived in ``compaction.text`` (see the module docstring).

    Returns:
        A :class:`FidelityReport`; ``ok`` is false when any item is missing.
    """
    missing = tuple(i for i in invariants.items if not survived(i, compaction.text))
    return FidelityReport(compaction.id, len(invariants.items), missing)


class Compactor(Protocol):
    """Anything that compacts records into a Compaction (:func:`compact`, an LLM compactor …)."""

    def __call__(
        self,
        records: Sequence[Record],
        *,
        compaction_id: str,
        policy_version: str,
        through_seq: int | None = None,
    ) -> Compaction:
        """Compact ``records`` (``seq`` order) through ``through_seq`` (inclusive)."""
        ...


def compact_checked(
    records: Sequence[Record],
    *,
    compaction_id: str,
    policy_version: str,
    through_seq: int | None = None,
    compactor: Compactor | None = None,
) -> Compaction:
    """Compact, then refuse the result unless every invariant survived.

    Args:
        records: the history to compact, in ``seq`` order.
        compaction_id: id of the new record.
        policy_version: the policy version (lineage).
        through_seq: last ``seq`` covered, inclusive (default: the newest record's).
        compactor: the compactor to use (default :func:`compact`).

    Returns:
        The compaction, with ``body["fidelity"]`` = the passing :class:`FidelityReport`.

    Raises:
        CompactionRefused: an invariant was lost (``reason="lost_invariants"``, ``missing`` lists them),
            or the compactor failed.
        InputError: no records, or records of several tenants or conversations.
    """
    scoped = in_scope(records, through_seq)
    result = (compactor or compact)(
        scoped, compaction_id=compaction_id, policy_version=policy_version, through_seq=through_seq
    )
    report = check_fidelity(find_invariants(scoped), result)
    if not report.ok:
        raise CompactionRefused(compaction_id, missing=report.missing)
    return dataclasses.replace(result, body={**result.body, "fidelity": report.to_dict()})
