"""``ctxledger import``: agent transcripts and trajectories into the execution graph."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxledger.cli._app import app
from ctxledger.cli._common import COUNTER_HELP, _coster, _err, _handled, _open, _out, _settings, iso_time
from ctxledger.cli._escape import escape
from ctxledger.conversation_ids import conflict, nfc
from ctxledger.errors import FormatNotRecognised, InputError, NothingToImport
from ctxledger.ledger import Ledger
from ctxledger.records import Conversation, Kind
from ctxledger.store._rules import get_or_none

IMPORT_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
"""Files a directory import picks up (others, such as READMEs, are skipped)."""

LARGE_INPUT_BYTES = 1 << 20
"""Files at least this large (bytes) get a progress bar while they are parsed."""


class ImportFormat(StrEnum):
    """Import formats (``auto`` tells them apart by content)."""

    AUTO = "auto"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    ANTHROPIC_MESSAGES = "anthropic-messages"
    TAU_BENCH = "tau-bench"
    MINI_SWE_AGENT = "mini-swe-agent"
    SWE_AGENT = "swe-agent"
    TOOLBENCH = "toolbench"
    LOCOMO = "locomo"
    BFCL_MEMORY = "bfcl-memory"


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
    return nfc("/".join([*rel.parent.parts, stem_of(rel)]))


def _conversation_id(given: str | None, from_dir: str | None) -> str | None:
    """``--conversation-id`` (an empty one stays empty and is refused), prefixed to a directory file's path."""
    if given is not None and from_dir:
        return f"{given}/{from_dir}"
    return given if given is not None else from_dir


def _parse_all(
    files: Sequence[tuple[Path, str | None]],
    fmt: str,
    tenant: str,
    given: str | None,
    roots: Sequence[Path] = (),
    start_time: datetime | None = None,
) -> list[Any]:
    """Parse every file; in a directory (``rel`` set), files whose format cannot be told are skipped.

    Skipped files are listed in warnings on stderr, apart by why: a file that holds no transcript at all (a
    function schema, a package.json: :func:`~ctxledger.cli._transcripts.looks_like_transcript`) is skipped as
    not a transcript; only a transcript whose format cannot be told is pointed at --format. A file named on the
    command line whose format cannot be told is an error naming --format; so is a directory import where no
    file was imported and some are such transcripts (naming the directories, ``roots``); one where no file
    holds a transcript at all is an error saying so.

    Raises:
        InputError: bad input (names file, record and field), or nothing imported as above.
    """
    from ctxledger.ingest import parse_file, rich_progress

    batches, skipped, empty = [], [], []
    plain = plain_progress(_err())
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_err(), transient=True, disable=len(files) < 2) as progress:
        task = progress.add_task("files", total=len(files))
        for path, rel in files:
            cid = _conversation_id(given, rel)
            try:
                if path.stat().st_size >= LARGE_INPUT_BYTES and len(files) == 1:
                    with rich_progress(f"parsing {path.name}", console=_err()) as on_progress:
                        batches.append(
                            parse_file(
                                path,
                                fmt,
                                tenant_id=tenant,
                                conversation_id=cid,
                                on_progress=_with_lines(on_progress, f"parsing {path.name}"),
                                start_time=start_time,
                            )
                        )
                else:
                    batches.append(parse_file(path, fmt, tenant_id=tenant, conversation_id=cid, start_time=start_time))
            except FormatNotRecognised as exc:
                if rel is None:
                    raise _unrecognised(exc.source, exc.formats, "cannot tell the format of this file") from None
                skipped.append((path, exc))
            except NothingToImport as exc:
                if rel is None:
                    raise
                empty.append(exc)
            progress.advance(task)
            plain("parsed", len(batches) + len(skipped) + len(empty), len(files))
    unknown, not_transcripts = _sort_skipped(skipped)
    _warn("with nothing to import", [f"{e.source}: {e.problem}" for e in empty])
    _warn("that are not transcripts (no messages, conversation or trajectory in them)", not_transcripts)
    _warn("that look like transcripts in a format that could not be told (import them with --format)", unknown)
    if batches:
        return batches
    where = ", ".join(map(str, roots))
    if unknown:
        problem = f"the format of none of the {len(unknown)} transcript(s) could be told ({', '.join(unknown)})"
        raise _unrecognised(where, skipped[0][1].formats, problem)
    raise InputError(f"none of the {len(files)} files holds a conversation", source=where)


