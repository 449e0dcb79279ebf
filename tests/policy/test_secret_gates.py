"""The gated scan finds exactly what every detector on every line finds; AWS secret keys and encoded key ids.

Seed 000 (a credential stays with the server that uses it). :meth:`SecretScanner.scan` only looks at lines a
gate matches in; :meth:`SecretScanner.scan_full` gives every line and every decoded piece to every detector.
The texts are generated: secrets of every corpus format and of every plugin's format regex, lines of noise
that the old loose anchors let through (dots, colons, ``AC``/``SK``), keywords without values, escapes and
line separators.
"""

from __future__ import annotations

import base64
import json
import random
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from secret_corpus import FORMATS as CORPUS
from secret_corpus import draw

from ctxledger.policy.secrets import (
    _ESCAPES,
    ASSIGNMENT,
    ASSIGNMENT_WORDS,
    AWS_SECRET_KEY,
    AWS_SECRET_WORDS,
    DEFAULT_PLUGINS,
    EXTRA_GATES,
    EXTRA_LITERALS,
    EXTRA_PATTERNS,
    EXTRA_WORDS,
    FORMAT_GATES,
    KEYWORD_GATE,
    OWN_GATE,
    URL_AUTHORITY_GATE,
    URL_CREDENTIALS,
    SecretScanner,
    _folded,
    base64_key_id,
    plugin_formats,
    redact,
)

PLUGIN_FORMATS = {name: patterns for name, patterns in plugin_formats(DEFAULT_PLUGINS)}

NOISE = [
    "Ran 12 tests in 0.034s. OK.",
    "self.assertEqual(a.b.c, 3)",
    "time: 12:30:45 host: db.internal:5432",
    "ACME SKU ACK SKIP AC/DC sk-short",
    "key: value, token count: 17, password policy: strong",
    "The secret is that there is no secret.",
    "the aws region is us-east-1; aws s3 ls",
    "commit 3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f901",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "https://example.com/path?q=1&amp;r=2%20x",
    "path\\to\\file \\n literal",
    "",
    "    return x.y.z  # comment: note",
]


@st.composite
def _line(draw_):
    kind = draw_(st.sampled_from(["noise", "corpus", "format", "format", "aws", "encoded"]))
    if kind == "noise":
        return draw_(st.sampled_from(NOISE))
    if kind == "corpus":
        return draw(draw_(st.sampled_from(sorted(CORPUS))), draw_(st.integers(0, 999)))[0]
    if kind == "format":
        patterns = PLUGIN_FORMATS[draw_(st.sampled_from(sorted(PLUGIN_FORMATS)))]
        return draw_(st.from_regex(draw_(st.sampled_from(patterns)), fullmatch=True))
    rng = random.Random(draw_(st.integers(0, 10**6)))
    key_id = "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    secret = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+") for _ in range(40))
    if kind == "aws":
        return draw_(
            st.sampled_from(
                [f"aws_secret_access_key={secret}", f'"SecretAccessKey": "{secret}"', f"key_id = {key_id}",
                 f"secret = {secret}", f"AWS Secret Access Key [None]: {secret}"]
            )
        )  # fmt: skip
    return "data: " + base64.b64encode(draw_(st.sampled_from(["", "u:", "xy"])).encode() + key_id.encode()).decode()


@st.composite
def _text(draw_):
    lines = draw_(st.lists(_line(), min_size=1, max_size=6))
    wrap = draw_(st.sampled_from(["plain", "json", "crlf", "separator"]))
    if wrap == "json":
        return json.dumps({"stdout": "\n".join(lines), "status": "ok"})
    if wrap == "crlf":
        return "\r\n".join(lines)
    if wrap == "separator":
        return "\x1e".join(lines)
    return "\n".join(lines)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(text=_text())
def test_the_gated_scan_finds_what_every_detector_on_every_line_finds(text):
    scanner = SecretScanner()
    assert scanner.scan(text) == scanner.scan_full(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.sampled_from(NOISE), min_size=1, max_size=8))
