"""An Agents SDK tool that raises (the SDK hands the model an error string in its place) is recorded as a failed
result, whether the run's ``tool_error_formatter`` or the tool's own ``failure_error_function`` formats it; a run
whose failures the filter would not learn of is refused before the tool runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.exceptions import UserError
from agents.testing import ScriptedModel, assistant_message, function_call

from ctxledger import Ledger
from ctxledger.errors import ConfigurationError
from ctxledger.integrations.openai_agents import LedgerInputFilter
from ctxledger.records import ToolArtifact


def _weather(city: str) -> str:
    """Current weather of a city."""
    if city == "Atlantis":
        raise LookupError("no such city: Atlantis")
    return f"{city}: sunny"


def _own_message(context: Any, error: Exception) -> str:
    return f"weather failed: {error}"


def _run(ledger: Ledger, tool: Any, config: dict[str, Any], ledger_filter: LedgerInputFilter) -> ScriptedModel:
    calls = [function_call("weather", {"city": "Paris"}, call_id="call_ok")]
    calls.append(function_call("weather", {"city": "Atlantis"}, call_id="call_bad"))
    model = ScriptedModel([calls, [assistant_message("done")]])
    agent = Agent(name="w", instructions="You report the weather.", tools=[tool], model=model)
    run_config = RunConfig(call_model_input_filter=ledger_filter, tracing_disabled=True, **config)
    asyncio.run(Runner.run(agent, "Weather?", run_config=run_config, hooks=ledger_filter.hooks()))
    return model


def _statuses(ledger: Ledger, conversation_id: str) -> dict[str, str]:
    records = ledger.store.records("default", conversation_id)
    return {r.call_id: r.status.value for r in records if isinstance(r, ToolArtifact)}


@pytest.mark.parametrize("own_formatter", [False, True])
def test_a_tool_that_raises_is_recorded_as_failed(tmp_path, own_formatter: bool) -> None:
    async def yours(args: Any) -> str:
        return f"{args.tool_name} raised {type(args.error).__name__}"

    with Ledger.open(f"sqlite:///{tmp_path}/a.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="t", window_tokens=3000, output_tokens=300)
        formatter = ledger_filter.tool_error_formatter(yours if own_formatter else None)
        tool = function_tool(_weather, name_override="weather")
        model = _run(ledger, tool, {"tool_error_formatter": formatter}, ledger_filter)
        assert _statuses(ledger, "t") == {"call_ok": "succeeded", "call_bad": "failed"}
        sent = {i["call_id"]: i["output"] for i in model.calls[-1].input if i.get("type") == "function_call_output"}
        expected = "weather raised LookupError" if own_formatter else "An error occurred while running the tool."
        assert "Paris: sunny" in sent["call_ok"] and expected in sent["call_bad"]  # the model still gets the message
        bad = next(r for r in ledger.store.records("default", "t") if getattr(r, "call_id", None) == "call_bad")
        assert ledger.explain(ledger_filter.assemblies[-1].id, bad.id)["status"] == "included"


def test_a_tools_own_failure_function_is_wrapped(tmp_path) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/b.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="t", window_tokens=3000, output_tokens=300)
        failure = ledger_filter.failure_error_function(_own_message)
        tool = function_tool(_weather, name_override="weather", failure_error_function=failure)
        config = {"tool_error_formatter": ledger_filter.tool_error_formatter()}
        model = _run(ledger, tool, config, ledger_filter)
        assert _statuses(ledger, "t") == {"call_ok": "succeeded", "call_bad": "failed"}
        assert "weather failed: no such city: Atlantis" in str(model.calls[-1].input)


def test_a_run_without_the_formatter_is_refused_before_a_tool_runs(tmp_path) -> None:
    ran: list[str] = []

    def weather(city: str) -> str:
        """Current weather of a city."""
        ran.append(city)
        return city

    with Ledger.open(f"sqlite:///{tmp_path}/c.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="t", window_tokens=3000, output_tokens=300)
        with pytest.raises(UserError, match="tool_error_formatter") as refused:  # the SDK wraps a hook's error
            _run(ledger, function_tool(weather), {}, ledger_filter)
        assert isinstance(refused.value.__cause__, ConfigurationError)
        assert ran == []
