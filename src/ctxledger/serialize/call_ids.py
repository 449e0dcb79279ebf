"""Tool call ids every serializer sends: valid characters, and unique within one request.

Recorded histories reuse call ids: real gpt-4o logs repeat a call id in later turns (47 of the 160 tau-bench
gpt-4o airline trajectories do). The providers refuse that:

* Anthropic Messages requires ``tool_use`` ids matching ``^[a-zA-Z0-9_-]+$`` and unique in a request;
* OpenAI Chat Completions pairs a ``tool`` message with its call by ``tool_call_id``, and a repeated id makes
  the pairing ambiguous (the API rejects a history whose ids repeat);
* OpenAI Responses pairs ``function_call_output`` items with ``function_call`` items by ``call_id``, which
  must be unique among the request's input items.

So every serializer maps the call ids of a request the same way (:func:`unique_call_ids`): characters
outside ``[a-zA-Z0-9_-]`` become ``_``, and an id already used earlier in the request gets the first free
``_2``, ``_3`` … suffix. The results that follow an assistant turn use that turn's mapping, so pairing is
kept, and the mapping depends only on the turns, so the payload stays deterministic.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from ctxledger.serialize.base import Turn

_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")

CALL_ID = re.compile(r"[a-zA-Z0-9_-]+")
"""What a sent call id matches (use with ``fullmatch``)."""


def call_id_map(call_ids: Sequence[str], used: set[str]) -> dict[str, str]:
    """Map one assistant turn's call ids to valid ids not in ``used`` (and add them to ``used``).

    Args:
        call_ids: the turn's call ids in order (distinct: a turn repeating an id is refused before).
        used: the ids taken earlier in the request; updated in place.

    Returns:
        Recorded id → sent id for every id of the turn.
    """
    mapping = {}
    for call_id in call_ids:
        base = _ID_UNSAFE.sub("_", call_id) or "call"
        candidate, suffix = base, 2
        while candidate in used:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        used.add(candidate)
        mapping[call_id] = candidate
    return mapping


def unique_call_ids(turns: Sequence[Turn]) -> list[Turn]:
    """``turns`` with every call id (and each result's ``tool_call_id``) replaced by its sent id.

    A result takes the mapping of the latest assistant turn with calls before it; a result whose id that
    turn did not make keeps its id (the pairing check reports it). Turns that need no change are returned
    as they are.
    """
    used: set[str] = set()
    mapping: dict[str, str] = {}
    out = []
    for turn in turns:
        if turn.tool_calls:
            mapping = call_id_map([c.call_id for c in turn.tool_calls], used)
            if any(mapping[c.call_id] != c.call_id for c in turn.tool_calls):
                calls = tuple(dataclasses.replace(c, call_id=mapping[c.call_id]) for c in turn.tool_calls)
                turn = dataclasses.replace(turn, tool_calls=calls)
        elif turn.role == "tool" and turn.tool_call_id in mapping and mapping[turn.tool_call_id] != turn.tool_call_id:
            turn = dataclasses.replace(turn, tool_call_id=mapping[turn.tool_call_id])
        out.append(turn)
    return out
