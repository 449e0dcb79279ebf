"""Fixtures for the serializer tests: the real o200k counter, both serializers, real images."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from serialize_helpers import data_url, image_bytes

from ctxledger.serialize import AnthropicMessagesSerializer, OpenAIChatSerializer, OpenAIResponsesSerializer
from ctxledger.tokens import TokenCounter, get_counter


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """The exact o200k_base counter (gpt-4o family)."""
    return get_counter("o200k_base")


@pytest.fixture
def openai() -> OpenAIChatSerializer:
    """A default OpenAI Chat Completions serializer (gpt-4o image rates)."""
    return OpenAIChatSerializer()


@pytest.fixture
def anthropic() -> AnthropicMessagesSerializer:
    """A default Anthropic Messages serializer."""
    return AnthropicMessagesSerializer()


@pytest.fixture(scope="session")
def png_url() -> Callable[[int, int], str]:
    """Factory of data URLs of real PNG images of a given size."""
    return lambda w, h: data_url(image_bytes(w, h, "PNG"), "image/png")


@pytest.fixture
def responses() -> OpenAIResponsesSerializer:
    """A default OpenAI Responses serializer."""
    return OpenAIResponsesSerializer()
