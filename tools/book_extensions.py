"""Small Sphinx fixes for the book build, loaded from _config.yml.

sphinx-thebe (pulled in by Jupyter Book 1.x) registers its inline set-up
script twice (Sphinx keeps an inline script added after the builder started
under both the names None and ""), so every page declared ``const
THEBE_JS_URL`` twice and the browser reported a script error. Identical
scripts are dropped before each page is written.
"""


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


def setup(app):
    app.connect("html-page-context", _drop_duplicate_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
