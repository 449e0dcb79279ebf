"""``Ledger.open`` and the CLI agree on a SQLite path that does not exist.

Opening to write (``Ledger.open(url)``, ``ctxledger import``) creates the file and its missing folders; opening
to read (``Ledger.open(url, create=False)``, every reading command) refuses it and creates nothing, so a mistyped
path never becomes a new, empty store.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.errors import ConfigurationError
from ctxledger.ledger import Ledger
from ctxledger.store import missing_sqlite_file, open_store

NAME = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_. "), min_size=1, max_size=12).filter(
    lambda n: n.strip(" .") == n and n not in (".", "..")
)


@settings(max_examples=20, deadline=None)
@given(folders=st.lists(NAME, max_size=3), name=NAME)
def test_reading_refuses_a_missing_store_and_writing_creates_it(folders: list[str], name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = root.joinpath(*folders, f"{name}.db")
        url = f"sqlite:///{db}"
        assert missing_sqlite_file(url) == db
        for reading in (lambda: Ledger.open(url, create=False), lambda: open_store(url, create=False)):
            with pytest.raises(ConfigurationError, match="no store at"):
                reading()
        cli = CliRunner().invoke(app, ["--db", url, "conversations"])
        assert cli.exit_code == 2 and "no store at" in " ".join(cli.stderr.split())
        assert list(root.iterdir()) == []  # no file, no folder, no blob folder
        with Ledger.open(url) as ledger:  # writing: the file and its folders are made
            ledger.import_messages([{"role": "user", "content": "hello"}], conversation_id="c")
        assert db.is_file() and missing_sqlite_file(url) is None
        with Ledger.open(url, create=False) as ledger:
            assert ledger.store.conversations("default") == ["c"]
        assert CliRunner().invoke(app, ["--db", url, "conversations"]).exit_code == 0
