"""Run the failure cases of ``shared/cases`` (small inputs from real bug reports) and check their expectations.

Each case is an OpenAI Chat Completions history whose messages carry reference token costs; the case is
assembled with a :class:`~ctxledger.assemble.costing.FixedCoster` returning those costs, so results do not
depend on a tokenizer. :func:`check_case` returns the list of failed expectations (empty = pass); the
meaning of every field and expectation key is in ``shared/cases/README.md``.

The whole documented format is mapped: :func:`validate_case` refuses, by name, a case field, message field,
memory field, budget field or expectation key it does not know (an :class:`~ctxledger.errors.InputError`
naming the case, the place and the key), so nothing a case states is ever silently dropped. Memories keep
their ``created_at`` and ``supersedes``; the ``request`` becomes the call's scope; ``target_provider``
names the provider(s) the case is assembled for (both without it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.costing import FixedCoster
from ctxledger.errors import CtxledgerError, InputError
from ctxledger.eval.case_shape import check_case_ids, check_case_shape
from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.records import Conversation, Record
from ctxledger.tokens import CharEstimateCounter

REASON_ALIASES = {"scope": "out_of_scope"}
"""Case reason names that map onto the manifest's reason codes."""

CASE_FIELDS = frozenset({"messages", "tools", "memories", "request", "target_provider", "budget", "expect"})
"""Fields of a case the runner maps onto the assembly."""
DESCRIPTIVE_FIELDS = frozenset({"id", "kind", "source", "title", "holdout", "example_selection", "naive_fails"})
"""Fields that describe a case and do not change how it runs."""
MESSAGE_PROVIDER_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
"""Chat Completions fields of a case message (they may reach the payload)."""
MESSAGE_STORE_FIELDS = frozenset(
    {"id", "tokens", "tags", "kind", "covers", "provenance", "artifact_ref", "artifact_bytes", "note"}
)
"""Store metadata of a case message (record ``meta``; ``tokens`` is its reference cost); none reaches a payload.
``note`` is a reader's remark some cases carry on a message."""
MEMORY_FIELDS = frozenset({"id", "text", "scope", "score", "tokens", "created_at", "supersedes"})
BUDGET_FIELDS = frozenset({"window_tokens", "reserved_output_tokens", "margin_tokens"})
TOOL_FIELDS = frozenset({"type", "function", "tokens"})
EXCERPT_RULE_KEYS = frozenset({"max_tokens", "must_contain", "must_reference"})
ANTHROPIC_KEYS = frozenset({"tool_results_in_one_user_message"})
PROVIDERS = {"openai": "openai-chat", "anthropic": "anthropic-messages"}
"""``target_provider`` values and the API contract each is assembled for."""


@dataclass(slots=True)
class CaseRun:
    """A case's outcome for one provider: the assembly (or the error raised) and the id maps to check it.

    ``others`` holds the runs of the same case for the other providers it holds for (see
    :data:`PROVIDERS`); :func:`check_case` checks every one of them.
    """

    case: Mapping[str, Any]
    assembly: Assembly | None = None
    error: Exception | None = None
    ext_by_record: dict[str, str] = field(default_factory=dict)
    record_by_ext: dict[str, str] = field(default_factory=dict)
    provider: str = "openai"
    others: list[CaseRun] = field(default_factory=list)


