"""The stored lexical terms and vectors come from redacted text: no secret's value is copied into the index."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.assemble.relevance import tokenize
from ctxledger.assemble.term_keys import term_key
from ctxledger.testing import MemoryStore

SECRETS = (
    "ghp_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "sk-proj-" + "a1B2" * 10,
    "github_pat_11ABCDEFG0" + "x1Y2z3" * 10,
)
WORDS = st.lists(st.sampled_from(["flight", "refund", "the", "log", "error", "config", "token", "line"]), max_size=6)


@st.composite
def placements(draw: Any) -> tuple[str, str, str]:
    """A secret, where it goes (user turn, tool result, JSON tool result) and the text around it."""
    secret = draw(st.sampled_from(SECRETS))
    where = draw(st.sampled_from(["user", "tool", "json"]))
    before, after = " ".join(draw(WORDS)), " ".join(draw(WORDS))
    return secret, where, f"{before}\nkey {secret}\n{after}" if where != "json" else f'{{"log": "{before}\\n{secret}"}}'


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=placements())
def test_no_stored_term_holds_a_secret(case: tuple[str, str, str]) -> None:
    secret, where, text = case
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("c")
    rec.system("You help.")
    if where == "user":
        rec.user(text)
    else:
        rec.user("look it up")
        rec.tool_call("lookup", {"q": "x"}, text)
    rec.user("thanks")
    secret_terms = set(tokenize([secret])[0]) - set(tokenize(["key log line"])[0])
    assert secret_terms  # the secret tokenizes to terms an unredacted index would hold
    for facts in ledger.store.record_facts("default", "c").values():
        stored = set(np.frombuffer(facts.term_keys, dtype="<i8").tolist())
        assert not {term_key(t) for t in secret_terms} & stored, facts.record_id
