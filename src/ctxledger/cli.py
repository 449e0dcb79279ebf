"""The ``ctxledger`` command line (ctxledger issue 2, item 9).

Commands: ``migrate``, ``import``, ``conversations``, ``assemble``, ``explain``, ``usage``, ``demo``,
``rehydrate`` and the ``eval`` group (``eval run``, ``eval scenarios``, ``eval cases``: issue 5); each
``--help`` explains what it does with an example. Global options choose the
store (``--db``, env ``CTXLEDGER_URL``, default the embedded SQLite file
``.ctxledger/ctxledger.db``) and the tenant (``--tenant``).

Exit codes: ``0`` success; ``2`` a user error (bad input, an unknown id, a budget the required items do
not fit, a bad option), printed as one clear message, never a traceback; ``1`` any other ctxledger
error (a store or integrity failure), also without a traceback.

This module is presentation only: it calls the :class:`~ctxledger.ledger.Ledger` facade and renders
its manifests with rich. The core never imports it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxledger.errors import (
    BudgetError,
    ConfigurationError,
    CtxledgerError,
    FormatNotRecognised,
    InputError,
    PolicyError,
    RecordNotFound,
    RequiredBlocksDoNotFit,
)
from ctxledger.ledger import DEFAULT_URL, Ledger
from ctxledger.manifest import explain as explain_manifest
from ctxledger.records import Compaction, Message, Record, ToolArtifact, ToolCall, ToolMemory

USER_ERRORS = (InputError, ConfigurationError, BudgetError, PolicyError, RecordNotFound)
"""Errors caused by what the user asked; they exit with code 2."""

IMPORT_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
"""Files a directory import picks up (others, such as READMEs, are skipped)."""

COUNTER_HELP = (
    "Tokenizer to count with, for a model whose own is not known: o200k_base, cl100k_base (exact), "
    "tiktoken/o200k_base, tiktoken/cl100k_base (exact, the reference implementation), "
    "estimate/quicktok/o200k_base, estimate/quicktok/cl100k_base or chars/4 (flagged as estimates). "
    "Default: the model's own (OpenAI models; claude-* get a flagged o200k estimate)."
)
"""Help of every ``--counter`` option."""

LARGE_INPUT_BYTES = 1 << 20
"""Files at least this large (bytes) get a progress bar while they are parsed."""

REASONS: Mapping[str, str] = {
    "instruction": "a system/developer instruction: a fixed block, always sent first",
    "latest_user_turn": "the latest user turn: always kept",
    "current_turn": "part of the turn in progress (after the latest user turn): always kept",
    "latest_step": "the agent's latest step (its newest tool exchange): always kept",
    "unresolved_tool_call": "a tool call still pending or deferred: always kept",
    "unresolved_tool_error": "a failed tool call not yet retried successfully: always kept",
    "selected": "chosen by utility (relevance, recency, kind) within B_dynamic",
    "budget": "did not fit what was left of B_dynamic after higher-utility items",
    "class_cap": "its context class had used its cap of B_dynamic",
    "role_order": "dropped so the payload starts with a user turn after the instructions",
    "out_of_scope": "belongs to another tenant or conversation",
    "not_in_lineage": "on a branch outside the active branch's lineage",
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
    "user_constraint": "a user constraint (by tag, or wording such as 'do not'): always kept verbatim",
    "user_correction": "a user correction: always kept verbatim",
    "approval": "approval state: always kept",
    "active_goal": "the active goal: always kept",
    "pending_operation": "a pending operation: always kept",
    "environment_constraint": "a constraint of the environment: always kept",
    "retry_critical": "an error a retry depends on: always kept",
    "moderator_directive": "a moderator's directive: always kept",
    "checkpoint": "the live checkpoint that restores the run state: always kept",
}
"""One line per reason code or protection reason, shown by ``explain``."""

app = typer.Typer(
    name="ctxledger",
    help=(
        "Record an agent's history and assemble each model call's context under a token budget, "
        "with a manifest of what was included or omitted and why.\n\n"
        "Start with [bold]ctxledger demo[/bold]: it imports a real tau-bench trajectory, assembles its "
        "next model call at 8,000 tokens and explains every choice."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


class ApiFormat(StrEnum):
    """Provider payload formats."""

    OPENAI_CHAT = "openai-chat"
    ANTHROPIC_MESSAGES = "anthropic-messages"


class ImportFormat(StrEnum):
    """Import formats (``auto`` tells them apart by content)."""

    AUTO = "auto"
    OPENAI_CHAT = "openai-chat"
    ANTHROPIC_MESSAGES = "anthropic-messages"
    TAU_BENCH = "tau-bench"
    MINI_SWE_AGENT = "mini-swe-agent"
    SWE_AGENT = "swe-agent"
    TOOLBENCH = "toolbench"
    LOCOMO = "locomo"
    BFCL_MEMORY = "bfcl-memory"


class Show(StrEnum):
    """Extra sections ``assemble`` can print."""

    INCLUDED = "included"
    OMITTED = "omitted"
    CLASSES = "classes"
    PAYLOAD = "payload"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class Settings:
    """Global options: the store URL, whether the user chose it, and the tenant."""

    db: str
    db_given: bool
    tenant: str
    blobs: Path | None = None


# -- plumbing ------------------------------------------------------------------------------------------


PIPE_WIDTH = 120
"""Columns used when output is not a terminal and ``COLUMNS`` is unset (rich would use 80)."""


def _console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH
    return console


def _out() -> Console:
    return _console()


def _err() -> Console:
    return _console(stderr=True)


STDOUT = "-"
"""``--out -`` means standard output, as in most command-line tools."""


def _is_stdout(path: Path | None) -> bool:
    """Whether an ``--out`` value asks for standard output (``-``)."""
    return path is not None and str(path) == STDOUT


def _settings(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings(DEFAULT_URL, False, "default")


@contextmanager
def _handled(window_option: str = "--window") -> Iterator[None]:
    """Turn ctxledger errors into one message and an exit code (2 for user errors, 1 otherwise).

    ``window_option`` is the command's option for W, named when the required blocks do not fit.
    """
    try:
        yield
    except RequiredBlocksDoNotFit as exc:
        _err().print(_required_table(exc))
        _err().print(
            f"[red]error:[/] the required blocks need {exc.required_tokens} tokens but B_input is "
            f"{exc.budget_tokens}. Raise {window_option}, or lower --output / --margin."
        )
        raise typer.Exit(2) from None
    except USER_ERRORS as exc:
        _err().print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except CtxledgerError as exc:
        _err().print(f"[red]error ({type(exc).__name__}):[/] {escape(str(exc))}")
        raise typer.Exit(1) from None


@contextmanager
def _open(settings: Settings) -> Iterator[Ledger]:
    with Ledger.open(settings.db, blobs_dir=settings.blobs) as ledger:
        yield ledger


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


def _records(ledger: Ledger, settings: Settings, conversation_id: str) -> dict[str, Record]:
    return {r.id: r for r in ledger.store.records(settings.tenant, conversation_id)}


def _role(entry: Mapping[str, Any]) -> str:
    if entry.get("kind") == "message" and entry.get("role"):
        return str(entry["role"])
    return str(entry.get("kind", "")).replace("_", " ")


def _units(entries: Iterable[Mapping[str, Any]], key: Any) -> list[list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(key(entry), []).append(entry)
    return list(groups.values())


# -- rendering -----------------------------------------------------------------------------------------


def _budget_table(manifest: Mapping[str, Any]) -> Table:
    b = manifest["budget"]
    table = Table(title="Budget (tokens, DESIGN §2)", title_justify="left", show_header=False)
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
        for entry in manifest[status]:
            key = (str(entry["stage"]), str(entry["reason"]))
            counts[key] = counts.get(key, 0) + 1
        for (stage, reason), n in counts.items():
            table.add_row(status, stage, reason, str(n))
    return table


def _saving_lines(manifest: Mapping[str, Any]) -> list[str]:
    tokens, budget = manifest["tokens"], manifest["budget"]
    replay, assembled = int(tokens["replay"]), int(tokens["estimated_input"])
    pct = 100.0 * (replay - assembled) / replay if replay else 0.0
    lines = [
        f"full replay of the history: [bold]{replay:,}[/] tokens",
        f"assembled payload:          [bold]{assembled:,}[/] tokens (B_input {budget['input']:,})",
        f"saved:                      [bold green]{replay - assembled:,}[/] tokens ({pct:.1f}%)",
    ]
    if replay > budget["input"]:
        lines.append(f"replaying everything would not even fit this budget ({replay:,} > {budget['input']:,}).")
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


def _print_summary(console: Console, manifest: Mapping[str, Any]) -> None:
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
    for warning in manifest.get("warnings") or ():
        console.print(f"[yellow]warning:[/] {escape(str(warning.get('detail', warning)))}", soft_wrap=True)


def _print_manifest(console: Console, manifest: Mapping[str, Any], records: Mapping[str, Record]) -> None:
    _print_summary(console, manifest)
    console.print(_class_table(manifest))
    console.print(_included_table(manifest, records, console))
    console.print(_omitted_table(manifest, records, console))
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


def _reason_text(code: str) -> str:
    meaning = REASONS.get(code)
    return f"{code}: {meaning}" if meaning else code


def _print_explanation(console: Console, why: Mapping[str, Any], conv: str) -> None:
    status = why["status"]
    colour = "green" if status == "included" else "red"
    console.print(f"[bold {colour}]{status.upper()}[/] {escape(why['ref'])}")
    rows = [
        ("external id", why.get("external_id")),
        ("unit", _short(why.get("unit"), conv) or None),
        ("stage", why["stage"]),
        ("reason", _reason_text(str(why["reason"]))),
        ("representation", why.get("representation")),
        ("tokens", why.get("tokens")),
        ("utility", None if why.get("utility") is None else f"{why['utility']:.4f}"),
        ("transform", why.get("transform")),
        ("detail", why.get("detail") or None),
        ("note", why.get("note")),
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
        console.print(f"  decision: stage {d['stage']} → {d['outcome']} ({d['reason']})")


# -- commands ------------------------------------------------------------------------------------------


@app.callback()
def main(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar="CTXLEDGER_URL",
            help="Store URL: sqlite:///path.db, postgresql+psycopg://user@host/db or memory://. "
            f"\\[default: {DEFAULT_URL}]",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant whose records are read and written.")] = "default",
    blobs: Annotated[
        Path | None,
        typer.Option(
            "--blobs",
            envvar="CTXLEDGER_BLOBS",
            help="Folder of raw tool outputs (blobs). Default: <db>.blobs next to a SQLite file; "
            "./.ctxledger/blobs for PostgreSQL — set it so every working directory sees the same blobs.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Record an agent's history and assemble budgeted, explained contexts from it."""
    ctx.obj = Settings(db or DEFAULT_URL, db is not None, tenant, blobs)


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Create the store's schema, or upgrade it to the newest revision (safe to repeat).

    SQLite and PostgreSQL share one schema and one migration history. Other commands migrate on
    open too; run this once when a deployment wants the schema change to be an explicit step.

    Example: [bold]ctxledger --db postgresql+psycopg://postgres@127.0.0.1/test migrate[/bold]
    """
    from ctxledger.store import migrate as run_migrate

    settings = _settings(ctx)
    with _handled():
        revision = run_migrate(settings.db)
    _out().print(f"schema of {escape(settings.db)} is at revision [bold]{revision}[/]")


def _input_files(paths: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """Files to import, each with its conversation id for directory imports (else ``None``)."""
    files: list[tuple[Path, str | None]] = []
    for path in paths:
        if not path.exists():
            raise InputError("no such file or directory", source=str(path))
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in IMPORT_SUFFIXES):
                files.append((f, _relative_id(f, path)))
        else:
            files.append((path, None))
    if not files:
        raise InputError(f"no {'/'.join(IMPORT_SUFFIXES)} files found", source=", ".join(map(str, paths)))
    return files


def _relative_id(file: Path, root: Path) -> str:
    from ctxledger.ingest._load import stem_of

    rel = file.relative_to(root)
    return "/".join([*rel.parent.parts, stem_of(rel)])


def _conversation_id(given: str | None, from_dir: str | None) -> str | None:
    if given and from_dir:
        return f"{given}/{from_dir}"
    return given or from_dir


def _parse_all(
    files: Sequence[tuple[Path, str | None]], fmt: str, tenant: str, given: str | None, roots: Sequence[Path] = ()
) -> list[Any]:
    """Parse every file; in a directory (``rel`` set), files whose format cannot be told are skipped.

    Skipped files are listed in one warning on stderr. A file named on the command line whose format
    cannot be told, or a directory import where no file was recognised, is an error naming --format
    (and the directories, ``roots``).

    Raises:
        InputError: bad input (names file, record and field), or nothing recognised as above.
    """
    from ctxledger.ingest import parse_file, rich_progress

    batches, skipped = [], []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_err(), transient=True, disable=len(files) < 2) as progress:
        task = progress.add_task("files", total=len(files))
        for path, rel in files:
            cid = _conversation_id(given, rel)
            try:
                if path.stat().st_size >= LARGE_INPUT_BYTES and len(files) == 1:
                    with rich_progress(f"parsing {path.name}", console=_err()) as on_progress:
                        batches.append(
                            parse_file(path, fmt, tenant_id=tenant, conversation_id=cid, on_progress=on_progress)
                        )
                else:
                    batches.append(parse_file(path, fmt, tenant_id=tenant, conversation_id=cid))
            except FormatNotRecognised as exc:
                if rel is None:
                    raise _unrecognised(exc.source, exc.formats, "cannot tell the format of this file") from None
                skipped.append(exc)
            progress.advance(task)
    if skipped and not batches:
        listing = ", ".join(e.source for e in skipped)
        problem = f"the format of none of the {len(skipped)} files could be told ({listing})"
        raise _unrecognised(", ".join(str(p) for p in roots), skipped[0].formats, problem)
    if skipped:
        names = "\n".join(f"  {escape(e.source)}" for e in skipped)
        _err().print(
            f"[yellow]warning:[/] skipped {len(skipped)} file(s) whose format could not be told "
            f"(import them with --format):\n{names}",
            soft_wrap=True,
        )
    return batches


def _unrecognised(source: str, formats: Sequence[str], problem: str) -> InputError:
    """The CLI's wording of :class:`FormatNotRecognised`: it names the --format option."""
    return InputError(f"{problem}; pass --format one of {', '.join(formats)}", source=source)


