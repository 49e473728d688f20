"""Tests of dlbook.interact: static frames, dedupe, modes, live widgets, errors."""
from __future__ import annotations

import base64
import json
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from dlbook import interact  # noqa: E402
from dlbook.interact import (  # noqa: E402
    figure_mode,
    frame_update_time,
    interactive_figure,
    render_frames,
    static_html,
)


def plot_line(slope, kind="solid", offset=0.0):
    """A tiny deterministic figure that differs for every (slope, kind)."""
    fig, ax = plt.subplots(figsize=(2.0, 1.5), dpi=40)
    ax.plot([0, 1], [offset, offset + slope], linestyle="-" if kind == "solid" else "--")
    ax.set_ylim(-1, 3)
    ax.set_title(f"{slope} {kind}")
    return fig


def plot_ignoring(slope, ignored):
    """The picture does not depend on ``ignored``: frames must be shared."""
    return plot_line(slope)


PARAMS = {"slope": [0.5, 1.0, 2.0], "kind": ["solid", "dashed"]}


def parse(html_text):
    """The data block, the div attributes and the initial image of a static figure."""
    div = re.search(r'<div class="dlbook-interact" id="([^"]+)" data-frames="(\d+)" '
                    r'data-grid="(\d+)"', html_text)
    data = json.loads(re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>',
                                html_text, re.S).group(1))
    src = re.search(r'<img class="dlbook-interact-frame"[^>]* src="data:image/png;base64,'
                    r'([^"]+)"', html_text).group(1)
    return {"id": div.group(1), "frames": int(div.group(2)), "grid": int(div.group(3)),
            "data": data, "src": src}


@pytest.fixture(autouse=True)
def no_open_figures():
    """Every test must leave no matplotlib figure open."""
    plt.close("all")
    yield
    assert plt.get_fignums() == [], "a figure was left open"


# --- static mode -----------------------------------------------------------

def test_static_html_one_frame_per_distinct_picture():
    page = parse(static_html(plot_line, PARAMS))
    assert page["grid"] == 3 * 2
    assert page["frames"] == 6 == len(page["data"]["frames"])
    assert sorted(page["data"]["keys"]) == sorted(f"{i},{j}" for i in range(3) for j in range(2))
    assert sorted(set(page["data"]["keys"].values())) == list(range(6))


def test_identical_frames_are_stored_once():
    keys, frames = render_frames(plot_ignoring, {"slope": [0.5, 1.0, 2.0], "ignored": [1, 2, 3, 4]})
    assert len(keys) == 12 and len(frames) == 3
    assert keys["1,0"] == keys["1,3"] != keys["0,0"]
    page = parse(static_html(plot_ignoring, {"slope": [0.5, 1.0], "ignored": ["a", "b"]}))
    assert (page["grid"], page["frames"]) == (4, 2)


def test_no_network_reference_anywhere():
    text = static_html(plot_line, PARAMS, title="Slopes <and> kinds")
    assert "http://" not in text and "https://" not in text
    _, frames = render_frames(plot_line, PARAMS)
    for png in frames:
        assert png.startswith(b"\x89PNG") and b"http" not in png[:200] and b"matplotlib.org" not in png


def test_defaults_select_the_initial_frame():
    page = parse(static_html(plot_line, PARAMS, defaults={"slope": 2.0, "kind": "dashed"}))
    keys, frames = render_frames(plot_line, PARAMS)
    assert base64.b64decode(page["src"]) == frames[keys["2,1"]]
    html_text = static_html(plot_line, PARAMS, defaults={"slope": 2.0, "kind": "dashed"})
    assert 'max="2" step="1" value="2"' in html_text
    assert '<option value="1" selected>dashed</option>' in html_text
    assert ">2</output>" in html_text


def test_first_value_is_the_default_default():
    keys, frames = render_frames(plot_line, PARAMS)
    assert base64.b64decode(parse(static_html(plot_line, PARAMS))["src"]) == frames[keys["0,0"]]


def test_fixed_arguments_reach_plot_fn():
    calls = []

    def plot(slope, offset):
        calls.append(offset)
        return plot_line(slope, offset=offset)

    render_frames(plot, {"slope": [1.0, 2.0]}, fixed={"offset": 0.5})
    assert calls == [0.5, 0.5]


def test_ids_are_stable_and_distinct_for_two_figures():
    first = parse(static_html(plot_line, {"slope": [1.0, 2.0]}))["id"]
    second = parse(static_html(plot_ignoring, {"slope": [1.0, 2.0], "ignored": [0]}))["id"]
    again = parse(static_html(plot_line, {"slope": [1.0, 2.0]}))["id"]
    assert first.startswith("dlbook-interact-plot_line-")
    assert second.startswith("dlbook-interact-plot_ignoring-")
    assert len({first, second, again}) == 3 and again.startswith(first)


