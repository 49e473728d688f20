"""The grader's sandbox: each submission's worker runs inside bubblewrap, with limits.

A :class:`Sandbox` is made once per grading run. It copies dlbook into a
temporary folder without the chapters' checks and without the grader (only
the worker and its channel stay), and builds the bubblewrap command line.
:meth:`Sandbox.start` starts a :class:`Worker`: ``bwrap`` with

- its own PID, network, IPC, UTS and cgroup namespaces (``--unshare-*``): no
  network at all, and every process the submission starts, in whatever
  session, dies when the worker is stopped (``--die-with-parent``, and the
  namespace's first process is killed);
- a read-only view of the system (``/usr`` and its links, a few files of
  ``/etc``), of the Python installation and of the virtual environment, and
  of the copy of dlbook at ``/opt/dlbook``; the folders the grader names as
  hidden (the trusted dlbook, the reference chapter's folder, the submissions,
  the output) are covered by empty ones where they would otherwise show;
- a private writable scratch folder ``/tmp`` of limited size, which is also
  the home folder; the rest of the file system is read-only;
- limits on memory (address space), processes, file size, open files and CPU
  time, set by the worker before any submitted code runs; a grader run by
  root also makes the worker drop to an unprivileged user id of its own, so
  that the process limit counts the worker's processes alone.

The worker's standard output and error go to a pipe that the grader drains,
keeping only the last :attr:`Limits.output_kb` kilobytes for error messages.
Wall time is the grader's business: every request has a deadline, and a
worker that misses it is killed.

Without bubblewrap (``unsafe=True``) the worker runs as a plain process with
the same channel and limits, but it can read and write everything the
instructor can, reach the network, and leave behind processes that started
a new session.
"""
from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import channel

#: Where the worker's copy of dlbook is mounted inside the sandbox.
PACKAGE_MOUNT = "/opt/dlbook"
#: The worker's scratch folder inside the sandbox.
SCRATCH = "/tmp"
#: The modules of dlbook.coursework the worker needs; the rest stays outside.
WORKER_MODULES = ("__init__.py", "channel.py", "worker.py")
#: Files of /etc the worker may read (the dynamic loader's cache, time zone, fonts).
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/fonts", "/etc/alternatives")
#: Top-level system folders (or links to /usr) that are mounted read-only.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Seconds a worker may take to start (import IPython and get ready).
START_TIMEOUT = 60
#: Unprivileged user ids for workers of a grader run by root: one each.
_UIDS = itertools.count(2_000_000_000 + random.randrange(10**7))

SIGNALS = {signal.SIGKILL: "it was killed (out of memory?)", signal.SIGSEGV: "it crashed (segmentation fault)",
           signal.SIGABRT: "it aborted", signal.SIGXCPU: "it used up its CPU time",
           signal.SIGXFSZ: "it wrote a file larger than the limit", signal.SIGBUS: "it crashed (bus error)"}


