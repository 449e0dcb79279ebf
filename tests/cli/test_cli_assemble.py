"""`assemble`, `explain`, `usage`, `rehydrate` and `migrate` on the store the demo filled."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.budget import DEFAULT_BUDGET
from ctxledger.cli import REASONS, app
from ctxledger.demo import DEMO_CONVERSATION, DEMO_FILE, DEMO_TASK
from ctxledger.errors import InputError
from ctxledger.hashing import content_hash
from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact, ToolCall
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.serialize import DEFAULT_MODELS

if TYPE_CHECKING:
    from conftest import DemoStore


def _flat(text: str) -> str:
    return " ".join(text.split())


def _window(window: int) -> list[str]:
    """Budget options for a small window: ``O`` 1,000 and ``M`` 200 leave room for the demo's required blocks."""
    return ["--window", str(window), "--output", "1000", "--margin", "200"]


def _manifest(url: str, result: Any, *, full: bool = True) -> dict[str, Any]:
    """The manifest of the assembly a CLI run printed (its id on stdout or stderr), its trace replayed if ``full``."""
    asm_id = next(w for w in (result.stdout + result.stderr).split() if w.startswith("asm_"))
    with Ledger.open(url) as ledger:
        return ledger.get_assembly(asm_id, full=full)


def test_assemble_prints_payload_json_on_stdout_and_the_report_on_stderr(
    runner: CliRunner, demo_store: DemoStore
) -> None:
    """Without --out, stdout is exactly the payload JSON (pipeable); the assembly id and ledger go to stderr."""
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, *_window(6000)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["model"] == "gpt-4o"
    assert [m["role"] for m in payload["messages"][:2]] == ["system", "user"]
    flat = _flat(result.stderr)
    assert "assembly asm_" in flat
    assert "B_input │ 4,800" in flat
    assert "omitted │ selection │ budget" in flat


def test_assemble_prints_a_warning_for_each_unknown_input(runner: CliRunner, demo_store: DemoStore) -> None:
    """An unknown provider or participant still assembles (failing closed), named on stderr and in the manifest."""
    args = ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--provider", "nonsense-llm", "--participant", "p/x"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    flat = _flat(result.stderr)
    assert "warning: provider 'nonsense-llm' is named by neither" in flat
    assert "warning: no participant record or record owner is 'p/x'" in flat
    asm_id = next(w for w in result.stderr.split() if w.startswith("asm_"))
    with Ledger.open(demo_store.url) as ledger:
        codes = [w["code"] for w in ledger.get_assembly(asm_id)["warnings"]]
    assert codes == ["unknown_participant", "unknown_provider"]


def test_assemble_out_writes_the_persisted_payload(runner: CliRunner, demo_store: DemoStore, tmp_path: Path) -> None:
    """--out writes the payload whose hash the persisted manifest records; --show prints the omitted table."""
    out = tmp_path / "payload.json"
    args = ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--out", str(out), "--show", "omitted"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text(encoding="utf-8"))
    asm_id = next(w for w in result.stdout.split() if w.startswith("asm_"))
    with Ledger.open(demo_store.url) as ledger:
        manifest = ledger.get_assembly(asm_id)
    assert manifest["payload_hash"] == content_hash(payload)
    assert "Omitted items" in result.stdout
    assert f"written to {out}" in result.stdout


def test_assemble_without_budget_options_asks_for_the_library_default(runner: CliRunner, demo_store: DemoStore) -> None:
    """The CLI and the API share one default budget: the manifest records W, O and M of ``DEFAULT_BUDGET``."""
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION])
    assert result.exit_code == 0, result.output
    requested = _manifest(demo_store.url, result, full=False)["budget"]["requested"]
    with Ledger.open(demo_store.url) as ledger:
        api_default = ledger.assemble(DEMO_CONVERSATION, persist=False).manifest["budget"]["requested"]
    assert requested == api_default
    assert (requested["window"], requested["output"], requested["margin"]) == (
        DEFAULT_BUDGET.window_tokens,
        DEFAULT_BUDGET.output_tokens,
        DEFAULT_BUDGET.margin_tokens,
    )


def test_assemble_at_a_snapshot_sees_only_the_history_up_to_it(runner: CliRunner, demo_store: DemoStore) -> None:
    """--snapshot 11 assembles as of seq 11: no payload turn comes from a later record."""
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--snapshot", "11"])
    assert result.exit_code == 0, result.output
    asm_id = next(w for w in result.stderr.split() if w.startswith("asm_"))
    with Ledger.open(demo_store.url) as ledger:
        manifest = ledger.get_assembly(asm_id)
        seqs = [ledger.store.get("default", ref).seq for ref in manifest["turn_refs"]]
    assert manifest["snapshot_seq"] == 11
    assert max(seqs) <= 11


