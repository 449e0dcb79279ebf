"""Anthropic prompt-caching breakpoints (``cache_control``) on the stable part of a Messages payload.

Rules followed, from Anthropic's *Prompt caching* guide (docs.anthropic.com/en/docs/build-with-claude/
prompt-caching):

* a ``cache_control: {"type": "ephemeral"}`` marker on a content block caches the prompt up to and including
  that block (tools, then system, then messages, in that order); at most **4** breakpoints per request;
* markers may sit on text, image, ``tool_use`` and ``tool_result`` blocks of messages, on system text blocks and
  on tool definitions — not on ``thinking`` / ``redacted_thinking`` blocks;
* a prefix shorter than the model's minimum cacheable length (1,024 tokens for Claude Sonnet and Opus 4 models,
  2,048 for Haiku) is not cached: a marker there is wasted, so none is placed;
* on a later request the cache is looked up at each breakpoint and up to about 20 blocks before it, so a marker
  at the end of the part shared with the previous request finds that request's entry even when many blocks
  were added after it.

* a cache entry lives 5 minutes after its last use, and is written only where a breakpoint sits.

:func:`with_breakpoints` therefore marks the end of the instructions (the last ``system`` block, else the last
tool: the prefix every call of the conversation starts with, refreshed by every call, so that a call whose
history part changed early still reads it), the last block of the last message shared with the previous
assembly (what was cached last time) and the last block of the payload (what the next call will find), each
only when its prefix reaches the minimum: three of the four allowed. The payload is copied where it changes;
token counts do not change (a ``system`` string becomes one text block carrying the marker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.errors import ProviderContractError

MAX_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` markers per request."""

MIN_CACHEABLE_TOKENS = 1024
"""The shortest prefix Claude Sonnet and Opus 4 models cache (tokens)."""

EPHEMERAL = {"type": "ephemeral"}
_NOT_MARKABLE = frozenset({"thinking", "redacted_thinking"})


def _marked(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of ``message`` with a marker on its last markable block, or ``None`` when it has none."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]}
    if not isinstance(content, list):
        return None
    for i in range(len(content) - 1, -1, -1):
        block = content[i]
        if isinstance(block, Mapping) and block.get("type") not in _NOT_MARKABLE:
            blocks = list(content)
            blocks[i] = {**block, "cache_control": dict(EPHEMERAL)}
            return {**message, "content": blocks}
    return None


def _with_head_marker(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with a marker on its last ``system`` block, else on its last tool (unchanged without either)."""
    system = payload.get("system")
    if isinstance(system, str) and system:
        return {**payload, "system": [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]}
    if isinstance(system, list) and system and isinstance(system[-1], Mapping):
        return {**payload, "system": [*system[:-1], {**system[-1], "cache_control": dict(EPHEMERAL)}]}
    tools = payload.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[-1], Mapping):
        return {**payload, "tools": [*tools[:-1], {**tools[-1], "cache_control": dict(EPHEMERAL)}]}
    return payload


def with_breakpoints(
    payload: Mapping[str, Any],
    *,
    stable_messages: int,
    stable_tokens: int,
    input_tokens: int,
    head_tokens: int = 0,
    min_tokens: int = MIN_CACHEABLE_TOKENS,
) -> dict[str, Any]:
    """``payload`` with ``cache_control`` on the instructions, the shared part's last message and the last message.

    Args:
        payload: an Anthropic Messages payload (``build``'s output).
        stable_messages: how many leading messages equal the previous assembly's.
        stable_tokens: tokens of the shared prefix (the stable marker is placed only when ``>= min_tokens``).
        input_tokens: tokens of the whole payload (the final marker is placed only when ``>= min_tokens``).
        head_tokens: tokens of the tools and ``system`` together (the instructions marker is placed only when
            ``>= min_tokens`` and messages follow).
        min_tokens: the model's minimum cacheable prefix, in tokens.

    Returns:
        A copy of ``payload`` with at most three ``{"type": "ephemeral"}`` markers (Anthropic allows four per
        request; a prefix shorter than the model's minimum is not cached, so it gets none). Source: Anthropic's
        prompt-caching documentation, as summarised in this module's docstring.
    """
    messages = list(payload.get("messages") or ())
    out = dict(payload)
    if messages and head_tokens >= min_tokens:
        out = _with_head_marker(out)
    positions = []
    if 0 < stable_messages < len(messages) and stable_tokens >= min_tokens:
        positions.append(stable_messages - 1)
    if messages and input_tokens >= min_tokens:
        positions.append(len(messages) - 1)
    if not positions:
        return out
    for index in positions:
        marked = _marked(messages[index])
        if marked is not None:
            messages[index] = marked
    return {**out, "messages": messages}


def breakpoints(payload: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Where ``payload`` carries ``cache_control``: ``("tools", i)``, ``("system", i)`` or ``("messages", i)``."""
    found: list[tuple[str, int]] = []
    for i, tool in enumerate(payload.get("tools") or ()):
        if isinstance(tool, Mapping) and "cache_control" in tool:
            found.append(("tools", i))
    system = payload.get("system")
    if isinstance(system, list):
        found += [("system", i) for i, b in enumerate(system) if isinstance(b, Mapping) and "cache_control" in b]
    for i, message in enumerate(payload.get("messages") or ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            found += [("messages", i) for b in content if isinstance(b, Mapping) and "cache_control" in b]
    return found


def check_breakpoints(payload: Mapping[str, Any]) -> None:
    """At most :data:`MAX_BREAKPOINTS` markers, each ``{"type": "ephemeral"}`` (optionally a ``ttl``), none on thinking.

    Raises:
        ProviderContractError: ``rule`` ``too_many_cache_breakpoints``, ``bad_cache_control`` or
            ``cache_control_on_thinking``.
    """
    count = 0
    blocks: list[Any] = list(payload.get("tools") or ())
    system = payload.get("system")
    if isinstance(system, list):
        blocks += system
    for message in payload.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            blocks += content
    for block in blocks:
        if not isinstance(block, Mapping) or "cache_control" not in block:
            continue
        count += 1
        control = block["cache_control"]
        if not isinstance(control, Mapping) or control.get("type") != "ephemeral" or set(control) - {"type", "ttl"}:
            raise ProviderContractError(f"cache_control must be {{'type': 'ephemeral'}}, got {control!r}",
                                        rule="bad_cache_control")  # fmt: skip
        if block.get("type") in _NOT_MARKABLE:
            raise ProviderContractError("thinking blocks cannot carry cache_control", rule="cache_control_on_thinking")
    if count > MAX_BREAKPOINTS:
        raise ProviderContractError(
            f"{count} cache_control breakpoints; Anthropic allows at most {MAX_BREAKPOINTS}",
            rule="too_many_cache_breakpoints",
        )
