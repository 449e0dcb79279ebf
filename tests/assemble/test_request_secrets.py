"""A caller's value that is a secret is never repeated by the error the library raises about it, nor stored.

The errors an assembly raises name the value at fault (an unknown model, counter, api, branch or conversation,
a ``now`` that is not a datetime); a caller may print or log them, so a value holding a secret is named as
``[withheld by policy: <type>]``. The manifest's ``request`` block records a request's ``scope`` and
``source_versions`` so the assembly can be reproduced; their values are redacted, and so are their keys.
Secrets are drawn from the secret corpus's one-word and one-line formats.
"""

from __future__ import annotations

import json
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


@settings(max_examples=15, deadline=None)
@given(fmt=st.sampled_from(sorted(set(FORMATS) - MULTILINE)), seed=st.integers(0, 10_000))
def test_scope_and_source_version_keys_holding_a_secret_are_redacted(ledger: Ledger, fmt: str, seed: int) -> None:
    secret, fingerprints = draw(fmt, seed)
    asm = ledger.assemble("c", window_tokens=8000, scope={secret: "eu"}, source_versions={secret: "v1"})
    stored = ledger.get_assembly(asm.id)
    for text in (json.dumps(stored, default=str), json.dumps(asm.manifest, default=str)):
        assert not any(f in text for f in fingerprints)
    assert list(stored["request"]["scope"].values()) == ["eu"]
    assert list(stored["request"]["source_versions"].values()) == ["v1"]
