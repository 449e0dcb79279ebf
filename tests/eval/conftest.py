"""Fixtures of the evaluation tests: an exact cl100k counter and small hand-made items."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxledger.eval.base import EvalItem
from ctxledger.serialize.base import CallView
from ctxledger.tokens import TokenCounter, get_counter


class FixedCounter:
    """One token per whitespace-separated word: hand-computable costs for metric tests."""

    id = "test/words"
    is_estimate = True

    def count(self, text: str) -> int:
        """Number of whitespace-separated words."""
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``."""
        return [self.count(t) for t in texts]


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """The exact cl100k_base counter the issue asks for (``get_counter("cl100k_base")``)."""
    return get_counter("cl100k_base")


@pytest.fixture
def words() -> FixedCounter:
    """A word counter for hand-computed budgets."""
    return FixedCounter()


def item(
    id: str,
    role: str,
    seq: int,
    tokens: int = 10,
    *,
    text: str = "",
    call_ids: Sequence[str] = (),
    answers: str | None = None,
    is_error: bool = False,
) -> EvalItem:
    """A hand-made item; ``call_ids`` makes an assistant tool call, ``answers`` a tool result."""
    calls = tuple(CallView(call_id=c, name="tool", arguments="{}") for c in call_ids)
    return EvalItem(
        id=id,
        role=role,  # type: ignore[arg-type]
        text=text or f"text of {id}",
        seq=seq,
        tokens=tokens,
        tool_call_id=answers,
        tool_calls=calls,
        is_error=is_error,
    )


@pytest.fixture
def make_item():
    """The hand-made item factory :func:`item`."""
    return item


@pytest.fixture
def tool_history() -> list[EvalItem]:
    """system, user, assistant(call a, call b), tool(a), tool(b), assistant, user: 7 items of 10 tokens."""
    return [
        item("s", "system", 0),
        item("u1", "user", 1),
        item("a1", "assistant", 2, call_ids=("a", "b")),
        item("ta", "tool", 3, answers="a"),
        item("tb", "tool", 4, answers="b", is_error=True),
        item("a2", "assistant", 5),
        item("u2", "user", 6),
    ]
