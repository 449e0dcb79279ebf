"""Images inside tool output: sent as images where the provider accepts them, never as base64 text.

A screenshot or chart tool returns its image inside its output: an MCP ``{"type": "image", "data": …,
"mimeType": …}`` item, an Anthropic ``{"type": "image", "source": {"type": "base64", …}}`` block, an OpenAI
``image_url`` part, a ``data:image/…;base64,…`` URL in text or JSON, a bare base64 string of image bytes in a
JSON field, or the raw bytes of an ``image/*`` artifact. Sent as text, a 40 KB PNG is ~15,000 tokens of base64
the model cannot see as an image. :func:`tool_output_parts` turns such output into content parts:

* one ``text`` part: the output with each image replaced by a placeholder ``[image N: image/png, 1280x800 px]``
  (JSON stays JSON, the image item becoming ``{"type": "image", "image": "[image N: …]"}``);
* one ``image_url`` part (a ``data:`` URL) per image of a type the providers accept (PNG, JPEG, GIF, WebP);
  an image of another type (SVG, TIFF …) keeps only its placeholder, which says it is not sent.

Each serializer then does what its API allows (:func:`image_reference`): Anthropic Messages carries image blocks
inside ``tool_result`` (Anthropic *Vision*: images in user content and tool results), costed at its pixel
rate; OpenAI Chat Completions tool messages carry text parts only (API reference, "Tool message"), so there
the image part becomes a reference naming the artifact that holds the image and how to read it back.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from collections.abc import Mapping
from typing import Any

from ctxledger.fetch_hints import whole
from ctxledger.json_text import UNDECODABLE, decode_json
from ctxledger.serialize.images import DataUrl, image_size_from_base64, parse_data_url

SENT_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""Image media types both Anthropic (*Vision*) and OpenAI (*Images and vision*) accept."""

MIN_BARE_BASE64 = 256
"""Shortest JSON string value checked for being bare base64 image bytes (shorter ones are ordinary text)."""

_DATA_URL_RE = re.compile(r"data:(image/[\w.+-]+);base64,([A-Za-z0-9+/]+={0,2})")
_BASE64_RE = re.compile(r"[A-Za-z0-9+/\s]+={0,2}")
_LONG_BASE64_RE = re.compile(rf"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{{{MIN_BARE_BASE64}}}")
"""A run of at least ``MIN_BARE_BASE64`` base64 characters (tried only where a run starts, so one pass)."""
_BASE64_CHARS = string.ascii_letters + string.digits + "+/"
_RUN_BLOCK = MIN_BARE_BASE64 // 2
"""Block size :func:`_long_base64_run` slices by (any run of ``MIN_BARE_BASE64`` covers one aligned block)."""
_JSON_START_RE = re.compile(r"\s*[\[{]")
"""Text that may be a JSON object or array (what :func:`_from_json` parses)."""
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image_type(head: bytes) -> str | None:
    """The image media type of bytes by their signature (PNG, JPEG, GIF, WebP), or ``None``."""
    for signature, media_type in _SIGNATURES:
        if head.startswith(signature):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def placeholder(number: int, image: DataUrl) -> str:
    """``[image N: <type>, WxH px]`` (or ``…, not sent: <type> is not an image type providers accept]``)."""
    size = image_size_from_base64(image.data)
    where = f", {size[0]}x{size[1]} px" if size else ""
    if image.media_type not in SENT_TYPES:
        return f"[image {number}: {image.media_type}{where}, not sent: not an image type providers accept]"
    return f"[image {number}: {image.media_type}{where}]"


def _bare_base64(value: str) -> DataUrl | None:
    if len(value) < MIN_BARE_BASE64 or not _BASE64_RE.fullmatch(value):
        return None
    head = "".join(value[:64].split())
    try:
        raw = base64.b64decode(head[: len(head) - len(head) % 4], validate=True)
    except (binascii.Error, ValueError):
        return None
    media_type = sniff_image_type(raw)
    return DataUrl(media_type, "".join(value.split())) if media_type else None


def _string_image(value: str) -> DataUrl | None:
    if value.startswith("data:image/"):
        return parse_data_url(value)
    return _bare_base64(value)


def _item_image(node: Mapping[str, Any]) -> DataUrl | None:
    """The image of one JSON object: MCP image content, an Anthropic image block, an OpenAI image part."""
    kind = node.get("type")
    if kind == "image":
        data = node.get("data")
        media_type = node.get("mimeType") or node.get("mime_type") or node.get("media_type")
        if isinstance(data, str) and isinstance(media_type, str):
            return DataUrl(media_type.lower(), "".join(data.split()))
        source = node.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64" and isinstance(source.get("data"), str):
            return DataUrl(str(source.get("media_type", "")).lower(), "".join(source["data"].split()))
    if kind in ("image_url", "input_image"):
        url = node.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        return parse_data_url(url) if isinstance(url, str) else None
    return None


