"""Definitions for the tools a request's history calls when no schema of theirs is sent.

Anthropic's Messages API refuses a request whose messages hold ``tool_use`` or ``tool_result`` blocks and
that defines no tools, with the 400 error "Requests which include tool_use or tool_result blocks must define
tools." (quoted in anthropics/anthropic-sdk-python issue #494; inspect_ai PR #176 sends the tool definitions
on every request for this reason). A client tool definition is, per Anthropic's *Define tools* guide
(platform.claude.com/docs/en/agents-and-tools/tool-use/define-tools):

* ``name``: must match ``^[a-zA-Z0-9_-]{1,64}$``;
* ``description``: a plaintext description of what the tool does;
* ``input_schema``: "a JSON Schema object defining the expected parameters for the tool" (the Messages API
  reference requires its ``type`` to be ``"object"``).

Recorded histories often hold calls without the schemas of the tools called (tau-bench's trajectories record
none), a request may name its own tools in place of the recorded ones, and a working-set contract may withhold
a tool an earlier turn called. So for Anthropic every tool a call of the payload names gets a definition: its
schema when one is sent, else a minimal one (:func:`minimal_definition`: the name, ``{"type": "object"}``, and
a description saying why its schema is missing). The definitions are in OpenAI ``tools`` form, like every
schema the serializers take, so they are renamed, costed and converted like the others.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxledger.serialize.base import Turn

SCHEMA_NOT_RECORDED = "schema_not_recorded"
"""Why a tool got a minimal definition: no schema of it is known to the request."""

WITHHELD = "withheld"
"""Why a tool got a minimal definition: the working-set contract withheld its schema from this call."""

DESCRIPTIONS: Mapping[str, str] = {
    SCHEMA_NOT_RECORDED: (
        "A tool called earlier in this conversation. Its input schema was not recorded, so its parameters are unknown."
    ),
    WITHHELD: (
        "A tool called earlier in this conversation. It is not available in this call (withheld by the "
        "working-set contract); do not call it."
    ),
}
"""The description each minimal definition carries, by reason."""


def called_tool_names(turns: Sequence[Turn]) -> list[str]:
    """The distinct names of the tools the turns' calls name, sorted (as recorded, before any renaming)."""
    return sorted({c.name for t in turns for c in t.tool_calls})


def defined_tool_names(tools: Sequence[Mapping[str, Any]]) -> set[str]:
    """The function names of ``tools`` (OpenAI form); malformed entries name nothing."""
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def minimal_definition(name: str, reason: str = SCHEMA_NOT_RECORDED) -> dict[str, Any]:
    """A tool definition in OpenAI ``tools`` form for a tool called without a schema.

    It holds ``name``, the :data:`DESCRIPTIONS` text of ``reason`` and the parameters ``{"type": "object"}``.

    Raises:
        KeyError: ``reason`` is not one of :data:`DESCRIPTIONS`.
    """
    return {
        "type": "function",
        "function": {"name": name, "description": DESCRIPTIONS[reason], "parameters": {"type": "object"}},
    }


def is_minimal_definition(tool: Mapping[str, Any]) -> bool:
    """Whether ``tool`` (OpenAI form) is a :func:`minimal_definition`."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return False
    return any(tool == minimal_definition(function["name"], r) for r in DESCRIPTIONS)


def undeclared_tools(
    turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]], *, withheld: Collection[str] = ()
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Minimal definitions for the tools the turns call and ``tools`` does not define.

    Args:
        turns: the turns whose calls may reach the payload.
        tools: the schemas sent (OpenAI form).
        withheld: names of tools the working-set contract withheld (their definition says so).

    Returns:
        ``(definitions, reasons)``: one :func:`minimal_definition` per undefined name, in name order, and
        name → :data:`SCHEMA_NOT_RECORDED` or :data:`WITHHELD`. Both are empty when every called tool is defined.
    """
    defined = defined_tool_names(tools)
    reasons = {
        n: WITHHELD if n in withheld else SCHEMA_NOT_RECORDED for n in called_tool_names(turns) if n not in defined
    }
    return [minimal_definition(n, r) for n, r in reasons.items()], reasons