@app.command("import")
def import_(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Files or directories (every .json/.jsonl/.ndjson/.traj file below them).", show_default=False
        ),
    ],
    fmt: Annotated[
        ImportFormat, typer.Option("--format", help="Input format; auto tells them apart by content.")
    ] = ImportFormat.AUTO,
    conversation_id: Annotated[
        str | None,
        typer.Option(
            "--conversation-id",
            help="Conversation id (default: the file stem; for multi-conversation files, the prefix of their ids; "
            "for directories, prefixed to each file's relative path).",
        ),
    ] = None,
    count_tokens_for: Annotated[
        str, typer.Option("--model", help="Count and cache token counts for this model while importing ('' skips).")
    ] = "gpt-4o",
    counter: Annotated[str | None, typer.Option("--counter", help=COUNTER_HELP, show_default=False)] = None,
) -> None:
    """Import agent transcripts or trajectories into the execution graph.

    Formats: OpenAI Chat Completions and Anthropic Messages transcripts (JSON or JSONL), tau-bench,
    mini-swe-agent, SWE-agent .traj, ToolBench, LoCoMo and BFCL memory files. Every input is parsed
    and validated [italic]before[/italic] anything is written: bad input prints the file, record index
    and field at fault, exits with code 2 and writes nothing. Importing the same source twice is
    refused (ids are deterministic). In a directory each file's conversation id is its relative path
    without the suffix (stems collide across folders); files there whose format cannot be told (a
    package.json, say) are skipped with a warning that lists them, and a directory where no file is
    recognised is an error.

    Example: [bold]ctxledger import ../shared/data/tau-bench/gpt-4o-airline_tasks0-39.json[/bold]
    """
    settings = _settings(ctx)
    with _handled():
        start = time.perf_counter()
        batches = _parse_all(_input_files(paths), fmt.value, settings.tenant, conversation_id, roots=paths)
        with _open(settings) as ledger:
            coster = _coster(ledger, "openai-chat", count_tokens_for, counter) if count_tokens_for else None
            results = _write_all(ledger, batches, coster)
        elapsed = time.perf_counter() - start
    _out().print(_import_table(batches, results, elapsed))


