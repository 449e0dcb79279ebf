"""The case runner maps every documented case field and expectation key, and refuses any other by name."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.eval.cases import (
    _CHECKS,
    BUDGET_FIELDS,
    CASE_FIELDS,
    DESCRIPTIVE_FIELDS,
    MEMORY_FIELDS,
    MESSAGE_PROVIDER_FIELDS,
    MESSAGE_STORE_FIELDS,
    check_case,
    read_case_file,
    run_case,
    validate_case,
)
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

README_KEYS = {
    "must_include_ids",
    "must_not_include_ids",
    "omitted_together",
    "omitted_reason_for",
    "order_preserved",
    "system_preserved",
    "first_non_system_role",
    "last_included_id",
    "tool_pairs_intact",
    "max_input_tokens",
    "tools_counted",
    "must_not_contain_text",
    "error",
    "must_not_return_empty",
    "excerpted",
    "verbatim_ids",
    "content_parts_preserved_ids",
    "error_names_ids",
    "untrusted_ids",
    "role_unchanged_ids",
    "no_synthetic_messages",
    "conservative_estimate_ids",
    "serialize_anthropic",
}


def _base(messages=None, **extra):
    msgs = messages or [
        {"id": "m1", "role": "system", "content": "You are a support agent.", "tokens": 20},
        {"id": "m2", "role": "user", "content": "Where is my parcel?", "tokens": 10},
    ]
    case = {
        "id": "T01",
        "kind": "generated",
        "messages": msgs,
        "budget": {"window_tokens": 2000, "reserved_output_tokens": 200, "margin_tokens": 10},
        "expect": {"system_preserved": True},
    }
    case.update(extra)
    return case


def _run(case, **kw):
    return check_case(run_case(case, Ledger(MemoryStore()), **kw))


def test_every_readme_expectation_key_has_a_checker():
    """The README's whole vocabulary is implemented (``error``/``error_names_ids`` check the raised error)."""
    assert README_KEYS - set(_CHECKS) == {"error", "error_names_ids"}


NAMES = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=2, max_size=12)


@SETTINGS
@given(
    where=st.sampled_from(["case", "message", "memory", "budget", "expect", "excerpt", "anthropic"]),
    name=NAMES,
)
def test_an_unknown_key_is_refused_by_name(where, name):
    """An unmapped key anywhere in a case is an InputError naming the key and its place; nothing is run."""
    known = {
        "case": CASE_FIELDS | DESCRIPTIVE_FIELDS,
        "message": MESSAGE_PROVIDER_FIELDS | MESSAGE_STORE_FIELDS,
        "memory": MEMORY_FIELDS,
        "budget": BUDGET_FIELDS,
        "expect": set(_CHECKS) | {"error", "error_names_ids"},
        "excerpt": {"max_tokens", "must_contain", "must_reference"},
        "anthropic": {"tool_results_in_one_user_message"},
    }[where]
    if name in known:
        return
    case = _base(memories=[{"id": "k1", "text": "t", "scope": {}, "tokens": 3}])
    target = {
        "case": case,
        "message": case["messages"][1],
        "memory": case["memories"][0],
        "budget": case["budget"],
        "expect": case["expect"],
    }
    if where == "excerpt":
        case["expect"]["excerpted"] = {"m2": {}}
        target["excerpt"] = case["expect"]["excerpted"]["m2"]
    if where == "anthropic":
        case["expect"]["serialize_anthropic"] = {}
        target["anthropic"] = case["expect"]["serialize_anthropic"]
    target[where][name] = 1
    with pytest.raises(InputError) as err:
        validate_case(case)
    assert repr(name) in str(err.value) and "T01" in str(err.value)
    with pytest.raises(InputError):
        run_case(case, Ledger(MemoryStore()))


def test_every_shared_case_is_mapped_whole(cases_dir):
    """No shared case holds a field the runner drops."""
    for path in sorted(cases_dir.glob("*.json")):
        validate_case(read_case_file(path))


@SETTINGS
@given(n=st.integers(2, 5), shuffle=st.randoms(use_true_random=False), as_list=st.booleans())
def test_memory_supersession_and_created_at_are_kept(n, shuffle, as_list):
    """A chain of memories, each superseding the previous (by ``created_at``), in any file order: only the
    newest is included, every older one is omitted as ``superseded``; the record keeps ``created_at``."""
    start = datetime(2025, 3, 1, tzinfo=UTC)
    mems = []
    for k in range(n):
        mem = {
            "id": f"k{k}",
            "text": f"Ships to address number {k}.",
            "scope": {},
            "tokens": 8,
            "created_at": (start + timedelta(days=k)).isoformat(),
        }
        if k:
            mem["supersedes"] = [f"k{k - 1}"] if as_list else f"k{k - 1}"
        mems.append(mem)
    shuffle.shuffle(mems)
    expect = {
        "must_include_ids": [f"k{n - 1}"],
        "omitted_reason_for": {f"k{k}": "superseded" for k in range(n - 1)},
    }
    case = _base(memories=mems, expect=expect)
    ledger = Ledger(MemoryStore())
    run = run_case(case, ledger, provider="openai")
    assert check_case(run) == []
    stored = {r.external_id: r for r in ledger.store.records("default", "case-T01")}
    assert stored["k0"].created_at == start


