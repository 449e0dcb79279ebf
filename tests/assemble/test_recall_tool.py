"""The recall tool: offered only when the policy enables it, costed in F, answered under the hard filters."""

from __future__ import annotations

import dataclasses

from ctxledger import Ledger
from ctxledger.assemble.recall import answer_recall, recall_schema
from ctxledger.policy.base import RehydrationParams
from ctxledger.policy.default import default_policy
from ctxledger.serialize import get_serializer
from ctxledger.tokens import get_counter

RECALL = dataclasses.replace(default_policy(), rehydration=RehydrationParams(recall_tool=True))
LOG = "".join(f"line {i}: status ok\n" for i in range(40))


def _history(ledger: Ledger) -> tuple[str, str]:
    rec = ledger.recorder("c")
    rec.user("Check the logs.")
    visible = rec.tool_call("logs", {"q": "all"}, LOG)
    hidden = rec.tool_call("vault", {"q": "key"}, "vault contents", privacy_class="secret")
    rec.user("What did they say?")
    return visible.artifact, hidden.artifact


def test_the_tool_is_offered_only_when_enabled_and_counted_in_f() -> None:
    with Ledger.open("memory://") as ledger:
        _history(ledger)
        plain = ledger.assemble("c", window_tokens=4000, output_tokens=200)
        recall = ledger.assemble("c", window_tokens=4000, output_tokens=200, policy=RECALL)
    assert "tools" not in plain.payload or "recall" not in str(plain.payload["tools"])
    assert [t["function"]["name"] for t in recall.payload["tools"]] == ["recall"]
    schema_tokens = get_serializer("openai-chat").tools_tokens([recall_schema()], get_counter("o200k_base"))
    assert recall.input_tokens - plain.input_tokens == schema_tokens > 0
    assert "recall" in recall.manifest["tools"]["exposed"]


def test_answers_respect_the_hard_filters_and_ranges() -> None:
    with Ledger.open("memory://") as ledger:
        visible, hidden = _history(ledger)
        manifest = ledger.assemble("c", window_tokens=4000, output_tokens=200, policy=RECALL).manifest
        text, decision = answer_recall(ledger, manifest, {"ref": visible, "start": 7, "end": 30})
        assert text.encode() == LOG.encode()[7:30] and decision["decision"] == "answered"
        text, _ = answer_recall(ledger, manifest, {"ref": visible, "start": 3, "end": 4, "unit": "lines"})
        assert text == "line 2: status ok\nline 3: status ok\n"
        text, decision = answer_recall(ledger, manifest, {"ref": hidden})
        assert decision["decision"] == "refused" and "vault contents" not in text
        assert decision["reason"].startswith(next(e["reason"] for e in manifest["omitted"] if e["ref"] == hidden))
        _, decision = answer_recall(ledger, manifest, {"ref": "other-conversation/3"})
        assert decision["reason"].startswith("not_a_candidate")


# -- what the model is told: every excerpt and reference names a recall call the tool accepts -------------------

import json  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctxledger.assemble.recall import _cut  # noqa: E402
from ctxledger.scenarios.evidence import SCREENSHOT_B64  # noqa: E402

HINT = re.compile(r"recall (\{[^{}]*\})")
BIG = "".join(f"line {i}: status ok{' ERROR: disk full' if i == 500 else ''}\n" for i in range(1200))
NOTE = " ".join(f"note {i} about the rollout plan" for i in range(400))
SHOT = json.dumps({"content": [{"type": "text", "text": "checkout page"}, {"type": "image", "data": SCREENSHOT_B64}]})
APIS = ("openai-chat", "openai-responses", "anthropic-messages")
SHRUNK = ("excerpt", "extraction", "memory", "reference")


def _long_history(ledger: Ledger) -> dict[str, str]:
    rec = ledger.recorder("c")
    rec.user("Check the logs and the screenshot. " + NOTE)
    ids = {"note": "c/0"}
    ids["log"] = rec.tool_call("logs", {"q": "all"}, BIG).artifact
    ids["log2"] = rec.tool_call("logs", {"q": "more"}, BIG.replace("status", "state")).artifact
    ids["shot"] = rec.tool_call("browser.screenshot", {"url": "https://shop.example"}, SHOT).artifact
    ids["vault"] = rec.tool_call("vault", {"q": "key"}, "vault contents", privacy_class="secret").artifact
    rec.user("What did they say?")
    return ids


