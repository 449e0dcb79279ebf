"""A policy file cannot run code it was not allowed to, and hostile TOML or YAML is a PolicyFileError.

Custom stages load only from modules the caller allows (``allow_modules``; the CLI's
``--allow-stage-module``); the check comes before any import.
"""

from __future__ import annotations

import contextlib
import json
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import PolicyFileError
from ctxledger.policy.loader import MAX_DEPTH, load_policy, loads_policy
from ctxledger.policy.stages import STAGES

HEAD = '[policy]\nname = "p"\nversion = "1"\n'
MODULE = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")

class Extra:
    name = "extra"
    version = "1"
    def config(self):
        return {{}}
    def __call__(self, ctx):
        return []
"""


@pytest.fixture
def side_effect_module(tmp_path, monkeypatch):
    """``evil_stages`` (and ``evil_stages.sub``): importing either writes a marker file."""
    marker = tmp_path / "imported.txt"
    pkg = tmp_path / "evil_stages"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(MODULE.format(marker=str(marker)), encoding="utf-8")
    (pkg / "sub.py").write_text(MODULE.format(marker=str(marker)), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("evil_stages", "evil_stages.sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return marker


def _policy(target: str) -> str:
    order = [*STAGES, "extra"]
    return f'{HEAD}stages = {json.dumps(order)}\n[stage_classes]\nextra = "{target}"\n'


@pytest.mark.parametrize("allowed", [(), ("evil",), ("other", "evil_stagesx"), ("evil_stages.sub",)])
def test_a_module_not_allowed_is_never_imported(side_effect_module, allowed):
    with pytest.raises(PolicyFileError) as info:
        loads_policy(_policy("evil_stages:Extra"), source="p.toml", allow_modules=allowed)
    assert info.value.field == "stage_classes.extra" and "not allowed" in str(info.value)
    assert "--allow-stage-module evil_stages" in str(info.value)
    assert not side_effect_module.exists()


@pytest.mark.parametrize(
    ("target", "allowed"), [("evil_stages:Extra", "evil_stages"), ("evil_stages.sub:Extra", "evil_stages")]
)
def test_an_allowed_module_and_its_submodules_load(side_effect_module, target, allowed, tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(_policy(target), encoding="utf-8")
    policy = load_policy(path, allow_modules=[allowed])
    assert policy.stage("extra") is not None and side_effect_module.exists()


def test_the_cli_flag_allows_a_module_and_without_it_the_command_exits_2(side_effect_module, tmp_path):
    from typer.testing import CliRunner

    from ctxledger import Ledger
    from ctxledger.cli import app

    url = f"sqlite:///{tmp_path / 'ctx.db'}"
    with Ledger.open(url) as ledger:
        r = ledger.recorder("c")
        r.system("Be brief.")
        r.user("hello")
    path = tmp_path / "p.toml"
    path.write_text(_policy("evil_stages:Extra"), encoding="utf-8")
    runner = CliRunner()
    refused = runner.invoke(app, ["--db", url, "assemble", "c", "--window", "8000", "--policy", str(path)])
    assert refused.exit_code == 2 and "not allowed" in refused.output and not side_effect_module.exists()
    args = [
        "--db",
        url,
        "assemble",
        "c",
        "--window",
        "8000",
        "--policy",
        str(path),
        "--allow-stage-module",
        "evil_stages",
    ]
    allowed = runner.invoke(app, args)
    assert allowed.exit_code == 0, allowed.output
    assert side_effect_module.exists()
    # the printed follow-up explains under the same policy, with the same allowed module; explain without the
    # flag is refused like assemble, with it the replay matches and the record is answered
    hint = next(line for line in allowed.output.splitlines() if line.startswith("explain it:"))
    assert f"--policy {path} --allow-stage-module evil_stages" in hint
    asm = hint.split(" explain ", 1)[1].split()[0]
    base = ["--db", url, "explain", asm, "c/1", "--policy", str(path)]
    assert runner.invoke(app, base).exit_code == 2
    explained = runner.invoke(app, [*base, "--allow-stage-module", "evil_stages"])
    assert explained.exit_code == 0, explained.output
    assert "INCLUDED c/1" in explained.output and "p@1" in explained.output


def _nest_toml(depth: int) -> str:
    return f"{HEAD}[selection]\nclass_caps = {'[' * depth}{']' * depth}\n"


@settings(max_examples=20, deadline=None)
@given(
    kind=st.sampled_from(["toml_deep", "yaml_deep", "toml_int", "yaml_int", "yaml_surrogate", "toml_surrogate"]),
    depth=st.integers(MAX_DEPTH + 1, 100_000),
    digits=st.integers(4301, 20_000),
    code=st.integers(0xD800, 0xDFFF),
)
def test_deep_nesting_huge_integers_and_lone_surrogates_are_policy_file_errors(kind, depth, digits, code):
    text, syntax = {
        "toml_deep": (_nest_toml(depth), "toml"),
        "yaml_deep": (
            "policy: {name: p, version: '1'}\nselection: {class_caps: " + "[" * depth + "]" * depth + "}\n",
            "yaml",
        ),
        "toml_int": (f"{HEAD}[rehydration]\nmax_bytes = {'9' * digits}\n", "toml"),
        "yaml_int": ("policy: {name: p, version: '1'}\nrehydration: {max_bytes: " + "9" * digits + "}\n", "yaml"),
        "yaml_surrogate": ('policy: {name: "p\\u' + f"{code:04x}" + '", version: "1"}\n', "yaml"),
        "toml_surrogate": (f'[policy]\nname = "p\\u{code:04x}"\nversion = "1"\n', "toml"),
    }[kind]
    with pytest.raises(PolicyFileError) as info:
        loads_policy(text, source="hostile", syntax=syntax)
    assert info.value.source == "hostile"


scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=12)
KEYS = ["policy", "name", "version", "stages", "selection", "rehydration", "contracts", "stage_classes",
        "unsafe_without", "scope", "keys", "secrets", "action", "plugins", "class_caps", "w_relevance", "agent",
        "call_type", "sources", "max_bytes", "retention"]  # fmt: skip
tables = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.dictionaries(st.sampled_from(KEYS), tables, max_size=5), head=st.booleans())
def test_generated_yaml_policies_load_or_raise_policy_file_errors(data, head):
    if head:
        data = {
            "policy": {
                "name": "p",
                "version": "1",
                **(data.get("policy") if isinstance(data.get("policy"), dict) else {}),
            },
            **{k: v for k, v in data.items() if k != "policy"},
        }
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        policy = loads_policy(text, source="gen.yaml", syntax="yaml")
    except PolicyFileError:
        return
    assert policy.hash


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("[]{}=\"'\\.,:\n #abcpolicynamevrsio0123456789ud8")), max_size=80))
def test_generated_toml_text_loads_or_raises_policy_file_errors(text):
    with contextlib.suppress(PolicyFileError):
        loads_policy(HEAD + text, source="gen.toml")
