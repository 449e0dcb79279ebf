"""A case value of the wrong type, or an expectation naming no record of the case, is refused by name."""

from __future__ import annotations

import copy
import json
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.eval.case_shape import ROLES
from ctxledger.eval.cases import check_case, read_case_file, run_case, validate_case
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _case(**expect):
    return {
        "id": "S01",
        "messages": [
            {"id": "m1", "role": "system", "content": "You are an agent.", "tokens": 20},
            {"id": "m2", "role": "user", "content": "Look up the weather.", "tokens": 10},
            {
                "id": "m3",
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
                "tokens": 20,
            },
            {"id": "m4", "role": "tool", "tool_call_id": "c1", "content": "sunny", "tokens": 10},
        ],
        "memories": [{"id": "k1", "text": "Lives in Oslo.", "scope": {}, "tokens": 5}],
        "budget": {"window_tokens": 2000, "reserved_output_tokens": 200, "margin_tokens": 10},
        "expect": expect or {"system_preserved": True},
    }


def _set(path, value):
    def mutate(case):
        target = case
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return mutate


WRONG = [
    (("budget",), KeyError, "budget"),
    (("budget", "window_tokens"), "2000", "budget.window_tokens"),
    (("budget", "margin_tokens"), True, "budget.margin_tokens"),
    (("budget", "reserved_output_tokens"), KeyError, "budget.reserved_output_tokens"),
    (("messages", 1, "tokens"), "10", "messages[1].tokens"),
    (("messages", 1, "tokens"), KeyError, "messages[1].tokens"),
    (("messages", 1, "id"), KeyError, "messages[1].id"),
    (("messages", 2, "id"), "m1", "messages[2].id"),
    (("memories", 0, "id"), "m2", "memories[0].id"),
    (("memories", 0, "text"), 5, "memories[0].text"),
    (("request",), "u1", "request"),
    (("expect", "max_input_tokens"), "900", "expect.max_input_tokens"),
    (("expect", "omitted_together"), ["m3", "m4"], "expect.omitted_together[0]"),
    (("expect", "must_include_ids"), "m1", "expect.must_include_ids"),
    (("expect", "omitted_reason_for"), {"m3": "bogus"}, "expect.omitted_reason_for.m3"),
    (("expect", "order_preserved"), "yes", "expect.order_preserved"),
    (("expect", "error"), 123, "expect.error"),
    (("expect", "first_non_system_role"), "wizard", "expect.first_non_system_role"),
    (("expect", "excerpted"), {"m4": "short"}, "expect.excerpted.m4"),
    (("expect", "serialize_anthropic"), {"tool_results_in_one_user_message": "m4"}, "expect.serialize_anthropic"),
]


@pytest.mark.parametrize(("path", "value", "field"), WRONG)
def test_a_value_of_the_wrong_type_is_refused_naming_its_place(path, value, field):
    """Never read as something else (a string as its characters, a request string dropped) nor a crash."""
    case = _case()
    _set(path, value)(case)
    with pytest.raises(InputError) as err:
        validate_case(case)
    assert field in str(err.value) and "S01" in str(err.value)
    with pytest.raises(InputError):
        run_case(case, Ledger(MemoryStore()))