def test_script_cannot_be_closed_by_a_value():
    text = static_html(plot_ignoring, {"slope": [1.0], "ignored": ["</script><b>x"]})
    assert text.count("</script>") == 2     # the data block and the logic script
    assert "&lt;/script&gt;&lt;b&gt;x" in text


def test_interactive_figure_static_displays_html(monkeypatch):
    shown = []
    monkeypatch.setenv("DLBOOK_FIGURES", "static")
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    assert interactive_figure(plot_line, PARAMS, {"slope": 1.0}) is None
    assert len(shown) == 1 and 'class="dlbook-interact"' in shown[0].data


def test_figures_are_closed_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render_frames(plot_ignoring, {"slope": [0.1 * i for i in range(8)], "ignored": [1, 2, 3]})
    assert plt.get_fignums() == []


# --- mode ------------------------------------------------------------------

def test_figure_mode_honours_the_environment(monkeypatch):
    monkeypatch.setenv("DLBOOK_FIGURES", "live")
    assert figure_mode() == "live"
    monkeypatch.setenv("DLBOOK_FIGURES", "Static")
    assert figure_mode() == "static"
    monkeypatch.setenv("DLBOOK_FIGURES", "animated")
    with pytest.raises(ValueError, match="DLBOOK_FIGURES"):
        figure_mode()


def test_figure_mode_is_static_outside_a_kernel(monkeypatch):
    monkeypatch.delenv("DLBOOK_FIGURES", raising=False)
    monkeypatch.delenv("DLBOOK_BOOK_BUILD", raising=False)
    assert figure_mode() == "static"       # pytest is not an IPython kernel


def test_figure_mode_live_in_a_kernel_static_in_the_book_build(monkeypatch):
    class FakeShell:
        kernel = object()

    monkeypatch.delenv("DLBOOK_FIGURES", raising=False)
    monkeypatch.delenv("DLBOOK_BOOK_BUILD", raising=False)
    monkeypatch.setattr("IPython.get_ipython", lambda: FakeShell())
    assert figure_mode() == "live"
    monkeypatch.setenv("DLBOOK_BOOK_BUILD", "1")
    assert figure_mode() == "static"


# --- live mode -------------------------------------------------------------

def build_live(plot_fn, params, defaults=None, slow=False, title=None):
    spec = interact._validate(plot_fn, params, defaults)
    return interact._build_live(spec, slow=slow, title=title)


def live_controls(box):
    import ipywidgets as widgets

    found = []

    def walk(widget):
        for child in getattr(widget, "children", ()):
            walk(child)
        if isinstance(widget, widgets.ValueWidget):
            found.append(widget)

    walk(box)
    return {control.description: control for control in found}


def test_live_mode_builds_widgets_and_renders_once(capsys):
    import ipywidgets as widgets

    calls = []

    def plot(slope, kind, data):
        calls.append((slope, kind, data))
        return plot_line(slope, kind)

    params = {"slope": [0.5, 1.0, 2.0], "kind": ["solid", "dashed"],
              "data": ["a", "b", "c", "d", "e"]}
    box = build_live(plot, params, {"slope": 1.0}, title="Slopes")
    assert isinstance(box, widgets.Box)
    controls = live_controls(box)
    assert isinstance(controls["slope"], widgets.SelectionSlider)
    assert controls["slope"].continuous_update is True
    assert isinstance(controls["kind"], widgets.ToggleButtons)
    assert isinstance(controls["data"], widgets.Dropdown)
    assert calls == [(1.0, "solid", "a")]            # only the current frame, nothing precomputed
    controls["slope"].value = 2.0
    controls["kind"].value = "dashed"
    assert calls[1:] == [(2.0, "solid", "a"), (2.0, "dashed", "a")]


def test_live_mode_slow_updates_on_release_only():
    controls = live_controls(build_live(plot_line, PARAMS, slow=True))
    assert controls["slope"].continuous_update is False
    assert controls["slope"].label == "0.5" and controls["slope"].value == 0.5


def test_live_mode_reports_a_broken_plot_fn_at_construction():
    with pytest.raises(TypeError, match="plot_fn"):
        build_live(lambda slope: None, {"slope": [1, 2]})


def test_interactive_figure_live_displays_the_widget(monkeypatch):
    import ipywidgets as widgets

    shown = []
    monkeypatch.setenv("DLBOOK_FIGURES", "live")
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    assert interactive_figure(plot_line, PARAMS, slow=True) is None
    assert isinstance(shown[-1], widgets.VBox)     # the figure went into its Output first


# --- timing ----------------------------------------------------------------

