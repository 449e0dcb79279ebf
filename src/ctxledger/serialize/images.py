"""Image token costs at provider rates (counted on the serialized form; case B08).

An inline image travels as a base64 ``data:`` URL, but a provider does not read it as text: it bills a
cost derived from the image's pixel size. Counting the base64 characters with a text tokenizer
overstates a small screenshot by thousands of tokens and gets the turn dropped for budget (case B08,
google-gemini/gemini-cli#17923). This module turns an image reference into the provider's cost:

* the pixel size is read from the file header of a ``data:`` URL (PNG, GIF, JPEG, WebP; no pixels are
  decoded and only the first :data:`HEADER_B64_CHARS` base64 characters are looked at);
* an image whose size cannot be known (a remote URL, unknown or damaged bytes) is costed at the
  documented **maximum** for its detail level, so the estimate never falls short of the bill.

Provider documents followed:

* OpenAI, *Images and vision*, "Calculating costs" (platform.openai.com/docs/guides/images-vision):
  ``detail: low`` costs the base tokens (85 on gpt-4o); ``high`` scales the image to fit 2048x2048,
  then so that its short side is 768 px, and costs ``base + per_tile * n_512px_tiles``. The worked
  examples there (1024x1024 high = 765, 2048x4096 high = 1105, any low = 85) are tests. ``auto`` lets
  the model choose, so it is costed as ``high`` (an upper bound). Images are only scaled down, never up.
* Anthropic, *Vision*, "Evaluate image size" (docs.anthropic.com/en/docs/build-with-claude/vision):
  ``tokens = width * height / 750``; an image whose long edge exceeds 1568 px, or that would cost
  more than ~1,600 tokens, is first scaled down preserving its aspect ratio, so 1,600 is the maximum.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HEADER_B64_CHARS = 262_144
"""Base64 characters of a data URL decoded to find the image size (192 KiB of file header)."""

ImageSize = tuple[int, int]
"""``(width, height)`` in pixels."""


@dataclass(frozen=True, slots=True)
class TileRates:
    """OpenAI tile pricing of one model family (OpenAI *Images and vision*, "Calculating costs").

    Attributes:
        base: tokens every image costs (the whole cost of ``detail: low``).
        per_tile: tokens per 512 px tile of a ``detail: high`` image.
    """

    base: int
    per_tile: int


GPT_4O_TILE_RATES = TileRates(base=85, per_tile=170)
"""gpt-4o, gpt-4.1, gpt-4.5 and gpt-4-turbo rates: 85 base + 170 per tile."""

OPENAI_TILE_RATES: Mapping[str, TileRates] = {
    "gpt-4o": GPT_4O_TILE_RATES,
    "gpt-4o-mini": TileRates(base=2833, per_tile=5667),
    "o1": TileRates(base=75, per_tile=150),
    "o3": TileRates(base=75, per_tile=150),
}
"""Documented tile rates by model-name prefix (the longest matching prefix wins)."""

OPENAI_MAX_HIGH_TILES = 8
"""Most 512 px tiles a ``high`` image can need: at most 768 x 2048 px after scaling, so 2 x 4 tiles."""

ANTHROPIC_MAX_LONG_EDGE = 1568
"""Long edge (px) above which Anthropic scales an image down before costing it."""

ANTHROPIC_PIXELS_PER_TOKEN = 750
"""Anthropic's documented estimate: one token per 750 pixels."""

ANTHROPIC_MAX_IMAGE_TOKENS = 1600
"""Anthropic's documented ceiling (~1,600 tokens): larger images are scaled down to it."""


def openai_tile_rates(model: str) -> TileRates:
    """Return the tile rates for ``model`` by longest matching prefix; unknown models get gpt-4o rates."""
    matches = [prefix for prefix in OPENAI_TILE_RATES if model.startswith(prefix)]
    if not matches:
        return GPT_4O_TILE_RATES
    return OPENAI_TILE_RATES[max(matches, key=len)]


def openai_image_tokens(size: ImageSize | None, detail: str, rates: TileRates = GPT_4O_TILE_RATES) -> int:
    """Tokens OpenAI bills for one ``image_url`` part (OpenAI *Images and vision*, "Calculating costs").

    Args:
        size: ``(width, height)`` in pixels, or ``None`` when unknown (then the maximum is charged).
        detail: ``"low"``, ``"high"`` or ``"auto"`` (``auto`` is costed as ``high``).
        rates: the model family's tile rates.

    Returns:
        Tokens (not bytes).
    """
    if detail == "low":
        return rates.base
    if size is None:
        return rates.base + rates.per_tile * OPENAI_MAX_HIGH_TILES
    width, height = _fit_openai_high(*size)
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return rates.base + rates.per_tile * tiles


