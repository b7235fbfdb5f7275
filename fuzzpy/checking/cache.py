"""The on-disk check cache of `fuzzpy check`: a checked file's report, reused only for the same input.

A hit must give exactly the checker's answer for that exact input, and a cache another user
can write must never be a way to get a program accepted.  So (docs/performance.md; docs/soundness.md,
rule Reused reports):

- the key is everything the report depends on: the file's path and content, the public
  parameters and entry point, the standard library folder, fuzzpy's own code (a hash of every
  source file of the package, not just its version number), the Python version and the
  installed files of the libraries the checker calls (lark, PuLP, HiGHS, NumPy, SymPy);
- every imported file is recorded with how it was resolved and a hash of the text the check
  read; a hit re-resolves every import and re-hashes every file, and any difference is a miss;
- an entry is authenticated with an HMAC under a random per-user key kept in the cache folder
  (mode 0600), checked before anything in the entry is read: an entry written by anyone
  without that key, or damaged, is ignored (a miss), never trusted;
- the folder must belong to the current user and be writable by no one else, or the cache
  is not used at all; any error reading or writing it is a miss, never a failure of the check.

Reports with a read error (E0104) or an internal error (E09xx) are not stored.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from ..cachedir import prune_oldest, write_entry

FORMAT = 1
MAGIC = b"FZCHECK1"
# Libraries whose installed files are part of the key: the parser, the LP solver's stack, and
# what a primitive's typing rule may compute with.
LIBRARIES = ("lark", "pulp", "highspy", "numpy", "sympy")
MAX_ENTRIES = 2000  # beyond this, the least recently written entries are removed
STATS = {"hits": 0, "misses": 0, "stored": 0, "ignored": 0}


# rule Reused reports: only a folder no one else can write
def _folder() -> Optional[Path]:
    from ..cachedir import private_folder

    return private_folder("checks")


# rule Reused reports
@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of fuzzpy's own source (every .py and .lark file of the package): a changed
    checker, even at the same version number, never reuses an entry."""
    from ..version import __version__

    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for path in sorted(p for ext in ("*.py", "*.lark") for p in package.rglob(ext)):
        h.update(str(path.relative_to(package)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


# rule Reused reports
@lru_cache(maxsize=1)
def environment_fingerprint() -> str:
    """The Python version and, for each library of LIBRARIES, the identity of its installed
    package file (path, size, modification time): an upgrade changes it, nothing is imported."""
    import importlib.util

    parts = [sys.version, sys.implementation.cache_tag or ""]
    for name in LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None)
        if origin is None:
            parts.append(f"{name}:absent")
            continue
        try:
            st = os.stat(origin)
            parts.append(f"{name}:{origin}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{name}:{origin}:unreadable")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# rule Reused reports: every input of the check is part of the key
def key_material(path: Path, text: str, params: dict[str, str], entry: Optional[str]) -> str:
    """Everything the report depends on but the imported files (checked separately)."""
    from ..stdlib_location import STDLIB

    return repr((FORMAT, code_fingerprint(), environment_fingerprint(), os.fspath(path), os.path.abspath(path),
                 _digest(text.encode("utf-8")), sorted(params.items()), entry, os.fspath(STDLIB)))


# rule Reused reports
def _imports(report: Any) -> Optional[list[tuple[str, str, Optional[str], Optional[str]]]]:
    """(importer, import path, resolved file, hash of the text the check read) for every
    import of every file the check read; None when an imported text is not known."""
    from ..syntax import ast as A
    from ..syntax.loader import resolve_import
    from ..syntax.parser import parse_module

    out = []
    for name, text in report.sources.items():
        module, _ = parse_module(text, name)
        for decl in module.decls:
            if not isinstance(decl, A.Import) or not decl.path.endswith(".fz"):
                continue
            target = resolve_import(decl.path, name)
            if target is None or target.suffix != ".fz":
                out.append((name, decl.path, None if target is None else str(target), None))
                continue
            read = report.sources.get(str(target))
            if read is None:
                return None
            out.append((name, decl.path, str(target), _digest(read.encode("utf-8"))))
    return out


# rule Reused reports: every imported file resolved and hashed again
def _imports_unchanged(recorded: list) -> bool:
    from ..syntax.loader import resolve_import

    for importer, path, target, digest in recorded:
        now = resolve_import(path, importer)
        if (None if now is None else str(now)) != target:
            return False
        if digest is not None and _digest(Path(target).read_bytes()) != digest:
            return False
    return True


def _entry_path(folder: Path, material: str) -> Path:
    return folder / (_digest(material.encode("utf-8")) + ".bin")


# rule Reused reports: only an entry authenticated with the user's own key
def load(folder: Path, key: bytes, material: str) -> Any:
    """The stored report for `material`, or None: any doubt is a miss."""
    try:
        blob = _entry_path(folder, material).read_bytes()
    except OSError:
        return None
    try:
        if not blob.startswith(MAGIC):
            raise ValueError("not an entry")
        tag, body = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:]
        if not hmac.compare_digest(tag, hmac.new(key, body, hashlib.sha256).digest()):
            raise ValueError("not written with this user's key")
        payload = pickle.loads(body)  # authenticated: written by this user's fuzzpy
        if payload["material"] != material or not _imports_unchanged(payload["imports"]):
            return None
        return payload["report"]
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
        STATS["ignored"] += 1
        return None