def _walk(node: Any, found: list[DataUrl]) -> Any:
    if isinstance(node, Mapping):
        image = _item_image(node)
        if image is not None:
            found.append(image)
            return {"type": "image", "image": placeholder(len(found), image)}
        return {k: _walk(v, found) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, found) for v in node]
    if isinstance(node, str):
        image = _string_image(node)
        if image is not None:
            found.append(image)
            return placeholder(len(found), image)
    return node


def _from_json(text: str) -> tuple[str, list[DataUrl]] | None:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    parsed = decode_json(text)
    if parsed is UNDECODABLE:
        return None
    found: list[DataUrl] = []
    walked = _walk(parsed, found)
    return (json.dumps(walked, ensure_ascii=False), found) if found else None


def _from_text(text: str) -> tuple[str, list[DataUrl]] | None:
    found: list[DataUrl] = []

    def swap(match: re.Match[str]) -> str:
        found.append(DataUrl(match.group(1).lower(), match.group(2)))
        return placeholder(len(found), found[-1])

    replaced = _DATA_URL_RE.sub(swap, text)
    return (replaced, found) if found else None


def image_parts(text: str, images: list[DataUrl]) -> tuple[dict[str, Any], ...]:
    """The text part, then one ``image_url`` part per image of a sent type (in placeholder order)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [
        {"type": "image_url", "image_url": {"url": f"data:{i.media_type};base64,{i.data}"}}
        for i in images
        if i.media_type in SENT_TYPES
    ]
    return tuple(parts)


def tool_output_parts(text: str) -> tuple[dict[str, Any], ...] | None:
    """Content parts of a tool output that holds images (see the module docstring); ``None`` when it holds none.

    Args:
        text: the tool output as text (JSON or not).

    Returns:
        ``({"type": "text", …}, {"type": "image_url", …}, …)``: the text with placeholders, then the images.
    """
    # without these markers only a bare base64 string inside JSON is left to find: plain text holds none,
    # and a run that long holds no quote, so it lies inside one of the text's pieces between quotes
    marked = "base64" in text or '"image' in text
    if not marked and (not _JSON_START_RE.match(text) or not _long_base64_run(text)):
        return None
    found = _from_json(text) or _from_text(text)
    return None if found is None else image_parts(*found)


def _long_base64_run(text: str) -> bool:
    """Whether ``text`` holds a run of at least ``MIN_BARE_BASE64`` base64 characters (``_LONG_BASE64_RE``).

    A run that long covers a whole block of ``_RUN_BLOCK`` characters starting at a multiple of ``_RUN_BLOCK``,
    so only blocks made of base64 characters alone are measured: one short slice per block instead of a regex
    step per character.
    """
    step = _RUN_BLOCK
    for start in range(0, len(text) - step + 1, step):
        if text[start : start + step].strip(_BASE64_CHARS):
            continue
        left = text[max(0, start - MIN_BARE_BASE64) : start]
        right = text[start + step : start + step + MIN_BARE_BASE64]
        run = len(left) - len(left.rstrip(_BASE64_CHARS)) + step + len(right) - len(right.lstrip(_BASE64_CHARS))
        if run >= MIN_BARE_BASE64:
            return True
    return False


def binary_image_parts(data: bytes, media_type: str) -> tuple[dict[str, Any], ...] | None:
    """Parts for an artifact whose bytes are an image (``image/*`` media type or an image signature)."""
    sniffed = sniff_image_type(data[:16])
    declared = media_type.split(";")[0].strip().lower()
    kind = sniffed or (declared if declared.startswith("image/") else None)
    if kind is None:
        return None
    image = DataUrl(kind, base64.b64encode(data).decode("ascii"))
    return image_parts(placeholder(1, image), [image])


def image_reference(number: int, ref: str, *, recall: bool = False) -> str:
    """What stands for image ``number`` of tool result ``ref`` where the API takes no image in a tool result.

    It names how to read the artifact back (:mod:`ctxledger.fetch_hints`): a ``recall`` call when ``recall``
    (the model has that tool), else the ``ctxledger rehydrate`` command.
    """
    return (
        f"[image {number} of this tool result not shown: this API takes text only in tool results; "
        f"artifact {ref} holds it ({whole(ref, recall=recall)})]"
    )