def _write_all(ledger: Ledger, batches: Sequence[Any], coster: Any | None) -> list[Any]:
    """Refuse duplicate or already stored conversation ids across all batches, then write each batch.

    Checking every id first means a re-import refuses the whole set before anything is written. Each
    batch is then one transaction (:func:`ctxledger.ingest.write_batch`); token counts of its turns are
    computed with ``coster`` and cached (``None`` skips), so the first assembly is warm.

    Raises:
        InputError: a conversation id is already stored or comes from two inputs (names the file).
    """
    from ctxledger.ingest import write_batch

    _refuse_duplicates(ledger, batches)
    results = []
    for batch in batches:
        results.append(write_batch(ledger.store, batch))
        if coster is not None:
            _warm_counts(ledger, batch, coster)
    return results


def _refuse_duplicates(ledger: Ledger, batches: Sequence[Any]) -> None:
    seen: dict[str, str] = {}
    for batch in batches:
        for conv in batch.conversations:
            cid, tenant = conv.conversation_id, conv.records[0].tenant_id
            if cid in seen:
                problem = f"conversation {cid!r} also comes from {seen[cid]}; give the inputs distinct ids"
                raise InputError(problem, source=batch.source, field="conversation_id")
            seen[cid] = batch.source
            try:
                ledger.store.get(tenant, cid)
            except RecordNotFound:
                continue
            problem = (
                f"conversation {cid!r} is already in tenant {tenant!r} (re-import of the same source); "
                "pass --conversation-id to import it again under another id"
            )
            raise InputError(problem, source=batch.source, field="conversation_id")


def _warm_counts(ledger: Ledger, batch: Any, coster: Any) -> None:
    for conv in batch.conversations:
        head = conv.records[0]
        snap = ledger.snapshots.load(head.tenant_id, conv.conversation_id, head.branch_id)
        coster.prefetch([t for u in snap.units for t in u.turns])


def _coster(ledger: Ledger, api: str, model: str, counter: str | None) -> Any:
    """The ledger's coster for ``model``; an unknown model without ``--counter`` is a user error naming it.

    Raises:
        ConfigurationError: unknown counter name, or a model with no known tokenizer and no --counter.
    """
    from ctxledger.tokens import counter_for_model

    return ledger.coster(api, model, counter_for_model(model, counter, option="--counter"))


