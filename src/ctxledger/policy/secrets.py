"""Finding secrets in candidate text with detect-secrets, fast enough for every assembly.

Seed 000 ("No mezcles secretos con el contexto simplemente porque una herramienta pudo leerlos"); seed
004 §8 R3/R12. The scanner is Yelp's ``detect-secrets`` (its ad-hoc line scanner, ``scan_line``, with the
plugins named in :data:`DEFAULT_PLUGINS`; the entropy plugins are left out by default because content
hashes and ids are high-entropy by nature and must stay readable). A few token formats detect-secrets
does not know yet (OpenAI ``sk-proj-``/Anthropic ``sk-ant-`` keys, Google API keys, passwords in URLs
that its Basic Auth rule misses) are added as :data:`EXTRA_PATTERNS`.

Speed: detect-secrets costs about a millisecond per line, so only *candidate* lines are scanned: lines
that a cheap prefilter (:data:`PREFILTER`) says could hold a credential (a keyword such as ``password``
or ``token``, a known key prefix, a PEM header, a URL with a password). Results are cached by the text
itself, so a history is scanned once, not once per model call.

Findings carry the line number and the secret *type*, never the secret itself; :func:`redact` replaces
each affected line whole (detect-secrets does not always report the full secret span, so cutting only
the reported value could leave part of it behind).
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PLUGINS = (
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "JwtTokenDetector",
    "KeywordDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
"""detect-secrets plugins used by default (every plugin except the entropy and public-IP ones)."""

URL_CREDENTIALS = (
    r"(?i)\b[a-z][a-z0-9+.\-]*://"  # scheme
    r"[^\s/:@\"'<>]*"  # user (may be empty: redis://:password@host)
    r":[^\s/\"'<>]+"  # password: any characters but whitespace, '/' and quotes, '@' included
    r"@[^\s/@:\"'<>?#]+"  # host, after the last '@' of the authority
)
"""A password in a URL's authority, ``scheme://user:password@host`` (``postgresql://admin:S3cr3t!@db:5432/prod``,
``redis://:pw@cache``, ``amqp://guest:p@ss#1@mq``). detect-secrets' Basic Auth rule misses passwords with
characters such as ``!``, ``#`` or ``@``. Not matched: a URL without a password (``ssh://git@host``,
``https://example.com/a@b``), a port followed by a path with an ``@`` (``https://host:8080/a@b``), or
``user@host`` without a scheme."""

EXTRA_PATTERNS = {
    "OpenAI/Anthropic API Key": r"\bsk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_\-]{32,}",
    "Google API Key": r"\bAIza[0-9A-Za-z_\-]{35}\b",
    "URL Credentials": URL_CREDENTIALS,
}
"""Token formats checked besides the detect-secrets plugins (type → regex)."""

PREFILTER = re.compile(
    r"(?i)(pass(?:word|wd|phrase)|\bpwd\b|secret|token|api[_-]?key|apikey|\bauth(?:orization)?\b|bearer|credential"
    r"|private[_ -]?key|access[_-]?key|AKIA|gh[pousr]_|glpat-|xox[abposr]-|sk_live|rk_live|\bsk-|AIza|eyJ"
    r"|-----BEGIN|://[^/\s:@]*:[^/\s]+@)"
)
"""Test for lines that could hold a credential; only these reach detect-secrets."""

VALUE_HINT = re.compile(
    r"(?i)(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|auth\w*|credentials?|private[_ -]?key"
    r"|access[_-]?key)[\"']?\s*[:=]\s*\S"
    r"|bearer\s+\S{8,}"
    r"|[\w\-+/=]{24,}"
    r"|AKIA|gh[pousr]_|glpat-|xox[abposr]-|sk_live|rk_live|\bsk-|AIza|eyJ|-----BEGIN|://[^/\s:@]*:[^/\s]+@"
)
"""Second gate: a prefiltered line must also carry something shaped like a credential (a keyword with an
assigned value, a bearer token, a run of 24 or more token characters, or a known key prefix). Prose that
merely mentions "token" or "auth" stops here; on a synthetic 3,000-message trace this cut the lines sent to
detect-secrets from 5,804 to a handful."""

KEYWORDS = (
    "passw", "passphrase", "pwd", "secret", "token", "api_key", "api-key", "apikey", "auth", "bearer",
    "credential", "private", "access_key", "access-key", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "glpat-", "xox", "sk_live", "rk_live",
    "sk-", "aiza", "eyj", "-----begin", "://",
)  # fmt: skip
"""Lower-case substrings one of which every :data:`PREFILTER` match contains (a C-speed first gate)."""


def _maybe(text: str) -> bool:
    lowered = text.lower()
    return any(k in lowered for k in KEYWORDS)


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret found: 1-based ``line`` number and its ``type`` (e.g. ``"AWS Access Key"``); no value."""

    line: int
    type: str


