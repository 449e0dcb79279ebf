"""The root ``ctxledger`` command group and its global options."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import typer
from typer.core import TyperGroup

from ctxledger.cli._common import Settings
from ctxledger.ledger import DEFAULT_URL

GLOBAL_OPTIONS = ("--db", "--tenant", "--blobs")
"""Options of the root group (each takes one value); they are also accepted after the command."""

COMMAND_ORDER = (
    "migrate", "import", "conversations", "assemble", "explain", "usage", "rehydrate", "demo", "eval", "serve", "keys",
    "mcp", "gc",
)  # fmt: skip
"""Order of the commands in ``ctxledger --help``: the order a user meets them in."""


def hoist_global_options(args: Sequence[str]) -> list[str]:
    """Move every global option (``--db X`` or ``--db=X``) to the front of ``args``, keeping their order.

    ``ctxledger demo --db X`` then parses as ``ctxledger --db X demo``. Nothing after ``--`` moves, nor
    a global option that ends the line without its value (click then reports it); a global option given
    twice keeps the last value, as click does.
    """
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if "=" in arg and arg.split("=", 1)[0] in GLOBAL_OPTIONS:
            front.append(arg)
            i += 1
            continue
        if arg in GLOBAL_OPTIONS and i + 1 < len(args):
            front.extend(args[i : i + 2])
            i += 2
            continue
        rest.append(arg)
        i += 1
    return front + rest


LONG_CHOICES = 24
"""Characters above which a choice option shows ``<name>`` and lists its choices in its help instead."""


def unwrap(text: str | None) -> str | None:
    r"""Help text with each paragraph on one line, so the terminal wraps it (paragraphs: blank-line separated).

    Docstrings are wrapped for the source; rich keeps single line breaks, which at 80 columns leaves a short
    line after every long one. A paragraph that starts with click's ``\b`` keeps its lines.
    """
    if text is None:
        return None
    paragraphs = text.strip("\n").split("\n\n")
    return "\n\n".join(
        p if p.lstrip().startswith("\b") else " ".join(line.strip() for line in p.splitlines()) for p in paragraphs
    )


def tidy_help(command: Any) -> None:
    """Make ``command``'s help, and its subcommands', read well in any width.

    Paragraphs are unwrapped (:func:`unwrap`); arguments are named in capitals, as the help text names them
    (``ctxledger explain [OPTIONS] {ASSEMBLY_ID} [REF]``); a flag shows no value type (``--yes``, not
    ``--yes <bool>``, which reads as if it took a value); a choice option with a long list of choices shows
    ``<name>`` and names the choices in its help (typer would break the list mid-word at 80 columns).
    """
    command.help = unwrap(command.help)
    command.short_help = unwrap(command.short_help)
    for param in command.params:
        kind = getattr(param, "param_type_name", None)  # typer's own click: no isinstance
        if kind == "argument" and param.metavar is None and param.name:
            param.metavar = param.name.upper()
        if kind != "option":
            continue
        param.help = unwrap(param.help)
        label = _type_label(param)
        if label is not False and hasattr(param, "display_type_rich"):  # typer's rich help asks it for the type
            param.display_type_rich = lambda ctx, label=label: label  # type: ignore[method-assign]
    original = command.get_help_option

    def help_option(ctx: Any) -> Any:  # --help is made per call, not one of the params
        option = original(ctx)
        if option is not None and hasattr(option, "display_type_rich"):
            option.display_type_rich = lambda ctx: None
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)


def _type_label(param: Any) -> str | Literal[False] | None:
    """The type column of an option's help: ``None`` (none) for a flag, ``<name>`` for a long choice, else ``False``.

    A long choice's choices go into its help (unless the help names them all already).
    """
    if param.is_flag and not param.count:
        return None
    desc = getattr(param, "type_descriptor", None)
    choices = [str(c) for c in getattr(desc, "choices", None) or ()]
    if not getattr(desc, "is_choice", False) or len("|".join(choices)) <= LONG_CHOICES:
        return False
    if not all(c in (param.help or "") for c in choices):
        param.help = f"{param.help or ''} One of: {', '.join(choices)}.".strip()
    return f"<{max(param.opts, key=len).lstrip('-')}>"


class GlobalOptionsAnywhere(TyperGroup):
    """The root group: global options may come before or after the command (``--db``, ``--tenant``, ``--blobs``).

    Its help, and every command's, is tidied for the terminal's width (:func:`tidy_help`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Build the group, then tidy its commands' help."""
        super().__init__(*args, **kwargs)
        tidy_help(self)

    def list_commands(self, ctx: Any) -> list[str]:
        """Commands in the order of :data:`COMMAND_ORDER` (the order of the job), others after them."""
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda name: rank.get(name, len(rank)))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Parse ``args`` with the global options hoisted in front of the command."""
        return super().parse_args(ctx, hoist_global_options(args))


app = typer.Typer(
    cls=GlobalOptionsAnywhere,
    name="ctxledger",
    help=(
        "Record an agent's history and assemble each model call's context under a token budget, "
        "with a manifest of what was included or omitted and why.\n\n"
        "Start with [bold]ctxledger demo[/bold]: it imports a real tau-bench trajectory, assembles its "
        "next model call at 8,000 tokens and explains every choice.\n\n"
        "The options below (--db, --tenant, --blobs) may also follow the command: "
        "[bold]ctxledger demo --db sqlite:///demo.db[/bold]."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


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
        str | None,
        typer.Option(
            "--blobs",
            envvar="CTXLEDGER_BLOBS",
            help="Where raw tool outputs (blobs) live: a folder, 'database' (inside the store's database) or a "
            "postgresql+psycopg:// URL. Default: the folder <db>.blobs next to a SQLite file; inside the "
            "database for PostgreSQL.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Record an agent's history and assemble budgeted, explained contexts from it."""
    ctx.obj = Settings(db or DEFAULT_URL, db is not None, tenant, blobs)
