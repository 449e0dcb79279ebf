"""Policies cannot silently switch off safety: mandatory stages, validated settings, checked custom stages."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

import ctxledger
from ctxledger.cli import app
from ctxledger.errors import InvalidSetting, PolicyError, PolicyFileError
from ctxledger.ledger import Ledger
from ctxledger.policy import Policy, SelectionParams, default_policy, loads_policy
from ctxledger.policy.safety import SAFETY_STAGES
from ctxledger.policy.stages import STAGES, PrivacyStage, ScopeStage, SecretsStage, ValidityStage
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
HEAD = '[policy]\nname = "p"\nversion = "1"\n'
ALL = ", ".join(f'"{s}"' for s in STAGES)

STAGE_MODULE = textwrap.dedent(
    '''
    from ctxledger.policy import Outcome, PolicyDecision


    class Tamper:
        """Decides about the records whose external id is listed, as configured."""

        name = "tamper"
        version = "1"

        def __init__(self, targets=(), reason="out_of_scope", outcome="omit", stage=None, boom=False, refs=()):
            self.targets, self.reason, self.outcome, self.stage, self.boom = targets, reason, outcome, stage, boom
            self.refs = refs

        def config(self):
            return {"targets": list(self.targets), "reason": self.reason, "outcome": self.outcome, "refs": self.refs}

        def __call__(self, ctx):
            if self.boom:
                raise RuntimeError("boom in a custom stage")
            for ref in self.refs:  # decided about as given, candidate or not
                yield PolicyDecision(ref, self.name, self.outcome, self.reason, "by ref")
            for rec in ctx.records:
                if rec.external_id in self.targets:
                    yield PolicyDecision(rec.id, self.stage or self.name, self.outcome, self.reason, "tampered")


    class Misnamed(Tamper):
        name = "something_else"
    '''
)


@pytest.fixture
def tamper_module(tmp_path, monkeypatch):
    """A module ``tamper_stages`` with the ``Tamper`` custom stage, importable for this test."""
    (tmp_path / "tamper_stages.py").write_text(STAGE_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "tamper_stages", raising=False)
    return tmp_path


def _tamper_policy(**settings):
    order = list(STAGES)
    order.insert(order.index("secrets"), "tamper")
    config = "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    text = (
        f'{HEAD}stages = {json.dumps(order)}\n[stage_classes]\ntamper = "tamper_stages:Tamper"\n'
        f"[stages.tamper]\n{config}"
    )
    return loads_policy(text, source="tamper.toml", allow_modules=["tamper_stages"])


def _history(policy=None):
    ledger = Ledger(MemoryStore(), policy=policy)
    g = GraphBuilder(ledger, "t")
    g.system("sys", "You are a release assistant.")
    g.user("u1", "Ship version 2.")
    g.assistant("a1", f"Using token {GITHUB_TOKEN} for the push.")
    g.assistant("a2", "Tagged v2.0.0.")
    g.user("u2", "Thanks, what is next?")
    return ledger, g


def _assemble(ledger, g, **kw):
    return ledger.assemble(g.conversation_id, api="openai-chat", now=g.now, **kw)


# -- 1. built-in names cannot be shadowed ------------------------------------------------------------------


def test_stage_classes_cannot_shadow_a_builtin_stage(tamper_module):
    """[stage_classes] secrets = … is refused (it replaced the secret scanner and leaked a token)."""
    with pytest.raises(PolicyFileError) as info:
        loads_policy(
            f'{HEAD}[stage_classes]\nsecrets = "tamper_stages:Tamper"\n',
            source="shadow.toml",
            allow_modules=["tamper_stages"],
        )
    assert info.value.field == "stage_classes.secrets" and "built-in stage" in str(info.value)
    with pytest.raises(PolicyFileError) as named:
        loads_policy(
            f'{HEAD}stages = [{ALL}, "x"]\n[stage_classes]\nx = "tamper_stages:Misnamed"\n',
            source="m.toml",
            allow_modules=["tamper_stages"],
        )
    assert named.value.field == "stage_classes.x" and "'something_else'" in str(named.value)


def test_python_policy_cannot_replace_a_builtin_by_name():
    """A custom object named like a built-in stage is refused in Policy(...) too."""

    class FakeSecrets:
        name, version = "secrets", "1"

        def config(self):
            return {}

        def __call__(self, ctx):
            return []

    stages = tuple(FakeSecrets() if s.name == "secrets" else s for s in default_policy().stages)
    with pytest.raises(PolicyError, match="not the built-in SecretsStage"):
        Policy("p", "1", stages)


# -- 2. safety stages are mandatory; opting out is explicit and recorded -----------------------------------


@pytest.mark.parametrize("left_out", SAFETY_STAGES)
def test_every_safety_stage_is_mandatory(left_out):
    """Leaving any safety stage out of [policy].stages is an error naming it and the opt-out."""
    order = ", ".join(f'"{s}"' for s in STAGES if s != left_out)
    with pytest.raises(PolicyFileError) as info:
        loads_policy(f"{HEAD}stages = [{order}]\n", source="p.toml")
    assert info.value.field == "policy.stages"
    assert f"'{left_out}'" in info.value.problem and f'unsafe_without = ["{left_out}"]' in info.value.problem


def test_empty_or_partial_stage_lists_are_refused():
    """stages = [] and a list without the filters no longer load (they sent tokens and private messages)."""
    for order in ("[]", '["lineage", "visibility", "protection"]'):
        with pytest.raises(PolicyFileError, match="leaves out the safety stage"):
            loads_policy(f"{HEAD}stages = {order}\n")
    with pytest.raises(PolicyError, match="leaves out the safety stage"):
        Policy("p", "1", (ScopeStage(),))


def test_unsafe_without_opts_out_explicitly_hashed_and_in_the_manifest():
    """An explicit opt-out loads, changes the hash, and every manifest made under it records it."""
    order = ", ".join(f'"{s}"' for s in STAGES if s != "secrets")
    policy = loads_policy(f'{HEAD}stages = [{order}]\nunsafe_without = ["secrets"]\n')
    full = loads_policy(HEAD)
    assert policy.unsafe_without == ("secrets",) and policy.describe()["unsafe_without"] == ["secrets"]
    assert policy.hash != full.hash and "unsafe_without" not in full.describe()
    ledger, g = _history(policy)
    asm = _assemble(ledger, g)
    block = {k: v for k, v in asm.manifest["policy"].items() if k != "relevance"}
    assert block == {"name": "p", "version": "1", "hash": policy.hash, "unsafe_without": ["secrets"]}
    assert GITHUB_TOKEN in json.dumps(asm.payload)  # the opt-out is real: the scanner did not run
    safe = _assemble(*_history(full))
    assert "unsafe_without" not in safe.manifest["policy"] and GITHUB_TOKEN not in json.dumps(safe.payload)


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ('unsafe_without = ["secrets"]\n', "policy.unsafe_without", "is in policy.stages"),
        ('unsafe_without = ["compaction"]\n', "policy.unsafe_without", "not a safety stage"),
        ('unsafe_without = "secrets"\n', "policy.unsafe_without", "list of stage names"),
        ("unsafe_withou = []\n", "policy.unsafe_withou", "unknown key"),
    ],
)
def test_unsafe_without_names_only_left_out_safety_stages(extra, field, words):
    """unsafe_without must be a list of safety stages that the stage list really leaves out; typos are caught."""
    with pytest.raises(PolicyFileError) as info:
        loads_policy(HEAD + extra)
    assert info.value.field == field and words in info.value.problem


def test_duplicate_stages_and_duplicate_contracts_are_errors():
    """A stage listed twice, or two contracts for the same agent and call type, are refused."""
    with pytest.raises(PolicyFileError) as stage:
        loads_policy(f'{HEAD}stages = ["scope", {ALL}]\n')
    assert stage.value.field == "policy.stages" and "'scope' is listed twice" in stage.value.problem
    contract = '[[contracts]]\nagent = "r"\ncall_type = "routing"\nsources = ["{}"]\n'
    with pytest.raises(PolicyFileError) as dup:
        loads_policy(HEAD + contract.format("instructions") + contract.format("conversation"))
    assert dup.value.field == "contracts[1]" and "contracts[0]" in dup.value.problem


# -- 3. declared custom stages must run; the README's example runs its custom stage ------------------------


def test_declared_but_unlisted_custom_stage_is_an_error(tamper_module):
    """A [stage_classes] entry that [policy].stages does not list would never run: the error says where to list it."""
    with pytest.raises(PolicyFileError) as info:
        loads_policy(
            f'{HEAD}[stage_classes]\ntamper = "tamper_stages:Tamper"\n',
            source="p.toml",
            allow_modules=["tamper_stages"],
        )
    assert info.value.field == "stage_classes.tamper" and "write [policy].stages" in info.value.problem
    with pytest.raises(PolicyFileError) as listed:
        loads_policy(
            f'{HEAD}stages = [{ALL}]\n[stage_classes]\ntamper = "tamper_stages:Tamper"\n',
            allow_modules=["tamper_stages"],
        )
    assert listed.value.field == "stage_classes.tamper" and "add it to [policy].stages" in listed.value.problem


def test_readme_policy_example_loads_and_runs_its_custom_stage(tmp_path, monkeypatch, readme_block):
    """The README's policy (TOML and YAML) and its acme/ctx.py stage, taken from README.md itself, work together."""
    package = tmp_path / "acme"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "ctx.py").write_text(readme_block("python", "class NoPiiInRouting"), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("acme", "acme.ctx"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    policy = ctxledger.loads_policy(
        readme_block("toml", "[stage_classes]"), source="README.toml", allow_modules=["acme"]
    )
    yml = ctxledger.loads_policy(
        readme_block("yaml", "stage_classes:"), source="README.yaml", syntax="yaml", allow_modules=["acme"]
    )
    assert yml.hash == policy.hash and "no_pii_in_routing" in [s.name for s in policy.stages]
    ledger = Ledger(MemoryStore(), policy=policy)
    g = GraphBuilder(ledger, "t")
    g.system("sys", "You are a support agent.")
    g.user("u1", "My address for invoices is jane.doe@example.com, please note it.")
    g.assistant("a1", "Noted.")
    g.user("u2", "Send me jane.doe@example.com's last invoice.")
    asm = _assemble(ledger, g)
    omitted = {e["ref"]: (e["stage"], e["reason"]) for e in asm.manifest["omitted"]}
    assert omitted[g.id("u1")] == ("no_pii_in_routing", "custom:pii")
    assert g.id("u2") in {e["ref"] for e in asm.manifest["included"]}  # the latest user turn is protected


def test_load_policy_is_importable_from_the_package():
    """from ctxledger import load_policy works (the README's import)."""
    from ctxledger import load_policy

    assert load_policy is ctxledger.policy.load_policy


# -- 4. every built-in setting is validated ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "field", "words"),
    [
        ('[stages.validity]\nstale_actions = {volatile = "x"}\n', "stages.validity.stale_actions.volatile", "'mark'"),
        ('[stages.validity]\nstale_actions = {weekly = "omit"}\n', "stages.validity.stale_actions.weekly", "freshness"),
        ("[stages.validity]\nttl_seconds = {volatile = -1}\n", "stages.validity.ttl_seconds.volatile", "> 0"),
        ('[stages.validity]\nconflicts = "ignore"\n', "stages.validity.conflicts", "'flag', 'prefer_trusted'"),
        ('[stages.secrets]\naction = "shrug"\n', "stages.secrets.action", "'omit', 'redact'"),
        ("[stages.secrets]\nplugins = []\n", "stages.secrets.plugins", "unsafe_without"),
        ('[stages.secrets]\nplugins = ["NoSuchDetector"]\n', "stages.secrets.plugins", "unknown value"),
        ('[stages.scope]\nkeys = "app"\n', "stages.scope.keys", "list of strings"),
        ('[stages.trust]\nevidence_tags = "evidence"\n', "stages.trust.evidence_tags", "list of strings"),
        ('[stages.privacy]\nallow = "public"\n', "stages.privacy.allow", "must be a table"),
        ('[stages.privacy]\nroutes = "google"\n', "stages.privacy.routes", "must be a table"),
        ('[stages.privacy]\nroutes = { google = "vertex" }\n', "stages.privacy.routes.google", "list of strings"),
        ('[stages.privacy]\nallow = { "*" = ["public", "nonexistent"] }\n', "stages.privacy.allow.*", "unknown value"),
        ('[stages.protection]\ndetect_wording = "yes"\n', "stages.protection.detect_wording", "true or false"),
        ("[selection]\nclass_caps = { nonsense = 0.5 }\n", "selection.class_caps.nonsense", "unknown key"),
        ("[selection]\nclass_caps = { operational = 7 }\n", "selection.class_caps.operational", "<= 1"),
        ("[selection]\nclass_caps = { operational = 0 }\n", "selection.class_caps.operational", "> 0"),
        ("[selection]\nw_relevance = -3\n", "selection.w_relevance", ">= 0"),
        ("[selection]\nquestion_weights = [1, 2]\n", "selection.question_weights", "3 weights"),
        ("[selection]\nneighbour_decay = 2\n", "selection.neighbour_decay", "<= 1"),
        ("[rehydration]\nmax_bytes = -5\n", "rehydration.max_bytes", "> 0"),
        ("[rehydration]\nmax_artifact_bytes = 0\n", "rehydration.max_artifact_bytes", "> 0"),
        ('[[contracts]]\nagent = "r"\nmax_input_tokens = "lots"\n', "contracts[0].max_input_tokens", "integer"),
        ("[[contracts]]\nclass_caps = { planning = 1.5 }\n", "contracts[0].class_caps.planning", "<= 1"),
        ('[[contracts]]\ntools = { investigation = "search" }\n', "contracts[0].tools.investigation", "list"),
    ],
)  # fmt: skip
def test_bad_settings_are_policy_file_errors_naming_the_field(table, field, words):
    """Enums, class caps, weights, byte budgets, lists and tables are validated; never a raw AttributeError."""
    with pytest.raises(PolicyFileError) as info:
        loads_policy(HEAD + table, source="bad.toml")
    assert info.value.field == field and info.value.source == "bad.toml"
    assert words in info.value.problem and "bad.toml" in str(info.value)


def test_stage_constructors_validate_in_python_too():
    """The same checks guard stages built in Python, naming the stage and the setting."""
    with pytest.raises(InvalidSetting) as info:
        ValidityStage(stale_actions={"volatile": "explode"})
    assert (info.value.owner, info.value.setting) == ("validity", "stale_actions.volatile")
    with pytest.raises(InvalidSetting, match=r"scope\.keys"):
        ScopeStage(keys="app")
    with pytest.raises(InvalidSetting, match=r"privacy\.allow"):
        PrivacyStage(allow="public")  # type: ignore[arg-type]
    with pytest.raises(InvalidSetting, match=r"secrets\.action"):
        SecretsStage(action="shrug")
    with pytest.raises(InvalidSetting, match=r"selection\.class_caps\.nonsense"):
        SelectionParams(class_caps={"nonsense": 0.5})
    assert ValidityStage(stale_actions={"volatile": "mark"}).stale_actions["volatile"] == "mark"


# -- 5. custom stages are checked at run time --------------------------------------------------------------


def test_custom_stage_with_an_unknown_reason_code_fails_naming_stage_and_code(tamper_module):
    """An omission reason outside the built-in codes is refused; a custom: code is accepted and recorded."""
    ledger, g = _history(_tamper_policy(targets=["a2"], reason="i_made_this_up"))
    with pytest.raises(PolicyError) as info:
        _assemble(ledger, g)
    assert "'tamper'" in str(info.value) and "'i_made_this_up'" in str(info.value)
    ledger, g = _history(_tamper_policy(targets=["a2"], reason="custom:release_noise"))
    asm = _assemble(ledger, g)
    entry = next(e for e in asm.manifest["omitted"] if e["ref"] == g.id("a2"))
    assert (entry["stage"], entry["reason"]) == ("tamper", "custom:release_noise")


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"targets": ["a2"], "outcome": "explode"}, "outcome 'explode'"),
        ({"targets": ["a2"], "stage": "secrets"}, "another stage's name, 'secrets'"),
    ],
)
def test_custom_stage_decisions_must_be_well_formed(tamper_module, settings, words):
    """A decision with an unknown outcome, or under another stage's name, is refused."""
    ledger, g = _history(_tamper_policy(**settings))
    with pytest.raises(PolicyError, match=words):
        _assemble(ledger, g)


