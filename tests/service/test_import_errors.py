"""``POST /v1/imports`` of malformed JSON names the field where parsing stopped, as importers name a bad field."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.ingest.json_paths import json_path_at
from ctxledger.service.import_errors import CONTENT_FIELD

if TYPE_CHECKING:
    from service_helpers import Served

BAD = "__bad__"
"""A leaf replaced by ``@`` once serialised: JSON parsing stops exactly there."""
_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=5).filter(lambda k: k != BAD)
VALUES = st.recursive(
    st.integers(0, 9) | st.booleans() | st.none(),
    lambda inner: st.lists(inner, min_size=1, max_size=3) | st.dictionaries(_KEYS, inner, min_size=1, max_size=3),
    max_leaves=10,
)


def _leaves(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, f"{path}[{i}]")]
    return [path]


def _replace(value: Any, target: str, path: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _replace(v, target, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, target, f"{path}[{i}]") for i, v in enumerate(value)]
    return BAD if path == target else value


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[str, str]:
    """A JSON document with one leaf made unparsable, and that leaf's path."""
    value = draw(VALUES)
    target = draw(st.sampled_from(_leaves(value)))
    text = json.dumps(_replace(value, target), indent=draw(st.sampled_from([None, 1])))
    return text.replace(json.dumps(BAD), "@"), target


@given(case=corrupted())
def test_the_path_where_parsing_stops_is_the_path_of_the_broken_value(case: tuple[str, str]) -> None:
    text, target = case
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        assert json_path_at(exc.doc, exc.pos) == target
    else:
        raise AssertionError("the corrupted document parsed")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corrupted(), before=st.integers(0, 2), jsonl=st.booleans())
def test_a_malformed_import_names_the_record_and_the_field_where_parsing_stopped(
    served: Served, case: tuple[str, str], before: int, jsonl: bool
) -> None:
    """The broken value is in record ``before`` of a top-level array or a JSON Lines file: ``index`` names the
    record, ``field`` the path inside it (the request's ``body.content`` when the record itself is broken)."""
    text, target = case
    records = [json.dumps({"role": "user", "content": f"turn {i}"}) for i in range(before)]
    lines = [*records, text.replace("\n", " ") if jsonl else text]
    content = "\n".join(lines) + "\n" if jsonl else "[" + ", ".join(lines) + "]"
    filename = "broken.jsonl" if jsonl else "broken.json"
    body = {"content": content, "filename": filename, "format": "openai-chat"}
    answer = served.client.post("/v1/imports", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert "malformed JSON" in problem["detail"], problem
    assert problem["index"] == before and problem["field"] == (target or CONTENT_FIELD), problem


def test_a_malformed_document_names_the_path_from_its_top(served: Served) -> None:
    content = '{"messages": [{"role": "user", "content": "hi"}, {"role": ]}'
    body = {"content": content, "filename": "chat.json"}
    problem = served.client.post("/v1/imports", headers=served.auth("acme"), json=body).json()
    assert problem["status"] == 422 and problem["field"] == "messages[1].role" and "index" not in problem
    for content in ("hello", "{bad}", "   "):
        body = {"content": content, "filename": "chat.json"}
        problem = served.client.post("/v1/imports", headers=served.auth("acme"), json=body).json()
        assert problem["status"] == 422 and problem["field"] == CONTENT_FIELD, problem