def _import_table(batches: Sequence[Any], results: Sequence[Any], elapsed: float) -> Table:
    table = Table(title="Imported", title_justify="left")
    for name in ("file", "format", "conversations", "messages", "tool calls", "artifacts", "records"):
        table.add_column(name, justify="left" if name in ("file", "format") else "right")
    totals = [0, 0, 0, 0, 0]
    for batch, result in zip(batches, results, strict=True):
        row = [len(result.conversation_ids), result.messages, result.tool_calls, result.artifacts, len(result.records)]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        table.add_row(escape(batch.source), batch.format, *(f"{n:,}" for n in row))
    if len(batches) > 1:
        table.add_row("total", "", *(f"{n:,}" for n in totals), style="bold")
    rate = totals[4] / elapsed if elapsed > 0 else 0.0
    table.caption = f"{totals[4]:,} events in {elapsed:.2f} s ({rate:,.0f} events/s, parse + write + token counts)"
    return table


def _conversations_table(rows: Sequence[tuple[str, str, str]], tenant: str, width: int) -> Table:
    """Conversation id, events and title per row; ids are never cut (users copy them into other commands).

    The title gives way first (ellipsis); an id wider than the whole line folds onto the next line
    rather than losing characters.
    """
    events = max([len("events"), *(len(r[1]) for r in rows)])
    room = max(width - events - 10, 20)  # 4 borders + 2 spaces of padding per column
    longest_id = max([len("conversation"), *(len(r[0]) for r in rows)])
    longest_title = max([len("title"), *(len(r[2]) for r in rows)])
    id_width = min(longest_id, room - min(longest_title, 12))
    title_width = max(min(longest_title, room - id_width), 5)
    table = Table(title=f"Conversations of tenant {escape(tenant)}", title_justify="left")
    table.add_column("conversation", width=id_width, overflow="fold")
    table.add_column("events", justify="right", no_wrap=True)
    table.add_column("title", width=title_width, no_wrap=True, overflow="ellipsis")
    for cid, count, title in rows:
        table.add_row(escape(cid), count, escape(title))
    return table


@app.command()
def conversations(ctx: typer.Context) -> None:
    """List the tenant's conversations with their number of events (records), oldest first.

    Example: [bold]ctxledger conversations[/bold]
    """
    settings = _settings(ctx)
    console = _out()
    with _handled(), _open(settings) as ledger:
        ids = ledger.store.conversations(settings.tenant)
        rows = []
        for cid in ids:
            head = ledger.store.get(settings.tenant, cid)
            rows.append((cid, f"{ledger.store.head_seq(settings.tenant, cid):,}", str(getattr(head, "title", ""))))
    if not console.is_terminal and "COLUMNS" not in os.environ:  # piped: one line per id, for grep and scripts
        console.width = max(console.width, max((len(r[0]) for r in rows), default=0) + 40)
    table = _conversations_table(rows, settings.tenant, console.width)
    console.print(
        table if ids else "no conversations yet: try [bold]ctxledger import PATH[/] or [bold]ctxledger demo[/]"
    )


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    out = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise InputError(f"must look like KEY=VALUE, got {value!r}", source="<command line>", field=option)
        out[key.strip()] = val.strip()
    return out


def _request_options(
    agent: str | None,
    call_type: str | None,
    phase: str | None,
    checks: list[str] | None,
    exact_evidence: list[str] | None,
    scope: list[str] | None,
    source_version: list[str] | None,
    now: str | None,
) -> dict[str, Any]:
    """The optional request fields of ``assemble``, validated; only those given."""
    out: dict[str, Any] = {"agent": agent, "call_type": call_type, "phase": phase}
    out = {k: v for k, v in out.items() if v is not None}
    if checks:
        out["checks_passed"] = tuple(checks)
    if exact_evidence:
        out["exact_evidence"] = True if exact_evidence == ["auto"] else tuple(exact_evidence)
    if scope:
        out["scope"] = _pairs(scope, "--scope")
    if source_version:
        out["source_versions"] = _pairs(source_version, "--source-version")
    if now is not None:
        out["now"] = _parse_now(now)
    return out