@pytest.mark.parametrize(("target", "why"), [("sys", "instruction"), ("u2", "latest_user_turn")])
def test_custom_stage_cannot_omit_instructions_or_the_latest_user_turn(tamper_module, target, why):
    """Omitting the system prompt or the latest user turn is refused, naming the stage; other records may go."""
    ledger, g = _history(_tamper_policy(targets=[target]))
    with pytest.raises(PolicyError) as info:
        _assemble(ledger, g)
    assert "'tamper'" in str(info.value) and f"({why})" in str(info.value) and g.id(target) in str(info.value)
    ledger, g = _history(_tamper_policy(targets=["u1"]))
    asm = _assemble(ledger, g)
    assert any(e["ref"] == g.id("u1") and e["stage"] == "tamper" for e in asm.manifest["omitted"])


@pytest.mark.parametrize("ref", ["t/nope", "other-conversation/1", "tools/not_exposed"])
def test_custom_stage_decision_about_a_non_candidate_is_a_policy_error_naming_it(tamper_module, ref):
    """A decision naming no candidate record (a typo, another conversation) or no exposed tool is refused."""
    ledger, g = _history(_tamper_policy(refs=[ref], outcome="mark"))
    with pytest.raises(PolicyError) as info:
        _assemble(ledger, g)
    assert "'tamper'" in str(info.value) and f"{ref!r}, which is not a candidate of this call" in str(info.value)


