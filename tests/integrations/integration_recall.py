"""What the integration tests read from the context a model was shown: the recall calls it names."""

from __future__ import annotations

import json
import re
from typing import Any

from ctxledger.assemble.recall import recall_schema

HINT = re.compile(r"recall (\{[^{}]*\})")


def recall_calls(text: str) -> list[dict[str, Any]]:
    """The ``recall`` calls a text names (``recall {"ref": …}``), each checked against the tool's schema.

    Raises:
        AssertionError: a named call the ``recall`` schema would not accept, or a ``ctxledger rehydrate``
            command (the model cannot run it).
    """
    assert "ctxledger rehydrate" not in text
    params = recall_schema()["function"]["parameters"]
    calls = [json.loads(m) for m in HINT.findall(text)]
    for call in calls:
        assert set(params["required"]) <= set(call) <= set(params["properties"]), call
    return calls


def strings(value: Any) -> str:
    """Every string inside ``value`` (mappings, sequences, pydantic models), joined by newlines."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(strings(v) for v in value.values())
    if isinstance(value, list | tuple):
        return "\n".join(strings(v) for v in value)
    return ""
