"""Rendering of manifests, explanations and payloads as rich tables (presentation only)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ctxledger.cli._escape import escape
from ctxledger.errors import (
    RequiredBlocksDoNotFit,
)
from ctxledger.policy.secrets import redact_text
from ctxledger.records import Compaction, Message, Record, ToolArtifact, ToolCall, ToolMemory

REASONS: Mapping[str, str] = {
    "instruction": "a system/developer instruction: a fixed block, always sent first",
    "latest_user_turn": "the latest user turn: always kept",
    "current_turn": "part of the turn in progress (after the latest user turn): always kept",
    "latest_step": "the agent's newest step after the latest user turn (a message, a tool exchange or a checkpoint: "
    "what the model continues from): always kept",
    "unresolved_tool_call": "a tool call still pending or deferred: always kept",
    "unresolved_tool_error": "a failed tool call not yet retried successfully: always kept",
    "selected": "chosen by utility (relevance, recency, kind) within B_dynamic",
    "budget": "did not fit what was left of B_dynamic after higher-utility items",
    "class_cap": "its context class had used its cap of B_dynamic",
    "role_order": "dropped so the payload starts with a user turn after the instructions",
    "out_of_scope": "belongs to another tenant or conversation",
    "not_in_lineage": "outside the active branch's lineage (another branch, or written after the snapshot)",
    "private_to_participant": "visible only to another participant",
    "audit_only": "kept for audit; never sent to a model",
    "not_promoted": "a subagent's record not promoted to the parent",
    "privacy_restricted": "its privacy class may not go to this provider",
    "provider_restricted": "the provider route does not allow it",
    "secret": "holds a secret; secrets never enter context",
    "superseded": "replaced by a newer record",
    "stale": "past its stale_after time or its source changed",
    "conflict_suppressed": "conflicts with a more trusted record",
    "untrusted_non_evidence": "untrusted content that is not evidence",
    "redundant": "repeats content already included",
    "byte_budget": "rehydrating it would exceed the byte budget",
    "summarized": "covered by an included compaction (or a checkpoint that restores that history)",
    "covered_by_memory": "a compact memory already carries its results",
    "out_of_contract": "not a source the agent's working-set contract allows for this call",
    "empty": "renders to nothing a provider accepts (blank text, no parts, no tool calls); never sent",
    "tool_schemas": "a skill state whose tool schemas are the call's tools (part of the fixed blocks F)",
    "no_tool_schemas": "a skill state that holds no tool schema; only schemas are sent",
    "request_tools": "the request named its own tools, which replace the conversation's",
    "user_constraint": "a user constraint (by tag, or wording such as 'do not'): always kept verbatim",
    "user_correction": "a user correction: always kept verbatim",
    "approval": "approval state: always kept",
    "active_goal": "the active goal: always kept",
    "pending_operation": "a pending operation: always kept",
    "environment_constraint": "a constraint of the environment: always kept",
    "retry_critical": "an error a retry depends on: always kept",
    "moderator_directive": "a moderator's directive: always kept",
    "checkpoint": "the checkpoint that restores the run state: always kept (an exact excerpt if it cannot fit whole)",
}
"""One line per reason code or protection reason, shown by ``explain``."""


def _short(ref: str | None, conversation_id: str) -> str:
    if ref is None:
        return ""
    return ref.removeprefix(f"{conversation_id}/")


def _clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            parts.append(str(part.get("text", "")))
        elif kind in ("image", "image_url"):
            parts.append("[image]")
    return " ".join(parts)


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} kB"


def _record_text(rec: Record | None) -> str:
    """A one-record preview for the tables, every line holding a secret withheld (as the payload withholds it)."""
    return str(redact_text(_raw_record_text(rec)))


def _raw_record_text(rec: Record | None) -> str:
    if isinstance(rec, Message):
        return _text(rec.content)
    if isinstance(rec, ToolCall):
        return f"{rec.name}({rec.arguments})"
    if isinstance(rec, ToolArtifact):
        status = "" if rec.status.value == "succeeded" else f"{rec.status.value} "
        return f"→ {status}{_size(rec.size_bytes)}"
    if isinstance(rec, ToolMemory):
        return rec.summary
    if isinstance(rec, Compaction):
        return rec.text
    return ""


def _unit_of(rec: Record, records: Mapping[str, Record]) -> str:
    """The unit a record belongs to: a tool call's and artifact's unit is the assistant message."""
    if isinstance(rec, ToolCall) and rec.message_id:
        return rec.message_id
    if isinstance(rec, ToolArtifact):
        call = records.get(rec.tool_call_id)
        if isinstance(call, ToolCall) and call.message_id:
            return call.message_id
    return rec.id


def _role(entry: Mapping[str, Any]) -> str:
    if entry.get("kind") == "message" and entry.get("role"):
        return str(entry["role"])
    return str(entry.get("kind", "")).replace("_", " ")


def _units(entries: Iterable[Mapping[str, Any]], key: Any) -> list[list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(key(entry), []).append(entry)
    return list(groups.values())


def _budget_table(manifest: Mapping[str, Any]) -> Table:
    b = manifest["budget"]
    table = Table(title="Budget (tokens)", title_justify="left", show_header=False)
    table.add_column("term", style="bold")
    table.add_column("tokens", justify="right")
    table.add_column("meaning", style="dim")
    table.add_row("W", f"{b['window']:,}", "the model's context window")
    table.add_row("O", f"{b['output']:,}", "reserved for the reply")
    table.add_row("M", f"{b['margin']:,}", "safety margin")
    table.add_row("B_input", f"{b['input']:,}", "= W − O − M: what the request may carry")
    table.add_row("F", f"{b['fixed']:,}", "fixed blocks: instructions, tool schemas, reply priming")
    table.add_row("B_dynamic", f"{b['dynamic']:,}", "= B_input − F: left for the history")
    return table


def _class_table(manifest: Mapping[str, Any]) -> Table:
    ledger = manifest["ledger"]
    table = Table(title="Budget ledger per context class (tokens)", title_justify="left")
    table.add_column("class")
    table.add_column("cap", justify="right")
    table.add_column("used", justify="right")
    table.add_column("of which required", justify="right")
    for name, row in ledger["classes"].items():
        cap = "—" if row["cap"] is None else f"{row['cap']:,}"
        table.add_row(name, cap, f"{row['used']:,}", f"{row['required']:,}")
    table.add_row("total", "", f"{ledger['used_tokens']:,}", "", style="bold")
    table.caption = "used includes the fixed instructions (class policy) and framing: reply priming, tool schemas"
    return table


def _span(refs: Sequence[str], conversation_id: str) -> str:
    """Short refs of a unit's records: ``"82–84"`` when they are consecutive numbers, else comma-joined."""
    short = [_short(r, conversation_id) for r in refs]
    if len(short) > 2 and all(s.isdigit() for s in short):
        nums = [int(s) for s in short]
        if nums == list(range(nums[0], nums[0] + len(nums))):
            return f"{nums[0]}–{nums[-1]}"
    return ",".join(short)


