"""Interactive figures: one call turns a pure plotting function into sliders.

``interactive_figure(plot_fn, params, defaults)`` shows

* in a live kernel (Jupyter, Colab): ipywidgets controls that call
  ``plot_fn`` again whenever the reader moves one. Only the frame the reader
  asks for is rendered; nothing is precomputed.
* in the built HTML book (and in tests): a self-contained HTML control. Every
  point of the parameter grid is rendered once, in advance, to an embedded
  PNG, and a few lines of inline JavaScript swap the image. Nothing is
  fetched from the network, so the figure works offline and without a kernel.

``DLBOOK_FIGURES=static`` or ``DLBOOK_FIGURES=live`` forces a mode.

A plotting function takes keyword parameters and returns a matplotlib
``Figure``; it must be deterministic given its parameters, because the static
mode stores each picture once and reuses it wherever it repeats::

    def plot(margin, data):
        fig, ax = plt.subplots()
        ...
        return fig

    interactive_figure(plot, params={"margin": [0.05, 0.1, 0.2], "data": ["blobs", "moons"]},
                       defaults={"margin": 0.1})
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import itertools
import json
import numbers
import os
import re
import time
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .runtime import in_book_build, in_kernel
from .validation import check_int, describe

#: Environment variable that forces the mode: "static" or "live".
FIGURES_ENV = "DLBOOK_FIGURES"
#: When set, each static figure appends its timings to this JSON-lines file
#: (used by ``python -m dlbook bench``).
TIMING_LOG_ENV = "DLBOOK_FIGURE_LOG"
#: Largest parameter grid the static mode renders unless told otherwise.
MAX_FRAMES = 64
#: Resolution of precomputed frames: a little below the book's 96 dpi, which
#: keeps pages light and the precomputation fast with no visible loss.
STATIC_DPI = 80
#: ToggleButtons up to this many string options, a Dropdown beyond.
MAX_TOGGLE_OPTIONS = 4

__all__ = ["interactive_figure", "figure_mode", "static_html", "render_frames",
           "frame_update_time", "FIGURES_ENV", "MAX_FRAMES"]


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class _Spec:
    """Validated arguments shared by both modes."""

    plot_fn: object
    names: tuple          # parameter names, in the order the controls appear
    values: tuple         # one tuple of allowed values per parameter
    numeric: tuple        # True where a parameter gets a slider
    start: tuple          # index of the initial value of each parameter
    fixed: dict

    @property
    def grid_size(self) -> int:
        size = 1
        for values in self.values:
            size *= len(values)
        return size

    def kwargs(self, indices) -> dict:
        """Keyword arguments for plot_fn at one grid point."""
        chosen = {name: values[i] for name, values, i in zip(self.names, self.values, indices)}
        return {**self.fixed, **chosen}


def _is_number(value) -> bool:
    # bool is an Integral, but a True/False switch is a choice, not a slider.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _kind(value) -> str | None:
    if _is_number(value):
        return "number"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    return None


def _check_values(name: str, values) -> tuple:
    """Check the list of values of one parameter; returns it as a tuple."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"params[{name!r}] must be a list of values, got {describe(values)}")
    values = tuple(values)
    if not values:
        raise ValueError(f"params[{name!r}] is empty: give at least one value")
    kinds = [_kind(v) for v in values]
    if None in kinds:
        bad = values[kinds.index(None)]
        raise TypeError(f"params[{name!r}] may hold numbers, strings or booleans, "
                        f"got {describe(bad)}")
    if len(set(kinds)) > 1:
        raise ValueError(f"params[{name!r}] mixes types ({', '.join(sorted(set(kinds)))}); "
                         f"use values of one type, got {list(values)}")
    if len(set(values)) != len(values):
        repeated = sorted({repr(v) for v in values if values.count(v) > 1})
        raise ValueError(f"params[{name!r}] has duplicate values: {', '.join(repeated)}")
    return values


def _index_of(values: tuple, value) -> int | None:
    """Position of ``value`` in ``values``, comparing like with like (1 is not True)."""
    for i, candidate in enumerate(values):
        if _kind(candidate) == _kind(value) and candidate == value:
            return i
    return None


