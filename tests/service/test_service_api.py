"""The /v1 API: append, import, assemble, explain, rehydrate, usage, lists; problems; tenants and keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxledger.hashing import sha256_hex

CONV = "tau-task2-trial1"

if TYPE_CHECKING:
    from service_helpers import Served


def test_healthz_and_openapi_need_no_key(served: Served) -> None:
    assert served.client.get("/healthz").json() == {"status": "ok"}
    schema = served.client.get("/openapi.json").json()
    assert "/v1/conversations/{conversation_id}/assemble" in schema["paths"]
    assert "/v1/assemblies/{assembly_id}/explain/{ref}" in schema["paths"]


def test_no_key_is_401_problem_and_a_bad_key_too(served: Served) -> None:
    for headers in ({}, {"Authorization": "Bearer ctxl_000000000000_" + "x" * 43}, {"Authorization": "Basic abc"}):
        answer = served.client.get("/v1/conversations", headers=headers)
        assert answer.status_code == 401
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.headers["www-authenticate"].startswith("Bearer")


def test_assemble_returns_the_payload_and_an_assembly_that_explains_itself(served: Served) -> None:
    auth = served.auth("acme")
    answer = served.client.post(
        f"/v1/conversations/{CONV}/assemble",
        headers=auth,
        json={"window_tokens": 8000, "output_tokens": 1000, "margin_tokens": 200},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["payload"]["messages"] and body["omitted"] > 0
    assert body["tokens"]["estimated_input"] <= 6800
    manifest = served.client.get(f"/v1/assemblies/{body['assembly_id']}?full=true", headers=auth).json()
    assert manifest["payload_hash"] == body["payload_hash"]
    omitted = manifest["omitted"][0]["ref"]
    why = served.client.get(f"/v1/assemblies/{body['assembly_id']}/explain/{omitted}", headers=auth).json()
    assert why["status"] == "omitted" and why["reason"] == manifest["omitted"][0]["reason"]
    short = omitted.removeprefix(f"{CONV}/")
    assert served.client.get(f"/v1/assemblies/{body['assembly_id']}/explain/{short}", headers=auth).json() == why
    unknown = served.client.get(f"/v1/assemblies/{body['assembly_id']}/explain/99999", headers=auth)
    assert unknown.status_code == 404 and f"'{CONV}/99999'" in unknown.json()["detail"]
    listed = served.client.get(f"/v1/conversations/{CONV}/assemblies", headers=auth).json()
    assert body["assembly_id"] in [a["id"] for a in listed]


def test_usage_is_recorded_once_then_409_unless_overwrite(served: Served) -> None:
    auth = served.auth("acme")
    aid = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={}).json()["assembly_id"]
    first = served.client.post(
        f"/v1/assemblies/{aid}/usage", headers=auth, json={"input_tokens": 10, "output_tokens": 2}
    )
    assert first.status_code == 200 and first.json()["observed_input"] == 10
    again = served.client.post(
        f"/v1/assemblies/{aid}/usage", headers=auth, json={"input_tokens": 11, "output_tokens": 2}
    )
    assert again.status_code == 409 and again.json()["field"] == "body.overwrite"
    assert '"overwrite": true' in again.json()["detail"] and "overwrite=True" not in again.json()["detail"]
    fixed = served.client.post(
        f"/v1/assemblies/{aid}/usage", headers=auth, json={"input_tokens": 11, "output_tokens": 2, "overwrite": True}
    )
    assert fixed.json()["observed_input"] == 11


def test_a_bad_field_is_a_422_problem_naming_it(served: Served) -> None:
    auth = served.auth("acme")
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={"window_tokens": -5})
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["field"] == "body.window_tokens"
    bad = served.client.post(
        "/v1/conversations/new/messages", headers=auth, json={"messages": [{"role": "wizard", "content": "hi"}]}
    )
    assert bad.status_code == 422 and bad.json()["field"] == "messages[0].role"
    tight = served.client.post(
        f"/v1/conversations/{CONV}/assemble",
        headers=auth,
        json={"window_tokens": 1500, "output_tokens": 1000, "margin_tokens": 200},
    )
    assert tight.status_code == 422 and tight.json()["field"] == "body.window_tokens", tight.text
    assert tight.json()["required_tokens"] > tight.json()["budget_tokens"] == 300
    assert [e["field"] for e in tight.json()["errors"]] == [f"body.{n}_tokens" for n in ("window", "output", "margin")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    window=st.integers(1, 200_000),
    output=st.integers(0, 300_000),
    margin=st.integers(0, 300_000),
    omit_window=st.booleans(),
)
def test_a_budget_with_no_room_for_input_names_the_fields_at_fault(
    served: Served, window: int, output: int, margin: int, omit_window: bool
) -> None:
    """W - O - M <= 0 is a 422 naming ``body.window_tokens`` and each nonzero reserve, as validation problems do."""
    body = {"output_tokens": output, "margin_tokens": margin} | ({} if omit_window else {"window_tokens": window})
    w = 128_000 if omit_window else window
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=served.auth("acme"), json=body)
    if w - output - margin > 0:
        assert answer.status_code != 422 or answer.json()["type"].endswith("/required-blocks-do-not-fit")
        return
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert answer.headers["content-type"] == "application/problem+json"
    assert problem["field"] == "body.window_tokens"
    reserves = (("output_tokens", output), ("margin_tokens", margin))
    wanted = ["body.window_tokens", *(f"body.{name}" for name, value in reserves if value)]
    assert [e["field"] for e in problem["errors"]] == wanted
    assert all(e["message"] for e in problem["errors"])
    assert problem["input_tokens"] == w - output - margin
    assert "body.window_tokens" in problem["detail"] and "--window" not in problem["detail"]


NOT_AN_INTEGER = st.one_of(
    st.integers(1, 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    field=st.sampled_from(["window_tokens", "output_tokens", "margin_tokens", "as_of_seq"]), value=NOT_AN_INTEGER
)
def test_a_token_count_that_is_not_a_json_integer_is_refused(served: Served, field: str, value: object) -> None:
    """``"8000"``, ``true`` or ``8000.5`` for a count is a 422 naming the field, as ``Ledger.assemble`` refuses them."""
    answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=served.auth("acme"), json={field: value})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == f"body.{field}"


def test_appending_in_each_format_continues_one_conversation(served: Served) -> None:
    auth = served.auth("acme")
    post = served.client.post
    first = post(
        "/v1/conversations/chat/messages",
        headers=auth,
        json={
            "format": "openai-chat",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": -3}'},
            ],
        },
    )
    assert first.status_code == 201, first.text
    second = post(
        "/v1/conversations/chat/messages",
        headers=auth,
        json={
            "format": "anthropic-messages",
            "messages": [
                {"role": "assistant", "content": [{"type": "text", "text": "It is -3 °C."}]},
                {"role": "user", "content": "And Bergen?"},
            ],
        },
    )
    third = post(
        "/v1/conversations/chat/messages",
        headers=auth,
        json={
            "format": "openai-responses",
            "messages": [
                {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": '{"city":"Bergen"}'},
                {"type": "function_call_output", "call_id": "c2", "output": '{"temp_c": 4}'},
            ],
        },
    )
    assert second.status_code == third.status_code == 201, (second.text, third.text)
    seqs = [first.json()["head_seq"], second.json()["head_seq"], third.json()["head_seq"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    artifact = next(r for r in third.json()["records"] if "art-" in r)
    raw = served.client.get(f"/v1/rehydrate/{artifact}", headers=auth)
    assert raw.content == b'{"temp_c": 4}'
    part = served.client.get(f"/v1/rehydrate/{artifact}", headers=auth, params={"start": 2, "end": 8})
    assert part.content == b'{"temp_c": 4}'[2:8]
    asm = post(
        "/v1/conversations/chat/assemble", headers=auth, json={"window_tokens": 4000, "output_tokens": 500}
    ).json()
    assert asm["payload"]["messages"][-1]["role"] == "tool"


def test_another_tenants_ids_answer_404_exactly_like_missing_ones(served: Served) -> None:
    acme, globex = served.auth("acme"), served.auth("globex")
    aid = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=acme, json={}).json()["assembly_id"]
    probes = [
        ("get", f"/v1/assemblies/{aid}", None),
        ("get", f"/v1/assemblies/{aid}/explain/{CONV}/1", None),
        ("post", f"/v1/conversations/{CONV}/assemble", {}),
        ("get", f"/v1/conversations/{CONV}/assemblies", None),
        ("get", f"/v1/rehydrate/{CONV}/3", None),
        ("post", f"/v1/assemblies/{aid}/usage", {"input_tokens": 1, "output_tokens": 1}),
    ]
    for method, path, body in probes:
        theirs = served.client.request(method, path, headers=globex, json=body)
        missing = served.client.request(
            method, path.replace("tau", "nope").replace(aid, "asm_nope"), headers=globex, json=body
        )
        assert theirs.status_code == missing.status_code == 404, (path, theirs.text)
        assert theirs.json()["title"] == missing.json()["title"]
        assert "acme" not in theirs.text
    assert served.client.get("/v1/conversations", headers=globex).json() == []
    # a tenant in the body or the path never switches tenants
    sneaky = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=globex, json={"tenant_id": "acme"})
    assert sneaky.status_code == 422


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=200))
def test_any_user_text_round_trips_through_append_and_rehydrate(served: Served, text: str) -> None:
    auth = served.auth("globex")
    cid = f"h-{sha256_hex(text.encode())[:12]}"
    answer = served.client.post(
        f"/v1/conversations/{cid}/messages", headers=auth, json={"messages": [{"role": "user", "content": text}]}
    )
    if answer.status_code == 422:  # a conversation id written twice by a repeated example
        return
    assert answer.status_code == 201, answer.text
    (ref,) = answer.json()["records"]
    assert served.client.get(f"/v1/rehydrate/{ref}", headers=auth).content == text.encode("utf-8")


def test_assembling_an_empty_conversation_is_a_422_nothing_to_send(served: Served) -> None:
    """An imported conversation without a turn answers 422 ``nothing-to-send``, not a 500."""
    auth = served.auth("acme")
    body = {"content": '{"messages": []}', "filename": "empty.json", "conversation_id": "empty-conv"}
    imported = served.client.post("/v1/imports", headers=auth, json=body)
    assert imported.status_code == 201 and imported.json()["format"] == "openai-chat", imported.text
    answer = served.client.post("/v1/conversations/empty-conv/assemble", headers=auth, json={})
    assert answer.status_code == 422, answer.text
    assert answer.json()["type"].endswith("/nothing-to-send") and "nothing to send" in answer.json()["detail"]


def test_assembly_lists_show_the_usage_recorded_for_each_call(served: Served) -> None:
    auth = served.auth("acme")
    aid = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={}).json()["assembly_id"]
    answer = served.client.post(
        f"/v1/assemblies/{aid}/usage", headers=auth, json={"input_tokens": 321, "output_tokens": 7}
    )
    assert answer.status_code == 200, answer.text
    for route in (f"/v1/conversations/{CONV}/assemblies", "/v1/assemblies"):
        listed = {a["id"]: a for a in served.client.get(route, headers=auth).json()}
        assert listed[aid]["observed_input"] == 321, route


RESPONSES_ITEMS = '[{"type": "message", "role": "user", "content": "Weather in Oslo?"}]'


def test_every_format_of_the_library_is_accepted_by_import_and_assemble(served: Served) -> None:
    from ctxledger.ingest import FORMATS
    from ctxledger.serialize import SERIALIZER_NAMES

    schema = served.client.get("/openapi.json").json()["components"]["schemas"]
    assert set(schema["ImportFile"]["properties"]["format"]["enum"]) == {"auto", *FORMATS}
    api = schema["AssembleRequest"]["properties"]["api"]["anyOf"][0]["enum"]
    assert set(api) == set(SERIALIZER_NAMES)
    auth = served.auth("acme")
    body = {"content": RESPONSES_ITEMS, "filename": "responses.json", "format": "openai-responses"}
    imported = served.client.post("/v1/imports", headers=auth, json=body)
    assert imported.status_code == 201, imported.text
    for name in SERIALIZER_NAMES:
        answer = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={"api": name})
        assert answer.status_code == 200, (name, answer.text)


def test_an_import_whose_format_cannot_be_told_names_the_format_field(served: Served) -> None:
    body = {"content": '{"foo": 1}', "filename": "odd.json"}
    answer = served.client.post("/v1/imports", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["field"] == "body.format"
    assert '"format"' in problem["detail"] and "fmt=" not in problem["detail"]
    assert "openai-responses" in problem["detail"]


def test_not_found_names_the_kind_of_what_is_missing(served: Served) -> None:
    auth = served.auth("acme")
    conversation = served.client.post("/v1/conversations/no-such-chat/assemble", headers=auth, json={})
    assert conversation.status_code == 404
    assert conversation.json()["detail"] == "conversation 'no-such-chat' was not found"
    assembly = served.client.get("/v1/assemblies/asm_missing", headers=auth)
    assert assembly.status_code == 404 and assembly.json()["detail"] == "assembly 'asm_missing' was not found"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=40).filter(lambda t: not _is_json(t)))
@example(text="0\x000\x80")  # a NUL among the first four bytes: json.loads reads the bytes as UTF-16
def test_a_body_that_is_not_json_names_the_body_and_where_it_breaks(served: Served, text: str) -> None:
    answer = served.client.post(
        f"/v1/conversations/{CONV}/assemble",
        headers={**served.auth("acme"), "content-type": "application/json"},
        content=text.encode("utf-8"),
    )
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["field"] == "body", problem
    assert problem["detail"].startswith("body: malformed JSON at character "), problem


def _is_json(text: str) -> bool:
    from ctxledger.json_text import JSON_MEDIA_TYPE, media_type_of

    return media_type_of(text) == JSON_MEDIA_TYPE


def test_an_assemblys_item_is_rehydrated_by_its_short_id_as_by_its_record_id(served: Served) -> None:
    """``/assemblies/{id}/rehydrate/{ref}`` takes the short ids ``explain`` takes: same status, same bytes."""
    auth = served.auth("acme")
    body = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={"window_tokens": 8000}).json()
    manifest = served.client.get(f"/v1/assemblies/{body['assembly_id']}?full=true", headers=auth).json()
    refs = [e["ref"] for e in manifest["included"] + manifest["omitted"] if e["ref"].startswith(f"{CONV}/")]
    assert refs
    statuses = set()
    for ref in refs:
        base = f"/v1/assemblies/{body['assembly_id']}/rehydrate/"
        full = served.client.get(base + ref, headers=auth)
        short = served.client.get(base + ref.removeprefix(f"{CONV}/"), headers=auth)
        assert (short.status_code, short.content) == (full.status_code, full.content), ref
        assert full.status_code == 200 or "not a candidate" not in full.text
        statuses.add(full.status_code)
    assert 200 in statuses


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "no"])
def test_a_flag_that_is_no_json_boolean_is_a_422_naming_it(served: Served, value: object) -> None:
    auth = served.auth("acme")
    aid = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={}).json()["assembly_id"]
    usage = {"input_tokens": 10, "output_tokens": 2, "overwrite": value}
    answer = served.client.post(f"/v1/assemblies/{aid}/usage", headers=auth, json=usage)
    assert answer.status_code == 422 and answer.json()["field"] == "body.overwrite", answer.text
    asked = served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json={"exact_evidence": value})
    assert asked.status_code == 422 and asked.json()["field"].startswith("body.exact_evidence"), asked.text
