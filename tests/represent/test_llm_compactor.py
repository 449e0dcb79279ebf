"""The LLM compactor through the official OpenAI and Anthropic SDKs, against a local provider server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, serve
from represent_helpers import read_json

from ctxledger.errors import CompactionRefused, ConfigurationError
from ctxledger.ingest import parse_openai_messages, write_batch
from ctxledger.records import Record
from ctxledger.represent import LLMCompactor, compact_checked
from ctxledger.testing import MemoryStore

PROHIBITION = "Do not push anything to the remote and do not open a pull request"


@pytest.fixture(scope="module")
def b09_span(cases_dir: Path) -> tuple[list[Record], str, str]:
    """Case B09's m2..m10 as stored records, m2's record id, and the lossy summary s1."""
    case = read_json(cases_dir / "B09.json")
    store = MemoryStore()
    write_batch(store, parse_openai_messages(case["messages"], conversation_id="b09"))
    records = store.records("default", "b09")
    ext = {r.external_id: r for r in records if r.external_id}
    span = [r for r in records if ext["m2"].seq <= r.seq <= ext["m10"].seq]
    summary = next(m["content"] for m in case["messages"] if m["id"] == "s1")
    return span, ext["m2"].id, summary


def _prompt(path: str, body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def faithful(path: str, body: dict[str, Any]) -> str:
    """A compliant model: copies the MUST KEEP VERBATIM lines and cites every MUST CITE id."""
    prompt = _prompt(path, body)
    verbatim = prompt.split("MUST KEEP VERBATIM:\n", 1)[1].split("\n\nMUST CITE:", 1)[0]
    cited = [line.split("]", 1)[0] + "]" for line in prompt.split("MUST CITE:\n", 1)[1].splitlines()]
    return "The invoicing module was split and committed locally.\n" + verbatim + "\nSources: " + " ".join(cited)


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    """One local provider server for the module; each test sets its ``reply`` and clears its requests."""
    with serve(faithful) as running:
        yield running


def _make(kind: str, provider: FakeProvider, **kw: Any) -> LLMCompactor:
    base = provider.openai_base if kind == "openai" else provider.root
    return LLMCompactor(kind, base_url=base, model="summarizer-1", api_key="sk-local-test", max_retries=0, **kw)


@pytest.fixture(scope="module")
def compactors(provider: FakeProvider) -> Iterator[dict[str, LLMCompactor]]:
    """One SDK-backed compactor per wire protocol, pointed at the local server."""
    made = {kind: _make(kind, provider) for kind in ("openai", "anthropic")}
    yield made
    for compactor in made.values():
        compactor.close()


def _use(provider: FakeProvider, reply: Reply) -> None:
    provider.reply = reply
    provider.requests.clear()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_faithful_model_output_is_accepted(kind: str, b09_span, provider, compactors):
    """A summary that keeps the prohibition verbatim passes the fidelity check and records its model."""
    span, m2_id, _ = b09_span
    _use(provider, faithful)
    compaction = compact_checked(span, compaction_id="c-llm", policy_version="p1", compactor=compactors[kind])
    assert PROHIBITION in compaction.text
    assert compaction.text.startswith("The invoicing module was split")
    assert compaction.meta == {"compactor": "llm", "client_kind": kind, "model": "summarizer-1"}
    assert compaction.body["user_constraints"][0]["record_id"] == m2_id
    assert compaction.body["fidelity"]["ok"] is True


def test_openai_request_shape(b09_span, provider, compactors):
    """The OpenAI SDK posts Chat Completions with a bearer key, a system prompt and the invariants."""
    span, m2_id, _ = b09_span
    _use(provider, faithful)
    compactors["openai"](span, compaction_id="c", policy_version="p")
    (request,) = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-local-test"
    assert request.body["model"] == "summarizer-1" and request.body["temperature"] == 0
    system, user = request.body["messages"]
    assert system["role"] == "system" and "MUST KEEP VERBATIM" in system["content"]
    assert f"[{m2_id}] Refactor the invoicing module" in user["content"]


def test_anthropic_request_shape(b09_span, provider):
    """The Anthropic SDK posts Messages with the key, a version header and a top-level system prompt."""
    span, _, _ = b09_span
    _use(provider, faithful)
    with _make("anthropic", provider, max_tokens=512) as compactor:
        compactor(span, compaction_id="c", policy_version="p")
    (request,) = provider.requests
    assert request.path == "/v1/messages"
    key = request.headers.get("x-api-key") or request.headers["authorization"].removeprefix("Bearer ")
    assert key == "sk-local-test" and request.headers["anthropic-version"]
    assert request.body["max_tokens"] == 512 and "MUST KEEP VERBATIM" in request.body["system"]
    assert [m["role"] for m in request.body["messages"]] == ["user"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_model_that_drops_the_constraint_is_refused(kind: str, b09_span, provider, compactors):
    """A model answering with B09's lossy summary is refused: it never becomes summary text."""
    span, m2_id, summary = b09_span
    _use(provider, lambda path, body: summary)
    with pytest.raises(CompactionRefused) as refused:
        compact_checked(span, compaction_id="c-bad", policy_version="p1", compactor=compactors[kind])
    assert refused.value.reason == "lost_invariants"
    assert any(i.kind == "user_constraints" and i.record_id == m2_id for i in refused.value.missing)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("reply", [lambda path, body: None, lambda path, body: ""], ids=["http-500", "empty"])
def test_provider_failure_and_empty_answer_are_refused(kind: str, reply: Reply, b09_span, provider, compactors):
    """An HTTP 500 and an empty answer both refuse the compaction as ``compactor_failed``."""
    span, _, _ = b09_span
    _use(provider, reply)
    with pytest.raises(CompactionRefused) as refused:
        compact_checked(span, compaction_id="c", policy_version="p", compactor=compactors[kind])
    assert refused.value.reason == "compactor_failed"
    assert len(provider.requests) == 1  # max_retries=0: the SDK did not retry


def test_unknown_client_kind():
    """Only the two documented wire protocols are accepted."""
    with pytest.raises(ConfigurationError, match="client_kind"):
        LLMCompactor("gemini", base_url="http://127.0.0.1:9", model="m", api_key="k")  # type: ignore[arg-type]
