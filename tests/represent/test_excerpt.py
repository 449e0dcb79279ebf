"""Excerpts of large tool outputs: bounded, keep what matters, and point back to the exact bytes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from represent_helpers import mini_swe_output, read_json, swe_agent_observation, tau_tool_outputs

from ctxledger.errors import BudgetError, ConfigurationError
from ctxledger.hashing import sha256_hex
from ctxledger.represent import Excerpt, Excerpter, LineIndex, make_excerpt, rehydrate
from ctxledger.testing import MemoryBlobStore
from ctxledger.tokens import TokenCounter, get_counter

MARKER_RE = re.compile(r"^… (?:lines? \d+(?:–\d+)? omitted \((\d+) bytes\)|(\d+) bytes omitted \(.*\)) …$", re.M)


def _excerpt(data: bytes, counter: TokenCounter, max_tokens: int, **kw: object) -> Excerpt:
    return make_excerpt(
        data, artifact_id="art-1", sha256=sha256_hex(data), max_tokens=max_tokens, counter=counter, **kw
    )


def _b13_output(cases_dir: Path) -> tuple[bytes, str]:
    case = read_json(cases_dir / "B13.json")
    m4 = next(m for m in case["messages"] if m["id"] == "m4")
    return m4["content"].encode("utf-8"), m4["artifact_ref"]


def _check_runs(excerpt: Excerpt, data: bytes) -> None:
    """Every locator's bytes are shown verbatim, in order, and shown + omitted bytes cover the output."""
    cursor = 0
    for loc in excerpt.locators:
        assert cursor <= loc.byte_start < loc.byte_end <= len(data)
        shown = data[loc.byte_start : loc.byte_end].decode("utf-8", errors="replace")
        assert shown in excerpt.text
        cursor = loc.byte_end
    omitted = sum(int(a or b) for a, b in MARKER_RE.findall(excerpt.text))
    assert omitted + sum(loc.byte_end - loc.byte_start for loc in excerpt.locators) == len(data)


def test_b13_excerpt_keeps_the_fatal_line_and_references_the_artifact(cases_dir: Path, counter: TokenCounter):
    """Case B13: a 6,500-token build log fits in 1,500 tokens, keeps the fatal line, names the artifact."""
    data, ref = _b13_output(cases_dir)
    assert counter.count(data.decode()) > 1500
    excerpt = _excerpt(data, counter, 1500, ref_uri=ref)
    assert excerpt.tokens == counter.count(excerpt.text) <= 1500
    assert "fatal: could not read submodule 'third_party/zlib-ng'" in excerpt.text
    assert ref in excerpt.text
    assert "ctxledger rehydrate art-1" in excerpt.text
    _check_runs(excerpt, data)


def test_b13_tight_budget_still_keeps_errors_and_tail(cases_dir: Path, counter: TokenCounter):
    """Under 250 tokens the excerpt drops compile lines, not the error, the warning or the summary."""
    data, ref = _b13_output(cases_dir)
    excerpt = _excerpt(data, counter, 250, ref_uri=ref)
    assert excerpt.tokens <= 250
    for kept in ("[0242] fatal: could not read submodule", "[0243] build stopped: 1 error, 1 warning"):
        assert kept in excerpt.text
    assert "[0121] warning: deprecated flag" in excerpt.text
    assert "[0100] Compiling module_100.c" not in excerpt.text
    assert re.search(r"… lines \d+–\d+ omitted \(\d+ bytes\) …", excerpt.text)
    _check_runs(excerpt, data)


def test_locator_lines_and_fetch_match_the_bytes(cases_dir: Path, counter: TokenCounter):
    """Each locator's lines are the lines its byte range touches, and ``fetch`` names that range."""
    data, _ = _b13_output(cases_dir)
    index = LineIndex(data)
    for loc in _excerpt(data, counter, 400).locators:
        assert loc.line_start == data[: loc.byte_start].count(b"\n") + 1
        assert loc.line_end == index.line_of(loc.byte_end - 1)
        assert loc.fetch == f"ctxledger rehydrate art-1 --bytes {loc.byte_start}:{loc.byte_end}"
        assert loc.sha256 == sha256_hex(data)


