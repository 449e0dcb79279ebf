"""A cut ToolBench ``{"error", "response"}`` envelope: the response is recovered, never silently shortened."""

from __future__ import annotations

import pytest

from ctxledger.represent.extract._truncated import envelope_response


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ('abc"}', "abc"),  # whole
        ("abc def", "abc def"),  # cut in plain text: every character kept
        ("caf\\u00e9 ok", "café ok"),  # an escape before the cut is decoded
        ("caf\\u00", "caf"),  # a \\u escape cut before its fourth digit is dropped, nothing before it
        ("caf\\", "caf"),  # a dangling backslash is dropped
    ],
)
def test_envelope_response_recovers_the_cut_string(tail, expected):
    """Only a cut escape at the very end is dropped; a string with no escape keeps its last character."""
    assert envelope_response('{"error": "", "response": "' + tail) == ("", expected)


def test_an_undecodable_response_is_none_not_a_shorter_string():
    """A response that cannot be decoded (a bad escape far from the end) gives None rather than a guess."""
    assert envelope_response('{"error": "", "response": "a\\x41 and then plenty of ordinary text') is None
