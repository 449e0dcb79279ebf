"""``ctxledger retain``, ``forget`` and ``retention-audit`` on a real SQLite store the demo filled."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact

POLICY = """
[policy]
name = "keep-less"
version = "1"

[[retention.rules]]
name = "raw-outputs-30d"
kinds = ["tool_artifact"]
after_days = 30
action = "redact"
"""


def _demo(runner: CliRunner, tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ctx.db'}"
    assert runner.invoke(app, ["--db", url, "demo", "--out", str(tmp_path / "p.json")]).exit_code == 0
    (tmp_path / "policy.toml").write_text(POLICY, encoding="utf-8")
    return url


def test_retain_dry_run_then_run_then_audit(runner: CliRunner, tmp_path: Path) -> None:
    url = _demo(runner, tmp_path)
    with Ledger.open(url) as ledger:
        conv = ledger.store.conversations("default")[0]
        arts = [r for r in ledger.store.records("default", conv) if isinstance(r, ToolArtifact)]
    args = ["--db", url, "retain", "--policy", str(tmp_path / "policy.toml"), "--now", "2031-01-01T00:00Z"]
    dry = runner.invoke(app, [*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] and planned["by_rule"]["raw-outputs-30d"]["redact"] == len(arts)
    with Ledger.open(url) as ledger:  # nothing changed
        assert ledger.store.blobs.exists(arts[0].sha256) and not ledger.retention_audit()
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "raw-outputs-30d" in done.stdout and "redact" in done.stdout
    again = runner.invoke(app, [*args, "--json"])
    assert json.loads(again.stdout)["by_rule"] == {}
    audit = runner.invoke(app, ["--db", url, "retention-audit", "--ref", arts[0].id, "--json"])
    (row,) = json.loads(audit.stdout)
    assert (row["rule"], row["action"], row["before_sha256"]) == ("raw-outputs-30d", "redact", arts[0].sha256)
    shown = runner.invoke(app, ["--db", url, "rehydrate", arts[0].id])
    assert shown.exit_code == 2 and "redacted by retention rule raw-outputs-30d" in shown.stderr


def test_retain_refuses_a_policy_without_retention_rules(runner: CliRunner, tmp_path: Path) -> None:
    url = _demo(runner, tmp_path)
    (tmp_path / "plain.toml").write_text('[policy]\nname = "p"\nversion = "1"\n', encoding="utf-8")
    result = runner.invoke(app, ["--db", url, "retain", "--policy", str(tmp_path / "plain.toml")])
    assert result.exit_code == 2 and "no [retention] rules" in " ".join(result.stderr.split())


def test_forget_prints_what_would_go_until_yes(runner: CliRunner, tmp_path: Path) -> None:
    url = _demo(runner, tmp_path)
    with Ledger.open(url) as ledger:
        conv = ledger.store.conversations("default")[0]
    shown = runner.invoke(app, ["--db", url, "forget", "--conversation", conv])
    assert shown.exit_code == 0 and "pass --yes" in shown.stdout
    with Ledger.open(url) as ledger:
        assert ledger.store.conversations("default") == [conv]
    done = runner.invoke(app, ["--db", url, "forget", "--conversation", conv, "--yes"])
    assert done.exit_code == 0, done.output
    with Ledger.open(url) as ledger:
        assert ledger.store.conversations("default") == []
        assert {e.rule for e in ledger.retention_audit()} == {"forget"}
    missing = runner.invoke(app, ["--db", url, "forget", "--conversation", conv, "--yes"])
    assert missing.exit_code == 2 and "not found" in missing.stderr


def test_retention_command_errors_name_the_cli_options(runner: CliRunner, tmp_path: Path) -> None:
    """A wrong forget or retain call names --conversation, --participant, --batch-size: never a library argument."""
    url = _demo(runner, tmp_path)
    library_names = ("conversation_id", "participant_id", "batch_size")
    for args in (["forget"], ["forget", "--conversation", "c", "--participant", "p"]):
        result = runner.invoke(app, ["--db", url, *args])
        flat = " ".join(result.stderr.split())
        assert result.exit_code == 2, result.output
        assert "--conversation" in flat and "--participant" in flat, flat
        assert not any(name in flat for name in library_names), flat
    for size in ("0", "-3"):
        result = runner.invoke(
            app, ["--db", url, "retain", "--policy", str(tmp_path / "policy.toml"), "--batch-size", size]
        )
        assert result.exit_code == 2 and "--batch-size" in result.output and "batch_size" not in result.output
    with Ledger.open(url) as ledger:
        assert ledger.store.conversations("default") and not ledger.retention_audit()  # nothing was run


def test_forget_of_nobody_is_an_error_naming_the_participant_and_json_stays_json(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Forgetting a participant no record is or is owned by exits 2 naming it, with or without --yes, and
    changes nothing; --json prints only the JSON."""
    url = _demo(runner, tmp_path)
    for tenant, extra in (("default", []), ("default", ["--yes"]), ("acme", ["--yes", "--json"])):
        nobody = runner.invoke(app, ["--db", url, "--tenant", tenant, "forget", "--participant", "nobody", *extra])
        flat = " ".join(nobody.stderr.split())
        assert nobody.exit_code == 2, nobody.output
        assert f"participant 'nobody' not found in tenant '{tenant}'" in flat, flat
        assert "<conversation>/participant/" in flat and not nobody.stdout and "Traceback" not in nobody.output
    with Ledger.open(url) as ledger:
        assert not ledger.retention_audit(tenant_id="default") and not ledger.retention_audit(tenant_id="acme")
    with Ledger.open(url) as ledger:
        conv = ledger.store.conversations("default")[0]
    shown = runner.invoke(app, ["--db", url, "forget", "--conversation", conv, "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["by_rule"]["forget"]["delete"] > 0
    audit = runner.invoke(app, ["--db", url, "retention-audit", "--ref", "nothing-here"])
    assert audit.exit_code == 0 and "no retention audit rows" in audit.stdout


def test_retain_with_only_a_retention_table_says_what_the_policy_file_lacks(runner: CliRunner, tmp_path: Path) -> None:
    """A file holding only [retention] (the table a user copies first) names the [policy] keys it needs."""
    url = _demo(runner, tmp_path)
    only_rules = POLICY.split("[[retention.rules]]", 1)[1]
    (tmp_path / "rules.toml").write_text("[[retention.rules]]" + only_rules, encoding="utf-8")
    result = runner.invoke(app, ["--db", url, "retain", "--policy", str(tmp_path / "rules.toml"), "--dry-run"])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "missing [policy] table" in flat and "name =" in flat and "version =" in flat, flat