def test_pytest_failure_excerpt_keeps_the_assertion(data_dir: Path, counter: TokenCounter):
    """A real pytest failure (pydicom) keeps its ``E`` line, its location and the FAILED summary."""
    data = mini_swe_output(data_dir, "pydicom__pydicom-1139", 131)
    excerpt = _excerpt(data, counter, 220)
    assert excerpt.tokens <= 220 < counter.count(data.decode())
    assert "E       AttributeError: 'TestBadValueRead' object has no attribute 'tag'" in excerpt.text
    assert "FAILED pydicom/tests/test_valuerep.py::TestBadValueRead::test_read_bad_value_in_VR_default" in (
        excerpt.text
    )
    _check_runs(excerpt, data)


def test_focus_lines_are_kept_first(data_dir: Path, counter: TokenCounter):
    """In a real 10 KB source listing, the line naming the focus string survives a 150-token budget."""
    data = mini_swe_output(data_dir, "pydicom__pydicom-1256", 7)
    plain = _excerpt(data, counter, 150)
    focused = _excerpt(data, counter, 150, focus=["def get_pn_element_value"])
    assert "def get_pn_element_value" not in plain.text
    assert "def get_pn_element_value(self, value):" in focused.text
    _check_runs(focused, data)


def test_whole_output_that_fits_is_shown_whole(data_dir: Path, counter: TokenCounter):
    """A small output comes back whole, with one locator spanning every byte and line."""
    data = mini_swe_output(data_dir, "marshmallow-code__marshmallow-1343", 9)
    excerpt = _excerpt(data, counter, 500, source_version="git:abc123")
    assert data.decode() in excerpt.text
    assert "source version git:abc123" in excerpt.text
    (loc,) = excerpt.locators
    assert (loc.byte_start, loc.byte_end, loc.line_start) == (0, len(data), 1)
    assert loc.line_end == LineIndex(data).line_count
    assert "omitted" not in excerpt.text


def test_one_huge_json_line_is_cut_inside_the_line(data_dir: Path, counter: TokenCounter):
    """A real one-line 8 KB flight search is excerpted by byte ranges within line 1."""
    content = max(tau_tool_outputs(data_dir, "search_onestop_flight"), key=len)
    data = content.encode()
    assert b"\n" not in data and len(data) > 4000
    excerpt = _excerpt(data, counter, 300)
    assert excerpt.tokens <= 300
    assert all(loc.line_start == loc.line_end == 1 for loc in excerpt.locators)
    assert re.search(r"… \d+ bytes omitted \(line 1, bytes \d+–\d+\) …", excerpt.text)
    assert json.loads(data)  # the input really is one JSON document
    _check_runs(excerpt, data)


def test_same_inputs_give_the_same_excerpt(cases_dir: Path, counter: TokenCounter):
    """Excerpts are deterministic (the manifest's payload hash depends on it)."""
    data, ref = _b13_output(cases_dir)
    assert _excerpt(data, counter, 333, ref_uri=ref) == _excerpt(data, counter, 333, ref_uri=ref)


def test_budget_below_the_framing_is_an_error(cases_dir: Path, counter: TokenCounter):
    """A budget that cannot hold the header and footer raises BudgetError; a non-positive one is misuse."""
    data, _ = _b13_output(cases_dir)
    with pytest.raises(BudgetError, match="tokens of framing"):
        _excerpt(data, counter, 30)
    with pytest.raises(ConfigurationError):
        _excerpt(data, counter, 0)


_LINES = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["error: boom", "FAILED t.py::x", "Traceback (most recent call last):", "warning: w", ""]),
    st.text(alphabet="aé€😀 ,{}", min_size=500, max_size=1400),
)
_OUTPUTS = st.one_of(
    st.builds(
        lambda lines, sep: sep.join(lines).encode("utf-8"),
        st.lists(_LINES, max_size=50),
        st.sampled_from(["\n", "\r\n"]),
    ),
    st.binary(max_size=3000),
)
_COUNTER = get_counter("o200k_base")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=_OUTPUTS,
    max_tokens=st.integers(min_value=150, max_value=900),
    focus=st.lists(st.text(max_size=5), max_size=2),
)
def test_property_every_locator_rehydrates_to_the_bytes_it_claims(data: bytes, max_tokens: int, focus: list[str]):
    """For any output and budget: tokens ≤ max, and every locator rehydrates to exactly its bytes, shown verbatim."""
    blobs = MemoryBlobStore()
    sha = blobs.put(data).sha256
    excerpt = make_excerpt(data, artifact_id="a", sha256=sha, max_tokens=max_tokens, counter=_COUNTER, focus=focus)
    assert excerpt.tokens == _COUNTER.count(excerpt.text) <= max_tokens
    for loc in excerpt.locators:
        exact = rehydrate(blobs, loc)
        assert exact == data[loc.byte_start : loc.byte_end]
        assert exact.decode("utf-8", errors="replace") in excerpt.text
        assert loc.line_start == data[: loc.byte_start].count(b"\n") + 1
    _check_runs(excerpt, data)