def _fitted(console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], free: int) -> Table:
    """A table of plain-text cells on one line each; column ``free`` is clipped to the width left over.

    Columns whose name starts with ``>`` are right-aligned (the ``>`` is not shown).
    """
    names = [c.lstrip(">") for c in columns]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    left = console.width - sum(w for i, w in enumerate(widths) if i != free) - 3 * len(names) - 1
    room = max(24, min(widths[free], left))
    table = Table(title=title, title_justify="left")
    for name, column in zip(names, columns, strict=True):
        table.add_column(name, no_wrap=True, justify="right" if column.startswith(">") else "left")
    for row in rows:
        table.add_row(*(escape(_clip(c, room) if i == free else c) for i, c in enumerate(row)))
    return table


def _included_table(manifest: Mapping[str, Any], records: Mapping[str, Record], console: Console) -> Table:
    conv = manifest["conversation_id"]
    rows = []
    for group in _units(manifest["included"], lambda e: e["unit"]):
        head = group[0]
        utility = head.get("utility")
        rows.append(
            [
                _span([e["ref"] for e in group], conv),
                _role(head),
                " ".join(_record_text(records.get(e["ref"])) for e in group),
                str(head.get("representation", "")),
                f"{sum(int(e.get('tokens') or 0) for e in group):,}",
                str(head["stage"]),
                str(head["reason"]),
                "" if utility is None else f"{utility:.3f}",
            ]
        )
    columns = ("records", "role/kind", "what", "repr", ">tokens", "stage", "reason", ">utility")
    table = _fitted(console, f"Included items ({len(manifest['included'])} records)", columns, rows, free=2)
    table.caption = (
        f"One row per unit (a tool exchange enters whole); record ids are {conv}/<n>.\n"
        "stage: fixed = instructions (F); protection = required by the policy; selection = chosen by utility."
    )
    return table


