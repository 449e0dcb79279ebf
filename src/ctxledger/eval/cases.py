"""Run the failure cases of ``shared/cases`` (small inputs from real bug reports) and check their expectations.

Each case is an OpenAI Chat Completions history whose messages carry reference token costs; the case is
assembled with a :class:`~ctxledger.assemble.costing.FixedCoster` returning those costs, so results do not
depend on a tokenizer. :func:`check_case` returns the list of failed expectations (empty = pass); the
meaning of every expectation key is in ``shared/cases/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.costing import FixedCoster
from ctxledger.errors import CtxledgerError
from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.records import Conversation, Record

REASON_ALIASES = {"scope": "out_of_scope"}
"""Case reason names that map onto DESIGN §5 codes."""

_STORE_ONLY_KEYS = ("tokens", "id", "tags", "kind", "covers", "provenance", "artifact_ref", "artifact_bytes", "note")


@dataclass(slots=True)
class CaseRun:
    """A case's outcome: the assembly (or the error raised) and the id maps needed to check it."""

    case: Mapping[str, Any]
    assembly: Assembly | None = None
    error: Exception | None = None
    ext_by_record: dict[str, str] = field(default_factory=dict)
    record_by_ext: dict[str, str] = field(default_factory=dict)


def load_case(path: str | Path) -> dict[str, Any]:
    """Read one case file (JSON)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def case_tool_schemas(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The case's tool schemas without their store-only ``tokens`` field."""
    return [{k: v for k, v in t.items() if k != "tokens"} for t in case.get("tools", [])]


def run_case(
    case: Mapping[str, Any],
    ledger: Ledger,
    *,
    prepare: Callable[[Ledger, Mapping[str, Any], str, list[Record]], None] | None = None,
) -> CaseRun:
    """Import a case into ``ledger`` and assemble its next call with the case's reference costs.

    Args:
        case: the parsed case.
        ledger: a ledger over an empty store.
        prepare: optional hook run after the import (e.g. to add a case's memories or compactions).
    """
    from ctxledger.ingest import parse_openai_messages, write_batch

    conv_id = f"case-{case['id']}"
    batch = parse_openai_messages(case["messages"], case_tool_schemas(case) or None, conversation_id=conv_id)
    write_batch(ledger.store, batch)
    records = batch.conversations[0].records
    if prepare is not None:
        prepare(ledger, case, conv_id, records)
        records = ledger.store.records("default", conv_id)
    run = CaseRun(case)
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
    try:
        run.assembly = ledger.assemble(
            conv_id,
            coster=FixedCoster(costs, tool_costs),
            window_tokens=budget["window_tokens"],
            output_tokens=budget["reserved_output_tokens"],
            margin_tokens=budget["margin_tokens"],
            branch_id=conv.branch_id,
        )
    except CtxledgerError as exc:
        run.error = exc
    return run


def check_case(run: CaseRun) -> list[str]:
    """Return every failed expectation of a case run, as sentences (empty list = the case passes)."""
    expect = run.case["expect"]
    if "error" in expect:
        return _check_error(run, expect)
    if run.error is not None:
        return [f"unexpected error: {type(run.error).__name__}: {run.error}"]
    assert run.assembly is not None
    view = _View(run)
    failures: list[str] = []
    for key, value in expect.items():
        checker = _CHECKS.get(key)
        if checker is None:
            failures.append(f"unknown expectation {key!r}")
            continue
        failures.extend(checker(view, value))
    return failures


def _check_error(run: CaseRun, expect: Mapping[str, Any]) -> list[str]:
    if run.error is None:
        return [f"expected {expect['error']} but assembly succeeded"]
    failures = []
    if type(run.error).__name__ != expect["error"]:
        failures.append(f"expected {expect['error']}, got {type(run.error).__name__}")
    text = str(run.error)
    failures += [f"error does not name {i}" for i in expect.get("error_names_ids", []) if i not in text]
    return failures


class _View:
    """Included/omitted sets and payload order of one case run, in case ids."""

    def __init__(self, run: CaseRun) -> None:
        asm = run.assembly
        assert asm is not None
        self.run = run
        self.manifest = asm.manifest
        ext = run.ext_by_record
        self.included = {ext[e["ref"]] for e in self.manifest["included"] if e["ref"] in ext}
        self.omitted = {ext[e["ref"]]: e["reason"] for e in self.manifest["omitted"] if e["ref"] in ext}
        self.order = [ext[r] for r in asm.turn_refs if r in ext]
        self.payload = asm.payload
        self.messages = asm.payload.get("messages", [])
        self.case_messages = {m["id"]: m for m in run.case["messages"]}


def _must_include(v: _View, ids: Sequence[str]) -> list[str]:
    return [f"{i} not included" for i in ids if i not in v.included]


def _must_not_include(v: _View, ids: Sequence[str]) -> list[str]:
    return [f"{i} included" for i in ids if i in v.included]


def _omitted_together(v: _View, groups: Sequence[Sequence[str]]) -> list[str]:
    return [f"{g} not omitted together" for g in groups if not all(i in v.omitted for i in g)]


def _omitted_reason(v: _View, reasons: Mapping[str, str]) -> list[str]:
    out = []
    for i, reason in reasons.items():
        want = REASON_ALIASES.get(reason, reason)
        if v.omitted.get(i) != want:
            out.append(f"{i}: expected omitted as {want}, got {v.omitted.get(i, 'included')}")
    return out


