"""The grader's worker: runs one submission inside the sandbox and answers calls.

Started by :mod:`dlbook.coursework.sandbox` as
``python worker.py REQUEST_FD REPLY_FD UID LIMITS``. It first sets its
resource limits (LIMITS, JSON) and, run as root inside the sandbox (a grader
run by root), becomes the unprivileged ``UID``, so that no code of the
submission ever runs with privileges or without limits. It then reads
requests from REQUEST_FD and answers each on REPLY_FD (see
:mod:`dlbook.coursework.channel`); every answer repeats its request's
``"seq"`` number, so that a message written by the submission itself is
recognised as out of turn:

``{"op": "run", "source": ..., "exercise": "1.2" | None, "function": name, "blocked": [...]}``
    Execute a cell in an IPython shell (setup cells of the reference, then
    the submission's exercise cells). Answer ``{"status": "ok"}`` or
    ``{"status": "error", "ename": ..., "evalue": ...}``; for an exercise
    cell also ``"function"``: "defined", "missing" or the type found.
``{"op": "call", "exercise": "1.2", "args": [...], "kwargs": {...}}``
    Call the function that exercise's cell defined. Answer ``{"status": "ok",
    "value": ...}``, ``{"status": "raised", "ename", "evalue", "shortcut"}``
    or ``{"status": "unsupported", "type": ...}``.

While a cell or a call of exercise N.k runs, the dlbook functions that
exercise blocks raise ShortcutError, exactly as in the notebook. The
worker never sees a check or an expected value, and nothing it prints or
writes reaches the grades: printed output is discarded.
"""
from __future__ import annotations

import json
import os
import sys

#: The scratch folder (a private tmpfs in the sandbox); also the home folder.
SCRATCH = "/tmp"


def drop_privileges(uid: int) -> None:
    """From root inside the sandbox, become ``uid`` (no groups, no capabilities)."""
    os.chown(SCRATCH, uid, uid)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("worker: could not drop root privileges")


class _Discard:
    """A text stream that drops everything (the submission's printed output)."""

    encoding = "utf-8"
    errors = "replace"

    def write(self, text):
        return len(text) if isinstance(text, str) else 0

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        raise OSError("printed output is discarded")


def _safe_str(value, limit: int = 500) -> str:
    try:
        text = str(value)
    except BaseException:  # a broken __str__ must not stop the worker
        text = ""
    return text[:limit]


def _error(err: BaseException) -> dict:
    core = sys.modules.get("dlbook.exercises.core")
    shortcut = core is not None and isinstance(err, core.ShortcutError)
    return {"ename": type(err).__name__[:100], "evalue": _safe_str(err), "shortcut": shortcut}


