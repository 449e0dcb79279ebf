"""``ctxledger assemble``, ``explain`` and ``usage``: one model call's context, its manifest and its usage."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ctxledger.budget import DEFAULT_BUDGET
from ctxledger.cli._app import app
from ctxledger.cli._common import (
    COUNTER_HELP,
    AllowStageModules,
    ApiFormat,
    _check_out,
    _command_prefix,
    _coster,
    _err,
    _handled,
    _is_stdout,
    _open,
    _out,
    _records,
    _settings,
    iso_time,
)
from ctxledger.cli._escape import escape
from ctxledger.cli._numbers import int_option
from ctxledger.cli._render import (
    _class_table,
    _included_table,
    _omitted_table,
    _payload_table,
    _print_explanation,
    _print_manifest,
    _print_summary,
    _usage_line,
    unit_kind,
)
from ctxledger.errors import (
    InputError,
)
from ctxledger.manifest import has_full_trace
from ctxledger.records import Record
from ctxledger.replay_mismatch import replay_remedy
from ctxledger.serialize import default_model


class Show(StrEnum):
    """Extra sections ``assemble`` can print."""

    INCLUDED = "included"
    OMITTED = "omitted"
    CLASSES = "classes"
    PAYLOAD = "payload"
    WARNINGS = "warnings"
    ALL = "all"


class Trace(StrEnum):
    """What the stored manifest keeps (:data:`ctxledger.manifest.TRACES`)."""

    SUMMARY = "summary"
    FULL = "full"


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
        out["now"] = iso_time(now, "--now")
    return out


@app.command()
def assemble(
    ctx: typer.Context,
    conversation: Annotated[
        str, typer.Argument(help="Conversation id (see `ctxledger conversations`).", show_default=False)
    ],
    window: Annotated[
        int, int_option("--window", unit="tokens", help="W: the model's context window, in tokens.")
    ] = DEFAULT_BUDGET.window_tokens,
    output: Annotated[
        int, int_option("--output", unit="tokens", help="O: tokens reserved for the reply.")
    ] = DEFAULT_BUDGET.output_tokens,
    margin: Annotated[
        int, int_option("--margin", unit="tokens", help="M: safety margin in tokens (covers estimate error).")
    ] = DEFAULT_BUDGET.margin_tokens,
    api: Annotated[ApiFormat, typer.Option("--format", help="Provider payload format.")] = ApiFormat.OPENAI_CHAT,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Model name; also picks the tokenizer (claude-* counts are estimates). "
            "Default per --format: gpt-4o for OpenAI, claude-sonnet-4-5 for anthropic-messages.",
            show_default=False,
        ),
    ] = None,
    counter: Annotated[str | None, typer.Option("--counter", help=COUNTER_HELP, show_default=False)] = None,
    snapshot: Annotated[
        int | None,
        int_option("--snapshot", minimum=1, help="Assemble as of this seq (inclusive, from 1); default the head."),
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
        typer.Option(
            "--show",
            help="Also print: included, omitted, classes, payload, warnings (each split question/answer pair, "
            "counted on one line otherwise) or all (repeatable).",
        ),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="A policy file to assemble under instead of the default policy: TOML, or YAML (.yaml/.yml).",
        ),
    ] = None,
    allow_stage_modules: AllowStageModules = None,
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
        typer.Option(
            "--now",
            help="The call's clock for freshness, ISO 8601 (e.g. 2026-09-01T09:00Z; a time without an offset is "
            "read as UTC); default now.",
        ),
    ] = None,
    trace: Annotated[
        Trace,
        typer.Option(
            "--trace",
            help="What the stored manifest keeps: 'summary' (included items, omissions counted by reason and "
            "stage; explain replays the rest) or 'full' (every omitted record, decision and mark, and the payload).",
        ),
    ] = Trace.SUMMARY,
) -> None:
    """Assemble the context of the conversation's next model call under a token budget.

    The budget is B_input = W − O − M (window − output reserve − margin). Instructions, tool
    schemas, the latest user turn and the turn in progress are required; the rest of the history is
    chosen by utility until B_dynamic = B_input − F is spent. Tool calls enter with all their results
    or not at all. The manifest is persisted: pass the printed assembly id to [bold]explain[/bold].

    The payload JSON (the provider request body) goes to stdout, the report to stderr; with --out the
    payload goes to the file and the report to stdout (--out - keeps the payload on stdout). If the
    required blocks alone exceed B_input, they are listed with their tokens and the command exits with
    code 2.

    Example:
    [bold]ctxledger assemble tau-bench-airline-task2-trial1 --window 8000 --out payload.json --show omitted[/bold]
    """
    settings = _settings(ctx)
    out = None if _is_stdout(out) else out
    model = model or default_model(api.value)
    with _handled():
        if out is not None:
            _check_out(out, settings.db, settings.blobs)
    with _handled(settings=settings), _open(settings) as ledger:
        from ctxledger.policy.loader import load_policy

        extra: dict[str, Any] = {"provider": provider} if provider is not None else {}
        extra.update(_request_options(agent, call_type, phase, checks, exact_evidence, scope, source_version, now))
        asm = ledger.assemble(
            conversation,
            tenant_id=settings.tenant,
            policy=load_policy(policy_file, allow_modules=allow_stage_modules or ()) if policy_file else None,
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
            trace=trace.value,
        )
        records = _records(ledger, settings, conversation) if show else {}
    report = _out() if out is not None else _err()
    if out is not None:
        from ctxledger.demo import write_payload

        size = write_payload(asm.payload, out)
    else:
        typer.echo(json.dumps(asm.payload, indent=2, ensure_ascii=False))
    _print_summary(report, asm.manifest, every_warning=bool({Show.WARNINGS, Show.ALL} & set(show or ())))
    _print_sections(report, asm.manifest, records, set(show or ()))
    if out is not None:
        where = escape(str(out))
        report.print(f"payload ({size:,} bytes, hash {asm.payload_hash[:23]}…) written to {where}", soft_wrap=True)
    under = f" --policy {shlex.quote(str(policy_file))}" if policy_file else ""  # explain replays under it
    if policy_file:
        under += "".join(f" --allow-stage-module {shlex.quote(m)}" for m in allow_stage_modules or ())
    report.print(
        f"explain it: [bold]{escape(_command_prefix(settings))} explain {asm.id}{escape(under)}[/] [dim][REF][/]",
        soft_wrap=True,
    )  # on one line, to copy whole


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
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="The policy file the assembly was made under (assemble --policy): a summary manifest is "
            "explained by replaying the assembly under it.",
        ),
    ] = None,
    allow_stage_modules: AllowStageModules = None,
) -> None:
    """Explain an assembly: why the model saw each item, and why it did not see the others.

    Without REF: the budget and the budget ledger per context class, every included item (stage that
    admitted it, utility, tokens) and every omitted item (reason code and stage). With REF: the answer
    for that one record. A manifest stored as a summary (the default of assemble) is explained by
    replaying the assembly; if the replay is not the same call (code, policy or store changed), only
    the included items are explained and the command says why.

    Example: [bold]ctxledger explain asm_0123… tau-bench-airline-task2-trial1/12[/bold] (or just [bold]12[/bold])
    """
    settings = _settings(ctx)
    with _handled(), _open(settings) as ledger:
        from ctxledger.policy.loader import load_policy

        policy = load_policy(policy_file, allow_modules=allow_stage_modules or ()) if policy_file else None
        if ref is not None:
            tenant, source = settings.tenant, "ctxledger explain"
            why = ledger.explain_as(assembly_id, ref, tenant_id=tenant, policy=policy, source=source)
            stored = ledger.get_assembly(assembly_id, tenant_id=settings.tenant)
            _print_explanation(_out(), why, stored["conversation_id"], unit_kind(stored, why))
            return
        stored = ledger.get_assembly(assembly_id, tenant_id=settings.tenant)
        manifest, mismatch = (stored, None) if has_full_trace(stored) else ledger.replay(stored, policy=policy)
        if manifest is None:
            _err().print(
                f"[yellow]this manifest keeps a summary of what was left out, and replaying the assembly gave a "
                f"different call ({escape(str(mismatch))}): only the included items can be explained; "
                f"{escape(replay_remedy(mismatch))}[/]",
                soft_wrap=True,
            )
            manifest = stored
        _print_manifest(_out(), manifest, _records(ledger, settings, stored["conversation_id"]))


@app.command()
def usage(
    ctx: typer.Context,
    assembly_id: Annotated[str, typer.Argument(help="Assembly id the model call was made with.", show_default=False)],
    input_tokens: Annotated[
        int,
        int_option(
            "--input", unit="tokens", minimum=0, help="Input (prompt) tokens the provider reported.", show_default=False
        ),
    ],
    output_tokens: Annotated[
        int,
        int_option(
            "--output",
            unit="tokens",
            minimum=0,
            help="Output (completion) tokens the provider reported.",
            show_default=False,
        ),
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
