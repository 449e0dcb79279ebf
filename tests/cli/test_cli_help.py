"""Every command is documented: ``--help`` works and teaches (what it does, and an example)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ctxledger.cli import REASONS, app
from ctxledger.policy.base import ReasonCode

COMMANDS = (
    "assemble", "conversations", "demo", "eval", "explain", "forget", "import", "migrate", "rehydrate", "retain",
    "retention-audit", "usage", "serve", "keys", "mcp", "gc",
)  # fmt: skip


def _group() -> Any:
    return typer.main.get_command(app)


def test_the_app_has_exactly_the_documented_commands() -> None:
    """The command set is the one the README and the issue list (a new command must be added here)."""
    assert sorted(_group().commands) == sorted(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_explains_and_gives_an_example(runner: CliRunner, name: str) -> None:
    """`ctxledger CMD --help` exits 0 and shows the command's description and an example invocation."""
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    command = _group().commands[name]
    first_line = (command.help or "").strip().splitlines()[0]
    assert len(first_line) > 30
    assert first_line[:30] in " ".join(result.output.split())
    flat = " ".join(result.output.split())
    assert re.search(rf"Example: .*ctxledger .*{name}", flat), flat


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_and_argument_has_help_text(name: str) -> None:
    """No parameter is left undocumented (sqlite-utils' rule for its CLI)."""
    command = _group().commands[name]
    for param in command.params:
        if param.name == "help":
            continue
        assert getattr(param, "help", None), f"{name}: parameter {param.name!r} has no help"


def test_top_level_help_lists_commands_and_global_options(runner: CliRunner) -> None:
    """`ctxledger --help` names every command, --db with its env var and default, and --tenant."""
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output
    for text in ("--db", "CTXLEDGER_URL", "sqlite:///.ctxledger/ctxledger.db", "--tenant", "ctxledger demo"):
        assert text in result.output


def test_an_unknown_option_is_a_usage_error_with_exit_code_2(runner: CliRunner) -> None:
    """Bad options exit 2 (click's usage error), like every other user error."""
    result = runner.invoke(app, ["assemble", "x", "--window", "lots"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_every_omission_reason_code_has_an_explanation() -> None:
    """explain turns every ReasonCode (and the selection outcome) into words; a new code needs its line here."""
    missing = {code.value for code in ReasonCode} - REASONS.keys()
    assert not missing, f"add these reason codes to ctxledger.cli.REASONS: {sorted(missing)}"
    assert "selected" in REASONS


WIDTH = 80


def _command_paths(command: Any = None, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand as the words that invoke it (``("eval", "run")``)."""
    command = command or _group()
    out = [path]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        out += _command_paths(sub, (*path, name))
    return out


def _short_lines(text: str) -> list[str]:
    """Lines of the description (before the first panel) that end where the next line's first word would fit."""
    lines = [line.rstrip() for line in text.split("╭", 1)[0].splitlines()]
    short = []
    for line, following in itertools.pairwise(lines):
        nxt = following.split()
        if line.strip() and nxt and not line.lstrip().startswith("Usage:") and len(line) + 1 + len(nxt[0]) < WIDTH:
            short.append(line)
    return short


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "ctxledger")
def test_help_at_80_columns_is_filled_and_shows_no_value_for_flags(runner: CliRunner, path: tuple[str, ...]) -> None:
    """At 80 columns no description line breaks early, a flag shows no value type and no choice list is cut."""
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    assert not _short_lines(result.output), "\n".join(_short_lines(result.output))
    assert "<bool>" not in result.output
    assert not re.search(r"<[\w|-]*\|[\w-]*\s*│\s*\n", result.output), result.output  # a cut "<a|b|c>" label
    assert not re.search(r"\w… *│", result.output), result.output  # a cell cut short


def test_the_rehydrate_example_reads_a_tool_result_of_the_demo(runner: CliRunner, demo_store: Any) -> None:
    """The example of `rehydrate --help` names a record that holds bytes (a tool result), so it runs on the demo."""
    flat = " ".join(runner.invoke(app, ["rehydrate", "--help"]).output.split())
    example = re.search(r"Example: ctxledger (rehydrate \S+ --bytes \S+)", flat)
    assert example, flat
    result = runner.invoke(app, ["--db", demo_store.url, *example.group(1).split()])
    assert result.exit_code == 0, result.output
    assert result.stdout


@pytest.mark.parametrize("command", ["assemble", "retain"])
def test_now_help_says_a_time_without_offset_is_utc_as_the_parser_reads_it(runner: CliRunner, command: str) -> None:
    """The CLI reads a naive ``--now`` as UTC (the library refuses a naive datetime); the help says so."""
    from datetime import UTC, datetime

    from ctxledger.cli._common import iso_time

    assert iso_time("2026-01-01", "--now") == datetime(2026, 1, 1, tzinfo=UTC)
    answer = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert answer.exit_code == 0, answer.output
    assert "without an offset is read as UTC" in " ".join(answer.stdout.replace("│", " ").split())
