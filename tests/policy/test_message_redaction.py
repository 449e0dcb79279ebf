"""A secret in an error message is withheld alone: the rest of the message still says what is wrong.

Secrets are drawn from the secret corpus's single-line formats; a message holds one inside a file path, an
assignment or free text. Whatever the narrowing keeps, no fingerprint of the secret and no finding remains.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from secret_corpus import FORMATS, MULTILINE, draw

from ctxledger.policy.message_redaction import redact_message, redact_path
from ctxledger.policy.secrets import default_scanner

SINGLE_LINE = sorted(set(FORMATS) - MULTILINE)
WORDS = sorted(f for f in SINGLE_LINE if not any(c in draw(f, 0)[0] for c in " '\""))
"""Formats whose value is one word (no spaces or quotes): a file name or a path part can be one."""

folders = st.lists(st.sampled_from(["srv", "in", "data", "tmp", "home", "x-1"]), min_size=0, max_size=4)


def _absent(fingerprints: list[str], text: str) -> bool:
    return all(f not in text for f in fingerprints) and not default_scanner().scan(text)


@settings(max_examples=60, deadline=None)
@given(fmt=st.sampled_from(WORDS), seed=st.integers(0, 10_000), folders=folders)
def test_a_secret_in_a_path_is_withheld_and_the_rest_of_the_message_kept(fmt: str, seed: int, folders) -> None:
    value, fingerprints = draw(fmt, seed)
    where = "/" + "".join(f"{f}/" for f in folders)
    out = redact_message(f"cannot read {where}{value}.json: no such file or directory")
    assert _absent(fingerprints, out)
    assert out.startswith(f"cannot read {where}[withheld by policy: ")
    assert out.endswith(": no such file or directory")


@settings(max_examples=80, deadline=None)
@given(
    fmt=st.sampled_from(SINGLE_LINE),
    seed=st.integers(0, 10_000),
    before=st.text(max_size=20),
    after=st.text(max_size=20),
    glue=st.sampled_from([" ", ": ", "/", "=", "\n"]),
)
def test_no_secret_the_scanner_finds_survives_in_a_message(fmt: str, seed: int, before: str, after: str, glue) -> None:
    value, fingerprints = draw(fmt, seed)
    message = f"{before}{glue}{value}{glue}{after}"
    out = redact_message(message)
    if default_scanner().scan(message):
        assert _absent(fingerprints, out)
    else:
        assert out == message


@settings(max_examples=30, deadline=None)
@given(fmt=st.sampled_from(WORDS), seed=st.integers(0, 10_000), index=st.integers(0, 5))
def test_a_field_path_withholds_only_the_part_holding_a_secret(fmt: str, seed: int, index: int) -> None:
    value, fingerprints = draw(fmt, seed)
    out = redact_path(("body", "messages", index, value))
    assert _absent(fingerprints, out)
    assert out.startswith(f"body.messages[{index}].[withheld by policy: ") and out.endswith("]")
    assert redact_path(("body", "messages", index, "content")) == f"body.messages[{index}].content"


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), folders=folders, tail=st.sampled_from(["", "/x.json", " HTTP/1.1"]))
def test_a_key_with_slashes_is_withheld_whole_where_a_detector_matches_its_start(seed: int, folders, tail) -> None:
    """``API_KEY=<base64 with "/" and "+">``: the assignment matches before the first "/"; the rest goes too."""
    value, fingerprints = draw("bare_api_key", seed)
    out = redact_message("GET /" + "".join(f"{f}/" for f in folders) + value + tail)
    assert _absent(fingerprints, out)
    assert not any(piece in out for piece in fingerprints[0].replace("+", "/").split("/") if len(piece) >= 4)
