"""A real headless Chromium drives two static interactive figures on one page."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from dlbook.interact import static_html  # noqa: E402

from browser_util import launch_chromium, record_requests, serve_directory  # noqa: E402

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser


def plot_wave(frequency, shape):
    """Every (frequency, shape) gives a different picture."""
    import numpy as np

    x = np.linspace(0, 1, 200)
    y = np.sin(2 * np.pi * frequency * x)
    fig, ax = plt.subplots(figsize=(4, 2.2), dpi=60)
    ax.plot(x, np.sign(y) if shape == "square" else y)
    ax.set_title(f"{shape}, f = {frequency}")
    return fig


def plot_line(slope, intercept):
    fig, ax = plt.subplots(figsize=(3, 2), dpi=60)
    ax.plot([0, 1], [intercept, intercept + slope])
    ax.set_ylim(-3, 3)
    return fig


@pytest.fixture(scope="module")
def page_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("interact_page")
    figures = [
        static_html(plot_wave, {"frequency": [1, 2, 3], "shape": ["sine", "square"]},
                    title="A wave"),
        static_html(plot_line, {"slope": [-1.0, 0.0, 1.0], "intercept": [0.0, 0.5]},
                    defaults={"slope": 0.0}),
    ]
    (folder / "index.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>figures</title></head>"
        "<body><p>Two figures.</p>" + "\n".join(figures) + "</body></html>", encoding="utf-8")
    return folder


def test_static_controls_change_the_image(page_dir, tmp_path):
    with serve_directory(page_dir) as base_url, sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 900})
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            log = record_requests(page)
            page.goto(base_url + "index.html")
            figures = page.locator("div.dlbook-interact")
            assert figures.count() == 2

            def src(figure):
                return figure.locator("img").get_attribute("src")

            def all_srcs():
                return [src(figures.nth(i)) for i in range(2)]

            # Every slider: one step right changes the picture and the label,
            # and leaves the other figure alone.
            for index in range(2):
                figure = figures.nth(index)
                for slider in figure.locator("input[type=range]").all():
                    before_srcs, label = all_srcs(), slider.locator("xpath=..").locator("output")
                    before_label = label.text_content()
                    slider.focus()
                    page.keyboard.press("ArrowRight")
                    after_srcs = all_srcs()
                    assert after_srcs[index] != before_srcs[index]
                    assert after_srcs[1 - index] == before_srcs[1 - index]
                    assert label.text_content() != before_label

            # The string control of the first figure.
            wave = figures.nth(0)
            before = src(wave)
            wave.locator("select").select_option(label="square")
            assert src(wave) != before
            wave.locator("select").select_option(label="sine")
            assert src(wave) == before

            # Setting a slider programmatically + an input event works as well.
            line = figures.nth(1)
            line.locator("input[type=range]").first.evaluate(
                "el => { el.value = '0'; el.dispatchEvent(new Event('input')); }")
            assert line.locator("output").first.text_content() == "-1"

            page.screenshot(path=str(tmp_path / "interact.png"), full_page=True)
            assert (tmp_path / "interact.png").stat().st_size > 1000
            assert errors == []
            assert log.urls and log.external() == []
        finally:
            browser.close()