def test_noise_that_passed_the_loose_anchors_holds_no_finding(lines):
    """Dots, colons, ``AC``/``SK``, hashes and commit ids are not secrets, by either path."""
    text = "\n".join(lines)
    scanner = SecretScanner()
    assert scanner.scan(text) == scanner.scan_full(text) == ()


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text",
    [
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        f"export aws_secret={AWS_SECRET}",
        f'{{"Credentials": {{"AccessKeyId": "ASIAIOSFODNN7EXAMPLE", "SecretAccessKey": "{AWS_SECRET}"}}}}',
        f"AWS Secret Access Key [None]: {AWS_SECRET}",
        f"aws_access_key_id = AKIAIOSFODNN7EXAMPLE\nother = {AWS_SECRET}",
        f'client = boto3.client("s3", "AKIAIOSFODNN7EXAMPLE", "{AWS_SECRET}")',
    ],
)
def test_a_bare_aws_secret_access_key_is_found(text):
    scanner = SecretScanner()
    found = scanner.scan(text)
    assert "AWS Secret Access Key" in {f.type for f in found}, found
    assert AWS_SECRET not in redact(text, found)


@pytest.mark.parametrize(
    "text",
    [
        "aws codecommit: merged 3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f901",
        "AWS key fingerprint 3F2A9C0D1E4B5A6978C0D1E2F3A4B5C6D7E8F901",
        f"{AWS_SECRET} without any context",
        "aws token sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "git checkout 3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f901, then aws s3 sync",
    ],
)
def test_commit_ids_hashes_and_values_without_context_are_not_aws_secret_keys(text):
    assert "AWS Secret Access Key" not in {f.type for f in SecretScanner().scan(text)}


@settings(max_examples=80, deadline=None)
@given(
    prefix=st.binary(max_size=5),
    suffix=st.binary(max_size=8),
    body=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16),
    head=st.sampled_from(["AKIA", "ASIA", "ABIA", "ACCA", "A3TX"]),
    urlsafe=st.booleans(),
    before=st.sampled_from(["", "data: ", "AWS_ACCESS_KEY_ID: ", "Authorization: Basic ", "x="]),
)
def test_a_base64_encoded_aws_key_id_is_found_at_every_alignment(prefix, suffix, body, head, urlsafe, before):
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    encoded = encode(prefix + (head + body).encode() + suffix).decode()
    assert base64_key_id(before + encoded)
    text = f"config:\n  {before}{encoded}\n"
    found = SecretScanner().scan(text)
    assert "AWS Access Key" in {f.type for f in found}
    assert encoded not in redact(text, found)


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(b"just some ordinary bytes, nothing to see here").decode(),
        "QUtJQ but too short",
        base64.b64encode(b"AKIA lowercase follows: abcdefghijklmnop").decode(),
    ],
)
def test_base64_without_a_key_id_is_not_one(text):
    assert not base64_key_id(text)


@pytest.mark.parametrize("plugin", sorted(PLUGIN_FORMATS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), noise=st.lists(st.sampled_from(NOISE), max_size=3), escaped=st.booleans())
def test_each_plugin_format_among_noise_is_found_by_the_gated_scan(plugin, data, noise, escaped):
    """Every plugin's formats, drawn for each plugin (not left to chance among all of them)."""
    pattern = data.draw(st.sampled_from(PLUGIN_FORMATS[plugin]))
    line = data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda s: "\n" not in s))
    text = "\n".join([*noise, line, *noise])
    text = json.dumps({"log": text}) if escaped else text
    scanner = SecretScanner()
    assert scanner.scan(text) == scanner.scan_full(text)