def case_tool_schemas(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The case's tool schemas without their store-only ``tokens`` field."""
    return [{k: v for k, v in t.items() if k != "tokens"} for t in case.get("tools", [])]


def _unknown(case: Mapping[str, Any], where: str, keys: Any, known: frozenset[str], what: str) -> None:
    extra = sorted(set(keys) - known)
    if extra:
        raise InputError(
            f"unknown {what} {extra[0]!r} (known: {', '.join(sorted(known))})",
            source=f"case {case.get('id', '?')}",
            field=f"{where}{extra[0]}" if where else extra[0],
        )


def validate_case(case: Mapping[str, Any]) -> None:
    """Refuse a case holding a field or expectation key the runner does not map.

    Raises:
        InputError: names the case (``source``), the field path (``field``, e.g. ``messages[2].colour``
            or ``expect.must_include``) and the known keys; also for a bad ``target_provider``, and for a
            value of the wrong type (:func:`~ctxledger.eval.case_shape.check_case_shape`).
    """
    _unknown(case, "", case, CASE_FIELDS | DESCRIPTIVE_FIELDS, "case field")
    check_case_shape(case)
    for i, msg in enumerate(case.get("messages", [])):
        _unknown(case, f"messages[{i}].", msg, MESSAGE_PROVIDER_FIELDS | MESSAGE_STORE_FIELDS, "message field")
    for i, mem in enumerate(case.get("memories", [])):
        _unknown(case, f"memories[{i}].", mem, MEMORY_FIELDS, "memory field")
    for i, tool in enumerate(case.get("tools", [])):
        _unknown(case, f"tools[{i}].", tool, TOOL_FIELDS, "tool field")
    _unknown(case, "budget.", case.get("budget", {}), BUDGET_FIELDS, "budget field")
    expect = case.get("expect", {})
    _unknown(case, "expect.", expect, frozenset(_CHECKS) | {"error", "error_names_ids"}, "expectation")
    for i, rule in (expect.get("excerpted") or {}).items():
        _unknown(case, f"expect.excerpted.{i}.", rule, EXCERPT_RULE_KEYS, "excerpt rule")
    _unknown(case, "expect.serialize_anthropic.", expect.get("serialize_anthropic") or {}, ANTHROPIC_KEYS, "key")
    target = case.get("target_provider")
    if target is not None and target not in PROVIDERS:
        raise InputError(
            f"must be one of {', '.join(PROVIDERS)}, got {target!r}",
            source=f"case {case.get('id', '?')}",
            field="target_provider",
        )


def case_providers(case: Mapping[str, Any]) -> list[str]:
    """The providers a case is assembled for: its ``target_provider``, else both (OpenAI first).

    ``serialize_anthropic`` expectations add Anthropic to an OpenAI-only case.
    """
    target = case.get("target_provider")
    out = [target] if target else list(PROVIDERS)
    if "serialize_anthropic" in case.get("expect", {}) and "anthropic" not in out:
        out.append("anthropic")
    return out


def run_case(
    case: Mapping[str, Any],
    ledger: Ledger,
    *,
    prepare: Callable[[Ledger, Mapping[str, Any], str, list[Record]], None] | None = None,
    provider: str | None = None,
) -> CaseRun:
    """Import a case into ``ledger`` and assemble its next call with the case's reference costs.

    The case's ``memories`` are stored (:func:`add_case_memories`) and its ``request`` is the call's
    scope. The call is assembled for each provider of :func:`case_providers` (or only ``provider``); the
    first is the returned run, the others are in its ``others``.

    Args:
        case: the parsed case.
        ledger: a ledger over an empty store.
        prepare: optional hook run after the import (e.g. to add a compaction).
        provider: assemble for this provider only (``openai`` or ``anthropic``).

    Raises:
        InputError: the case holds a field or expectation the runner does not map (:func:`validate_case`).
    """
    from ctxledger.ingest import parse_openai_messages, write_batch

    validate_case(case)
    conv_id = f"case-{case['id']}"
    batch = parse_openai_messages(case["messages"], case_tool_schemas(case) or None, conversation_id=conv_id)
    write_batch(ledger.store, batch)
    records = batch.conversations[0].records
    if case.get("memories"):
        add_case_memories(ledger, case, conv_id, records)
    if prepare is not None:
        prepare(ledger, case, conv_id, records)
    records = ledger.store.records("default", conv_id)
    runs = [_assemble(case, ledger, conv_id, records, p) for p in ([provider] if provider else case_providers(case))]
    runs[0].others = runs[1:]
    return runs[0]


def _assemble(
    case: Mapping[str, Any], ledger: Ledger, conv_id: str, records: Sequence[Record], provider: str
) -> CaseRun:
    run = CaseRun(case, provider=provider)
    costs: dict[str, int] = {}
    for rec in records:
        if rec.external_id:
            run.ext_by_record[rec.id] = rec.external_id
            run.record_by_ext[rec.external_id] = rec.id
            if "tokens" in rec.meta:
                costs[rec.id] = int(rec.meta["tokens"])
    tool_costs = {t["function"]["name"]: int(t["tokens"]) for t in case.get("tools", [])}
    budget = case["budget"]
    conv = next(r for r in records if isinstance(r, Conversation))
    extra: dict[str, Any] = {}
    if isinstance(case.get("request"), Mapping):
        extra["scope"] = dict(case["request"])
    try:
        run.assembly = ledger.assemble(
            conv_id,
            coster=FixedCoster(costs, tool_costs, fallback=CharEstimateCounter()),
            window_tokens=budget["window_tokens"],
            output_tokens=budget["reserved_output_tokens"],
            margin_tokens=budget["margin_tokens"],
            branch_id=conv.branch_id,
            api=PROVIDERS[provider],
            **extra,
        )
    except CtxledgerError as exc:
        run.error = exc
    return run


def check_case(run: CaseRun) -> list[str]:
    """Return every failed expectation of a case run, as sentences (empty list = the case passes).

    Every provider run of the case is checked; a failure of a run other than the first starts with
    ``"<provider>: "``.

    Raises:
        InputError: an expectation key the runner does not know (:func:`validate_case`).
    """
    validate_case(run.case)
    failures = _check_one(run)
    for other in run.others:
        failures += [f"{other.provider}: {f}" for f in _check_one(other)]
    return failures


def _check_one(run: CaseRun) -> list[str]:
    expect = run.case["expect"]
    if "error" in expect:
        return _check_error(run, expect)
    if run.error is not None:
        return [f"unexpected error: {type(run.error).__name__}: {run.error}"]
    assert run.assembly is not None
    view = _View(run)
    failures: list[str] = _store_fields_kept_out(view)
    for key, value in expect.items():
        if key == "error_names_ids":
            failures.append("error_names_ids given without an expected error")
            continue
        failures.extend(_CHECKS[key](view, value))
    return failures


def _check_error(run: CaseRun, expect: Mapping[str, Any]) -> list[str]:
    if run.error is None:
        return [f"expected {expect['error']} but assembly succeeded"]
    failures = []
    if type(run.error).__name__ != expect["error"]:
        failures.append(f"expected {expect['error']}, got {type(run.error).__name__}")
    text = str(run.error)
    failures += [f"error does not name {i}" for i in expect.get("error_names_ids", []) if i not in text]
    unchecked = set(expect) - {"error", "error_names_ids", "must_not_return_empty"}
    return failures + [f"{k} cannot hold when {expect['error']} is expected" for k in sorted(unchecked)]


_ROLE_AS_ANTHROPIC = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


class _View:
    """Included/omitted sets, payload order and the payload's text pieces of one case run, in case ids.

    ``pieces`` are ``(message index, role, kind, text)`` for every text the payload carries: OpenAI
    messages one per message (``kind`` ``"message"``); Anthropic ``system`` blocks (index ``-1``, role
    ``system``), text blocks (the message's role) and ``tool_result`` blocks (role ``tool``).
    """

    def __init__(self, run: CaseRun) -> None:
        asm = run.assembly
        assert asm is not None
        self.run = run
        self.anthropic = run.provider == "anthropic"
        self.manifest = asm.manifest
        ext = run.ext_by_record
        self.included = {ext[e["ref"]] for e in self.manifest["included"] if e["ref"] in ext}
        self.omitted = {ext[e["ref"]]: e["reason"] for e in self.manifest["omitted"] if e["ref"] in ext}
        self.order = [ext[r] for r in asm.turn_refs if r in ext]
        self.payload = asm.payload
        self.messages = asm.payload.get("messages", [])
        self.case_messages = {m["id"]: m for m in run.case["messages"]}
        self.pieces = _anthropic_pieces(self.payload) if self.anthropic else _openai_pieces(self.messages)

    def rendered(self, ext_id: str) -> tuple[int, str, str] | None:
        """``(message index, role, text)`` of the payload piece that renders case record ``ext_id``."""
        if not self.anthropic:
            if ext_id not in self.order:
                return None
            i = self.order.index(ext_id)
            return (i, self.pieces[i][1], self.pieces[i][3])
        if ext_id not in self.included:
            return None
        msg = self.case_messages.get(ext_id, {})
        want = _text(msg.get("content"))
        for index, role, _kind, text in self.pieces:
            if want and want in text:
                return (index, role, text)
        calls = {str(c.get("id")) for c in msg.get("tool_calls") or ()}
        for index, role, kind, text in self.pieces:
            if kind == "tool_use" and str(json.loads(text).get("id")) in calls:
                return (index, role, text)
        return None

    def unknown(self, ext_id: str) -> list[str]:
        """A failure when ``ext_id`` is no message of the case (a case built in code, not read from a file)."""
        return [] if ext_id in self.case_messages else [f"{ext_id} names no message of the case"]


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else canonical_json(content)


def _openai_pieces(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, str, str]]:
    return [(i, m["role"], "message", _text(m.get("content"))) for i, m in enumerate(messages)]


