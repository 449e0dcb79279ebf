"""``ctxledger retain``, ``forget`` and ``retention-audit``: what is kept, for how long, and in what form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.table import Table

from ctxledger.cli._app import app
from ctxledger.cli._common import AllowStageModules, _err, _handled, _open, _out, _settings, iso_time
from ctxledger.cli._escape import escape
from ctxledger.cli._numbers import int_option
from ctxledger.errors import InputError


def _report_table(report: Any) -> Table:
    verb = "would" if report.dry_run else "did"
    table = Table(title=f"retention ({verb}, at {report.now.isoformat(timespec='seconds')})")
    for column in ("rule", "action", "records/assemblies"):
        table.add_column(column)
    for rule, counts in sorted(report.by_rule.items()):
        for action, n in sorted(counts.items()):
            table.add_row(escape(rule), action, str(n))
    return table


def _print(report: Any, as_json: bool, nothing: str) -> None:
    """The report as a table by rule (or JSON); ``nothing`` is printed when it did or would do nothing."""
    if as_json:
        _out().print_json(json.dumps(report.as_dict()))
        return
    if not report.by_rule:
        _out().print(nothing)
        return
    _out().print(_report_table(report))
    if report.dry_run:
        _out().print("dry run: nothing was changed")
    else:
        _out().print(f"{report.batches} transaction(s); {len(report.blobs_deleted)} blob(s) removed")


@app.command()
def retain(
    ctx: typer.Context,
    policy_file: Annotated[
        Path,
        typer.Option(
            "--policy", help="The policy file whose \\[retention] rules to apply (TOML, or YAML).", show_default=False
        ),
    ],
    allow_stage_modules: AllowStageModules = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be done, by rule; change nothing.")
    ] = False,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="The clock ages are measured at, ISO 8601 (a time without an offset is read as UTC); default now.",
        ),
    ] = None,
    batch_size: Annotated[int, int_option("--batch-size", minimum=1, help="Records per transaction.")] = 200,
    tenant_only: Annotated[
        bool, typer.Option("--tenant-only", help="Only the --tenant tenant (default: every tenant of the store).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report (every action) as JSON.")] = False,
) -> None:
    r"""Apply the policy's retention rules: keep, redact, reduce to a hash or delete records by age.

    Each rule names record kinds (message, tool_artifact, tool_memory), optionally privacy classes, an
    age in days and an action; assemblies are kept whole, then as their summary, then deleted
    (\[retention.assemblies]). Work is done in transactions of --batch-size records: a run that is
    killed leaves every batch whole or untouched, and running the command again finishes the rest.
    Every action goes to the audit trail (see [bold]retention-audit[/bold]); a blob is removed only when
    no record of any tenant references it.

    Example: [bold]ctxledger retain --policy policy.toml --dry-run[/bold]
    """
    settings = _settings(ctx)
    with _handled():
        from ctxledger.policy.loader import load_policy

        policy = load_policy(policy_file, allow_modules=allow_stage_modules or ())
        if policy.retention.empty:
            raise InputError(
                "the policy has no [retention] rules; add [[retention.rules]] or [retention.assemblies]",
                source=str(policy_file),
                field="retention",
            )
        clock = iso_time(now, "--now") if now is not None else None
        with (
            _open(settings) as ledger,
            Progress(SpinnerColumn(), TextColumn("{task.description}"), console=_err(), transient=True) as progress,
        ):
            task = progress.add_task("scanning records", total=None)
            report = ledger.retain(
                policy=policy,
                now=clock,
                tenant_id=settings.tenant if tenant_only else None,
                dry_run=dry_run,
                batch_size=batch_size,
                on_progress=lambda n: progress.update(task, description=f"{n} records scanned"),
            )
    _print(report, as_json, "nothing to do: no record or assembly is old enough for any rule")


@app.command()
def forget(
    ctx: typer.Context,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Forget this conversation (all of it).")
    ] = None,
    participant: Annotated[
        str | None,
        typer.Option("--participant", help="Forget this participant's records in every conversation of the tenant."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Really remove (without it, only print what would go).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report (every record) as JSON.")] = False,
) -> None:
    """Remove a conversation or a participant's data (a request to be forgotten), keeping the audit trail.

    Its records go, with the memories derived only from them, the assemblies that showed them and the
    blobs no record of any tenant references any more; the audit trail records each removal under the
    rule [bold]forget[/bold]. Without --yes nothing is removed: the command prints what would go.

    Example: [bold]ctxledger --tenant acme forget --conversation chat-7 --yes[/bold]
    """
    settings = _settings(ctx)
    with _handled(settings=settings):
        if (conversation is None) == (participant is None):
            raise InputError(
                "give --conversation ID or --participant ID" + (", not both" if conversation is not None else ""),
                source="<command line>",
                field="--conversation",
            )
        with _open(settings) as ledger:
            report = ledger.forget(
                conversation_id=conversation, participant_id=participant, tenant_id=settings.tenant, dry_run=not yes
            )
    whose = f"conversation {conversation!r}" if conversation is not None else f"participant {participant!r}"
    _print(report, as_json, f"nothing to forget: no record of {escape(whose)} in tenant {escape(settings.tenant)!r}")
    if not yes and report.by_rule and not as_json:
        _out().print("pass --yes to remove them")


@app.command("retention-audit")
def retention_audit(
    ctx: typer.Context,
    ref: Annotated[str | None, typer.Option("--ref", help="Only this record or assembly id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """The tenant's retention audit trail: what each rule redacted, hashed, summarised or deleted, and when.

    Each row names the rule, the record (or assembly), the time and the sha256 of its content before and
    after; rows outlive the records they describe.

    Example: [bold]ctxledger retention-audit --ref chat-1/7[/bold]
    """
    settings = _settings(ctx)
    with _handled(), _open(settings) as ledger:
        rows = ledger.retention_audit(tenant_id=settings.tenant, ref=ref)
    if as_json:
        keys = ("target", "ref", "kind", "rule", "action", "before_sha256", "after_sha256", "detail")
        data = [{"at": r.at.isoformat(), **{k: getattr(r, k) for k in keys}} for r in rows]
        _out().print_json(json.dumps(data))
        return
    if not rows:
        of = f" of --ref {escape(ref)}" if ref is not None else ""
        _out().print(f"no retention audit rows{of} in tenant {escape(settings.tenant)!r}")
        return
    table = Table(title=f"retention audit of tenant {escape(settings.tenant)}")
    for column in ("at", "rule", "action", "target", "ref", "before sha256", "after sha256"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r.at.isoformat(timespec="seconds"),
            escape(r.rule),
            r.action,
            r.target,
            escape(r.ref),
            (r.before_sha256 or "")[:12],
            (r.after_sha256 or "")[:12],
        )
    _out().print(table)
