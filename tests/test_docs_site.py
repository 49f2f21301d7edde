"""The documentation site, built as `make docs` builds it (strict) and looked at in a real browser.

Headless Chromium (Debian's, driven by playwright; no browser is downloaded) opens the built site from
``file://``, as a reader of ``site/`` offline does: the home page, a how-to guide and a generated results page
render, every image on them loads, the navigation leads from page to page, and the search finds pages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).parent / "mkdocs"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium")
    if chromium is None:
        why = "Debian's chromium is not installed (apt-get install chromium)"
        pytest.fail(why) if os.environ.get("NAS_REQUIRE_SERVICES") else pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def _open(browser, url: str):
    """The page at ``url``, and what went wrong on it: script errors, and any request off this machine (the
    site reads offline: none)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    local = ("file:", "data:", "blob:", "about:")
    page.on("request", lambda r: None if r.url.startswith(local) else errors.append(f"fetched {r.url}"))
    page.goto(url)
    page.wait_for_load_state("load")
    return page, errors


def _images_loaded(page) -> list[str]:
    """The images of the page that did not load (none, on a page that renders)."""
    return page.eval_on_selector_all(
        "article img", "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )


def test_the_strict_build_has_every_section(site: Path) -> None:
    for page in ("index", "concepts/index", "how-to/index", "reference/cli", "reference/api", "reference"):
        assert (site / f"{page}.html").is_file(), page
    generated = sorted(p.stem for p in (site / "results").glob("*.html"))
    assert "search_vs_baselines" in generated and "evaluator_quality" in generated and len(generated) > 15
    cli = (site / "reference" / "cli.html").read_text()
    assert "nas search" in cli and "--budget" in cli and "nas retrain" in cli  # generated from the commands


@pytest.mark.parametrize(
    "path, heading",
    [
        ("index.html", "Getting started"),
        ("how-to/own-dataset.html", None),
        ("results/search_vs_baselines.html", "search_vs_baselines"),
    ],
)
def test_a_page_renders_with_its_images(site: Path, browser, path: str, heading: str | None) -> None:
    page, errors = _open(browser, (site / path).as_uri())
    try:
        title = page.locator("article h1").first.inner_text()
        assert title.strip(), path
        if heading is not None:
            assert heading in title
        assert page.locator("article img").count() >= (1 if path != "how-to/own-dataset.html" else 0)
        assert _images_loaded(page) == [], path
        assert page.locator("nav.md-nav--primary a").count() > 20  # the site's navigation is there
        assert errors == [], errors
    finally:
        page.close()


def test_the_navigation_leads_from_page_to_page(site: Path, browser) -> None:
    page, errors = _open(browser, (site / "index.html").as_uri())
    try:
        page.locator("nav.md-nav--primary a[href$='concepts/fidelity.html']").first.click(force=True)
        page.wait_for_load_state("load")
        assert page.url.endswith("concepts/fidelity.html")
        assert "ladder" in page.locator("article h1").first.inner_text().lower()
        assert errors == []
    finally:
        page.close()


def test_the_search_finds_pages(site: Path, browser) -> None:
    page, errors = _open(browser, (site / "index.html").as_uri())
    try:
        box = page.locator("input[data-md-component='search-query']")
        box.click()
        box.press_sequentially("postgres", delay=30)  # typed, as a reader does: the search runs on each key
        results = page.locator(".md-search-result__item")
        results.first.wait_for(timeout=30_000)
        links = results.locator("a").evaluate_all("links => links.map(a => a.href)")
        assert any("how-to/postgresql.html" in link for link in links), links
        assert errors == []
    finally:
        page.close()
