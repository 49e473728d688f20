"""The built book in a real headless Chromium: figures, math, offline."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import yaml

from browser_util import BOOK_HTML, built_book, launch_chromium, record_requests, serve_directory

ROOT = Path(__file__).resolve().parents[2]
HTML = BOOK_HTML["reference"]
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHAPTERS = sorted(path.stem for path in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site():
    """Build the book from the executed chapters (instant when nothing changed) and serve it."""
    with serve_directory(built_book("reference")) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def browser():
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def _open(browser, url):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests = record_requests(page)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url, wait_until="networkidle")
    return page, requests, errors


def _choose_until_image_changes(select, image, before) -> bool:
    """Pick the select's other options in turn until the picture changes."""
    for value in select.locator("option").evaluate_all("options => options.map(option => option.value)"):
        select.select_option(value)
        if image.get_attribute("src") != before:
            return True
    return False


def _move_until_image_changes(page, slider, image, before) -> bool:
    """Step the slider right, then left, until the picture changes (steps may repeat a frame)."""
    slider.focus()
    steps = int(slider.get_attribute("max") or 0)
    for key in ("ArrowRight", "ArrowLeft"):
        for _ in range(steps):
            page.keyboard.press(key)
            if image.get_attribute("src") != before:
                return True
    return False


def test_intro_page_opens_offline(site, browser):
    page, requests, errors = _open(browser, site + "index.html")
    assert "Deep Learning by Experiment" in page.title()
    page.wait_for_selector("mjx-container", state="attached", timeout=15000)
    assert requests.external() == [] and errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "intro.png"))
    page.close()


def _figures_shown(chapter: str) -> int:
    """How many matplotlib figures the chapter's code shows."""
    import nbformat

    notebook = nbformat.read(ROOT / "book" / f"{chapter}.ipynb", as_version=4)
    return sum(cell.source.count("plt.show()") for cell in notebook.cells if cell.cell_type == "code")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_figures_math_and_no_external_requests(site, browser, chapter):
    page, requests, errors = _open(browser, f"{site}book/{chapter}.html")
    # Math: MathJax (served with the book) typeset the dollar math into visible containers.
    page.wait_for_selector("mjx-container", state="attached", timeout=20000)
    rendered = page.locator("mjx-container").evaluate_all(
        "nodes => nodes.filter(node => node.getBoundingClientRect().width > 0).length")
    assert rendered > 10, f"only {rendered} formulas were typeset"
    figures = page.locator("div.dlbook-interact")
    assert figures.count() >= 1, "the chapter has interactive figures"
    for index in range(figures.count()):
        figure = figures.nth(index)
        figure.scroll_into_view_if_needed()
        image = figure.locator("img").first
        before = image.get_attribute("src")
        if figure.locator("input[type=range]").count():
            slider = figure.locator("input[type=range]").first
            changed = _move_until_image_changes(page, slider, image, before)
        else:  # a figure whose controls are all choices
            changed = _choose_until_image_changes(figure.locator("select").first, image, before)
        assert changed, f"figure {index} of {chapter}: operating its first control did not change the image"
    # Reference solutions are folded away.
    solutions = page.locator("details.hide.above-input")
    assert solutions.count() >= 3
    assert all(solutions.nth(i).get_attribute("open") is None for i in range(solutions.count()))
    # Static figures: one picture in the page for every plt.show() of the chapter.
    pictures = page.locator("div.cell_output img:not(.dlbook-interact-frame)").count()
    assert pictures >= _figures_shown(chapter), f"{chapter}: {pictures} static figures in the page"
    assert requests.external() == [], requests.external()
    assert errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    figures.first.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / f"{chapter}.png"))
    page.close()


@pytest.fixture(scope="module")
def student_site(site):
    """The student edition of the book, built from the same executed chapters."""
    return built_book("student")


def _page_text(path: Path) -> str:
    """The text of a built page, without tags (code is split into highlighting spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def _solution_lines(chapter: str) -> list[str]:
    from dlbook.coursework.notebook import exercise_cells, read_notebook, solution_body

    notebook = read_notebook(ROOT / "book" / f"{chapter}.ipynb")
    return [line.strip() for exercise in exercise_cells(notebook, chapter)
            for line in solution_body(exercise.source) if len(line.strip()) > 25]


def test_student_build_has_stubs_and_no_solutions(site, student_site):
    for chapter in CHAPTERS:
        student_page = _page_text(student_site / "book" / f"{chapter}.html")
        book_page = _page_text(HTML / "book" / f"{chapter}.html")
        assert "NotImplementedError" in student_page
        solution_lines = _solution_lines(chapter)
        assert solution_lines, chapter
        for line in solution_lines:
            assert line in book_page, (chapter, line)  # the full book shows the solutions...
            assert line not in student_page, (chapter, line)  # ...the student build does not


def test_no_solution_is_reachable_from_the_student_book(student_site):
    """No file of the student site (pages, sources, downloads, search index) holds a solution line,
    no link leads to a notebook elsewhere (launch or repository buttons), and the text says what
    a student edition is."""
    lines = {line for chapter in CHAPTERS for line in _solution_lines(chapter)}
    for path in student_site.rglob("*"):
        if not path.is_file() or path.suffix in (".png", ".woff", ".woff2", ".ttf", ".ico", ".svg"):
            continue
        text = path.read_text(errors="ignore")
        if path.suffix in (".html", ".js"):
            text = html.unescape(re.sub(r"<[^>]+>", "", text)) + text
        leaked = [line for line in lines if line in text]
        assert not leaked, (str(path.relative_to(student_site)), leaked[:3])
    repository = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"].rstrip("/")
    for page in student_site.rglob("*.html"):
        links = re.findall(r'href="([^"]*)"', page.read_text())
        for target in ("colab.research.google.com", "mybinder.org", repository):
            # The Colab set-up cell names the repository as the package's source; no page links to it.
            assert not [link for link in links if target in link], (str(page.relative_to(student_site)), target)
        assert "folded away" not in _page_text(page), str(page.relative_to(student_site))
    assert not (student_site / "book" / "instructors.html").exists()
    assert "student edition" in _page_text(student_site / "book" / "intro.html").lower()
