"""get_serializer: the registry of API contracts."""

from __future__ import annotations

import pytest

from ctxledger.errors import ConfigurationError
from ctxledger.serialize import (
    SERIALIZER_NAMES,
    AnthropicMessagesSerializer,
    OpenAIChatSerializer,
    Serializer,
    Turn,
    get_serializer,
)
from ctxledger.serialize.images import OPENAI_TILE_RATES, openai_image_tokens
from ctxledger.tokens import TokenCounter


def test_known_names_give_their_serializers() -> None:
    """Each contract name gives a Serializer whose ``name`` is that contract."""
    assert SERIALIZER_NAMES == ("anthropic-messages", "openai-chat", "openai-responses")
    assert isinstance(get_serializer("openai-chat"), OpenAIChatSerializer)
    assert isinstance(get_serializer("anthropic-messages"), AnthropicMessagesSerializer)
    for name in SERIALIZER_NAMES:
        serializer = get_serializer(name)
        assert isinstance(serializer, Serializer)
        assert serializer.name == name


def test_unknown_name_lists_the_known_ones() -> None:
    """An unknown contract raises ConfigurationError naming it and every known contract."""
    with pytest.raises(ConfigurationError) as caught:
        get_serializer("openai-completions")
    message = str(caught.value)
    assert "openai-completions" in message
    assert all(name in message for name in SERIALIZER_NAMES)


def test_options_reach_the_constructor(counter: TokenCounter) -> None:
    """Keyword options configure the serializer, e.g. gpt-4o-mini image rates and the tool prompt size."""
    mini = get_serializer("openai-chat", image_rates=OPENAI_TILE_RATES["gpt-4o-mini"])
    turn = Turn(
        "u", "user", ({"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},)
    )
    assert mini.turn_tokens(turn, counter) - get_serializer("openai-chat").turn_tokens(turn, counter) == (
        openai_image_tokens(None, "low", OPENAI_TILE_RATES["gpt-4o-mini"]) - 85
    )
    claude3 = get_serializer("anthropic-messages", tool_system_prompt_tokens=530)
    tool = {"type": "function", "function": {"name": "f"}}
    assert (
        claude3.tools_tokens([tool], counter)
        - get_serializer("anthropic-messages").tools_tokens([tool], counter)
        == 530 - 346
    )
    with pytest.raises(TypeError):
        get_serializer("openai-chat", no_such_option=1)
