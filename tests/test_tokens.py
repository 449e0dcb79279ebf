"""Token counters: offline exact encodings, agreement of the two backends, estimates, caching, names."""

from __future__ import annotations

import json
import re
import socket
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken.load

from ctxledger import _encodings
from ctxledger.errors import ConfigurationError, IntegrityError
from ctxledger.hashing import content_hash, text_hash
from ctxledger.tokens import (
    CachedCounter,
    CharEstimateCounter,
    FixedCounter,
    ProxyCounter,
    QuicktokCounter,
    TiktokenCounter,
    TokenCounter,
    count_cache_key,
    counter_for_model,
    get_counter,
)

ENCODINGS = _encodings.SUPPORTED_ENCODINGS
SPECIALS = ("<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|im_start|>")


# --- real chunks -------------------------------------------------------------------------------------


def _message_texts(messages: Sequence[dict[str, Any]]) -> Iterator[str]:
    """Content strings and tool-call argument strings of OpenAI-format messages."""
    for message in messages:
        if isinstance(message.get("content"), str) and message["content"]:
            yield message["content"]
        for call in message.get("tool_calls") or ():
            yield call["function"]["arguments"]


def _tau_bench(data_dir: Path) -> list[str]:
    """Messages of the first 8 tau-bench trajectories: a policy, user turns, JSON arguments and results."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())
    return [text for record in records[:8] for text in _message_texts(record["traj"])]


def _mini_swe(data_dir: Path) -> list[str]:
    """All of one mini-swe-agent run (code, shell output), plus every non-ASCII message of all runs."""
    runs = [json.loads(path.read_text()) for path in sorted((data_dir / "mini-swe-agent-deepseek").glob("*.json"))]
    first = list(_message_texts(runs[0]["messages"]))
    others = [t for run in runs[1:] for t in _message_texts(run["messages"]) if not t.isascii()]
    return first + others


@pytest.fixture(scope="module")
def chunks(data_dir: Path) -> list[str]:
    """A few hundred real chunks, plus real text with special-token strings spliced in."""
    real = _tau_bench(data_dir) + _mini_swe(data_dir)
    spliced = [f"{text[:200]}{special}{text[200:400]}" for text in real[:60] for special in SPECIALS[:2]]
    return real + spliced + list(SPECIALS)


def _is_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict | list)
    except ValueError:
        return False


def test_chunks_cover_json_code_non_ascii_and_specials(chunks: list[str]) -> None:
    """The agreement sample really holds JSON, code, non-ASCII text and special-token strings."""
    assert len(chunks) >= 300
    assert sum(map(_is_json, chunks)) >= 50
    assert sum("def " in t or "import " in t for t in chunks) >= 20
    assert sum(not t.isascii() for t in chunks) >= 40
    assert any(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", t) for t in chunks)
    assert any(re.search(r"[\U0001F300-\U0001FAFF]", t) for t in chunks)
    assert sum("<|endoftext|>" in t for t in chunks) >= 60


# --- exactness ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_quicktok_and_tiktoken_agree_on_real_chunks(encoding: str, chunks: list[str]) -> None:
    """Default (quicktok) and reference (tiktoken) counters give identical counts and token ids."""
    fast, reference = get_counter(f"quicktok/{encoding}"), get_counter(f"tiktoken/{encoding}")
    assert isinstance(fast, QuicktokCounter) and isinstance(reference, TiktokenCounter)
    assert fast.count_many(chunks) == reference.count_many(chunks)
    assert [fast.count(t) for t in chunks] == [reference.count(t) for t in chunks]
    mismatched = [t[:80] for t in chunks if fast.tokenizer.encode_ordinary(t) != reference.encoding.encode_ordinary(t)]
    assert mismatched == []


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_encoders_agree_on_every_assigned_code_point(encoding: str) -> None:
    """Raw quicktok and tiktoken split alike every code point Python's Unicode assigns, in tricky contexts."""
    points = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs")]
    fast, reference = get_counter(f"quicktok/{encoding}"), get_counter(f"tiktoken/{encoding}")
    assert isinstance(fast, QuicktokCounter) and isinstance(reference, TiktokenCounter)
    for context in ("{}'s\n \n", " {}{}1"):
        text = "".join(context.format(p, p) for p in points)
        assert fast.tokenizer.encode_ordinary(text) == reference.encoding.encode_ordinary(text), repr(context)


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("o200k_base", "\U00033042'g"), ("o200k_base", "\U00032aa0\n \n"), ("cl100k_base", "\U00033118'A")],
)
def test_unicode_17_text_is_counted_by_the_reference(encoding: str, text: str) -> None:
    """Text with code points newer than tiktoken's Unicode (where quicktok splits differently) counts as tiktoken."""
    fast, reference = get_counter(f"quicktok/{encoding}"), get_counter(f"tiktoken/{encoding}")
    assert _encodings.has_unassigned(text)
    assert fast.count(text) == reference.count(text)
    assert fast.count_many(["plain", text]) == [1, reference.count(text)]