def _omitted_table(manifest: Mapping[str, Any], records: Mapping[str, Record], console: Console) -> Table:
    conv = manifest["conversation_id"]

    def unit_key(entry: Mapping[str, Any]) -> str:
        rec = records.get(entry["ref"])
        return entry["ref"] if rec is None else _unit_of(rec, records)

    rows = []
    for group in _units(manifest["omitted"], unit_key):
        head = group[0]
        rec = records.get(head["ref"])
        role = str(getattr(rec, "role", "")) if isinstance(rec, Message) else (rec.kind.value if rec else "")
        if isinstance(rec, Message) and len(group) > 1:
            role = "tool exchange"
        what = " ".join(_record_text(records.get(e["ref"])) for e in group)
        rows.append([_span([e["ref"] for e in group], conv), role, what, str(head["reason"]), str(head["stage"])])
    columns = ("records", "role/kind", "what", "reason", "stage")
    table = _fitted(console, f"Omitted items ({len(manifest['omitted'])} records)", columns, rows, free=2)
    reasons = dict.fromkeys(str(e["reason"]) for e in manifest["omitted"])
    table.caption = "; ".join(_reason_text(r) for r in reasons)
    return table


def _counts_table(manifest: Mapping[str, Any]) -> Table:
    table = Table(title="Items by stage and reason (records)", title_justify="left")
    table.add_column("status")
    table.add_column("stage")
    table.add_column("reason")
    table.add_column("records", justify="right")
    for status in ("included", "omitted"):
        counts: dict[tuple[str, str], int] = {}
        for entry in _entries(manifest, status):
            key = (str(entry["stage"]), str(entry["reason"]))
            counts[key] = counts.get(key, 0) + int(entry.get("count", 1))
        for (stage, reason), n in counts.items():
            table.add_row(status, stage, reason, str(n))
    return table


def _entries(manifest: Mapping[str, Any], status: str) -> list[Mapping[str, Any]]:
    """The entries of ``status``; a summary's omissions are its groups, each with a ``count`` of records."""
    if status == "omitted" and "omitted" not in manifest:
        return list(manifest.get("omissions") or ())
    return list(manifest[status])


def _saving_lines(manifest: Mapping[str, Any]) -> list[str]:
    tokens, budget = manifest["tokens"], manifest["budget"]
    replay, assembled = int(tokens["replay"]), int(tokens["estimated_input"])
    pct = 100.0 * (replay - assembled) / replay if replay else 0.0
    lines = [
        f"full replay of the history: [bold]{replay:,}[/] tokens",
        f"assembled payload:          [bold]{assembled:,}[/] tokens (B_input {budget['input']:,})",
        f"saved:                      [bold green]{replay - assembled:,}[/] tokens ({pct:.1f}%)"
        if assembled <= replay
        else f"added:                      [bold yellow]{assembled - replay:,}[/] tokens ({-pct:.1f}%)",
    ]
    if assembled > replay:
        delimiters = "the <data …> delimiters the trust policy puts around tool results and other data"
        left_out = sum(manifest.get("omitted_by_reason", {}).values())
        why = (
            f"nothing had to be left out, and {delimiters} add tokens"
            if not left_out
            else (f"{delimiters} cost more than what was left out")
        )
        lines.append(f"the payload costs more than replaying the history as it was written: {why}.")
    if replay > budget["input"]:
        lines.append(f"replaying everything would not even fit this budget ({replay:,} > {budget['input']:,}).")
    if budget.get("fill"):
        lines.append(f"[yellow]room left:[/] {escape(str(budget['fill']))}.")
    counter = manifest["counter"]
    if counter.get("is_estimate"):
        lines.append(f"[yellow]counts are estimates[/] (counter {counter['id']}); the margin must cover them.")
    return lines


