"""The web inspector in headless Debian chromium driven by Playwright: login, assembly picture, provenance."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright
from service_helpers import live_server

from ctxledger.service.auth import SESSION_COOKIE

if TYPE_CHECKING:
    from service_helpers import Served

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "inspector.png"
CONV = "tau-task2-trial1"

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="needs Debian's chromium (.ci/run installs it)"
)


@pytest.fixture(scope="module")
def live(served: Served) -> Iterator[tuple[str, dict[str, str]]]:
    """The served store behind a real uvicorn server on loopback, with two assemblies of the demo conversation."""
    auth = served.auth("acme")
    for window in (12000, 6000):
        body = {"window_tokens": window, "output_tokens": 1000, "margin_tokens": 200}
        assert served.client.post(f"/v1/conversations/{CONV}/assemble", headers=auth, json=body).status_code == 200
    with live_server(served.url) as base:
        yield base, served.keys


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def test_without_a_key_the_inspector_asks_for_one_and_refuses_a_wrong_one(live, browser: Browser) -> None:
    base, _ = live
    page = browser.new_page()
    answer = page.goto(f"{base}/inspect")
    assert answer is not None and answer.status == 401
    page.fill("input[name=key]", "ctxl_000000000000_" + "x" * 43)
    page.click("button[type=submit]")
    assert "unknown or revoked" in page.content()
    page.close()


def test_login_shows_the_assembly_as_a_picture_with_diff_and_provenance(live, browser: Browser, tmp_path: Path) -> None:
    """The README screenshot (docs/inspector.png) is rewritten when CTXLEDGER_UPDATE_SCREENSHOTS is set."""
    base, keys = live
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/inspect/login")
    page.fill("input[name=key]", keys["acme"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/inspect")
    assert CONV in page.inner_text("table")
    page.click(f"text={CONV}")
    assert page.locator("svg[aria-label='tokens over calls'] polyline").count() >= 1
    page.locator("a[href^='/inspect/assemblies/']").last.click()
    bar = page.locator("[aria-label='budget by context class'] div")
    assert bar.count() >= 2  # one segment per context class that used tokens
    text = page.inner_text("main")
    assert "Included (" in text and "Omitted by reason" in text and "notable:" in text
    assert "Diff against the previous assembly" in text and "entered" in text
    shot = SCREENSHOT if os.environ.get("CTXLEDGER_UPDATE_SCREENSHOTS") else tmp_path / "inspector.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    page.locator("main table a").last.click()
    item = page.inner_text("main")
    assert "Provenance" in item and "Why" in item
    page.close()


def test_the_rehydrate_button_obeys_the_policy(live, browser: Browser) -> None:
    base, keys = live
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {keys['acme']}"})
    page = context.new_page()
    page.goto(f"{base}/inspect/conversations/{CONV}")
    page.locator("a[href^='/inspect/assemblies/']").last.click()
    page.locator("main table a", has_text=re.compile(r"^16$")).click()  # a tool result of 696 bytes
    assert "artifact" in page.inner_text("main")  # provenance: call -> artifact -> bytes
    assert "sha256:" in page.inner_text("main")
    with page.expect_download() as download:
        page.click("button:has-text('Rehydrate')")
    data = Path(download.value.path()).read_bytes()
    assert len(data) == 696 and b'"reservation_id": "JG7FMM"' in data
    context.close()


def test_another_tenants_pages_are_the_same_html_404_as_missing_ones(live, browser: Browser) -> None:
    base, keys = live
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {keys['globex']}"})
    page = context.new_page()
    texts = []
    for path in (f"/inspect/conversations/{CONV}", "/inspect/conversations/no-such-conversation"):
        answer = page.goto(f"{base}{path}")
        assert answer is not None and answer.status == 404
        assert answer.headers["content-type"].startswith("text/html")
        texts.append(page.inner_text("main"))
    assert texts[0] == texts[1] and "404" in texts[0]
    context.close()


def test_one_login_keeps_a_server_side_session_not_the_key(live, browser: Browser) -> None:
    base, keys = live
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base}/inspect/login")
    page.fill("input[name=key]", keys["acme"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/inspect")
    (cookie,) = [c for c in context.cookies() if c["name"] == SESSION_COOKIE]
    assert cookie["value"] != keys["acme"] and keys["acme"] not in cookie["value"]
    assert cookie["value"].startswith("ctxs_") and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert not cookie["secure"]  # served over plain http on loopback
    for _ in range(2):  # navigate without logging in again
        page.click(f"text={CONV}")
        assert page.locator("a[href^='/inspect/assemblies/']").count() >= 2
        page.locator("a[href^='/inspect/assemblies/']").first.click()
        assert "Budget by context class" in page.inner_text("main")
        page.click("header >> text=Conversations")
    page.click("text=Log out")
    page.wait_for_url(f"{base}/inspect/login")
    stale = httpx.get(f"{base}/inspect", cookies={SESSION_COOKIE: cookie["value"]})
    assert stale.status_code == 401 and "Log in" in stale.text  # the logged-out session works nowhere
    context.close()
