"""Same-run comparisons on the same messages: what an agent does without ctxledger.

* **newest-fit**: the plain sliding window. Leading system messages are pinned, then messages are
  taken newest first while they fit ``B_input``; the walk stops at the first one that does not; tool
  results left without their call at the front are dropped so the request stays valid. Costs are
  exact tiktoken (o200k_base for gpt-4o) counts with the OpenAI cookbook framing (3 tokens a message +
  role + content, 1 + name, 5 + name + arguments per tool call, 3 for reply priming). Two variants:

  - ``newest-fit (counting)``: counts each message with tiktoken as it walks (nothing cached);
  - ``newest-fit (cached counts)``: walks a list of per-message counts computed beforehand.

* **trim_messages**: langchain-core ``trim_messages(strategy="last", include_system=True,
  start_on="human", allow_partial=False)`` with the exact tiktoken ``token_counter`` of langchain's
  trim_messages how-to ("Approximately reproduce … How_to_count_tokens_with_tiktoken"), extended to
  count tool calls. langchain calls the counter on whole message lists (a binary search over
  prefixes), so it re-tokenizes the history on every call. The messages are converted to langchain
  objects once, outside the timing. Needs the ``bench`` extra (``pip install 'ctxledger[bench]'``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.stats import Timing, summarize, time_ms
from ctxledger.errors import ConfigurationError
from ctxledger.tokens import get_counter

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOOL_CALL_TOKENS = 5
REPLY_PRIMING = 3

Count = Callable[[str], int]


def tiktoken_count(encoding: str = "o200k_base") -> Count:
    """Exact tiktoken count of ordinary text (tiktoken's ``Encoding``, built offline by ctxledger)."""
    enc = get_counter(f"tiktoken/{encoding}").encoding  # type: ignore[attr-defined]
    return lambda s: len(enc.encode_ordinary(s))


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))


def message_tokens(message: Mapping[str, Any], count: Count) -> int:
    """Tokens one OpenAI-format message adds to a request (cookbook framing, see the module docstring)."""
    tokens = TOKENS_PER_MESSAGE + count(str(message["role"])) + count(_text(message.get("content")))
    if message.get("name"):
        tokens += TOKENS_PER_NAME + count(str(message["name"]))
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        tokens += TOOL_CALL_TOKENS + count(fn["name"]) + count(fn["arguments"])
    return tokens


def newest_fit(messages: Sequence[Mapping[str, Any]], budget: int, cost: Callable[[int], int]) -> list[int]:
    """Indices of the messages a plain newest-first window keeps (``cost(i)`` = tokens of message ``i``)."""
    pinned = 0
    used = REPLY_PRIMING
    while pinned < len(messages) and messages[pinned]["role"] in ("system", "developer"):
        used += cost(pinned)
        pinned += 1
    kept: list[int] = []
    for i in range(len(messages) - 1, pinned - 1, -1):
        tokens = cost(i)
        if used + tokens > budget:
            break
        kept.append(i)
        used += tokens
    kept.reverse()
    while kept and messages[kept[0]]["role"] == "tool":
        kept.pop(0)
    return list(range(pinned)) + kept


def time_newest_fit(
    messages: Sequence[Mapping[str, Any]], budget: int, count: Count, repeats: int
) -> dict[str, Timing | int]:
    """Time both newest-fit variants; also return how many messages and tokens they keep."""
    counting = [
        time_ms(lambda: newest_fit(messages, budget, lambda i: message_tokens(messages[i], count)))
        for _ in range(repeats)
    ]
    costs = [message_tokens(m, count) for m in messages]
    cached = [time_ms(lambda: newest_fit(messages, budget, costs.__getitem__)) for _ in range(max(repeats, 20))]
    kept = counting[-1][1]
    return {
        "counting": summarize([ms for ms, _ in counting]),
        "cached": summarize([ms for ms, _ in cached]),
        "kept_messages": len(kept),
        "kept_tokens": REPLY_PRIMING + sum(costs[i] for i in kept),
        "replay_tokens": REPLY_PRIMING + sum(costs),
    }


def langchain_available() -> bool:
    """Whether langchain-core can be imported."""
    try:
        import langchain_core.messages  # noqa: F401
    except ImportError:
        return False
    return True


def _lc_role(message: Any) -> str:
    roles = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
    return roles.get(message.type, message.type)


def langchain_counter(count: Count) -> Callable[[list[Any]], int]:
    """langchain's documented tiktoken ``token_counter`` for ``trim_messages``, plus tool calls."""

    def tiktoken_counter(messages: list[Any]) -> int:
        tokens = REPLY_PRIMING
        for msg in messages:
            tokens += TOKENS_PER_MESSAGE + count(_lc_role(msg)) + count(_text(msg.content))
            if msg.name:
                tokens += TOKENS_PER_NAME + count(msg.name)
            for call in getattr(msg, "tool_calls", None) or ():
                tokens += TOOL_CALL_TOKENS + count(call["name"]) + count(json.dumps(call["args"]))
        return tokens

    return tiktoken_counter


def time_trim_messages(
    messages: Sequence[Mapping[str, Any]], budget: int, count: Count, repeats: int
) -> dict[str, Timing | int]:
    """Time langchain-core ``trim_messages`` with the exact tiktoken counter on ``messages``.

    Raises:
        ConfigurationError: langchain-core is not installed (install the ``bench`` extra).
    """
    try:
        from langchain_core.messages import convert_to_messages, trim_messages
    except ImportError as exc:
        raise ConfigurationError("trim_messages needs langchain-core: pip install 'ctxledger[bench]'") from exc
    lc_messages = convert_to_messages([dict(m) for m in messages])
    counter = langchain_counter(count)

    def run() -> list[Any]:
        return trim_messages(
            lc_messages,
            max_tokens=budget,
            token_counter=counter,
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        )

    samples = [time_ms(run) for _ in range(repeats)]
    kept = samples[-1][1]
    return {"timing": summarize([ms for ms, _ in samples]), "kept_messages": len(kept), "kept_tokens": counter(kept)}