def test_has_unassigned_ignores_assigned_text() -> None:
    """ASCII, CJK, emoji and private-use text is not sent to the reference; an unassigned code point is."""
    assert not _encodings.has_unassigned("plain ascii")
    assert not _encodings.has_unassigned("日本語 😀 \U000f0000 é")
    assert _encodings.has_unassigned("x\u0378y")
    assert _encodings.has_unassigned("x\U000e0080y")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_known_token_ids(encoding: str) -> None:
    """The offline encodings reproduce tiktoken's published ids for "hello world"."""
    expected = {"o200k_base": [24912, 2375], "cl100k_base": [15339, 1917]}[encoding]
    counter = get_counter(f"tiktoken/{encoding}")
    assert isinstance(counter, TiktokenCounter)
    assert counter.encoding.encode_ordinary("hello world") == expected
    assert get_counter(encoding).count("hello world") == 2


@pytest.mark.parametrize("name", ["quicktok/o200k_base", "tiktoken/o200k_base", "quicktok/cl100k_base"])
def test_special_token_strings_count_as_ordinary_text(name: str) -> None:
    """Special-token strings like <|endoftext|> count as their characters, never as one token, never raising."""
    counter = get_counter(name)
    for special in SPECIALS:
        assert counter.count(special) > 1
    assert counter.count("a <|endoftext|> b") == counter.count("a <|endoftext") + counter.count("|> b")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_lone_surrogates_count_like_tiktoken(encoding: str) -> None:
    """Text holding lone surrogates (e.g. from bad JSON escapes) is counted, identically by both backends."""
    texts = ["a\ud800b", "\udcff", '{"k": "\ud83d"}']
    fast, reference = get_counter(f"quicktok/{encoding}"), get_counter(f"tiktoken/{encoding}")
    assert fast.count_many(texts) == reference.count_many(texts) == [fast.count(t) for t in texts]


# --- offline construction and hash pins ---------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pins_are_tiktokens_own(encoding: str) -> None:
    """The pin checked is the sha256 written next to the rank file's URL in tiktoken_ext/openai_public.py."""
    from tiktoken_ext import openai_public

    source = Path(openai_public.__file__).read_text()
    match = re.search(rf'{encoding}\.tiktoken",\s*expected_hash="([0-9a-f]{{64}})"', source)
    assert match is not None
    assert _encodings.official_pin(encoding) == match.group(1)


def _swap_two_ranks(ranks: dict[bytes, int]) -> dict[bytes, int]:
    tampered = dict(ranks)
    first, second = next(t for t, r in ranks.items() if r == 1000), next(t for t, r in ranks.items() if r == 1001)
    tampered[first], tampered[second] = 1001, 1000
    return tampered


def test_verify_ranks_rejects_a_tampered_table() -> None:
    """Swapping two ranks of the real cl100k table changes its hash, and verification refuses it."""
    ranks = _encodings.quicktok_ranks("cl100k_base")
    pin = _encodings.official_pin("cl100k_base")
    _encodings.verify_ranks("cl100k_base", ranks, pin, source="test")
    with pytest.raises(IntegrityError, match="cl100k_base rank table from test"):
        _encodings.verify_ranks("cl100k_base", _swap_two_ranks(ranks), pin, source="test")


