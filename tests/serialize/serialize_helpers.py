"""Helpers shared by the serializer tests: real image files, data URLs, turns from OpenAI messages."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from ctxledger.serialize import CallView, Turn


def image_bytes(width: int, height: int, fmt: str, **save: Any) -> bytes:
    """A real image file of the given size and format, written by Pillow."""
    mode = "RGBA" if save.pop("alpha", False) else "RGB"
    buffer = io.BytesIO()
    Image.new(mode, (width, height), (200, 30, 90, 255)[: len(mode)]).save(buffer, format=fmt, **save)
    return buffer.getvalue()


def data_url(data: bytes, media_type: str) -> str:
    """A base64 data URL for ``data``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def turns_from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Turn]:
    """Neutral turns from OpenAI Chat messages (as in tau-bench and the cases); store keys ignored."""
    turns = []
    for index, m in enumerate(messages):
        calls = tuple(
            CallView(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in m.get("tool_calls") or ()
        )
        content = m.get("content")
        if isinstance(content, list):
            content = tuple(content)
        turns.append(
            Turn(
                ref=str(m.get("id", f"m{index}")),
                role=m["role"],
                content=content,
                name=m.get("name") if m["role"] != "tool" else None,
                tool_calls=calls,
                tool_call_id=m.get("tool_call_id"),
                tool_name=m.get("name") if m["role"] == "tool" else None,
                is_error=m["role"] == "tool" and str(content).startswith("Error"),
            )
        )
    return turns


def load_json(path: Any) -> Any:
    """Parse a JSON file."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
