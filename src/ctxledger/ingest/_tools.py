"""Tool schemas of a source → one ``SkillState`` record in OpenAI ``tools`` form.

Accepted entries: OpenAI tools (``{"type": "function", "function": {"name", …}}``), legacy OpenAI
``functions`` / ToolBench function schemas (``{"name", "description", "parameters"}``, wrapped as
``{"type": "function", "function": …}``). Keys that are not part of the provider schema (a case's
``tokens``) are kept out of the schema, under ``meta["tool_extras"][name]``, so they never reach a
payload. Anthropic tools are converted by :mod:`ctxledger.ingest.anthropic_messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxledger.ingest._builder import ConversationBuilder
from ctxledger.ingest._fields import Loc, as_object, json_type, require
from ctxledger.records import SkillState, Trust

_OPENAI_TOOL_KEYS = frozenset({"type", "function"})


@dataclass(frozen=True, slots=True)
class ToolSet:
    """Normalized tool schemas (OpenAI form), their names, and store-only extras per tool name."""

    schemas: tuple[Mapping[str, Any], ...]
    extras: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in schema order."""
        return tuple(schema["function"]["name"] for schema in self.schemas)


def openai_tools(value: Any, loc: Loc) -> ToolSet:
    """Normalize an OpenAI ``tools`` / legacy ``functions`` array (``loc`` points at the array).

    Raises:
        InputError: not an array, an entry without a function name, or a name used twice.
    """
    if not isinstance(value, list):
        raise loc.error(f"expected an array of tool schemas, got {json_type(value)}")
    schemas: list[Mapping[str, Any]] = []
    extras: dict[str, Mapping[str, Any]] = {}
    for k, entry in enumerate(value):
        schema, extra = _one_tool(entry, _item(loc, k))
        _add(schemas, extras, schema, extra, _item(loc, k))
    return ToolSet(tuple(schemas), extras)


def add_skill_state(builder: ConversationBuilder, tools: ToolSet, loc: Loc, owner: str) -> SkillState:
    """Append the ``SkillState`` (trust ``developer``) that enables ``tools``."""
    meta = {"tool_extras": dict(tools.extras)} if tools.extras else None
    return builder.add(
        SkillState,
        loc,
        owner=owner,
        trust=Trust.DEVELOPER,
        meta=meta,
        enabled_tools=tools.names,
        tool_schemas=tools.schemas,
    )


def _item(loc: Loc, k: int) -> Loc:
    return Loc(loc.source, loc.index, f"{loc.prefix.rstrip('.')}[{k}].")


def _one_tool(entry: Any, loc: Loc) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    entry = as_object(entry, loc, "a tool schema object")
    if "function" in entry:
        kind = entry.get("type", "function")
        if kind != "function":
            raise loc.error(f"unsupported tool type {kind!r} (only 'function')", "type")
        function = dict(as_object(entry["function"], loc.child("function")))
        require(function, "name", str, loc.child("function"), "a string")
        extra = {k: v for k, v in entry.items() if k not in _OPENAI_TOOL_KEYS}
        return {"type": "function", "function": function}, extra
    require(entry, "name", str, loc, "a string")
    return {"type": "function", "function": dict(entry)}, {}


def _add(
    schemas: list[Mapping[str, Any]],
    extras: dict[str, Mapping[str, Any]],
    schema: Mapping[str, Any],
    extra: Mapping[str, Any],
    loc: Loc,
) -> None:
    name = schema["function"]["name"]
    if any(s["function"]["name"] == name for s in schemas):
        raise loc.error(f"tool {name!r} is defined twice")
    schemas.append(schema)
    if extra:
        extras[name] = dict(extra)
