"""The secrets in stored bytes, or in a byte range of them: what a surface giving exact bytes must refuse.

Exact bytes cannot be redacted (they would no longer be exact), so a surface that gives them (``ctxledger
rehydrate``, ``GET /v1/rehydrate``) refuses bytes in which the policy's scanner finds a secret. For a range,
the whole content is scanned (a range may cut a key so that its piece alone is no longer recognised) and a
finding counts when its line overlaps the range.
"""

from __future__ import annotations

from ctxledger.policy.secrets import Finding, SecretScanner, describe


def secrets_in_range(
    data: bytes, span: tuple[int | None, int | None] | None, scanner: SecretScanner
) -> tuple[Finding, ...]:
    """The findings in ``data`` whose line overlaps bytes ``span`` (``(start, end)``, ``None``: the whole).

    Args:
        data: the whole stored content.
        span: 0-based byte offsets, end exclusive; a ``None`` start is 0 and a ``None`` end the content's end.
        scanner: the scanner to use.

    Returns:
        The findings (1-based line numbers of ``data`` read as UTF-8, as ``str.splitlines`` numbers them).
    """
    found = scanner.scan(data.decode("utf-8", "replace"))
    if not found or span is None:
        return found
    start = span[0] or 0
    end = len(data) if span[1] is None else span[1]
    # an invalid byte is one character in both decodings and never ends a line, so lines number alike
    lines = data.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    bounds: list[tuple[int, int]] = []
    offset = 0
    for line in lines:
        size = len(line.encode("utf-8", "surrogateescape"))
        bounds.append((offset, offset + size))
        offset += size
    return tuple(
        f for f in found if f.line > len(bounds) or (bounds[f.line - 1][0] < end and start < bounds[f.line - 1][1])
    )


def found_in_bytes(findings: tuple[Finding, ...]) -> str:
    """``"Secret Assignment (line 2), Private Key (lines 4-30) found in the bytes"``: types and lines, no value."""
    return describe(findings).split(": ", 1)[1] + " found in the bytes"
