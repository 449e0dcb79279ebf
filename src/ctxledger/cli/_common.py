"""Plumbing every command shares: settings, consoles, error handling, opening the ledger."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ctxledger.cli._escape import escape
from ctxledger.cli._render import _required_table
from ctxledger.demo import demo_dir
from ctxledger.errors import (
    BudgetError,
    BudgetOutOfBounds,
    ConfigurationError,
    CtxledgerError,
    InputError,
    NoRoomForInput,
    NothingToSend,
    PolicyError,
    RecordNotFound,
    RequiredBlocksDoNotFit,
    StoreConnectionError,
)
from ctxledger.ledger import DEFAULT_URL, Ledger
from ctxledger.policy.message_redaction import redact_message
from ctxledger.records import Record

USER_ERRORS = (
    InputError,
    ConfigurationError,
    BudgetError,
    PolicyError,
    RecordNotFound,
    NothingToSend,
    StoreConnectionError,
)
"""Errors caused by what the user asked (a store URL that reaches no database included); they exit with code 2."""


def iso_time(text: str, option: str, expected: str = "an ISO 8601 time") -> datetime:
    """A time typed for ``option`` (ISO 8601, ``Z`` allowed; without an offset it is UTC), as an aware UTC datetime.

    Raises:
        InputError: ``text`` is not such a time (field ``option``; the message says ``expected``).
    """
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError as exc:
        raise InputError(f"not {expected}: {text!r}", source="<command line>", field=option) from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


ALLOW_STAGE_MODULE_HELP = (
    "A module the --policy file's \\[stage_classes] may import custom stages from (repeatable; its submodules "
    "too). A policy naming any other module is refused before anything is imported."
)
"""Help of ``--allow-stage-module``, the same for every command that loads a policy file."""

AllowStageModules = Annotated[list[str] | None, typer.Option("--allow-stage-module", help=ALLOW_STAGE_MODULE_HELP)]
"""The ``--allow-stage-module`` option of every command that loads a policy file (default ``None``)."""

COUNTER_HELP = (
    "Tokenizer to count with, for a model whose own is not known: o200k_base or cl100k_base (exact); "
    "tiktoken/NAME (exact, the reference implementation); estimate/quicktok/NAME or chars/4 (flagged as "
    "estimates). NAME is o200k_base or cl100k_base. Default: the model's own (OpenAI models; claude-* get a "
    "flagged o200k estimate)."
)
"""Help of every ``--counter`` option."""


class ApiFormat(StrEnum):
    """Provider payload formats."""

    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    ANTHROPIC_MESSAGES = "anthropic-messages"


@dataclass(frozen=True, slots=True)
class Settings:
    """Global options: the store URL, whether the user chose it, and the tenant."""

    db: str
    db_given: bool
    tenant: str
    blobs: str | None = None


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


def _store_paths(store_url: str, blobs: str | None) -> tuple[list[Path], Path | None]:
    """The files of a SQLite store (the database and its journal, WAL and shared-memory files) and its blob folder.

    Other backends keep nothing on this machine's disk under a known name: ``([], blobs folder or None)``.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    folder = Path(blobs).expanduser().resolve() if blobs and "://" not in blobs and blobs != "database" else None
    try:
        parsed = make_url(store_url)
    except ArgumentError:  # a malformed URL is reported when it is opened
        return [], folder
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return [], folder
    db = Path(parsed.database).expanduser().resolve()
    files = [db, *(Path(f"{db}{suffix}") for suffix in ("-journal", "-wal", "-shm"))]
    return files, folder if blobs else Path(f"{db}.blobs")


def _check_out(path: Path, store_url: str | None = None, blobs: str | None = None) -> None:
    """Refuse an ``--out`` file that cannot be written, before anything is assembled or stored.

    Args:
        path: the ``--out`` file.
        store_url: the command's store (``--db``), when it opens one: the payload must not overwrite its files.
        blobs: the command's ``--blobs`` location (default: the SQLite file's ``.blobs`` folder).

    Raises:
        ConfigurationError: ``path`` is a folder, or its folder does not exist (it is not created: a mistyped
            path should not become a new folder), or it is the store's database (or its journal) or lies in its
            blob folder: writing the payload there would destroy the history it was assembled from.
    """
    if store_url is not None:
        files, folder = _store_paths(store_url, blobs)
        target = path.expanduser().resolve()
        if target in files or (folder is not None and target.is_relative_to(folder)):
            raise ConfigurationError(
                f"--out {path}: is the store's own {'database' if target in files else 'blob folder'} "
                f"({store_url}); writing the payload there would destroy the store: give another file"
            )
    if path.is_dir():
        raise ConfigurationError(f"--out {path}: is a folder; give a file name (e.g. {path / 'payload.json'})")
    if not path.parent.is_dir():
        raise ConfigurationError(f"--out {path}: folder {path.parent} does not exist (create it first)")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigurationError(f"--out {path}: not writable")