def _parse_now(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError as exc:
        raise InputError(f"not an ISO 8601 time: {text!r}", source="<command line>", field="--now") from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@app.command()
def assemble(
    ctx: typer.Context,
    conversation: Annotated[
        str, typer.Argument(help="Conversation id (see `ctxledger conversations`).", show_default=False)
    ],
    window: Annotated[int, typer.Option("--window", help="W: the model's context window, in tokens.")] = 8_000,
    output: Annotated[int, typer.Option("--output", help="O: tokens reserved for the reply.")] = 1_000,
    margin: Annotated[int, typer.Option("--margin", help="M: safety margin in tokens (covers estimate error).")] = 200,
    api: Annotated[ApiFormat, typer.Option("--format", help="Provider payload format.")] = ApiFormat.OPENAI_CHAT,
    model: Annotated[
        str, typer.Option("--model", help="Model name; also picks the tokenizer (claude-* counts are estimates).")
    ] = "gpt-4o",
    counter: Annotated[str | None, typer.Option("--counter", help=COUNTER_HELP, show_default=False)] = None,
    snapshot: Annotated[
        int | None,
        typer.Option("--snapshot", min=1, help="Assemble as of this seq (inclusive, from 1); default the head."),
    ] = None,
    branch: Annotated[str | None, typer.Option("--branch", help="Active branch id (default the main branch).")] = None,
    participant: Annotated[
        str | None, typer.Option("--participant", help="Participant the call is for (visibility).")
    ] = None,
    query: Annotated[
        str | None, typer.Option("--query", help="Current goal for relevance (default the latest user turn).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the payload JSON to this file instead of stdout ('-': stdout).")
    ] = None,
    show: Annotated[
        list[Show] | None,
        typer.Option("--show", help="Also print: included, omitted, classes, payload or all (repeatable)."),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="A policy file to assemble under instead of the default policy: TOML, or YAML (.yaml/.yml).",
        ),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option("--provider", help="Provider the payload goes to (privacy routing fails closed for others)."),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent making the call: binds the policy's working-set contract.")
    ] = None,
    call_type: Annotated[
        str | None, typer.Option("--call-type", help="Call type of the contract (routing, synthesis …).")
    ] = None,
    phase: Annotated[
        str | None, typer.Option("--phase", help="Run phase for tool exposure (investigation, action …).")
    ] = None,
    checks: Annotated[
        list[str] | None,
        typer.Option("--check-passed", help="A check already passed (eligibility, approval …); repeatable."),
    ] = None,
    exact_evidence: Annotated[
        list[str] | None,
        typer.Option(
            "--exact-evidence",
            help="Read back the raw artifact of this memory/artifact id if policy allows (repeatable); "
            "'auto' = the most relevant selected memory.",
        ),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="Caller scope label KEY=VALUE (e.g. user_id=u1), compared with records' scope."),
    ] = None,
    source_version: Annotated[
        list[str] | None,
        typer.Option("--source-version", help="Current version of a source, SOURCE=VERSION (e.g. repo=d4e5f6)."),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option("--now", help="The call's clock for freshness, ISO 8601 (e.g. 2026-09-01T09:00Z); default now."),
    ] = None,
) -> None:
    """Assemble the context of the conversation's next model call under a token budget.

    The budget is B_input = W − O − M (window − output reserve − margin). Instructions, tool
    schemas, the latest user turn and the turn in progress are required; the rest of the history is
    chosen by utility until B_dynamic = B_input − F is spent. Tool calls enter with all their results
    or not at all. The manifest is persisted: pass the printed assembly id to [bold]explain[/bold].

    The payload JSON (the provider request body) goes to stdout, the report to stderr; with --out the
    payload goes to the file and the report to stdout (--out - keeps the payload on stdout). If the
    required blocks alone exceed B_input,
    they are listed with their tokens and the command exits with code 2.

    Example:
    [bold]ctxledger assemble tau-bench-airline-task2-trial1 --window 8000 --out payload.json --show omitted[/bold]
    """
    settings = _settings(ctx)
    out = None if _is_stdout(out) else out
    with _handled(), _open(settings) as ledger:
        from ctxledger.policy.loader import load_policy

        extra: dict[str, Any] = {"provider": provider} if provider is not None else {}
        extra.update(_request_options(agent, call_type, phase, checks, exact_evidence, scope, source_version, now))
        asm = ledger.assemble(
            conversation,
            tenant_id=settings.tenant,
            policy=load_policy(policy_file) if policy_file else None,
            coster=_coster(ledger, api.value, model, counter),
            **extra,
            window_tokens=window,
            output_tokens=output,
            margin_tokens=margin,
            api=api.value,
            model=model,
            as_of_seq=snapshot,
            branch_id=branch,
            participant_id=participant,
            query=query,
        )
        records = _records(ledger, settings, conversation) if show else {}
    report = _out() if out is not None else _err()
    if out is not None:
        from ctxledger.demo import write_payload

        size = write_payload(asm.payload, out)
    else:
        typer.echo(json.dumps(asm.payload, indent=2, ensure_ascii=False))
    _print_summary(report, asm.manifest)
    _print_sections(report, asm.manifest, records, set(show or ()))
    if out is not None:
        where = escape(str(out))
        report.print(f"payload ({size:,} bytes, hash {asm.payload_hash[:23]}…) written to {where}", soft_wrap=True)
    report.print(f"explain it: [bold]ctxledger explain {asm.id}[/] [dim][REF][/]")


def _print_sections(
    console: Console, manifest: Mapping[str, Any], records: Mapping[str, Record], show: set[Show]
) -> None:
    every = Show.ALL in show
    if every or Show.CLASSES in show:
        console.print(_class_table(manifest))
    if every or Show.INCLUDED in show:
        console.print(_included_table(manifest, records, console))
    if every or Show.OMITTED in show:
        console.print(_omitted_table(manifest, records, console))
    if every or Show.PAYLOAD in show:
        console.print(_payload_table(manifest["payload"], console))


