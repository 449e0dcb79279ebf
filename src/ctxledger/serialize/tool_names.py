"""Tool names the providers accept: every name sent matches ``^[a-zA-Z0-9_-]{1,64}$``.

Both APIs restrict the name of a tool (function) definition and of a call in history:

* OpenAI Chat Completions documents a function name as "a-z, A-Z, 0-9, or contain underscores and
  dashes, with a maximum length of 64" (API reference, ``tools[].function.name``), and rejects others
  with "does not match '^[a-zA-Z0-9_-]{1,64}$'" (error quoted in portkey.ai error library #10046, for a
  dotted name, ``multi_tool_use.parallel``).
* Anthropic Messages: a custom tool's ``name`` must match ``^[a-zA-Z0-9_-]{1,64}$`` (the JSON schema of the
  Messages API tool definition; some third-party notes give 128 as the limit, so the stricter 64 is used).

Real histories use dotted or slashed names (``gmail.users.messages.get``, ``logs.search``, MCP names), and
names come from recorded data, so the serializers map each name deterministically to a valid one,
identically in the tool schemas and in the calls of the history, so that calls still pair with the
tools offered (:func:`tool_name_map`):

* a valid name is sent as it is;
* otherwise every character outside ``[a-zA-Z0-9_-]`` becomes ``_`` (``logs.search`` → ``logs_search``);
* a result over 64 characters, or one that another name of the same request already maps to, is cut to
  55 characters and given ``_`` plus 8 hex digits of the original name's sha256.

The assembler records the names that changed in the manifest (``tools.renamed``: original → sent), so a
call the model makes with a sent name can be mapped back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxledger.serialize.base import Turn

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""What both providers accept as a tool name (use with ``fullmatch``)."""
MAX_LENGTH = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def is_valid_tool_name(name: object) -> bool:
    """Whether ``name`` is a string both providers accept as a tool name."""
    return isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None


def _hashed(name: str, base: str) -> str:
    return f"{base[: MAX_LENGTH - 9]}_{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def wire_tool_name(name: str) -> str:
    """The valid name ``name`` is sent as when no other name of the request collides with it.

    Args:
        name: a tool name as recorded (any string).

    Returns:
        ``name`` itself when valid; else invalid characters replaced by ``_``, with a hash suffix when
        that is over 64 characters (module docstring).
    """
    if is_valid_tool_name(name):
        return name
    base = _INVALID.sub("_", name) or "_"
    return base if len(base) <= MAX_LENGTH else _hashed(name, base)


def tool_name_map(names: Iterable[str]) -> dict[str, str]:
    """Original → sent name for every distinct name of one request; no two originals share a sent name.

    Valid names keep themselves; the others, in sorted order, take :func:`wire_tool_name` unless that is
    taken, else a hashed form (module docstring). The result depends only on the set of names.
    """
    distinct = sorted(set(names))
    out = {n: n for n in distinct if is_valid_tool_name(n)}
    taken = set(out)
    for name in distinct:
        if name in out:
            continue
        sent = wire_tool_name(name)
        if sent in taken:
            sent = _hashed(name, _INVALID.sub("_", name))
        out[name] = sent
        taken.add(sent)
    return out


def request_tool_names(turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every tool name of a request: the functions of ``tools`` (OpenAI form) and the calls in ``turns``."""
    names = [c.name for t in turns for c in t.tool_calls]
    names += [t.tool_name for t in turns if t.tool_name]
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def rename_tools(
    turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]]
) -> tuple[list[Turn], list[Mapping[str, Any]]]:
    """``turns`` and ``tools`` with every tool name replaced by its :func:`tool_name_map` name.

    Malformed tool entries are left as they are (the serializer reports them).
    """
    mapping = tool_name_map(request_tool_names(turns, tools))
    if all(k == v for k, v in mapping.items()):
        return list(turns), list(tools)
    new_turns = [
        dataclasses.replace(
            t,
            tool_calls=tuple(dataclasses.replace(c, name=mapping[c.name]) for c in t.tool_calls),
            tool_name=mapping.get(t.tool_name, t.tool_name) if t.tool_name else t.tool_name,
        )
        for t in turns
    ]
    new_tools: list[Mapping[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            tool = {**tool, "function": {**function, "name": mapping[function["name"]]}}
        new_tools.append(tool)
    return new_turns, new_tools
