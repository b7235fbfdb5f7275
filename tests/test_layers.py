"""The stages depend one way: the layer contract in pyproject.toml ([tool.importlinter]), checked
by import-linter with every import, those inside functions included, and it names every
package and module of fuzzpy, so a new one cannot slip outside the layers (docs/architecture.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    return [[name.strip() for name in layer.split("|")] for layer in config["layers"]]


def test_the_layer_contract_holds_with_every_import():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"1 kept, 0 broken", done.stdout), done.stdout[-2000:]


def test_the_layers_name_every_package_and_module_of_fuzzpy():
    named = {name for layer in layers() for name in layer}
    present = {f"fuzzpy.{p.stem}" for p in (ROOT / "fuzzpy").glob("*.py") if p.stem != "__init__"}
    present |= {f"fuzzpy.{p.parent.name}" for p in (ROOT / "fuzzpy").glob("*/__init__.py")}
    assert present == named, f"not in a layer: {sorted(present - named)}; no such module: {sorted(named - present)}"
