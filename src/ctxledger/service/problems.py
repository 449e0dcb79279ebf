"""Errors as ``application/problem+json`` (RFC 9457): one shape for every failure the service answers.

Each problem has ``type``, ``title``, ``status`` and ``detail``; a problem about one field of the
request also has ``field`` (the dotted path, e.g. ``body.window_tokens`` or ``messages[3].content``)
and, for validation failures and budgets that leave no room, ``errors`` (every field at fault, each
``{field, message}``). A missing or unknown id, including
an id of another tenant, is the same 404 ``not-found`` problem: the answer never tells whether the id
exists elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxledger.errors import (
    BudgetError,
    ConfigurationError,
    ContentRetained,
    CtxledgerError,
    FormatNotRecognised,
    InputError,
    NoRoomForInput,
    NothingToSend,
    PolicyError,
    RecordNotFound,
    RequiredBlocksDoNotFit,
    UnknownTokenizer,
    UsageAlreadyRecorded,
)
from ctxledger.ingest._load import MAX_DEPTH, MAX_INT_DIGITS
from ctxledger.policy.message_redaction import redact_message, redact_path

MEDIA_TYPE = "application/problem+json"
"""Content type of every error answer."""

_BASE = "https://ctxledger.dev/problems/"

BODY = "body."
"""Prefix of a request body field in ``field`` (as in validation problems: ``body.window_tokens``)."""

_BUDGET_FIELDS = ("window_tokens", "output_tokens", "margin_tokens")
_BUDGET_FIX = {
    "window_tokens": "raise it: W - O - M is the room for input",
    "output_tokens": "lower it: the output reserve O is taken from the window",
    "margin_tokens": "lower it: the margin M is taken from the window",
}


def problem(status: int, kind: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    """A problem+json response (``kind`` becomes the ``type`` URI's last segment).

    ``detail``, ``field`` and each of ``errors``' fields and messages name the value at fault; a secret among them
    is withheld (:func:`~ctxledger.policy.message_redaction.redact_message`; a field path from a validation error
    has each part holding a secret withheld already, :func:`~ctxledger.policy.message_redaction.redact_path`).
    """
    body = {"type": _BASE + kind, "title": title, "status": status, "detail": redact_message(detail)}
    body.update({k: v for k, v in extra.items() if v is not None})
    if "field" in body:
        body["field"] = redact_message(body["field"])
    if isinstance(body.get("errors"), list):
        body["errors"] = [
            {**e, "field": redact_message(e.get("field")), "message": redact_message(e.get("message"))}
            if isinstance(e, Mapping)
            else e
            for e in body["errors"]
        ]
    headers = {"WWW-Authenticate": 'Bearer realm="ctxledger"'} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _field_error(error: Mapping[str, Any]) -> dict[str, str]:
    """One validation error as ``{field, message}``; a body that is not JSON names ``body`` and where it breaks.

    A part of the field path holding a secret (an unknown body key that is a token) is withheld, the rest kept.
    """
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid" and loc[:1] == ("body",):
        where = loc[1] if len(loc) > 1 else 0
        reason = (error.get("ctx") or {}).get("error", "not JSON")
        return {"field": "body", "message": f"malformed JSON at character {where}: {reason}"}
    return {"field": redact_path(loc), "message": str(error.get("msg", ""))}


async def validation_problem(_request: Request, exc: Exception) -> JSONResponse:
    """422 for a request whose body, path or query does not validate; names every field at fault."""
    assert isinstance(exc, RequestValidationError)
    errors = [_field_error(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    return problem(
        422,
        "invalid-request",
        "Invalid request",
        f"{first['field']}: {first['message']}",
        field=first["field"],
        errors=errors,
    )


_UNPARSED_BODY = "There was an error parsing the body"
"""FastAPI's 400 detail when decoding the body raised something other than a JSON syntax error: ``json.loads``
reads bytes whose first four hold a NUL as UTF-16 or UTF-32 (RFC 8259 §8.1 requires UTF-8 between systems) and
fails to decode them."""


def _unparsed_body_reason(body: bytes) -> str:
    """Why FastAPI could not decode ``body``: beyond the limits of reading JSON, else not UTF-8 JSON text.

    ``json.loads`` raises ``RecursionError`` for JSON nested too deeply and ``ValueError`` for an integer
    literal of more digits than Python converts; FastAPI reports both as the same parse failure as bytes it
    read as UTF-16 or UTF-32 and could not decode.
    """
    try:
        json.loads(body.decode("utf-8"))
    except RecursionError:
        return f"nested more than {MAX_DEPTH} levels deep"
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    except ValueError as exc:  # an integer literal beyond Python's digit limit
        return f"an integer of more than {MAX_INT_DIGITS} digits ({exc})"
    return "malformed JSON at character 0: not UTF-8 JSON text"


async def http_problem(_request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own errors (unknown route, wrong method …) in the same shape.

    A JSON body FastAPI could not decode is answered as any malformed JSON body is: 422, field ``body``.
    """
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == _UNPARSED_BODY:
        message = _unparsed_body_reason(await _request.body())
        errors = [{"field": "body", "message": message}]
        return problem(422, "invalid-request", "Invalid request", f"body: {message}", field="body", errors=errors)
    titles = {401: "Unauthorized", 404: "Not found", 405: "Method not allowed", 413: "Request body too large"}
    kinds = {401: "unauthorized", 404: "not-found", 405: "method-not-allowed", 413: "body-too-large"}
    kind = kinds.get(exc.status_code, "http-error")
    return problem(exc.status_code, kind, titles.get(exc.status_code, "HTTP error"), str(exc.detail))


def ctxledger_problem(exc: CtxledgerError) -> JSONResponse:
    """The answer for a ctxledger error.

    404 not found, 410 gone by retention, 409 usage already recorded, 422 bad input or nothing to send, else 500.
    """
    if isinstance(exc, ContentRetained):
        return problem(410, "retained", "Content removed by retention", str(exc), field=None)
    if isinstance(exc, RecordNotFound):
        return problem(404, "not-found", "Not found", exc.untenanted(), field=None)
    if isinstance(exc, UsageAlreadyRecorded):
        detail = exc.describe('send "overwrite": true in the body')
        return problem(409, "usage-already-recorded", "Usage already recorded", detail, field=BODY + "overwrite")
    if isinstance(exc, NoRoomForInput):
        fields = [BODY + name for name in exc.culprits]
        return problem(
            422,
            "no-room-for-input",
            "No room for input",
            exc.describe({name: BODY + name for name in _BUDGET_FIELDS}),
            field=fields[0],
            errors=[{"field": f, "message": _BUDGET_FIX[name]} for f, name in zip(fields, exc.culprits, strict=True)],
            input_tokens=exc.input_tokens,
        )
    if isinstance(exc, RequiredBlocksDoNotFit):
        blocks = [{"ref": b.ref, "what": b.what, "tokens": b.tokens} for b in exc.blocks]
        return problem(
            422,
            "required-blocks-do-not-fit",
            "Required blocks do not fit",
            str(exc),
            field=BODY + "window_tokens",
            errors=[{"field": BODY + name, "message": _BUDGET_FIX[name]} for name in _BUDGET_FIELDS],
            required_tokens=exc.required_tokens,
            budget_tokens=exc.budget_tokens,
            blocks=blocks,
        )
    if isinstance(exc, NothingToSend):
        return problem(422, "nothing-to-send", "Nothing to send", str(exc), field=None)
    if isinstance(exc, FormatNotRecognised):
        detail = f'cannot tell the format of this input; send "format": one of {", ".join(exc.formats)}'
        return problem(422, "invalid-input", "Invalid input", detail, field=BODY + "format")
    if isinstance(exc, InputError):
        return problem(422, "invalid-input", "Invalid input", exc.problem, field=exc.field, index=exc.index)
    if isinstance(exc, BudgetError):
        return problem(422, "invalid-budget", "Invalid budget", str(exc), field=BODY + "window_tokens")
    if isinstance(exc, UnknownTokenizer):
        field = BODY + exc.field
        errors = [{"field": field, "message": str(exc)}]
        return problem(422, "invalid-request", "Invalid request", str(exc), field=field, errors=errors)
    if isinstance(exc, ConfigurationError | PolicyError):
        return problem(422, "invalid-request", "Invalid request", str(exc))
    return problem(500, "internal", type(exc).__name__, str(exc))


async def ctxledger_exception(_request: Request, exc: Exception) -> JSONResponse:
    """Exception handler form of :func:`ctxledger_problem`."""
    assert isinstance(exc, CtxledgerError)
    return ctxledger_problem(exc)


class Unauthorized(Exception):
    """No key, or a key that names no tenant: 401."""


async def unauthorized(_request: Request, exc: Exception) -> JSONResponse:
    """401 with ``WWW-Authenticate: Bearer``."""
    return problem(401, "unauthorized", "Unauthorized", str(exc) or "a valid Authorization: Bearer key is required")