def _fit_openai_high(width: int, height: int) -> ImageSize:
    """Scale down to fit a 2048 px square, then so the short side is at most 768 px (integer pixels)."""
    if max(width, height) > 2048:
        longest = max(width, height)
        width, height = max(1, width * 2048 // longest), max(1, height * 2048 // longest)
    if min(width, height) > 768:
        shortest = min(width, height)
        width, height = max(1, width * 768 // shortest), max(1, height * 768 // shortest)
    return width, height


def anthropic_image_tokens(size: ImageSize | None) -> int:
    """Tokens Anthropic bills for one image block (Anthropic *Vision*, "Evaluate image size").

    Args:
        size: ``(width, height)`` in pixels, or ``None`` when unknown (then the 1,600-token maximum).

    Returns:
        ``ceil(width * height / 750)`` after scaling the long edge to at most 1568 px, capped at 1,600.
    """
    if size is None:
        return ANTHROPIC_MAX_IMAGE_TOKENS
    width, height = size
    longest = max(width, height)
    if longest > ANTHROPIC_MAX_LONG_EDGE:
        width = max(1, width * ANTHROPIC_MAX_LONG_EDGE // longest)
        height = max(1, height * ANTHROPIC_MAX_LONG_EDGE // longest)
    return min(math.ceil(width * height / ANTHROPIC_PIXELS_PER_TOKEN), ANTHROPIC_MAX_IMAGE_TOKENS)


@dataclass(frozen=True, slots=True)
class DataUrl:
    """A parsed ``data:<media type>;base64,<data>`` URL (the data is kept as base64 text)."""

    media_type: str
    data: str


def parse_data_url(url: str) -> DataUrl | None:
    """Split a base64 ``data:`` URL into media type and base64 text; ``None`` for any other URL."""
    if not url.startswith("data:"):
        return None
    header, sep, data = url[5:].partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    return DataUrl(media_type=header[: -len(";base64")].split(";")[0].strip().lower(), data=data)


_BASE64 = re.compile(r"[A-Za-z0-9+/=]+")


def base64_problem(data: str) -> str | None:
    """Why ``data`` cannot be the base64 of an inline image, or ``None``.

    ``data`` is refused when empty or when it holds a character outside the base64 alphabet (RFC 4648 §4:
    ``A-Z a-z 0-9 + /`` and ``=`` padding; whitespace included). Both providers take inline images in that form
    (Anthropic ``source.data``, OpenAI ``data:…;base64,`` URLs) and refuse other characters. Checked at C speed
    without decoding; the grouping of the characters is not checked (data cut or padded in the middle passes),
    so this is a floor, not a full validation.
    """
    if not data:
        return "the base64 data is empty"
    if _BASE64.fullmatch(data):
        return None
    bad = next(ch for ch in data if not (ch.isascii() and (ch.isalnum() or ch in "+/=")))
    return f"the base64 data holds {bad!r}, which is not a base64 character (A-Z a-z 0-9 + / =, no whitespace)"


def image_size_from_url(url: str) -> ImageSize | None:
    """Pixel size of the image in a base64 ``data:`` URL, or ``None`` (remote URL or unreadable bytes)."""
    parsed = parse_data_url(url)
    return None if parsed is None else image_size_from_base64(parsed.data)


def image_size_from_base64(data: str) -> ImageSize | None:
    """Pixel size of base64-encoded image bytes (only the header is decoded), or ``None``."""
    head = "".join(data[:HEADER_B64_CHARS].split())
    head = head[: len(head) - len(head) % 4]
    try:
        raw = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return None
    return image_size(raw)


def image_size(data: bytes) -> ImageSize | None:
    """Pixel size from the header of PNG, GIF, JPEG or WebP bytes; ``None`` if not recognised."""
    for reader in (_png_size, _gif_size, _jpeg_size, _webp_size):
        try:
            size = reader(data)
        except (struct.error, IndexError):
            size = None
        if size is not None:
            return size if size[0] > 0 and size[1] > 0 else None
    return None


def _png_size(data: bytes) -> ImageSize | None:
    """PNG: the IHDR chunk right after the 8-byte signature holds big-endian width and height."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _gif_size(data: bytes) -> ImageSize | None:
    """GIF87a/89a: the logical screen size, little-endian, after the 6-byte signature."""
    if data[:6] not in (b"GIF87a", b"GIF89a"):
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_JPEG_STANDALONE = {0x01, *range(0xD0, 0xDA)}


def _jpeg_size(data: bytes) -> ImageSize | None:
    """JPEG: walk the marker segments to the first start-of-frame, which holds height then width."""
    if data[:2] != b"\xff\xd8":
        return None
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker in _JPEG_STANDALONE:
            pos += 2
            continue
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return width, height
        pos += 2 + struct.unpack(">H", data[pos + 2 : pos + 4])[0]
    return None


def _webp_size(data: bytes) -> ImageSize | None:
    """WebP: the first chunk is VP8 (lossy), VP8L (lossless) or VP8X (extended canvas size)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = struct.unpack("<I", data[21:25])[0]
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


def image_part_url(part: Mapping[str, Any]) -> tuple[str, str]:
    """``(url, detail)`` of an OpenAI ``image_url`` content part; ``detail`` defaults to ``"auto"``.

    Raises:
        KeyError: the part has no ``image_url.url``.
    """
    image = part["image_url"]
    if isinstance(image, str):
        return image, "auto"
    return image["url"], str(image.get("detail") or "auto")
