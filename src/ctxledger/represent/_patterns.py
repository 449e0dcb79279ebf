"""What counts as an error or a warning line in tool output (shared by excerpts and log extraction).

The heuristics are deliberately plain regular expressions so that their behaviour can be read and
tested. They follow what build tools, shells, Python and test runners actually print: ``fatal:`` (git),
``error:``/``Error N`` (compilers, make), ``Traceback``/``…Error:`` (Python), ``FAILED``/``E   `` (pytest),
``timeout``/``unreachable`` (network), and the wrappers agent harnesses put around outputs.
"""

from __future__ import annotations

import re

ERROR_RE = re.compile(
    r"\b(?:error|errors|fatal|exception|traceback|failed|failure|panic|segmentation fault|abort(?:ed)?"
    r"|denied|timed out|timeout|could not|cannot|unable to|no such file|not found|refused|unreachable"
    r"|killed)\b"
    r"|^E {3}"
    r"|\b\w+(?:Error|Exception):",
    re.IGNORECASE | re.MULTILINE,
)
"""A line that reports an error (case-insensitive words, pytest ``E   `` lines, ``FooError:``)."""

BENIGN_RE = re.compile(
    r"\b(?:0|no) (?:errors?|failures?|failed)\b"
    r"""|^\W*["']error["']\s*:\s*(?:""|''|null|None|false)\s*[,}]""",
    re.IGNORECASE,
)
"""Lines that name errors only to say there were none: ``0 errors``, ``no failures``, and JSON-ish
records that open with an empty error field (``{"error": "", "response": …}``)."""

WARNING_RE = re.compile(r"\bwarn(?:ing|ings)?\b|\b\w+Warning\b", re.IGNORECASE)
"""A line that reports a warning."""

EXIT_STATUS_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"\bexit(?:ed)?(?: with)? (?:status|code)[:= ]+(-?\d+)", re.IGNORECASE),
    re.compile(r"\breturn ?code[:= ]+(-?\d+)", re.IGNORECASE),
    re.compile(r"^make(?:\[\d+\])?: \*\*\* .* Error (\d+)", re.MULTILINE),
)
"""Where shells, harnesses (mini-swe-agent's ``<returncode>``) and make report an exit status."""


def is_error_line(line: str) -> bool:
    """Whether a line reports an error (and is not a "0 errors" line)."""
    return bool(ERROR_RE.search(line)) and not BENIGN_RE.search(line)


def is_warning_line(line: str) -> bool:
    """Whether a line reports a warning (and is not an error line)."""
    return bool(WARNING_RE.search(line)) and not is_error_line(line)


def exit_status(text: str) -> int | None:
    """The exit status a tool output reports, or ``None``.

    The harness tag ``<returncode>`` wins; otherwise the *last* status phrase in the text is used.
    """
    tagged = EXIT_STATUS_RES[0].search(text)
    if tagged:
        return int(tagged.group(1))
    found: list[tuple[int, int]] = []
    for pattern in EXIT_STATUS_RES[1:]:
        found.extend((m.start(), int(m.group(1))) for m in pattern.finditer(text))
    return max(found)[1] if found else None