def test_assemble_refuses_a_snapshot_inside_an_imported_tool_exchange(runner: CliRunner, demo_store: DemoStore) -> None:
    """Seq 9-11 is one imported tool exchange (message, call, result): --snapshot 10 is a usage error naming
    the field and the exchange's boundaries, and no assembly is stored."""
    with Ledger.open(demo_store.url) as ledger:
        before = len(ledger.store.list_assemblies("default", DEMO_CONVERSATION))
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--snapshot", "10"])
    assert result.exit_code == 2, result.output
    assert "as_of_seq" in result.output and "use 11 (after the exchange) or 8 or earlier" in _flat(result.output)
    with Ledger.open(demo_store.url) as ledger:
        assert len(ledger.store.list_assemblies("default", DEMO_CONVERSATION)) == before


def test_assemble_refuses_a_snapshot_below_1_naming_the_option(runner: CliRunner, demo_store: DemoStore) -> None:
    """--snapshot -1 (or 0) is a usage error naming --snapshot, not a confusing provider-contract error."""
    for value in ("-1", "0"):
        result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--snapshot", value])
        assert result.exit_code == 2
        assert "--snapshot" in result.output and f"expected a whole number >= 1, got {value!r}" in _flat(result.output)


def test_assemble_when_required_blocks_do_not_fit_lists_them_and_exits_2(
    runner: CliRunner, demo_store: DemoStore
) -> None:
    """A 1,500-token window cannot hold the 1,252-token policy plus the rest: itemised table, exit 2."""
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, *_window(1500)])
    assert result.exit_code == 2
    flat = _flat(result.stderr)
    assert "Required blocks" in flat
    assert f"{DEMO_CONVERSATION}/0 │ instruction │ 1,252" in flat
    assert "B_input = 300" in flat
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("command", "window", "output", "margin"),
    [("assemble", "1000", "1000", "0"), ("assemble", "1000", "900", "100"), ("demo", "100", "100", "0")],
)
def test_a_budget_with_no_room_for_input_names_the_cli_options(
    runner: CliRunner, demo_store: DemoStore, command: str, window: str, output: str, margin: str
) -> None:
    """W - O - M <= 0 exits 2 naming this command's options for the fields at fault, not the library's arguments."""
    w_option = "--budget" if command == "demo" else "--window"
    args = [DEMO_CONVERSATION] if command == "assemble" else []
    budget = [w_option, window, "--output", output, "--margin", margin]
    result = runner.invoke(app, ["--db", demo_store.url, command, *args, *budget])
    flat = _flat(result.stderr)
    assert result.exit_code == 2, result.output
    assert "no room for input" in flat and f"raise {w_option} (W)" in flat and "lower --output (O)" in flat
    assert ("--margin (M)" in flat) == (margin != "0")
    assert "window_tokens" not in flat and "output_tokens" not in flat and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        ("assemble", "--window", "99999999999"),
        ("assemble", "--window", "0"),
        ("assemble", "--output", "10000001"),
        ("assemble", "--margin", "-1"),
        ("demo", "--budget", "99999999999"),
        ("demo", "--budget", "-5"),
        ("demo", "--output", "-3"),
    ],
)
def test_a_budget_field_out_of_bounds_names_this_commands_option(
    runner: CliRunner, demo_store: DemoStore, command: str, option: str, value: str
) -> None:
    """A W, O or M outside the library's bounds exits 2 naming the option the user typed, with its value."""
    args = [DEMO_CONVERSATION] if command == "assemble" else []
    result = runner.invoke(app, ["--db", demo_store.url, command, *args, option, value])
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert f"{option} must be between" in flat and f"got {value}" in flat, flat
    others = {"--window", "--budget", "--output", "--margin"} - {option}
    assert not any(f"{o} must be" in flat or f"({o})" in flat for o in others), flat
    assert "window_tokens" not in flat and "Traceback" not in result.output


def test_assemble_unknown_conversation_is_a_user_error(runner: CliRunner, demo_store: DemoStore) -> None:
    """A conversation id that does not exist exits 2 with the id in the message."""
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", "no-such-conversation"])
    assert result.exit_code == 2
    assert "no-such-conversation" in result.stderr
    assert "Traceback" not in result.output


def test_explain_without_ref_prints_the_whole_manifest(runner: CliRunner, demo_store: DemoStore) -> None:
    """explain ASSEMBLY shows the budget, the ledger per class, and the included and omitted tables."""
    result = runner.invoke(app, ["--db", demo_store.url, "explain", demo_store.manifest["id"]])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stdout)
    for text in ("B_dynamic", "Budget ledger per context class", "Included items", "Omitted items", "protection"):
        assert text in flat
    assert f"Included items ({len(demo_store.manifest['included'])} records)" in flat
    assert f"Omitted items ({len(demo_store.manifest['omitted'])} records)" in flat


def test_explain_an_included_item_gives_stage_utility_and_tokens(runner: CliRunner, demo_store: DemoStore) -> None:
    """For an item selected by utility, explain says INCLUDED, its stage, utility and tokens."""
    entry = next(e for e in demo_store.manifest["included"] if e["stage"] == "selection" and e["tokens"])
    result = runner.invoke(app, ["--db", demo_store.url, "explain", demo_store.manifest["id"], entry["ref"]])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stdout)
    assert f"INCLUDED {entry['ref']}" in flat
    assert "stage selection" in flat
    assert f"utility {entry['utility']:.4f}" in flat
    assert f"tokens {entry['tokens']}" in flat


