"""Rules the whole package follows (CONTRIBUTING.md): no global seeding, one home per check."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "lib" / "dlbook"
SOURCES = sorted(PACKAGE.rglob("*.py"))
#: runtime.seed_everything is the notebook set-up's one global seeding, on purpose.
SEEDING_ALLOWED = {PACKAGE / "runtime.py"}
GLOBAL_SEEDING = re.compile(r"torch\.manual_seed|torch\.cuda\.manual_seed|np\.random\.seed|"
                            r"numpy\.random\.seed|(?<![\w.])random\.seed|fork_rng")
#: Checks that validation offers; no module may define its own copy.
SHARED_CHECKS = ("_check_device", "_check_dtype", "_check_bool", "_check_sequence", "_describe",
                 "_check_int", "_check_float", "_check_square", "_check_widths")


def _relative(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", [p for p in SOURCES if p not in SEEDING_ALLOWED], ids=_relative)
def test_no_global_seeding(path):
    hits = [f"line {n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if GLOBAL_SEEDING.search(line)]
    assert not hits, f"{_relative(path)} touches the global random stream (use a generator): {hits}"


@pytest.mark.parametrize("path", SOURCES, ids=_relative)
def test_no_private_copies_of_shared_checks(path):
    tree = ast.parse(path.read_text())
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    copies = sorted(defined & set(SHARED_CHECKS))
    assert not copies, f"{_relative(path)} defines {copies}: use dlbook.validation instead"


@pytest.mark.parametrize("path", SOURCES, ids=_relative)
def test_no_imports_of_private_names_from_other_modules(path):
    tree = ast.parse(path.read_text())
    private = [f"{node.module}.{alias.name}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module
               for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not private, f"{_relative(path)} imports private names {private}"
