"""A secret in a speaker label or a request field reaches neither the payload nor the stored manifest.

Seed 000 (a credential stays with the server that uses it).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from ctxledger import Ledger
from ctxledger.errors import InputError

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
GH = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
MODELS = {"openai-chat": "gpt-4o", "anthropic-messages": "claude-sonnet-4-5"}
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _assemble(api: str, *, speaker: bool, participant: bool):
    ledger = Ledger.open("memory://")
    r = ledger.recorder("c", clock=T0)
    r.participant(GH if participant else "p")
    r.participant("q")
    r.system("Be brief.")
    r.user("hello")
    owner = GH if participant else "p"
    r.assistant("from p", owner=owner, speaker=GH if speaker else None)
    r.assistant("from q", owner="q")
    r.user("go")
    asm = ledger.assemble(
        "c",
        api=api,
        model=MODELS[api],
        window_tokens=8000,
        output_tokens=500,
        query=f"find {GH}",
        participant_id="c/participant/q",
    )
    return ledger, asm


@pytest.mark.parametrize("api", list(MODELS))
def test_a_secret_speaker_name_is_withheld(api):
    """``speaker=`` (Message.name) holding a token: both providers get ``speaker_withheld``."""
    ledger, asm = _assemble(api, speaker=True, participant=False)
    payload = json.dumps(asm.payload)
    assert GH not in payload
    assert "speaker_withheld: from p" in payload
    names = [m["name"] for m in asm.payload["messages"] if "name" in m]
    if api == "openai-chat":
        assert "speaker_withheld" in names
        assert all(OPENAI_NAME.match(n) for n in names)
    else:
        assert names == []  # Anthropic has no name field; the label carries the speaker
    mark = next(m for m in asm.manifest["marks"] if m["reason"] == "speaker_withheld")
    assert "GitHub Token" in mark["detail"] and GH not in mark["detail"]
    assert GH not in json.dumps(ledger.get_assembly(asm.id))


def test_a_participant_named_with_a_secret_is_refused():
    """A participant's name is part of its id, which every manifest stores: it is refused at write time."""
    with pytest.raises(InputError, match="holds a secret"):
        _assemble("openai-chat", speaker=False, participant=True)


def test_the_manifest_request_never_stores_a_secret_query():
    """``query=`` drives relevance but is stored redacted, like every free-text request field."""
    ledger, asm = _assemble("openai-chat", speaker=True, participant=False)
    stored = ledger.get_assembly(asm.id)
    assert stored["request"]["query"] == "[withheld by policy: GitHub Token on line 1]"
    assert GH not in json.dumps(stored)


def test_a_plain_speaker_name_is_kept():
    _, asm = _assemble("openai-chat", speaker=False, participant=False)
    assert {"role": "user", "content": "p: from p", "name": "p"} in asm.payload["messages"]
    assert not [m for m in asm.manifest["marks"] if m["reason"] == "speaker_withheld"]