def test_explain_an_omitted_item_by_its_short_number(runner: CliRunner, demo_store: DemoStore) -> None:
    """An omitted record named by its number within the conversation gets its reason code and the stage."""
    entry = demo_store.manifest["omitted"][0]
    short = entry["ref"].removeprefix(f"{DEMO_CONVERSATION}/")
    result = runner.invoke(app, ["--db", demo_store.url, "explain", demo_store.manifest["id"], short])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stdout)
    assert f"OMITTED {entry['ref']}" in flat
    assert "reason budget: did not fit" in flat
    assert "stage selection" in flat


def test_explain_by_tool_call_id_and_a_shared_call_id(runner: CliRunner, demo_store: DemoStore) -> None:
    """A provider call id finds its tool call, and so does an id as the payload shows it (a repeated id renamed
    ``…_2``, ``…_3``); one the trace reuses for several calls the payload does not show asks for a record id."""
    with Ledger.open(demo_store.url) as ledger:
        calls = [r for r in ledger.store.records("default", DEMO_CONVERSATION) if isinstance(r, ToolCall)]
    by_call_id: dict[str, list[str]] = {}
    for call in calls:
        by_call_id.setdefault(call.call_id, []).append(call.id)
    included = {e["ref"] for e in demo_store.manifest["included"]}
    unique = next(c for c, ids in by_call_id.items() if len(ids) == 1)
    shown = next(c for c, ids in by_call_id.items() if len(ids) > 1 and all(i in included for i in ids))
    shared = next(c for c, ids in by_call_id.items() if len(ids) > 1 and not set(ids) & included)
    asm = demo_store.manifest["id"]
    found = runner.invoke(app, ["--db", demo_store.url, "explain", asm, unique])
    assert found.exit_code == 0, found.output
    assert f"{by_call_id[unique][0]} " in _flat(found.stdout) + " "
    messages = json.loads(demo_store.payload_path.read_text())["messages"]
    sent = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    for k, ref in enumerate(by_call_id[shown]):
        named = shown if k == 0 else f"{shown}_{k + 1}"
        assert named in sent
        found = runner.invoke(app, ["--db", demo_store.url, "explain", asm, named])
        assert found.exit_code == 0, found.output
        assert f"INCLUDED {ref} " in _flat(found.stdout) + " "
    ambiguous = runner.invoke(app, ["--db", demo_store.url, "explain", asm, shared])
    assert ambiguous.exit_code == 2
    assert all(ref in _flat(ambiguous.stderr) for ref in by_call_id[shared])


def test_explain_a_protected_item(runner: CliRunner, demo_store: DemoStore) -> None:
    """A required record is INCLUDED by the protection stage, with the policy reason that protects it."""
    entry = next(e for e in demo_store.manifest["included"] if e["stage"] == "protection")
    result = runner.invoke(app, ["--db", demo_store.url, "explain", demo_store.manifest["id"], entry["ref"]])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stdout)
    assert f"INCLUDED {entry['ref']}" in flat
    assert f"reason {entry['reason']}: {REASONS[entry['reason']]}" in flat
    assert "stage protection" in flat
    assert "decision: stage protection → require" in flat


def test_explain_an_instruction_says_why_protection_decides_and_fixed_admits(
    runner: CliRunner, demo_store: DemoStore
) -> None:
    """An instruction is admitted by stage fixed while the decision is protection's: the output says why both appear,
    and that its owner (who produced it) does not limit who sees it."""
    entry = next(e for e in demo_store.manifest["included"] if e["stage"] == "fixed")
    result = runner.invoke(app, ["--db", demo_store.url, "explain", demo_store.manifest["id"], entry["ref"]])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stdout)
    assert "stage fixed" in flat
    assert "decision: stage protection → require (instruction): the policy requires every instruction" in flat
    assert "fixed block (stage fixed)" in flat
    if entry.get("owner") and entry.get("visibility") != "participant_private":
        assert f"owner {entry['owner']}, who produced it; only a participant_private record" in flat


def test_explain_unknown_ref_or_assembly_exits_2(runner: CliRunner, demo_store: DemoStore) -> None:
    """A ref that was no candidate, or an assembly that does not exist, is a user error."""
    bad_ref = runner.invoke(app, ["--db", demo_store.url, "explain", demo_store.manifest["id"], "9999"])
    bad_asm = runner.invoke(app, ["--db", demo_store.url, "explain", "asm_missing"])
    assert (bad_ref.exit_code, bad_asm.exit_code) == (2, 2)
    assert "asm_missing" in bad_asm.stderr
    conv = demo_store.manifest["conversation_id"]
    assert f"'{conv}/9999' not found" in _flat(bad_ref.stderr)  # the whole id looked for, not the short form