def test_grep_output_keeps_the_flag_at_its_end(data_dir: Path, counter: TokenCounter):
    """SWE-agent CTF demo: 24 KB of ``strings | grep flag`` shrinks to 200 tokens and keeps the flag line."""
    data = swe_agent_observation(data_dir, "forensics/flash", 2)
    assert len(data) > 20000
    excerpt = _excerpt(data, counter, 200)
    assert excerpt.tokens <= 200
    assert "flag{b3l0w_th3_r4dar}" in excerpt.text
    _check_runs(excerpt, data)


def _omar_rossi(data_dir: Path) -> bytes:
    """tau-bench airline task 5's real get_user_details answer: a 1,044-byte one-line JSON user profile."""
    trajectories = read_json(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json")
    traj = next(t["traj"] for t in trajectories if (t["task_id"], t["trial"]) == (5, 0))
    data = next(m["content"] for m in traj if m["role"] == "tool" and m["name"] == "get_user_details").encode()
    assert b"\n" not in data and len(data) == 1044
    return data


def test_a_one_line_output_keeps_its_head_and_its_tail(data_dir: Path, counter: TokenCounter):
    """New-user report 3, item 6: at 256 tokens the profile shows its opening (the name) and its end (the ids).

    It used to show only its last 20 bytes: the one line was all "tail", cut into 512-byte pieces taken from
    the end, and the next piece did not fit.
    """
    data = _omar_rossi(data_dir)
    excerpt = _excerpt(data, counter, 256)
    assert excerpt.tokens <= 256
    first, last = excerpt.locators[0], excerpt.locators[-1]
    assert first.byte_start == 0 and last.byte_end == len(data)
    assert '"first_name": "Omar", "last_name": "Rossi"' in excerpt.text
    assert '"QKRY03"]}' in excerpt.text
    shown = sum(loc.byte_end - loc.byte_start for loc in excerpt.locators)
    assert shown > len(data) // 3  # most of the budget goes to the output, not to one 20-byte tail
    _check_runs(excerpt, data)


def test_a_one_line_output_keeps_an_error_from_its_middle(data_dir: Path, counter: TokenCounter):
    """An error word in the middle of a one-line output is kept with the bytes around it, and head and tail."""
    data = _omar_rossi(data_dir)
    middle = len(data) // 2
    spliced = data[:middle] + b' "note": "Error: card declined", ' + data[middle:]
    excerpt = _excerpt(spliced, counter, 200)
    assert "Error: card declined" in excerpt.text
    assert excerpt.locators[0].byte_start == 0 and excerpt.locators[-1].byte_end == len(spliced)
    _check_runs(excerpt, spliced)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=_OUTPUTS,
    sizes=st.lists(st.integers(min_value=40, max_value=900), min_size=2, max_size=5),
    focus=st.lists(st.text(max_size=5), max_size=2),
)
def test_one_excerpter_at_many_sizes_gives_each_size_its_own_excerpt(data: bytes, sizes: list[int], focus: list[str]):
    """Sizes asked of one :class:`Excerpter`, in any order, give what a fresh excerpt of each size gives."""
    shared = Excerpter(data, artifact_id="a", sha256=sha256_hex(data), counter=_COUNTER, focus=focus)
    for size in sizes:
        fresh = Excerpter(data, artifact_id="a", sha256=sha256_hex(data), counter=_COUNTER, focus=focus)
        try:
            expected = fresh.excerpt(size)
        except BudgetError:
            with pytest.raises(BudgetError):
                shared.excerpt(size)
            continue
        assert shared.excerpt(size) == expected
