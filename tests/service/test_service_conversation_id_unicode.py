"""The API refuses a conversation id that is not in Unicode NFC form (it would look identical to the composed one
and yet name another conversation), naming the field and both forms; nothing is written."""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import Served

BASES = st.sampled_from(["cafe", "nino", "Angstrom", "uber", "a"])
MARKS = st.sampled_from(["\u0301", "\u0303", "\u030a", "\u0308", "\u0327"])


def test_a_decomposed_id_is_refused_and_its_composed_form_accepted(served: Served) -> None:
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(base=BASES, mark=MARKS, at=st.integers(min_value=1, max_value=3))
    def check(base: str, mark: str, at: int) -> None:
        cid = f"uni-{base[:at]}{mark}{base[at:]}"
        composed = unicodedata.normalize("NFC", cid)
        auth = served.auth("globex")
        body = {"format": "openai-chat", "messages": [{"role": "user", "content": "hello"}]}
        before = served.client.get("/v1/conversations", headers=auth).json()
        response = served.client.post(f"/v1/conversations/{quote(cid, safe='')}/messages", headers=auth, json=body)
        if cid == composed:  # the mark has no precomposed form with this letter
            assert response.status_code in (201, 422), response.text
            return
        assert response.status_code == 422, response.text
        assert "conversation_id" in response.text and "NFC" in response.text
        assert served.client.get("/v1/conversations", headers=auth).json() == before

    check()