def _validate(plot_fn, params, defaults=None, fixed=None, max_frames=MAX_FRAMES) -> _Spec:
    """Check every argument once, with errors that name the argument."""
    if not callable(plot_fn):
        raise TypeError(f"plot_fn must be callable (a function returning a matplotlib "
                        f"Figure), got {describe(plot_fn)}")
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict mapping parameter names to lists of "
                        f"values, got {describe(params)}")
    if not params:
        raise ValueError("params is empty: give at least one parameter and its values")
    for name in params:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"params keys must be valid keyword names, got {name!r}")
    values = tuple(_check_values(name, vals) for name, vals in params.items())
    names = tuple(params)

    defaults = {} if defaults is None else defaults
    if not isinstance(defaults, dict):
        raise TypeError(f"defaults must be a dict or None, got {describe(defaults)}")
    start = []
    for name in defaults:
        if name not in params:
            raise ValueError(f"defaults names {name!r}, which is not in params "
                             f"(parameters: {', '.join(names)})")
    for name, vals in zip(names, values):
        if name not in defaults:
            start.append(0)     # the first listed value, as documented
            continue
        index = _index_of(vals, defaults[name])
        if index is None:
            raise ValueError(f"defaults[{name!r}] = {defaults[name]!r} is not one of "
                             f"params[{name!r}] = {list(vals)}")
        start.append(index)

    fixed = {} if fixed is None else fixed
    if not isinstance(fixed, dict):
        raise TypeError(f"fixed must be a dict or None, got {describe(fixed)}")
    clash = sorted(set(fixed) & set(names))
    if clash:
        raise ValueError(f"fixed and params both set {', '.join(clash)}: "
                         f"a parameter is either fixed or varied")

    spec = _Spec(plot_fn, names, values, tuple(_is_number(v[0]) for v in values),
                 tuple(start), dict(fixed))
    max_frames = check_int("max_frames", max_frames, minimum=1)
    if spec.grid_size > max_frames:
        sizes = " x ".join(str(len(v)) for v in values)
        raise ValueError(f"params spans {spec.grid_size} grid points ({sizes}), more than "
                         f"max_frames={max_frames}: the static book would embed that many "
                         f"images. Use fewer values, or raise max_frames deliberately.")
    return spec


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------

def _plot_name(plot_fn) -> str:
    # functools.partial has no __name__; fall back to the wrapped function.
    return getattr(plot_fn, "__name__", None) or getattr(getattr(plot_fn, "func", None),
                                                         "__name__", "plot_fn")


def _render_figure(plot_fn, kwargs: dict) -> Figure:
    """Call plot_fn and check that it returned a Figure."""
    before = set(plt.get_fignums())
    result = plot_fn(**kwargs)
    if not isinstance(result, Figure):
        # Close whatever the function opened, so a bad call leaks nothing.
        for number in set(plt.get_fignums()) - before:
            plt.close(number)
        raise TypeError(f"plot_fn ({_plot_name(plot_fn)}) must return a matplotlib Figure, "
                        f"but it returned {describe(result)}; end it with `return fig`")
    return result