@app.command()
def explain(
    ctx: typer.Context,
    assembly_id: Annotated[str, typer.Argument(help="Assembly id printed by assemble or demo.", show_default=False)],
    ref: Annotated[
        str | None,
        typer.Argument(
            help="A record id, its number within the conversation, or an external id (e.g. a tool call id).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Explain an assembly: why the model saw each item, and why it did not see the others.

    Without REF: the budget and the budget ledger per context class, every included item (stage that
    admitted it, utility, tokens) and every omitted item (reason code and stage). With REF: the answer
    for that one record.

    Example: [bold]ctxledger explain asm_0123… tau-bench-airline-task2-trial1/12[/bold] (or just [bold]12[/bold])
    """
    settings = _settings(ctx)
    with _handled(), _open(settings) as ledger:
        manifest = ledger.get_assembly(assembly_id, tenant_id=settings.tenant)
        conv = manifest["conversation_id"]
        if ref is None:
            _print_manifest(_out(), manifest, _records(ledger, settings, conv))
            return
        why = _explain_ref(ledger, settings, manifest, ref)
    _print_explanation(_out(), why, conv)


def _explain_ref(ledger: Ledger, settings: Settings, manifest: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """Explain ``ref`` read as a record id or external id, then ``<conversation>/<ref>``, then a tool call id.

    Raises:
        RecordNotFound: no candidate of the assembly matches.
        InputError: ``ref`` is a provider call id that several tool calls share (real traces reuse them).
    """
    conv = manifest["conversation_id"]
    for candidate in (ref, f"{conv}/{ref}"):
        try:
            return explain_manifest(manifest, candidate)
        except RecordNotFound:
            continue
    calls = [r.id for r in _records(ledger, settings, conv).values() if isinstance(r, ToolCall) and r.call_id == ref]
    if len(calls) > 1:
        listing = ", ".join(calls)
        raise InputError(
            f"tool call id {ref!r} is shared by {len(calls)} tool calls ({listing}); name one by its record id",
            source="<cli>",
            field="REF",
        )
    if calls:
        return explain_manifest(manifest, calls[0])
    raise RecordNotFound(settings.tenant, ref, what=f"candidate of assembly {manifest['id']}")


@app.command()
def usage(
    ctx: typer.Context,
    assembly_id: Annotated[str, typer.Argument(help="Assembly id the model call was made with.", show_default=False)],
    input_tokens: Annotated[
        int, typer.Option("--input", min=0, help="Input (prompt) tokens the provider reported.", show_default=False)
    ],
    output_tokens: Annotated[
        int,
        typer.Option("--output", min=0, help="Output (completion) tokens the provider reported.", show_default=False),
    ],
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace usage already recorded for this assembly (else refused).")
    ] = False,
) -> None:
    """Record the token usage the provider reported for an assembly's call, and show the estimate error.

    The error (estimated − observed input tokens) is how the margin M is calibrated: a positive error
    means the count was cautious, a negative one means M must grow. An assembly is one call, so its
    usage is recorded once: recording it again is refused (exit code 2) unless --overwrite is given.

    Example: [bold]ctxledger usage asm_0123… --input 6790 --output 212[/bold]
    """
    settings = _settings(ctx)
    with _handled(), _open(settings) as ledger:
        ledger.record_usage(assembly_id, input_tokens, output_tokens, tenant_id=settings.tenant, overwrite=overwrite)
        manifest = ledger.get_assembly(assembly_id, tenant_id=settings.tenant)
    _out().print(_usage_line(manifest))


@app.command()
def rehydrate(
    ctx: typer.Context,
    artifact: Annotated[
        str,
        typer.Argument(
            help="A tool artifact's record id, a blob's sha256:<hex>, or a message id (its text, as excerpts "
            "locate it).",
            show_default=False,
        ),
    ],
    byte_range: Annotated[
        str | None, typer.Option("--bytes", help="Only bytes START:END (0-based, end exclusive).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the bytes to this file instead of stdout ('-': stdout).")
    ] = None,
) -> None:
    """Print the exact raw bytes of a tool result (or a message's text), checked against its sha256.

    Tool results are stored whole, before any truncation, in a content-addressed blob store; this
    gives them back byte for byte (or a range of them), refusing bytes that no longer match their hash.
    Every excerpt and reference in a manifest names the command that fetches the rest.

    Example: [bold]ctxledger rehydrate tau-bench-airline-task2-trial1/30 --bytes 0:200[/bold]
    """
    from ctxledger.represent.rehydrate import parse_byte_range

    settings = _settings(ctx)
    with _handled(), _open(settings) as ledger:
        span = parse_byte_range(byte_range, source="--bytes") if byte_range else None
        data = ledger.rehydrate(artifact, span, tenant_id=settings.tenant)
    if out is None or _is_stdout(out):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out.write_bytes(data)
        _err().print(f"{len(data):,} bytes written to {escape(str(out))}")


@app.command()
def demo(
    ctx: typer.Context,
    budget: Annotated[int, typer.Option("--budget", help="W: the context window to assemble for, in tokens.")] = 8_000,
    output: Annotated[int, typer.Option("--output", help="O: tokens reserved for the reply.")] = 1_000,
    margin: Annotated[int, typer.Option("--margin", help="M: safety margin in tokens.")] = 200,
    api: Annotated[ApiFormat, typer.Option("--format", help="Provider payload format.")] = ApiFormat.OPENAI_CHAT,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where to write the payload JSON (default: next to the demo store; '-': stdout, the report then "
            "goes to stderr).",
        ),
    ] = None,
) -> None:
    """Run the main job on a real agent trajectory bundled with ctxledger.

    Imports tau-bench airline task 2 (trial 1, gpt-4o: 35 messages, 27 tool calls and their 27
    results; MIT, Copyright (c) 2024 Sierra) into the demo's own SQLite store (or --db), assembles the
    agent's next model call for a BUDGET-token window, and prints: the budget, the budget ledger per
    context class, the included items with the stage and reason that admitted them, the omitted items
    with their reason codes, a preview of the provider payload (the full JSON is written to a file),
    the token saving against replaying the whole history, and how many required items were kept.

    Without --db the store is kept in one folder reused by every run, $CTXLEDGER_CACHE_DIR/demo
    (default ~/.cache/ctxledger/demo), so the explain commands the demo prints keep working; the demo
    prints that folder and how to remove it.

    Example: [bold]ctxledger demo --budget 8000 --format anthropic-messages[/bold]
    """
    from ctxledger.demo import DEMO_ATTRIBUTION, demo_dir, run_demo

    settings = _settings(ctx)
    folder = None if settings.db_given else demo_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    url = settings.db if folder is None else f"sqlite:///{folder / 'demo.db'}"
    to_stdout = _is_stdout(out)
    payload_path = None if to_stdout else out or (folder or Path(".ctxledger")) / "demo-payload.json"
    console = _err() if to_stdout else _out()
    with _handled(window_option="--budget"), Ledger.open(url) as ledger:
        result = run_demo(
            ledger,
            tenant_id=settings.tenant,
            window_tokens=budget,
            output_tokens=output,
            margin_tokens=margin,
            api=api.value,
            payload_path=payload_path,
        )
        records = _records(ledger, settings, result.conversation_id)
    if to_stdout:
        typer.echo(json.dumps(result.assembly.payload, indent=2, ensure_ascii=False))
    _print_demo(console, result, records, url, DEMO_ATTRIBUTION, kept_in=folder)


def _rule(console: Console, title: str) -> None:
    console.rule(f"[bold]{title}[/]", align="left")


def _print_demo(
    console: Console,
    result: Any,
    records: Mapping[str, Record],
    url: str,
    attribution: str,
    kept_in: Path | None = None,
) -> None:
    m = result.assembly.manifest
    h = result.history
    _rule(console, "1. The trajectory")
    verb = "imported" if result.imported else "already in the store:"
    console.print(
        f"{verb} {attribution}\nas [bold]{result.conversation_id}[/] into {escape(url)}:\n"
        f"{h.get('message', 0)} messages, {h.get('tool_call', 0)} tool calls and their {h.get('tool_artifact', 0)} "
        "raw results (stored whole, named by sha256).\n"
        "The run hit tau-bench's 30-step limit right after a tool result, with the agent still at work,\n"
        "so the model call it would make next never happened. That is the call assembled here."
    )
    _rule(console, "2. The budget")
    console.print(_budget_table(m))
    console.print(_class_table(m))
    _rule(console, "3. What the model sees, and why")
    console.print(_included_table(m, records, console))
    _rule(console, "4. What it does not see, and why")
    console.print(
        _omitted_table(m, records, console) if m["omitted"] else "nothing omitted: the whole history fits this budget."
    )
    _rule(console, "5. The provider payload")
    console.print(_payload_table(m["payload"], console))
    if result.payload_path:
        size, where = result.payload_path.stat().st_size, escape(str(result.payload_path))
    else:
        size = len((json.dumps(m["payload"], indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        where = "stdout"
    console.print(
        f"full {m['api']} request body ({size:,} bytes, {m['payload_hash'][:23]}…) written to {where}", soft_wrap=True
    )
    _rule(console, "6. Tokens against replaying the whole history")
    for line in _saving_lines(m):
        console.print(line)
    req = result.required
    colour = "green" if not req.lost else "red"
    kinds = ", ".join(dict.fromkeys(d["reason"] for d in m["decisions"] if d["outcome"] == "require"))
    console.print(f"[bold {colour}]required items kept: {len(req.kept)}/{len(req.required)}[/] ({kinds})")
    _rule(console, "Next")
    prefix = escape(f"ctxledger --db {url}")
    omitted = next((e["ref"] for e in m["omitted"]), None)
    steps = [("# the whole manifest", f"{prefix} explain {m['id']}")]
    if omitted:
        short = _short(omitted, m["conversation_id"])
        steps.append(("# why one item was left out", f"{prefix} explain {m['id']} {short}"))
    steps.append(("# a bigger window", f"{prefix} assemble {result.conversation_id} --window 16000 --out payload.json"))
    if kept_in is not None:
        note = f"# the demo store stays in {kept_in} for these commands (the next demo reuses it); to remove it"
        steps.append((note, escape(f"rm -r {kept_in}")))
    for comment, command in steps:
        console.print(f"[dim]{escape(comment)}[/]", soft_wrap=True)
        console.print(command, soft_wrap=True)


# -- evaluation (issue 5) -----------------------------------------------------------------------------

eval_app = typer.Typer(
    help=(
        "Evaluate context selection on real data: ctxledger's default policy beside baselines and peer "
        "libraries, the seed scenarios and the failure cases.\n\n"
        "Example: [bold]ctxledger eval run --dataset locomo --budget 2000 --budget 8000 --out eval-report[/bold]"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(eval_app, name="eval")

DATA_DIR_DEFAULT = Path("../shared/data")
"""Where ``eval run`` looks for the datasets unless told (``--data-dir`` or ``CTXLEDGER_DATA_DIR``)."""
CASES_DIR_DEFAULT = Path("../shared/cases")
"""Where ``eval cases`` looks for the failure cases unless told (``--cases-dir`` or ``CTXLEDGER_CASES_DIR``)."""


def _default_selectors() -> list[str]:
    """Ours, every baseline, and the peers whose libraries are installed (the ``bench`` extra)."""
    import importlib.util

    from ctxledger.eval.harness import BASELINE_NAMES, OURS

    needs = {"langchain-trim-exact": "langchain_core", "langchain-trim-approx": "langchain_core"}
    needs["llamaindex-memory"] = "llama_index.core"
    peers = [name for name, module in needs.items() if _installed(module, importlib.util.find_spec)]
    return [OURS, *BASELINE_NAMES, *peers]


def _installed(module: str, find_spec: Any) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _existing_dir(path: Path, what: str, option: str) -> Path:
    if not path.is_dir():
        raise InputError(f"{what} folder not found; pass {option}", source=str(path))
    return path


def _dataset_list(names: Sequence[str]) -> list[str | Path]:
    """Dataset names, ``all``, or paths of dataset files or folders (kept as paths)."""
    from ctxledger.eval.datasets import dataset_names

    known = dataset_names()
    chosen: list[str | Path] = []
    for name in dict.fromkeys(names):
        if name == "all":
            chosen += [k for k in known if k not in chosen]
        elif name in known or Path(name).exists():
            chosen.append(name if name in known else Path(name))
        else:
            raise ConfigurationError(
                f"unknown dataset {name!r} (neither a name nor an existing path); known: {', '.join(known)} "
                "(or all, or a dataset file or folder)"
            )
    return chosen


def _goals_table(goals: Sequence[Any]) -> Table:
    table = Table(title="Goals (issue 5 item 8)", title_justify="left")
    table.add_column("goal")
    table.add_column("measured")
    table.add_column("result")
    marks = {True: "[green]met[/]", False: "[red]not met[/]", None: "[dim]not checked[/]"}
    for g in goals:
        table.add_row(escape(g.goal), escape(g.measured), marks[g.met])
    return table


def _headline_table(results: Any) -> Table:
    table = Table(title="Headline per dataset, selector and budget", title_justify="left")
    for name, justify in (("dataset", "left"), ("selector", "left"), ("budget", "right"), ("recall", "right"),
                          ("tokens/replay", "right"), ("violations", "right"), ("overflow", "right"),
                          ("p50 ms", "right")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for a in results.aggregates:
        ratio = a["replay_ratio"]
        table.add_row(
            a["dataset"], a["selector"], f"{a['budget']:,}", _num(a["recall"]), _num(ratio), str(a["violations"]),
            _num(a["overflow_rate"]), _num(a["latency_ms"]["p50"], 2),
        )  # fmt: skip
    return table


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _cases_table(outcomes: Sequence[Any]) -> Table:
    table = Table(title="Failure cases (shared/cases) under the default policy", title_justify="left")
    table.add_column("case")
    table.add_column("kind")
    table.add_column("what went wrong in the original library")
    table.add_column("input tok", justify="right")
    table.add_column("result")
    for c in outcomes:
        result = "[green]pass[/]" if c.passed else "[red]FAIL[/] " + escape("; ".join(c.failures))
        tokens = "refused" if c.input_tokens is None else f"{c.input_tokens:,}"
        table.add_row(c.case_id, escape(c.kind), escape(c.title), tokens, result)
    return table


def _run_checks(cases_dir: Path) -> tuple[list[Any], list[Any]]:
    """Run the seed scenarios and (when the folder exists) the failure cases."""
    from ctxledger.eval.cases import run_cases
    from ctxledger.scenarios import run_scenarios

    cases = run_cases(cases_dir) if cases_dir.is_dir() else []
    return run_scenarios(), cases


@eval_app.command("run")
def eval_run(
    dataset: Annotated[
        list[str],
        typer.Option(
            "--dataset",
            "-d",
            help="Dataset to evaluate (repeatable): locomo, bfcl-memory, tau-bench, "
            "mini-swe-agent, swe-agent, toolbench, all, or the path of a dataset file or folder as its "
            "owners publish it (e.g. the upstream locomo10.json, a tau-bench results file under any name).",
            show_default=False,
        ),
    ],
    selector: Annotated[
        list[str] | None,
        typer.Option(
            "--selector",
            "-s",
            help="Selector (repeatable): ctxledger-default, full-replay, newest-fit, "
            "head-tail, bm25, langchain-trim-exact, langchain-trim-approx, llamaindex-memory. "
            "Default: ours, every baseline and the installed peers.",
        ),
    ] = None,
    budget: Annotated[
        list[int] | None,
        typer.Option(
            "--budget",
            "-b",
            help="Input budget in tokens (repeatable). Default: 1000 2000 4000 8000 "
            "for evidence datasets, 4000 8000 16000 for trajectories.",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Report folder: report.md, results.json, rows.jsonl and PNG plots (a folder, never '-')."
        ),
    ] = Path("eval-report"),
    data_dir: Annotated[
        Path, typer.Option("--data-dir", envvar="CTXLEDGER_DATA_DIR", help="Folder holding the datasets.")
    ] = DATA_DIR_DEFAULT,
    cases_dir: Annotated[
        Path, typer.Option("--cases-dir", envvar="CTXLEDGER_CASES_DIR", help="Folder holding the failure cases.")
    ] = CASES_DIR_DEFAULT,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Read only this many source records per dataset.")
    ] = None,
    max_cases: Annotated[
        int | None, typer.Option("--max-cases", help="Keep only the first N cases of each dataset (a smoke slice).")
    ] = None,
    step_stride: Annotated[
        int, typer.Option("--step-stride", help="Trajectories: evaluate every N-th model call.")
    ] = 1,
    determinism_every: Annotated[
        int, typer.Option("--determinism-every", help="Re-run every N-th case to compare payload hashes (0: never).")
    ] = 10,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots (needs matplotlib).")] = True,
    checks: Annotated[
        bool, typer.Option("--checks/--no-checks", help="Also run the seed scenarios and failure cases (pass/fail).")
    ] = True,
) -> None:
    """Run every selector on the same real cases and budgets, and write one report of the same run.

    Each selector (ctxledger's default policy, the baselines, the peers) gets the same calls; the
    harness judges each answer itself: evidence recall per question category, tokens against full
    history replay, recovery state kept, provider-rule violations, budget overflows under the exact
    cl100k counter, latency and determinism. The report (Markdown, JSON, per-call rows, PNG plots) also
    checks the goals of issue 5 and, with --checks, lists the seed scenarios and the failure cases as
    pass/fail. A progress bar shows the calls done.

    Example:
    [bold]ctxledger eval run -d locomo -d tau-bench -s ctxledger-default -s bm25 -b 2000 -b 8000 --out rep[/bold]
    """
    from ctxledger.eval.goals import checks_markdown, goal_checks
    from ctxledger.eval.harness import rich_progress, run_named
    from ctxledger.eval.ours import register

    console = _out()
    with _handled():
        if _is_stdout(out):
            raise ConfigurationError(
                "--out - (stdout) cannot hold the report's files (report.md, results.json, rows.jsonl, plots); "
                "pass a folder, e.g. --out eval-report"
            )
        if plots:
            from ctxledger.eval.report import check_plotting

            check_plotting()  # before hours of calls, not after
        names = _dataset_list(dataset)
        register()
        root = _existing_dir(data_dir, "dataset", "--data-dir")
        started = time.perf_counter()
        with rich_progress() as progress:
            results = run_named(
                names, selector or _default_selectors(), budget or None, out, data_dir=root, limit=limit,
                max_cases=max_cases, step_stride=step_stride, progress=progress,
                determinism_every=determinism_every, plots=plots,
            )  # fmt: skip
        scenarios, cases = _run_checks(cases_dir) if checks else ([], [])
        goals = goal_checks(results.aggregates)
        report = out / "report.md"
        report.write_text(report.read_text(encoding="utf-8") + "\n" + checks_markdown(goals, scenarios, cases))
    console.print(_headline_table(results))
    console.print(_goals_table(goals))
    if checks:
        passed = sum(r.passed for r in scenarios) + sum(c.passed for c in cases)
        console.print(f"seed scenarios and failure cases: {passed}/{len(scenarios) + len(cases)} pass")
    console.print(f"report written to {escape(str(report))} in {time.perf_counter() - started:.0f} s", soft_wrap=True)


@eval_app.command("scenarios")
def eval_scenarios(
    name: Annotated[
        list[str] | None, typer.Option("--name", help="Run only this scenario (repeatable); default all.")
    ] = None,
) -> None:
    """Run the seed scenario suite (seed 004 §9, seed 002, seed 001) and print it as a pass/fail table.

    Each scenario builds a deterministic execution graph, assembles its model call under the default
    policy (or the scenario's own), checks what was included, omitted and why, and compares the tokens
    with a full history replay. Exits with code 1 when a scenario fails.

    Example: [bold]ctxledger eval scenarios --name branch-isolation[/bold]
    """
    from ctxledger.scenarios import run_scenarios
    from ctxledger.scenarios.catalog import SCENARIOS

    known = [s.name for s in SCENARIOS]
    unknown = [n for n in name or () if n not in known]
    if unknown:
        _err().print(f"[red]error:[/] unknown scenario {escape(unknown[0])!r}; known: {', '.join(known)}")
        raise typer.Exit(2)
    with _handled():
        results = run_scenarios(name or None, out=sys.stdout)
    if not all(r.passed for r in results):
        raise typer.Exit(1)


@eval_app.command("cases")
def eval_cases(
    cases_dir: Annotated[
        Path, typer.Option("--cases-dir", envvar="CTXLEDGER_CASES_DIR", help="Folder holding the B*.json cases.")
    ] = CASES_DIR_DEFAULT,
) -> None:
    """Run every failure case from real bug reports (shared/cases) and print a pass/fail table.

    Each case is a small history that made an existing agent library send a wrong or invalid request;
    it is imported into a fresh in-memory ledger, assembled under the default policy with the case's
    reference token costs, and every expectation of the case is checked (tool pairs, system prompt,
    tool schemas in the budget, cross-user memories, summaries that drop constraints …). Exits with
    code 1 when a case fails.

    Example: [bold]ctxledger eval cases --cases-dir ../shared/cases[/bold]
    """
    from ctxledger.eval.cases import run_cases

    with _handled():
        outcomes = run_cases(_existing_dir(cases_dir, "failure-case", "--cases-dir"))
    console = _out()
    console.print(_cases_table(outcomes))
    console.print(f"{sum(c.passed for c in outcomes)}/{len(outcomes)} cases pass")
    if not all(c.passed for c in outcomes):
        raise typer.Exit(1)


def run() -> None:
    """Entry point for ``python -m ctxledger.cli``."""
    app()


if __name__ == "__main__":  # pragma: no cover
    run()