#: What grading without the sandbox risks (said wherever the grader refuses or is told to).
UNSAFE_RISK = ("--unsafe-no-sandbox runs submissions as ordinary processes that can read and change your "
               "files (other submissions, the grades once written), use the network and leave processes "
               "running")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot make a sandbox on this machine."""


class WorkerTimeout(Exception):
    """The worker did not answer before the deadline (it has been killed)."""


class WorkerDied(Exception):
    """The worker exited or broke the channel; the message says how."""


@dataclass(frozen=True)
class Limits:
    """What one worker may use."""

    memory_mb: int = 4096       # address space of each process
    processes: int = 64         # processes and threads
    file_mb: int = 64           # largest file it may write
    scratch_mb: int = 256       # size of its private /tmp
    open_files: int = 256
    cpu_seconds: int = 600      # CPU time of each process (wall time is limited by the grader)
    output_kb: int = 64         # how much of its printed output is kept for error messages


def bwrap_path() -> str | None:
    """The bubblewrap executable, if installed."""
    return shutil.which("bwrap")


def copy_package(destination: Path) -> Path:
    """Copy dlbook into ``destination`` without its checks and without the grader.

    Returns the folder to put on the worker's PYTHONPATH.
    """
    import dlbook

    source = Path(dlbook.__file__).resolve().parent
    checks = source / "exercises" / "checks"
    coursework = source / "coursework"

    def ignore(folder, names):
        folder = Path(folder)
        skipped = {name for name in names if name == "__pycache__"}
        if folder == checks:
            skipped |= set(names)
        elif folder == coursework:
            skipped |= {name for name in names if name not in WORKER_MODULES}
        return skipped

    target = destination / "lib"
    shutil.copytree(source, target / "dlbook", ignore=ignore)
    (target / "dlbook" / "exercises" / "checks" / "__init__.py").write_text(
        '"""The chapters\' checks stay outside the grader\'s sandbox."""\n', encoding="utf-8")
    _copy_font_cache(destination / "matplotlib")
    return target


