"""``ctxledger rehydrate`` refuses exact bytes that hold a secret unless ``--reveal-secrets`` is given.

The bytes are a tool output (a file read) whose middle line holds a secret drawn from the secret corpus, every
format (keys, assignments, private key blocks, .env lines …). Refused: exit code 2, the secret's type named,
nothing of it on stdout or stderr. ``--reveal-secrets`` gives the exact bytes; a range that avoids the secret's
lines is given without it.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy"))
from secret_corpus import FORMATS, draw

from ctxledger import Ledger
from ctxledger.cli import app

HEAD = "# settings read from the deploy host\nREGION=eu-west-1\n"
TAIL = "\nLOG_LEVEL=info\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('rehydrate') / 'r.db'}"
    Ledger.open(url, create=True).close()
    return url


def _artifact(url: str, text: str) -> str:
    with Ledger.open(url) as ledger:
        rec = ledger.recorder(f"c-{uuid.uuid4().hex[:8]}")
        rec.user("show me the settings")
        return str(rec.tool_call("read_file", {"path": ".env"}, output=text).artifact)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(FORMATS)), seed=st.integers(0, 10_000))
def test_bytes_holding_a_secret_are_refused_unless_revealed(store: str, fmt: str, seed: int) -> None:
    secret, fingerprints = draw(fmt, seed)
    text = HEAD + secret + TAIL
    ref = _artifact(store, text)
    runner = CliRunner()
    refused = runner.invoke(app, ["--db", store, "rehydrate", ref])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert not any(f in refused.stderr for f in fingerprints)
    said = " ".join(refused.stderr.split())
    assert "the bytes hold" in said and "--reveal-secrets" in said and "(line" in said
    revealed = runner.invoke(app, ["--db", store, "rehydrate", ref, "--reveal-secrets"])
    assert revealed.exit_code == 0 and revealed.stdout_bytes == text.encode()
    clean = runner.invoke(app, ["--db", store, "rehydrate", ref, "--bytes", f"0:{len(HEAD.encode())}"])
    assert clean.exit_code == 0 and clean.stdout_bytes == HEAD.encode()
    cut = runner.invoke(app, ["--db", store, "rehydrate", ref, "--bytes", f"{len(HEAD.encode()) + 2}:{len(text)}"])
    assert cut.exit_code == 2 and not any(f[2:] in cut.stdout + cut.stderr for f in fingerprints)


def test_the_flag_is_documented_in_help() -> None:
    result = CliRunner().invoke(app, ["rehydrate", "--help"])
    assert "--reveal-secrets" in result.stdout
