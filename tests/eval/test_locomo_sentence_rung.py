"""The sentence-rung measurement (``bench/locomo_sentence_rung.py``): its excerpts are the turn's own sentences, in
order, cheaper than the turn, and with the rung off the assemblies are the default policy's."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.assemble.semantic import default_embedder

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("locomo_sentence_rung", ROOT / "bench" / "locomo_sentence_rung.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rung = _bench()

_words = st.text(alphabet="abcdefgh xyz,'", min_size=1, max_size=30).map(str.strip).filter(bool)
_sentences = st.lists(st.tuples(_words, st.sampled_from([".", "!", "?", "..."])), min_size=1, max_size=6)


@given(_sentences, st.sampled_from(["", " [shares a photo: a dog on a beach]"]), st.sampled_from(["Caroline", "Jon"]))
def test_split_turn_gives_the_sentences_in_order_without_the_caption(sentences, caption, speaker):
    body = " ".join(words + end for words, end in sentences)
    prefix, parts = rung.split_turn(f"{speaker}: {body}{caption}")
    assert prefix == f"{speaker}: "
    assert " ".join(parts) == body  # every sentence, nothing else, in the turn's order
    assert "shares a photo" not in " ".join(parts)


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=8), st.integers(1, 4))
def test_best_sentences_keeps_the_best_in_text_order(scores, keep):
    parts = [f"s{k}." for k in range(len(scores))]
    kept = rung.best_sentences(parts, scores, keep)
    assert kept == sorted(kept) and len(kept) == min(keep, len(parts))
    assert max(range(len(scores)), key=lambda k: (scores[k], -k)) in kept
    left_out = set(range(len(scores))) - set(kept)
    assert all(scores[o] <= min(scores[k] for k in kept) for o in left_out)


@pytest.mark.skipif(default_embedder() is None, reason="the semantic extra is not installed")
def test_excerpts_carry_sentences_of_the_turn_and_off_is_the_default(data_dir, tmp_path):
    from ctxledger.assemble.phases import select as select_phase
    from ctxledger.eval.datasets import load_locomo
    from ctxledger.eval.harness import evaluate_case
    from ctxledger.eval.ours import PolicySelector
    from ctxledger.tokens import get_counter

    counter = get_counter("cl100k_base")
    records = json.loads((data_dir / "locomo" / "locomo10_conv0-6.json").read_text(encoding="utf-8"))
    one = tmp_path / "conv0.json"
    one.write_text(json.dumps([records[0]]), encoding="utf-8")
    cases = [c for c in load_locomo(one, counter).cases if c.required_ids][:6]
    original = select_phase.select
    try:
        plain = PolicySelector(counter)
        before = [plain.select(_task(c, counter)) for c in cases]
        off = rung.SentenceRung(0, 1, counter)
        off.install()
        assert [PolicySelector(counter).select(_task(c, counter)).payload_hash for c in cases] == [
            s.payload_hash for s in before
        ]
        on = rung.SentenceRung(20, 1, counter)
        on.install()
        selector = PolicySelector(counter)
        excerpted = 0
        for case, was in zip(cases, before, strict=True):
            row = evaluate_case(case, selector, 2000, counter)
            assert row.fits and not row.overflow
            sent = selector.select(_task(case, counter)).details["sent_texts"]
            texts = {i.id: i.text for i in case.items}
            for item_id, text in sent.items():
                prefix, parts = rung.split_turn(texts[item_id])
                assert text.startswith(prefix)
                assert all(piece in parts for piece in text[len(prefix) :].split(" … "))
                excerpted += 1
            assert row.included >= len(was.included_ids)  # shorter turns: at least as many enter
        assert excerpted > 0
    finally:
        select_phase.select = original
        import ctxledger.assemble.assembler as assembler

        assembler.relevance_scores = select_phase.relevance_scores


def _task(case, counter):
    from ctxledger.eval.base import SelectionTask

    return SelectionTask(case.items, case.query, 2000, counter, case.query_tokens)