def _copy_font_cache(destination: Path) -> None:
    """Copy matplotlib's font list, if this machine has one, so that no worker rebuilds it."""
    folders = [os.environ.get("MPLCONFIGDIR"), os.environ.get("XDG_CACHE_HOME"), Path.home() / ".cache",
               Path.home() / ".matplotlib"]
    for folder in filter(None, folders):
        found = sorted(Path(folder).glob("fontlist-v*.json")) + sorted(Path(folder).glob("matplotlib/fontlist-v*.json"))
        if found:
            destination.mkdir()
            shutil.copy(found[-1], destination)
            return


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class Sandbox:
    """A grading run's sandbox: the worker's package copy and how to start workers.

    ``hidden`` lists paths the worker must not see even where a mounted
    folder contains them (the trusted dlbook is always hidden).
    """

    def __init__(self, limits: Limits = Limits(), *, unsafe: bool = False, hidden=()):
        self.limits = limits
        self.unsafe = unsafe
        self.bwrap = None if unsafe else bwrap_path()
        if not unsafe and self.bwrap is None:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed, so submissions cannot be run in a sandbox. Install it "
                f"(Debian/Ubuntu: apt-get install bubblewrap), or grade at your own risk: {UNSAFE_RISK}.")
        import dlbook

        self.hidden = [Path(dlbook.__file__).resolve().parent, *(Path(p).resolve() for p in hidden)]
        self.root = Path(tempfile.mkdtemp(prefix="dlbook-sandbox-"))
        self.root.chmod(0o755)  # readable by the worker's unprivileged user
        try:
            self.package = copy_package(self.root)
        except BaseException:
            self.close()
            raise
        self.as_root = os.geteuid() == 0
        self._options = self._bwrap_options() if not unsafe else []

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the command line -------------------------------------------------

    def _mounted_folders(self) -> list[Path]:
        """The Python installation and virtual environment, outside /usr."""
        folders = []
        for path in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
            path = Path(path).resolve()
            if not any(_under(path, Path(p)) for p in ("/usr", *map(str, folders))):
                folders = [f for f in folders if not _under(f, path)] + [path]
        return folders

    def _bwrap_options(self) -> list[str]:
        """bubblewrap's options: namespaces, then mounts, then the environment."""
        options = self._namespace_options() + self._mount_options()
        for key, value in self._environment(f"{PACKAGE_MOUNT}/lib", SCRATCH).items():
            options += ["--setenv", key, value]
        return options

    def _namespace_options(self) -> list[str]:
        options = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                   "--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if not self.as_root:  # unprivileged bubblewrap needs a user namespace
            options += ["--unshare-user"]
            if "--disable-userns" in _bwrap_help(self.bwrap):
                options += ["--disable-userns"]
        return options

    def _mount_options(self) -> list[str]:
        """Read-only system, Python and package; hidden paths covered; a small writable /tmp."""
        # The scratch /tmp comes first, so that a Python or virtual environment installed under /tmp is
        # mounted on top of it instead of being covered by it.
        options = ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
                   "--perms", "1777", "--size", str(self.limits.scratch_mb << 20), "--tmpfs", SCRATCH]
        made = {Path("/"), Path(SCRATCH)}
        for path in SYSTEM_PATHS + ETC_PATHS:
            if os.path.islink(path) and path in SYSTEM_PATHS:
                options += ["--symlink", os.readlink(path), path]
            elif os.path.exists(path):
                options += self._parents(Path(path), made) + ["--ro-bind", path, path]
        mounted = [Path(p) for p in SYSTEM_PATHS if os.path.isdir(p) and not os.path.islink(p)]
        for folder in self._mounted_folders():
            options += self._parents(folder, made) + ["--ro-bind", str(folder), str(folder)]
            mounted.append(folder)
        options += self._parents(Path(PACKAGE_MOUNT), made) + ["--ro-bind", str(self.package.parent),
                                                               PACKAGE_MOUNT]
        for path in self.hidden:  # cover what a mounted folder would show, read-only
            if any(_under(path, folder) for folder in mounted) and path.exists():
                options += (["--size", "4096", "--tmpfs", str(path), "--remount-ro", str(path)] if path.is_dir()
                            else ["--ro-bind", "/dev/null", str(path)])
        return options + ["--remount-ro", "/", "--chdir", SCRATCH, "--clearenv"]

    @staticmethod
    def _parents(path: Path, made: set) -> list[str]:
        """``--dir`` options (mode 755) for the folders above ``path`` not made yet."""
        options = []
        for parent in reversed(path.parents):
            if parent not in made:
                made.add(parent)
                options += ["--perms", "0755", "--dir", str(parent)]
        return options

    @staticmethod
    def _environment(pythonpath: str, home: str) -> dict:
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "USER": "student",
                "LOGNAME": "student", "LANG": "C.UTF-8", "PYTHONPATH": pythonpath, "PYTHONHASHSEED": "0",
                "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{home}/.matplotlib",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "DLBOOK_NUM_THREADS": "1", "DLBOOK_FIGURES": "static", "DLBOOK_DEVICE": "cpu"}

    def _worker_limits(self) -> dict:
        limits = self.limits
        processes = limits.processes
        if not self.as_root:  # the limit counts every process of the instructor's user id
            processes += _tasks_of_user(os.getuid())
        return {"memory": limits.memory_mb << 20, "processes": processes, "file_size": limits.file_mb << 20,
                "open_files": limits.open_files, "cpu": limits.cpu_seconds}

    # -- workers ----------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> "Worker":
        """Start a worker and wait until it is ready; WorkerDied/WorkerTimeout if it is not."""
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        limits = json.dumps(self._worker_limits())
        uid = str(next(_UIDS)) if self.as_root and not self.unsafe else "-"
        scratch = None
        if self.unsafe:
            scratch = tempfile.mkdtemp(prefix="dlbook-worker-")
            script = str(self.package / "dlbook" / "coursework" / "worker.py")
            command = [sys.executable, "-s", "-B", script, str(request_read), str(reply_write), uid, limits]
            env = self._environment(str(self.package), scratch)
            cwd = scratch
        else:
            script = f"{PACKAGE_MOUNT}/lib/dlbook/coursework/worker.py"
            command = [self.bwrap, *self._options, "--", sys.executable, "-s", "-B", script,
                       str(request_read), str(reply_write), uid, limits]
            env, cwd = None, None
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, pass_fds=(request_read, reply_write),
                                       env=env, cwd=cwd, start_new_session=True)
        finally:
            os.close(request_read)
            os.close(reply_write)
        worker = Worker(process, request_write, reply_read, self.limits.output_kb << 10, scratch)
        try:
            worker.wait_ready(timeout)
        except BaseException:
            worker.stop()
            raise
        return worker

    def probe(self) -> None:
        """Start and stop one worker; SandboxUnavailable with bubblewrap's message if it fails."""
        try:
            self.start().stop()
        except (WorkerDied, WorkerTimeout) as err:
            raise SandboxUnavailable(
                f"bubblewrap cannot make a sandbox on this machine ({err}). Grade where it can (a virtual "
                f"machine, or a container that allows user namespaces), or at your own risk: {UNSAFE_RISK}.") from None


