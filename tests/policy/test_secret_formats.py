"""The scanner's prefilter never hides a detect-secrets plugin's format; blocks, escapes and assignments are found.

Seed 000 (a credential stays with the server that uses it). The formats are generated from the plugins' own
regexes (their ``denylist``), so a plugin update that adds a format is covered without editing this file.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxledger.policy.secrets import (
    DEFAULT_PLUGINS,
    FORMAT_GATES,
    SecretScanner,
    default_scanner,
    describe,
    plugin_formats,
    redact,
)

FORMATS = [(name, rx) for name, patterns in plugin_formats(DEFAULT_PLUGINS) for rx in patterns]


def _plugin_finds(text: str) -> bool:
    """Whether detect-secrets itself, with the default plugins, finds a secret on this one line."""
    scanner = default_scanner()
    with_plugins = scanner._detector()  # configures detect-secrets with the default plugins
    return any(True for _ in with_plugins(text))


def _format_matches() -> st.SearchStrategy[tuple[str, str]]:
    """``(plugin, a one-line match of one of its format regexes)``."""
    return st.sampled_from(FORMATS).flatmap(
        lambda f: st.tuples(st.just(f[0]), st.from_regex(f[1], fullmatch=True).filter(lambda s: "\n" not in s))
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=_format_matches(), escape=st.sampled_from(["plain", "json", "double_json"]))
@example(case=("NpmDetector", "//0/:_authToken=\rnpm_0"), escape="json")  # an escaped \r inside the match
def test_every_plugin_format_passes_the_prefilter(case, escape):
    """The plugin's gate matches in every match of its format regexes, and what the plugin finds on a line the
    scanner finds too: plain, and inside a JSON string after an escape (no word boundary before it)."""
    plugin, found = case
    assert re.search(FORMAT_GATES[plugin], found), (plugin, found)
    if _plugin_finds(found):
        text = {
            "plain": found,
            "json": json.dumps({"log": "started\n" + found}),
            "double_json": json.dumps({"out": json.dumps({"log": "started\n" + found})}),
        }[escape]
        assert SecretScanner().scan(text), (plugin, text)


def test_every_default_plugin_with_formats_has_a_gate():
    """A plugin missing from the gate table would run on every line: keep the table whole."""
    assert {name for name, _ in plugin_formats(DEFAULT_PLUGINS)} <= set(FORMAT_GATES)
    assert not SecretScanner()._ungated


B64 = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", min_size=8, max_size=64)


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["RSA ", "EC ", "OPENSSH ", "DSA ", "ENCRYPTED ", ""]),
    body=st.lists(B64, min_size=1, max_size=12),
    before=st.lists(st.sampled_from(["log start", "ok", "{", "cat id_rsa"]), max_size=3),
    after=st.lists(st.sampled_from(["done", "}", "exit 0"]), max_size=3),
    closed=st.booleans(),
)
def test_a_private_key_block_is_withheld_whole(kind, body, before, after, closed):
    """Every line from BEGIN to END (or to the end of an unterminated block) is withheld; the rest is kept."""
    block = [f"-----BEGIN {kind}PRIVATE KEY-----", *body] + ([f"-----END {kind}PRIVATE KEY-----"] if closed else [])
    lines = [*before, *block, *(after if closed else [])]
    text = "\n".join(lines)
    out = redact(text, SecretScanner().scan(text))
    for line in body:
        assert line not in out.splitlines()
    assert out.splitlines()[: len(before)] == before
    if closed:
        assert out.splitlines()[len(before) + len(block) :] == after
    assert "Private Key" in describe(SecretScanner().scan(text))


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.sampled_from(["", "export ", "  ", "set "]),
    name=st.sampled_from(
        ["DB_PASSWORD", "FOO_API_KEY", "API_KEY", "aws_secret_access_key", "GITHUB_TOKEN", "client_secret", "pass"]
    ),
    op=st.sampled_from(["=", " = ", ": ", ":="]),
    value=st.text(
        alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789/+", min_size=8, max_size=40
    ).filter(lambda v: re.search(r"\d", v) and not v.startswith("/")),
    escape=st.sampled_from(["plain", "json", "double_json", "percent"]),
)
def test_an_unquoted_assignment_is_found_plain_and_escaped(prefix, name, op, value, escape):
    """``.env`` lines, credentials files and YAML, as they are and hidden behind escapes."""
    line = f"{prefix}{name}{op}{value}"
    text = {
        "plain": f"# settings\n{line}\n",
        "json": json.dumps({"stdout": f"loaded\n{line}"}),
        "double_json": json.dumps({"result": json.dumps({"stdout": f"loaded\n{line}"})}),
        "percent": "GET /?q=1%0A" + line.replace("=", "%3D"),
    }[escape]
    found = SecretScanner().scan(text)
    assert found, text
    assert value not in redact(text, found)


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=1000",
        "token_budget = 8000",
        "tokenizer=cl100k_base",
        "PWD=/home/user/project",
        "password=${DB_PASSWORD}",
        "API_KEY=<your key here>",
        "secret: true",
        "Token: expired",
        "password = %(password)s",
        "passed=17 failed=0",
        "The token budget is 8000 tokens and the password policy says twelve characters.",
    ],
)
def test_assignments_of_placeholders_numbers_and_prose_are_not_secrets(text):
    assert SecretScanner().scan(text) == ()


@pytest.mark.parametrize(
    "text",
    [
        '{"log": "line1\\nsk-proj-' + "a1B2" * 12 + '"}',
        '{"log": "x\\n\\u0073k-proj-' + "a1B2" * 12 + '"}',
        "github_pat_11ABCDEFG0123456789abc_" + "Zz9" * 20,
        "hf_" + "aB3" * 12,
    ],
)
def test_escape_hidden_and_newer_formats_are_found(text):
    assert SecretScanner().scan(text)
