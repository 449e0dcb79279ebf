"""Provider serializers: neutral turns in, provider request payloads out.

``get_serializer(name)`` returns the serializer of one API contract; every serializer implements
:class:`~ctxledger.serialize.base.Serializer` (build, validate, count, and the additive per-turn,
tool-schema and base token costs the budget relies on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ctxledger.errors import ConfigurationError, quoted
from ctxledger.serialize.anthropic_messages import AnthropicMessagesSerializer
from ctxledger.serialize.base import CallView, Serializer, Turn
from ctxledger.serialize.openai_chat import OpenAIChatSerializer
from ctxledger.serialize.openai_responses import OpenAIResponsesSerializer

_SERIALIZERS: Mapping[str, Callable[..., Serializer]] = {
    OpenAIChatSerializer.name: OpenAIChatSerializer,
    AnthropicMessagesSerializer.name: AnthropicMessagesSerializer,
    OpenAIResponsesSerializer.name: OpenAIResponsesSerializer,
}

SERIALIZER_NAMES: tuple[str, ...] = tuple(sorted(_SERIALIZERS))
"""The API contracts a serializer exists for: ``anthropic-messages``, ``openai-chat``, ``openai-responses``."""


DEFAULT_MODELS: dict[str, str] = {
    "openai-chat": "gpt-4o",
    "openai-responses": "gpt-4o",
    "anthropic-messages": "claude-sonnet-4-5",
}
"""The model a payload names when the request names none, per API contract (its tokenizer counts the payload)."""


def default_model(api: str) -> str:
    """The model for ``api`` when a request names none (:data:`DEFAULT_MODELS`; ``gpt-4o`` for an unknown one)."""
    return DEFAULT_MODELS.get(api, "gpt-4o")


def get_serializer(name: str, **options: Any) -> Serializer:
    """Return the serializer for the API contract ``name``.

    Args:
        name: ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic-messages"``.
        **options: keyword options of that serializer's constructor (e.g. ``image_rates`` for
            ``openai-chat``).

    Raises:
        ConfigurationError: ``name`` is not a known contract (the message lists the known ones).
    """
    try:
        factory = _SERIALIZERS[name]
    except KeyError:
        raise ConfigurationError(f"unknown serializer {quoted(name)}; known: {', '.join(SERIALIZER_NAMES)}") from None
    return factory(**options)


__all__ = [
    "DEFAULT_MODELS",
    "SERIALIZER_NAMES",
    "AnthropicMessagesSerializer",
    "CallView",
    "OpenAIChatSerializer",
    "OpenAIResponsesSerializer",
    "Serializer",
    "Turn",
    "default_model",
    "get_serializer",
]