def test_frame_update_time_is_positive():
    seconds = frame_update_time(plot_line, PARAMS, {"slope": 2.0})
    assert isinstance(seconds, float) and 0 < seconds < 30


# --- errors ----------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, match", [
    ({"plot_fn": "plot"}, TypeError, "plot_fn must be callable"),
    ({"params": [("slope", [1])]}, TypeError, "params must be a dict"),
    ({"params": {}}, ValueError, "params is empty"),
    ({"params": {"slope": []}}, ValueError, r"params\['slope'\] is empty"),
    ({"params": {"slope": 3}}, TypeError, r"params\['slope'\] must be a list"),
    ({"params": {"slope": "abc"}}, TypeError, r"params\['slope'\] must be a list"),
    ({"params": {"slope": [1, 2, 1]}}, ValueError, r"params\['slope'\] has duplicate"),
    ({"params": {"slope": [1, "two"]}}, ValueError, r"params\['slope'\] mixes types"),
    ({"params": {"slope": [1, None]}}, TypeError, r"params\['slope'\] may hold"),
    ({"params": {"not a name": [1]}}, ValueError, "params keys"),
    ({"params": {"slope": list(range(9)), "kind": list("abcdefgh")}}, ValueError,
     "params spans 72 grid points"),
    ({"defaults": [1.0]}, TypeError, "defaults must be a dict"),
    ({"defaults": {"angle": 1.0}}, ValueError, "defaults names 'angle'"),
    ({"defaults": {"slope": 3.0}}, ValueError, r"defaults\['slope'\] = 3.0 is not one of"),
    ({"defaults": {"kind": "dotted"}}, ValueError, r"defaults\['kind'\]"),
    ({"fixed": ["offset"]}, TypeError, "fixed must be a dict"),
    ({"fixed": {"slope": 1.0}}, ValueError, "fixed and params both set slope"),
    ({"max_frames": 0}, ValueError, "max_frames"),
    ({"title": 3}, TypeError, "title"),
    ({"dpi": -5}, ValueError, "dpi"),
])
def test_bad_arguments_name_the_argument(kwargs, error, match):
    arguments = {"plot_fn": plot_line, "params": PARAMS, **kwargs}
    with pytest.raises(error, match=match):
        static_html(**arguments)


@pytest.mark.slow
def test_max_frames_can_be_raised_deliberately():
    keys, _ = render_frames(plot_ignoring, {"slope": [1.0], "ignored": list(range(70))},
                            max_frames=70)
    assert len(keys) == 70


def test_plot_fn_must_return_a_figure():
    def returns_axes(slope):
        fig, ax = plt.subplots()
        return ax

    with pytest.raises(TypeError, match=r"plot_fn \(returns_axes\) must return a matplotlib "
                                        r"Figure, but it returned <Axes"):
        render_frames(returns_axes, {"slope": [1.0]})
    with pytest.raises(TypeError, match="plot_fn"):
        frame_update_time(lambda slope: None, {"slope": [1.0]})


def test_interactive_figure_checks_slow():
    with pytest.raises(TypeError, match="slow"):
        interactive_figure(plot_line, PARAMS, slow="yes")


def test_static_figure_logs_timings_when_asked(tmp_path, monkeypatch):
    import json

    from dlbook import interact

    log = tmp_path / "figures.jsonl"
    monkeypatch.setenv(interact.TIMING_LOG_ENV, str(log))
    monkeypatch.setenv(interact.FIGURES_ENV, "static")

    def tiny_plot(a=1):
        fig, ax = plt.subplots(figsize=(1, 1))
        ax.plot([0, a])
        return fig

    interact.interactive_figure(tiny_plot, params={"a": [1, 2]})
    record = json.loads(log.read_text().splitlines()[0])
    assert record["figure"] == "tiny_plot" and record["grid"] == 2 and record["unique_frames"] == 2
    assert record["update_s"] > 0 and record["precompute_s"] > 0


@pytest.mark.slow
def test_live_mode_in_a_real_kernel_shows_widgets(monkeypatch):
    """In a kernel with DLBOOK_FIGURES=live the cell outputs a widget view, not static HTML."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv(interact.FIGURES_ENV, "live")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\n"
        "from dlbook.interact import interactive_figure\n"
        "def line_figure(slope=1):\n"
        "    fig, ax = plt.subplots(figsize=(2, 2))\n"
        "    ax.plot([0, slope])\n"
        "    return fig\n"
        "interactive_figure(line_figure, params={'slope': [1, 2, 3]})")]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    assert any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in outputs)
    assert not any("dlbook-interact" in out.get("data", {}).get("text/html", "") for out in outputs)
    widget_state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = {model["model_name"] for model in widget_state.values()}
    assert "SelectionSliderModel" in models and "OutputModel" in models