def test_usage_records_observed_tokens_and_shows_the_estimate_error(
    runner: CliRunner, demo_store: DemoStore, tmp_path: Path
) -> None:
    """usage stores what the provider reported; the error printed is estimated minus observed input tokens."""
    result = runner.invoke(
        app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--out", str(tmp_path / "p.json")]
    )
    asm_id = next(w for w in result.stdout.split() if w.startswith("asm_"))
    with Ledger.open(demo_store.url) as ledger:
        estimated = ledger.get_assembly(asm_id)["tokens"]["estimated_input"]
    observed = estimated + 7
    usage = runner.invoke(app, ["--db", demo_store.url, "usage", asm_id, "--input", str(observed), "--output", "120"])
    assert usage.exit_code == 0, usage.output
    flat = _flat(usage.stdout)
    assert f"observed input {observed:,}" in flat
    assert "estimate error -7 tokens" in flat
    with Ledger.open(demo_store.url) as ledger:
        assert ledger.get_assembly(asm_id)["tokens"]["observed_output"] == 120
    args = ["--db", demo_store.url, "usage", asm_id, "--input", "5", "--output", "6"]
    again = runner.invoke(app, args)
    assert again.exit_code == 2
    assert f"assembly {asm_id}" in again.stderr and "--overwrite" in _flat(again.stderr)
    with Ledger.open(demo_store.url) as ledger:
        assert ledger.get_assembly(asm_id)["tokens"]["observed_input"] == observed
    replaced = runner.invoke(app, [*args, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    with Ledger.open(demo_store.url) as ledger:
        tokens = ledger.get_assembly(asm_id)["tokens"]
    assert (tokens["observed_input"], tokens["observed_output"]) == (5, 6)


def test_rehydrate_returns_the_exact_raw_tool_output(runner: CliRunner, demo_store: DemoStore, tmp_path: Path) -> None:
    """The stored bytes of an omitted tool result equal tau-bench's raw `content`, whole and by byte range."""
    (record,) = json.loads(files("ctxledger._demo").joinpath(DEMO_FILE).read_text(encoding="utf-8"))
    assert (record["task_id"], record["trial"]) == DEMO_TASK
    traj = record["traj"]
    results = [m["content"].encode("utf-8") for m in traj if m["role"] == "tool"]
    with Ledger.open(demo_store.url) as ledger:
        artifacts = [r for r in ledger.store.records("default", DEMO_CONVERSATION) if isinstance(r, ToolArtifact)]
    assert len(artifacts) == len(results)  # call ids repeat in this trace, so results are matched by order
    raw = {a.id: data for a, data in zip(sorted(artifacts, key=lambda a: a.seq), results, strict=True)}
    omitted = {e["ref"] for e in demo_store.manifest["omitted"]}
    artifact = next(a for a in artifacts if a.id in omitted and a.size_bytes > 100)
    whole = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact.id])
    assert whole.exit_code == 0, whole.output
    assert whole.stdout_bytes == raw[artifact.id]
    out = tmp_path / "part.bin"
    part = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact.id, "--bytes", "10:50", "--out", str(out)])
    assert part.exit_code == 0, part.output
    assert out.read_bytes() == raw[artifact.id][10:50]


def test_rehydrate_gives_message_text_and_refuses_contentless_records_and_bad_ranges(
    runner: CliRunner, demo_store: DemoStore
) -> None:
    """A message id gives its text (as excerpts locate it); a tool call or a range past the end exits 2."""
    message = runner.invoke(app, ["--db", demo_store.url, "rehydrate", f"{DEMO_CONVERSATION}/1"])
    assert message.exit_code == 0, message.output
    with Ledger.open(demo_store.url) as ledger:
        text = ledger.store.get("default", f"{DEMO_CONVERSATION}/1").content
    assert message.stdout_bytes == text.encode("utf-8")
    call = runner.invoke(app, ["--db", demo_store.url, "rehydrate", f"{DEMO_CONVERSATION}/12"])
    assert call.exit_code == 2
    assert "no stored content" in call.stderr
    with Ledger.open(demo_store.url) as ledger:
        refs = [e["ref"] for e in demo_store.manifest["omitted"]]
        artifact = next(r for r in refs if isinstance(ledger.store.get("default", r), ToolArtifact))
    past = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact, "--bytes", "0:99999999"])
    assert past.exit_code == 2
    assert "ends past the end of blob" in past.stderr
    assert past.stderr.startswith("error: --bytes: ")  # names the option typed, as a malformed range does
    assert "byte_range" not in past.stderr
    message_past = runner.invoke(
        app, ["--db", demo_store.url, "rehydrate", f"{DEMO_CONVERSATION}/1", "--bytes", "0:9999"]
    )
    assert message_past.exit_code == 2 and message_past.stderr.startswith("error: --bytes: ")