def _sort_skipped(skipped: Sequence[tuple[Path, FormatNotRecognised]]) -> tuple[list[str], list[str]]:
    """The sources of skipped files that look like transcripts, and of those that hold none."""
    from ctxledger.cli._transcripts import looks_like_transcript
    from ctxledger.ingest._load import load_file

    unknown, not_transcripts = [], []
    for path, exc in skipped:
        (unknown if looks_like_transcript(load_file(path, exc.source).value) else not_transcripts).append(exc.source)
    return unknown, not_transcripts


def _warn(why: str, sources: Sequence[str]) -> None:
    """One warning on stderr listing the ``sources`` of a directory import skipped for the reason ``why``."""
    if sources:
        names = "\n".join(f"  {escape(s)}" for s in sources)
        _err().print(f"[yellow]warning:[/] skipped {len(sources)} file(s) {escape(why)}:\n{names}", soft_wrap=True)


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
    start_time: Annotated[
        str | None,
        typer.Option(
            "--start-time",
            help="The time of records that carry no timestamp (OpenAI and Anthropic messages carry none), each one "
            "second after the one before: 'now', or ISO 8601 (a time without offset is UTC). Default: "
            "2024-01-01T00:00:00Z, so importing the same file twice gives the same records; pass 'now' when "
            "retention rules by age (after_days) should count from the import.",
            show_default=False,
        ),
    ] = None,
    skip_imported: Annotated[
        bool,
        typer.Option(
            "--skip-imported",
            help="Skip conversations already stored with exactly these record ids (to finish an interrupted "
            "import of a folder); one stored with other records is still refused.",
        ),
    ] = False,
) -> None:
    """Import agent transcripts or trajectories into the execution graph.

    Formats: OpenAI Chat Completions and Anthropic Messages transcripts (JSON or JSONL), tau-bench,
    mini-swe-agent, SWE-agent .traj, ToolBench, LoCoMo and BFCL memory files. Every input is parsed
    and validated [italic]before[/italic] anything is written: bad input prints the file, record index
    and field at fault, exits with code 2 and writes nothing. Importing the same source twice is
    refused (ids are deterministic). In a directory each file's conversation id is its relative path
    without the suffix (stems collide across folders); files there whose format cannot be told are
    skipped with a warning that lists them: as not transcripts (a package.json, say), or, for files that
    look like transcripts, with a pointer to --format. A directory where no file is imported is an
    error. Each file is written in one transaction, so an interrupted import leaves whole files written
    and the rest not: run it again with --skip-imported to write the rest.

    Example: [bold]ctxledger import ../shared/data/tau-bench/gpt-4o-airline_tasks0-39.json[/bold]
    """
    settings = _settings(ctx)
    with _handled():
        import ctxledger.ingest  # noqa: F401  (loaded before the clock starts: the rate times the import itself)

        start = time.perf_counter()
        batches = _parse_all(
            _input_files(paths),
            fmt.value,
            settings.tenant,
            conversation_id,
            roots=paths,
            start_time=_start_time(start_time),
        )
        parsing = time.perf_counter() - start
        with _open(settings, create=True) as ledger:
            coster = _coster(ledger, "openai-chat", count_tokens_for, counter) if count_tokens_for else None
            if skip_imported:
                batches = _without_imported(ledger, batches)
            start = time.perf_counter()  # the store opened and the tokenizer loaded: not part of the rate
            try:
                results = _write_all(ledger, batches, coster, resumable=len(batches) > 1, given=conversation_id)
            except KeyboardInterrupt:
                _err().print(
                    "interrupted: the files written before stay whole, the one being written is not in the store; "
                    "run the same command with --skip-imported to write the rest",
                    soft_wrap=True,
                )
                raise typer.Exit(130) from None
        elapsed = parsing + time.perf_counter() - start
    _out().print(_import_table(batches, results, elapsed))