def _command_prefix(settings: Settings) -> str:
    """``ctxledger`` with the ``--db``, ``--tenant`` and ``--blobs`` this command was given, shell-quoted.

    For the follow-up commands a command prints: a tenant other than ``default`` must be named, or the
    follow-up would read the default tenant.
    """
    parts = ["ctxledger"]
    if settings.db_given:
        parts += ["--db", settings.db]
    if settings.tenant != "default":
        parts += ["--tenant", settings.tenant]
    if settings.blobs:
        parts += ["--blobs", settings.blobs]
    return shlex.join(parts)


def _list_conversations(settings: Settings) -> str:
    """The command that lists the conversations of the store and tenant a command was given."""
    return f"{_command_prefix(settings)} conversations"


def _settings(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings(DEFAULT_URL, False, "default")


@contextmanager
def _handled(window_option: str = "--window", settings: Settings | None = None) -> Iterator[None]:
    """Turn ctxledger errors into one message and an exit code (2 for user errors, 1 otherwise).

    ``window_option`` is the command's option for W, named when the budget leaves no room for input or the
    required blocks do not fit. With the command's ``settings``, an unknown conversation is answered with the
    command that lists the conversations of that store and tenant; an unknown participant with the shape of a
    participant id.
    """
    names = {"window_tokens": window_option, "output_tokens": "--output", "margin_tokens": "--margin"}
    try:
        yield
    except (NoRoomForInput, BudgetOutOfBounds) as exc:
        _err().print(f"[red]error:[/] {escape(redact_message(exc.describe(names)))}")
        raise typer.Exit(2) from None
    except RequiredBlocksDoNotFit as exc:
        _err().print(_required_table(exc))
        _err().print(
            f"[red]error:[/] the required blocks need {exc.required_tokens} tokens but B_input is "
            f"{exc.budget_tokens}. Raise {window_option}, or lower --output / --margin."
        )
        raise typer.Exit(2) from None
    except RecordNotFound as exc:
        _err().print(f"[red]error:[/] {escape(redact_message(str(exc)) + _not_found_hint(exc, settings))}")
        raise typer.Exit(2) from None
    except USER_ERRORS as exc:
        _err().print(f"[red]error:[/] {escape(redact_message(str(exc)))}")
        raise typer.Exit(2) from None
    except CtxledgerError as exc:
        _err().print(f"[red]error ({type(exc).__name__}):[/] {escape(redact_message(str(exc)))}")
        raise typer.Exit(1) from None


def _not_found_hint(exc: RecordNotFound, settings: Settings | None) -> str:
    """What to try after an unknown id: the command listing the conversations, or the shape of a participant id."""
    if exc.what == "conversation" and settings is not None:
        return f"; {_list_conversations(settings)} lists them"
    if exc.what == "participant":
        return "; ctxledger records a participant as <conversation>/participant/<name>, and --tenant chooses the tenant"
    return ""


@contextmanager
def _open(settings: Settings, *, create: bool = False) -> Iterator[Ledger]:
    """The ledger at ``--db``; a SQLite file that does not exist is created only when ``create``.

    Raises:
        ConfigurationError: ``create`` is false and ``--db`` names a SQLite file that does not exist (a mistyped
            path must not become a new, empty store); the message says how to create one, and where the demo's
            store is once the demo has run.
    """
    if not create:
        _require_store(settings)
    with Ledger.open(settings.db, blobs_dir=settings.blobs, create=create) as ledger:
        yield ledger


def _require_store(settings: Settings) -> None:
    """Refuse a ``--db`` SQLite file that does not exist (a mistyped path must not become a new, empty store).

    Raises:
        ConfigurationError: the file is not there; the message says how to create one, and where the demo's
            store is once the demo has run.
    """
    from ctxledger.store import missing_sqlite_file

    if (missing := missing_sqlite_file(settings.db)) is not None:
        demo_db = demo_dir() / "demo.db"
        demo = f"; the demo keeps its own store: --db sqlite:///{demo_db}" if demo_db.exists() else ""
        raise ConfigurationError(
            f"no store at {missing} (--db {settings.db}): check the path, or create one with "
            f"`ctxledger import PATH --db …` or `ctxledger demo --db …`{demo}"
        )


def _records(ledger: Ledger, settings: Settings, conversation_id: str) -> dict[str, Record]:
    return {r.id: r for r in ledger.store.records(settings.tenant, conversation_id)}


def _coster(ledger: Ledger, api: str, model: str, counter: str | None) -> Any:
    """The ledger's coster for ``model``; an unknown model without ``--counter`` is a user error naming it.

    Raises:
        ConfigurationError: unknown counter name, or a model with no known tokenizer and no --counter.
    """
    from ctxledger.tokens import counter_for_model

    return ledger.coster(api, model, counter_for_model(model, counter, option="--counter"))
