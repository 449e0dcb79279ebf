"""Semantic relevance: the static embedder, the quantised vectors, the vector index and the mix with BM25."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tokenizer_pieces import LONG_PIECES, SPACE_PIECES, WORD_PIECES

from ctxledger.assemble import relevance, semantic
from ctxledger.assemble.semantic import StaticEmbedder, VectorIndex, dequantize, quantize, unit_vector
from ctxledger.policy.base import SelectionParams

finite = st.floats(-1.0, 1.0, allow_nan=False, width=32)


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v)
    return (v / n).astype(np.float32) if n > 0 else v.astype(np.float32)


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float32, 16, elements=finite))
def test_quantize_keeps_each_component_within_half_a_step(raw: np.ndarray) -> None:
    vec = _unit(raw)
    data = quantize(vec)
    if not vec.any():
        assert data == b""
        return
    assert len(data) == 16
    assert np.max(np.abs(dequantize(data) - vec)) <= 0.5 / 127 + 1e-6


@settings(max_examples=40, deadline=None)
@given(st.lists(hnp.arrays(np.float32, 8, elements=finite), min_size=1, max_size=12), st.integers(0, 12))
def test_vector_index_scores_are_the_cosines_and_truncate_forgets(rows: list[np.ndarray], cut: int) -> None:
    vectors = np.stack([_unit(r) for r in rows])
    index = VectorIndex(8, "m")
    index.add_many(vectors[: len(vectors) // 2])
    index.add_many(vectors[len(vectors) // 2 :])
    query = _unit(np.arange(1, 9, dtype=np.float32))
    assert np.allclose(index.scores(query), vectors @ query, atol=1e-5)
    mean = vectors.mean(axis=0)
    centred = vectors - mean
    q = query - mean
    norms = np.linalg.norm(centred, axis=1) * np.linalg.norm(q)
    expected = np.where(norms > 1e-9, (centred @ q) / np.where(norms > 1e-9, norms, 1), 0.0)
    got = index.scores(query, centred=True)
    assert np.allclose(got[norms > 1e-4], expected[norms > 1e-4], atol=1e-4)
    index.truncate(cut)
    assert len(index) == min(cut, len(vectors))
    assert len(index.scores(query)) == len(index)


def test_unit_vector_is_the_normalised_sum() -> None:
    a, b = np.array([1, 0, 0], np.float32), np.array([0, 1, 0], np.float32)
    assert np.allclose(unit_vector([a, b]), np.array([1, 1, 0]) / np.sqrt(2))
    assert not unit_vector([np.zeros(3, np.float32)]).any()


def _word_embedder() -> StaticEmbedder:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "dog": 1, "puppy": 2, "tax": 3, "barks": 4}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    table = np.array([[0, 0, 0, 1], [1, 0.1, 0, 0], [0.9, 0.2, 0, 0], [0, 0, 1, 0], [0.5, 0.5, 0, 0]], np.float32)
    return StaticEmbedder(table, tok, "words@test")


def test_embed_is_the_normalised_mean_of_token_rows() -> None:
    pytest.importorskip("tokenizers")
    emb = _word_embedder()
    out = emb.embed(["dog barks", "", "tax"])
    expected = _unit(np.array([1.5, 0.6, 0, 0], np.float32) / 2)
    assert np.allclose(out[0], expected, atol=1e-6)
    assert not out[1].any()
    assert np.allclose(out[2], [0, 0, 1, 0])


def test_with_semantic_mixes_and_falls_back_to_lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tokenizers")
    emb = _word_embedder()
    monkeypatch.setattr(semantic, "_LOADED", {"default": emb})
    monkeypatch.setattr(relevance, "default_embedder", lambda: emb)
    index = VectorIndex(4, emb.model_id)
    index.add_many(emb.embed(["tax", "puppy", "tax tax", "dog"]))
    lexical = np.array([2.0, 0.0, 1.0, 0.0])
    mixed = relevance.with_semantic(lexical, "dog", index, 0.5)
    assert mixed[3] == pytest.approx(0.5) and mixed[0] == pytest.approx(0.5)  # the best of each half
    assert mixed[1] > mixed[2]  # the puppy, close to the dog, beats the weaker lexical hit
    assert np.all(mixed >= 0) and np.all(mixed <= 1.0 + 1e-9)
    assert np.array_equal(relevance.with_semantic(lexical, "dog", index, 0.0), lexical)
    assert np.array_equal(relevance.with_semantic(lexical, "dog", None, 0.5), lexical)
    assert relevance.relevance_name(index, SelectionParams(semantic_weight=0.5)) == "bm25+words@test"
    assert relevance.relevance_name(index, SelectionParams(semantic_weight=0.0)) == "bm25"
    other = VectorIndex(4, "another-model")
    # vectors of another model are not mixed with this one's
    assert relevance.relevance_name(other, SelectionParams(semantic_weight=0.5)) == "bm25"
    assert np.array_equal(relevance.with_semantic(lexical, "dog", other, 0.5), lexical)


needs_model = pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")


@needs_model
def test_the_packaged_model_places_paraphrases_closer_than_unrelated_text() -> None:
    emb = semantic.default_embedder()
    assert emb is not None and emb.model_id.startswith("wordllama-l2_supercat-256@")
    a, b, c = emb.embed(["my dog keeps barking at night", "the puppy barks loudly", "file the quarterly tax return"])
    assert float(a @ b) > float(a @ c)


def _ledger(policy: Any = None) -> Any:
    from ctxledger.ledger import Ledger
    from ctxledger.records import Branch, Conversation, Message, Role
    from ctxledger.store.memory import MemoryStore

    ledger = Ledger(MemoryStore(), policy=policy)
    env = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
    turns = [
        "Yesterday I finally went running along the river and then painted for an hour; it calms me down.",
        "Our landlord raised the rent again, so we are looking at flats across town.",
        "I replaced the bike chain and the gears shift smoothly now.",
        "The train to the coast was late, but the sea was worth it.",
        "We planted tomatoes and basil on the balcony this spring.",
        "My sister's wedding is in June and I still need a suit.",
    ]
    records: list[Any] = [Conversation(id="c", **env), Branch(id="c/main", name="main", **env)]
    records += [
        Message(id=f"m{i}", role=Role.USER if i % 2 == 0 else Role.ASSISTANT, content=t, **env)
        for i, t in enumerate(turns)
    ]
    ledger.append(records)
    return ledger


@needs_model
def test_the_manifest_says_which_relevance_the_assembly_used() -> None:
    from ctxledger.policy.default import default_policy

    query = "What does she do to relax and destress?"
    asm = _ledger().assemble("c", query=query, window_tokens=4000, output_tokens=0, margin_tokens=0, persist=False)
    assert asm.manifest["policy"]["relevance"] == f"bm25+{semantic.model_id()}"
    base = default_policy()
    lexical = dataclasses.replace(base, selection=dataclasses.replace(base.selection, semantic_weight=0.0))
    asm = _ledger(lexical).assemble(
        "c", query=query, window_tokens=4000, output_tokens=0, margin_tokens=0, persist=False
    )
    assert asm.manifest["policy"]["relevance"] == "bm25"


@needs_model
@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("Which hobbies does she enjoy, like jogging or art?", "m0"),
        ("Where do they want to move house?", "m1"),
        ("What vegetables are they growing?", "m4"),
        ("Which family event is coming up?", "m5"),
    ],
)
def test_semantic_relevance_ranks_the_answer_that_shares_no_stem_with_the_question(query: str, answer: str) -> None:
    from ctxledger.assemble.phases.select import relevance_by_id
    from ctxledger.assemble.request import AssemblyRequest
    from ctxledger.policy.default import default_policy

    snap = _ledger().snapshots.load("default", "c", "c/main")
    request = AssemblyRequest(tenant_id="default", conversation_id="c", query=query)
    assert not snap.index.scores(relevance.tokenize([query])[0]).any()  # BM25 alone has nothing to rank by
    ranked = relevance_by_id(request, snap, default_policy())
    assert max(ranked, key=ranked.__getitem__) == answer


def test_without_the_model_relevance_is_lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxledger.facts import compute_facts
    from ctxledger.records import Message

    monkeypatch.setattr(semantic, "_LOADED", {"default": None})
    [facts] = compute_facts(
        [Message(id="m", content="hello there", tenant_id="t", conversation_id="c", branch_id="b")], bytes
    )
    assert facts.vector == b""
    asm = _ledger().assemble("c", query="relax?", window_tokens=4000, output_tokens=0, margin_tokens=0, persist=False)
    assert asm.manifest["policy"]["relevance"] == "bm25"


@needs_model
def test_a_replay_without_the_model_says_the_relevance_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = _ledger()
    asm = ledger.assemble("c", query="What vegetables are they growing?", window_tokens=70, output_tokens=0,
                          margin_tokens=0)  # fmt: skip
    left_out = next(m for m in ("m0", "m1", "m2", "m3", "m4", "m5") if m not in asm.turn_refs)
    assert asm.manifest["policy"]["relevance"].startswith("bm25+wordllama")
    monkeypatch.setattr(semantic, "_LOADED", {"default": None})
    answer = ledger.explain(asm.id, left_out)
    assert answer["status"] == "unknown" and answer["reason"] == "replay_mismatch"
    assert "relevance bm25+wordllama" in answer["detail"] and "bm25 now" in answer["detail"]


_PIECES_ALPHABET = st.sampled_from([*SPACE_PIECES, *WORD_PIECES, *LONG_PIECES])


def _reference(embedder: StaticEmbedder, texts: list[str]) -> np.ndarray:
    """The vectors of whole-text tokenization: the mean of every token's row, normalised."""
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for i, enc in enumerate(embedder._tokenizer.encode_batch(texts, add_special_tokens=False)):
        if enc.ids:
            out[i] = unit_vector([embedder.table[enc.ids].astype(np.float32).mean(axis=0)])
    return out


@pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_PIECES_ALPHABET, max_size=30).map("".join), min_size=1, max_size=6))
def test_word_pieces_give_the_vectors_of_whole_text_tokenization(texts: list[str]) -> None:
    embedder = semantic.default_embedder()
    assert embedder is not None and semantic.splits_at_words(embedder._tokenizer)
    assert np.allclose(embedder.embed(texts), _reference(embedder, texts), atol=1e-5)


@pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")
@settings(max_examples=60, deadline=None)
@given(st.lists(_PIECES_ALPHABET, min_size=1, max_size=40).map("".join))
def test_word_pieces_hold_exactly_the_tokens_of_the_whole_text(text: str) -> None:
    embedder = semantic.default_embedder()
    assert embedder is not None
    if any(special in text for special in ("<s>", "</s>", "<unk>")):
        text = text.replace("<", "")  # the tokenizer cuts at added tokens; those texts are tokenized whole
    whole = embedder._tokenizer.encode(text, add_special_tokens=False).ids
    pieces = semantic._PIECE.findall(semantic.SPACE + text.replace(" ", semantic.SPACE))
    ids = embedder._piece_ids(pieces)
    assert [int(i) for part in ids for i in np.frombuffer(part, dtype=np.int32)] == whole


def _piece_reference(embedder: StaticEmbedder, text: str) -> np.ndarray:
    """A text's vector piece by piece, each piece tokenized alone and its float16 rows summed in float32."""
    from collections import Counter

    from tokenizers import Tokenizer

    raw = Tokenizer(embedder._tokenizer.model)
    table16 = embedder.table.astype(np.float16)
    counts = Counter(semantic._PIECE.findall(semantic.SPACE + text.replace(" ", semantic.SPACE)))
    sums = np.zeros((len(counts), embedder.dim), dtype=np.float32)
    for row, piece in enumerate(counts):
        ids = raw.encode(piece, add_special_tokens=False).ids
        if ids:
            sums[row] = table16[ids].sum(axis=0, dtype=np.float32)
    weights = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
    return unit_vector([weights @ sums]) if text else np.zeros(embedder.dim, dtype=np.float32)


