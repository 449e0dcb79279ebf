"""Rehydration returns exactly the stored bytes (hash-checked), or exactly the requested range."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from represent_helpers import mini_swe_output

from ctxledger.errors import InputError, IntegrityError, RecordNotFound
from ctxledger.represent import Locator, make_excerpt, parse_byte_range, rehydrate
from ctxledger.represent.rehydrate import check_range
from ctxledger.testing import MemoryBlobStore
from ctxledger.tokens import TokenCounter


@pytest.fixture
def stored(data_dir: Path, blobs: MemoryBlobStore) -> tuple[bytes, str]:
    """A real pytest failure output put in the blob store: (bytes, sha256)."""
    data = mini_swe_output(data_dir, "pydicom__pydicom-1139", 131)
    return data, blobs.put(data, "text/plain").sha256


def test_whole_blob_by_sha(stored: tuple[bytes, str], blobs: MemoryBlobStore):
    """A bare or ``sha256:``-tagged hash gives back the exact bytes."""
    data, sha = stored
    assert rehydrate(blobs, sha) == data
    assert rehydrate(blobs, f"sha256:{sha}") == data


def test_range_by_sha(stored: tuple[bytes, str], blobs: MemoryBlobStore):
    """An explicit byte range gives exactly those bytes of the blob."""
    data, sha = stored
    assert rehydrate(blobs, sha, byte_range=(100, 250)) == data[100:250]
    assert rehydrate(blobs, sha, byte_range=(len(data), len(data))) == b""


def test_excerpt_locators_and_their_dict_form(stored: tuple[bytes, str], blobs: MemoryBlobStore, counter: TokenCounter):
    """Both a Locator and its stored dict form rehydrate to the run the excerpt showed."""
    data, sha = stored
    excerpt = make_excerpt(data, artifact_id="a131", sha256=sha, max_tokens=200, counter=counter)
    assert len(excerpt.locators) >= 2
    for loc in excerpt.locators:
        expected = data[loc.byte_start : loc.byte_end]
        assert rehydrate(blobs, loc) == expected
        assert rehydrate(blobs, loc.to_dict()) == expected
        assert Locator.from_dict(loc.to_dict()) == loc


def test_byte_range_overrides_the_locator(stored: tuple[bytes, str], blobs: MemoryBlobStore, counter: TokenCounter):
    """``byte_range`` asks for more than the excerpt showed ("how to fetch more")."""
    data, sha = stored
    loc = make_excerpt(data, artifact_id="a", sha256=sha, max_tokens=200, counter=counter).locators[0]
    assert rehydrate(blobs, loc, byte_range=(0, len(data))) == data


def test_tampered_blob_is_refused(stored: tuple[bytes, str], blobs: MemoryBlobStore):
    """Bytes that no longer hash to their name are refused, for whole blobs and for ranges."""
    data, sha = stored
    blobs.tamper(sha, data.replace(b"AttributeError", b"AttributeErrox"))
    with pytest.raises(IntegrityError):
        rehydrate(blobs, sha)
    with pytest.raises(IntegrityError):
        rehydrate(blobs, sha, byte_range=(0, 10))


def test_missing_blob_and_bad_ranges(stored: tuple[bytes, str], blobs: MemoryBlobStore):
    """An unknown blob is not found; ranges past the end or reversed are input errors naming the field."""
    data, sha = stored
    with pytest.raises(RecordNotFound):
        rehydrate(blobs, "0" * 64)
    with pytest.raises(InputError, match="ends past the end of blob") as info:
        rehydrate(blobs, sha, byte_range=(0, len(data) + 1))
    assert info.value.field == "byte_range"
    with pytest.raises(InputError, match="locator field missing"):
        rehydrate(blobs, {"sha256": sha, "byte_start": 0})


def test_parse_byte_range_for_the_cli():
    """``--bytes START:END`` parses to a half-open range; malformed ranges are input errors."""
    assert parse_byte_range("480:510") == (480, 510)
    assert parse_byte_range("3:") == (3, None) and parse_byte_range(":7") == (None, 7)
    for bad in ("480", "a:b", "10:2", "-1:4", ":", "3:-1", "1:2:3"):
        with pytest.raises(InputError) as info:
            parse_byte_range(bad)
        assert info.value.field == "byte_range"


@given(st.integers(-5, 60), st.integers(-5, 60), st.integers(0, 50))
def test_a_bad_range_says_what_is_wrong_with_it(start: int, end: int, size: int):
    """A range inside the content passes; otherwise the error says negative, reversed or past the end."""
    if 0 <= start <= end <= size:
        check_range(start, end, size, "blob x")
        return
    with pytest.raises(InputError) as info:
        check_range(start, end, size, "blob x")
    assert info.value.field == "byte_range"
    if min(start, end) < 0:
        assert "negative" in str(info.value)
    elif start > end:
        assert f"start {start} is after its end {end}" in str(info.value)
    else:
        assert f"past the end of blob x ({size} bytes)" in str(info.value)
