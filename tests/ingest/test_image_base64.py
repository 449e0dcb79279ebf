"""Inline images whose base64 holds a character outside the alphabet are refused at import and by the serializer."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError, ProviderContractError
from ctxledger.ingest import parse_anthropic, parse_openai_messages
from ctxledger.serialize.anthropic_messages import AnthropicMessagesSerializer
from ctxledger.serialize.base import Turn
from ctxledger.serialize.images import base64_problem

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_NOT_BASE64 = st.characters(blacklist_categories=("Cs",), blacklist_characters=_ALPHABET)


@st.composite
def _spoiled(draw: st.DrawFn) -> str:
    """Valid base64 with one character that is not base64 put somewhere in it."""
    text = base64.b64encode(draw(st.binary(min_size=1, max_size=60))).decode()
    at = draw(st.integers(min_value=0, max_value=len(text)))
    return text[:at] + draw(_NOT_BASE64) + text[at:]


def _anthropic(data: str) -> list[dict]:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    return [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]}]


def _openai(data: str) -> list[dict]:
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    return [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, part]}]


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(min_size=1, max_size=200))
def test_real_base64_imports_in_both_forms(raw: bytes) -> None:
    data = base64.b64encode(raw).decode()
    assert base64_problem(data) is None
    parse_anthropic(_anthropic(data))
    parse_openai_messages(_openai(data))


@settings(max_examples=60, deadline=None)
@given(data=_spoiled())
def test_a_character_outside_base64_is_refused_naming_the_field(data: str) -> None:
    assert base64_problem(data) is not None
    with pytest.raises(InputError) as anthropic:
        parse_anthropic(_anthropic(data))
    assert anthropic.value.field == "content[1].source.data" and anthropic.value.index == 0
    with pytest.raises(InputError) as openai:
        parse_openai_messages(_openai(data))
    assert openai.value.field == "content[1].image_url.url" and openai.value.index == 0
    assert "not a base64 character" in str(anthropic.value) and "not a base64 character" in str(openai.value)


@settings(max_examples=40, deadline=None)
@given(data=_spoiled())
def test_the_anthropic_serializer_refuses_a_recorded_image_that_is_not_base64(data: str) -> None:
    """A turn recorded by other means than an import (a Recorder, a custom store) is checked when it is sent."""
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    turn = Turn("u1", "user", [{"type": "text", "text": "look"}, part])
    with pytest.raises(ProviderContractError) as caught:
        AnthropicMessagesSerializer().build([turn], model="claude")
    assert caught.value.rule == "bad_image" and caught.value.refs == ("u1",)


def test_an_empty_image_is_refused() -> None:
    with pytest.raises(InputError, match="empty"):
        parse_anthropic(_anthropic(""))