def _anthropic_pieces(payload: Mapping[str, Any]) -> list[tuple[int, str, str, str]]:
    out: list[tuple[int, str, str, str]] = []
    system = payload.get("system")
    if isinstance(system, str):
        out.append((-1, "system", "text", system))
    for block in system if isinstance(system, list) else ():
        out.append((-1, "system", "text", str(block.get("text", ""))))
    for i, msg in enumerate(payload.get("messages", [])):
        content = msg.get("content")
        if isinstance(content, str):
            out.append((i, msg["role"], "text", content))
            continue
        for block in content or ():
            if block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else "".join(str(b.get("text", "")) for b in inner or ())
                out.append((i, "tool", "tool_result", text))
            elif block.get("type") == "text":
                out.append((i, msg["role"], "text", str(block.get("text", ""))))
            else:
                out.append((i, msg["role"], str(block.get("type")), canonical_json(block)))
    return out


def _store_fields_kept_out(v: _View) -> list[str]:
    """No store-only field of a case message reaches the payload (an OpenAI message's keys)."""
    if v.anthropic:
        return []
    allowed = MESSAGE_PROVIDER_FIELDS
    return [
        f"payload message {i} carries store field(s) {sorted(set(m) - allowed)}"
        for i, m in enumerate(v.messages)
        if set(m) - allowed
    ]


