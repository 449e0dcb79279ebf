"""Images inside tool output reach the model as images (Anthropic) or as references (OpenAI Chat), never as
base64 text, and are costed as images.

Generated outputs: a real image (Pillow, random size and format, noisy pixels so the base64 is long) placed in
every shape a screenshot tool returns it (MCP image item, Anthropic image block, OpenAI image part, data URL in
text, bare base64 in a JSON field, raw image bytes), among random other fields and text.
"""

from __future__ import annotations

import base64
import io
import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.serialize.images import anthropic_image_tokens, openai_image_tokens
from ctxledger.serialize.tool_images import _LONG_BASE64_RE, _long_base64_run, tool_output_parts
from ctxledger.testing import MemoryStore

FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


def noisy_image(width: int, height: int, fmt: str, seed: int) -> bytes:
    """A real image file of noise (it does not compress, like a screenshot's detail)."""
    rng = random.Random(seed)
    image = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


SHAPES = ("mcp", "anthropic", "openai_part", "data_url_text", "bare_json", "binary")


@st.composite
def screenshot(draw: st.DrawFn) -> dict:
    """A tool output holding one image: ``{"output", "media_type", "b64", "size", "media"}``."""
    width, height = draw(st.integers(40, 260)), draw(st.integers(40, 260))
    fmt = draw(st.sampled_from(sorted(FORMATS)))
    data = noisy_image(width, height, fmt, draw(st.integers(0, 10_000)))
    b64 = base64.b64encode(data).decode("ascii")
    media = FORMATS[fmt]
    shape = draw(st.sampled_from(SHAPES))
    note = draw(st.sampled_from(["Screenshot of https://shop.example/checkout", "Rendered chart q3.png", "ok"]))
    extra = draw(st.dictionaries(st.sampled_from(["url", "title", "step", "viewport"]), st.text(max_size=20)))
    before = draw(st.booleans())
    if shape == "mcp":
        items = [{"type": "text", "text": note}]
        image = {"type": "image", "data": b64, "mimeType": media}
        output = json.dumps({"content": [image, *items] if before else [*items, image], **extra})
    elif shape == "anthropic":
        block = {"type": "image", "source": {"type": "base64", "media_type": media, "data": b64}}
        output = json.dumps(
            [block, {"type": "text", "text": note}] if before else [{"type": "text", "text": note}, block]
        )
    elif shape == "openai_part":
        part = {"type": "image_url", "image_url": {"url": f"data:{media};base64,{b64}"}}
        output = json.dumps({"result": [{"type": "text", "text": note}, part], **extra})
    elif shape == "data_url_text":
        url = f"data:{media};base64,{b64}"
        output = f"{url}\n{note}" if before else f"{note}\nsaved: {url}\ndone"
    elif shape == "bare_json":
        output = json.dumps({**extra, "screenshot": b64, "note": note})
    else:
        output = data
    return {"output": output, "b64": b64, "size": (width, height), "media": media, "shape": shape}


def _assemble(shot: dict, api: str, model: str):
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "shots")
    g.system("sys", "You are a browsing agent.")
    g.user("u1", "Open the checkout page and tell me what you see.")
    media_type = "image/png" if shot["shape"] == "binary" else "application/json"
    g.tool(
        "shot", "browser.screenshot", {"url": "https://shop.example/checkout"}, shot["output"], media_type=media_type
    )
    g.user("u2", "What does the page show?")
    return g, ledger.assemble(g.conversation_id, now=g.now, api=api, model=model, window_tokens=32_000)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shot=screenshot())
def test_anthropic_gets_an_image_block_costed_as_an_image(shot):
    """Anthropic: the tool_result carries the image as a base64 image block; the text holds no base64."""
    g, asm = _assemble(shot, "anthropic-messages", "claude-sonnet-4-5")
    results = [
        b
        for m in asm.payload["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    (result,) = results
    images = [b for b in result["content"] if b["type"] == "image"]
    texts = [b["text"] for b in result["content"] if b["type"] == "text"]
    assert [i["source"] for i in images] == [{"type": "base64", "media_type": shot["media"], "data": shot["b64"]}]
    assert all(shot["b64"][:200] not in t for t in texts)
    assert any("[image 1: " in t for t in texts)
    entry = next(e for e in asm.manifest["included"] if e["ref"] == g.id("shot"))
    assert entry["tokens"] < anthropic_image_tokens(shot["size"]) + 400


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shot=screenshot())
def test_openai_chat_gets_a_reference_never_base64(shot):
    """OpenAI Chat tool messages take text only: the image is named by its artifact, its base64 is nowhere."""
    g, asm = _assemble(shot, "openai-chat", "gpt-4o")
    body = canonical_json(asm.payload)
    assert shot["b64"][:200] not in body
    tool = next(m for m in asm.payload["messages"] if m["role"] == "tool")
    text = json.dumps(tool["content"])
    assert f"artifact {g.id('art-shot')} holds it" in text
    assert asm.input_tokens < 600


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shot=screenshot())
def test_parts_keep_the_text_and_the_image(shot):
    """The parts are the output's text with a placeholder, then the image as a data URL (a binary: bytes)."""
    if shot["shape"] == "binary":
        return
    parts = tool_output_parts(shot["output"])
    assert parts is not None
    assert parts[1:] == ({"type": "image_url", "image_url": {"url": f"data:{shot['media']};base64,{shot['b64']}"}},)
    assert shot["b64"][:100] not in parts[0]["text"] and "[image 1: " in parts[0]["text"]


@given(text=st.text(max_size=400))
@settings(max_examples=100, deadline=None)
def test_text_without_images_is_left_alone(text):
    """Ordinary output (no image in it) stays a string."""
    assert tool_output_parts(text) is None or "data:image/" in text


def test_openai_image_part_in_a_user_turn_is_still_costed_as_an_image():
    """The reference applies to tool results only; a user image part keeps its provider rate (case B08)."""
    assert openai_image_tokens((1024, 1024), "high") == 765


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    shot=screenshot(),
    lead=st.sampled_from(["", "\n", "  ", "\r\n\t "]),
    indent=st.sampled_from([None, 2]),
)
def test_bare_base64_is_found_in_json_whatever_its_layout(shot, lead, indent):
    """A bare base64 image string in JSON is found with leading whitespace and indentation too."""
    output = lead + json.dumps({"screenshot": shot["b64"], "note": "ok"}, indent=indent)
    parts = tool_output_parts(output)
    assert parts is not None and parts[1]["image_url"]["url"].endswith(shot["b64"])


@given(
    run=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", min_size=256),
    before=st.text(max_size=40).filter(lambda s: not s.lstrip().startswith(("{", "["))),
    after=st.text(max_size=40),
)
@settings(max_examples=60, deadline=None)
def test_long_base64_runs_in_plain_text_are_text(run, before, after):
    """Outside JSON, only a ``data:image/…;base64,`` URL is an image: a long base64-looking run stays text."""
    text = before + run + after
    assert tool_output_parts(text) is None or "data:image/" in text or '"image' in text


@given(
    pieces=st.lists(
        st.one_of(
            st.text(alphabet="ABCxyz019+/", min_size=100, max_size=400),
            st.text(alphabet='"{}:, \n=-_é', max_size=3),
            st.text(max_size=20),
        ),
        max_size=8,
    )
)
@settings(max_examples=300, deadline=None)
def test_the_block_check_finds_a_long_run_exactly_when_the_regex_does(pieces):
    """Measuring only whole base64 blocks never misses a run the regex would find, nor finds one it would not."""
    text = "".join(pieces)
    assert _long_base64_run(text) == (_LONG_BASE64_RE.search(text) is not None)