def _bwrap_help(bwrap: str) -> str:
    try:
        return subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _tasks_of_user(uid: int) -> int:
    """How many processes and threads ``uid`` runs now (RLIMIT_NPROC counts them all)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


class Worker:
    """A running worker: send it requests, read its answers, stop it."""

    def __init__(self, process: subprocess.Popen, request_fd: int, reply_fd: int, output_bytes: int,
                 scratch: str | None = None):
        self.process = process
        self.request_fd, self.reply_fd = request_fd, reply_fd
        os.set_blocking(request_fd, False)
        os.set_blocking(reply_fd, False)
        self.scratch = scratch
        self.output = bytearray()
        self.output_bytes = output_bytes
        self.killed = False
        self.sequence = 0  # requests are numbered; each answer repeats its request's number
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()

    def _drain_output(self) -> None:
        stream = self.process.stdout
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                return
            self.output += chunk
            if len(self.output) > 2 * self.output_bytes:
                del self.output[:-self.output_bytes]

    def output_tail(self, lines: int = 3) -> str:
        """The last lines the worker printed (for error messages)."""
        text = bytes(self.output[-self.output_bytes:]).decode("utf-8", errors="replace").strip()
        return " | ".join(text.splitlines()[-lines:])

    def wait_ready(self, timeout: float) -> None:
        reply = self.request(None, timeout)
        if reply.get("status") != "ready":
            self.stop()
            raise WorkerDied("the worker did not start properly")

    def request(self, message: dict | None, timeout: float) -> dict:
        """Send ``message`` (None: only read) and return the answer.

        WorkerTimeout when no answer comes within ``timeout`` seconds, WorkerDied
        when the worker exits or sends something that is not a message; in both
        cases the worker has been stopped.
        """
        deadline = time.monotonic() + max(timeout, 0.001)
        try:
            if message is not None:
                self.sequence += 1
                channel.send(self.request_fd, {**message, "seq": self.sequence}, deadline)
            reply = channel.receive(self.reply_fd, deadline)
        except channel.ChannelTimeout:
            self.stop()
            raise WorkerTimeout() from None
        except channel.ChannelClosed:
            reason = self.exit_reason()
            self.stop()
            raise WorkerDied(reason) from None
        except channel.ChannelError as err:
            self.stop()
            raise WorkerDied(f"it sent something the grader cannot read ({err}); did the code write to "
                             f"the grader's channel?") from None
        if reply.get("seq") != self.sequence:
            self.stop()
            raise WorkerDied("it answered out of turn; did the code write to the grader's channel?")
        return reply

    def exit_reason(self) -> str:
        """Why the worker ended, in words."""
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "it closed the grader's channel"
        self._drain.join(timeout=1)
        signum = -code if code < 0 else code - 128 if code > 128 else None
        if signum in SIGNALS:
            return SIGNALS[signum]
        tail = self.output_tail()
        return f"it exited with status {code}" + (f" ({tail})" if tail else "")

    def stop(self) -> None:
        """Kill the worker and everything it started; close the channel."""
        if self.request_fd == -1:
            return
        if self.process.poll() is None:
            self.killed = True
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # bwrap, and in unsafe mode the worker's group
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait()
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.request_fd = self.reply_fd = -1
        self._drain.join(timeout=1 if self.scratch else 5)  # unsafe: a detached child may hold the pipe
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

