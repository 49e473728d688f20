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

``built_book(edition)`` builds one edition of the book from the executed
chapters (instant when nothing changed) under a lock, so that test workers
running side by side never stage the same sources at once.

``run_jupyterlab(root_dir)`` starts a throwaway JupyterLab for tests of live
widgets: localhost only, no token, nothing fetched from the network and
nothing read from or written to the user's Jupyter folders.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import http.server
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The built editions of the book (tools/build_book.py).
BOOK_HTML = {"reference": ROOT / "_build" / "html", "student": ROOT / "_build" / "student-html"}

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


#: Set by the test command (tools/run_tests.py) when its build phases have just built both editions
#: from this run's executed chapters: the browser tests then use them without checking again.
BUILT_ENV = "DLBOOK_BOOKS_BUILT"


def built_book(edition: str = "reference") -> Path:
    """Build ``edition`` of the book if its sources changed (one builder at a time); return its folder."""
    if os.environ.get(BUILT_ENV) == "1" and (BOOK_HTML[edition] / "index.html").exists():
        return BOOK_HTML[edition]
    lock_path = ROOT / "_build" / ".build-book.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        options = ["--student"] if edition == "student" else []
        subprocess.run([sys.executable, str(ROOT / "tools" / "build_book.py"), *options], check=True, cwd=ROOT)
    return BOOK_HTML[edition]


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


# --------------------------------------------------------------------------
# A throwaway JupyterLab server
# --------------------------------------------------------------------------

#: Server options: localhost, a free port, no token or password, no browser,
#: no news feed, no update check, no extension manager reaching PyPI, and
#: no terminals or language servers (a faster start, nothing they would add).
JUPYTERLAB_CONFIG = {
    "ServerApp": {"ip": "127.0.0.1", "port": 0, "port_retries": 0, "open_browser": False,
                  "terminals_enabled": False,
                  "jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}},
    "IdentityProvider": {"token": ""},
    "PasswordIdentityProvider": {"hashed_password": ""},
    "LabApp": {"news_url": None, "extension_manager": "readonly",
               "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate"},
}

#: Front-end plugins left out: news and update checks, the extension manager, and
#: the front ends of the server extensions turned off above.
JUPYTERLAB_DISABLED_PLUGINS = ["@jupyterlab/apputils-extension:announcements", "@jupyterlab/extensionmanager-extension",
                               "@jupyterlab/terminal-extension", "@jupyterlab/lsp-extension",
                               "@jupyterlab/fileeditor-extension:language-server",
                               "@jupyterlab/notebook-extension:language-server"]

#: Lab settings of the throwaway server: every cell stays in the page (no
#: windowing), no news or update notifications.
JUPYTERLAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def have_jupyterlab() -> bool:
    """True when JupyterLab, ipykernel and ipywidgets are installed in this environment."""
    return all(importlib.util.find_spec(name) is not None
               for name in ("jupyterlab", "ipykernel", "ipywidgets"))


def _write_lab_settings(settings_dir: Path) -> None:
    for plugin_id, values in JUPYTERLAB_SETTINGS.items():
        package, plugin = plugin_id.rsplit("/", 1)
        folder = settings_dir / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{plugin}.jupyterlab-settings").write_text(json.dumps(values), encoding="utf-8")


def _server_url(runtime_dir: Path, pid: int) -> str | None:
    """The URL the server with process id ``pid`` wrote into its runtime file, once it has."""
    info = runtime_dir / f"jpserver-{pid}.json"
    try:
        return json.loads(info.read_text(encoding="utf-8"))["url"]
    except (OSError, ValueError, KeyError):
        return None     # not written yet, or half written


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "api/status", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _die_with_parent() -> None:
    """Run in the server process before it starts (Linux): SIGTERM it when the test process dies.

    The server then shuts its kernels down, so a test run killed from outside
    leaves no server behind (kernels also exit when their server is gone).
    """
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _stop_process_tree(process: subprocess.Popen, grace_s: float = 15) -> None:
    """SIGTERM the server (it shuts its kernels down), then SIGKILL whatever is left.

    The server runs in its own process group; kernels get their own sessions,
    so their process ids are noted first and killed one by one if they outlive it.
    """
    import psutil

    try:
        kernels = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        kernels = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)
    _, alive = psutil.wait_procs(kernels, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


@contextlib.contextmanager
def run_jupyterlab(root_dir, *, env: dict | None = None, startup_timeout_s: float = 120):
    """Run JupyterLab serving ``root_dir``; yields its base URL (http://127.0.0.1:PORT/).

    ``env`` is the environment of the server and of the kernels it starts
    (default: this process's). JUPYTER_CONFIG_DIR, JUPYTER_DATA_DIR,
    JUPYTER_RUNTIME_DIR and IPYTHONDIR point into a temporary folder, so no
    user settings, workspaces or kernel specs from the home folder are read
    and nothing is written there. Skips the test when JupyterLab is missing.
    The server and its kernels are stopped on exit, whatever happened.
    """
    if not have_jupyterlab():
        pytest.skip("JupyterLab, ipykernel or ipywidgets is not installed in this environment "
                    "(requirements.txt pins them)")
    root_dir = Path(root_dir)
    if not root_dir.is_dir():
        raise ValueError(f"root_dir must be an existing directory, got {str(root_dir)!r}")
    with tempfile.TemporaryDirectory(prefix="dlbook-jupyterlab-") as home:
        home = Path(home)
        dirs = {name: home / name for name in ("config", "data", "runtime", "ipython")}
        for folder in dirs.values():
            folder.mkdir()
        # Containers and CI runners often run as root, which the server refuses unless told.
        config = {**JUPYTERLAB_CONFIG, "ServerApp": {**JUPYTERLAB_CONFIG["ServerApp"], "root_dir": str(root_dir),
                                                     "allow_root": hasattr(os, "geteuid") and os.geteuid() == 0}}
        config["LabApp"] = {**config["LabApp"], "user_settings_dir": str(home / "settings"),
                            "workspaces_dir": str(home / "workspaces")}
        (dirs["config"] / "jupyter_server_config.json").write_text(json.dumps(config), encoding="utf-8")
        (dirs["config"] / "labconfig").mkdir()
        (dirs["config"] / "labconfig" / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {plugin: True for plugin in JUPYTERLAB_DISABLED_PLUGINS}}), encoding="utf-8")
        _write_lab_settings(home / "settings")
        server_env = dict(os.environ if env is None else env)
        server_env.update(JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
                          JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), IPYTHONDIR=str(dirs["ipython"]),
                          JUPYTER_PLATFORM_DIRS="1")  # the current folder layout, without a deprecation warning
        server_env.pop("JUPYTER_PATH", None)
        server_env.pop("JUPYTER_CONFIG_PATH", None)
        log_path = home / "server.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "jupyterlab"], cwd=root_dir, env=server_env,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True,
                                       preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            url, deadline = None, time.monotonic() + startup_timeout_s
            while not (url and _answers(url)):
                if process.poll() is not None:
                    raise RuntimeError(f"JupyterLab exited with code {process.returncode} while starting:\n"
                                       + log_path.read_text(errors="replace")[-3000:])
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not answer within {startup_timeout_s:.0f} s:\n"
                                       + log_path.read_text(errors="replace")[-3000:])
                time.sleep(0.2)
                url = url or _server_url(dirs["runtime"], process.pid)
            yield url if url.endswith("/") else url + "/"
        finally:
            _stop_process_tree(process)
