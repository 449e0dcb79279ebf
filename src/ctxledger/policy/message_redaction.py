r"""Secrets kept out of the messages ctxledger prints or answers: errors and the server's log lines.

An error names the value at fault (``unknown role 'ghp_…'``, ``record 'sk-…' was not found``) so the caller can
find it; when that value is a secret, printing it would leak it to a terminal, a log or an HTTP client. The
payload's rule is to withhold a line holding a secret (:func:`ctxledger.policy.secrets.redact`); a message is one
line, so it would lose the rest of its sentence. Here only the part holding the secret is replaced by
``[withheld by policy: <types>]``: each quoted value (``'…'`` or ``"…"``) that alone holds a secret, then each
word (a run without spaces or quotes) that still does, narrowed to the fewest of its ``/``, ``\``, ``=``, ``:``,
``,`` or ``;``-separated pieces in which the scanner still finds it (``no such file: /in/[withheld by policy:
GitHub Token]``). The scanner reports lines, not spans, so the span is found by scanning the pieces. A message in
which a secret is still found after that (a secret the scanner only recognises with the words around it, a
private key block) has its lines withheld as the payload's are.

:func:`redact_path` does the same for a field path (``body.[withheld by policy: <types>]``), piece by piece.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from ctxledger.errors import quote_values_with
from ctxledger.policy.secrets import Finding, SecretScanner, default_scanner, redact

_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def redact_message(text: Any, scanner: SecretScanner | None = None) -> Any:
    """``text`` with every quoted secret replaced, and any line still holding a secret withheld.

    Args:
        text: a message (an error's ``str``, a log line); a non-string is returned as it is.
        scanner: the scanner to use; the default scanner (detect-secrets' plugins and ctxledger's patterns)
            when ``None``.

    Returns:
        ``text`` itself when no secret is found; otherwise a copy in which no finding remains.
    """
    if not isinstance(text, str) or not text:
        return text
    scan = (scanner or default_scanner()).scan
    if not scan(text):
        return text

    def withheld(match: re.Match[str]) -> str:
        found = scan(match.group(0)[1:-1])
        return _marker(found) if found else match.group(0)

    out = _QUOTED.sub(withheld, text)
    if scan(out):
        out = _WORD.sub(lambda m: _narrowed(m.group(0), scan), out)
    return redact(out, scan(out))


def shown(value: Any, scanner: SecretScanner | None = None) -> str:
    """``repr(value)``, to name a caller's value in an error message; ``[withheld by policy: <types>]`` for a secret.

    For the messages the library raises (``unknown serializer 'sk-…'``): the caller may print or log them.
    """
    text = repr(value)
    found = (scanner or default_scanner()).scan(text)
    return _marker(found) if found else text


def redact_path(parts: Iterable[Any], scanner: SecretScanner | None = None) -> str:
    """A field path (``body.window_tokens``, ``messages[3].content``) with each part holding a secret withheld.

    Args:
        parts: the path's parts in order (as a validation error's ``loc``): a string is a name (joined with
            ``.``), an integer an index (``[i]``).
        scanner: the scanner to use; the default scanner when ``None``.

    Returns:
        The dotted path, each name holding a secret replaced by ``[withheld by policy: <types>]``
        (``body.[withheld by policy: GitHub Token]``); the other parts are kept as they are.
    """
    scan = (scanner or default_scanner()).scan
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = str(part)
        found = scan(name)
        name = _marker(found) if found else name
        out += f".{name}" if out else name
    return out


_WORD = re.compile(r"[^\s'\"]+")
_PIECE_END = re.compile(r"[/\\=:,;]")
_KEY_RUN = re.compile(r"[A-Za-z0-9+_-]*")
"""A piece that may continue a key past a ``/`` or ``=`` (base64 and URL-safe base64 letters): withheld with it."""
_MAX_PIECES = 16
"""A word cut in more pieces than this is withheld whole (narrowing it would cost too many scans)."""


def _marker(found: Iterable[Finding]) -> str:
    return f"[withheld by policy: {', '.join(sorted({f.type for f in found}))}]"


def _narrowed(word: str, scan: Callable[[str], tuple[Finding, ...]]) -> str:
    """``word`` with the shortest run of its pieces that holds a secret withheld; whole when more remains.

    A detector may match a key's first part (an assignment ``API_KEY=abc…`` matches before the value's first
    ``/``), so the run is extended over the pieces after it that could continue a base64 key.
    """
    found = scan(word)
    if not found:
        return word
    seps = list(_PIECE_END.finditer(word))
    if len(seps) >= _MAX_PIECES:
        return _marker(found)
    starts = [0, *(m.end() for m in seps)]
    ends = [*(m.start() for m in seps), len(word)]
    best = (0, len(word))
    for i, start in enumerate(starts):
        for end in ends[i:]:
            if end - start >= best[1] - best[0]:
                break
            if scan(word[start:end]):
                best = (start, end)
                break
    start, end = best
    while end < len(word) and word[end] in "/=" and (tail := _KEY_RUN.match(word, end + 1)) is not None:
        end = tail.end()  # a key's own "/" (base64) or "=" (padding): withhold the rest of the key with it
    out = word[:start] + _marker(scan(word[start:end])) + word[end:]
    return _marker(found) if scan(out) else out


quote_values_with(shown)