def test_custom_stage_may_decide_about_candidates_and_exposed_tools(tamper_module):
    """Record ids of the call and tools/<name> of an exposed tool are accepted refs."""
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    ledger, g = _history(_tamper_policy(refs=["t/a2", "tools/lookup"], outcome="mark", reason="custom:seen"))
    asm = _assemble(ledger, g, tools=[tool])
    marked = {(m["ref"], m["stage"]) for m in asm.manifest["marks"]}
    assert {("t/a2", "tamper"), ("tools/lookup", "tamper")} <= marked


def test_exception_in_a_custom_stage_is_a_policy_error_naming_it(tamper_module):
    """A crash inside a custom stage becomes a PolicyError that names the stage and chains the cause."""
    ledger, g = _history(_tamper_policy(boom=True))
    with pytest.raises(PolicyError, match="policy stage 'tamper' failed: RuntimeError: boom") as info:
        _assemble(ledger, g)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_cli_prints_a_failing_custom_stage_cleanly(tamper_module, tmp_path):
    """The CLI reports a crashing custom stage in one line and exits with 2, without a traceback."""
    db = f"sqlite:///{tmp_path / 'h.db'}"
    _, g = _history()
    with Ledger.open(db) as target:
        target.append(list(g.records.values()))
    order = list(STAGES)
    order.insert(order.index("secrets"), "tamper")
    policy = tmp_path / "p.toml"
    policy.write_text(
        f'{HEAD}stages = {json.dumps(order)}\n[stage_classes]\ntamper = "tamper_stages:Tamper"\n'
        "[stages.tamper]\nboom = true\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app,
        ["--db", db, "assemble", g.conversation_id, "--policy", str(policy), "--allow-stage-module", "tamper_stages"],
    )
    assert result.exit_code == 2, result.output
    assert "policy stage 'tamper' failed: RuntimeError: boom" in result.output
    assert "Traceback" not in result.output
