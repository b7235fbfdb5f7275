"""The layers of fuzzpy/primitives and fuzzpy/runtime, from their import statements.

Every import is read with `ast`, at the top of a module and inside its functions alike: an
import moved into a function still runs, so it cannot hide a cycle.  The rules:

* no cycle among the modules of the two packages (so none between them either);
* the declarations (fuzzpy/primitives) never import the runtime: checking a program loads
  neither the runtime nor numpy or pandas;
* nothing finds a module by name at run time (`importlib`, `__import__`): every edge is an
  import statement this test reads.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fuzzpy.primitives", "fuzzpy.runtime")


def _modules() -> dict[str, Path]:
    """Every module of the two packages, by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / Path(*package.split("."))).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path) -> list[tuple[str, int]]:
    """(the dotted name each import statement of the module reads, its line)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from pkg import x` reads pkg.x when x is a module, else pkg
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
            found.append((base, node.lineno))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _ in _imported(name, path):
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_primitives_and_the_runtime_have_no_import_cycle():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_sees_an_import_inside_a_function():
    graph = _graph()
    graph["fuzzpy.runtime.values"].add("fuzzpy.runtime.evaluator")  # as a lazy import in values would
    assert any("fuzzpy.runtime.values" in c and "fuzzpy.runtime.evaluator" in c for c in _cycles(graph))


def test_the_declarations_never_import_the_runtime():
    modules = _modules()
    wrong = [(name, line, target) for name, path in modules.items() if name.startswith("fuzzpy.primitives")
             for target, line in _imported(name, path)
             if target == "fuzzpy.runtime" or target.startswith("fuzzpy.runtime.")
             or target.split(".")[0] in ("numpy", "pandas")]
    assert wrong == []


def test_no_module_is_found_by_name_at_run_time():
    calls = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "importlib" for a in node.names):
                calls.append((name, node.lineno))
            elif isinstance(node, ast.ImportFrom) and node.module == "importlib":
                calls.append((name, node.lineno))
            elif isinstance(node, ast.Name) and node.id == "__import__":
                calls.append((name, node.lineno))
    assert calls == []


def test_checking_a_program_loads_neither_the_runtime_nor_pandas():
    probe = ("import sys\n"
             "from fuzzpy.checking.program import check_source\n"
             "r = check_source('schema T { x : num[0, 10] }\\n'\n"
             "                 'function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> clip 0 1 r.x) db)) }',"
             " 't.fz')\n"
             "assert r.ok\n"
             "print(sorted(m for m in sys.modules if m.startswith('fuzzpy.runtime') or m in ('pandas', 'numpy')))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
