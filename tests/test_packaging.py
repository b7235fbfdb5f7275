"""What `pip install .` (a wheel) ships: every package, the grammar, and the standard library
as fuzzpy/_stdlib, found by the loader from an installed package (not only from a clone).
CI (.ci/run) also installs the wheel in fresh virtual environments; this test builds one too."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HANG_GUARD = 300  # seconds; building pulls setuptools into an isolated environment


def declared_packages() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^packages = \[(.*?)\]", text, re.S | re.M).group(1)
    return set(re.findall(r'"([^"]+)"', block))


def test_pyproject_lists_every_package_and_maps_the_stdlib():
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "fuzzpy").rglob("__init__.py")}
    assert declared_packages() == found | {"fuzzpy._stdlib"}
    assert not (ROOT / "fuzzpy" / "_stdlib").exists()  # only in a built package
    assert '"fuzzpy._stdlib" = "stdlib"' in (ROOT / "pyproject.toml").read_text()


def test_the_loader_finds_the_repository_stdlib_in_a_clone(monkeypatch, tmp_path):
    from fuzzpy import stdlib_location as loader

    monkeypatch.delenv("FUZZPY_STDLIB", raising=False)
    assert loader.stdlib_folder() == ROOT / "stdlib"
    monkeypatch.setenv("FUZZPY_STDLIB", str(tmp_path))
    assert loader.stdlib_folder() == tmp_path


# What a build reads: it runs in a copy of these, because setuptools writes `build/` and
# `*.egg-info` into the tree it builds, and two test workers building in the checkout at once
# delete each other's files.
BUILD_INPUTS = ("pyproject.toml", "README.md", "fuzzpy", "stdlib")


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory) -> tuple[Path, str]:
    """The wheel, and what its build printed (verbose: setuptools' warnings included)."""
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=HANG_GUARD)
    if done.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{done.stdout}\n{done.stderr}")
    (path,) = out.glob("fuzzpy-*.whl")
    return path, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(wheel_build) -> Path:
    return wheel_build[0]


def test_the_wheel_builds_without_deprecation_warnings(wheel_build):
    """Issue 38: `project.license` as a table is deprecated (setuptools stops taking it in
    February 2027); the SPDX string form builds without a warning."""
    assert "DeprecationWarning" not in wheel_build[1], wheel_build[1][-3000:]
    assert re.search(r'^license = "MIT"$', (ROOT / "pyproject.toml").read_text(), re.M)


def test_the_wheel_ships_the_grammar_and_the_whole_stdlib(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert "fuzzpy/syntax/grammar.lark" in names
        shipped = {n.rsplit("/", 1)[1]: z.read(n) for n in names if n.startswith("fuzzpy/_stdlib/")}
    assert shipped == {p.name: p.read_bytes() for p in (ROOT / "stdlib").glob("*.fz")}
    for package in declared_packages() - {"fuzzpy._stdlib"}:
        assert package.replace(".", "/") + "/__init__.py" in names


LIB_PROGRAM = """import "stdlib/stats.fz"
import "stdlib/adaptive.fz"
schema T { x : num[0, 100] }
function main (db : bag T) : fuzzy (num, list num) {
  let xs = map (fun r -> r.x) db;
  sample m = adaptive_mean 0.25 0.25 10 0 [1, 10, 100] xs;
  sample c = cdf_by_intervals 0.25 [30, 50, 70] xs;
  return (m, c)
}
"""


def test_an_installed_package_finds_its_stdlib_away_from_the_repository(wheel, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    (work / "prog.fz").write_text(LIB_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "FUZZPY_STDLIB"}
    env["PYTHONPATH"] = str(site)  # before site-packages, where an editable install may point at ROOT
    where = subprocess.run([sys.executable, "-c", "import fuzzpy.syntax.loader as l; print(l.__file__, l.STDLIB)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    module, stdlib = where.stdout.split()
    assert Path(module).is_relative_to(site) and Path(stdlib) == site / "fuzzpy" / "_stdlib"
    done = subprocess.run([sys.executable, "-m", "fuzzpy.interfaces.cli", "check", "prog.fz", "--format", "json"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    import json

    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["ok"], done.stderr
    assert out["epsilon_exact"] == "3/4" and out["lp_solves"] > 0
