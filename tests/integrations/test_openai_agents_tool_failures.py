"""One rule for failed Agents SDK tool calls, whichever records the run (the input filter or the session).

A call is failed when its tool raised (the run's ``tool_error_formatter``), when its tool's own
``timeout_error_function`` wrapped by ``failure_error_function`` answered it, or when it timed out and the SDK
answered with its default timeout message (no formatter is called then; the hooks see it). The output item the
recorder receives is only the message, so without the rule each of these was recorded as a success.

The real ``agents`` runner drives a scripted model; each call's fate (answers, raises, hangs past the tool's
timeout) is drawn by hypothesis. A hanging tool waits on an event nobody sets, so its timeout always fires; the
timeout is long enough that a tool answering at once is never cut, and no test reads a clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.exceptions import UserError
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool import default_tool_timeout_error_message
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import ConfigurationError
from ctxledger.integrations.openai_agents import LedgerInputFilter, LedgerSession
from ctxledger.records import ToolArtifact

TIMEOUT = 0.25
FATES = ("ok", "raises", "hangs")


def _lookup(own_timeout: Any) -> Any:
    """The ``lookup`` tool: answers, raises or hangs past its timeout, by the city's name."""

    async def lookup(city: str) -> str:
        """Look a city up."""
        if city.startswith("raises"):
            raise LookupError(f"no such city: {city}")
        if city.startswith("hangs"):
            await asyncio.Event().wait()
        return f"{city}: found"

    options: dict[str, Any] = {"timeout": TIMEOUT}
    if own_timeout is not None:
        options["timeout_error_function"] = own_timeout
    return function_tool(lookup, **options)


def _run(recorder: str, fates: list[str], *, own_timeout: bool = False) -> tuple[dict[str, str], ScriptedModel]:
    """Run one agent turn calling ``lookup`` once per fate; the recorded status per call id, and the model."""
    calls = [function_call("lookup", {"city": f"{fate}{k}"}, call_id=f"call_{k}") for k, fate in enumerate(fates)]
    model = ScriptedModel([calls, [assistant_message("done")]])
    with Ledger.open("memory://") as ledger:
        if recorder == "filter":
            owner: Any = LedgerInputFilter(ledger, conversation_id="c", window_tokens=8000, output_tokens=300)
            options: dict[str, Any] = {"run_config": RunConfig(call_model_input_filter=owner, tracing_disabled=True)}
        else:
            owner = LedgerSession(ledger, "c")
            options = {"run_config": RunConfig(tracing_disabled=True), "session": owner}
        options["run_config"].tool_error_formatter = owner.tool_error_formatter()
        tool = _lookup(owner.failure_error_function(_timed_out) if own_timeout else None)
        agent = Agent(name="a", instructions="Look cities up.", tools=[tool], model=model)
        asyncio.run(Runner.run(agent, "Look them up.", hooks=owner.hooks(), **options))
        records = ledger.store.records("default", "c")
        return {r.call_id: r.status.value for r in records if isinstance(r, ToolArtifact)}, model


def _timed_out(context: Any, error: Exception) -> str:
    return f"gave up: {error}"


def _expected(fates: list[str]) -> dict[str, str]:
    return {f"call_{k}": "succeeded" if fate == "ok" else "failed" for k, fate in enumerate(fates)}


@pytest.mark.parametrize("recorder", ["filter", "session"])
@settings(max_examples=8, deadline=None)
@given(fates=st.lists(st.sampled_from(FATES), min_size=1, max_size=4))
@example(fates=["ok", "raises", "hangs"])
def test_a_call_that_raises_or_times_out_is_recorded_as_failed(recorder: str, fates: list[str]) -> None:
    statuses, model = _run(recorder, fates)
    assert statuses == _expected(fates)
    sent = {i["call_id"]: i["output"] for i in model.calls[-1].input if i.get("type") == "function_call_output"}
    timeout = default_tool_timeout_error_message(tool_name="lookup", timeout_seconds=TIMEOUT)
    for k, fate in enumerate(fates):  # the model still gets the SDK's messages
        assert (timeout in str(sent[f"call_{k}"])) == (fate == "hangs")


@pytest.mark.parametrize("recorder", ["filter", "session"])
@settings(max_examples=4, deadline=None)
@given(fates=st.lists(st.sampled_from(FATES), min_size=1, max_size=3))
@example(fates=["ok", "hangs"])
def test_a_tools_own_timeout_function_wrapped_marks_the_call(recorder: str, fates: list[str]) -> None:
    statuses, model = _run(recorder, fates, own_timeout=True)
    assert statuses == _expected(fates)
    assert ("gave up: " in str(model.calls[-1].input)) == ("hangs" in fates)


def test_a_session_run_without_its_formatter_is_refused_before_a_tool_runs() -> None:
    ran: list[str] = []

    async def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return city

    model = ScriptedModel([[function_call("lookup", {"city": "Rome"}, call_id="c1")], [assistant_message("ok")]])
    agent = Agent(name="a", instructions="Look cities up.", tools=[function_tool(lookup)], model=model)
    with Ledger.open("memory://") as ledger:
        session = LedgerSession(ledger, "s")
        with pytest.raises(UserError, match="tool_error_formatter") as refused:
            asyncio.run(Runner.run(agent, "Rome?", session=session, hooks=session.hooks()))
        assert isinstance(refused.value.__cause__, ConfigurationError) and ran == []
