"""An import counts its turns' tokens before it writes: a count that fails leaves nothing written."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger

_texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=60)
_transcripts = st.lists(_texts, min_size=1, max_size=6).map(
    lambda texts: [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
)


class CountFailed(RuntimeError):
    pass


def _fail(*args: object, **kwargs: object) -> None:
    raise CountFailed("tokenizer gone")


def _write(folder: Path, messages: list[dict[str, str]]) -> Path:
    path = folder / "chat.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


@settings(max_examples=10, deadline=None)
@given(_transcripts)
def test_a_failing_count_leaves_the_store_empty_and_a_retry_imports(messages: list[dict[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        path = _write(Path(tmp), messages)
        ledger = Ledger.open(f"sqlite:///{tmp}/ctx.db")
        patch.setattr(Ledger, "warm_counts", _fail)
        with pytest.raises(CountFailed):
            ledger.import_file(path, "openai-chat", conversation_id="c", count_tokens_for="gpt-4o")
        assert ledger.conversations() == []
        patch.undo()
        ledger.import_file(path, "openai-chat", conversation_id="c", count_tokens_for="gpt-4o")
        assert [c.id for c in ledger.conversations()] == ["c"]
        ledger.close()


def test_the_cli_import_counts_before_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}])
    url = f"sqlite:///{tmp_path / 'ctx.db'}"
    monkeypatch.setattr(Ledger, "warm_counts", _fail)
    result = CliRunner().invoke(app, ["--db", url, "import", str(path), "--conversation-id", "c"])
    assert result.exit_code != 0
    monkeypatch.undo()
    with Ledger.open(url) as ledger:
        assert ledger.conversations() == []
    result = CliRunner().invoke(app, ["--db", url, "import", str(path), "--conversation-id", "c"])
    assert result.exit_code == 0, result.output
    with Ledger.open(url) as ledger:
        assert [c.id for c in ledger.conversations()] == ["c"]
