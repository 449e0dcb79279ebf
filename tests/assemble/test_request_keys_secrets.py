"""A request's ``scope`` and ``source_versions`` keys that hold a secret are never stored in the manifest.

The manifest's ``request`` block records them so the assembly can be reproduced; their values were redacted, and
so must their keys be. Secrets are drawn from the secret corpus's one-line formats.
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


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    ledger = Ledger.open("memory://")
    ledger.recorder("c").user("hi")
    return ledger


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