def test_migrate_creates_the_schema_and_is_idempotent(runner: CliRunner, tmp_path: Path) -> None:
    """migrate on a new SQLite file prints the revision, and a second run prints the same one."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    first = runner.invoke(app, ["--db", url, "migrate"])
    second = runner.invoke(app, ["--db", url, "migrate"])
    assert first.exit_code == second.exit_code == 0, first.output
    assert "revision" in first.stdout
    assert first.stdout.split()[-1] == second.stdout.split()[-1]
    assert (tmp_path / "new.db").exists()


def test_db_comes_from_the_environment(runner: CliRunner, tmp_path: Path, monkeypatch) -> None:
    """CTXLEDGER_URL chooses the store when --db is absent."""
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("CTXLEDGER_URL", url)
    result = runner.invoke(app, ["migrate"])
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "env.db") in _flat(result.stdout).replace(" ", "")


def test_assemble_under_a_policy_file_records_that_policy(
    runner: CliRunner, demo_store: DemoStore, tmp_path: Path
) -> None:
    """--policy FILE assembles under that TOML policy: its name, version and hash are in the manifest."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nname = "cli-test"\nversion = "3"\n\n[selection]\nladder = false\n', encoding="utf-8")
    out = tmp_path / "payload.json"
    result = runner.invoke(
        app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--policy", str(policy), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    manifest = _manifest(demo_store.url, result, full=False)
    assert (manifest["policy"]["name"], manifest["policy"]["version"]) == ("cli-test", "3")
    bad = tmp_path / "bad.toml"
    bad.write_text("[policy]\nname = 3\n", encoding="utf-8")
    refused = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--policy", str(bad)])
    assert refused.exit_code == 2
    assert "bad.toml" in refused.stderr


def test_assemble_under_a_yaml_policy_file(runner: CliRunner, demo_store: DemoStore, tmp_path: Path) -> None:
    """--policy FILE.yaml works like TOML; a YAML syntax error exits 2 naming the file and the line."""
    policy = tmp_path / "policy.yaml"
    policy.write_text('policy:\n  name: cli-yaml\n  version: "4"\nselection:\n  ladder: false\n', encoding="utf-8")
    toml = tmp_path / "same.toml"
    toml.write_text('[policy]\nname = "cli-yaml"\nversion = "4"\n[selection]\nladder = false\n', encoding="utf-8")
    out = tmp_path / "payload.json"
    hashes = []
    for path in (policy, toml):
        result = runner.invoke(
            app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--policy", str(path), "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        manifest = _manifest(demo_store.url, result, full=False)
        assert (manifest["policy"]["name"], manifest["policy"]["version"]) == ("cli-yaml", "4")
        hashes.append((manifest["policy"]["hash"], manifest["payload_hash"]))
    assert hashes[0] == hashes[1]
    bad = tmp_path / "bad.yml"
    bad.write_text("policy:\n  name: p\n  version: [1\n", encoding="utf-8")
    refused = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--policy", str(bad)])
    assert refused.exit_code == 2
    assert f"{bad},line4:invalidYAML" in _flat(refused.stderr).replace(" ", "")


def test_assemble_for_an_unknown_model_needs_a_counter(runner: CliRunner, demo_store: DemoStore) -> None:
    """An unknown model is refused with the --counter choices; with --counter the manifest records that counter."""
    base = ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--model", "llama-3.1-70b"]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 2
    flat = _flat(refused.stderr)
    assert "no offline tokenizer is known for model 'llama-3.1-70b'; pass --counter one of o200k_base" in flat
    for counter, estimate in (("cl100k_base", False), ("estimate/quicktok/o200k_base", True)):
        result = runner.invoke(app, [*base, "--counter", counter])
        assert result.exit_code == 0, result.output
        asm_id = next(w for w in result.stderr.split() if w.startswith("asm_"))
        with Ledger.open(demo_store.url) as ledger:
            manifest = ledger.get_assembly(asm_id)
        assert manifest["model"] == "llama-3.1-70b"
        assert manifest["counter"]["is_estimate"] is estimate
        assert manifest["counter"]["id"].endswith(counter)


def test_out_dash_means_stdout_for_assemble_and_rehydrate(
    runner: CliRunner, demo_store: DemoStore, tmp_path: Path, monkeypatch
) -> None:
    """--out - writes to stdout (as without --out) and never creates a file named '-'."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--out", "-"])
    assert result.exit_code == 0, result.output
    asm_id = next(w for w in result.stderr.split() if w.startswith("asm_"))
    with Ledger.open(demo_store.url) as ledger:
        assert content_hash(json.loads(result.stdout)) == ledger.get_assembly(asm_id)["payload_hash"]
        artifact = next(r for r in ledger.store.records("default", DEMO_CONVERSATION) if isinstance(r, ToolArtifact))
        data = ledger.rehydrate(artifact.id)
    raw = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact.id, "--out", "-"])
    assert raw.exit_code == 0, raw.output
    assert raw.stdout_bytes == data
    assert not (tmp_path / "-").exists()


def test_python_dash_m_runs_the_cli():
    """``python -m ctxledger`` is the same command line as the script."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "ctxledger", "--help"], capture_output=True, text=True, check=True)
    assert "Usage: ctxledger" in out.stdout and "assemble" in out.stdout


def _contract_store(tmp_path: Path) -> tuple[str, Path, GraphBuilder]:
    """A SQLite store with a CSV export, its memory (derived at commit a1b2c3) and a policy file with a contract."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with Ledger.open(url) as ledger:
        g = GraphBuilder(ledger, "cli")
        g.system("sys", "Be brief.")
        g.user("u1", "Export the invoices.")
        g.tool("csv", "billing.export", {}, "id,amount\n1,10\n2,20\n", media_type="text/csv")
        g.memory("m-csv", "2 invoices exported.", sources=["art-csv"], source_version="repo@a1b2c3")
        g.user("u2", "Use the exact CSV.")
    policy = tmp_path / "p.toml"
    policy.write_text(
        '[policy]\nname = "cli"\nversion = "1"\n[[contracts]]\nagent = "router"\ncall_type = "routing"\n'
        'sources = ["instructions", "latest_user_turn"]\nmax_input_tokens = 2000\n',
        encoding="utf-8",
    )
    return url, policy, g


def test_assemble_request_options_reach_the_manifest(runner: CliRunner, tmp_path: Path) -> None:
    """--exact-evidence, --now, --source-version, --agent/--call-type with --policy: each shows in the manifest."""
    url, policy, g = _contract_store(tmp_path)
    base = ["--db", url, "assemble", g.conversation_id, "--out", str(tmp_path / "p.json")]
    result = runner.invoke(app, [*base, "--exact-evidence", g.id("m-csv"), "--now", "2026-09-01T09:30Z"])
    assert result.exit_code == 0, result.output
    manifest = _manifest(url, result)
    assert manifest["request"]["now"] == "2026-09-01T09:30:00+00:00"
    assert manifest["request"]["exact_evidence"] == [g.id("m-csv")]
    assert [r["decision"] for r in manifest["rehydrations"]] == ["rehydrated"]
    stale = runner.invoke(app, [*base, "--source-version", "repo=d4e5f6", "--now", "2026-09-01T09:30Z"])
    marks = _manifest(url, stale)["marks"]
    assert any(m["ref"] == g.id("m-csv") and m["reason"] == "stale" and "d4e5f6" in m["detail"] for m in marks)
    bound = runner.invoke(app, [*base, "--policy", str(policy), "--agent", "router", "--call-type", "routing"])
    asm_id = next(w for w in (bound.stdout + bound.stderr).split() if w.startswith("asm_"))
    with Ledger.open(url) as ledger:
        from ctxledger.policy.loader import load_policy

        manifest, mismatch = ledger.replay(ledger.get_assembly(asm_id), policy=load_policy(policy))
    assert mismatch is None and manifest is not None
    assert manifest["contract"]["agent"] == "router" and manifest["budget"]["input"] == 2000
    assert manifest["budget"]["requested"]["input"] > 2000  # what the caller asked, before the contract's cap
    assert g.id("m-csv") in {e["ref"] for e in manifest["omitted"]}


def test_assemble_rejects_malformed_request_options(runner: CliRunner, tmp_path: Path) -> None:
    """A bad --scope pair or --now time is an input error naming the option (exit code 2), nothing assembled."""
    url, _, g = _contract_store(tmp_path)
    for args, option in ((["--scope", "user_id"], "--scope"), (["--now", "yesterday"], "--now")):
        result = runner.invoke(app, ["--db", url, "assemble", g.conversation_id, *args])
        assert result.exit_code == 2 and option in result.output, result.output
    with Ledger.open(url) as ledger:
        assert ledger.store.list_assemblies("default", g.conversation_id) == []


def test_explain_ref_prints_the_chain(runner: CliRunner, tmp_path: Path) -> None:
    """`explain ASSEMBLY REF` prints the chain: record → sources → branch → visibility → policy → stage."""
    url, _, g = _contract_store(tmp_path)
    out = tmp_path / "p.json"
    result = runner.invoke(app, ["--db", url, "assemble", g.conversation_id, "--out", str(out)])
    asm_id = next(w for w in result.stdout.split() if w.startswith("asm_"))
    why = runner.invoke(app, ["--db", url, "explain", asm_id, g.id("m-csv")])
    assert why.exit_code == 0, why.output
    flat = _flat(why.stdout)
    assert f"derived from {g.id('art-csv')}" in flat and "under policy ctxledger-default version" in flat
    assert "admitted by stage" in flat


def _branched_store(tmp_path: Path) -> tuple[str, dict[str, int]]:
    """A SQLite store with conversation inc-1: main, and planB forked after the third record of main."""
    from datetime import UTC, datetime

    url = f"sqlite:///{tmp_path / 'b.db'}"
    with Ledger.open(url) as ledger:
        rec = ledger.recorder("inc-1", clock=datetime(2026, 9, 1, 9, 0, tzinfo=UTC))
        lead = rec.participant("lead")
        rec.system("You are the incident lead.")
        rec.user("What broke?")
        fork = rec.assistant("Looking.", owner=lead)
        plan_b = rec.branch("planB", fork_after=fork)
        rec.user("Try plan B.")
        seqs = {"planB": rec.seq(plan_b), "head": ledger.store.head_seq("default", "inc-1")}
    return url, seqs


def test_assemble_a_snapshot_before_the_branch_or_past_the_head_is_a_clean_input_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    """--snapshot before planB existed, or past the head: exit 2 naming as_of_seq, not a provider-contract error."""
    url, seqs = _branched_store(tmp_path)
    base = ["--db", url, "assemble", "inc-1", "--now", "2026-09-01T10:00Z"]
    early = runner.invoke(app, [*base, "--branch", "inc-1/planB", "--snapshot", "3"])
    assert early.exit_code == 2, early.output
    flat = _flat(early.stderr)
    assert f"branch inc-1/planB begins at seq {seqs['planB']}" in flat and "as_of_seq" in flat
    assert "nothing to send" not in flat and "Traceback" not in early.output
    past = runner.invoke(app, [*base, "--snapshot", "9999"])
    assert past.exit_code == 2 and f"past the head of conversation inc-1 (seq {seqs['head']})" in _flat(past.stderr)
    ok = runner.invoke(app, [*base, "--branch", "inc-1/planB", "--snapshot", str(seqs["planB"])])
    assert ok.exit_code == 0, ok.output


def test_assemble_names_an_unknown_conversation_as_a_conversation(runner: CliRunner, tmp_path: Path) -> None:
    """`assemble nope` says the conversation is not found in the tenant (not 'record')."""
    url, _ = _branched_store(tmp_path)
    result = runner.invoke(app, ["--db", url, "assemble", "nope"])
    assert result.exit_code == 2
    assert "error: conversation 'nope' not found in tenant 'default'" in _flat(result.stderr)
    assert "ctxledger --db" in _flat(result.stderr) and "conversations lists" in _flat(result.stderr)


def test_assemble_warns_about_contract_options_without_contracts_and_resolves_participant_names(
    runner: CliRunner, tmp_path: Path
) -> None:
    """--agent/--phase under the default policy print warnings; --participant lead is inc-1/participant/lead."""
    url, _ = _branched_store(tmp_path)
    args = ["--db", url, "assemble", "inc-1", "--now", "2026-09-01T10:00Z", "--participant", "lead"]
    result = runner.invoke(app, [*args, "--agent", "router", "--phase", "action"])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stderr)
    assert "warning: policy ctxledger-default@" in flat and "so agent 'router' had no effect" in flat
    assert "so phase 'action' had no effect" in flat and "unknown_participant" not in flat
    assert "no participant record" not in flat
    payload = json.loads(result.stdout)
    assert {"role": "assistant", "content": "Looking."} in payload["messages"]  # the lead's own turn, not relayed
    early = runner.invoke(app, [*args[:-4], "--now", "2026-08-01T00:00Z"])
    assert early.exit_code == 0 and "warning: now 2026-08-01T00:00:00+00:00 is earlier than" in _flat(early.stderr)


def test_blobs_option_puts_raw_outputs_where_asked_and_a_wrong_folder_warns(
    runner: CliRunner, tmp_path: Path, data_dir: Path
) -> None:
    """--blobs DIR holds the raw outputs; assembling with another folder warns instead of silently degrading."""
    url = f"sqlite:///{tmp_path / 'b.db'}"
    blobs = tmp_path / "shared-blobs"
    traj = data_dir / "mini-swe-agent-deepseek" / "marshmallow-code__marshmallow-1359.traj.json"
    result = runner.invoke(app, ["--db", url, "--blobs", str(blobs), "import", str(traj), "--conversation-id", "m"])
    assert result.exit_code == 0, result.output
    assert any(p.is_file() for p in blobs.rglob("*")) and not (tmp_path / "b.db.blobs").exists()
    ok = runner.invoke(app, ["--db", url, "--blobs", str(blobs), "assemble", "m", "--out", str(tmp_path / "p.json")])
    assert ok.exit_code == 0 and "could not be read" not in ok.output, ok.output
    wrong = runner.invoke(app, ["--db", url, "--blobs", str(tmp_path / "empty"), "assemble", "m", "--out", "-"])
    assert wrong.exit_code == 0, wrong.output
    assert "could not be read" in _flat(wrong.stderr) and "--blobs" in _flat(wrong.stderr)


def test_assemble_in_the_responses_format(runner: CliRunner, demo_store: DemoStore) -> None:
    """--format openai-responses prints a Responses request: instructions on top, client-side state."""
    args = ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--window", "12000", "--format", "openai-responses"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["instructions"] and payload["input"][0]["role"] == "user"
    assert (payload["store"], payload["truncation"]) == (False, "disabled")
    assert _manifest(demo_store.url, result)["api"] == "openai-responses"


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages", "openai-responses"])
def test_an_empty_conversation_is_nothing_to_send_and_exits_2(runner: CliRunner, tmp_path: Path, api: str) -> None:
    """A conversation imported with no turn assembles to a clear "nothing to send" error, exit 2, in every format."""
    url = f"sqlite:///{tmp_path / 'e.db'}"
    source = tmp_path / "empty.json"
    source.write_text('{"messages": []}', encoding="utf-8")
    imported = runner.invoke(app, ["--db", url, "import", str(source), "--conversation-id", "e"])
    assert imported.exit_code == 0, imported.output
    result = runner.invoke(app, ["--db", url, "assemble", "e", "--format", api, "--model", "claude-sonnet-4-5"])
    assert result.exit_code == 2, result.output
    assert "nothing to send" in _flat(result.stderr) and "Traceback" not in result.output


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages", "openai-responses"])
def test_without_model_the_payload_names_the_formats_own_model(
    runner: CliRunner, demo_store: DemoStore, api: str
) -> None:
    """No --model: an Anthropic payload names a Claude model, an OpenAI one gpt-4o, as Ledger.assemble does."""
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION, "--format", api])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["model"] == DEFAULT_MODELS[api]
    with Ledger.open(demo_store.url) as ledger:
        assert ledger.assemble(DEMO_CONVERSATION, api=api, persist=False).payload["model"] == DEFAULT_MODELS[api]


@pytest.mark.parametrize("last", ["checkpoint", "tool_exchange", "message"])
def test_explain_says_what_the_protected_latest_step_is(runner: CliRunner, tmp_path: Path, last: str) -> None:
    """The step kept as latest_step is named by what it is: a checkpoint is not called a tool exchange."""
    url = f"sqlite:///{tmp_path / 'steps.db'}"
    with Ledger.open(url) as ledger:
        rec = ledger.recorder("steps")
        rec.user("Find my booking and hold it.")
        rec.tool_call("lookup", {"id": "b1"}, output='{"booking": "b1"}')
        if last == "checkpoint":
            rec.checkpoint("run-1", {"step": "found b1, holding next"})
        elif last == "tool_exchange":
            rec.tool_call("hold", {"id": "b1"}, output='{"held": true}')
        else:
            rec.assistant("Booking b1 found; holding it now.")
        asm = ledger.assemble("steps", window_tokens=8000, output_tokens=500, margin_tokens=100)
    step = next(e for e in asm.manifest["included"] if e["reason"] == "latest_step")  # a tool call or its result
    result = runner.invoke(app, ["--db", url, "explain", asm.id, step["ref"]])
    flat = _flat(result.stdout)
    assert result.exit_code == 0, result.output
    said = {"checkpoint": "here a checkpoint", "tool_exchange": "here a tool exchange", "message": "here a message"}
    assert f"latest_step: the agent's newest step after the latest user turn, {said[last]}" in flat, flat
    assert not any(phrase in flat for kind, phrase in said.items() if kind != last)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.integers(0, 3000), end=st.integers(0, 3000))
def test_rehydrate_refuses_a_bad_range_in_the_library_s_words(
    runner: CliRunner, demo_store: DemoStore, start: int, end: int
) -> None:
    """``--bytes START:END`` past the end or reversed is refused with the problem ``Ledger.rehydrate`` states."""
    with Ledger.open(demo_store.url) as ledger:
        refs = [e["ref"] for e in demo_store.manifest["omitted"]]
        artifact = next(r for r in refs if isinstance(ledger.store.get("default", r), ToolArtifact))
        try:
            expected: bytes | str = ledger.rehydrate(artifact, (start, end))
        except InputError as exc:
            expected = exc.problem
    answer = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact, "--bytes", f"{start}:{end}"])
    if isinstance(expected, bytes):
        assert answer.exit_code == 0 and answer.stdout_bytes == expected
        return
    assert answer.exit_code == 2
    assert expected in " ".join(answer.stderr.split())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bound=st.integers(0, 3000), open_end=st.booleans())
def test_rehydrate_reads_an_open_bound_as_the_service_does(
    runner: CliRunner, demo_store: DemoStore, bound: int, open_end: bool
) -> None:
    """``--bytes START:`` and ``:END`` mean what HTTP's missing ``end`` / ``start`` mean: to the end, from 0."""
    span = (bound, None) if open_end else (None, bound)
    with Ledger.open(demo_store.url) as ledger:
        refs = [e["ref"] for e in demo_store.manifest["omitted"]]
        artifact = next(r for r in refs if isinstance(ledger.store.get("default", r), ToolArtifact))
        try:
            expected: bytes | str = ledger.rehydrate(artifact, span)
        except InputError as exc:
            expected = exc.problem
    typed = f"{bound}:" if open_end else f":{bound}"
    answer = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact, "--bytes", typed])
    if isinstance(expected, bytes):
        assert answer.exit_code == 0, answer.output
        assert answer.stdout_bytes == expected
        return
    assert answer.exit_code == 2 and expected in " ".join(answer.stderr.split())