def test_a_supersedes_naming_no_memory_is_refused():
    case = _base(memories=[{"id": "k1", "text": "t", "scope": {}, "tokens": 3, "supersedes": "k9"}])
    with pytest.raises(InputError, match="k9"):
        run_case(case, Ledger(MemoryStore()))


def _tool_case(**expect):
    msgs = [
        {"id": "m1", "role": "system", "content": "You are a shipping agent.", "tokens": 20},
        {"id": "m2", "role": "user", "content": "Track parcels A and B.", "tokens": 10},
        {
            "id": "m3",
            "role": "assistant",
            "content": None,
            "tokens": 30,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "track", "arguments": '{"p": "A"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "track", "arguments": '{"p": "B"}'}},
            ],
        },
        {"id": "m4", "role": "tool", "tool_call_id": "call_a", "content": "A: in transit, depot 7", "tokens": 8},
        {"id": "m5", "role": "tool", "tool_call_id": "call_b", "content": "B: delivered to locker 3", "tokens": 12},
    ]
    return _base(msgs, expect=expect)


@pytest.mark.parametrize(
    ("expect", "fails"),
    [
        ({"untrusted_ids": ["m4", "m5"]}, False),
        ({"untrusted_ids": ["m2"]}, True),
        ({"role_unchanged_ids": ["m1", "m2", "m4"]}, False),
        ({"no_synthetic_messages": True}, False),
        ({"serialize_anthropic": {"tool_results_in_one_user_message": [["m4", "m5"]]}}, False),
        ({"conservative_estimate_ids": ["m4"]}, False),
        ({"verbatim_ids": ["m2"]}, False),
        ({"verbatim_ids": ["m4"]}, True),
        ({"first_non_system_role": "assistant"}, True),
        ({"omitted_together": [["m4", "m5"]]}, True),
        ({"must_not_contain_text": ["depot 7"]}, True),
        ({"must_not_contain_text": ["depot 9"]}, False),
    ],
)
def test_each_expectation_holds_or_fails_on_both_providers(expect, fails):
    """Checked on the OpenAI and the Anthropic payload of the same case (no target_provider)."""
    failures = _run(_tool_case(**expect))
    assert bool(failures) is fails, failures
    if fails and "serialize_anthropic" not in expect:
        assert any(f.startswith("anthropic: ") for f in failures), failures


@SETTINGS
@given(extra=st.integers(1, 500))
def test_conservative_estimate_fails_when_the_reference_is_higher(extra):
    """A reference count above every built-in estimate of the text is reported, naming the record."""
    case = _tool_case(conservative_estimate_ids=["m4"])
    case["messages"][3]["tokens"] = 30 + extra
    failures = _run(case, provider="openai")
    assert failures and all("m4" in f for f in failures)


@pytest.mark.parametrize("target", ["openai", "anthropic"])
def test_target_provider_runs_only_that_provider(target):
    run = run_case(_tool_case(tool_pairs_intact=True) | {"target_provider": target}, Ledger(MemoryStore()))
    assert run.provider == target and run.others == []
    assert check_case(run) == []


def test_a_bad_target_provider_is_refused():
    with pytest.raises(InputError, match="target_provider"):
        validate_case(_base(target_provider="gemini"))


def test_expectations_beside_an_expected_error_are_reported():
    case = _base(expect={"error": "RequiredBlocksDoNotFit", "verbatim_ids": ["m2"]})
    case["budget"]["window_tokens"] = 100
    failures = _run(case, provider="openai")
    assert any("verbatim_ids" in f for f in failures)


def test_request_scope_is_applied_by_the_runner(cases_dir):
    """B12's ``request`` is the call's scope without any setup by the caller."""
    case = read_case_file(cases_dir / "B12.json")
    assert _run(case) == []
    no_scope = copy.deepcopy(case)
    del no_scope["request"]
    assert any("mem2 not included" in f for f in _run(no_scope))


@SETTINGS
@given(calls=st.integers(1, 4), answered=st.sets(st.integers(0, 3)), provider=st.sampled_from(["openai", "anthropic"]))
def test_a_case_whose_call_has_no_result_runs_with_its_status_stub(calls, answered, provider):
    """A call the case leaves unanswered is answered by a status stub the case gives no cost for: the runner prices
    it by an estimate and the case runs (a pass or a failure row, never a crash)."""
    ids = [f"c{k}" for k in range(calls)]
    msgs = [
        {"id": "m1", "role": "system", "content": "You are an agent.", "tokens": 20},
        {"id": "m2", "role": "user", "content": "Look up the weather.", "tokens": 10},
        {
            "id": "m3",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "wx", "arguments": f'{{"n": {k}}}'}}
                for k, c in enumerate(ids)
            ],
            "tokens": 15 * calls,
        },
        *(
            {"id": f"r{k}", "role": "tool", "tool_call_id": c, "content": f"{k}C", "tokens": 5}
            for k, c in enumerate(ids)
            if k in answered
        ),
        {"id": "m9", "role": "user", "content": "Which is warmer?", "tokens": 8},
    ]
    case = _base(msgs, expect={"must_include_ids": ["m9"], "tool_pairs_intact": True})
    run = run_case(case, Ledger(MemoryStore()), provider=provider)
    assert run.error is None, run.error
    assert check_case(run) == []
    stubs = [e for e in run.assembly.manifest["included"] if e.get("transform") == "status_stub"]
    assert len(stubs) == sum(1 for k in range(calls) if k not in answered)