def _payload_rows(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if "system" in payload:
        rows.append(("system", _text(payload["system"])))
    for msg in payload.get("messages", []):
        rows.append((str(msg.get("role", "")), _message_text(msg)))
    return rows


def _message_text(msg: Mapping[str, Any]) -> str:
    content = msg.get("content")
    parts = [_block_text(b) for b in content] if isinstance(content, list) else [_text(content)]
    for call in msg.get("tool_calls") or []:
        fn = call.get("function", {})
        parts.append(f"→ {fn.get('name')}({fn.get('arguments')})")
    if msg.get("role") == "tool":
        parts.insert(0, f"[{msg.get('tool_call_id')}]")
    return " ".join(p for p in parts if p)


def _block_text(block: Any) -> str:
    if not isinstance(block, Mapping):
        return str(block)
    kind = block.get("type")
    if kind == "tool_use":
        return f"→ {block.get('name')}({json.dumps(block.get('input'), ensure_ascii=False)})"
    if kind == "tool_result":
        inner = block.get("content")
        text = _text(inner) if not isinstance(inner, list) else " ".join(_block_text(b) for b in inner)
        return f"[{block.get('tool_use_id')}] {text}"
    return _text([block])


def _payload_table(payload: Mapping[str, Any], console: Console, head: int = 4, tail: int = 6) -> Table:
    rows = [[str(i), role, text] for i, (role, text) in enumerate(_payload_rows(payload))]
    if len(rows) > head + tail:
        rows = [*rows[:head], ["", "…", f"{len(rows) - head - tail} more messages"], *rows[-tail:]]
    title = f"Payload preview ({len(_payload_rows(payload))} messages, truncated)"
    return _fitted(console, title, (">#", "role", "content"), rows, free=2)


def _required_table(exc: RequiredBlocksDoNotFit) -> Table:
    table = Table(title="Required blocks (they must all fit B_input)", title_justify="left")
    table.add_column("block")
    table.add_column("what")
    table.add_column("tokens", justify="right")
    for block in exc.blocks:
        table.add_row(escape(block.ref), block.what, f"{block.tokens:,}")
    table.add_row("total", f"B_input = {exc.budget_tokens:,}", f"{exc.required_tokens:,}", style="bold")
    return table


SPLIT_PAIRS = frozenset({"answer_left_out", "question_left_out", "pairs_split"})
"""Manifest warning codes of question/answer pairs left split for budget (:mod:`ctxledger.assemble.pairs`)."""


def _warning_lines(manifest: Mapping[str, Any], every: bool) -> list[str]:
    """The manifest's warnings as the report prints them: each one when ``every``, else the split pairs as one line.

    The split pairs (:data:`SPLIT_PAIRS`) can be many on every call of a long history; one line counts them and
    quotes the newest, the rest keep their line each. The manifest keeps every one.
    """
    found = [w for w in manifest.get("warnings") or () if isinstance(w, Mapping)]
    others = [str(w) for w in manifest.get("warnings") or () if not isinstance(w, Mapping)]
    split = [w for w in found if w.get("code") in SPLIT_PAIRS]
    if every or len(split) <= 1:
        return [str(w.get("detail", w)) for w in found] + others
    named = [w for w in split if w.get("code") != "pairs_split"]
    counted = next((w for w in split if w.get("code") == "pairs_split"), None)
    total = int(counted["value"]) if counted is not None and str(counted.get("value")).isdigit() else len(named)
    newest = f"; the newest: {named[-1]['detail']}" if named else ""
    line = (
        f"{total} question/answer pairs stayed split for budget{newest} (--show warnings lists them; the manifest "
        "and explain keep them)"
    )
    return [str(w.get("detail", w)) for w in found if w.get("code") not in SPLIT_PAIRS] + [line] + others


def _print_summary(console: Console, manifest: Mapping[str, Any], *, every_warning: bool = True) -> None:
    policy = manifest["policy"]
    console.print(
        f"assembly [bold cyan]{manifest['id']}[/] of [bold]{escape(manifest['conversation_id'])}[/] "
        f"at seq {manifest['snapshot_seq']} · {manifest['api']} · {manifest['model']} · "
        f"policy {policy['name']}@{policy['version']} · counter {manifest['counter']['id']}"
    )
    console.print(_budget_table(manifest))
    console.print(_counts_table(manifest))
    for line in _saving_lines(manifest):
        console.print(line)
    for line in _warning_lines(manifest, every_warning):
        console.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)