def _must_include(v: _View, ids: Sequence[str]) -> list[str]:
    return [f"{i} not included" for i in ids if i not in v.included]


def _must_not_include(v: _View, ids: Sequence[str]) -> list[str]:
    return [f"{i} included" for i in ids if i in v.included]


def _omitted_together(v: _View, groups: Sequence[Sequence[str]]) -> list[str]:
    out = []
    for g in groups:
        if not all(i in v.omitted for i in g):
            out.append(f"{list(g)} not omitted together")
        elif len({v.omitted[i] for i in g}) > 1:
            out.append(f"{list(g)} omitted for different reasons {[v.omitted[i] for i in g]}")
    return out


def _omitted_reason(v: _View, reasons: Mapping[str, str]) -> list[str]:
    out = []
    for i, reason in reasons.items():
        want = REASON_ALIASES.get(reason, reason)
        if v.omitted.get(i) != want:
            out.append(f"{i}: expected omitted as {want}, got {v.omitted.get(i, 'included')}")
    return out


def _history_position(v: _View, ext_id: str) -> int:
    ids = [m["id"] for m in v.run.case["messages"]]
    return ids.index(ext_id) if ext_id in ids else -1


def _order_preserved(v: _View, flag: bool) -> list[str]:
    seq = [_history_position(v, i) for i in v.order if _history_position(v, i) >= 0]
    return [] if not flag or seq == sorted(seq) else [f"payload order {v.order} is not the history order"]


def _system_preserved(v: _View, flag: bool) -> list[str]:
    systems = [
        m["id"] for m in v.run.case["messages"] if m["role"] in ("system", "developer") and m.get("kind") != "summary"
    ]
    missing = [s for s in systems if s not in v.included]
    leading = v.order[: len(systems)]
    out = [f"instruction {s} dropped" for s in missing]
    if flag and leading != systems:
        out.append(f"instructions {systems} are not first (payload starts {leading})")
    return out


def _first_non_system(v: _View, role: str) -> list[str]:
    roles = [m["role"] for m in v.messages if m["role"] not in ("system", "developer")]
    return [] if roles and roles[0] == role else [f"first non-system role is {roles[:1]}, expected {role}"]


def _last_included(v: _View, ref: str) -> list[str]:
    return [] if v.order and v.order[-1] == ref else [f"last payload item is {v.order[-1:]}, expected {ref}"]


