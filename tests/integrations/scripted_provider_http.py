"""A scripted provider HTTP endpoint for the integration tests: real SDK clients, no network.

:func:`scripted_reply` answers every request with a minimal valid Anthropic Messages or OpenAI Responses reply
("ok") and keeps each request body, so a test can check what the framework actually sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def scripted_reply(kind: str, bodies: list[dict[str, Any]]) -> Callable[[Any], Any]:
    """An ``httpx2.MockTransport`` handler for ``kind`` (``"anthropic"``, else OpenAI Responses) that records bodies."""
    import httpx2

    def handle(request: Any) -> Any:
        bodies.append(json.loads(request.content))
        usage = {"input_tokens": 50, "output_tokens": 5}
        if kind == "anthropic":
            reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5"}
            reply |= {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage}
            return httpx2.Response(200, json=reply | {"stop_sequence": None})
        text = {"type": "output_text", "text": "ok", "annotations": []}
        message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [text]}
        usage |= {"total_tokens": 55, "input_tokens_details": {"cached_tokens": 0}}
        usage |= {"output_tokens_details": {"reasoning_tokens": 0}}
        reply = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4o", "status": "completed"}
        reply |= {"output": [message], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage}
        return httpx2.Response(200, json=reply)

    return handle
