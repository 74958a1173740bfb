"""The viewer in a real browser: Debian's Chromium driven by Playwright (Playwright's own browser download is not
used; ``apt-get install chromium``). A reader's path through two toy runs: the index, a cell's chains, the outcome
filter, one chain with its inserted text and its continuations' verdicts, the compare view. With ``--screenshots
DIR`` each view is saved there, for a reviewer who does not run anything."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

playwright = pytest.importorskip("playwright.sync_api")

from recovery.viewer.app import Viewer, create_app
from recovery.viewer.command import bind

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def url(before_run, after_run):
    """The viewer of the two toy runs, served by uvicorn on a free loopback port for the module."""
    import uvicorn

    sock = bind("127.0.0.1", 0)
    app = create_app(Viewer.load(before_run.path, after_run.path))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    yield page
    page.close()


@pytest.fixture
def shot(screenshots):
    """``shot(page, name)``: save the whole page as ``DIR/<name>.png`` under ``--screenshots DIR`` (else nothing)."""

    def save(page, name: str) -> None:
        if screenshots is not None:
            page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)

    return save


def test_from_a_cell_to_one_chain(page, shot, url, before_run):
    page.goto(f"{url}/cells")
    assert page.locator("h1").inner_text().startswith("Cells of")
    shot(page, "1-cells")
    page.locator('a[href^="/chains?"]').first.click()
    page.wait_for_url("**/chains?*intervention=*")
    assert page.locator("#total").inner_text().startswith("6 chains")
    shot(page, "2-chains-of-a-cell")

    page.select_option('select[name="outcome"]', "mixed")
    page.locator('button[type="submit"]').click()
    page.wait_for_url("**outcome=mixed*")
    assert page.locator("#total").inner_text().startswith("6 chains")
    assert page.locator(".outcome").all_inner_texts() == ["mixed"] * 6
    shot(page, "3-chains-filtered-by-outcome")

    page.locator('a[href^="/chain/"]').first.click()
    page.wait_for_url("**/chain/*")
    chain_id = page.url.rsplit("/", 1)[1]
    chain = next(c for _, c in before_run.chains if c.id == chain_id)
    inserted = page.locator("#prefix mark.inserted")
    assert inserted.is_visible() and inserted.inner_text() == chain.inserted_text.strip("\n")
    continuations = page.locator(".cont")
    assert continuations.count() == 2
    verdicts = [continuations.nth(i).locator(".verdict").inner_text() for i in range(2)]
    assert sorted(verdicts) == ["correct", "wrong"]
    assert page.locator("#original .cut").is_visible()
    shot(page, "4-one-chain")


def test_the_compare_view(page, shot, url, before_run):
    page.goto(f"{url}/compare")
    assert page.locator("#total").inner_text().startswith(f"{len(before_run.chains)} chains improved")
    page.select_option('select[name="intervention"]', "toy/complete_step")
    page.locator('button[type="submit"]').click()
    page.wait_for_url("**intervention=toy*")
    assert page.locator("#total").inner_text().startswith(f"{len(before_run.chains) // 3} chains improved")
    shot(page, "5-compare")
    page.locator('a[href^="/compare/"]').first.click()
    page.wait_for_url("**/compare/*")
    assert "mixed" in page.locator("#before").inner_text()
    assert "recovered (2 of 2 correct)" in page.locator("#after").inner_text()
    shot(page, "6-compare-one-chain")
