"""Installing dlbook never touches the numpy, torch and matplotlib a reader already has.

Colab and readers' own environments come with their own (often older)
numpy, torch and matplotlib. The chapters' set-up cell installs dlbook into
such an environment; if pip upgraded, downgraded or reinstalled one of them,
the kernel would hold a half-replaced package and the first cell would
break. This test builds an environment with older releases inside the
declared ranges, installs dlbook the way the set-up cell does (non-editable,
from the repository), and reads pip's installation report.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Older releases, each inside the range pyproject.toml declares, that a reader may already have.
PREINSTALLED = {"numpy": "1.26.4", "torch": "2.13.0", "matplotlib": "3.8.4"}

pytestmark = pytest.mark.slow


def _declared_minimum(name: str) -> tuple[int, ...]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(dep for dep in dependencies if re.match(rf"{name}\b", dep, re.I))
    assert "<" not in spec and "==" not in spec, f"{spec}: dlbook must declare a lower bound only"
    return tuple(int(part) for part in re.search(r">=\s*([\d.]+)", spec).group(1).split("."))


def _versions(python: Path) -> dict[str, str]:
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], check=True,
                            capture_output=True, text=True).stdout
    return {entry["name"].lower(): entry["version"] for entry in json.loads(listed)}


def test_the_older_releases_are_inside_the_declared_ranges():
    for name, version in PREINSTALLED.items():
        release = tuple(int(part) for part in version.split("+")[0].split("."))
        assert release >= _declared_minimum(name), f"{name} {version} is below the range dlbook declares"


def test_installing_dlbook_keeps_the_numpy_torch_and_matplotlib_already_there(tmp_path):
    venv = tmp_path / "reader"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pins = [f"{name}=={version}" for name, version in PREINSTALLED.items()]
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", *pins], check=True)
    before = _versions(python)
    source = tmp_path / "source"  # a copy: building the wheel leaves nothing in the checkout
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    report_path = tmp_path / "report.json"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", "--report", str(report_path),
                    f"dlbook @ {source.as_uri()}"], check=True)
    report = json.loads(report_path.read_text())
    installed = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
    assert "dlbook" in installed, "pip's report must list the dlbook it installed"
    touched = {name: installed[name] for name in PREINSTALLED if name in installed}
    assert not touched, f"installing dlbook changed packages the reader already had: {touched}"
    after = _versions(python)
    for name in PREINSTALLED:
        assert after[name] == before[name], f"{name}: {before[name]} before, {after[name]} after"
    import_check = "import dlbook, numpy, torch, matplotlib; print(numpy.__version__, torch.__version__)"
    printed = subprocess.run([str(python), "-c", import_check], check=True, capture_output=True, text=True).stdout
    assert printed.split() == [before["numpy"], before["torch"]]
