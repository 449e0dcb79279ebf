"""Secrets kept out of the messages ctxledger prints or answers: errors and the server's log lines.

An error names the value at fault (``unknown role 'ghp_…'``, ``record 'sk-…' was not found``) so the caller can
find it; when that value is a secret, printing it would leak it to a terminal, a log or an HTTP client. The
payload's rule is to withhold a line holding a secret (:func:`ctxledger.policy.secrets.redact`); a message is one
line, so it would lose the rest of its sentence. Here each quoted value (``'…'`` or ``"…"``) that alone holds a
secret is replaced by ``[withheld by policy: <types>]``, and a message in which a secret is still found after that
has its lines withheld as the payload's are.
"""

from __future__ import annotations

import re
from typing import Any

from ctxledger.policy.secrets import SecretScanner, default_scanner, redact

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
        if not found:
            return match.group(0)
        return f"[withheld by policy: {', '.join(sorted({f.type for f in found}))}]"

    out = _QUOTED.sub(withheld, text)
    return redact(out, scan(out))
