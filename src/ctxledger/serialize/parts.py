"""The content parts a message may hold: one rule shared by every importer, the service and the serializers.

A message's content parts are stored in OpenAI Chat Completions form and sent by every serializer. Only
two kinds can be sent back faithfully in every provider format, so only they are kept:

* ``{"type": "text", "text": str}``;
* ``{"type": "image_url", "image_url": str | {"url": str, "detail"?: "low" | "high" | "auto"}}`` with a
  non-empty URL (OpenAI Chat Completions, "image_url" content part).

Any other part (OpenAI ``input_audio``, ``file`` …) is refused where it
enters, before anything is written, rather than stored and then failing every assembly or being dropped (the
importers keep an assistant's ``refusal`` part as a text part).
Importers call :func:`part_problem` on each part they would store; serializers call it on each part they
send and :func:`sent_part` to reduce a part to the keys a provider accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxledger.serialize.images import base64_problem, parse_data_url

KEPT_PART_TYPES = ("text", "image_url")
"""The content part types a message keeps (OpenAI Chat Completions names)."""

IMAGE_DETAILS = ("low", "high", "auto")
"""The ``detail`` values of an OpenAI ``image_url`` part."""


@dataclass(frozen=True, slots=True)
class PartProblem:
    """Why a content part cannot be kept: ``problem`` in words, ``field`` the path below the part.

    ``field`` is ``"type"``, ``"text"``, ``"image_url.url"`` or ``"image_url.detail"``; ``None`` names the
    part itself (it is not an object).
    """

    problem: str
    field: str | None


def part_problem(part: Any) -> PartProblem | None:
    """``None`` when ``part`` is a content part a message keeps (see the module), else what is wrong with it."""
    if not isinstance(part, Mapping):
        return PartProblem("a content part must be an object", None)
    kind = part.get("type")
    if kind == "text":
        return None if isinstance(part.get("text"), str) else PartProblem("a text part needs a string 'text'", "text")
    if kind == "image_url":
        return _image_problem(part.get("image_url"))
    return PartProblem(
        f"unsupported content part type {kind!r}: a message keeps only 'text' and 'image_url' parts, "
        "the ones every provider format can send back",
        "type",
    )


def _image_problem(image: Any) -> PartProblem | None:
    if isinstance(image, str):
        image = {"url": image}
    url = image.get("url") if isinstance(image, Mapping) else None
    if not isinstance(url, str) or not url:
        return PartProblem("an image_url part needs a non-empty URL", "image_url.url")
    detail = image.get("detail")
    if detail is not None and detail not in IMAGE_DETAILS:
        return PartProblem(f"image detail must be one of {IMAGE_DETAILS}, not {detail!r}", "image_url.detail")
    return None


def inline_image_problem(part: Mapping[str, Any]) -> PartProblem | None:
    """For an ``image_url`` part whose URL is a base64 ``data:`` URL, why its base64 is not base64, else ``None``.

    The check every edge that writes parts adds to :func:`part_problem` (providers refuse such an image; the
    Anthropic serializer refuses it as ``bad_image``): :func:`~ctxledger.serialize.images.base64_problem`.
    """
    image = part.get("image_url") if part.get("type") == "image_url" else None
    url = image if isinstance(image, str) else image.get("url") if isinstance(image, Mapping) else None
    data_url = parse_data_url(url) if isinstance(url, str) else None
    problem = base64_problem(data_url.data) if data_url is not None else None
    return None if problem is None else PartProblem(problem, "image_url.url")


def sent_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """``part`` (one :func:`part_problem` accepts) reduced to the keys a provider accepts.

    A text part keeps ``type`` and ``text``; an image part ``type`` and ``image_url.url`` /
    ``image_url.detail`` (a URL string becomes ``{"url": …}``); store-only keys (``id``, ``tokens`` …) go.
    """
    if part["type"] == "text":
        return {"type": "text", "text": part["text"]}
    image = part["image_url"]
    image = {"url": image} if isinstance(image, str) else image
    sent = {"url": image["url"]}
    if image.get("detail") is not None:
        sent["detail"] = image["detail"]
    return {"type": "image_url", "image_url": sent}