def test_tampered_ranks_stop_both_backends(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bundled table that no longer matches tiktoken's pin raises IntegrityError before any counter exists."""
    monkeypatch.setenv("CTXLEDGER_CACHE_DIR", str(tmp_path))
    ranks = _encodings.quicktok_ranks("cl100k_base")
    monkeypatch.setattr(_encodings, "quicktok_ranks", lambda encoding: _swap_two_ranks(ranks))
    with pytest.raises(IntegrityError):
        _encodings.tiktoken_encoding.__wrapped__("cl100k_base")
    with pytest.raises(IntegrityError):
        _encodings.verified_quicktok.__wrapped__("cl100k_base")


def test_verification_is_remembered_only_for_the_same_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A verified table leaves a marker named by its data files' hash; without it, ranks are checked again."""
    monkeypatch.setenv("CTXLEDGER_CACHE_DIR", str(tmp_path))
    pin = _encodings.official_pin("cl100k_base")
    marker = _encodings._verified_marker("cl100k_base", pin)
    assert marker is not None and not marker.exists()
    _encodings.verified_quicktok.__wrapped__("cl100k_base")
    assert marker.exists()
    checked: list[str] = []
    real = _encodings.quicktok_ranks
    monkeypatch.setattr(_encodings, "quicktok_ranks", lambda enc: checked.append(enc) or real(enc))
    _encodings.verified_quicktok.__wrapped__("cl100k_base")
    assert checked == []
    marker.unlink()
    _encodings.verified_quicktok.__wrapped__("cl100k_base")
    assert checked == ["cl100k_base"]


def test_encodings_build_with_the_network_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building both backends opens no socket and never calls tiktoken's downloader."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    encoding = _encodings.tiktoken_encoding.__wrapped__("cl100k_base")
    assert encoding.name == "cl100k_base" and encoding.n_vocab == 100277
    assert _encodings.verified_quicktok.__wrapped__("cl100k_base").name == "cl100k_base"


def test_constructor_without_the_loader_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiktoken whose constructor no longer loads ranks via load_tiktoken_bpe is refused, not run."""
    from tiktoken_ext import openai_public

    def downloads_itself() -> dict[str, Any]:
        raise AssertionError("must not be called")

    monkeypatch.setitem(openai_public.ENCODING_CONSTRUCTORS, "o200k_base", downloads_itself)
    with pytest.raises(ConfigurationError, match="does not load ranks via load_tiktoken_bpe"):
        _encodings.official_pin("o200k_base")


def test_unsupported_encoding_is_refused() -> None:
    """Only cl100k_base and o200k_base are offered offline."""
    with pytest.raises(ConfigurationError, match="p50k_base"):
        _encodings.tiktoken_encoding("p50k_base")


# --- names ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "counter_id"),
    [
        ("o200k_base", "quicktok/o200k_base"),
        ("cl100k_base", "quicktok/cl100k_base"),
        ("gpt-4o", "quicktok/o200k_base"),
        ("gpt-4o-mini", "quicktok/o200k_base"),
        ("gpt-4.1", "quicktok/o200k_base"),
        ("o3", "quicktok/o200k_base"),
        ("gpt-4o-2024-08-06", "quicktok/o200k_base"),
        ("gpt-4", "quicktok/cl100k_base"),
        ("gpt-3.5-turbo", "quicktok/cl100k_base"),
        ("tiktoken/cl100k_base", "tiktoken/cl100k_base"),
        ("chars/4", "estimate/chars4"),
    ],
)
def test_exact_names_resolve(name: str, counter_id: str) -> None:
    """Encodings, counter ids and OpenAI model names give the expected counter."""
    counter = get_counter(name)
    assert isinstance(counter, TokenCounter)
    assert counter.id == counter_id
    assert counter.is_estimate == counter_id.startswith("estimate/")


def test_default_is_the_fast_o200k_counter() -> None:
    """With no name, get_counter gives the exact quicktok o200k_base counter."""
    counter = get_counter()
    assert isinstance(counter, QuicktokCounter)
    assert (counter.id, counter.is_estimate) == ("quicktok/o200k_base", False)


@pytest.mark.parametrize("name", ["claude-sonnet-4-20250514", "claude-3-5-haiku-latest", "Claude-3-opus"])
def test_claude_gets_a_flagged_o200k_estimate(name: str) -> None:
    """Claude models get o200k_base counts marked is_estimate, since their tokenizer is not available offline."""
    counter = get_counter(name)
    assert isinstance(counter, ProxyCounter)
    assert (counter.id, counter.is_estimate) == ("estimate/quicktok/o200k_base", True)
    assert counter.count("hello world") == get_counter("o200k_base").count("hello world")


def test_instances_are_shared_and_ids_round_trip() -> None:
    """Names for the same counter return one instance, and a counter's id names it again."""
    assert get_counter("gpt-4o") is get_counter("o200k_base") is get_counter("quicktok/o200k_base")
    for name in ("o200k_base", "tiktoken/o200k_base", "chars/4", "claude-3-opus"):
        counter = get_counter(name)
        assert get_counter(counter.id) is counter


@pytest.mark.parametrize("name", ["llama3", "gpt2", "estimate/o200k_base", "quicktok/p50k_base", ""])
def test_unknown_names_list_the_valid_ones(name: str) -> None:
    """An unknown name raises ConfigurationError that lists valid names."""
    with pytest.raises(ConfigurationError, match=r"valid names: o200k_base, cl100k_base, chars/4"):
        get_counter(name)


def test_model_with_an_unavailable_encoding_says_so() -> None:
    """A model tiktoken maps to an encoding not offered offline names that encoding."""
    with pytest.raises(ConfigurationError, match="'text-davinci-003' uses encoding 'p50k_base'"):
        get_counter("text-davinci-003")


# --- estimate, fixed, cached --------------------------------------------------------------------------


def test_char_estimate_is_ceil_of_quarter_length() -> None:
    """chars/4 counts ceil(code points / 4) and is flagged as an estimate."""
    counter = CharEstimateCounter()
    assert counter.count_many(["", "a", "abcd", "abcde", "日本語の"]) == [0, 1, 1, 2, 1]
    assert counter.is_estimate and counter.id == "estimate/chars4"


def test_char_estimate_is_within_a_factor_of_two_on_real_chunks(chunks: list[str]) -> None:
    """On real agent data chars/4 lands within 2x of o200k_base in total (it is an estimate, not wild)."""
    estimate = sum(CharEstimateCounter().count_many(chunks))
    exact = sum(get_counter("o200k_base").count_many(chunks))
    assert exact / 2 < estimate < exact * 2


def test_fixed_counter_uses_given_counts_then_fallback() -> None:
    """FixedCounter returns the given count, falls back for other text, and is not an estimate."""
    counter = FixedCounter({"m1": 100, "m2": 7}, fallback=CharEstimateCounter())
    assert counter.count_many(["m1", "m2", "abcdefgh"]) == [100, 7, 2]
    assert counter.is_estimate is False


def test_fixed_counter_id_hashes_counts_and_fallback() -> None:
    """The id depends on the table and the fallback, not on insertion order."""
    a = FixedCounter({"x": 1, "y": 2})
    assert a.id == FixedCounter({"y": 2, "x": 1}).id
    assert a.id.startswith("fixed/sha256:")
    assert a.id != FixedCounter({"x": 1, "y": 3}).id
    assert a.id != FixedCounter({"x": 1, "y": 2}, fallback=CharEstimateCounter()).id


def test_fixed_counter_without_fallback_refuses_unknown_text() -> None:
    """Text with no given count and no fallback raises ConfigurationError naming the text."""
    with pytest.raises(ConfigurationError, match="'unlisted'"):
        FixedCounter({"x": 1}).count("unlisted")


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_fixed_counter_refuses_bad_counts(bad: object) -> None:
    """Counts must be non-negative ints."""
    with pytest.raises(ConfigurationError, match="'m1'"):
        FixedCounter({"m1": bad})  # type: ignore[dict-item]


class _Spy:
    """A counter recording what it was asked to count (len of text as tokens)."""

    id = "spy/len"
    is_estimate = True

    def __init__(self) -> None:
        self.counted: list[str] = []
        self.batches: list[list[str]] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return len(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        self.batches.append(list(texts))
        return [len(t) for t in texts]


def test_cached_counter_counts_each_text_once() -> None:
    """Repeated text is counted by the inner counter once; id and is_estimate are the inner counter's."""
    spy = _Spy()
    cached = CachedCounter(spy)
    assert [cached.count("abc"), cached.count("abc"), cached.count("de")] == [3, 3, 2]
    assert spy.counted == ["abc", "de"]
    assert (cached.hits, cached.misses, len(cached)) == (1, 2, 2)
    assert (cached.id, cached.is_estimate) == ("spy/len", True)


def test_cached_counter_batches_only_misses() -> None:
    """count_many sends only uncached, distinct texts to the inner counter, in one batch, keeping order."""
    spy = _Spy()
    cached = CachedCounter(spy)
    cached.count("a")
    assert cached.count_many(["bb", "a", "ccc", "bb"]) == [2, 1, 3, 2]
    assert spy.batches == [["bb", "ccc"]]


def test_cached_counter_evicts_least_recently_used() -> None:
    """With maxsize 2, the least recently used count is dropped and recounted later."""
    spy = _Spy()
    cached = CachedCounter(spy, maxsize=2)
    for text in ("a", "bb", "a", "ccc", "a", "bb"):
        cached.count(text)
    assert spy.counted == ["a", "bb", "ccc", "bb"]
    assert len(cached) == 2


def test_cached_counter_refuses_zero_size() -> None:
    """maxsize below 1 is a configuration error."""
    with pytest.raises(ConfigurationError):
        CachedCounter(_Spy(), maxsize=0)


def test_cached_real_counter_matches_uncached(chunks: list[str]) -> None:
    """Caching in front of the real default counter changes no count."""
    inner = get_counter("o200k_base")
    cached = CachedCounter(inner)
    assert cached.count_many(chunks) == inner.count_many(chunks)
    assert cached.count_many(chunks[:50]) == inner.count_many(chunks[:50])
    assert cached.hits == len(set(chunks[:50]))


def test_count_cache_key_names_counter_and_text() -> None:
    """The key is the content hash of (counter id, text hash): it changes with either."""
    key = count_cache_key("quicktok/o200k_base", "hello")
    assert key == content_hash({"counter": "quicktok/o200k_base", "text": text_hash("hello")})
    assert key.startswith("sha256:")
    assert key != count_cache_key("tiktoken/o200k_base", "hello")
    assert key != count_cache_key("quicktok/o200k_base", "hello ")


# --- a model call's counter ------------------------------------------------------------------------------


def test_an_unknown_model_without_a_counter_is_refused_listing_the_counters() -> None:
    """No silent estimate: the error names the model, the option to pass and every counter offered."""
    with pytest.raises(ConfigurationError) as err:
        counter_for_model("llama-3.1-70b", option="--counter")
    message = str(err.value)
    assert "'llama-3.1-70b'" in message and "pass --counter one of" in message
    for name in ("o200k_base", "cl100k_base", "estimate/quicktok/o200k_base", "chars/4"):
        assert name in message
    with pytest.raises(ConfigurationError, match=r"p50k_base.*pass counter= one of"):
        counter_for_model("text-davinci-003")


def test_an_explicit_counter_wins_and_a_known_model_needs_none() -> None:
    """--counter picks the tokenizer for any model name; OpenAI and Claude names resolve without one."""
    assert counter_for_model("llama-3.1-70b", "o200k_base") is get_counter("o200k_base")
    proxy = counter_for_model("llama-3.1-70b", "estimate/quicktok/cl100k_base")
    assert proxy.is_estimate and proxy.id == "estimate/quicktok/cl100k_base"
    assert counter_for_model("gpt-4", None).id == "quicktok/cl100k_base"
    assert counter_for_model("claude-sonnet-4-5").is_estimate
    with pytest.raises(ConfigurationError, match=r"^--counter 'nope': unknown token counter"):
        counter_for_model("gpt-4o", "nope", option="--counter")


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_counter_is_refused_not_read_as_no_counter(blank: str) -> None:
    """``--counter ''`` (an unset shell variable) is a mistake to name, not a request for the default counter."""
    with pytest.raises(ConfigurationError, match=r"^--counter .*unknown token counter"):
        counter_for_model("gpt-4o", blank, option="--counter")
