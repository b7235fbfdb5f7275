"""Parsed standard-library files kept on disk: a `fuzzpy check` of a file that imports the
standard library reads their syntax trees back instead of parsing them again (most of a small
file's parse).

A tree read back is the parser's answer for that text (docs/soundness.md, "Reused parses"):

- only files of the standard library folder are kept, and only trees that parsed without a
  diagnostic;
- the key is the file's path, a hash of its text, the Python version, lark's installed file,
  and a hash of every source file the parser can run: the package's `syntax/` folder, its
  grammar, and the base modules the layer contract lets it import (pyproject.toml);
- an entry is authenticated with the user's key of the private cache folder (`cachedir`) before
  it is unpickled, and its stored key must equal the one asked for; any doubt is a miss, and a
  miss parses as before.  `FUZZPY_NO_CACHE=1` turns it off.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic
from ..stdlib_location import STDLIB

FORMAT = 1
MAGIC = b"FZPARSE1"
MAX_ENTRIES = 200  # the standard library has a few dozen files; old versions' entries go first
# The modules below the syntax layer (pyproject.toml [tool.importlinter]): all the parser can import.
BASE_MODULES = ("accounting", "cachedir.py", "diagnostics.py", "exact.py", "hints.py", "limits.py", "stdio.py",
                "stdlib_location.py", "version.py")


# rule Reused reports
def parse_module_cached(text: str, file: str) -> tuple[Any, list[Diagnostic]]:
    """`parser.parse_module(text, file)`, read from disk for a file of the standard library."""
    from .parser import parse_module

    if not _in_stdlib(file):
        return parse_module(text, file)
    place = _place()
    material = _material(text, file) if place is not None else ""
    if place is not None:
        found = _load(*place, material)
        if found is not None:
            return found, []
    module, diags = parse_module(text, file)
    if place is not None and not diags:
        _store(*place, material, module)
    return module, diags


def _in_stdlib(file: str) -> bool:
    try:
        return Path(file).resolve().is_relative_to(STDLIB.resolve())
    except (OSError, ValueError):
        return False


def _place() -> Optional[tuple[Path, bytes]]:
    from ..cachedir import private_folder, user_key

    folder = private_folder("parses")
    key = user_key(folder) if folder is not None else None
    return None if key is None else (folder, key)  # type: ignore[return-value]


# rule Reused reports
@lru_cache(maxsize=1)
def parser_fingerprint() -> str:
    """Python, lark's installed file, and every source file the parser can run."""
    import importlib.util

    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{FORMAT}\0{sys.version}\0".encode())
    spec = importlib.util.find_spec("lark")
    origin = getattr(spec, "origin", None)
    if origin is not None:
        st = os.stat(origin)
        h.update(f"{origin}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    files = sorted(p for p in (package / "syntax").rglob("*") if p.suffix in (".py", ".lark"))
    for name in BASE_MODULES:
        base = package / name
        files += sorted(base.rglob("*.py")) if base.is_dir() else [base]
    for path in files:
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _material(text: str, file: str) -> str:
    return repr((parser_fingerprint(), os.path.abspath(file), hashlib.sha256(text.encode("utf-8")).hexdigest()))


def _entry(folder: Path, material: str) -> Path:
    return folder / (hashlib.sha256(material.encode("utf-8")).hexdigest() + ".bin")


def _load(folder: Path, key: bytes, material: str) -> Any:
    try:
        blob = _entry(folder, material).read_bytes()
        if not blob.startswith(MAGIC):
            return None
        tag, body = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:]
        if not hmac.compare_digest(tag, hmac.new(key, body, hashlib.sha256).digest()):
            return None  # not written with this user's key: never unpickled
        stored, module = pickle.loads(body)
        return module if stored == material else None
    except Exception:  # noqa: BLE001 - a damaged entry is a miss
        return None


def _store(folder: Path, key: bytes, material: str, module: Any) -> None:
    from ..cachedir import prune_oldest, write_entry

    try:
        body = pickle.dumps((material, module), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - not storing is never a failure of the check
        return
    if write_entry(_entry(folder, material), MAGIC + hmac.new(key, body, hashlib.sha256).digest() + body):
        prune_oldest(folder, "*.bin", MAX_ENTRIES)