def _start_time(text: str | None) -> datetime | None:
    """``--start-time``: ``None`` (the importer's fixed base), ``now``, or an ISO 8601 time (UTC when it has no offset).

    Raises:
        InputError: not ``now`` nor an ISO 8601 time (names ``--start-time``).
    """
    if text is None:
        return None
    if text.strip().lower() == "now":
        return datetime.now(UTC)
    return iso_time(text, "--start-time", "'now' nor an ISO 8601 time")


def _without_imported(ledger: Ledger, batches: Sequence[Any]) -> list[Any]:
    """``batches`` without the conversations the store already holds with the same record ids (warned about)."""
    kept, skipped = [], []
    for batch in batches:
        fresh = []
        for conv in batch.conversations:
            (skipped if _stored_alike(ledger, conv) else fresh).append(conv)
        if fresh:
            kept.append(dataclasses.replace(batch, conversations=fresh))
    if skipped:
        shown = ", ".join(c.conversation_id for c in skipped[:5]) + (", …" if len(skipped) > 5 else "")
        _err().print(f"skipped {len(skipped)} conversation(s) already imported: {shown}", markup=False, soft_wrap=True)
    if not kept:
        _err().print("nothing left to import: every conversation of the input is stored already", soft_wrap=True)
    return kept


def _stored_alike(ledger: Ledger, conv: Any) -> bool:
    """Whether the store holds ``conv`` already: its conversation record, and exactly its record ids in order."""
    tenant = conv.records[0].tenant_id
    if not isinstance(get_or_none(ledger.store, tenant, conv.conversation_id), Conversation):
        return False
    stored = [r.id for r in ledger.store.records(tenant, conv.conversation_id) if r.kind is not Kind.CONVERSATION]
    return stored == [r.id for r in conv.records if r.kind is not Kind.CONVERSATION]


def _write_all(
    ledger: Ledger, batches: Sequence[Any], coster: Any | None, *, resumable: bool = False, given: str | None = None
) -> list[Any]:
    """Refuse duplicate or already stored conversation ids across all batches, then write each batch.

    Checking every id first means a re-import refuses the whole set before anything is written. Each
    batch is then one transaction (:func:`ctxledger.ingest.write_batch`); token counts of its turns are
    computed with ``coster`` and cached (``None`` skips), so the first assembly is warm.

    Raises:
        InputError: a conversation id is already stored or comes from two inputs (names the file).
    """
    from ctxledger.ingest import check_batch, write_batch

    _refuse_duplicates(ledger, batches, resumable=resumable, given=given)
    results = []
    plain = plain_progress(_err())
    for batch in batches:
        if coster is not None:  # counted before the write: a count that fails leaves the batch unwritten
            check_batch(ledger.store, batch)
            ledger.warm_counts(batch, coster)
        results.append(write_batch(ledger.store, batch))
        plain("written", len(results), len(batches))
    return results


def _with_lines(on_progress: Callable[[int, int], None], what: str) -> Callable[[int, int], None]:
    """``on_progress`` (a bar's), also printing :func:`plain_progress` lines of records when stderr is no terminal."""
    lines = plain_progress(_err(), unit="records")

    def both(done: int, total: int) -> None:
        on_progress(done, total)
        lines(what, done, total)

    return both


PROGRESS_EVERY_SECONDS = 10.0
"""How often an import on no terminal (a log, CI) prints a progress line, at most."""


