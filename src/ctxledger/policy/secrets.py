r"""Finding secrets in candidate text with detect-secrets, fast enough for every assembly.

Seed 000 ("No mezcles secretos con el contexto simplemente porque una herramienta pudo leerlos"); seed
004 §8 R3/R12. The scanner is Yelp's ``detect-secrets`` (its ad-hoc line scanner, ``scan_line``, with the
plugins named in :data:`DEFAULT_PLUGINS`; the entropy plugins are left out by default because content
hashes and ids are high-entropy by nature and must stay readable). Token formats detect-secrets does not
know (OpenAI ``sk-proj-``/Anthropic ``sk-ant-`` keys, fine-grained GitHub tokens ``github_pat_``, Google
API keys, Hugging Face and npm tokens, passwords in URLs that its Basic Auth rule misses, ``Authorization`` header
values and bearer tokens, passwords on ``curl``/``mysql``/``sshpass`` command lines, Docker registry ``auth``
values) are added as :data:`EXTRA_PATTERNS`. Besides, three things are found that a line-by-line keyword scan misses:

* **private key blocks**: from a ``-----BEGIN … PRIVATE KEY-----`` line (or a PuTTY key header) to its
  ``-----END …-----`` line (to the end of the text when there is none), every line is a finding, not only
  the header: the base64 body is the key;
* **escaped text**: a line holding backslash escapes (``\n``, ``\"``, ``\u0073``, JSON text in a tool
  result or a checkpoint's state, doubly escaped JSON too), percent-encoding or HTML character references is
  also scanned decoded, piece by piece, so ``{"log": "line1\nsk-…"}`` is found although no word boundary
  precedes ``sk-`` in the raw line; a finding in the decoded text is reported on the raw line;
* **unquoted assignments** (:data:`ASSIGNMENT`): ``.env`` lines (``DB_PASSWORD=…``, ``export
  FOO_API_KEY=…``), credentials files (``aws_secret_access_key = …``), YAML (``token: …``) whose name has
  a secret word as one of its parts and whose value is not a placeholder, a number or a path.

AWS credentials beyond detect-secrets' quoted form: a 40-character secret access key after a context word,
quoted or not (:data:`AWS_SECRET_KEY`), or beside an access key id in the same text
(:data:`AWS_PAIRED_SECRET`), and an access key id hidden in base64 (:func:`base64_key_id`).

Speed: detect-secrets costs about a millisecond per line, so only lines that could hold a credential are
looked at. Every detector has a *gate*, a regex that matches wherever the detector could find something
(:data:`FORMAT_GATES` for the plugins, :data:`KEYWORD_GATE`, :data:`OWN_GATE`). A text is first searched
whole for literal-led pieces of the gates (:data:`TEXT_GATES`, :data:`TEXT_LITERALS`, and
:data:`FOLDED_LITERALS` in the case-folded text) and for escapes; only the lines they hit are split into
pieces, and a piece goes to detect-secrets only if a plugin gate matches it. :meth:`SecretScanner.scan_full`
gives every piece to every detector; the test suite checks on generated texts that both find the same.
Results are cached by the text itself, so a history is scanned once, not once per model call.

Findings carry the line number and the secret *type*, never the secret itself; :func:`redact` replaces
each affected line whole (detect-secrets does not always report the full secret span, so cutting only
the reported value could leave part of it behind).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.policy.regex_shape import alternatives, group_end

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

AUTHORIZATION = (
    r"(?i)(?:\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?"
    r"|\bbearer\s+(?=[A-Za-z._~+/\-]*\d))"
    r"[A-Za-z0-9._~+/\-]{16,}"
)
"""An HTTP credential: an ``Authorization`` header's value (``Authorization: Bearer …``, ``"Authorization": "Basic
…"``, ``authorization=…``) or a bearer token anywhere (``Bearer eyJ…``; there, a token with a digit, so that prose
such as "bearer authentication/authorization" is not taken for one), 16 or more token characters. A shell
variable (``Bearer $TOKEN``) is not a credential and is not matched."""

COMMAND_PASSWORD = (
    r"\bcurl\b[^\n]{0,256}?\s(?:-u\s*|--user[\s=]+)[\"']?[^\s:\"']+:(?!\$)[^\s\"']{3,}"
    r"|\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,256}?\s-p(?![\s$])[^\s\"']{3,}"
    r"|\bsshpass\s+-p\s*(?!\$)[^\s\"']{3,}"
)
"""A password on a command line: ``curl -u user:password`` (``--user``), ``mysql -pPASSWORD`` (the MySQL and
MariaDB clients), ``sshpass -p PASSWORD``; not a shell variable (``curl -u $USER:$PASS``)."""

DOCKER_AUTH = r"\"auth\"\s*:\s*\"[A-Za-z0-9+/]{12,}={0,2}\""
"""A registry credential in a Docker ``config.json`` (``"auth": "<base64 of user:password>"``)."""

EXTRA_PATTERNS = {
    "OpenAI/Anthropic API Key": r"\bsk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_\-]{32,}",
    "GitHub Fine-Grained Token": r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    "Google API Key": r"\bAIza[0-9A-Za-z_\-]{35}\b",
    "Hugging Face Token": r"\bhf_[A-Za-z0-9]{34,}\b",
    "NPM Token": r"\bnpm_[A-Za-z0-9]{36}\b",
    "URL Credentials": URL_CREDENTIALS,
    "Authorization Header": AUTHORIZATION,
    "Command-Line Password": COMMAND_PASSWORD,
    "Docker Registry Auth": DOCKER_AUTH,
}
"""Token formats checked besides the detect-secrets plugins (type → regex)."""

_SECRET_WORD = (
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?"
    r"|auth[_-]?key"
)
ASSIGNMENT = re.compile(
    r"(?i)(?<![\w.\-])[\"']?(?P<name>(?:[a-z0-9]+[_.\-])*(?:" + _SECRET_WORD + r")(?:[_.\-][a-z0-9]+)*)[\"']?"
    r"[ \t]*(?P<op>:=|=|:)[ \t]*[\"']?(?P<value>[^\s\"',;#]{6,})"
)
"""An assignment to a name one of whose parts is a secret word: ``DB_PASSWORD=…``, ``export FOO_API_KEY=…``,
``aws_secret_access_key = …`` (a credentials file), ``token: …`` (YAML), quoted or not. The value must be 6
characters or more; after ``:`` also hold a digit or a symbol (``Token: expired`` is prose); placeholders
(``${VAR}``, ``<password>``, ``%(pw)s``, ``true``, ``none``, ``****``), the shell's ``PWD=/path`` and numbers
assigned to a name that does not end in the secret word (``token_budget = 8000``) are not secrets."""

ASSIGNMENT_TAIL = re.compile(
    r"(?i)(?:" + _SECRET_WORD + r")(?:[_.\-][a-z0-9]+)*[\"']?[ \t]*(?::=|=|:)[ \t]*[\"']?[^\s\"',;#]{6,}"
)
"""The part of an :data:`ASSIGNMENT` match from its secret word on: a line it does not match in holds no assignment
(searched first: it starts at a literal, where :data:`ASSIGNMENT` is tried at every word of the line)."""

_PLACEHOLDER = re.compile(
    r"(?i)(?:[$<{%\[*]|x{3})|(?:true|false|null|none|nil|undefined|required|optional|redacted|string|example)$"
)
_NUMBER = re.compile(r"[\d.,:+\-]+$")
_ENDS_SECRET = re.compile(r"(?i)(?:" + _SECRET_WORD + r")$")
_CHARACTERS = re.compile(r"[\d\W_]")


def _assigned_secret(line: str, folded: str | None = None) -> bool:
    """Whether ``line`` assigns a value that is not a placeholder to a secret-named key (:data:`ASSIGNMENT`).

    ``folded``: ``line``'s case-folded form (:func:`_folded`), if known; then the matches are found in it with
    the case-sensitive form of :data:`ASSIGNMENT` (the same spans) and read from ``line``.
    """
    if folded is not None and _ASSIGNMENT_FOLDED is not None and _ASSIGNMENT_TAIL_FOLDED is not None:
        if not _ASSIGNMENT_TAIL_FOLDED.search(folded):
            return False
        spans = (m.span for m in _ASSIGNMENT_FOLDED.finditer(folded))
    else:
        if not ASSIGNMENT_TAIL.search(line):
            return False
        spans = (m.span for m in ASSIGNMENT.finditer(line))
    for span in spans:
        name, op, value = (line[slice(*span(group))] for group in ("name", "op", "value"))
        if _PLACEHOLDER.match(value) or (value[0] in "/~." and "pwd" in line[slice(*span())].lower()):
            continue  # a placeholder, or the shell's working directory (PWD=/home/…)
        if _NUMBER.match(value) and not _ENDS_SECRET.search(name):
            continue  # a setting about secrets (token_budget=8000), not one
        if op == ":" and (len(value) < 8 or not _CHARACTERS.search(value)):
            continue
        return True
    return False


PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d")
"""The first line of a private key block (PEM, OpenSSH, PGP, SSH2, PuTTY)."""
PRIVATE_KEY_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|Private-MAC:")
"""Its last line; a block without one runs to the end of the text."""

_SEPARATORS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Line boundaries of ``str.splitlines`` besides ``\n``."""
_ESCAPES = re.compile(r"\\|%[0-9A-Fa-f]{2}|&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);")
_BACKSLASH = re.compile(
    r"\\(u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL
)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": " ", "f": " ", "v": " ", "0": " ", "a": " "}