class SecretScanner:
    """Scans text for secrets with detect-secrets, caching results per text.

    Args:
        plugins: detect-secrets plugin class names.
        extra_patterns: type → regex for formats the plugins miss.
        cache_size: texts whose findings are remembered (keys are the unit texts the snapshot already holds,
            so the cache costs little; below the number of texts in a history, every call would rescan all).
    """

    def __init__(
        self,
        plugins: Sequence[str] = DEFAULT_PLUGINS,
        extra_patterns: dict[str, str] | None = None,
        cache_size: int = 1_000_000,
    ) -> None:
        self.plugins = tuple(plugins)
        self.extra = {
            k: re.compile(v) for k, v in (EXTRA_PATTERNS if extra_patterns is None else extra_patterns).items()
        }
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[Finding, ...]] = OrderedDict()  # text -> findings
        self._lock = threading.Lock()

    def scan(self, text: str) -> tuple[Finding, ...]:
        """Findings in ``text`` (line numbers 1-based), cached by the text itself.

        The cache is keyed by the string (Python keeps a string's hash on the object), so scanning the
        same unit text again on the next assembly costs one dictionary lookup.
        """
        if not text:
            return ()
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        found: tuple[Finding, ...] = ()
        if _maybe(text):
            with _SCAN_LOCK:  # detect-secrets keeps its plugin settings in a process-wide singleton
                found = tuple(self._scan_lines(text.splitlines()))
        with self._lock:
            self._cache[text] = found
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return found

    def _scan_lines(self, lines: Sequence[str]) -> Iterable[Finding]:
        candidates = [
            (i, line)
            for i, line in enumerate(lines, 1)
            if _maybe(line) and PREFILTER.search(line) and VALUE_HINT.search(line)
        ]
        if not candidates:
            return
        scan_line = self._detector()
        for number, line in candidates:
            types = {s.type for s in scan_line(line)}
            types |= {name for name, rx in self.extra.items() if rx.search(line)}
            for t in sorted(types):
                yield Finding(number, t)

    def _detector(self) -> Any:
        """detect-secrets' ``scan_line`` with this scanner's plugins configured (its settings are global)."""
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import cache_bust, get_settings

        global _CONFIGURED
        if self.plugins != _CONFIGURED:
            cache_bust()
            get_settings().configure_plugins([{"name": p} for p in self.plugins])
            _CONFIGURED = self.plugins
        return scan_line


_CONFIGURED: tuple[str, ...] | None = None
_SCAN_LOCK = threading.Lock()


def redact(text: str, findings: Sequence[Finding]) -> str:
    """Replace every line holding a finding by ``[withheld by policy: <types> on line N]``."""
    if not findings:
        return text
    by_line: dict[int, list[str]] = {}
    for f in findings:
        by_line.setdefault(f.line, []).append(f.type)
    lines = text.splitlines(keepends=True)
    for number, types in by_line.items():
        if 1 <= number <= len(lines):
            end = "\n" if lines[number - 1].endswith("\n") else ""
            lines[number - 1] = f"[withheld by policy: {', '.join(sorted(set(types)))} on line {number}]{end}"
    return "".join(lines)


def scan_json(value: Any, scanner: SecretScanner, path: str = "") -> list[tuple[str, Finding]]:
    """Scan every string value of a JSON value (object values, array items), e.g. a tool schema.

    Args:
        value: the JSON value (mappings, sequences, strings, numbers …).
        scanner: the scanner to use.
        path: the dotted path of ``value`` (``""`` at the top).

    Returns:
        ``(path, finding)`` pairs, e.g. ``("function.parameters.properties.region.default", Finding(1, …))``;
        array items are addressed as ``enum[2]``. Never the secret itself.
    """
    if isinstance(value, str):
        return [(path, f) for f in scanner.scan(value)]
    out: list[tuple[str, Finding]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            out += scan_json(item, scanner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            out += scan_json(item, scanner, f"{path}[{i}]")
    return out


def redact_json(value: Any, scanner: SecretScanner) -> Any:
    """``value`` with every string holding a secret redacted line by line (:func:`redact`); a copy, same shape."""
    if isinstance(value, str):
        return redact(value, scanner.scan(value))
    if isinstance(value, Mapping):
        return {key: redact_json(item, scanner) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item, scanner) for item in value]
    return value


def describe_json(hits: Sequence[tuple[str, Finding]]) -> str:
    """A content-free description of :func:`scan_json` hits: ``"1 secret withheld: GitHub Token at a.b (line 1)"``."""
    parts = ", ".join(f"{f.type} at {path or '(top)'} (line {f.line})" for path, f in hits)
    return f"{len(hits)} secret{'s' if len(hits) != 1 else ''} withheld: {parts}"


def describe(findings: Sequence[Finding]) -> str:
    """A content-free description of findings, e.g. ``"2 secrets: AWS Access Key (line 3), …"``."""
    parts = ", ".join(f"{f.type} (line {f.line})" for f in findings)
    return f"{len(findings)} secret{'s' if len(findings) != 1 else ''} withheld: {parts}"


SPEAKER_WITHHELD = "speaker_withheld"
"""The speaker name sent instead of one that holds a secret: valid as an OpenAI ``name``
(``^[a-zA-Z0-9_-]{1,64}$``) and as an Anthropic ``"<name>: "`` label."""


def redact_text(text: Any, scanner: SecretScanner | None = None) -> Any:
    """``text`` with every line holding a secret replaced (:func:`redact`); a non-string is returned as it is."""
    if not isinstance(text, str) or not text:
        return text
    return redact(text, (scanner or default_scanner()).scan(text))


_DEFAULT: SecretScanner | None = None


def default_scanner() -> SecretScanner:
    """The process-wide scanner with the default plugins (shared cache)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SecretScanner()
    return _DEFAULT


@functools.cache
def known_plugins() -> frozenset[str]:
    """The class names of every detect-secrets plugin installed (what ``plugins`` settings may name)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return frozenset(cls.__name__ for cls in get_mapping_from_secret_type_to_class().values())
