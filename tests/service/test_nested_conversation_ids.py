"""A conversation id holding ``/`` (``team/c1``: the library, the Recorder and a directory import make them) is
reachable through every conversation route of the API, as it is through the inspector."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from service_helpers import Served


@pytest.mark.parametrize("encode", [False, True])
def test_a_conversation_id_with_a_slash_is_appended_assembled_and_listed(served: Served, encode: bool) -> None:
    conv = f"team-{int(encode)}/c1"
    path = f"/v1/conversations/{quote(conv, safe='') if encode else conv}"
    auth = served.auth("acme")
    body = {"format": "openai-chat", "messages": [{"role": "user", "content": "hello"}]}
    appended = served.client.post(f"{path}/messages", headers=auth, json=body)
    assert appended.status_code == 201, appended.text
    assert appended.json()["conversation_id"] == conv
    assembled = served.client.post(f"{path}/assemble", headers=auth, json={"window_tokens": 8000, "output_tokens": 500})
    assert assembled.status_code == 200, assembled.text
    listed = served.client.get(f"{path}/assemblies", headers=auth)
    assert [a["id"] for a in listed.json()] == [assembled.json()["assembly_id"]]
    other = served.client.get(f"{path}/assemblies", headers=served.auth("globex"))
    assert other.status_code == 404