def _accepts(arguments: dict) -> bool:
    """Whether ``arguments`` is a call the recall schema accepts (required keys, known keys, types, enums)."""
    params = recall_schema()["function"]["parameters"]
    types = {"string": str, "integer": int}
    return set(params["required"]) <= set(arguments) <= set(params["properties"]) and all(
        isinstance(v, types[params["properties"][k]["type"]])
        and v in params["properties"][k].get("enum", [v])
        and not isinstance(v, bool)
        for k, v in arguments.items()
    )


def _payload_text(payload: dict) -> str:
    """Every string of the payload, joined (the JSON of hints stays unescaped)."""
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk({k: v for k, v in payload.items() if k != "tools"})
    return "\n".join(out)


@pytest.mark.parametrize("api", APIS)
def test_with_recall_every_shrunk_record_names_a_recall_call_that_reads_its_bytes(api: str) -> None:
    with Ledger.open("memory://") as ledger:
        ids = _long_history(ledger)
        asm = ledger.assemble("c", window_tokens=3000, output_tokens=200, margin_tokens=100, api=api, policy=RECALL)
        text = _payload_text(asm.payload)
        assert "ctxledger rehydrate" not in text
        calls = [json.loads(m) for m in HINT.findall(text)]
        assert calls and all(_accepts(c) for c in calls)
        shrunk = {  # the records whose text was derived (their locators point back at their bytes)
            e["ref"] for e in asm.manifest["included"] if e["representation"] in SHRUNK and e["locators"]
        }
        assert {ids["log"], ids["log2"]} <= shrunk  # the two big logs did not fit verbatim
        named = {c["ref"] for c in calls}
        assert shrunk <= named  # every excerpt, extraction and reference says how to read its record back
        if api == "openai-chat":  # tool messages take text only: the image is referenced by a recall call
            assert ids["shot"] in named and "holds it (recall {" in text
        for call in calls:  # each call the model could make reads back exactly the record's bytes
            answer, decision = answer_recall(ledger, asm.manifest, call)
            assert decision["decision"] == "answered"
            whole = ledger.rehydrate(call["ref"])[: ledger.policy.rehydration.max_artifact_bytes]
            assert answer.encode() == whole
        # a range as an excerpt shows it: lines as its markers number them, bytes as its locators give them
        answer, _ = answer_recall(ledger, asm.manifest, {"ref": ids["log"], "start": 501, "end": 501, "unit": "lines"})
        assert answer == "line 500: status ok ERROR: disk full\n"
        answer, _ = answer_recall(ledger, asm.manifest, {"ref": ids["log"], "start": 0, "end": 27})
        assert answer.encode() == BIG.encode()[:27]
        # the hard filters hold: the secret output was never shown and is refused
        assert ids["vault"] not in named
        assert answer_recall(ledger, asm.manifest, {"ref": ids["vault"]})[1]["decision"] == "refused"
        # the hints are counted like the rest of the payload, within the budget
        assert asm.input_tokens == get_serializer(api).count(asm.payload, get_counter("o200k_base"))
        assert asm.input_tokens <= 3000 - 200 - 100


@pytest.mark.parametrize("api", APIS)
def test_without_recall_the_hints_name_the_cli_for_operators(api: str) -> None:
    with Ledger.open("memory://") as ledger:
        ids = _long_history(ledger)
        asm = ledger.assemble("c", window_tokens=3000, output_tokens=200, api=api)
        text = _payload_text(asm.payload)
        assert not HINT.search(text) and "recall" not in str(asm.payload.get("tools", ""))
        assert f"ctxledger rehydrate {ids['log']}" in text


def test_recall_policies_have_their_own_hash() -> None:
    assert RECALL.describe() != default_policy().describe()
    assert "recall_tool" not in default_policy().rehydration.as_dict()


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab\r", max_size=4), max_size=8),
    trailing=st.booleans(),
    start=st.integers(-2, 10),
    end=st.integers(-2, 10),
)
def test_a_line_range_is_the_lines_excerpts_number(lines: list[str], trailing: bool, start: int, end: int) -> None:
    data = ("\n".join(lines) + ("\n" if trailing and lines else "")).encode()
    pieces = data.split(b"\n")  # a line ends at \n only (a \r is part of it), as locators number them
    numbered = [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    want = b"".join(numbered[max(start, 1) - 1 : max(end, 0)]) if max(start, 1) <= end else b""
    assert _cut(data, start, end, "lines") == want
    assert _cut(data, start, end, "bytes") == data[max(start, 0) : max(end, 0)]