def _max_tokens(v: _View, limit: int) -> list[str]:
    used = v.run.assembly.input_tokens if v.run.assembly else 0
    return [] if used <= limit else [f"input tokens {used} exceed {limit}"]


def _call_pairs(v: _View) -> tuple[list[str], list[tuple[str, str]]]:
    """Call ids in payload order, and ``(kind, id)`` events: ``("call", id)`` / ``("result", id)``."""
    events: list[tuple[str, str]] = []
    for m in v.messages:
        if not v.anthropic:
            events += [("call", c["id"]) for c in m.get("tool_calls") or ()]
            if m["role"] == "tool":
                events.append(("result", str(m.get("tool_call_id"))))
            continue
        for block in m.get("content") if isinstance(m.get("content"), list) else ():
            if block.get("type") == "tool_use":
                events.append(("call", str(block.get("id"))))
            elif block.get("type") == "tool_result":
                events.append(("result", str(block.get("tool_use_id"))))
    return [i for k, i in events if k == "call"], events


def _tool_pairs(v: _View, flag: bool) -> list[str]:
    if not flag:
        return []
    out = []
    calls: dict[str, bool] = {}
    for kind, call_id in _call_pairs(v)[1]:
        if kind == "call":
            calls[call_id] = False
        elif call_id not in calls:
            out.append(f"tool result {call_id} without its call")
        else:
            calls[call_id] = True
    return out + [f"call {c} without its result" for c, answered in calls.items() if not answered]


def _tools_counted(v: _View, flag: bool) -> list[str]:
    tools = v.run.case.get("tools", [])
    need = sum(int(t["tokens"]) for t in tools)
    fixed = v.manifest["budget"]["fixed"]
    return [] if not flag or fixed >= need else [f"fixed budget {fixed} does not include tool schemas ({need})"]


def _no_text(v: _View, texts: Sequence[str]) -> list[str]:
    body = json.dumps(v.payload, ensure_ascii=False)
    raw = canonical_json(v.payload)
    return [f"payload contains {t!r}" for t in texts if t in body or t in raw]


def _not_empty(v: _View, flag: bool) -> list[str]:
    return [] if not flag or v.messages else ["payload is empty"]


def _verbatim(v: _View, ids: Sequence[str]) -> list[str]:
    out = []
    for i in ids:
        if missing := v.unknown(i):
            out += missing
            continue
        want = v.case_messages[i]["content"]
        if v.anthropic and isinstance(want, list):
            out += _parts_in_anthropic(v, i, want)
            continue
        got = v.rendered(i)
        if got is None:
            out.append(f"{i} not kept verbatim (not in the payload)")
        else:
            kept = _text(want) == got[2] if v.anthropic else v.messages[got[0]].get("content") == want
            if not kept:
                out.append(f"{i} not kept verbatim")
    return out


