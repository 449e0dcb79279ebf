"""Which tool calls of an Agents SDK run failed: the one rule the input filter and the session record by.

The SDK hands the model a string in place of a failed tool's output and keeps no flag on the output item, so a
recorder learns of a failure only where the SDK formats it. :class:`ToolFailures` collects the provider call ids of
failed calls from every such place; a recorder records the output of a call in :attr:`ToolFailures.calls` as a
*failed* result:

* the run's ``RunConfig(tool_error_formatter=...)`` (:meth:`ToolFailures.tool_error_formatter`): a function tool
  that raised (``kind="tool_exception"``) or a call of a tool the agent lacks (``tool_not_found``); an
  ``approval_rejected`` call is a refusal, not a failure;
* a tool's own ``failure_error_function`` or ``timeout_error_function`` wrapped by
  :meth:`ToolFailures.failure_error_function` (such a tool bypasses the run's formatter);
* a function tool with ``timeout_seconds`` that timed out and was answered with the SDK's default timeout message
  (``timeout_behavior="error_as_result"``, no ``timeout_error_function``): the SDK calls no formatter then, so
  :class:`FailureHooks` (``RunHooks.on_tool_end``) compares the output with
  ``agents.tool.default_tool_timeout_error_message`` for that tool and its timeout.

:class:`FailureHooks` also refuses, before a tool runs (``on_tool_start``), a ``RunConfig`` whose
``tool_error_formatter`` is not this rule's, since its failures would be recorded as successes. Source: Agents SDK
``RunConfig.tool_error_formatter`` / ``ToolErrorFormatterArgs``, ``FunctionTool.timeout_seconds`` /
``timeout_behavior`` / ``timeout_error_function``, ``RunHooks.on_tool_start`` / ``on_tool_end``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agents import Agent, RunContextWrapper, RunHooks
from agents.run_config import ToolErrorFormatterArgs
from agents.tool import default_tool_error_function, default_tool_timeout_error_message
from agents.tool_context import ToolContext

from ctxledger.errors import ConfigurationError

FAILED_KINDS = ("tool_exception", "tool_not_found")
"""``ToolErrorFormatterArgs.kind`` values that are failed calls (an ``approval_rejected`` call is a refusal)."""


class ToolFailures:
    """The provider call ids of a run's failed tool calls (module docstring: where each is learnt)."""

    def __init__(self) -> None:
        self.calls: set[str] = set()
        """Provider call ids whose output is an error the SDK or a wrapped function formatted."""

    def tool_error_formatter(self, base: Callable[[ToolErrorFormatterArgs[Any]], Any] | None = None) -> Formatter:
        """A ``RunConfig(tool_error_formatter=...)`` that marks each call whose tool raised as failed.

        The message the model gets is ``base``'s (sync or async) when given, else the SDK's default.
        """
        return Formatter(self, base)

    def failure_error_function(self, base: Callable[[Any, Exception], Any] = default_tool_error_function) -> Any:
        """A tool's ``failure_error_function`` (or ``timeout_error_function``) that marks the call as failed.

        The message the model gets is ``base(context, error)`` (sync or async; default: the SDK's message).
        """

        async def failure(context: Any, error: Exception) -> Any:
            call_id = getattr(context, "tool_call_id", None)
            if isinstance(call_id, str):
                self.calls.add(call_id)
            message = base(context, error)
            return await message if inspect.isawaitable(message) else message

        return failure

    def check_run(self, context: RunContextWrapper[Any], tool: Any) -> None:
        """Refuse to run ``tool`` under a ``RunConfig`` whose formatter does not report to this rule.

        Raises:
            ConfigurationError: the run's ``tool_error_formatter`` is not :meth:`tool_error_formatter`'s (nor
                wraps it), so a tool that raises would be recorded as a successful result.
        """
        config = getattr(context, "run_config", None) if isinstance(context, ToolContext) else None
        if config is not None and not self._marks(config.tool_error_formatter):
            raise ConfigurationError(
                f"tool {getattr(tool, 'name', tool)!r} would run under a RunConfig without "
                "tool_error_formatter=<filter or session>.tool_error_formatter(), so a tool that raises would be "
                "recorded as a successful result; pass it (wrapping your own formatter: "
                "tool_error_formatter(base=yours))"
            )

    def check_output(self, context: RunContextWrapper[Any], tool: Any, output: Any) -> None:
        """Mark the call as failed when ``output`` is the SDK's default timeout message for ``tool``.

        Only a tool with ``timeout_seconds``, ``timeout_behavior="error_as_result"`` and no
        ``timeout_error_function`` gets that message from the SDK; a wrapped ``timeout_error_function`` marks
        the call itself (:meth:`failure_error_function`).
        """
        call_id = getattr(context, "tool_call_id", None)
        message = default_timeout_message(tool)
        if isinstance(call_id, str) and message is not None and output == message:
            self.calls.add(call_id)

    def _marks(self, formatter: Any) -> bool:
        while isinstance(formatter, Formatter):
            if formatter.failures is self:
                return True
            formatter = formatter.base
        return False


def default_timeout_message(tool: Any) -> str | None:
    """The message the SDK answers a timed-out call of ``tool`` with by default, or ``None`` when it has none.

    ``None`` for a tool without ``timeout_seconds``, with its own ``timeout_error_function``, or whose timeout
    raises (``timeout_behavior="raise_exception"``).
    """
    seconds = getattr(tool, "timeout_seconds", None)
    if seconds is None or getattr(tool, "timeout_error_function", None) is not None:
        return None
    if getattr(tool, "timeout_behavior", None) != "error_as_result":
        return None
    return default_tool_timeout_error_message(tool_name=tool.name, timeout_seconds=seconds)


class Formatter:
    """The ``tool_error_formatter`` of :meth:`ToolFailures.tool_error_formatter`."""

    def __init__(self, failures: ToolFailures, base: Callable[[ToolErrorFormatterArgs[Any]], Any] | None) -> None:
        self.failures = failures
        self.base = base

    async def __call__(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind in FAILED_KINDS:
            self.failures.calls.add(args.call_id)
        message = self.base(args) if self.base is not None else None
        return await message if inspect.isawaitable(message) else message


class FailureHooks(RunHooks[Any]):
    """Run hooks that apply :class:`ToolFailures`' rule as tools run.

    Raises:
        ConfigurationError: a tool is about to run under a ``RunConfig`` without the rule's
            ``tool_error_formatter`` (:meth:`ToolFailures.check_run`).
    """

    def __init__(self, failures: ToolFailures) -> None:
        self.failures = failures

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Any) -> None:
        """Refuse to run a tool whose failure would not be learnt (:meth:`ToolFailures.check_run`)."""
        self.failures.check_run(context, tool)

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Any, result: str) -> None:
        """Mark a call answered with the SDK's default timeout message as failed."""
        self.failures.check_output(context, tool, result)
