"""``GET /v1/rehydrate`` refuses exact bytes whose lines hold a secret, for a range too.

A range that starts inside a key could leave a piece too short to be recognised; the whole content is scanned
and a range refused when it overlaps a line holding a secret. A range of clean lines is served. Secrets are drawn
from the secret corpus's one-line formats, placed as a ``.env`` value in a tool output.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import Served

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy"))
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger import Ledger

HEAD = "REGION=eu-west-1\n"
ONE_LINE = sorted(set(FORMATS) - MULTILINE)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(ONE_LINE), seed=st.integers(0, 10_000), skip=st.integers(4, 12))
def test_a_range_inside_a_secret_is_refused(served: Served, fmt: str, seed: int, skip: int) -> None:
    secret, fingerprints = draw(fmt, seed)
    text = f"{HEAD}{secret}\nLOG_LEVEL=info\n"
    with Ledger.open(served.url) as ledger:
        rec = ledger.recorder(f"env-{uuid.uuid4().hex[:8]}", tenant_id="acme")
        rec.user("show me the settings")
        ref = str(rec.tool_call("read_file", {"path": ".env"}, output=text).artifact)
    start = len(HEAD.encode()) + skip  # inside the secret's line
    cut = served.client.get(f"/v1/rehydrate/{ref}", params={"start": start}, headers=served.auth("acme"))
    assert cut.status_code == 403 and "line 2" in cut.json()["detail"]
    assert not any(f[skip:] in cut.text for f in fingerprints if len(f) > skip + 8)
    clean = served.client.get(f"/v1/rehydrate/{ref}", params={"end": len(HEAD)}, headers=served.auth("acme"))
    assert clean.status_code == 200 and clean.content == HEAD.encode()
