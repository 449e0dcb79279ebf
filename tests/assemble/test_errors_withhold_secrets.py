"""A caller's value that is a secret is never repeated by the error the library raises about it.

The errors an assembly raises name the value at fault (an unknown model, counter, api, branch or conversation,
a ``now`` that is not a datetime); a caller may print or log them, so a value holding a secret is named as
``[withheld by policy: <type>]``. Secrets are drawn from the secret corpus's one-word formats.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy"))
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger import Ledger
from ctxledger.errors import CtxledgerError

WORDS = sorted(f for f in set(FORMATS) - MULTILINE if not any(c in draw(f, 0)[0] for c in " '\""))
FIELDS = ("model", "counter", "api", "branch_id", "conversation", "now")


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    ledger = Ledger.open("memory://")
    ledger.recorder("c").user("hi")
    return ledger


@settings(max_examples=40, deadline=None)
@given(fmt=st.sampled_from(WORDS), seed=st.integers(0, 10_000), field=st.sampled_from(FIELDS))
def test_an_assembly_error_withholds_the_secret_it_names(ledger: Ledger, fmt: str, seed: int, field: str) -> None:
    value, fingerprints = draw(fmt, seed)
    conversation = value if field == "conversation" else "c"
    request = {} if field == "conversation" else {field: value}
    with pytest.raises(CtxledgerError) as caught:
        ledger.assemble(conversation, window_tokens=8000, **request)
    message = str(caught.value)
    assert not any(f in message for f in fingerprints)
    assert "[withheld by policy: " in message