def _print_manifest(console: Console, manifest: Mapping[str, Any], records: Mapping[str, Record]) -> None:
    _print_summary(console, manifest)
    console.print(_class_table(manifest))
    console.print(_included_table(manifest, records, console))
    if "omitted" in manifest:
        console.print(_omitted_table(manifest, records, console))
    else:  # a summary that could not be replayed: its counts are all it says of what was left out
        counts = ", ".join(f"{n} {reason}" for reason, n in (manifest.get("omitted_by_reason") or {}).items())
        console.print(f"Omitted items: {escape(counts or 'none')} (by reason; the record keeps no list of them)")
    usage = manifest["tokens"]
    if usage.get("observed_input") is not None:
        console.print(_usage_line(manifest))


def _usage_line(manifest: Mapping[str, Any]) -> str:
    t = manifest["tokens"]
    pct = "" if t.get("error_pct") is None else f" ({t['error_pct']:+.2f}%)"
    return (
        f"estimated input {t['estimated_input']:,} · observed input {t['observed_input']:,} · "
        f"observed output {t['observed_output']:,} · estimate error {t['error']:+,} tokens{pct}"
    )


STEPS: Mapping[str, str] = {
    "message": "a message",
    "tool_call": "a tool exchange",
    "tool_artifact": "a tool exchange",
    "checkpoint": "a checkpoint (the restored run state)",
}
"""What the step protected as ``latest_step`` is, by the kind of its record."""


def _reason_text(code: str, kind: str | None = None) -> str:
    """``code: meaning``; for ``latest_step`` with the record's ``kind`` known, what that step is."""
    if code == "latest_step" and kind in STEPS:
        return f"{code}: the agent's newest step after the latest user turn, here {STEPS[kind]}: always kept"
    meaning = REASONS.get(code)
    return f"{code}: {meaning}" if meaning else code


def unit_kind(manifest: Mapping[str, Any], why: Mapping[str, Any]) -> str | None:
    """The kind of the unit ``why`` explains: ``tool_call`` when it holds a tool call or result, else the record's."""
    if why.get("unit") is None:
        return why.get("kind")
    kinds = {e.get("kind") for e in manifest.get("included", ()) if e.get("unit") == why["unit"]}
    return "tool_call" if kinds & {"tool_call", "tool_artifact"} else why.get("kind")


def _print_explanation(console: Console, why: Mapping[str, Any], conv: str, kind: str | None = None) -> None:
    """The answer for one record; ``kind`` is what its unit is (see :func:`unit_kind`), named for ``latest_step``."""
    status = why["status"]
    colour = "green" if status == "included" else "red"
    console.print(f"[bold {colour}]{status.upper()}[/] {escape(why['ref'])}")
    rows = [
        ("external id", why.get("external_id")),
        ("unit", _short(why.get("unit"), conv) or None),
        ("stage", why["stage"]),
        ("reason", _reason_text(str(why["reason"]), kind or why.get("kind"))),
        ("representation", why.get("representation")),
        ("tokens", why.get("tokens")),
        ("utility", None if why.get("utility") is None else f"{why['utility']:.4f}"),
        ("transform", why.get("transform")),
        ("detail", why.get("detail") or None),
        ("note", why.get("note")),
        ("content now", why.get("content_now")),
        ("branch", why.get("branch_id")),
        ("policy", why.get("policy")),
    ]
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    for name, value in rows:
        if value is not None and value != "":
            table.add_row(name, escape(str(value)))
    console.print(table)
    if why.get("chain"):
        console.print("[bold]why[/bold] (record → sources → branch → visibility → policy → stage):")
        for i, step in enumerate(why["chain"]):
            console.print(f"  {'└─' if i == len(why['chain']) - 1 else '├─'} {escape(str(step))}")
    for d in why.get("decisions", []):
        line = f"  decision: stage {d['stage']} → {d['outcome']} ({d['reason']})"
        console.print(escape(line + _decision_note(why, d)))


def _decision_note(why: Mapping[str, Any], decision: Mapping[str, Any]) -> str:
    """Why a policy decision names another stage than the one that admitted the record (empty when it does not)."""
    if why.get("status") != "included" or decision.get("stage") == why.get("stage"):
        return ""
    if why.get("stage") == "fixed" and decision.get("outcome") == "require":
        return ": the policy requires every instruction, and the assembler sends them in the fixed block (stage fixed)"
    return f": the policy stage's decision; the assembler admitted it by stage {why.get('stage')}"


# -- commands ------------------------------------------------------------------------------------------