def _figure_png(fig: Figure, dpi=None) -> bytes:
    """PNG bytes of a figure, which is then closed."""
    buffer = io.BytesIO()
    # Software=None drops matplotlib's default PNG comment, which holds a URL:
    # the static page must not contain any http(s) reference.
    fig.savefig(buffer, format="png", dpi=dpi or STATIC_DPI, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _grid(spec: _Spec):
    """Every grid point as a tuple of indices, last parameter fastest."""
    return itertools.product(*(range(len(v)) for v in spec.values))


def _key(indices) -> str:
    return ",".join(str(i) for i in indices)


def _render_spec(spec: _Spec, dpi=None):
    """Render every grid point; identical pictures are stored once."""
    if dpi is not None and (not _is_number(dpi) or not dpi > 0):
        raise ValueError(f"dpi must be a positive number or None, got {describe(dpi)}")
    keys, frames, seen = {}, [], {}
    for indices in _grid(spec):
        png = _figure_png(_render_figure(spec.plot_fn, spec.kwargs(indices)), dpi)
        digest = hashlib.sha256(png).hexdigest()
        if digest not in seen:
            seen[digest] = len(frames)
            frames.append(png)
        keys[_key(indices)] = seen[digest]
    return keys, frames


def render_frames(plot_fn, params, fixed=None, dpi=None, *, max_frames=MAX_FRAMES):
    """Render plot_fn at every grid point of ``params`` to PNG.

    Returns ``(keys, frames)``: ``frames`` is the list of distinct PNG images
    (bytes) and ``keys`` maps each grid point, written as its value indices
    joined by commas ("0,2"), to its position in ``frames``.
    """
    spec = _validate(plot_fn, params, fixed=fixed, max_frames=max_frames)
    return _render_spec(spec, dpi)


def frame_update_time(plot_fn, params, defaults=None, fixed=None) -> float:
    """Seconds that one render at the defaults takes (what a live update costs)."""
    return _time_one_render(_validate(plot_fn, params, defaults, fixed, max_frames=10**9))


def _time_one_render(spec: _Spec) -> float:
    begin = time.perf_counter()
    # Include the PNG encoding: a live update displays the figure as a PNG too.
    _figure_png(_render_figure(spec.plot_fn, spec.kwargs(spec.start)))
    return time.perf_counter() - begin


def _format_value(value) -> str:
    """How a value is shown to the reader: 0.1, 10, 1e-05, moons."""
    if isinstance(value, numbers.Integral) or not _is_number(value):
        return str(value)
    return f"{float(value):g}"


# --------------------------------------------------------------------------
# Mode
# --------------------------------------------------------------------------

def _have_widgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def figure_mode() -> str:
    """"static" or "live": how interactive_figure shows a figure here.

    DLBOOK_FIGURES wins; otherwise the book build, scripts and tests get the
    static control and a live kernel with ipywidgets gets live controls.
    """
    forced = os.environ.get(FIGURES_ENV, "").strip().lower()
    if forced in ("static", "live"):
        return forced
    if forced:
        raise ValueError(f"{FIGURES_ENV} must be 'static' or 'live', "
                         f"got {os.environ[FIGURES_ENV]!r}")
    if in_book_build() or not in_kernel() or not _have_widgets():
        return "static"
    return "live"


# --------------------------------------------------------------------------
# Static mode: precomputed frames in self-contained HTML
# --------------------------------------------------------------------------

# Issued element ids, so that a figure shown twice in one kernel gets a new id.
_issued_ids: dict[str, int] = {}

_CSS = """
.dlbook-interact{margin:.5em 0 1.2em;color:inherit;background:transparent;font-size:.9em}
.dlbook-interact-title{font-weight:600;margin-bottom:.3em}
.dlbook-interact-controls{display:flex;flex-wrap:wrap;gap:.3em 1.6em;align-items:center;margin-bottom:.4em}
.dlbook-interact-control{display:inline-flex;align-items:center;gap:.45em;margin:0}
.dlbook-interact-name{font-family:monospace}
.dlbook-interact output{min-width:3.5em;font-variant-numeric:tabular-nums}
.dlbook-interact input[type=range]{width:9em;accent-color:#0072B2;background:transparent}
.dlbook-interact select{color:inherit;background:transparent;border:1px solid currentColor;
border-radius:4px;padding:.1em .3em;font:inherit}
.dlbook-interact option{color:#000;background:#fff}
.dlbook-interact img{display:block;max-width:100%;height:auto;background:#fff;border-radius:4px}
"""

# The same for every figure. It finds its own figure by id, so several
# figures on one page never interfere. Plain ES5: runs in any browser.
_JS = """
(function () {
  var root = document.getElementById(%(id)s);
  var data = JSON.parse(document.getElementById(%(data_id)s).textContent);
  var img = root.querySelector("img.dlbook-interact-frame");
  var controls = root.querySelectorAll("[data-dlbook-param]");
  function update() {
    var indices = [];
    for (var i = 0; i < controls.length; i++) {
      var c = controls[i], p = Number(c.getAttribute("data-dlbook-param"));
      indices.push(c.value);
      var shown = root.querySelector("output[data-dlbook-param-value='" + p + "']");
      if (shown) { shown.textContent = data.labels[p][Number(c.value)]; }
    }
    var frame = data.keys[indices.join(",")];
    if (frame !== undefined) { img.src = "data:image/png;base64," + data.frames[frame]; }
  }
  for (var i = 0; i < controls.length; i++) {
    controls[i].addEventListener("input", update);
    controls[i].addEventListener("change", update);
  }
  update();
})();
"""


def _element_id(spec: _Spec, frames) -> str:
    """Id stable across runs: plot_fn name + hash of the content (+ a counter)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", _plot_name(spec.plot_fn)).strip("-") or "figure"
    digest = hashlib.sha256(repr(spec.names).encode())
    for png in frames:
        digest.update(hashlib.sha256(png).digest())
    base = f"dlbook-interact-{slug}-{digest.hexdigest()[:8]}"
    count = _issued_ids.get(base, 0) + 1
    _issued_ids[base] = count
    return base if count == 1 else f"{base}-{count}"


def _json_for_script(value) -> str:
    # Escaping "<" keeps a value such as "</script>" from ending the element.
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def _control_html(spec: _Spec, position: int, element_id: str) -> str:
    """One labelled control: a range over value indices, or a select."""
    name, values, start = spec.names[position], spec.values[position], spec.start[position]
    control_id = f"{element_id}-p{position}"
    label = (f'<label class="dlbook-interact-control" for="{control_id}">'
             f'<span class="dlbook-interact-name">{html.escape(name)}</span>')
    # autocomplete=off: a browser restoring an old position on reload would
    # otherwise show a slider that disagrees with the picture.
    common = (f'id="{control_id}" data-dlbook-param="{position}" autocomplete="off" '
              f'aria-label="{html.escape(name)}"')
    if spec.numeric[position]:
        shown = html.escape(_format_value(values[start]))
        return (f'{label}<input type="range" {common} min="0" max="{len(values) - 1}" '
                f'step="1" value="{start}"><output data-dlbook-param-value="{position}" '
                f'for="{control_id}">{shown}</output></label>')
    options = "".join(
        f'<option value="{i}"{" selected" if i == start else ""}>'
        f'{html.escape(_format_value(v))}</option>' for i, v in enumerate(values))
    return f'{label}<select {common}>{options}</select></label>'


def _static_html_from_frames(spec: _Spec, keys: dict, frames: list, title=None) -> str:
    """Assemble the self-contained control from rendered frames."""
    element_id = _element_id(spec, frames)
    data_id = f"{element_id}-data"
    encoded = [base64.b64encode(png).decode("ascii") for png in frames]
    data = {"keys": keys, "frames": encoded,
            "labels": [[_format_value(v) for v in values] for values in spec.values]}
    start_frame = keys[_key(spec.start)]
    controls = "".join(_control_html(spec, p, element_id) for p in range(len(spec.names)))
    heading = (f'<div class="dlbook-interact-title">{html.escape(title)}</div>'
               if title else "")
    alt = html.escape(title or f"{_plot_name(spec.plot_fn)}: interactive figure")
    script = _JS % {"id": json.dumps(element_id), "data_id": json.dumps(data_id)}
    return (
        f'<div class="dlbook-interact" id="{element_id}" data-frames="{len(frames)}" '
        f'data-grid="{len(keys)}">\n'
        f'<style>{_CSS.strip()}</style>\n'
        f'{heading}<div class="dlbook-interact-controls">{controls}</div>\n'
        f'<img class="dlbook-interact-frame" alt="{alt}" '
        f'src="data:image/png;base64,{encoded[start_frame]}">\n'
        f'<script type="application/json" id="{data_id}">{_json_for_script(data)}</script>\n'
        f'<script>{script}</script>\n'
        f'</div>'
    )


def static_html(plot_fn, params, defaults=None, fixed=None, title=None,
                max_frames=MAX_FRAMES, dpi=None) -> str:
    """The self-contained HTML control (precomputed frames, inline script)."""
    _check_title(title)
    spec = _validate(plot_fn, params, defaults, fixed, max_frames)
    keys, frames = _render_spec(spec, dpi)
    return _static_html_from_frames(spec, keys, frames, title)


def _check_title(title) -> None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a string or None, got {describe(title)}")


# --------------------------------------------------------------------------
# Live mode: ipywidgets (7.x and 8.x)
# --------------------------------------------------------------------------

def _make_control(widgets, spec: _Spec, position: int, slow: bool):
    """A widget for one parameter, using only APIs ipywidgets 7 and 8 share."""
    name, values = spec.names[position], spec.values[position]
    # (label, value) pairs show 0.1 rather than 0.1000000001; index= rather
    # than value= because ipywidgets 8 leaves the label empty for value=first.
    common = {"options": [(_format_value(v), v) for v in values],
              "index": spec.start[position], "description": name,
              "style": {"description_width": "initial"}}
    if spec.numeric[position]:
        # continuous_update=False for slow figures: re-render on release only.
        return widgets.SelectionSlider(continuous_update=not slow, readout=True, **common)
    if len(values) <= MAX_TOGGLE_OPTIONS:
        return widgets.ToggleButtons(**common)
    return widgets.Dropdown(**common)


def _build_live(spec: _Spec, slow: bool = False, title=None):
    """Controls + output area, rendered once now and again on every change."""
    import ipywidgets as widgets
    from IPython.display import display

    controls = [_make_control(widgets, spec, p, slow) for p in range(len(spec.names))]
    out = widgets.Output()

    def current() -> dict:
        chosen = {name: control.value for name, control in zip(spec.names, controls)}
        return {**spec.fixed, **chosen}

    def show(fig) -> None:
        try:
            with out:
                out.clear_output(wait=True)     # wait: no flicker between frames
                display(fig)
        finally:
            plt.close(fig)

    def on_change(_change) -> None:
        try:
            fig = _render_figure(spec.plot_fn, current())
        except Exception:
            # Show the error under the controls: an exception raised in a
            # widget callback would otherwise vanish into the browser console.
            with out:
                out.clear_output(wait=True)
                raise
        show(fig)

    # The first frame is rendered before any callback exists, so that a
    # broken plot_fn raises in the cell that created the figure.
    show(_render_figure(spec.plot_fn, current()))
    for control in controls:
        control.observe(on_change, names="value")
    header = [widgets.HTML(f"<b>{html.escape(title)}</b>")] if title else []
    return widgets.VBox(header + [widgets.HBox(controls, layout=widgets.Layout(
        flex_flow="row wrap")), out])


# --------------------------------------------------------------------------
# The one call chapters make
# --------------------------------------------------------------------------

def interactive_figure(plot_fn, params, defaults=None, *, fixed=None, slow=False,
                       title=None, max_frames=MAX_FRAMES, dpi=None) -> None:
    """Show ``plot_fn`` with controls for ``params``: live widgets or a static slider.

    plot_fn(**fixed, **chosen) must return a matplotlib Figure. ``params`` maps
    each parameter to the values the reader may pick (numbers give a slider,
    strings or booleans a choice); ``defaults`` picks initial values (the first
    listed value otherwise). ``slow=True`` re-renders live figures only when the
    slider is released. The grid may hold at most ``max_frames`` points in
    either mode, so a chapter that works live also builds into the book.

    Displays the figure and returns None (so a cell prints nothing extra).
    """
    _check_title(title)
    if not isinstance(slow, bool):
        raise TypeError(f"slow must be True or False, got {describe(slow)}")
    spec = _validate(plot_fn, params, defaults, fixed, max_frames)
    from IPython.display import HTML, display

    if figure_mode() == "live":
        display(_build_live(spec, slow, title))
    else:
        begin = time.perf_counter()
        keys, frames = _render_spec(spec, dpi)
        _log_timing(spec, len(frames), time.perf_counter() - begin)
        display(HTML(_static_html_from_frames(spec, keys, frames, title)))
    return None


def _log_timing(spec: _Spec, num_unique: int, seconds: float) -> None:
    """Append this figure's render times to the benchmark log, if one is asked for."""
    path = os.environ.get(TIMING_LOG_ENV)
    if not path:
        return
    record = {"figure": _plot_name(spec.plot_fn), "grid": spec.grid_size, "unique_frames": num_unique,
              "precompute_s": round(seconds, 3),
              "update_s": round(_time_one_render(spec), 3)}
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