def _order_preserved(v: _View, flag: bool) -> list[str]:
    seq = [int(i[1:]) if i[1:].isdigit() else -1 for i in v.order if i.startswith("m")]
    return [] if not flag or seq == sorted(seq) else [f"payload order {v.order} is not the history order"]


def _system_preserved(v: _View, flag: bool) -> list[str]:
    systems = [
        m["id"]
        for m in v.run.case["messages"]
        if m["role"] in ("system", "developer") and m.get("kind") != "summary"
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


def _tool_pairs(v: _View, flag: bool) -> list[str]:
    out = []
    calls: dict[str, bool] = {}
    for m in v.messages:
        for c in m.get("tool_calls") or ():
            calls[c["id"]] = False
        if m["role"] == "tool":
            if m.get("tool_call_id") not in calls:
                out.append(f"tool result {m.get('tool_call_id')} without its call")
            calls[m.get("tool_call_id", "")] = True
    out += [f"call {c} without its result" for c, answered in calls.items() if not answered]
    return out if flag else []


def _tools_counted(v: _View, flag: bool) -> list[str]:
    tools = v.run.case.get("tools", [])
    need = sum(int(t["tokens"]) for t in tools)
    fixed = v.manifest["budget"]["fixed"]
    return [] if not flag or fixed >= need else [f"fixed budget {fixed} does not include tool schemas ({need})"]


def _no_text(v: _View, texts: Sequence[str]) -> list[str]:
    body = canonical_json(v.payload)
    return [f"payload contains {t!r}" for t in texts if t in body]


def _not_empty(v: _View, flag: bool) -> list[str]:
    return [] if not flag or v.messages else ["payload is empty"]


def _verbatim(v: _View, ids: Sequence[str]) -> list[str]:
    out = []
    for i in ids:
        want = v.case_messages[i]["content"]
        if i not in v.order or v.messages[v.order.index(i)]["content"] != want:
            out.append(f"{i} not kept verbatim")
    return out


def _parts_preserved(v: _View, ids: Sequence[str]) -> list[str]:
    return _verbatim(v, ids)


def _excerpted(v: _View, spec: Mapping[str, Mapping[str, Any]]) -> list[str]:
    out = []
    for i, rule in spec.items():
        entry = next((e for e in v.manifest["included"] if v.run.ext_by_record.get(e["ref"]) == i), None)
        if entry is None or entry["representation"] != "excerpt":
            out.append(f"{i} not included as an excerpt")
            continue
        if entry["tokens"] > rule.get("max_tokens", entry["tokens"]):
            out.append(f"{i} excerpt has {entry['tokens']} tokens > {rule['max_tokens']}")
        text = v.messages[v.order.index(i)]["content"] if i in v.order else ""
        out += [f"{i} excerpt lacks {s!r}" for s in rule.get("must_contain", []) if s not in text]
        ref = rule.get("must_reference")
        if ref and ref not in text:
            out.append(f"{i} excerpt does not reference {ref}")
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
}


# -- the pass/fail table of every case (``ctxledger eval cases``) ---------------------------------------


def add_case_memories(ledger: Ledger, case: Mapping[str, Any], conv_id: str, records: Sequence[Record]) -> None:
    """``prepare`` hook for cases with ``memories`` (B12): store each memory as a ToolMemory.

    Each becomes a retrieved, conversation-visible :class:`~ctxledger.records.ToolMemory` carrying its
    ``scope`` labels and its reference ``tokens``, as the B12 tests store them.
    """
    from ctxledger.records import ToolMemory, Trust, Visibility

    main = next(r for r in records if isinstance(r, Conversation)).branch_id
    ledger.append(
        [
            ToolMemory(
                id=f"{conv_id}/{m['id']}",
                tenant_id="default",
                conversation_id=conv_id,
                branch_id=main,
                summary=m["text"],
                scope=m["scope"],
                external_id=m["id"],
                trust=Trust.RETRIEVED,
                visibility=Visibility.CONVERSATION,
                meta={"tokens": m["tokens"], "score": m["score"]},
            )
            for m in case["memories"]
        ]
    )


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """One row of the failure-case table.

    Attributes:
        case_id, kind, title: from the case file.
        passed: every expectation held.
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

    The setup is the one the tests use: the case's ``request`` (B12's scope) becomes the ledger's
    request defaults, and its ``memories`` are stored by :func:`add_case_memories` before assembly.
    """
    from ctxledger.store.memory import MemoryStore

    case = load_case(path)
    defaults = {"scope": case["request"]} if isinstance(case.get("request"), Mapping) else None
    prepare = add_case_memories if case.get("memories") else None
    run = run_case(case, Ledger(MemoryStore(), request_defaults=defaults), prepare=prepare)
    failures = tuple(check_case(run))
    tokens = run.assembly.input_tokens if run.assembly is not None else None
    return CaseOutcome(case["id"], case.get("kind", ""), case.get("title", ""), not failures, failures, tokens)


def run_cases(cases_dir: str | Path) -> list[CaseOutcome]:
    """Run every ``B*.json`` case of ``cases_dir`` (sorted by id) and check it (see :func:`run_case_file`).

    Raises:
        InputError: ``cases_dir`` holds no case file.
    """
    from ctxledger.errors import InputError

    paths = sorted(Path(cases_dir).glob("B*.json"))
    if not paths:
        raise InputError("no failure cases (B*.json) found", source=str(cases_dir))
    return [run_case_file(p) for p in paths]
