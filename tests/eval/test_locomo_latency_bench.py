"""``bench/locomo_latency.py`` says which relevance its calls used: lexical only, or with the semantic extra."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.assemble.semantic import default_embedder

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("locomo_latency", ROOT / "bench" / "locomo_latency.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_bench_prints_the_relevance_its_calls_used(data_dir, monkeypatch, capsys) -> None:
    bench = _bench()
    file = data_dir / "locomo" / "locomo10_conv0-6.json"
    monkeypatch.setattr(sys, "argv", ["locomo_latency.py", "--file", str(file), "--questions", "2"])
    bench.main()
    last = capsys.readouterr().out.strip().splitlines()[-1]
    embedder = default_embedder()
    if embedder is None:
        assert last.startswith("relevance: lexical only") and "bm25" in last
    else:
        assert last.startswith("relevance: with the semantic extra") and f"bm25+{embedder.model_id}" in last
    assert "(2 calls)" in last


MODEL = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_.@"), min_size=1, max_size=20).filter(
    lambda m: m not in ("bm25", "speaker", "date", "session")
)


@given(model=st.none() | MODEL, signals=st.lists(st.sampled_from(["speaker", "date", "session"]), unique=True))
def test_the_line_tells_lexical_from_semantic_for_any_relevance_name(model: str | None, signals: list[str]) -> None:
    bench = _bench() if "locomo_latency" not in sys.modules else sys.modules["locomo_latency"]
    name = "+".join(["bm25", *([model] if model else []), *signals])
    line = bench.relevance_line(Counter({name: 3}))
    assert line.startswith("relevance: with the semantic extra" if model else "relevance: lexical only")
    assert line.endswith(f"{name} (3 calls)")


@pytest.fixture(autouse=True)
def _no_leftover_module():
    yield
    sys.modules.pop("locomo_latency", None)