def _parts_in_anthropic(v: _View, ext_id: str, parts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Anthropic form of content parts: every text part is a text block, every image's data an image block."""
    if ext_id not in v.included:
        return [f"{ext_id} not kept verbatim (not in the payload)"]
    texts = {p[3] for p in v.pieces if p[2] == "text"}
    images = canonical_json([p[3] for p in v.pieces if p[2] == "image"])
    out = []
    for part in parts:
        if part.get("type") == "text" and part.get("text") not in texts:
            out.append(f"{ext_id}: text part {str(part.get('text'))[:40]!r} not kept as a text block")
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            data = url.split("base64,", 1)[-1]
            if data not in images:
                out.append(f"{ext_id}: image {url[:40]!r} not kept as an image block")
    return out


def _parts_preserved(v: _View, ids: Sequence[str]) -> list[str]:
    """Kept byte for byte, and costed as an image (provider rates), not as its base64 text."""
    from ctxledger.assemble.costing import SerializerCoster
    from ctxledger.serialize import get_serializer
    from ctxledger.serialize.base import Turn
    from ctxledger.tokens import get_counter

    out = _verbatim(v, ids)
    counter = get_counter("o200k_base")
    coster = SerializerCoster(get_serializer(PROVIDERS[v.run.provider]), counter)
    for i in ids:
        if v.unknown(i):
            continue
        content = v.case_messages[i]["content"]
        if isinstance(content, str):
            out.append(f"{i} has no content parts")
            continue
        as_text = counter.count(canonical_json(content))
        cost = coster.turn_tokens(Turn(ref=i, role=v.case_messages[i]["role"], content=tuple(content)))
        if cost >= as_text:
            out.append(f"{i} costed {cost} tokens, no less than its parts as text ({as_text})")
    return out


def _excerpted(v: _View, spec: Mapping[str, Mapping[str, Any]]) -> list[str]:
    out = []
    for i, rule in spec.items():
        entry = next((e for e in v.manifest["included"] if v.run.ext_by_record.get(e["ref"]) == i), None)
        if entry is None or entry["representation"] != "excerpt":
            out.append(f"{i} not included as an excerpt")
            continue
        if entry["tokens"] > rule.get("max_tokens", entry["tokens"]):
            out.append(f"{i} excerpt has {entry['tokens']} tokens > {rule['max_tokens']}")
        if v.anthropic:
            texts = [p[3] for p in v.pieces if p[2] == "tool_result"]
            text = next((t for t in texts if all(s in t for s in rule.get("must_contain", []))), "")
        else:
            text = v.messages[v.order.index(i)]["content"] if i in v.order else ""
        out += [f"{i} excerpt lacks {s!r}" for s in rule.get("must_contain", []) if s not in text]
        ref = rule.get("must_reference")
        if ref and ref not in text:
            out.append(f"{i} excerpt does not reference {ref}")
    return out


def _untrusted(v: _View, ids: Sequence[str]) -> list[str]:
    """Each record reaches the model inside a ``<data …>`` block whose attributes label its trust."""
    out = []
    for i in ids:
        got = v.rendered(i)
        if got is None:
            out.append(f"{i} not in the payload")
        elif "<data " not in got[2] or "trust=" not in got[2]:
            out.append(f"{i} is not delimited and labelled as data")
    return out


def _role_unchanged(v: _View, ids: Sequence[str]) -> list[str]:
    out = []
    for i in ids:
        if missing := v.unknown(i):
            out += missing
            continue
        want = v.case_messages[i]["role"]
        want = _ROLE_AS_ANTHROPIC[want] if v.anthropic else want
        got = v.rendered(i)
        if got is None:
            out.append(f"{i} not in the payload")
        elif got[1] != want:
            out.append(f"{i} sent as {got[1]}, its role is {want}")
    return out


def _no_synthetic(v: _View, flag: bool) -> list[str]:
    """Every payload turn renders a stored record, and (OpenAI) every message is one such turn."""
    if not flag:
        return []
    asm = v.run.assembly
    assert asm is not None
    stored = set(v.run.ext_by_record)
    out = [f"payload turn {r} is not a stored record" for r in asm.turn_refs if r not in stored]
    if not v.anthropic and len(v.messages) != len(asm.turn_refs):
        out.append(f"payload has {len(v.messages)} messages for {len(asm.turn_refs)} history turns")
    return out


def _conservative(v: _View, ids: Sequence[str]) -> list[str]:
    """Built-in estimates cost these records' turns at least at their reference tokens.

    Each estimating counter (``chars/4``, the Claude proxy) costs the turn with framing on the run's
    serializer: an estimate may over-count, never under-count.
    """
    from ctxledger.assemble.costing import SerializerCoster
    from ctxledger.serialize import get_serializer
    from ctxledger.serialize.base import CallView, Turn
    from ctxledger.tokens import get_counter

    out = []
    serializer = get_serializer(PROVIDERS[v.run.provider])
    for name in ("chars/4", "claude-sonnet-4"):
        coster = SerializerCoster(serializer, get_counter(name))
        for i in ids:
            if missing := v.unknown(i):
                out += missing if name == "chars/4" else []
                continue
            msg = v.case_messages[i]
            content = msg.get("content")
            calls = tuple(
                CallView(c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in msg.get("tool_calls") or ()
            )
            turn = Turn(
                ref=i,
                role=msg["role"],
                content=tuple(content) if isinstance(content, list) else content,
                tool_calls=calls,
                tool_call_id=msg.get("tool_call_id"),
                tool_name=_call_name(v, msg.get("tool_call_id")),
            )
            got, want = coster.turn_tokens(turn), int(msg["tokens"])
            if got < want:
                out.append(f"{i}: estimate {coster.counter.id} costs {got} < reference {want}")
    return out


def _call_name(v: _View, call_id: str | None) -> str | None:
    for m in v.run.case["messages"]:
        for c in m.get("tool_calls") or ():
            if c["id"] == call_id:
                return str(c["function"]["name"])
    return None


def _serialize_anthropic(v: _View, spec: Mapping[str, Any]) -> list[str]:
    if not v.anthropic:
        return []
    out = []
    for group in spec.get("tool_results_in_one_user_message", []):
        where = set()
        for i in group:
            got = v.rendered(i)
            if got is None or got[1] != "tool":
                out.append(f"{i} is not a tool_result block")
            else:
                where.add(got[0])
        if len(where) > 1:
            out.append(f"tool results {list(group)} are spread over user messages {sorted(where)}")
        elif where and v.messages[next(iter(where))]["role"] != "user":
            out.append(f"tool results {list(group)} are not in a user message")
    return out


_CHECKS: dict[str, Callable[[_View, Any], list[str]]] = {
    "must_include_ids": _must_include,
    "must_not_include_ids": _must_not_include,
    "omitted_together": _omitted_together,
    "omitted_reason_for": _omitted_reason,
    "order_preserved": _order_preserved,
    "system_preserved": _system_preserved,
    "first_non_system_role": _first_non_system,
    "last_included_id": _last_included,
    "max_input_tokens": _max_tokens,
    "tool_pairs_intact": _tool_pairs,
    "tools_counted": _tools_counted,
    "must_not_contain_text": _no_text,
    "must_not_return_empty": _not_empty,
    "verbatim_ids": _verbatim,
    "content_parts_preserved_ids": _parts_preserved,
    "excerpted": _excerpted,
    "untrusted_ids": _untrusted,
    "role_unchanged_ids": _role_unchanged,
    "no_synthetic_messages": _no_synthetic,
    "conservative_estimate_ids": _conservative,
    "serialize_anthropic": _serialize_anthropic,
}
"""Expectation key -> checker (``error`` and ``error_names_ids`` are checked against the raised error)."""


# -- the pass/fail table of every case (``ctxledger eval cases``) ---------------------------------------


def _when(case: Mapping[str, Any], i: int, value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"is not an ISO 8601 time: {value!r}",
            source=f"case {case.get('id', '?')}",
            field=f"memories[{i}].created_at",
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def add_case_memories(ledger: Ledger, case: Mapping[str, Any], conv_id: str, records: Sequence[Record]) -> None:
    """Store each of the case's ``memories`` as a retrieved, conversation-visible ToolMemory.

    Every documented field is kept: ``text`` is the summary, ``scope`` the scope labels, ``tokens`` and
    ``score`` go to ``meta``, ``created_at`` (ISO 8601; naive = UTC) is the record's ``created_at`` and
    ``observed_at``, and ``supersedes`` (an id or a list of ids of the case's memories) becomes the record's
    ``supersedes``. Memories are appended oldest first (``created_at``, then file order), so a newer memory
    that supersedes an older one also comes later in the log.

    Raises:
        InputError: a bad ``created_at``, or a ``supersedes`` naming no memory of the case.
    """
    from ctxledger.records import ToolMemory, Trust, Visibility

    main = next(r for r in records if isinstance(r, Conversation)).branch_id
    known = {m["id"] for m in case["memories"]}
    out = []
    for i, m in enumerate(case["memories"]):
        olds = m.get("supersedes") or ()
        olds = [olds] if isinstance(olds, str) else list(olds)
        for old in olds:
            if old not in known:
                raise InputError(
                    f"names no memory of the case: {old!r}",
                    source=f"case {case.get('id', '?')}",
                    field=f"memories[{i}].supersedes",
                )
        when = _when(case, i, m.get("created_at"))
        extra: dict[str, Any] = {"created_at": when, "observed_at": when} if when else {}
        memory = ToolMemory(
            id=f"{conv_id}/{m['id']}",
            tenant_id="default",
            conversation_id=conv_id,
            branch_id=main,
            summary=m["text"],
            scope=m.get("scope") or {},
            external_id=m["id"],
            trust=Trust.RETRIEVED,
            visibility=Visibility.CONVERSATION,
            meta={"tokens": m["tokens"], "score": m["score"]} if "score" in m else {"tokens": m["tokens"]},
            supersedes=tuple(f"{conv_id}/{old}" for old in olds),
            **extra,
        )
        out.append((when.timestamp() if when else float("-inf"), i, memory))
    ledger.append([mem for _t, _i, mem in sorted(out, key=lambda t: (t[0], t[1]))])


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """One row of the failure-case table.

    Attributes:
        case_id, kind, title: from the case file.
        passed: every expectation held (for every provider the case holds for).
        failures: the expectations that did not hold (sentences).
        input_tokens: tokens of the assembled payload under the case's reference costs (``None`` when
            the case expects, or hit, an error).
    """

    case_id: str
    kind: str
    title: str
    passed: bool
    failures: tuple[str, ...]
    input_tokens: int | None


def run_case_file(path: str | Path) -> CaseOutcome:
    """Run one case file on a fresh in-memory ledger under the default policy and check it.

    Raises:
        InputError: the file is not a case (:func:`read_case_file`), or the case holds a field or expectation
            the runner does not map (names it).
    """
    return run_loaded_case(read_case_file(Path(path)))


def run_loaded_case(case: Mapping[str, Any]) -> CaseOutcome:
    """Run one case read by :func:`read_case_file` (or :func:`load_cases`) and check it (see :func:`run_case_file`)."""
    from ctxledger.store.memory import MemoryStore

    run = run_case(case, Ledger(MemoryStore()))
    failures = tuple(check_case(run))
    tokens = run.assembly.input_tokens if run.assembly is not None else None
    return CaseOutcome(case["id"], case.get("kind", ""), case.get("title", ""), not failures, failures, tokens)


CASE_SHAPE = "a JSON object with 'messages' (a list) and 'expect' (an object)"
"""What makes a JSON file a failure case (``shared/cases/README.md``); every other field is checked by name."""


def read_case_file(path: Path) -> dict[str, Any]:
    """Read and check one case file; its ``id`` defaults to the file's stem (``B01.json`` → ``B01``).

    Raises:
        InputError: names the file: not one JSON document in UTF-8 (the parser's message), not
            :data:`CASE_SHAPE`, a field or expectation the runner does not map or a value of the wrong type
            (:func:`validate_case`), or an expectation naming no message or memory of the case
            (:func:`~ctxledger.eval.case_shape.check_case_ids`).
    """
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not one JSON document in UTF-8 ({exc})", source=str(path)) from None
    if not (isinstance(case, dict) and isinstance(case.get("messages"), list) and isinstance(case.get("expect"), dict)):
        raise InputError(
            f"not a failure case: a case is {CASE_SHAPE} (shared/cases/README.md); "
            "move other JSON files out of the cases folder",
            source=str(path),
        )
    case.setdefault("id", path.stem)
    validate_case(case)
    check_case_ids(case)
    return case


def load_cases(cases_dir: str | Path) -> list[dict[str, Any]]:
    """Every case of ``cases_dir``: each ``*.json`` file directly in it, read and checked, sorted by file name.

    Whatever their names (the shared ones are ``B01.json`` …), the JSON files of the folder are its cases; a JSON
    file that is not one is refused by name rather than skipped, so no case is ever left out silently. Other
    files (the ``README.md``) and subfolders are not read.

    Raises:
        InputError: no ``*.json`` file in ``cases_dir``; a file :func:`read_case_file` refuses (names it); two
            files holding the same case ``id`` (names both).
    """
    paths = sorted(p for p in Path(cases_dir).glob("*.json") if p.is_file())
    if not paths:
        raise InputError("no failure cases (*.json files) found", source=str(cases_dir))
    cases = [read_case_file(p) for p in paths]
    seen: dict[str, Path] = {}
    for path, case in zip(paths, cases, strict=True):
        first = seen.setdefault(str(case["id"]), path)
        if first != path:
            raise InputError(f"case id {case['id']!r} is also the id of {first.name}", source=str(path), field="id")
    return cases


def run_cases(cases_dir: str | Path) -> list[CaseOutcome]:
    """Run every case of ``cases_dir`` (:func:`load_cases`, sorted by file name) and check each one.

    Every file is read and checked before the first case runs.

    Raises:
        InputError: see :func:`load_cases`.
    """
    return [run_loaded_case(case) for case in load_cases(cases_dir)]