def plain_progress(
    console: Any, every_seconds: float = PROGRESS_EVERY_SECONDS, unit: str = "files"
) -> Callable[[str, int, int], None]:
    """A progress callback ``(what, done, total)`` for a console that is no terminal (else it does nothing).

    It prints ``import: <what> <done>/<total> <unit> (<pct>%), <s> s`` at the first call, then at most every
    ``every_seconds``, and at the last one, so a long import in a log is never silent (the bars show only on
    a terminal).
    """
    if console.is_terminal:
        return lambda what, done, total: None
    started = time.perf_counter()
    last = [float("-inf")]

    def update(what: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if total < 2 or (now - last[0] < every_seconds and done != total):
            return
        last[0] = now
        share = f"{100 * done / total:.0f}%"
        console.print(f"import: {what} {done:,}/{total:,} {unit} ({share}), {now - started:.0f} s", highlight=False)

    return update


def _refuse_duplicates(
    ledger: Ledger, batches: Sequence[Any], *, resumable: bool = False, given: str | None = None
) -> None:
    """Raise on a conversation id given twice or already stored; ``resumable``: the hint names --skip-imported.

    ``given``: the ``--conversation-id`` value the ids come from, named as what is at fault.
    """
    seen: dict[str, str] = {}
    for batch in batches:
        for conv in batch.conversations:
            cid, tenant = conv.conversation_id, conv.records[0].tenant_id
            if cid in seen:
                problem = f"conversation {cid!r} also comes from {seen[cid]}; give the inputs distinct ids"
                raise InputError(problem, source=batch.source, field="conversation_id")
            nested = next((c for c in seen if c.startswith(cid + "/") or cid.startswith(c + "/")), None)
            if nested is not None:
                raise InputError(
                    f"conversation {cid!r} and conversation {nested!r} (from {seen[nested]}) of this import would "
                    "nest (the records of a conversation are named <conversation>/<name>; conversation ids in one "
                    "tenant never nest); nothing was written: rename one of the two files, or import one of them "
                    "on its own with --conversation-id",
                    source=batch.source,
                    field="conversation_id",
                )
            problem = conflict(ledger.store, tenant, cid)
            if problem is not None:
                hint = _conflict_hint(ledger, tenant, cid, resumable=resumable, given=given)
                raise InputError(f"{problem}; {hint}", source=batch.source, field="conversation_id")
            seen[cid] = batch.source


def _conflict_hint(ledger: Ledger, tenant: str, cid: str, *, resumable: bool, given: str | None) -> str:
    """The remedy for a conversation id that clashes with the store: --skip-imported only for a re-import."""
    if given is not None:
        return f"so the --conversation-id given ({given!r}) cannot be used: choose an id no conversation or record has"
    hint = "pass --conversation-id to import it under another id"
    if resumable and isinstance(get_or_none(ledger.store, tenant, cid), Conversation):
        hint = f"pass --skip-imported to write only what is not stored yet, or {hint.removeprefix('pass ')}"
    return hint


def _display_names(sources: Sequence[str]) -> tuple[str | None, list[str]]:
    """The folder several imported files share, and each file's path below it.

    ``None`` and the paths as given when there is one file or no shared folder. The table names the folder once,
    so that the rows of one folder differ in what they show instead of all starting with the same cut prefix.
    """
    if len(sources) < 2:
        return None, list(sources)
    try:
        root = os.path.commonpath([os.path.dirname(s) for s in sources])
    except ValueError:
        return None, list(sources)
    if not root or not all(s.startswith(root + os.sep) for s in sources):
        return None, list(sources)
    return root, [s[len(root) + 1 :] for s in sources]


def _import_table(batches: Sequence[Any], results: Sequence[Any], elapsed: float) -> Table:
    root, shown = _display_names([batch.source for batch in batches])
    title = "Imported" if root is None else f"Imported from {escape(root)}"
    table = Table(title=title, title_justify="left")
    for name in ("file", "format", "conversations", "messages", "tool calls", "artifacts", "records"):
        left = name in ("file", "format")
        table.add_column(name, justify="left" if left else "right", overflow="fold" if name == "file" else "ellipsis")
    totals = [0, 0, 0, 0, 0]
    for batch, result, file in zip(batches, results, shown, strict=True):
        row = [len(result.conversation_ids), result.messages, result.tool_calls, result.artifacts, len(result.records)]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        table.add_row(escape(file), batch.format, *(f"{n:,}" for n in row))
    if len(batches) > 1:
        table.add_row("total", "", *(f"{n:,}" for n in totals), style="bold")
    rate = totals[4] / elapsed if elapsed > 0 else 0.0
    table.caption = (
        f"{totals[4]:,} events in {elapsed:.2f} s ({rate:,.0f} events/s, parse + write + token counts; "
        "process start-up, opening the store and loading the tokenizer not counted)"
    )
    return table
