"""Image costing at provider rates and image-size reading from real image files (case B08)."""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import pytest
from serialize_helpers import data_url, image_bytes, load_json

from ctxledger.serialize.images import (
    GPT_4O_TILE_RATES,
    OPENAI_TILE_RATES,
    anthropic_image_tokens,
    image_size,
    image_size_from_url,
    openai_image_tokens,
    openai_tile_rates,
    parse_data_url,
)


def test_openai_documented_high_detail_square_costs_765() -> None:
    """OpenAI's worked example: a 1024x1024 image in high detail costs 765 tokens on gpt-4o."""
    assert openai_image_tokens((1024, 1024), "high") == 765


def test_openai_documented_tall_image_costs_1105() -> None:
    """OpenAI's worked example: 2048x4096 high detail scales to 768x1536, 6 tiles, 1105 tokens."""
    assert openai_image_tokens((2048, 4096), "high") == 1105


def test_openai_low_detail_is_fixed_85_whatever_the_size() -> None:
    """OpenAI's worked example: a 4096x8192 image in low detail costs 85 tokens; so does an unknown size."""
    assert openai_image_tokens((4096, 8192), "low") == 85
    assert openai_image_tokens(None, "low") == 85


def test_openai_small_images_are_not_upscaled() -> None:
    """A 512x512 image is one tile (85 + 170), and a 100x60 thumbnail too."""
    assert openai_image_tokens((512, 512), "high") == 255
    assert openai_image_tokens((100, 60), "high") == 255


def test_openai_auto_detail_is_costed_as_high() -> None:
    """``auto`` lets the model choose, so it is charged the high-detail upper bound."""
    assert openai_image_tokens((1024, 1024), "auto") == openai_image_tokens((1024, 1024), "high")


def test_openai_unknown_size_high_costs_the_documented_maximum() -> None:
    """An image of unknown size in high detail costs 8 tiles (768x2048 max): 85 + 8 * 170 = 1445."""
    assert openai_image_tokens(None, "high") == 1445
    sizes = [(w, h) for w in (1, 700, 3000, 9000) for h in (1, 800, 5000)]
    assert all(openai_image_tokens(size, "high") <= 1445 for size in sizes)


def test_openai_tile_rates_follow_the_model_prefix() -> None:
    """gpt-4o-mini dated snapshots get mini rates; gpt-4o snapshots and unknown models get 85/170."""
    assert openai_tile_rates("gpt-4o-mini-2024-07-18") == OPENAI_TILE_RATES["gpt-4o-mini"]
    assert openai_tile_rates("gpt-4o-2024-08-06") == GPT_4O_TILE_RATES
    assert openai_tile_rates("some-future-model") == GPT_4O_TILE_RATES
    mini = OPENAI_TILE_RATES["gpt-4o-mini"]
    assert openai_image_tokens((1024, 1024), "high", mini) == 2833 + 4 * 5667


def test_anthropic_documented_examples() -> None:
    """Anthropic's table: 200x200 ~54 tokens, 1000x1000 ~1334, 1092x1092 ~1590."""
    assert anthropic_image_tokens((200, 200)) == 54
    assert anthropic_image_tokens((1000, 1000)) == 1334
    assert anthropic_image_tokens((1092, 1092)) == 1590


def test_anthropic_large_and_unknown_images_are_capped_at_1600() -> None:
    """Images beyond 1568 px or ~1600 tokens are scaled down; unknown sizes cost the 1600 maximum."""
    assert anthropic_image_tokens((4000, 3000)) == 1600
    assert anthropic_image_tokens((3000, 200)) == 218  # 1568 x 104 px = 163072 px / 750
    assert anthropic_image_tokens(None) == 1600


@pytest.mark.parametrize(
    ("fmt", "save"),
    [
        ("PNG", {}),
        ("GIF", {}),
        ("JPEG", {}),
        ("JPEG", {"progressive": True, "quality": 70}),
        ("WEBP", {"quality": 80}),
        ("WEBP", {"lossless": True}),
        ("WEBP", {"alpha": True, "quality": 80}),
    ],
)
def test_image_size_reads_real_files(fmt: str, save: dict[str, object]) -> None:
    """The header reader returns the size Pillow wrote, for every format a provider accepts."""
    for width, height in ((1, 1), (37, 1021), (1600, 900)):
        assert image_size(image_bytes(width, height, fmt, **dict(save))) == (width, height)


def test_jpeg_with_exif_segment_before_the_frame() -> None:
    """A JPEG whose APP1 (Exif) segment precedes the start-of-frame is still measured."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x010E] = "x" * 5000  # ImageDescription: a long segment to walk over
    assert image_size(image_bytes(640, 480, "JPEG", exif=exif.tobytes())) == (640, 480)


def test_image_size_from_data_url_and_wrapped_base64() -> None:
    """A data URL is measured from its header even when the base64 is wrapped at 76 columns."""
    raw = image_bytes(300, 200, "PNG")
    assert image_size_from_url(data_url(raw, "image/png")) == (300, 200)
    wrapped = "\n".join(textwrap.wrap(base64.b64encode(raw).decode("ascii"), 76))
    assert image_size_from_url(f"data:image/png;base64,{wrapped}") == (300, 200)


def test_remote_and_unreadable_images_have_no_size() -> None:
    """Remote URLs, non-base64 data URLs and bytes of no known format give ``None``."""
    assert image_size_from_url("https://example.com/chart.png") is None
    assert image_size_from_url("data:image/png,rawtext") is None
    assert image_size_from_url("data:image/png;base64,@@@@") is None
    assert image_size(b"not an image at all") is None
    assert image_size(b"\x89PNG\r\n\x1a\n") is None  # truncated header


def test_parse_data_url_splits_media_type() -> None:
    """The media type is lower-cased and parameters are dropped; the data stays base64 text."""
    parsed = parse_data_url("data:Image/PNG;name=x.png;base64,AAAA")
    assert parsed is not None
    assert (parsed.media_type, parsed.data) == ("image/png", "AAAA")
    assert parse_data_url("https://example.com/a.png") is None


def test_b08_synthetic_image_costs_the_low_detail_rate(cases_dir: Path) -> None:
    """Case B08: the undecodable inline image is costed at 85 tokens (low detail), not as base64 text."""
    case = load_json(cases_dir / "B08.json")
    part = next(p for m in case["messages"] if isinstance(m["content"], list) for p in m["content"][1:])
    url, detail = part["image_url"]["url"], part["image_url"]["detail"]
    assert image_size_from_url(url) is None  # synthetic bytes: no known header
    assert openai_image_tokens(image_size_from_url(url), detail) == 85
    assert len(url) > 5000  # as text it would have cost thousands of tokens
