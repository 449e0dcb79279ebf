"""The case-sensitive gate and assignment regexes on case-folded text find what the case-insensitive ones find.

:func:`ctxledger.policy.secrets._folded_regex` turns a ``(?i:…)`` gate alternative (and :data:`ASSIGNMENT`) into
a case-sensitive regex searched in the line's case-folded form (:func:`_folded`). Each test draws lines from
fragments of the words the gates name, in every case, beside the characters ``re.IGNORECASE`` equates with
ASCII letters (dotless i, long s, the Kelvin sign, dotted capital I), and compares the folded search with the
case-insensitive search of the line itself.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.policy.secrets import (
    _ASSIGNMENT_FOLDED,
    ASSIGNMENT,
    SecretScanner,
    _assigned_secret,
    _folded,
    _folded_regex,
    _matches,
)

FRAGMENTS = [
    "key", "KEY", "Key", "pass", "PASSWORD", "pwd", "Pw", "token", "TOKEN", "secret", "Secret", "api", "API_KEY",
    "apikey", "auth_key", "db_pass", "private_key", "credentials", "Contraseña", "CONTRASEÑA", "cloudant", "CL",
    "softlayer", "SL_", "aws", "AWS_SECRET_ACCESS_KEY", "xoxb-", "hooks.slack.com", "_", "-", ".", "=", ":", ":=",
    "=>", "::", " ", "  ", "\t", '"', "'", "]", "/", "~", "${", "<", "true", "none", "8000", "0x7f",
    "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", "Zq9_-", "s3cr3t!Value", "ı", "ſ", "\u212a", "İ", "ñ", "é",
]  # fmt: skip

LINES = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join)


def _case_insensitive_parts() -> list[tuple[re.Pattern[str], re.Pattern[str]]]:
    scanner = SecretScanner()
    out = []
    for _, _, regex, folded_regex in (*scanner._plugin_parts, *scanner._keyword_parts):
        if folded_regex is not None:
            out.append((regex, folded_regex))
    return out


PARTS = _case_insensitive_parts()


def test_every_case_insensitive_gate_part_has_a_folded_form() -> None:
    assert len(PARTS) >= 6
    assert _ASSIGNMENT_FOLDED is not None


@settings(max_examples=400, deadline=None)
@given(LINES)
def test_folded_gate_search_agrees_with_the_case_insensitive_search(line: str) -> None:
    folded = _folded(line)
    for regex, folded_regex in PARTS:
        want = regex.search(line)
        if folded is None:
            continue  # lower-casing moved offsets: the case-insensitive regex is searched instead
        got = folded_regex.search(folded)
        assert (got is None) == (want is None), (regex.pattern, line)
        if got is not None and want is not None:
            assert got.span() == want.span()


@settings(max_examples=400, deadline=None)
@given(LINES)
def test_folded_assignment_matches_are_the_case_insensitive_ones(line: str) -> None:
    folded = _folded(line)
    if folded is None:
        return
    assert _ASSIGNMENT_FOLDED is not None
    want = [m.span() for m in ASSIGNMENT.finditer(line)]
    assert [m.span() for m in _ASSIGNMENT_FOLDED.finditer(folded)] == want
    assert _assigned_secret(line, folded) == _assigned_secret(line)


@settings(max_examples=300, deadline=None)
@given(LINES)
def test_gate_matching_with_and_without_the_folded_form_agree(line: str) -> None:
    scanner = SecretScanner()
    folded = _folded(line)
    present = None if folded is None else frozenset(w for w in ("key", "pass", "pw", "secret", "token") if w in folded)
    for parts in (scanner._plugin_parts, scanner._keyword_parts):
        assert _matches(parts, line, present, folded) == _matches(parts, line, present)


def test_a_body_naming_an_upper_case_letter_or_a_code_has_no_folded_form() -> None:
    assert _folded_regex("(?i:[A-Z]x)") is None
    assert _folded_regex("(?i:aB)") is None
    assert _folded_regex(r"(?i:\x41)") is None
    assert _folded_regex(r"(?i:[\x41a-z])") is None
    assert _folded_regex("(?i:a)|b") is None
    assert _folded_regex("(?i:a(?-i:b))") is None
    assert _folded_regex("plain") is None
    assert _folded_regex(r"(?i:[a-zA-Z0-9_\-]{4}\S)") is not None