_RUNS = st.sampled_from(["\u2581\u2581", "   ", "    return", "\tx", "ab"]) | _PIECES_ALPHABET


@settings(max_examples=200, deadline=None)
@given(st.lists(_RUNS | st.text(alphabet=" \n\ta\u00e9\u2581", max_size=4), max_size=30).map("".join))
def test_pieces_of_a_text_without_markers_are_its_normalised_pieces_with_spaces(text: str) -> None:
    """The spaced pieces of a text holding no marker, spaces made markers, are the pieces of its normalised form."""
    text = text.replace(semantic.SPACE, "")
    normalised = semantic._PIECE.findall(semantic.SPACE + text.replace(" ", semantic.SPACE))
    spaced = semantic._SPACED_PIECE.findall(" " + text)
    assert [piece.replace(" ", semantic.SPACE) for piece in spaced] == normalised
    assert all(piece.startswith(" ") for piece in spaced) and all(p.startswith(semantic.SPACE) for p in normalised)


@pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_RUNS, max_size=40).map("".join), min_size=1, max_size=8))
def test_batched_pieces_give_exactly_the_vectors_of_pieces_tokenized_one_by_one(texts: list[str]) -> None:
    """Joined runs, the marker split, cached ids and row sums give the bits of each piece summed on its own."""
    embedder = semantic.default_embedder()
    assert embedder is not None
    texts = [t.replace("<", "") for t in texts]  # texts naming an added token are tokenized whole
    got = embedder.embed(texts)
    again = embedder.embed(texts)  # the ids now come from the cache
    for text, vector, cached in zip(texts, got, again, strict=True):
        want = _piece_reference(embedder, text)
        assert vector.tobytes() == want.tobytes() == cached.tobytes(), text


@pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_RUNS, min_size=1, max_size=12).map("".join), min_size=1, max_size=30))
def test_pieces_tokenized_joined_by_the_separator_get_the_ids_of_each_piece_alone(texts: list[str]) -> None:
    """Joined runs cut at the separator's token (and pieces holding the separator) give each piece's own ids."""
    from tokenizers import Tokenizer

    embedder = semantic.default_embedder()
    assert embedder is not None and embedder._separator is not None
    pieces = [semantic.SPACE + text.replace(" ", semantic.SPACE) for text in texts]
    raw = Tokenizer(embedder._tokenizer.model)
    embedder._raw = embedder._raw or raw
    want = [raw.encode(piece, add_special_tokens=False).ids for piece in pieces]
    assert [np.frombuffer(ids, dtype=np.int32).tolist() for ids in embedder._encode_pieces(pieces)] == want


@needs_model
def test_the_packaged_model_s_separator_takes_part_in_no_merge() -> None:
    embedder = semantic.default_embedder()
    assert embedder is not None
    config = semantic.tokenizer_config(embedder._tokenizer)
    assert config is not None
    mark, mark_id = semantic.separator(config) or ("", -1)
    merges = config["model"]["merges"]
    assert config["model"]["vocab"][mark] == mark_id
    assert not any(mark in (m if isinstance(m, str) else " ".join(m)) for m in merges)


def test_a_separator_is_a_character_token_no_merge_involves() -> None:
    assert semantic.separator({"model": {"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []}}) is None
    assert semantic.separator({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}) is None
    assert semantic.separator({"model": {"type": "BPE", "vocab": {"a": 0, "c": 1}, "merges": [["a", "a"]]}}) == ("c", 1)


_TOKEN = st.text(alphabet="ab c\u2581\U0001f30d", min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_TOKEN, max_size=8, unique=True),
    st.lists(st.tuples(_TOKEN, _TOKEN, st.booleans()), max_size=6),
)
def test_the_separator_is_the_highest_single_character_token_on_no_side_of_a_merge(
    vocab: list[str], merges: list[tuple[str, str, bool]]
) -> None:
    """Merges written as ``"left right"`` (cut at the first space) or as pairs; a space inside a side counts."""
    written = [f"{left} {right}" if as_string else [left, right] for left, right, as_string in merges]
    config = {"model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(vocab)}, "merges": written}}
    sides = [side for merge in written for side in (merge.split(" ", 1) if isinstance(merge, str) else merge)]
    on_a_side = {c for side in sides for c in side}
    alone = [t for t in vocab if len(t) == 1 and t not in on_a_side]
    assert semantic.separator(config) == ((max(alone), vocab.index(max(alone))) if alone else None)


def test_a_tokenizer_that_does_not_cut_at_words_is_tokenized_whole() -> None:
    pytest.importorskip("tokenizers")
    emb = _word_embedder()
    assert not semantic.splits_at_words(emb._tokenizer)
    assert not emb._by_piece


@given(hnp.arrays(np.float32, (5, 8), elements=st.floats(-1, 1, width=32)))
def test_quantize_rows_rounds_each_row_as_quantize_does(rows: np.ndarray) -> None:
    out = semantic.quantize_rows(rows)
    for row, q in zip(rows, out, strict=True):
        assert (q.tobytes() if row.any() else b"") == quantize(row)
