"""Executed chapter notebooks: one execution per chapter feeds the book, the student book and the tests.

A chapter is executed either by nbval during the test run (the root conftest
collects each cell's outputs) or by ``execute()`` below when the book is
built on its own. Either way the result is written to
``_build/executed/NN_slug.ipynb`` with the hash of everything that can
change its outputs (the notebook's code and markdown, lib/, the pins and the
book configuration) in its metadata. The book build renders these files
without executing anything, and refuses a file whose hash no longer matches
its inputs, so a change in lib/ never leaves stale outputs in the book.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
#: Where executed chapters go; ``make test-latest`` points it elsewhere so its run never feeds the book.
EXECUTED = Path(os.environ.get("DLBOOK_EXECUTED_DIR", ROOT / "_build" / "executed")).resolve()
#: Notebook metadata key holding the inputs hash and the execution time.
META_KEY = "dlbook_executed"
#: Environment of every chapter execution, the same for nbval and the book build. The inline
#: backend puts each plt.show() into the outputs (under Agg the figures would silently vanish).
ENVIRONMENT = {"DLBOOK_FIGURES": "static", "DLBOOK_CHECKS": "strict", "DLBOOK_BOOK_BUILD": "1",
               "MPLBACKEND": "module://matplotlib_inline.backend_inline", "PYTHONHASHSEED": "0",
               "DLBOOK_NUM_THREADS": "1", "DLBOOK_SCALE": "default"}


def chapters() -> list[Path]:
    """Every chapter notebook, book/[0-9][0-9]_*.ipynb."""
    return sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def _package_digest() -> bytes:
    digest = hashlib.sha256()
    files = sorted((ROOT / "lib").rglob("*.py")) + [ROOT / "requirements.txt", ROOT / "_config.yml"]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.digest()


def inputs_hash(notebook: Path) -> str:
    """Hash of the chapter's cells and of everything outside it that can change its outputs."""
    nb = nbformat.read(notebook, as_version=4)
    digest = hashlib.sha256(_package_digest())
    for cell in nb.cells:
        digest.update(f"{cell.cell_type}\0{cell.get('id', '')}\0{cell.source}\0".encode())
    return digest.hexdigest()


def machine() -> dict:
    """What a chapter ran on: the device the set-up cell picks, the CPU, and the versions."""
    import platform

    import numpy
    import torch

    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    if torch.cuda.is_available():
        device = f"GPU ({torch.cuda.get_device_name(0)})"
    elif torch.backends.mps.is_available():
        device = "GPU (Apple MPS)"
    else:
        device = "CPU"
    return {"device": device, "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "numpy": numpy.__version__}


def executed_path(notebook: Path) -> Path:
    return EXECUTED / Path(notebook).name


def write(notebook: Path, outputs: dict[str, list], counts: dict[str, int | None],
          seconds: float) -> Path:
    """Write the executed copy of ``notebook`` from per-cell outputs (cell id -> outputs)."""
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.from_dict(_plain(out)) for out in outputs.get(cell.id, [])]
            cell.execution_count = counts.get(cell.id)
    nb.metadata[META_KEY] = {"inputs": inputs_hash(notebook), "seconds": round(seconds, 2), "machine": machine()}
    EXECUTED.mkdir(parents=True, exist_ok=True)
    target = executed_path(notebook)
    partial = target.with_suffix(".partial")
    nbformat.write(nb, str(partial))
    partial.replace(target)  # atomic: a reader never sees half a notebook
    return target


def _plain(output) -> dict:
    """An output as plain dicts (nbval's NotebookNodes carry extra keys for some types)."""
    output = dict(output)
    kind = output["output_type"]
    keep = {"stream": ("output_type", "name", "text"),
            "display_data": ("output_type", "data", "metadata"),
            "execute_result": ("output_type", "data", "metadata", "execution_count"),
            "error": ("output_type", "ename", "evalue", "traceback")}[kind]
    plain = {key: output[key] for key in keep if key in output}
    plain.setdefault("metadata", {}) if kind in ("display_data", "execute_result") else None
    if kind == "execute_result":
        plain.setdefault("execution_count", None)
    return plain


def is_fresh(notebook: Path) -> bool:
    """True if the executed copy exists and was made from the current inputs."""
    target = executed_path(notebook)
    if not target.exists():
        return False
    meta = nbformat.read(target, as_version=4).metadata.get(META_KEY, {})
    return meta.get("inputs") == inputs_hash(notebook)


def execute(notebook: Path, *, timeout: int = 300) -> Path:
    """Execute a chapter with nbclient (outside the test run) and write its executed copy."""
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    saved = {key: os.environ.get(key) for key in ENVIRONMENT}
    os.environ.update(ENVIRONMENT)
    start = time.perf_counter()
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(notebook.parent)}}).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    outputs = {cell.id: cell.outputs for cell in nb.cells if cell.cell_type == "code"}
    counts = {cell.id: cell.execution_count for cell in nb.cells if cell.cell_type == "code"}
    return write(notebook, outputs, counts, time.perf_counter() - start)
