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
        text, _ = answer_recall(ledger, manifest, {"ref": visible, "start": 2, "end": 4, "unit": "lines"})
        assert text == "line 2: status ok\nline 3: status ok\n"
        text, decision = answer_recall(ledger, manifest, {"ref": hidden})
        assert decision["decision"] == "refused" and "vault contents" not in text
        assert decision["reason"].startswith(next(e["reason"] for e in manifest["omitted"] if e["ref"] == hidden))
        _, decision = answer_recall(ledger, manifest, {"ref": "other-conversation/3"})
        assert decision["reason"].startswith("not_a_candidate")
