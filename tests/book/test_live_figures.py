"""Live interactive figures in a real JupyterLab: run a chapter, move each figure's control.

The static figures of the built book are tested in test_book_html.py. Here the
same chapter cells run in a live kernel (DLBOOK_FIGURES=live), where
``dlbook.interact`` shows ipywidgets controls that re-render the matplotlib
figure on every change. The test starts JupyterLab on localhost, opens a
temporary copy of the chapter (book/ is never modified), runs all cells from
the Run menu, then operates the first control of every interactive figure (a
slider by keyboard, a toggle by clicking, a dropdown by selecting) and checks
that the figure's image changes and that no cell shows an error.

One chapter by default (CHAPTER); DLBOOK_LIVE_CHAPTERS=03_optimization,04_training
runs others (chapter 3's optimizer race has a toggle, chapter 2's figures only sliders).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from browser_util import launch_chromium, record_requests, run_jupyterlab

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "_build" / "screenshots"

#: The chapter run by default: of the chapters whose cells all pass, it runs fastest with
#: live figures (52-60 s on a busy 2-core machine, chapters 1 and 3 92-100 s; live figures
#: render one frame, so the order differs from the static book's).
CHAPTER = "02_feedforward"
CHAPTERS = [name.strip() for name in os.environ.get("DLBOOK_LIVE_CHAPTERS", CHAPTER).split(",") if name.strip()]

#: Seconds allowed for all cells of the chapter (about 60 s measured on a busy 2-core machine).
RUN_TIMEOUT_S = 420
#: Seconds allowed for one re-render after a control is operated (1-2.5 s measured on a
#: busy 2-core machine, a few tenths of a second on an idle one).
RERENDER_TIMEOUT_S = 15
#: Seconds allowed for JupyterLab to load and the kernel to become idle.
KERNEL_TIMEOUT_S = 120

#: The kernel's environment: a reader's, with live figures drawn by the inline backend.
#: The root conftest sets static figures, strict checks and the book-build marker for
#: nbval, and every process started from the test run would inherit them. Exercise checks
#: print rather than raise, as for a reader: whether a chapter's answers pass is nbval's
#: test, this one is about the figures (checkpoints still raise).
LIVE_ENVIRONMENT = {"DLBOOK_FIGURES": "live", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                    "CI": "true"}  # no progress bars: they are not what this test is about
DROPPED_ENVIRONMENT = ("DLBOOK_BOOK_BUILD", "DLBOOK_CHECKS", "DLBOOK_FIGURE_LOG", "DLBOOK_CHECKPOINT_LOG",
                       "PYTEST_CURRENT_TEST")

#: An interactive figure: the VBox of dlbook.interact, its controls and the Output widget
#: that shows the image (or the error, when a render fails).
FIGURE = ".jp-Cell-outputArea .widget-vbox:has(> .widget-output)"
STDERR = ".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']"
ERROR_TEXT = re.compile(r"Traceback|\b\w*(Error|Exception)\b")

# The page is ready to run cells once the kernel's status in the status bar reads "Idle".
KERNEL_IDLE_JS = """() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .some(item => / \\| Idle$/.test(item.textContent) && !item.textContent.startsWith('No Kernel'))"""
# Run All queues every code cell at once, each showing [*] until it has run; an error
# clears the rest of the queue. No [*] left and an idle kernel: the run is over.
RUN_FINISHED_JS = """() => {
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  return indicator !== null && indicator.dataset.status === 'idle'
    && ![...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].some(p => p.textContent.includes('*'));
}"""
# Times, in the page, the reader's input on a figure (key, pointer or choice) and the
# arrival of a new picture (the Output widget replaces its <img> on every render).
WATCH_FIGURE_JS = """figure => {
  const output = figure.querySelector('.widget-output');
  const before = output.querySelector('img').src;
  const timing = figure.dlbookTiming = {start: null, end: null};
  for (const type of ['keydown', 'pointerdown', 'change']) {
    figure.addEventListener(type, () => { if (timing.start === null) timing.start = performance.now(); },
                            {capture: true});
  }
  new MutationObserver((records, observer) => {
    const img = output.querySelector('img');
    if (timing.start !== null && img && img.src !== before) { timing.end = performance.now(); observer.disconnect(); }
  }).observe(output, {subtree: true, childList: true, attributes: true});
}"""
RERENDER_SECONDS_JS = """figure => figure.dlbookTiming.end === null ? null
                                   : (figure.dlbookTiming.end - figure.dlbookTiming.start) / 1000"""

def live_environment() -> dict:
    env = {key: value for key, value in os.environ.items() if key not in DROPPED_ENVIRONMENT}
    env.update(LIVE_ENVIRONMENT)
    return env


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a temporary folder; yields (base URL, that folder, seconds it took to start)."""
    root = tmp_path_factory.mktemp("live")
    (root / "book").mkdir()
    begin = time.perf_counter()
    with run_jupyterlab(root, env=live_environment()) as url:
        yield url, root, time.perf_counter() - begin


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def figure_cells(notebook: Path) -> list[str]:
    """Ids of the code cells that show an interactive figure."""
    nb = nbformat.read(notebook, as_version=4)
    return [cell.get("id") for cell in nb.cells
            if cell.cell_type == "code" and "interactive_figure(" in cell.source]


