"""``explain`` of a summary manifest whose replay is not the same call: answer what the record holds, say the rest.

An assembly made under ``assemble --policy FILE`` and explained without it replays under another policy; the
stored record still answers for the included items, and every other question is refused with what to do.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger
from ctxledger.records import Message

CONV = "tau-bench-airline-task2-trial1"
POLICY = '[policy]\nname = "redact-secrets"\nversion = "1"\n[stages.secrets]\naction = "redact"\n'


@pytest.fixture(scope="module")
def policy_assembly(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, str, str]:
    """``(url, policy file, assemble's stdout, assembly id)`` of a small assembly under a policy file."""
    folder = tmp_path_factory.mktemp("explain-mismatch")
    url, policy = f"sqlite:///{folder / 'm.db'}", folder / "redact.toml"
    policy.write_text(POLICY)
    runner = CliRunner()
    demo = runner.invoke(app, ["--db", url, "demo", "--out", str(folder / "p")])
    assert demo.exit_code == 0, demo.output
    args = ["--db", url, "assemble", CONV, "--policy", str(policy), "--window", "6000", "--output", "300"]
    assembled = runner.invoke(app, [*args, "--margin", "50", "--out", str(folder / "q")])
    assert assembled.exit_code == 0, assembled.output
    with Ledger.open(url) as ledger:
        asm_id = max(ledger.store.list_assemblies("default"), key=lambda a: a["created_at"])["id"]
    return url, policy, assembled.stdout, asm_id


def _stored(url: str, asm_id: str) -> dict:
    with Ledger.open(url) as ledger:
        return ledger.get_assembly(asm_id)


def test_explain_without_the_policy_lists_the_included_items_and_says_why_not_more(
    runner: CliRunner, policy_assembly: tuple[str, Path, str, str]
) -> None:
    url, _, _, asm_id = policy_assembly
    result = runner.invoke(app, ["--db", url, "explain", asm_id])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "Included items" in result.stdout
    assert "Omitted items (" not in result.stdout and "keeps no list" in result.stdout
    assert "--policy" in result.stderr and "policy hash" in result.stderr


def test_explain_of_an_omitted_record_without_the_policy_says_what_to_pass(
    runner: CliRunner, policy_assembly: tuple[str, Path, str, str]
) -> None:
    url, _, _, asm_id = policy_assembly
    stored = _stored(url, asm_id)
    included = {e["ref"] for e in stored["included"]}
    with Ledger.open(url) as ledger:
        refs = [r.id for r in ledger.store.records("default", CONV) if isinstance(r, Message)]
    left_out = next(r for r in refs if r not in included)
    result = runner.invoke(app, ["--db", url, "explain", asm_id, left_out.rsplit("/", 1)[1]])
    assert result.exit_code == 0, result.output
    assert "UNKNOWN" in result.stdout and "--policy" in result.stdout
    kept = next(iter(included))
    answer = runner.invoke(app, ["--db", url, "explain", asm_id, kept])
    assert answer.exit_code == 0 and "INCLUDED" in answer.stdout


def test_the_printed_follow_up_names_the_policy_file_and_answers_in_full(
    runner: CliRunner, policy_assembly: tuple[str, Path, str, str]
) -> None:
    _, policy, out, _ = policy_assembly
    line = next(x for x in out.splitlines() if "explain it:" in x)
    args = shlex.split(line.split("explain it:", 1)[1].replace("[REF]", ""))[1:]
    assert args[args.index("--policy") + 1] == str(policy)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Omitted items" in result.stdout and "replay" not in result.stderr


@pytest.mark.parametrize("ref", ["999", f"{CONV}/999", "no-such-external-id"])
def test_a_ref_that_names_no_record_is_refused_before_any_replay(
    runner: CliRunner, policy_assembly: tuple[str, Path, str, str], ref: str
) -> None:
    url, _, _, asm_id = policy_assembly
    result = runner.invoke(app, ["--db", url, "explain", asm_id, ref])
    assert result.exit_code != 0
    assert "UNKNOWN" not in result.output and "Traceback" not in result.output
    assert f"not found among the records of conversation {CONV}" in " ".join(result.output.split())
