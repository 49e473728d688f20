"""Helpers for browser tests: serve a folder locally, drive Debian's Chromium.

Used by the interactive-figure tests and the tests of the built book::

    from playwright.sync_api import sync_playwright
    from browser_util import serve_directory, launch_chromium, record_requests

    with serve_directory(folder) as base_url, sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page()
        log = record_requests(page)
        page.goto(base_url + "index.html")
        assert log.external() == []

The Chromium binary is DLBOOK_CHROMIUM, else ``chromium`` on the PATH, else
/usr/bin/chromium; Playwright's own downloaded browsers are not needed.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from urllib.parse import urlsplit

import pytest

#: Environment variable naming the Chromium (or Chrome) binary to use.
CHROMIUM_ENV = "DLBOOK_CHROMIUM"

#: Flags for a quiet, offline-friendly headless run inside containers and CI.
CHROMIUM_ARGS = [
    "--no-sandbox",                      # containers usually lack user namespaces
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",   # no update checks, no safe-browsing lists
    "--disable-component-update",
    "--disable-sync",
]

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
NETWORK_SCHEMES = {"http", "https", "ws", "wss", "ftp"}


def chromium_path() -> str | None:
    """Path of the Chromium binary to drive, or None when there is none."""
    candidates = [os.environ.get(CHROMIUM_ENV), shutil.which("chromium"), "/usr/bin/chromium"]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def launch_chromium(playwright, **options):
    """Launch headless Chromium through Playwright; skip the test if none is installed."""
    path = chromium_path()
    if path is None:
        pytest.skip(f"no Chromium binary: install Debian's chromium, or set {CHROMIUM_ENV} "
                    f"to a Chromium/Chrome executable")
    options.setdefault("headless", True)
    return playwright.chromium.launch(executable_path=path, args=list(CHROMIUM_ARGS),
                                      **options)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static file handler that keeps the test output clean."""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def serve_directory(path):
    """Serve ``path`` over HTTP on 127.0.0.1 (a free port); yields the base URL ending in /."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ValueError(f"path must be an existing directory, got {path!r}")
    handler = functools.partial(_QuietHandler, directory=path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="serve_directory", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def is_external(url: str) -> bool:
    """True for a network URL that leaves this machine (data:, blob:, about: are local)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in NETWORK_SCHEMES:
        return False
    return (parts.hostname or "").lower() not in LOCAL_HOSTS


class RequestLog:
    """Every URL a page requested, in order."""

    def __init__(self):
        self.urls: list[str] = []

    def external(self) -> list[str]:
        """The requested URLs that are not on localhost (data: URIs ignored)."""
        return [url for url in self.urls if is_external(url)]


def record_requests(page, *, block_external: bool = True) -> RequestLog:
    """Start recording every request ``page`` makes; returns the (growing) log.

    With ``block_external`` (the default) a request that would leave the
    machine is still recorded but aborted, so a test fails fast and offline
    instead of waiting on the network.
    """
    log = RequestLog()
    page.on("request", lambda request: log.urls.append(request.url))
    if block_external:
        def route(route):
            if is_external(route.request.url):
                route.abort()
            else:
                route.continue_()
        page.route("**/*", route)
    return log
