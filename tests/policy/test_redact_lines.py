"""``redact`` replaces whole lines as ``str.splitlines`` numbers them, without splitting a text into all its lines.

The reference is the definition itself: split the text with ``splitlines(keepends=True)``, replace each line a
finding names (keeping a ``\\n`` end as ``\\n``), join. Texts are generated from every line boundary
``str.splitlines`` knows (``\\r\\n`` included), with findings on lines before, inside and past the text.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.policy.secrets import Finding, redact

BOUNDARIES = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _by_splitlines(text: str, findings: list[Finding]) -> str:
    if not findings:
        return text
    types: dict[int, set[str]] = {}
    for f in findings:
        types.setdefault(f.line, set()).add(f.type)
    lines = text.splitlines(keepends=True)
    for number, found in types.items():
        if 1 <= number <= len(lines):
            end = "\n" if lines[number - 1].endswith("\n") else ""
            lines[number - 1] = f"[withheld by policy: {', '.join(sorted(found))} on line {number}]{end}"
    return "".join(lines)


texts = st.lists(st.one_of(st.sampled_from(BOUNDARIES), st.text(alphabet="ab é", max_size=4)), max_size=20).map(
    "".join
)
findings = st.lists(
    st.builds(Finding, st.integers(-1, 14), st.sampled_from(["GitHub Token", "AWS Access Key"])), max_size=6
)


@settings(max_examples=500, deadline=None)
@given(text=texts, found=findings)
def test_redact_replaces_the_lines_splitlines_numbers(text: str, found: list[Finding]) -> None:
    assert redact(text, found) == _by_splitlines(text, found)