GATES = sorted({*FORMAT_GATES.values(), KEYWORD_GATE, OWN_GATE, _ESCAPES.pattern})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    data=st.data(),
    before=st.lists(st.sampled_from(NOISE), max_size=3),
    after=st.lists(st.sampled_from(NOISE), max_size=3),
    crlf=st.booleans(),
)
def test_the_whole_text_search_marks_every_line_a_gate_matches_in(data, before, after, crlf):
    """What a gate matches (the gates are split into literal-led searches of the whole text) is never skipped."""
    gate = data.draw(st.sampled_from(GATES))
    line = data.draw(st.from_regex(gate, fullmatch=False).filter(lambda s: not s.splitlines()[1:]))
    line = line.splitlines()[0] if line.splitlines() else line
    assume(re.search(gate, line))
    text = ("\r\n" if crlf else "\n").join([*before, line, *after])
    assert len(before) in SecretScanner()._candidates(text), (gate, line)


@pytest.mark.parametrize(
    "text",
    [
        "pa\u017fsword = 'hunter22x'",  # long s
        'api_\u212aey: "abcd1234efgh"',  # Kelvin sign
        "AWS_SECRET_ACCESS_\u212aEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "\u0130 token = 'abcdefgh12345678'\nsecond line",  # lower-casing changes the length
        "to\u0131ken=abcd1234efgh",
    ],
)
def test_letters_that_match_ascii_only_ignoring_case_do_not_slip_past_the_gates(text):
    scanner = SecretScanner()
    assert scanner.scan(text) == scanner.scan_full(text)


URL_FORMATS = [
    re.compile(URL_CREDENTIALS),
    *(p for name in ("BasicAuthDetector", "CloudantDetector") for p in PLUGIN_FORMATS[name] if "/" in p.pattern),
]
"""The formats that match a URL's authority (the plugins' regexes with their own flags)."""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), before=st.sampled_from(["", "see ", "https://example.com/a ", '"url": "']))
def test_every_credential_url_has_an_at_in_its_authority(data, before):
    """A URL format match holds a match of the authority gate, so links without ``user:password@`` are skipped."""
    pattern = data.draw(st.sampled_from(URL_FORMATS))
    line = before + data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda s: "\n" not in s))
    assert re.search(URL_AUTHORITY_GATE, line), line
    scanner = SecretScanner()
    assert scanner.scan(line) == scanner.scan_full(line)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/?=&.-_@", max_size=30),
    host=st.sampled_from(["api.example.com", "localhost:8080", "db.internal:5432", "API.SOFTLAYER.COM"]),
    scheme=st.sampled_from(["https", "http", "postgresql", "redis"]),
)
def test_links_without_credentials_give_what_every_detector_gives(path, host, scheme):
    line = f"GET {scheme}://{host}/{path} status=200"
    scanner = SecretScanner()
    assert scanner.scan(line) == scanner.scan_full(line)


OWN_FORMATS = [
    *(
        (re.compile(rx), EXTRA_LITERALS[name], EXTRA_WORDS.get(name), EXTRA_GATES.get(name))
        for name, rx in EXTRA_PATTERNS.items()
    ),
    (ASSIGNMENT, (), ASSIGNMENT_WORDS, None),
    (AWS_SECRET_KEY, (), AWS_SECRET_WORDS, None),
]
"""This module's own detectors: (regex, substrings each match holds, words one of which its folded form holds, a
regex that matches in each match)."""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), noise=st.sampled_from(NOISE))
def test_every_match_of_an_own_detector_passes_its_gate(data, noise):
    """Each own detector runs only where its literals or words occur; its matches always hold them."""
    pattern, literals, words, gate = data.draw(st.sampled_from(OWN_FORMATS))
    found = data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda s: "\n" not in s and "\r" not in s))
    assert all(literal in found for literal in literals), (literals, found)
    assert gate is None or re.search(gate, found), (gate, found)
    folded = _folded(found)
    if words is not None and folded is not None:
        assert any(w in folded for w in words), (words, found)
    if pattern is ASSIGNMENT:
        assert ":" in found or "=" in found
    line = f"{noise} {found}"
    scanner = SecretScanner()
    assert scanner.scan(line) == scanner.scan_full(line)
