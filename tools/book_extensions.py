"""Small Sphinx fixes for the book build, loaded from _config.yml.

sphinx-thebe (pulled in by Jupyter Book 1.x) registers its inline set-up
script twice (Sphinx keeps an inline script added after the builder started
under both the names None and ""), so every page declared ``const
THEBE_JS_URL`` twice and the browser reported a script error. Identical
scripts are dropped before each page is written.

pybtex looks up its plugins (citation styles, name formats) through the
installed packages' entry points on every citation it formats; each lookup
reads the metadata of all 300-odd packages of the environment. The lookups
are cached for the build: the set of installed packages does not change
while the book is built.
"""
import functools

import pybtex.plugin


def _unique(scripts) -> list:
    seen, unique = set(), []
    for script in scripts:
        # An inline script is registered once with filename None and once with "".
        key = (str(getattr(script, "filename", script) or ""),
               tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    return unique


def _drop_duplicate_scripts(app, *args):
    builder_files = getattr(app.builder, "_js_files", None)
    if builder_files is not None:
        builder_files[:] = _unique(builder_files)


def _cache_plugin_lookups() -> None:
    lookup = pybtex.plugin.entry_points
    if not hasattr(lookup, "cache_info"):
        pybtex.plugin.entry_points = functools.cache(lookup)


def setup(app):
    _cache_plugin_lookups()
    app.connect("html-page-context", _drop_duplicate_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
