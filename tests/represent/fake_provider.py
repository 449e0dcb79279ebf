"""A tiny local HTTP server that speaks OpenAI Chat Completions and Anthropic Messages (for SDK tests).

It listens on 127.0.0.1 on a random port, records every request (path, headers, JSON body), and answers
with the text a test-supplied ``reply(path, body)`` returns, in each provider's documented response
shape. ``reply`` may return ``None`` to answer HTTP 500 with the provider's error shape.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[str, dict[str, Any]], str | None]


@dataclass
class Recorded:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeProvider:
    """The running server: its base URL, the requests it has seen, and its (replaceable) ``reply``."""

    port: int
    reply: Reply
    requests: list[Recorded] = field(default_factory=list)

    @property
    def root(self) -> str:
        """``http://127.0.0.1:<port>`` (Anthropic-style base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (OpenAI-style base URL)."""
        return f"{self.root}/v1"


def _openai_body(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-local-1",
        "object": "chat.completion",
        "created": 1775800000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020},
    }


def _anthropic_body(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "msg_local_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 900, "output_tokens": 120},
    }


def _error_body(path: str) -> dict[str, Any]:
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": "api_error", "message": "local server error"}}
    return {"error": {"message": "local server error", "type": "server_error", "param": None, "code": None}}


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            provider.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path not in ("/v1/chat/completions", "/v1/messages"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            text = provider.reply(self.path, body)
            if text is None:
                self._send(500, _error_body(self.path))
            elif self.path == "/v1/messages":
                self._send(200, _anthropic_body(body["model"], text))
            else:
                self._send(200, _openai_body(body["model"], text))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    return Handler


@contextmanager
def serve(reply: Reply) -> Iterator[FakeProvider]:
    """Run the fake provider on 127.0.0.1 (random port) until the block ends."""
    provider = FakeProvider(port=0, reply=reply)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    provider.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