def _unescape_once(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if len(code) == 11:  # a surrogate pair such as \uD83D\uDE00
            high, low = int(code[1:5], 16), int(code[7:], 16)
            return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        if len(code) > 1:
            char = chr(int(code[1:], 16))
            return " " if 0xD800 <= ord(char) <= 0xDFFF else char
        return _SIMPLE.get(code, code)

    return _BACKSLASH.sub(one, text)


def decoded_forms(line: str) -> list[str]:
    r"""The decoded readings of ``line`` that differ from it; empty when ``line`` has no escapes.

    Backslash escapes undone (up to three times, for JSON inside JSON), percent-decoded, HTML character
    references resolved. A secret hidden behind an escape (``"line1\nsk-…"``, ``\u0073k-…``,
    ``%0Apassword=…``) is found by scanning these, piece by piece (each may hold line breaks the raw line has
    as escapes).
    """
    if not _ESCAPES.search(line):
        return []
    import html
    from urllib.parse import unquote

    forms: list[str] = []
    text = line
    for _ in range(3):
        if "\\" not in text:
            break
        text = _unescape_once(text)
        forms.append(text)
    for form in (line, *forms):
        if "%" in form:
            forms.append(unquote(form, errors="replace"))
        if "&" in form:
            forms.append(html.unescape(form))
    return [f for f in dict.fromkeys(forms) if f != line]


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
        # a configured plugin or extra pattern without a gate is run on every line
        self._ungated = any(p not in FORMAT_GATES and p != "KeywordDetector" for p in self.plugins) or any(
            EXTRA_PATTERNS.get(k) != rx.pattern for k, rx in self.extra.items()
        )
        self._keyword = "KeywordDetector" in self.plugins
        self._plugin_parts = tuple(
            part for p in self.plugins if p in FORMAT_GATES for part in _parts(FORMAT_GATES[p], GATE_WORDS.get(p, ()))
        )
        self._keyword_parts = _parts(KEYWORD_GATE, GATE_WORDS["KeywordDetector"])
        # each extra pattern with the substrings every match of it holds (a configured one: none known)
        self._extras = tuple(
            (name, rx, EXTRA_LITERALS.get(name, ()), _EXTRA_GATES.get(name), EXTRA_WORDS.get(name))
            for name, rx in self.extra.items()
        )

    def scan(self, text: str) -> tuple[Finding, ...]:
        """Findings in ``text`` (line numbers 1-based, as ``str.splitlines`` numbers them), cached by the text.

        The cache is keyed by the string (Python keeps a string's hash on the object), so scanning the
        same unit text again on the next assembly costs one dictionary lookup. Every line of a private key
        block is a finding; a line whose decoded form (:func:`decoded_forms`) holds a secret is one too.
        Only the lines a gate matches in (:data:`FORMAT_GATES`, :data:`KEYWORD_GATE`, :data:`OWN_GATE`) or
        that hold an escape are looked at; the findings are those of :meth:`scan_full`.
        """
        if not text:
            return ()
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        found = self._scan(text, gated=True)
        with self._lock:
            self._cache[text] = found
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return found

    def scan_full(self, text: str) -> tuple[Finding, ...]:
        """The findings of :meth:`scan`, with every line and decoded piece given to every detector (slow; uncached).

        The reference the gates are checked against: a gate may only skip what finds nothing.
        """
        return self._scan(text, gated=False) if text else ()

    def _scan(self, text: str, gated: bool) -> tuple[Finding, ...]:
        with _SCAN_LOCK:  # detect-secrets keeps its plugin settings in a process-wide singleton
            return tuple(sorted(set(self._scan_lines(text, gated)), key=lambda f: (f.line, f.type)))

    def _scan_lines(self, text: str, gated: bool) -> Iterable[Finding]:
        numbers = self._candidates(text) if gated and not self._ungated else None
        # every match of PRIVATE_KEY_BEGIN holds one of these two words, which str.find finds fastest
        private_key = not gated or (
            ("BEGIN" in text or "PuTTY-User-Key-File-" in text) and PRIVATE_KEY_BEGIN.search(text) is not None
        )
        lines = text.splitlines() if numbers is None or numbers or private_key else []
        if private_key:
            yield from _private_key_blocks(lines)
        key_id = False
        for index in range(len(lines)) if numbers is None else numbers:
            line = lines[index]
            for piece in [line, *(p for form in decoded_forms(line) for p in _pieces(form))]:
                for t in self._piece_types(piece, gated):
                    key_id = key_id or t == "AWS Access Key"
                    yield Finding(index + 1, t)
        if _SEPARATORS.search(text):
            yield from self._across_separators(text, gated)
        if key_id:
            yield from self._paired_secret_keys(text, lines, gated)

    def _candidates(self, text: str) -> list[int]:
        """0-based indexes of the lines (``str.splitlines``) a gate may match in or that hold an escape.

        :data:`TEXT_GATES`, :data:`TEXT_LITERALS` and :data:`FOLDED_LITERALS` are searched in the whole text, each
        search (:data:`_TEXT_SEARCHES`, :data:`_TEXT_FINDS`, :data:`_FOLDED_SEARCH`) once per line it matches in
        (after a match, the search goes on at the next line).
        """
        folded = _folded(text)
        starts: list[int] | None = None
        lines: set[int] = set()

        def mark(start: int, end: int) -> int:
            """Mark the lines of ``text[start:end]``; the offset of the next line (``-1``: none)."""
            nonlocal starts
            if starts is None:
                starts = [0, *itertools.accumulate(map(len, text.splitlines(keepends=True)))]
            first = bisect.bisect_right(starts, start) - 1
            last = bisect.bisect_right(starts, max(end - 1, start)) - 1
            lines.update(range(first, last + 1))
            return starts[last + 1] if last + 2 < len(starts) else -1

        if folded is None:  # lower-casing moved offsets: every line may hold a case-insensitive match
            return list(range(len(text.splitlines())))
        for rx, source in (*((rx, text) for rx in _TEXT_SEARCHES), (_FOLDED_SEARCH, folded)):
            match = rx.search(source)
            while match is not None:
                pos = mark(match.start(), match.end())
                match = rx.search(source, pos) if pos >= 0 else None
        for literal in _TEXT_FINDS:
            at = text.find(literal)
            while at >= 0:
                pos = mark(at, at + len(literal))
                at = text.find(literal, pos) if pos >= 0 else -1
        return sorted(lines)

    def _paired_secret_keys(self, text: str, lines: Sequence[str], gated: bool) -> Iterable[Finding]:
        """``AWS Secret Access Key`` on each line holding :data:`AWS_PAIRED_SECRET` (the text holds a key id)."""
        if not gated:
            for number, line in enumerate(lines, 1):
                if any(_secret_key_shaped(m.group("value")) for m in AWS_PAIRED_SECRET.finditer(line)):
                    yield Finding(number, "AWS Secret Access Key")
            return
        starts = None
        for m in AWS_PAIRED_SECRET.finditer(text):
            if _secret_key_shaped(m.group("value")):
                if starts is None:
                    starts = [0, *itertools.accumulate(map(len, text.splitlines(keepends=True)))]
                yield Finding(bisect.bisect_right(starts, m.start()), "AWS Secret Access Key")

    def _across_separators(self, text: str, gated: bool) -> Iterable[Finding]:
        r"""Findings in ``\n``-delimited lines that ``str.splitlines`` cuts further (at ``\x1e``, ``\u2028`` …).

        A plugin given such a line whole would find what the pieces hide, so every piece of it is a finding.
        """
        first = 1
        for chunk in text.split("\n"):
            count = max(1, len(chunk.splitlines()))
            if _SEPARATORS.search(chunk):
                for t in self._piece_types(chunk, gated):
                    yield from (Finding(n, t) for n in range(first, first + count))
            first += count

    def _piece_types(self, piece: str, gated: bool = True) -> set[str]:
        """The secret types in one line (or one decoded piece of a line).

        ``gated``: skip the detectors whose gate does not match (they would find nothing).
        """
        types: set[str] = set()
        folded = _folded(piece) if gated and not self._ungated else None
        present = None if folded is None else frozenset(w for w in _ALL_WORDS if w in folded)
        if (
            not gated
            or self._ungated
            or _matches(self._plugin_parts, piece, present, folded)
            or (self._keyword and _QUOTE.search(piece) and _matches(self._keyword_parts, piece, present, folded))
        ):
            types = {s.type for s in self._detector()(piece)}
        return types | self._own_types(piece, not gated or self._ungated, present, folded)

    def _own_types(
        self, piece: str, every: bool, present: frozenset[str] | None, folded: str | None = None
    ) -> set[str]:
        """The types this module's own detectors find in ``piece``; each runs only where its gate matches.

        ``every``: run them all (:meth:`scan_full`, or extra patterns other than the default ones). The gates
        (:data:`EXTRA_LITERALS`, :data:`EXTRA_WORDS`, :data:`ASSIGNMENT_WORDS`, :data:`AWS_SECRET_WORDS` and the
        literal starts of a private key and of a base64-encoded key id) together make up :data:`OWN_GATE`;
        :data:`EXTRA_GATES` narrow some further. ``folded``: ``piece`` case-folded (:func:`_folded`), when the
        caller has it (assignments are then searched in it).
        """

        def said(words: frozenset[str]) -> bool:
            return every or present is None or not words.isdisjoint(present)

        types: set[str] = set()
        for name, rx, literals, gate, words in self._extras:
            if not every and (
                not all(literal in piece for literal in literals)
                or (words is not None and not said(words))
                or (gate is not None and not gate.search(piece))
            ):
                continue
            if rx.search(piece):
                types.add(name)
        if (every or "BEGIN" in piece or "PuTTY-User-Key-File-" in piece) and PRIVATE_KEY_BEGIN.search(piece):
            types.add("Private Key")
        if every or present is None:
            folded = None
        if said(ASSIGNMENT_WORDS) and (every or ":" in piece or "=" in piece) and _assigned_secret(piece, folded):
            types.add("Secret Assignment")
        if said(AWS_SECRET_WORDS) and _aws_secret_key(piece):
            types.add("AWS Secret Access Key")
        if (every or _B64_GATE.search(piece)) and base64_key_id(piece):
            types.add("AWS Access Key")
        return types

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


def _pieces(form: str) -> list[str]:
    """The lines of a decoded form: cut at line feeds, and also as ``str.splitlines`` cuts them."""
    parts = form.split("\n")
    return list(dict.fromkeys([*parts, *form.splitlines()])) if _SEPARATORS.search(form) else parts


def _private_key_blocks(lines: Sequence[str]) -> Iterable[Finding]:
    """A ``Private Key`` finding for every line from a key's first line to its last (or the text's end)."""
    inside = False
    for number, line in enumerate(lines, 1):
        if not inside and PRIVATE_KEY_BEGIN.search(line):
            inside = True
        if inside:
            yield Finding(number, "Private Key")
            if PRIVATE_KEY_END.search(line):
                inside = False


URL_AUTHORITY_GATE = r"://[^\s/]*@"
"""A URL whose authority holds an ``@`` (before any whitespace or ``/``): every match of detect-secrets' Basic
Auth and Cloudant URL formats and of :data:`URL_CREDENTIALS` has one (their user and password hold neither a
``/`` nor whitespace), a plain ``https://host/path`` link does not."""

SOFTLAYER_URL_GATE = r"://(?i:api.softlayer.com/soap/v3)"
"""The start of detect-secrets' Softlayer URL format after its scheme (case-insensitive, its dots any character, as
the plugin matches it)."""

FORMAT_GATES: Mapping[str, str] = {
    "ArtifactoryDetector": r"AKC[a-zA-Z0-9]{10}|AP[\dABCDEF][a-zA-Z0-9]{8}",
    "AWSKeyDetector": r"A(?:3T[A-Z0-9]|BIA|CCA|KIA|SIA)[0-9A-Z]{16}|(?i:aws)",
    "AzureStorageKeyDetector": r"AccountKey=",
    "BasicAuthDetector": URL_AUTHORITY_GATE,
    "CloudantDetector": (
        r"(?i:(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|password|pass|token))|" + URL_AUTHORITY_GATE
    ),
    "DiscordBotTokenDetector": r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",
    "GitHubTokenDetector": r"gh[pousr]_[A-Za-z0-9_]{36}",
    "GitLabTokenDetector": r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941",
    "IbmCloudIamDetector": (
        r"(?i:(?:key|pwd|password|pass|token)(?:\"|'|)(?:\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:\"|'|)"
        r"[a-zA-Z0-9_\-]{44})"
    ),
    "IbmCosHmacDetector": r"(?i:secret[-_]?(?:access)?[-_]?key)",
    "JwtTokenDetector": r"eyJ[A-Za-z0-9-_=]+\.",
    "MailchimpDetector": r"-us[0-9]",
    "NpmDetector": r"/:_authToken=",
    "OpenAIDetector": r"T3BlbkFJ",
    "PrivateKeyDetector": r"BEGIN|PuTTY-User-Key-File-2",
    "PypiTokenDetector": r"pypi-AgE",
    "SendGridDetector": r"SG\.[a-zA-Z0-9_-]{22}\.",
    "SlackDetector": r"(?i:xox[abposr]-|hooks\.slack\.com)",
    "SoftlayerDetector": (
        r"(?i:(?:softlayer|sl)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|password|pass|token))|" + SOFTLAYER_URL_GATE
    ),
    "SquareOAuthDetector": r"sq0csp-",
    "StripeDetector": r"k_live_",
    "TelegramBotTokenDetector": r":[0-9A-Za-z_-]{35}",
    "TwilioKeyDetector": r"AC[a-z0-9]{32}|SK[a-z0-9]{32}",
}
"""Plugin → *gate*: a regex that matches somewhere in every string one of the plugin's format regexes (its
``denylist``) matches in, with the same case sensitivity, but starts at a literal so a long text is searched
for it quickly (``\\.`` + six token characters + ``\\.`` for Discord's three-part token rather than any dot,
``AC`` or ``SK`` + 32 characters for Twilio). No gate matches a line break, so searching a whole text finds every
line a gate matches in. The test suite generates matches of every format regex and checks that the gate
matches each; a configured plugin missing here (an entropy plugin) runs on every line."""

KEYWORD_GATE = (
    r"(?i:api_?key|auth_?key|service_?key|account_?key|db_?key|database_?key|priv_?key|private_?key|client_?key"
    r"|db_?pass|database_?pass|key_?pass|password|passwd|pwd|secret|contraseña|contrasena)"
)
"""The words detect-secrets' keyword plugin looks for (its ``DENYLIST``, case-insensitive as it searches them);
each of its ad-hoc patterns also needs a quote (``'``, ``"`` or a backtick) on the line."""

_QUOTE = re.compile("['\"`]")

AWS_KEY_ID = r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"
"""An AWS access key id, as detect-secrets' AWS plugin matches one (unanchored)."""

AWS_SECRET_KEY = re.compile(
    r"(?i)(?:aws.{0,20}?(?:secret|key|pwd|pw|password|pass|token)|secret[_\-. ]?access[_\-. ]?key)"
    r".{0,20}?(?<![A-Za-z0-9/+])(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
"""A 40-character AWS secret access key within 20 characters after a context word, quoted or not:
``AWS_SECRET_ACCESS_KEY=…``, ``"SecretAccessKey": "…"`` (``aws sts`` output), ``AWS Secret Access Key [None]: …``.
detect-secrets' AWS plugin finds only the quoted form after ``aws…key``. The value must hold both an upper and
a lower-case letter, so a git commit id or a hex digest (40 hex digits, one case) is not taken for one."""

AWS_PAIRED_SECRET = re.compile(r"[=,(:] *[\"']?(?P<value>[A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])")
"""A 40-character value after ``=``, ``,``, ``(`` or ``:``: where the same text holds an AWS access key id,
this is its secret key as detect-secrets' AWS plugin collects candidates for one
(``boto3.client("s3", "AKIA…", "…")``, ``key_id = AKIA…`` / ``key = …``); same value shape as
:data:`AWS_SECRET_KEY`."""

_UPPER = re.compile("[A-Z]")
_LOWER = re.compile("[a-z]")


def _secret_key_shaped(value: str) -> bool:
    return _UPPER.search(value) is not None and _LOWER.search(value) is not None


def _b64_fragments(prefix: bytes) -> list[str]:
    """The base64 characters fixed by ``prefix`` at each of the three byte alignments it can start at."""
    out = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + prefix + b"\0" * 3).decode("ascii")
        first, last = 8 * shift, 8 * (shift + len(prefix))
        fixed = [i for i in range(len(encoded)) if 6 * i >= first and 6 * i + 6 <= last]
        out.append(encoded[fixed[0] : fixed[-1] + 1])
    return out


BASE64_KEY_ID_GATE = "|".join(
    dict.fromkeys(f for p in (b"AKIA", b"ASIA", b"ABIA", b"ACCA", b"A3T") for f in _b64_fragments(p))
)
"""Base64 characters one of which every base64 encoding of an AWS access key id holds (``QUtJQ`` for ``AKIA`` at
the start, ``FLSU`` and ``BS0lB`` one and two bytes in); padding-free and the same in the URL-safe alphabet."""

_B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{24,}")
_B64_GATE = re.compile(BASE64_KEY_ID_GATE)
_AWS_KEY_ID_BYTES = re.compile(AWS_KEY_ID.encode("ascii"))
_URLSAFE = str.maketrans("-_", "+/")


def base64_key_id(piece: str) -> bool:
    """Whether a run of base64 characters in ``piece`` decodes to bytes holding an AWS access key id.

    The run is decoded from each of its first four characters (the encoded value may start anywhere in it,
    ``data:QUtJQ…`` or ``id=QUtJQ…``), in the standard or the URL-safe alphabet; a Kubernetes secret's
    ``AWS_ACCESS_KEY_ID: QUtJQ…`` or a basic-auth header of ``AKIA…:secret`` is found.
    """
    for m in _B64_RUN.finditer(piece):
        run = m.group().translate(_URLSAFE)
        if not _B64_GATE.search(run):
            continue
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[:-1] if len(chunk) % 4 == 1 else chunk + "=" * (-len(chunk) % 4)
            try:
                data = base64.b64decode(chunk, validate=True)
            except binascii.Error:
                continue
            if _AWS_KEY_ID_BYTES.search(data):
                return True
    return False


def _aws_secret_key(piece: str) -> bool:
    return any(_secret_key_shaped(m.group("value")) for m in AWS_SECRET_KEY.finditer(piece))


OWN_GATE = "|".join(
    (
        r"sk-|github_pat_|AIza|hf_|npm_|" + URL_AUTHORITY_GATE,  # the default extra patterns
        r"(?i:authorization|bearer)|curl|mysql|mariadb|sshpass|\"auth\"",
        r"BEGIN|PuTTY-User-Key-File-",  # a private key's first line
        r"(?i:" + _SECRET_WORD + r"|aws|secret[_\-. ]?access)",  # an assignment's name, an AWS secret key's context
        BASE64_KEY_ID_GATE,
    )
)
"""A regex that matches in every string this module's own detectors find something in (the default extra
patterns, a private key's first line, :data:`ASSIGNMENT`, :data:`AWS_SECRET_KEY`, :func:`base64_key_id`)."""

GATE_WORDS: Mapping[str, tuple[str, ...]] = {
    "AWSKeyDetector": ("aws",),
    "CloudantDetector": ("key", "pw", "pass", "token"),
    "IbmCloudIamDetector": ("key", "pw", "pass", "token"),
    "IbmCosHmacDetector": ("secret",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SoftlayerDetector": ("key", "pw", "pass", "token"),
    "KeywordDetector": ("key", "pass", "pw", "secret", "contrase"),
}
"""Plugin → lower-case words one of which every match of its gate's case-insensitive ``(?i:…)`` part holds:
that part is searched only in a line whose case-folded form holds one (a case-insensitive alternation is slow)."""

_LITERAL = re.compile(r"[A-Za-z0-9_=:/\-]+")
_PREFIX = re.compile(r"(?:[A-Za-z0-9_=:/\-]|\\\.)*")
_Part = tuple[frozenset[str], str, "re.Pattern[str] | None", "re.Pattern[str] | None"]


def _parts(pattern: str, words: tuple[str, ...] = ()) -> tuple[_Part, ...]:
    """``pattern`` as ``(words, prefix, regex, folded regex)`` parts, one per top-level alternative.

    ``prefix`` is the literal the alternative starts with (``"eyJ"``, ``"."``; the whole of a literal
    alternative, whose ``regex`` is ``None``); a part's regex is searched only in a line holding its prefix
    and, for a ``(?i:…)`` alternative given ``words``, whose case-folded form holds one of them. Such an
    alternative also gets its body as a case-sensitive regex (:func:`_folded_regex`), searched in the line's
    case-folded form (:func:`_folded`) instead: it matches there exactly where the case-insensitive one
    matches in the line, and Python's ``re`` searches a case-sensitive alternation several times faster.
    """
    out: list[_Part] = []
    for alt in alternatives(pattern):
        folded = frozenset(words if alt.startswith("(?i:") else ())
        if _LITERAL.fullmatch(alt):
            out.append((folded, alt, None, None))
        else:
            prefix = "" if folded else _PREFIX.match(alt).group().replace("\\.", ".")  # type: ignore[union-attr]
            out.append((folded, prefix, re.compile(alt), _folded_regex(alt) if folded else None))
    return tuple(out)


def _folded_regex(alternative: str) -> re.Pattern[str] | None:
    r"""The body of a ``(?i:…)`` alternative as a case-sensitive regex for case-folded text, if it is one.

    Only when the group spans the whole alternative and its body names no upper-case letter (outside escapes
    such as ``\S``, and but for ``A-Z`` beside ``a-z`` in a class), no character by code (``\x41``) and no
    inline flag: then a character of a line matches an atom case-insensitively exactly when its case-folded
    form matches it (:func:`_folded` keeps offsets and folds the characters ``re.IGNORECASE`` equates with an
    ASCII letter to that letter). ``None`` otherwise (the case-insensitive regex is searched in the line).
    """
    if not alternative.startswith("(?i:") or group_end(alternative, 0) != len(alternative) - 1:
        return None
    body = alternative[4:-1]
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if body[i + 1 : i + 2] not in _CASELESS_ESCAPES:
                return None
            i += 2
        elif c == "[":
            end = _class_end(body, i)
            members = body[i + 1 : end]
            if "a-z" in members:
                members = members.replace("A-Z", "")
            if end < 0 or not _caseless_members(members):
                return None
            i = end + 1
        elif body.startswith("(?P<", i):  # a named group: its name is not matched
            i = body.index(">", i) + 1
        elif (c.isascii() and c.isupper()) or (c == "(" and body[i + 1 : i + 3] in ("?i", "?-", "?a", "?L", "?u")):
            return None
        else:
            i += 1
    return re.compile(body)


_CASELESS_ESCAPES = frozenset([*"sSwWdDbBAZ\\.-|()[]{}?*+^$/'\"", " "])
"""Escapes whose meaning does not depend on case (classes, anchors, escaped punctuation)."""


def _caseless_members(members: str) -> bool:
    """Whether a character class's members name no upper-case letter and no character by code."""
    i = 0
    while i < len(members):
        c = members[i]
        if c == "\\":
            if members[i + 1 : i + 2] not in _CASELESS_CLASS_ESCAPES:
                return False
            i += 2
            continue
        if c.isascii() and c.isupper():
            return False
        i += 1
    return True


_CASELESS_CLASS_ESCAPES = frozenset([*"sSwWdDabfnrtv\\.-[]^'\"", " "])
"""Escapes inside a class that stand for a class, a control character or punctuation."""


def _class_end(pattern: str, start: int) -> int:
    """The index of the ``]`` closing the class opened at ``pattern[start]`` (``-1``: none)."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i
        i += 1
    return -1


def _matches(parts: Sequence[_Part], piece: str, present: frozenset[str] | None, folded: str | None = None) -> bool:
    """Whether a part matches in ``piece`` (``present``: the words in its folded form ``folded``; ``None``: unknown)."""
    for words, prefix, regex, folded_regex in parts:
        if words and present is not None and words.isdisjoint(present):
            continue
        if prefix and prefix not in piece:
            continue
        if regex is None:
            return True
        if folded_regex.search(folded) if folded_regex is not None and folded is not None else regex.search(piece):
            return True
    return False


OWN_WORDS = ("pass", "pw", "secret", "token", "key", "credential", "aws", "authorization", "bearer")
"""Lower-case words one of which every match of :data:`OWN_GATE`'s case-insensitive parts holds."""

EXTRA_LITERALS: Mapping[str, tuple[str, ...]] = {
    "OpenAI/Anthropic API Key": ("sk-",),
    "GitHub Fine-Grained Token": ("github_pat_",),
    "Google API Key": ("AIza",),
    "Hugging Face Token": ("hf_",),
    "NPM Token": ("npm_",),
    "URL Credentials": ("://", "@"),
    "Authorization Header": (),
    "Command-Line Password": (),
    "Docker Registry Auth": ('"auth"',),
}
"""Per default extra pattern, the substrings every match of it holds (all of them)."""

EXTRA_GATES: Mapping[str, str] = {
    "URL Credentials": URL_AUTHORITY_GATE,
    "Command-Line Password": "curl|mysql|mariadb|sshpass",
}
"""Per default extra pattern, a literal-led regex every match of it matches in (searched once its literals are
there, before the pattern itself, which Python's ``re`` tries at every word of a line)."""

EXTRA_WORDS: Mapping[str, frozenset[str]] = {"Authorization Header": frozenset(("authorization", "bearer"))}
"""Per default extra pattern, lower-case words one of which the case-folded form of every match of it holds (the
pattern, case-insensitive, is searched only in a piece whose folded form holds one, or whose folded form is not
known)."""

ASSIGNMENT_WORDS = frozenset(("pass", "pw", "secret", "token", "key", "credential"))
"""Lower-case words one of which the name of every :data:`ASSIGNMENT` match holds (``pwd`` holds ``pw``, every
``…key`` name ``key``); its operator holds a ``:`` or an ``=``."""

AWS_SECRET_WORDS = frozenset(("aws", "secret"))
"""Lower-case words one of which every :data:`AWS_SECRET_KEY` match holds."""


TEXT_GATES = (
    r"AKC[a-zA-Z0-9]{10}",
    r"AP[\dABCDEF][a-zA-Z0-9]{8}",
    r"A(?:3T[A-Z0-9]|BIA|CCA|KIA|SIA)[0-9A-Z]{16}",
    r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",
    r"gh[pousr]_[A-Za-z0-9_]{36}",
    r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-",
    r"eyJ[A-Za-z0-9-_=]+\.",
    r"-us[0-9]",
    r"SG\.[a-zA-Z0-9_-]{22}\.",
    r":[0-9A-Za-z_-]{35}",
    r"AC[a-z0-9]{32}",
    r"SK[a-z0-9]{32}",
    r"%[0-9A-Fa-f]{2}",
    r"&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);",
    URL_AUTHORITY_GATE,
    SOFTLAYER_URL_GATE,
)
"""Regexes, each starting at a literal (so a whole text is searched for it at C speed), one of which (or one of
:data:`TEXT_LITERALS`, :data:`FOLDED_LITERALS`) matches in every line a gate (:data:`FORMAT_GATES`,
:data:`KEYWORD_GATE`, :data:`OWN_GATE`) matches in or that holds an escape. A long alternation is searched
character by character by Python's ``re``, so the gates are split into these (and those that start with a rare
character joined again, grouped by that character: :func:`_text_searches`)."""

TEXT_LITERALS = (
    "AccountKey=", "GR1348941", "/:_authToken=", "T3BlbkFJ", "BEGIN", "PuTTY-User-Key-File-", "pypi-AgE",
    "sq0csp-", "k_live_", "sk-", "github_pat_", "AIza", "hf_", "npm_", "\\", "curl", "mysql", "mariadb", "sshpass",
    '"auth"',
    *BASE64_KEY_ID_GATE.split("|"),
)  # fmt: skip
"""Case-sensitive substrings of the same purpose as :data:`TEXT_GATES`."""

FOLDED_LITERALS = (
    "key", "pass", "pw", "secret", "token", "credential", "contrase", "aws", "xox", "hooks.slack.com", "authorization",
    "bearer",
)  # fmt: skip
"""Lower-case substrings, searched in the case-folded text, one of which every match of a case-insensitive gate
holds (the keyword plugin's words, the assignment names, the IBM, Cloudant, Softlayer, Slack and AWS contexts)."""

_FOLD = str.maketrans({"\u0131": "i", "\u017f": "s"})
"""Characters ``re.IGNORECASE`` matches to an ASCII letter that ``str.lower`` leaves as they are (dotless i,
long s; the Kelvin sign lowers to ``k``)."""


def _folded(text: str) -> str | None:
    """``text`` lower-cased so that a case-insensitive match of an ASCII word is a substring at its offset.

    ``None`` when lower-casing changes the length (``İ``).
    """
    if text.isascii():
        return text.lower()
    lowered = text.lower()
    return lowered.translate(_FOLD) if len(lowered) == len(text) else None


@functools.cache
def plugin_formats(plugins: tuple[str, ...]) -> tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]:
    """``(plugin name, its format regexes)`` for each detect-secrets plugin named that has a ``denylist``.

    Plugins without one (the keyword and entropy ones) are left out: the keyword gate covers the keyword
    plugin, and the entropy plugins are off by default.
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
    out: list[tuple[str, tuple[re.Pattern[str], ...]]] = []
    for name in plugins:
        try:
            denylist = tuple(classes[name]().denylist)
        except (KeyError, AttributeError, TypeError):
            continue
        out.append((name, denylist))
    return tuple(out)


_CONFIGURED: tuple[str, ...] | None = None
_SCAN_LOCK = threading.Lock()


_LINE_END = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""A line's end as ``str.splitlines`` cuts lines (``\r\n`` is one end)."""


def redact(text: str, findings: Sequence[Finding]) -> str:
    r"""Replace every line holding a finding by ``[withheld by policy: <types> on line N]``.

    Lines are numbered as ``str.splitlines`` numbers them; a replaced line keeps a ``\n`` end (``\n`` or
    ``\r\n``) as ``\n`` and loses any other end. Only the lines up to the last finding's are looked for, and the
    text between them is copied in slices, so a large text with a few findings is never split into all its lines.
    """
    if not findings:
        return text
    by_line: dict[int, set[str]] = {}
    for f in findings:
        by_line.setdefault(f.line, set()).add(f.type)
    ends = _LINE_END.finditer(text)
    out: list[str] = []
    copied = start = 0  # text[:copied] is in out; line ``number`` starts at ``start``
    number = 1
    for wanted in sorted(n for n in by_line if n >= 1):
        if wanted > number:  # line ``wanted`` starts after the next ``wanted - number`` ends (skipped in C)
            found = next(itertools.islice(ends, wanted - number - 1, None), None)
            start = found.end() if found is not None else len(text)
            number = wanted
        if start >= len(text):  # no such line
            break
        found = next(ends, None)
        end = found.start() if found is not None else len(text)
        after = found.end() if found is not None else len(text)
        newline = "\n" if text[end:after].endswith("\n") else ""
        out += [text[copied:start], f"[withheld by policy: {', '.join(sorted(by_line[wanted]))} on line {wanted}]"]
        out.append(newline)
        copied = start = after
        number += 1
    out.append(text[copied:])
    return "".join(out)


WITHHELD_KEY = "withheld_by_policy"
"""The name :func:`redact_json` gives an object key that holds a secret."""


def _json_key(key: Any, scanner: SecretScanner) -> tuple[str, list[Finding]]:
    """An object key as it may be shown or sent (redacted when it holds a secret), and the scanner's findings."""
    text = str(key)
    found = scanner.scan(text)
    return (redact(text, found) if found else text), found


def scan_json(value: Any, scanner: SecretScanner, path: str = "") -> list[tuple[str, Finding]]:
    """Scan every string of a JSON value (object keys and values, array items), e.g. a tool schema.

    Args:
        value: the JSON value (mappings, sequences, strings, numbers …).
        scanner: the scanner to use.
        path: the dotted path of ``value`` (``""`` at the top).

    Returns:
        ``(path, finding)`` pairs, e.g. ``("function.parameters.properties.region.default", Finding(1, …))``;
        array items are addressed as ``enum[2]``; a key holding a secret (a property name) is a finding at its
        own path, where the key is shown redacted (``properties.[withheld by policy: GitHub Token on line 1]``).
        Never the secret itself.
    """
    if isinstance(value, str):
        return [(path, f) for f in scanner.scan(value)]
    out: list[tuple[str, Finding]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            shown, found = _json_key(key, scanner)
            where = f"{path}.{shown}" if path else shown
            out += [(where, f) for f in found]
            out += scan_json(item, scanner, where)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            out += scan_json(item, scanner, f"{path}[{i}]")
    return out


def redact_json(value: Any, scanner: SecretScanner) -> Any:
    """``value`` with every string holding a secret redacted line by line (:func:`redact`); a copy, same shape.

    An object key holding a secret (a schema's property name) becomes :data:`WITHHELD_KEY` (``_2``, ``_3`` … when
    taken), a name providers accept as a property name.
    """
    if isinstance(value, str):
        return redact(value, scanner.scan(value))
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            sent = key
            if isinstance(key, str) and scanner.scan(key):
                sent, n = WITHHELD_KEY, 1
                while sent in out or sent in value:
                    n += 1
                    sent = f"{WITHHELD_KEY}_{n}"
            out[sent] = redact_json(item, scanner)
        return out
    if isinstance(value, list | tuple):
        return [redact_json(item, scanner) for item in value]
    return value


def describe_json(hits: Sequence[tuple[str, Finding]]) -> str:
    """A content-free description of :func:`scan_json` hits: ``"1 secret withheld: GitHub Token at a.b (line 1)"``."""
    parts = ", ".join(f"{f.type} at {path or '(top)'} (line {f.line})" for path, f in hits)
    return f"{len(hits)} secret{'s' if len(hits) != 1 else ''} withheld: {parts}"


def describe(findings: Sequence[Finding]) -> str:
    """A content-free description of findings, e.g. ``"2 secrets withheld: AWS Access Key (line 3), …"``.

    A run of lines with the same type (a private key block) is one secret: ``Private Key (lines 4-30)``.
    """
    runs: list[tuple[str, int, int]] = []
    for f in sorted(set(findings), key=lambda f: (f.type, f.line)):
        if runs and runs[-1][0] == f.type and runs[-1][2] == f.line - 1:
            runs[-1] = (f.type, runs[-1][1], f.line)
        else:
            runs.append((f.type, f.line, f.line))
    runs.sort(key=lambda r: (r[1], r[0]))
    parts = ", ".join(f"{t} (line {a})" if a == b else f"{t} (lines {a}-{b})" for t, a, b in runs)
    return f"{len(runs)} secret{'s' if len(runs) != 1 else ''} withheld: {parts}"


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


def check_identifiers(records: Sequence[Any], *, source: str = "<api>", scanner: SecretScanner | None = None) -> None:
    """Refuse records whose ids or names hold a secret, before anything is written.

    Record, conversation and branch ids, participant names and a tool call's tool name and call id are
    identifiers: every manifest, decision and log line stores them (a participant's id is
    ``<conversation>/participant/<name>``) and the provider's tool-call fields repeat them, so they cannot be
    withheld afterwards the way content is.

    Raises:
        InputError: names the record and the field (``id``, ``conversation_id``, ``branch_id``, ``name``,
            ``call_id``) and the secret type, never the value. The record is its index in the source file
            (``meta["source_index"]``, which importers set) when it has one, else its index in ``records``.
    """
    from ctxledger.errors import InputError

    scanner = scanner or default_scanner()
    named = [
        (index, field, getattr(record, field, None)) for index, record in enumerate(records) for field in _named(record)
    ]
    if not _may_hold_secrets([value for _, _, value in named if isinstance(value, str)], scanner):
        return
    for index, field, value in named:
        hits = scanner.scan(value) if isinstance(value, str) else ()
        if hits:
            what = ", ".join(sorted({f.type for f in hits}))
            meta = getattr(records[index], "meta", None)
            at = meta.get("source_index") if isinstance(meta, Mapping) else None
            raise InputError(
                f"holds a secret ({what}); ids, participant and tool names are stored in every manifest, "
                "so a secret cannot be one: name it otherwise",
                source=source,
                index=at if isinstance(at, int) else index,
                field=field,
            )


def _named(record: Any) -> tuple[str, ...]:
    """The identifier fields of ``record`` :func:`check_identifiers` scans."""
    kind = getattr(getattr(record, "kind", None), "value", None)
    named = ("name", "call_id") if kind == "tool_call" else ("name",) if kind == "participant" else ()
    return ("id", "conversation_id", "branch_id", *named)


def _may_hold_secrets(values: Sequence[str], scanner: SecretScanner) -> bool:
    """Whether one of ``values`` may hold a finding; ``False`` only when none does.

    Values without line breaks are scanned as the lines of one text: what the scanner finds in a line alone, it
    finds in that line of a longer text (it also finds more: a private key's lines after its first, an AWS
    secret beside a key id of another line), so a text without findings clears every value in one scan.
    """
    distinct = list(dict.fromkeys(values))
    joined = "\n".join(distinct)
    if not distinct or _SEPARATORS.search(joined) or joined.count("\n") != len(distinct) - 1:
        return bool(distinct)
    return bool(scanner._scan(joined, gated=True))


_RARE_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ%&/\\")
"""First characters of the gates and literals searched as one alternation (:data:`_TEXT_SEARCHES`): rare in prose,
code, logs and JSON, so Python's ``re`` seldom stops to try the alternatives."""


def _head(alternative: str) -> str:
    """The first atom of a literal-led regex alternative (an escaped character with its backslash)."""
    return alternative[:2] if alternative.startswith("\\") else alternative[:1]


def _grouped(alternatives: Sequence[str]) -> str:
    """One regex of ``alternatives`` grouped by their first atom (``A(?:KC…|P…)|B(?:EGIN|…)``).

    Python's ``re`` rejects a position with one comparison per group rather than one per alternative.
    """
    groups: dict[str, list[str]] = {}
    for alt in alternatives:
        groups.setdefault(_head(alt), []).append(f"(?:{alt[len(_head(alt)) :]})")
    return "|".join(
        head + (rests[0] if len(rests) == 1 else f"(?:{'|'.join(rests)})") for head, rests in groups.items()
    )


def _text_searches() -> tuple[tuple[re.Pattern[str], ...], tuple[str, ...]]:
    """The searches :meth:`SecretScanner._candidates` makes in a text: regexes, and literals for ``str.find``.

    The gates and literals that start with a character of :data:`_RARE_FIRST` are one grouped alternation
    (:func:`_grouped`); every other gate is a regex of its own, every other literal a ``str.find``. Marking the
    lines of each match of an alternation marks the lines each alternative matches in, since none of them can
    match a line break (the Softlayer gate's ``.`` could, and is searched alone).
    """
    literals = [re.escape(literal) for literal in TEXT_LITERALS]
    joined = [alt for alt in (*TEXT_GATES, *literals) if alt != SOFTLAYER_URL_GATE and _head(alt)[-1] in _RARE_FIRST]
    regexes = [re.compile(_grouped(joined)), *(re.compile(gate) for gate in TEXT_GATES if gate not in joined)]
    finds = tuple(literal for literal, alt in zip(TEXT_LITERALS, literals, strict=True) if alt not in joined)
    return tuple(regexes), finds


_TEXT_SEARCHES, _TEXT_FINDS = _text_searches()
_EXTRA_GATES = {name: re.compile(gate) for name, gate in EXTRA_GATES.items()}
_FOLDED_SEARCH = re.compile("|".join(map(re.escape, FOLDED_LITERALS)))
"""Every one of :data:`FOLDED_LITERALS` (an alternation of literals: faster than one ``str.find`` each)."""
_ALL_WORDS = tuple(sorted({w for words in (*GATE_WORDS.values(), *EXTRA_WORDS.values(), OWN_WORDS) for w in words}))

_ASSIGNMENT_FOLDED = _folded_regex("(?i:" + ASSIGNMENT.pattern.removeprefix("(?i)") + ")")
""":data:`ASSIGNMENT` for case-folded text (:func:`_folded_regex`); ``None`` if it cannot be written so."""
_ASSIGNMENT_TAIL_FOLDED = _folded_regex("(?i:" + ASSIGNMENT_TAIL.pattern.removeprefix("(?i)") + ")")
""":data:`ASSIGNMENT_TAIL` for case-folded text, likewise."""
