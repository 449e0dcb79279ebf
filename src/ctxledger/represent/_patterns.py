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
    r"|denied|timed out|timeout|could not|cannot|unable to|no such file|not found|refused|unreachable)\b"
    r"|^Killed\b"
    r"|^E {3}"
    r"|\b\w+(?:Error|Exception):",
    re.IGNORECASE | re.MULTILINE,
)
"""A line that reports an error (case-insensitive words, pytest ``E   `` lines, ``FooError:``, the shell's
``Killed`` for a process it killed)."""

BENIGN_RE = re.compile(
    r"\b(?:0|no) (?:errors?|failures?|failed)\b"
    r"""|^\W*["']error["']\s*:\s*(?:""|''|null|None|false)\s*[,}]""",
    re.IGNORECASE,
)
"""Lines that name errors only to say there were none: ``0 errors``, ``no failures``, and JSON-ish
records that open with an empty error field (``{"error": "", "response": …}``)."""

CODE_RE = re.compile(
    r"^\s*\d+(?::\s|\t)"
    r"|^\s*(?:raise|except|def|class|return|if|elif|else|import|from|try|with|for|while|assert|yield|await)\b"
    r"|^\s*(?:#|//)"
)
"""Source code rather than a log line: a numbered listing line (``1507:    …`` from an editor or
``grep -n``, ``  42<TAB>…`` from ``cat -n``/``nl``; a timestamp such as ``12:34:56`` is not one), or a line
that opens with a Python keyword or a comment. Code that mentions an error type reports nothing."""

WARNING_RE = re.compile(r"\bwarn(?:ing|ings)?\b|\b\w+Warning\b", re.IGNORECASE)
"""A line that reports a warning."""

EXIT_STATUS_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"\bexit(?:ed)?(?: with)? (?:status|code)[:= ]+(-?\d+)", re.IGNORECASE),
    re.compile(r"\breturn ?code[:= ]+(-?\d+)", re.IGNORECASE),
    re.compile(r"^make(?:\[\d+\])?: \*\*\* .* Error (\d+)", re.MULTILINE),
)
"""Where shells, harnesses (mini-swe-agent's ``<returncode>``) and make report an exit status."""


SUMMARY_RE = re.compile(
    r"\b\d+ (?:passed|failed|errors?|failures?|skipped|deselected|xfailed|xpassed|warnings?)\b"
    r"|^\W*(?:no tests ran|ran \d+ tests?\b|ok\s*$|ok \(|passed\b|failed\b|success(?:ful)?\b|failure\b)"
    r"|\b(?:build|tests?|job|command|check) (?:succeeded|passed|failed)\b",
    re.IGNORECASE | re.MULTILINE,
)
"""A line that reports how a run ended: test counts (pytest's ``=== 1 failed, 400 passed ===``, ``0 errors``),
unittest's ``Ran 12 tests`` / ``OK`` / ``FAILED (failures=1)``, ``build succeeded``."""

VOLATILE_RE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
    r"|\b0x[0-9a-f]+\b"
    r"|\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b",
    re.IGNORECASE,
)
"""Parts of an outcome line that change between otherwise equal runs: timestamps, clock times, memory
addresses, durations (``in 3.21s``)."""


def is_error_line(line: str) -> bool:
    """Whether a line reports an error (not a "0 errors" line, not a line of source code)."""
    return bool(ERROR_RE.search(line)) and not BENIGN_RE.search(line) and not CODE_RE.match(line)


def is_warning_line(line: str) -> bool:
    """Whether a line reports a warning (and is neither an error line nor source code)."""
    return bool(WARNING_RE.search(line)) and not is_error_line(line) and not CODE_RE.match(line)


def is_outcome_line(line: str) -> bool:
    """Whether a line says how a run ended.

    That is an error line (:func:`is_error_line`) or a summary line (:data:`SUMMARY_RE`, source code excepted).
    """
    return is_error_line(line) or (bool(SUMMARY_RE.search(line)) and not CODE_RE.match(line))


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
