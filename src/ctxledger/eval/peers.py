"""Peer libraries as selectors, configured as their documentation shows.

* ``langchain-trim-exact`` / ``langchain-trim-approx``: langchain-core ``trim_messages`` with the
  configuration its docs recommend for chat history (``strategy="last"``, ``include_system=True``,
  ``start_on="human"``, ``allow_partial=False``), once with an exact counter (the same per-message costs
  the harness checks against) and once with langchain's ``count_tokens_approximately`` (4 characters a
  token + 3 a message).
* ``llamaindex-memory``: llama-index-core ``Memory.from_defaults(token_limit=…)`` as an agent uses it:
  system instructions are passed outside memory (as ``FunctionAgent(system_prompt=…)`` does), every
  other turn and then the current user turn are ``put`` into memory, and ``get()`` returns what is
  sent. Its token limit is the item budget; its default ``chat_history_token_ratio`` (0.7) keeps 30% for
  memory blocks, which are not configured here; its ``tokenizer_fn`` is the exact counter.

The libraries are optional (``pip install 'ctxledger[bench]'``) and imported only when a peer is built.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from ctxledger.errors import ConfigurationError
from ctxledger.eval.base import EvalItem, Selection, SelectionTask
from ctxledger.tokens import TokenCounter

QUERY_ID = "__query__"
"""Message id given to the current user turn inside a peer; never an included item id."""

_HINT = "install the benchmark extra: pip install 'ctxledger[bench]'"


def _require(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise ConfigurationError(f"peer selector needs {module!r}: {_HINT}") from exc


def _arguments(text: str) -> dict[str, Any]:
    """Tool-call arguments as the dict langchain wants; non-object JSON is wrapped as ``{"input": …}``."""
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


class LangchainTrim:
    """langchain-core ``trim_messages`` (see the module docstring for its configuration).

    Attributes:
        name: ``langchain-trim-exact`` or ``langchain-trim-approx``.
        approximate: whether langchain's approximate counter is used instead of the exact costs.
    """

    def __init__(self, *, approximate: bool) -> None:
        """Import langchain-core. Raises ConfigurationError when it is not installed."""
        self._lc = _require("langchain_core.messages")
        self._utils = _require("langchain_core.messages.utils")
        self.approximate = approximate
        self.name = "langchain-trim-approx" if approximate else "langchain-trim-exact"
        self._cache: tuple[Sequence[EvalItem], list[Any]] | None = None

    def _message(self, item: EvalItem) -> Any:
        lc = self._lc
        if item.role in ("system", "developer"):
            return lc.SystemMessage(content=item.text, id=item.id)
        if item.role == "user":
            return lc.HumanMessage(content=item.text, id=item.id)
        if item.role == "tool":
            return lc.ToolMessage(content=item.text, tool_call_id=item.tool_call_id or "", id=item.id)
        calls = [
            {"name": c.name, "args": _arguments(c.arguments), "id": c.call_id, "type": "tool_call"}
            for c in item.tool_calls
        ]
        return lc.AIMessage(content=item.text, tool_calls=calls, id=item.id)

    def _messages(self, items: Sequence[EvalItem]) -> list[Any]:
        if self._cache is None or self._cache[0] is not items:
            self._cache = (items, [self._message(item) for item in items])
        return self._cache[1]

    def _counter(self, task: SelectionTask) -> Callable[[list[Any]], int]:
        if self.approximate:
            return self._utils.count_tokens_approximately  # type: ignore[no-any-return]
        cost = {item.id: item.tokens for item in task.items} | {QUERY_ID: task.query_tokens}
        return lambda messages: sum(cost[m.id] for m in messages)

    def select(self, task: SelectionTask) -> Selection:
        """Trim the history plus the current user turn to ``budget − base`` tokens."""
        started = time.perf_counter()
        messages = list(self._messages(task.items))
        if task.query_tokens:
            messages.append(self._lc.HumanMessage(content=task.query, id=QUERY_ID))
        kept = self._utils.trim_messages(
            messages,
            max_tokens=task.budget_tokens - task.base_tokens,
            token_counter=self._counter(task),
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        )
        ids = [m.id for m in kept if m.id != QUERY_ID]
        cost = {item.id: item.tokens for item in task.items}
        payload = task.base_tokens + task.query_tokens + sum(cost[i] for i in ids)
        return Selection(included_ids=ids, payload_tokens=payload, latency_s=time.perf_counter() - started)


class LlamaIndexMemory:
    """llama-index-core ``Memory`` with a token limit (see the module docstring for its configuration)."""

    name = "llamaindex-memory"

    def __init__(self, counter: TokenCounter) -> None:
        """Import llama-index-core; ``counter`` is its tokenizer. Raises ConfigurationError when missing."""
        self._memory = _require("llama_index.core.memory")
        self._types = _require("llama_index.core.base.llms.types")
        self._engine = _require("sqlalchemy.ext.asyncio").create_async_engine
        self._counter = counter

    def _tokens(self, text: str) -> range:
        """A sequence whose length is the token count: what llama-index's ``tokenizer_fn`` must return."""
        return range(self._counter.count(text))

    def _message(self, item: EvalItem) -> Any:
        kwargs: dict[str, Any] = {}
        if item.tool_calls:
            kwargs["tool_calls"] = [
                {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in item.tool_calls
            ]
        if item.tool_call_id:
            kwargs["tool_call_id"] = item.tool_call_id
        return self._types.ChatMessage(role=item.role, content=item.text, additional_kwargs=kwargs)

    def _remember(self, messages: list[Any], limit: int) -> list[Any]:
        """Put ``messages`` into a fresh Memory on the default in-memory SQLite store; return ``get()``.

        The store's engine is created here (the URI Memory uses by default) so it can be disposed after. Memory's
        synchronous methods run their coroutines on the thread's event loop, creating one if none is set; the
        loop set here is closed afterwards, so none is left open.
        """
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        engine = self._engine("sqlite+aiosqlite:///:memory:")
        try:
            memory = self._memory.Memory.from_defaults(
                token_limit=limit, tokenizer_fn=self._tokens, async_engine=engine
            )
            memory.put_messages(messages)
            return list(memory.get())
        finally:
            loop.run_until_complete(engine.dispose())
            asyncio.set_event_loop(None)
            loop.close()

    def select(self, task: SelectionTask) -> Selection:
        """Put the non-system turns and the current user turn into a fresh ``Memory``; send what ``get()`` returns."""
        started = time.perf_counter()
        system = [i for i in task.items if i.role in ("system", "developer")]
        history = [i for i in task.items if i.role not in ("system", "developer")]
        limit = max(1, task.item_budget - sum(i.tokens for i in system))
        messages = [self._message(i) for i in history]
        if task.query_tokens:
            messages.append(self._types.ChatMessage(role="user", content=task.query))
        active = self._remember(messages, limit)
        if [m.content for m in active] != [m.content for m in messages[len(messages) - len(active) :]]:
            raise AssertionError("llama-index Memory returned messages that are not a suffix of those put")
        kept = history[len(history) - max(0, len(active) - (1 if task.query_tokens else 0)) :]
        ids = [i.id for i in system] + [i.id for i in kept]
        payload = task.base_tokens + task.query_tokens + sum(i.tokens for i in system + kept)
        return Selection(included_ids=ids, payload_tokens=payload, latency_s=time.perf_counter() - started)


PEER_NAMES = ("langchain-trim-exact", "langchain-trim-approx", "llamaindex-memory")
"""The peers :func:`make_peer` builds, in report order."""


def make_peer(name: str, counter: TokenCounter) -> LangchainTrim | LlamaIndexMemory:
    """Build a peer selector by name.

    Raises:
        ConfigurationError: unknown name, or the peer's library is not installed (with the install hint).
    """
    if name == "langchain-trim-exact":
        return LangchainTrim(approximate=False)
    if name == "langchain-trim-approx":
        return LangchainTrim(approximate=True)
    if name == "llamaindex-memory":
        return LlamaIndexMemory(counter)
    raise ConfigurationError(f"unknown peer {name!r}; known: {list(PEER_NAMES)}")
