"""Reading a submitted notebook without trusting it: path checks, a size cap, a bounded parser.

:func:`read_submission` refuses symbolic links, folders and anything but a
regular file, and files over the size cap, before reading a byte; the
notebook is then parsed in a child process with a memory and time limit
(this file, run by path), so that a notebook built to exhaust memory or
time costs only that child. The grader gets back plain data: each code
cell's index, id, source, exercise metadata and the names its top level
defines (used to explain a NameError or a solution written in another cell).

Run by path, this module imports only the standard library. Notebooks of
format 3 and older (cells in worksheets) are read too.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass

#: Largest notebook the grader reads, in bytes.
MAX_BYTES = 20 * 2**20
#: Limits of the parsing child.
PARSE_TIMEOUT = 60
PARSE_MEMORY = 2 * 2**30


class NotGradable(Exception):
    """The file cannot be graded; the message says why (it becomes the reason)."""


class NotANotebook(NotGradable):
    """The file's content is not a notebook the grader can read."""


@dataclass(frozen=True)
class Cell:
    """A code cell of a submission."""

    index: int
    id: str | None
    source: str
    exercise: str | None   # the dlbook.exercise metadata
    defines: tuple[str, ...]  # names bound at the cell's top level


def read_bytes(path, max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes; NotGradable for links, folders, special files and files too large."""
    path = os.fspath(path)
    try:
        info = os.lstat(path)
    except OSError as err:
        raise NotGradable(f"cannot read the file ({err.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise NotGradable("the submission is a symbolic link, not a notebook file")
    if stat.S_ISDIR(info.st_mode):
        raise NotGradable("the submission is a folder, not a notebook file")
    if not stat.S_ISREG(info.st_mode):
        raise NotGradable("the submission is not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise NotGradable(f"cannot read the file ({err.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the check above
            raise NotGradable("the submission is not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise NotGradable(f"the file is larger than the {max_bytes / 2**20:g} MB the grader reads")
    return data


def parse(data: bytes, *, timeout: float = PARSE_TIMEOUT, memory: int = PARSE_MEMORY) -> list[Cell]:
    """The code cells of a notebook given as bytes, parsed in a bounded child process.

    NotANotebook with a short reason when the bytes are not a notebook, or
    the parser ran out of time or memory.
    """
    command = [sys.executable, "-I", "-B", os.path.abspath(__file__), str(int(memory))]
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NotANotebook(f"reading the notebook took longer than {timeout:g} s") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise NotANotebook("the parser ran out of memory or failed") from None
    if "error" in answer:
        raise NotANotebook(str(answer["error"]))
    return [Cell(c["index"], c["id"], c["source"], c["exercise"], tuple(c["defines"]))
            for c in answer["cells"]]


def read_submission(path, max_bytes: int = MAX_BYTES) -> list[Cell]:
    """The code cells of the submission at ``path`` (see :func:`read_bytes` and :func:`parse`)."""
    return parse(read_bytes(path, max_bytes))


# ---------------------------------------------------------------------------
# The child process
# ---------------------------------------------------------------------------

def _notebook_cells(data: bytes) -> list[dict]:
    """Raw code cells as dicts; ValueError with the reason for anything but a notebook."""
    if not data.strip():
        raise ValueError("the file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"not valid JSON ({str(err)[:100]})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells", notebook.get("worksheets")), list):
        raise ValueError("the JSON is not a notebook (it has no list of cells)")
    cells = notebook.get("cells")
    if not isinstance(cells, list):  # formats 1 to 3: cells in worksheets, code in "input"
        cells = [dict(c, source=c.get("input", "")) if isinstance(c, dict) and c.get("cell_type") == "code" else c
                 for sheet in notebook["worksheets"] if isinstance(sheet, dict)
                 for c in (sheet.get("cells") if isinstance(sheet.get("cells"), list) else [])]
    if not all(isinstance(c, dict) for c in cells):
        raise ValueError("the JSON has no list of cells")
    return cells


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return source if isinstance(source, str) else ""


def _defined_names(source: str) -> list[str]:
    """Names bound at the top level of a cell (functions, classes, assignments, imports)."""
    import ast

    lines = [line if not line.lstrip().startswith(("%", "!")) else "" for line in source.split("\n")]
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(alias.asname or alias.name).split(".")[0] for alias in node.names]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def _shape_of(data: bytes) -> dict:
    try:
        cells = _notebook_cells(data)
    except ValueError as err:
        return {"error": str(err)}
    found = []
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        source = _source(cell)
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        meta = metadata.get("dlbook") if isinstance(metadata.get("dlbook"), dict) else {}
        exercise = meta.get("exercise") if isinstance(meta.get("exercise"), str) else None
        cell_id = cell.get("id") if isinstance(cell.get("id"), str) else None
        found.append({"index": index, "id": cell_id, "source": source, "exercise": exercise,
                      "defines": _defined_names(source)})
    return {"cells": found}


def _main(argv) -> int:
    import resource

    memory = int(argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    answer = _shape_of(sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