@SETTINGS
@given(
    key=st.sampled_from(
        [
            "must_include_ids",
            "must_not_include_ids",
            "verbatim_ids",
            "role_unchanged_ids",
            "conservative_estimate_ids",
            "untrusted_ids",
            "content_parts_preserved_ids",
        ]
    ),
    ref=st.text("abcxyz0123456789-", min_size=1, max_size=8).filter(lambda r: r not in {"m1", "m2", "m3", "m4", "k1"}),
)
def test_an_expectation_naming_no_record_of_the_case_is_refused(tmp_path_factory, key, ref):
    """A typo in ``must_not_include_ids`` would otherwise pass vacuously, and in ``verbatim_ids`` crash."""
    path = tmp_path_factory.mktemp("cases") / "S01.json"
    path.write_text(json.dumps(_case(**{key: [ref]})), encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_case_file(path)
    assert f"expect.{key}" in str(err.value) and repr(ref) in str(err.value)


@pytest.mark.parametrize("key", ["verbatim_ids", "role_unchanged_ids", "conservative_estimate_ids"])
def test_a_memory_named_by_a_message_expectation_is_refused(tmp_path, key):
    path = tmp_path / "S01.json"
    path.write_text(json.dumps(_case(**{key: ["k1"]})), encoding="utf-8")
    with pytest.raises(InputError, match="'k1' is a memory"):
        read_case_file(path)


@pytest.mark.parametrize("key", ["verbatim_ids", "role_unchanged_ids", "conservative_estimate_ids"])
def test_a_case_built_in_code_naming_no_message_fails_instead_of_crashing(key):
    """``run_case`` on a dict (no file): the expectation fails naming the id."""
    failures = check_case(run_case(_case(**{key: ["nope"]}), Ledger(MemoryStore()), provider="openai"))
    assert failures == ["nope names no message of the case"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_role_unchanged_holds_for_an_assistant_turn_with_only_tool_calls(provider):
    """On Anthropic the turn has no text to find: it is found by its ``tool_use`` block."""
    case = _case(role_unchanged_ids=["m2", "m3", "m4"], untrusted_ids=["m4"])
    assert check_case(run_case(copy.deepcopy(case), Ledger(MemoryStore()), provider=provider)) == []


def test_every_shared_case_still_reads(cases_dir):
    for path in sorted(cases_dir.glob("*.json")):
        assert read_case_file(path)["id"] == path.stem


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=4,
)


def _is_list_of(v, kind):
    return isinstance(v, list) and all(isinstance(x, kind) for x in v)


def _is_str(v):
    return isinstance(v, str)


def _is_strs(v):
    return isinstance(v, list) and all(isinstance(x, str) and x for x in v)


def _is_iso(v):
    try:
        datetime.fromisoformat(v.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return False
    return True


def _is_call(c):
    f = c.get("function") if isinstance(c, dict) else None
    return (
        isinstance(f, dict)
        and isinstance(c.get("id"), str)
        and c["id"]
        and isinstance(c.get("type", ""), str)
        and isinstance(f.get("name"), str)
        and f["name"]
        and isinstance(f.get("arguments", ""), str)
    )


def _names_k1(v):
    return v is None or v == "k1" or (isinstance(v, list) and all(x == "k1" for x in v))


def _is_number(v):
    return isinstance(v, int | float) and not isinstance(v, bool)


# Every documented field of a case, where it sits in ``_case()``, and which values of it are well typed (a value
# these accept may still be refused for its meaning, e.g. an id naming no memory; it is then not drawn).
FIELDS = [
    (("id",), lambda v: isinstance(v, str) and v),
    (("kind",), _is_str),
    (("source",), _is_str),
    (("title",), _is_str),
    (("holdout",), lambda v: isinstance(v, bool)),
    (("naive_fails",), _is_strs),
    (("example_selection",), lambda v: isinstance(v, list | dict)),
    (("target_provider",), lambda v: v is None or v in ("openai", "anthropic")),
    (("messages", 1, "role"), lambda v: isinstance(v, str) and v in ROLES),
    (("messages", 1, "content"), lambda v: v is None or isinstance(v, str) or _is_list_of(v, dict)),
    (("messages", 2, "tool_calls"), lambda v: v is None or (isinstance(v, list) and all(_is_call(c) for c in v))),
    (("messages", 3, "tool_call_id"), lambda v: isinstance(v, str) and v),
    (("messages", 1, "name"), _is_str),
    (("messages", 1, "tags"), _is_strs),
    (("messages", 1, "kind"), _is_str),
    (("messages", 1, "covers"), _is_strs),
    (("messages", 1, "provenance"), lambda v: isinstance(v, str | dict)),
    (("messages", 1, "artifact_ref"), _is_str),
    (("messages", 1, "artifact_bytes"), lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    (("messages", 1, "note"), _is_str),
    (("messages", 1, "tokens"), lambda v: isinstance(v, int) and not isinstance(v, bool)),
    (("memories", 0, "text"), _is_str),
    (("memories", 0, "scope"), lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values())),
    (("memories", 0, "score"), _is_number),
    (("memories", 0, "tokens"), lambda v: isinstance(v, int) and not isinstance(v, bool)),
    (("memories", 0, "created_at"), lambda v: v is None or _is_iso(v)),
    (("memories", 0, "supersedes"), _names_k1),
    (("tools", 0, "type"), _is_str),
    (("tools", 0, "function"), lambda v: isinstance(v, dict) and isinstance(v.get("name"), str) and v["name"]),
    (("tools", 0, "tokens"), lambda v: isinstance(v, int) and not isinstance(v, bool)),
    (("request",), lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values())),
]


def _field_path(path):
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@st.composite
def _wrong_field(draw):
    path, ok = draw(st.sampled_from(FIELDS))
    value = draw(JSON_VALUES.filter(lambda v: not ok(v)))
    return path, value


@settings(max_examples=200, deadline=None)
@given(wrong=_wrong_field())
def test_every_documented_field_of_the_wrong_type_is_refused_before_anything_runs(wrong):
    """A wrong-typed value is refused naming the case and the field's path; nothing is written to the store."""
    path, value = wrong
    case = _case()
    case["tools"] = [{"type": "function", "function": {"name": "weather"}, "tokens": 30}]
    _set(path, value)(case)
    store = MemoryStore()
    with pytest.raises(InputError) as err:
        run_case(case, Ledger(store))
    field = _field_path(path)
    assert field in str(err.value)
    assert f"case {case.get('id', '?')}" in str(err.value)
    assert store.conversations("default") == []


@pytest.mark.parametrize(
    ("value", "message"),
    [(5, "must be a memory id or a list of them"), ("k9", "names no memory of the case: 'k9'"), ([7], "[0]")],
)
def test_a_bad_supersedes_is_refused_not_a_crash(value, message):
    case = _case()
    case["memories"][0]["supersedes"] = value
    with pytest.raises(InputError, match=r"memories\[0\]\.supersedes") as err:
        validate_case(case)
    assert message in str(err.value)


def test_a_score_that_is_no_number_is_refused():
    """``"high"`` would otherwise be stored in ``meta`` and the case would pass."""
    case = _case()
    case["memories"][0]["score"] = "high"
    with pytest.raises(InputError, match=r"memories\[0\]\.score.*must be a number"):
        validate_case(case)