# rule Reused reports
def printable(report: Any) -> Any:
    """The report without what only running the program needs (the checked program, its types
    and schemas): what `fuzzpy check` prints, JSON and SARIF included, reads none of it, and
    reading them back would import the whole checker."""
    import copy

    out = copy.copy(report)
    out.entry_instance, out.entry_type, out.schemas, out.param_types = None, None, {}, {}
    out.inputs = [copy.copy(i) for i in report.inputs]
    for i in out.inputs:
        i.semantic = None
    # What formulas are derived from (--formula, which never reads the cache).
    out.functions = [copy.copy(f) for f in report.functions]
    for f in out.functions:
        f.coefs = f.rhos = f.param_names = None
    return out


# rule Reused reports
def store(folder: Path, key: bytes, material: str, report: Any) -> bool:
    if any(d.code == "E0104" or d.code.startswith("E09") for d in report.diagnostics):
        return False
    imports = _imports(report)
    if imports is None:
        return False
    try:
        body = pickle.dumps({"material": material, "imports": imports, "report": printable(report)},
                            protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable report is simply not cached
        return False
    blob = MAGIC + hmac.new(key, body, hashlib.sha256).digest() + body
    if not write_entry(_entry_path(folder, material), blob):
        return False
    STATS["stored"] += 1
    prune_oldest(folder, "*.bin", MAX_ENTRIES)
    return True


# rule Reused reports
def cached_check_file(path: str | Path, params: Optional[dict[str, str]] = None,
                      entry: Optional[str] = "main") -> Any:
    """`check_file` for `fuzzpy check`, through the cache when one is usable.  A report read
    from the cache is `printable`: it has no checked program to run (`entry_instance` None)."""
    from ..syntax.loader import read_source
    from .reports import CheckReport

    t0 = time.perf_counter()
    path, params = Path(path), dict(params or {})
    text, err = read_source(path)
    if err is not None:
        report = CheckReport(str(path), {})
        report.diagnostics.append(err)
        return report
    folder = _folder()
    from ..cachedir import user_key

    key = user_key(folder) if folder is not None else None
    if folder is None or key is None:
        from .program import check_source

        return check_source(text, str(path), params, entry)
    material = key_material(path, text, params, entry)
    report = load(folder, key, material)
    if report is not None:
        STATS["hits"] += 1
        # Statistics of this run's work, not part of the answer: nothing was parsed, checked or solved.
        report.timings = {"parse": 0.0, "check": 0.0, "cache": time.perf_counter() - t0}
        report.lp_solves = 0
        return report
    STATS["misses"] += 1
    from .program import check_source

    report = check_source(text, str(path), params, entry)
    store(folder, key, material, report)
    return report