class Worker:
    """The shell that runs the cells, and the functions the exercise cells defined."""

    def __init__(self, channel):
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False
        self.shell = InteractiveShell.instance(config=config)
        self.shell.showtraceback = lambda *args, **kwargs: None
        self.shell.showsyntaxerror = lambda *args, **kwargs: None
        self.shell.ask_exit = lambda: None  # exit() in a cell: Jupyter would stop after the cell; go on
        self.channel = channel
        self.functions: dict = {}
        self.blocked: dict = {}

    def blocking(self, exercise_id, names):
        """The context in which exercise ``exercise_id``'s cell and calls run."""
        from contextlib import nullcontext

        if not names:
            return nullcontext()
        from dlbook.exercises.core import Exercise, shortcuts_blocked

        ex = Exercise(id=exercise_id, title="", function_name="", check_fn=None, hint="",
                      blocked=tuple(names))
        return shortcuts_blocked(ex)

    def run(self, request: dict) -> dict:
        exercise_id, function_name = request.get("exercise"), request.get("function")
        names = [str(n) for n in request.get("blocked") or []]
        self.blocked[exercise_id] = names
        try:
            with self.blocking(exercise_id, names):
                result = self.shell.run_cell(str(request.get("source", "")), store_history=False,
                                             silent=True)
            error = result.error_before_exec or result.error_in_exec
        except BaseException as err:  # the shell itself failed, or a blocked name is unknown
            error = err
        reply = {"status": "ok"} if error is None else {"status": "error", **_error(error)}
        if exercise_id is not None and function_name:
            value = self.shell.user_ns.get(function_name, self)
            if value is self:
                reply["function"] = "missing"
            elif callable(value):
                reply["function"] = "defined"
                self.functions[exercise_id] = value
            else:
                reply["function"] = type(value).__name__[:100]
        return reply

    def call(self, request: dict) -> dict:
        exercise_id = request.get("exercise")
        function = self.functions.get(exercise_id)
        if function is None:
            return {"status": "raised", "ename": "NameError", "shortcut": False,
                    "evalue": f"exercise {exercise_id} defined no function"}
        channel = self.channel
        received = request.get(channel.BUFFERS, [])
        args = channel.decode(request.get("args", []), received)
        kwargs = channel.decode(request.get("kwargs", {"$": "dict", "items": []}), received)
        try:
            with self.blocking(exercise_id, self.blocked.get(exercise_id)):
                value = function(*args, **kwargs)
        except BaseException as err:  # whatever the student's function raises
            return {"status": "raised", **_error(err)}
        buffers: list = []
        try:
            return {"status": "ok", "value": channel.encode(value, buffers), channel.BUFFERS: buffers}
        except channel.Unsupported as err:
            return {"status": "unsupported", "type": err.type_name[:200]}
        except BaseException:  # a value whose conversion fails (a meta tensor, ...)
            return {"status": "unsupported", "type": type(value).__name__[:100]}

    def serve(self, request_fd: int, reply_fd: int) -> int:
        channel = self.channel
        channel.send(reply_fd, {"status": "ready", "seq": 0})
        while True:
            try:
                request = channel.receive(request_fd)
            except channel.ChannelClosed:
                return 0
            op = request.get("op")
            if op == "bye":
                return 0
            try:
                reply = self.run(request) if op == "run" else self.call(request)
            except channel.ChannelError as err:  # a malformed request
                reply = {"status": "raised", "ename": "ChannelError", "evalue": str(err), "shortcut": False}
            reply["seq"] = request.get("seq")
            try:
                channel.send(reply_fd, reply)
            except channel.ChannelError as err:  # a value too large for the channel
                channel.send(reply_fd, {"status": "too-large", "evalue": str(err), "seq": reply["seq"]})

def apply_limits(limits: dict) -> None:
    """Resource limits for this process and every process it starts (no core files)."""
    import resource

    for name, key in (("RLIMIT_AS", "memory"), ("RLIMIT_NPROC", "processes"), ("RLIMIT_FSIZE", "file_size"),
                      ("RLIMIT_NOFILE", "open_files"), ("RLIMIT_CPU", "cpu")):
        value = int(limits[key])
        resource.setrlimit(getattr(resource, name), (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def seed_font_cache(here: str) -> None:
    """Put the grader's copy of matplotlib's font list in this worker's matplotlib folder."""
    import glob
    import shutil

    folder = os.environ.get("MPLCONFIGDIR")
    found = glob.glob(os.path.join(here, "..", "..", "..", "matplotlib", "fontlist-v*.json"))
    if folder and found:
        os.makedirs(folder, exist_ok=True)
        shutil.copy(found[0], folder)


def main(argv) -> int:
    """``worker.py REQUEST_FD REPLY_FD UID|- LIMITS_JSON``."""
    request_fd, reply_fd = int(argv[1]), int(argv[2])
    apply_limits(json.loads(argv[4]))
    if os.getuid() == 0 and argv[3] != "-":
        drop_privileges(int(argv[3]))
    here = os.path.dirname(os.path.abspath(__file__))
    seed_font_cache(here)
    import channel  # from this file's folder (sys.path[0]); dlbook itself is imported only on use

    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    worker = Worker(channel)
    sys.stdout = sys.stderr = _Discard()
    return worker.serve(request_fd, reply_fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
