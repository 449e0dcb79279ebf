"""A generated corpus of secrets: one generator per token format, and the channels a secret can arrive by.

Each format draws a fresh value from a seeded :class:`random.Random` (so a failure names its seed) and
returns ``(text, fingerprints)``: the text to place in a channel and the substrings that must never reach a
payload or a stored manifest (for a private key, every line of its base64 body).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"


def _draw(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _plain(prefix: str, n: int, alphabet: str = ALNUM) -> Callable[[random.Random], tuple[str, list[str]]]:
    def make(rng: random.Random) -> tuple[str, list[str]]:
        value = prefix + _draw(rng, n, alphabet)
        return value, [value]

    return make


def _private_key(kind: str) -> Callable[[random.Random], tuple[str, list[str]]]:
    def make(rng: random.Random) -> tuple[str, list[str]]:
        body = [_draw(rng, 64, B64) for _ in range(rng.randint(3, 8))]
        label = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
        text = "\n".join([f"-----BEGIN {label}-----", *body, f"-----END {label}-----"])
        return text, body

    return make


def _assignment(template: str, n: int = 24) -> Callable[[random.Random], tuple[str, list[str]]]:
    def make(rng: random.Random) -> tuple[str, list[str]]:
        value = _draw(rng, n, ALNUM + "/+")
        return template.format(value), [value]

    return make


def _url(rng: random.Random) -> tuple[str, list[str]]:
    password = _draw(rng, 12) + "!#"
    return f"postgresql://admin:{password}@db.internal:5432/prod", [password]


def _jwt(rng: random.Random) -> tuple[str, list[str]]:
    import base64
    import json

    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).decode().rstrip("=")
    claims = {"sub": _draw(rng, 10), "iat": rng.randint(10**9, 2 * 10**9)}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    token = f"{head}.{body}.{_draw(rng, 43, ALNUM + '-_')}"
    return token, [body]


FORMATS: dict[str, Callable[[random.Random], tuple[str, list[str]]]] = {
    "aws_access_key": _plain("AKIA", 16, string.ascii_uppercase + string.digits),
    "github_classic": _plain("ghp_", 36),
    "github_fine_grained": lambda rng: _plain("github_pat_11" + _draw(rng, 20) + "_", 59)(rng),
    "gitlab": _plain("glpat-", 20),
    "openai_project": _plain("sk-proj-", 48),
    "anthropic": _plain("sk-ant-api03-", 80),
    "stripe": _plain("sk_live_", 24),
    "slack": lambda rng: _plain(f"xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-", 24)(rng),
    "google": _plain("AIza", 35),
    "sendgrid": lambda rng: _plain("SG." + _draw(rng, 22) + ".", 43)(rng),
    "huggingface": _plain("hf_", 34),
    "jwt": _jwt,
    "url_password": _url,
    "rsa_private_key": _private_key("RSA"),
    "openssh_private_key": _private_key("OPENSSH"),
    "pkcs8_private_key": _private_key(""),
    "aws_credentials_file": _assignment("[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {}", 40),
    "dotenv_password": _assignment("DEBUG=1\nDB_PASSWORD={}"),
    "export_api_key": _assignment("export FOO_API_KEY={}"),
    "bare_api_key": _assignment("API_KEY={}"),
    "yaml_token": _assignment("service:\n  token: {}"),
    "bearer_header": _assignment("curl -s -H 'Authorization: Bearer {}' https://api.example.com/v1/items", 36),
    "basic_header_json": _assignment('{{"headers": {{"Authorization": "Basic {}"}}}}', 28),
    "bare_bearer": _assignment("sent Bearer 7{} to the gateway", 40),  # a bare token is taken with a digit
    "curl_user": _assignment("curl -u deploy:{} https://ci.example.com/job", 16),
    "mysql_password": _assignment("mysql -h db -u root -p{} shop", 14),
    "docker_auth": _assignment('{{"auths": {{"registry.example.com": {{"auth": "{}"}}}}}}', 32),
}
"""Format name → generator of ``(text, fingerprints)``."""

MULTILINE = {
    "rsa_private_key",
    "openssh_private_key",
    "pkcs8_private_key",
    "aws_credentials_file",
    "dotenv_password",
    "yaml_token",
}
"""Formats whose text spans lines (not usable where a name goes)."""


def draw(fmt: str, seed: int) -> tuple[str, list[str]]:
    """The text of format ``fmt`` drawn with ``seed``, and its fingerprints."""
    return FORMATS[fmt](random.Random(f"{fmt}:{seed}"))