def run_all_cells(page) -> tuple[float, float]:
    """Wait for the kernel, Run → Run All Cells, wait for the run to end; returns both waits in seconds."""
    begin = time.perf_counter()
    page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_TIMEOUT_S * 1000, polling=200)
    kernel_seconds = time.perf_counter() - begin
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
    begin = time.perf_counter()
    # The first cell must start, or the kernel never got the request.
    page.wait_for_function("() => /[*\\d]/.test(document.querySelector('.jp-CodeCell .jp-InputPrompt').textContent)",
                           timeout=KERNEL_TIMEOUT_S * 1000, polling=200)
    page.wait_for_function(RUN_FINISHED_JS, timeout=RUN_TIMEOUT_S * 1000, polling=500)
    return kernel_seconds, time.perf_counter() - begin


def error_outputs(scope) -> list[str]:
    """Texts of stderr or error outputs under ``scope`` that report an exception."""
    return [text for text in scope.locator(STDERR).all_text_contents() if ERROR_TEXT.search(text)]


def operate_first_control(page, figure) -> str:
    """Change the figure's first control to another value; returns what was done."""
    control = figure.locator(".widget-hslider, .widget-toggle-buttons, .widget-dropdown").first
    classes = control.get_attribute("class") or ""
    name = control.locator(".widget-label").first.text_content().strip()
    if "widget-toggle-buttons" in classes:
        button = control.locator("button:not(.mod-active)").first
        label = button.text_content().strip()
        button.click()
        return f"toggle {name} -> {label}"
    if "widget-dropdown" in classes:
        select = control.locator("select")
        options = select.locator("option").all_text_contents()
        current = select.evaluate("el => el.selectedIndex")
        select.select_option(index=(current + 1) % len(options))
        return f"dropdown {name} -> {options[(current + 1) % len(options)]}"
    readout = control.locator(".widget-readout")
    before = readout.text_content()
    control.locator(".noUi-handle").first.focus()
    for key in ("ArrowRight", "ArrowLeft"):    # right, unless the slider is at its end
        page.keyboard.press(key)
        if readout.text_content() != before:
            return f"slider {name} {before} -> {readout.text_content()} ({key})"
    raise AssertionError(f"slider {name}: the arrow keys did not move it from {before}")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_live_figures_rerender_in_jupyterlab(browser, lab, chapter, record_property):
    url, root, server_seconds = lab
    source = ROOT / "book" / f"{chapter}.ipynb"
    assert source.is_file(), f"no chapter {source}"
    expected = figure_cells(source)
    assert expected, f"{chapter} has no interactive_figure cell"
    shutil.copy(source, root / "book" / source.name)

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    requests = record_requests(page)
    page_errors, console_errors = [], []
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    try:
        page.goto(f"{url}lab/tree/book/{source.name}?reset")
        kernel_seconds, run_seconds = run_all_cells(page)
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()
        not_run = [i for i, prompt in enumerate(prompts) if not re.search(r"\d", prompt)]
        assert not error_outputs(page) and not not_run, (
            f"{chapter}: cells stopped with an error (code cells not run: {not_run}):\n"
            + "\n".join(error_outputs(page))[-3000:])

        figures = page.locator(FIGURE)
        assert figures.count() == len(expected), \
            f"{chapter}: {figures.count()} live figures on the page, cells {expected} make them"
        shown = [figures.nth(i).locator(".widget-output img").count() for i in range(len(expected))]
        assert shown == [1] * len(expected), f"{chapter}: images per live figure {shown}, one each expected"
        timings = []
        for index in range(figures.count()):
            figure = figures.nth(index)
            figure.scroll_into_view_if_needed()
            figure.evaluate(WATCH_FIGURE_JS)
            action = operate_first_control(page, figure)
            try:
                seconds = page.wait_for_function(RERENDER_SECONDS_JS, arg=figure.element_handle(),
                                                 timeout=RERENDER_TIMEOUT_S * 1000, polling=50).json_value()
            except sync_api.TimeoutError:
                pytest.fail(f"{chapter}, figure {index} (cell {expected[index]}): {action} did not change "
                            f"the image within {RERENDER_TIMEOUT_S} s; errors shown: {error_outputs(figure)}")
            timings.append((expected[index], action, seconds))
            assert error_outputs(figure) == [], f"{chapter}, figure {index}: {action} showed an error"

        record_property("measured", "\n".join(
            [f"live figures of {chapter} in JupyterLab: server started in {server_seconds:.1f} s, notebook open "
             f"with an idle kernel in {kernel_seconds:.1f} s, all cells ran in {run_seconds:.1f} s"]
            + [f"  {cell_id}: {action}: new image {seconds:.2f} s after the input"
               for cell_id, action, seconds in timings]))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"live-{chapter}.png"))
        assert error_outputs(page) == []
        assert page_errors == [], page_errors
        assert console_errors == [], console_errors
        assert requests.external() == [], requests.external()
    finally:
        page.close()
