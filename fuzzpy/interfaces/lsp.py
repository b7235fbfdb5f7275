"""The fuzzpy language server (pygls): live diagnostics, hover, privacy code lens, definitions,
completion.  Start it with `fuzzpy lsp` (stdio).

Diagnostics are the checker's own `Diagnostic`s with the CLI's text, including the budget checks
of `fuzzpy check` (the `# fuzzpy: budget` pragma, or a `budget` initialization option).

Speed: the checker costs 0.5-1 ms per function, so re-checking a 1,000-line file on every key
press takes 40-100 ms.  `IncrementalChecker` re-checks only the top-level functions whose
text, or the text of a function they call (transitively), changed:

* A *unit* is a declaration chunk of the open file (see `syntax.parser.split_chunks`) holding
  exactly one function.  Its key is a hash of the *prelude* (every other chunk: schemas, params,
  imports, plus the text of imported files and the server settings) and of the text and first
  line of each function in its dependency closure (functions it names, transitively).
* A unit is checked by running the ordinary `check_source` on a copy of the file in which every
  function outside its closure is replaced, on the same line, by a one-line generic stub
  (`function f x { x }`: generic functions are only checked at their uses, so a stub costs
  nothing) and every other line keeps its position.  Spans, names and therefore messages are
  the ones a full check gives.  `run(F)` = the diagnostics of checking each function of F's
  closure as a root, so the union of `run(F)` over all units is the full check's result.
* Each unit's result is cached under its key; an edit re-runs the units whose key changed.  A
  unit whose result mentions an unknown name (E0201, whose "did you mean" note lists every
  function) is also keyed by the set of all function names.
* When re-running the changed units would cost more than `FULL_FACTOR` full checks (long call
  chains), or the file is unusual (duplicate names, several functions in one chunk), a plain
  full check runs instead and the cache is refilled in the background while the editor idles.

Chunks that fail to parse are left out (blank lines) of every run, so typing inside a broken
function does not invalidate the others; their syntax errors come from the parser directly.
Files without the entry function are treated as libraries: no "missing entry point" error.

Robustness: every handler catches its own exceptions.  A failing analysis is logged and shown as
one `internal-error` diagnostic; the server keeps running.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import threading
import traceback
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from ..checking.checker import Checker, MechanismRecord
from ..checking.program import CheckReport, FunctionReport, check_source
from ..checking.program import pragma_budget  # the one reading of `# fuzzpy: budget`
from .report import apply_budget
from ..checking.sens import INF, fmt_coef
from ..diagnostics import Diagnostic, Span
from ..primitives.registry import all_primitives
from ..syntax import ast as A
from ..syntax.loader import load_program, resolve_import
from ..syntax.parser import MAX_SOURCE_BYTES, parse_chunk, split_chunks

log = logging.getLogger("fuzzpy.lsp")

SOURCE = "fuzzpy"
INTERNAL_CODE = "internal-error"
SYNTHETIC_ENTRY = "__fuzzpy_lsp_entry__"
FULL_FACTOR = 1.5   # re-run changed units unless that costs more than 1.5 full checks
RUN_OVERHEAD = 3    # fixed cost of one check run, in "functions"
CACHE_ENTRIES = 5_000
STACK_BYTES = 512 * 1024 * 1024
KEYWORDS = ("function", "schema", "param", "import", "let", "sample", "fun", "if", "then", "else", "return",
            "case", "of", "inl", "inr", "true", "false", "num", "int", "bool", "string", "unit", "cat", "bag",
            "fuzzy", "list", "parts", "drop", "default", "inf")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DECL_NAME = re.compile(r"^function\s+([A-Za-z_][A-Za-z0-9_]*)")
_LOCAL_BINDERS = re.compile(r"\b(?:let|sample)\s+([A-Za-z_][A-Za-z0-9_]*)|\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*:"
                            r"|\bfun\s+([A-Za-z_][A-Za-z0-9_ ]*?)\s*->")


# ---- settings ---------------------------------------------------------------------------------


@dataclass
class Settings:
    """Server options, from the client's `initializationOptions` (all optional)."""

    entry: str = "main"
    params: dict[str, str] = field(default_factory=dict)
    budget: Optional[Fraction] = None
    debounce: float = 0.015
    incremental: bool = True

    @staticmethod
    def from_options(options: Any) -> "Settings":
        s = Settings()
        if not isinstance(options, dict):
            return s
        s.entry = str(options.get("entry") or s.entry)
        params = options.get("params") or {}
        if isinstance(params, dict):
            s.params = {str(k): str(v) for k, v in params.items()}
        if options.get("budget") is not None:
            try:
                s.budget = Fraction(str(options["budget"]))
            except (ValueError, ZeroDivisionError):
                log.warning("ignoring invalid budget option %r", options["budget"])
        if options.get("debounceMs") is not None:
            s.debounce = max(0.0, float(options["debounceMs"]) / 1000)
        s.incremental = bool(options.get("incremental", True))
        return s

    def key(self) -> tuple:
        return (self.entry, tuple(sorted(self.params.items())))


# ---- what one analysis produces -------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """A local variable or parameter as the checker saw it (recorded through `Checker.on_bind`)."""

    span: Span
    name: str
    type: str
    sensitivity: str


@dataclass
class UnitResult:
    """The result of one check run (a unit's, the prelude's, or a full check)."""

    diagnostics: list[Diagnostic]
    functions: list[FunctionReport]
    mechanisms: list[MechanismRecord]
    bindings: list[Binding]
    params: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    entry: Optional[CheckReport] = None  # the entry unit's: entry name, inputs, entry type only
    uses_names: bool = False
    names: tuple = ()


@dataclass
class Analysis:
    """Everything the server knows about one version of a document."""

    file: str
    text: str
    report: CheckReport
    modules: list[A.Module]
    bindings: list[Binding]
    runs: int = 0          # check runs this analysis needed (0: everything from the cache)
    full: bool = False     # whether a plain full check ran
    stale_units: int = 0   # units left for background warming

    @property
    def decls(self) -> list[A.Decl]:
        return [d for m in self.modules for d in m.decls]

    @property
    def own_decls(self) -> list[A.Decl]:
        return self.modules[-1].decls if self.modules else []


# ---- recording bindings from the checker --------------------------------------------------------


class _BindingRecorder:
    """Receives `Checker.on_bind` calls; records only while an analysis is running."""

    def __init__(self) -> None:
        self.items: Optional[list[Binding]] = None

    def __call__(self, checker: Checker, span: Span, name: str, value: Any) -> None:
        if self.items is None:
            return
        try:
            self.items.append(Binding(span, name, str(value.type), _render_distance(checker, value)))
        except Exception:  # noqa: BLE001 - hover data is best effort, never breaks a check
            pass


def _render_distance(checker: Checker, value: Any) -> str:
    if value.fn is not None:
        return "a function: its sensitivity is in its type, or checked at each use"
    if not value.dist:
        return "public: does not depend on private inputs"
    parts = [f"{fmt_coef(c)} in {checker.describe(s)}" for s, c in value.dist.items()]
    return "sensitivity " + ", ".join(parts)


_RECORDER = _BindingRecorder()
Checker.on_bind = _RECORDER  # type: ignore[attr-defined]


# ---- the incremental checker ------------------------------------------------------------------


@dataclass
class _Chunk:
    first_line: int
    text: str
    decls: tuple
    errors: tuple

    @property
    def last_line(self) -> int:
        return self.first_line + self.text.count("\n")

    @property
    def broken(self) -> bool:
        return bool(self.errors)

    @property
    def function(self) -> Optional[A.FunDecl]:
        if not self.errors and len(self.decls) == 1 and isinstance(self.decls[0], A.FunDecl):
            return self.decls[0]
        return None


@dataclass
class _Plan:
    """How one document version is split into units, and their cache keys."""

    file: str
    text: str
    chunks: list[_Chunk]
    units: dict[str, _Chunk]
    closure: dict[str, frozenset]
    keys: dict[str, str]
    prelude_key: str
    names: tuple
    entry_mode: bool
    reason_full: Optional[str] = None


class IncrementalChecker:
    """Checks documents, re-using the results of functions an edit did not affect."""

    def __init__(self, max_entries: int = CACHE_ENTRIES, full_factor: float = FULL_FACTOR) -> None:
        self.cache: OrderedDict[str, UnitResult] = OrderedDict()
        self.max_entries = max_entries
        self.full_factor = full_factor
        self.lock = threading.Lock()
        self.names_used: dict[tuple[int, str], frozenset] = {}  # per chunk text: names it mentions

    # -- public

    def analyse(self, text: str, file: str, settings: Settings,
                overlays: Optional[dict[str, str]] = None) -> Analysis:
        """Check `text`; must run in a thread with a large stack (see `make_executor`)."""
        with self.lock:
            modules, parse_diags, texts = load_program(text, file, overlays)
            plan = self._plan(text, file, settings, modules, texts)
            if not settings.incremental or plan.reason_full:
                return self._full(plan, settings, modules, parse_diags, texts, overlays)
            missing = [u for u in plan.units if self._lookup(plan, u) is None]
            if _unit_cost(plan, missing) > self.full_factor * _unit_cost(plan, None) and len(missing) > 1:
                return self._full(plan, settings, modules, parse_diags, texts, overlays)
            results = [self._run_unit(plan, settings, name, overlays)
                       for name in sorted(missing, key=lambda u: len(plan.closure[u]))]
            results += [self._lookup(plan, u) for u in plan.units if u not in missing]  # type: ignore[misc]
            if not plan.units:
                results.append(self._prelude_run(plan, settings, overlays))
            return self._merge(plan, settings, modules, parse_diags, texts, results, runs=len(missing))

    def warm(self, text: str, file: str, settings: Settings, overlays: Optional[dict[str, str]] = None,
             limit: int = 1) -> int:
        """Fill the cache for up to `limit` units of this text; returns how many are still missing."""
        with self.lock:
            modules, _, texts = load_program(text, file, overlays)
            plan = self._plan(text, file, settings, modules, texts)
            if plan.reason_full or not settings.incremental:
                return 0
            missing = sorted((u for u in plan.units if self._lookup(plan, u) is None),
                             key=lambda u: len(plan.closure[u]))
            for name in missing[:limit]:
                self._run_unit(plan, settings, name, overlays)
            return max(0, len(missing) - limit)

    # -- planning

    def _plan(self, text: str, file: str, settings: Settings, modules: list[A.Module],
              texts: dict[str, str]) -> _Plan:
        chunks = _chunks(text, file)
        units: dict[str, _Chunk] = {}
        reason = None
        if len(text) > MAX_SOURCE_BYTES or "\x00" in text:
            reason = "unusual source"
        for c in chunks:
            fn = c.function
            if fn is not None:
                if fn.name in units:
                    reason = f"duplicate function {fn.name}"
                units[fn.name] = c
            elif any(isinstance(d, A.FunDecl) for d in c.decls):
                reason = "several declarations in one chunk"
        closure = _closures({name: self._names_of(c) for name, c in units.items()})
        library = tuple(sorted((k, v) for k, v in texts.items() if k != file))
        prelude = [(c.first_line, c.text) for c in chunks if c.function is None and not c.broken]
        entry_mode = settings.entry in units
        prelude_key = _hash((file, settings.key(), entry_mode, tuple(prelude), library))
        keys = {name: _hash((prelude_key, name, tuple((units[g].first_line, units[g].text)
                                                      for g in sorted(closure[name]))))
                for name in units}
        return _Plan(file, text, chunks, units, closure, keys, prelude_key, tuple(sorted(units)),
                     entry_mode, reason)

    def _names_of(self, chunk: _Chunk) -> frozenset:
        key = (chunk.first_line, chunk.text)
        names = self.names_used.get(key)
        if names is None:
            if len(self.names_used) > self.max_entries:
                self.names_used.clear()
            names = self.names_used[key] = frozenset(_names_used(chunk.function))  # type: ignore[arg-type]
        return names

    def _lookup(self, plan: _Plan, unit: str) -> Optional[UnitResult]:
        hit = self.cache.get(plan.keys[unit])
        if hit is None or (hit.uses_names and hit.names != plan.names):
            return None
        self.cache.move_to_end(plan.keys[unit])
        return hit

    def _store(self, key: str, result: UnitResult) -> None:
        self.cache[key] = result
        self.cache.move_to_end(key)
        while len(self.cache) > self.max_entries:
            self.cache.popitem(last=False)

    # -- running

    def _run_unit(self, plan: _Plan, settings: Settings, name: str,
                  overlays: Optional[dict[str, str]]) -> UnitResult:
        needed = plan.closure[name]
        is_entry = plan.entry_mode and name == settings.entry
        source = _reduced_source(plan, needed, synthetic_entry=not is_entry)
        entry = settings.entry if is_entry else SYNTHETIC_ENTRY
        lines = _lines_of(plan, needed)
        result = self._check(source, plan.file, settings, entry, overlays,
                             keep=lambda s: s.file != plan.file or s.line in lines)
        if not is_entry:
            result.entry = None
        result.uses_names = any(d.code == "E0201" for d in result.diagnostics)
        result.names = plan.names
        self._store(plan.keys[name], result)
        return result

    def _prelude_run(self, plan: _Plan, settings: Settings, overlays: Optional[dict[str, str]]) -> UnitResult:
        key = _hash(("prelude", plan.prelude_key))
        hit = self.cache.get(key)
        if hit is None:
            hit = self._check(_reduced_source(plan, frozenset(), True), plan.file, settings, SYNTHETIC_ENTRY,
                              overlays, keep=lambda s: s.file != plan.file)
            hit.entry = None
            self._store(key, hit)
        return hit

    def _full(self, plan: _Plan, settings: Settings, modules: list[A.Module], parse_diags: list[Diagnostic],
              texts: dict[str, str], overlays: Optional[dict[str, str]]) -> Analysis:
        source, entry = plan.text, settings.entry
        if not plan.entry_mode:
            source, entry = _with_synthetic_entry(plan.text), SYNTHETIC_ENTRY
        result = self._check(source, plan.file, settings, entry, overlays, keep=lambda s: True)
        if not plan.entry_mode:
            result.entry = None
        analysis = self._merge(plan, settings, modules, parse_diags, texts, [result], runs=1)
        analysis.full = True
        analysis.stale_units = 0 if plan.reason_full else sum(
            1 for u in plan.units if self._lookup(plan, u) is None)
        return analysis

    def _check(self, source: str, file: str, settings: Settings, entry: str,
               overlays: Optional[dict[str, str]], keep: Callable[[Span], bool]) -> UnitResult:
        _RECORDER.items = []
        try:
            report = check_source(source, file, settings.params, entry, overlays)
            bindings = [b for b in _RECORDER.items if keep(b.span)]
        finally:
            _RECORDER.items = None
        functions = [f for f in report.functions if f.name != SYNTHETIC_ENTRY and keep(f.span)]
        entry_part = CheckReport(file, {}, entry=report.entry, inputs=list(report.inputs),
                                 entry_type=report.entry_type)  # not the IR: cache entries stay small
        return UnitResult(list(report.diagnostics), functions, list(report.mechanisms), bindings,
                          dict(report.params), dict(report.schemas), entry_part)

    # -- merging

    def _merge(self, plan: _Plan, settings: Settings, modules: list[A.Module], parse_diags: list[Diagnostic],
               texts: dict[str, str], results: list[UnitResult], runs: int) -> Analysis:
        report = CheckReport(plan.file, dict(texts))
        report.diagnostics = _dedupe(list(parse_diags) + [d for r in results for d in r.diagnostics])
        report.functions = _unique_by(
            (f for r in results for f in r.functions), lambda f: (f.name, f.span))
        report.mechanisms = _unique_by(
            (m for r in results for m in r.mechanisms),
            lambda m: (m.span, m.name, m.sensitivity, m.epsilon, m.scale))
        for r in results:
            report.params.update(r.params)
            report.schemas.update(r.schemas)
        entry = next((r.entry for r in results if r.entry is not None), None)
        if entry is not None:
            report.entry, report.inputs, report.entry_type = entry.entry, list(entry.inputs), entry.entry_type
        report.pragma_budget = pragma_budget(plan.text)
        apply_budget(report, settings.budget)
        report.diagnostics.sort(key=_diag_order)
        bindings = [b for r in results for b in r.bindings]  # duplicates are merged by hover
        return Analysis(plan.file, plan.text, report, modules, bindings, runs)


def _chunks(text: str, file: str) -> list[_Chunk]:
    out = []
    for first_line, chunk_text in split_chunks(text):
        if not chunk_text.strip():
            out.append(_Chunk(first_line, chunk_text, (), ()))
            continue
        decls, errors = parse_chunk(file, first_line, chunk_text)
        out.append(_Chunk(first_line, chunk_text, decls, errors))
    return out


def _closures(mentions: dict[str, frozenset]) -> dict[str, frozenset]:
    """Each unit's dependency closure: itself and the unit functions it names, transitively."""
    direct = {name: names & mentions.keys() for name, names in mentions.items()}
    out: dict[str, frozenset] = {}
    for name in mentions:
        seen, todo = {name}, [name]
        while todo:
            for dep in direct[todo.pop()]:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        out[name] = frozenset(seen)
    return out


def _names_used(decl: A.FunDecl) -> set[str]:
    """Every variable name in a function body (shadowing ignored: over-approximating is safe)."""
    names, todo = set(), [decl.body]
    while todo:
        node = todo.pop()
        if isinstance(node, A.Var):
            names.add(node.name)
        todo.extend(A.children(node))
    return names


def _reduced_source(plan: _Plan, needed: frozenset, synthetic_entry: bool) -> str:
    """The file with functions outside `needed` stubbed and broken chunks blanked, same lines."""
    parts = []
    for c in plan.chunks:
        fn = c.function
        if c.broken:
            parts.append(_blank(c.text, None))
        elif fn is not None and fn.name not in needed:
            parts.append(_blank(c.text, f"function {fn.name} x {{ x }}"))
        else:
            parts.append(c.text)
    source = "".join(parts)
    return _with_synthetic_entry(source) if synthetic_entry else source


def _blank(text: str, first: Optional[str]) -> str:
    """Keep the line structure (and comment lines, e.g. the budget pragma); replace the rest."""
    lines = text.split("\n")
    kept = [ln if ln.lstrip().startswith("#") else "" for ln in lines]
    if first is not None:
        kept[0] = first
    return "\n".join(kept)


def _with_synthetic_entry(source: str) -> str:
    """An entry point that charges nothing, so `check_source` reports every mechanism it saw."""
    sep = "" if source.endswith("\n") or not source else "\n"
    return f"{source}{sep}function {SYNTHETIC_ENTRY} {{ return 0 }}\n"


def _unit_cost(plan: _Plan, missing: Optional[list[str]]) -> int:
    """Estimated cost, in function checks, of running these units (None: one full check); each
    run also pays a fixed set-up (re-reading the file, schemas, params) of a few functions."""
    if missing is None:
        return len(plan.units) + RUN_OVERHEAD
    return sum(len(plan.closure[u]) + RUN_OVERHEAD for u in missing)


def _lines_of(plan: _Plan, needed: frozenset) -> set[int]:
    return {line for n in needed for line in range(plan.units[n].first_line, plan.units[n].last_line + 1)}


def _hash(value: Any) -> str:
    return hashlib.blake2b(repr(value).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    return _unique_by(diags, lambda d: (d.code, d.message, d.span, tuple(d.notes), d.severity))


def _unique_by(items: Iterable[Any], key: Callable[[Any], Any]) -> list[Any]:
    seen, out = set(), []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def _diag_order(d: Diagnostic) -> tuple:
    s = d.span
    return (0, "", 0, 0) if s is None else (1, s.file, s.line, s.col)


def make_executor() -> ThreadPoolExecutor:
    """One worker with a large stack: checks are serialised (the binding recorder is global) and
    deeply nested programs cannot overflow the C stack."""
    old = threading.stack_size()
    threading.stack_size(STACK_BYTES)
    try:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fuzzpy-lsp")
        executor.submit(lambda: None).result()  # create the worker while the large size is set
    finally:
        threading.stack_size(old)
    return executor


# ---- positions ----------------------------------------------------------------------------------


def span_to_range(span: Optional[Span], lines: list[str], codec: Any = None) -> T.Range:
    """1-based, end-exclusive code-point spans -> 0-based LSP ranges in the client's units."""
    if span is None:
        return T.Range(T.Position(0, 0), T.Position(0, 0))
    start = T.Position(max(0, span.line - 1), max(0, span.col - 1))
    end = T.Position(max(0, span.end_line - 1), max(0, span.end_col - 1))
    if codec is not None:
        return codec.range_to_client_units(lines, T.Range(start, end))
    return T.Range(start, end)


def _contains(span: Span, line: int, col: int) -> bool:
    """Whether 1-based (line, col) lies in the span; the end column is inclusive so a cursor just
    after a name still finds it."""
    return (span.line, span.col) <= (line, col) <= (span.end_line, span.end_col)


def word_at(line_text: str, col0: int) -> Optional[tuple[str, int, int]]:
    """The identifier at 0-based column `col0` and its 0-based [start, end)."""
    for m in _WORD.finditer(line_text):
        if m.start() <= col0 <= m.end():
            return m.group(0), m.start(), m.end()
    return None


# ---- scopes, for hover / definition of local names ----------------------------------------------


@dataclass
class _Hit:
    name: str
    binder: Optional[Span]  # where the name is bound; None: not a local name
    at_binder: bool


def _pattern_vars(p: A.Pattern) -> list[A.PVar]:
    if isinstance(p, A.PVar):
        return [p]
    if isinstance(p, A.PProduct):
        return [v for item in p.items for v in _pattern_vars(item)]
    return []


def find_local(decl: A.FunDecl, line: int, col: int, name: str) -> Optional[_Hit]:
    """Resolve `name` at (line, col) inside `decl` to its binding site (iterative walk)."""
    env0 = {p.name: p.span for p in decl.params}
    for p in decl.params:
        if p.name == name and _contains(p.span, line, col):
            return _Hit(name, p.span, True)
    todo: list[tuple[A.Node, dict[str, Span]]] = [(decl.body, env0)]
    while todo:
        node, env = todo.pop()
        if node.span is None or not _contains(node.span, line, col):
            continue
        if isinstance(node, A.Var):
            if node.name == name:
                return _Hit(name, env.get(name), False)
            continue
        todo.extend(_scoped_children(node, env, line, col, name))
        for binder in _binders_here(node):
            if binder[0] == name and _contains(binder[1], line, col):
                return _Hit(name, binder[1], True)
    return None


def _binders_here(node: A.Node) -> list[tuple[str, Span]]:
    if isinstance(node, (A.Let, A.Sample)):
        return [(v.name, v.span) for v in _pattern_vars(node.pattern)]
    if isinstance(node, A.Lambda):
        return [(p.name, p.span) for p in node.params]
    if isinstance(node, A.Case):
        return [(v.name, v.span) for arm in node.arms for p in arm.patterns for v in _pattern_vars(p)]
    return []


def _scoped_children(node: A.Node, env: dict[str, Span], line: int, col: int, name: str):
    if isinstance(node, (A.Let, A.Sample)):
        inner = dict(env, **{v.name: v.span for v in _pattern_vars(node.pattern)})
        return [(node.bound, env), (node.body, inner)]
    if isinstance(node, A.Lambda):
        return [(node.body, dict(env, **{p.name: p.span for p in node.params}))]
    if isinstance(node, A.Case):
        out = [(node.scrutinee, env)]
        for arm in node.arms:
            inner = dict(env, **{v.name: v.span for p in arm.patterns for v in _pattern_vars(p)})
            out.append((arm.body, inner))
        return out
    return [(child, env) for child in A.children(node) if isinstance(child, A.Expr)]


def enclosing_function(decls: Iterable[A.Decl], line: int, col: int) -> Optional[A.FunDecl]:
    for d in decls:
        if isinstance(d, A.FunDecl) and _contains(d.span, line, col):
            return d
    return None


# ---- hover text ---------------------------------------------------------------------------------


def _fence(text: str) -> str:
    return f"```fuzzpy\n{text}\n```"


def epsilon_summary(report: CheckReport) -> Optional[str]:
    """`epsilon = 0.2 (db 0.2)`, the code lens text of the entry point."""
    if report.entry is None or not report.inputs:
        return None
    per_input = ", ".join(f"{i.name} {fmt_coef(i.epsilon)}" for i in report.inputs)
    text = f"epsilon = {fmt_coef(report.epsilon)} ({per_input})"
    if report.budget is not None:
        verdict = "within" if report.epsilon != INF and report.epsilon <= report.budget else "over"
        text += f", {verdict} budget {fmt_coef(report.budget)}"
    return text


def hover_function(report: CheckReport, name: str) -> Optional[str]:
    fn = next((f for f in report.functions if f.name == name), None)
    if fn is None:
        return None
    text = _fence(f"function {name} : {fn.type}")
    if name == report.entry:
        summary = epsilon_summary(report)
        if summary:
            text += f"\n\nEntry point: {summary}, delta = 0."
    return text


def hover_mechanisms(records: list[MechanismRecord]) -> str:
    lines = []
    for m in records:
        line = (f"**{m.name}** (in `{m.function}`): proven sensitivity {fmt_coef(m.sensitivity)}, "
                f"epsilon charged {fmt_coef(m.epsilon)}, noise scale {fmt_coef(m.scale)}")
        if m.name == "laplace" and m.scale:
            line += f"; |error| <= {float(m.scale) * math.log(20):.4g} with probability 0.95"
        lines.append(line)
    return "\n\n".join(lines)


def hover_primitive(name: str) -> Optional[str]:
    prim = all_primitives().get(name)
    if prim is None:
        return None
    head = f"{name} {' '.join(prim.params)} : {prim.signature}".replace("  ", " ")
    return f"{_fence(head)}\n\n{prim.doc}\n\n*Why it is sound:* {prim.justification}"


def hover_binding(name: str, found: list[Binding]) -> str:
    seen = _unique_by(((b.type, b.sensitivity) for b in found), lambda x: x)
    lines = [_fence(f"{name} : {t}") + f"\n\n{s}" for t, s in seen[:5]]
    if len(seen) > 1:
        lines.insert(0, f"`{name}` is checked at {len(seen)} instances:")
    return "\n\n".join(lines)


# ---- the server -----------------------------------------------------------------------------------


@dataclass
class _DocState:
    generation: int = 0
    task: Optional[asyncio.Task] = None
    analysis: Optional[Analysis] = None
    published: Optional[int] = None


class FuzzpyServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fuzzpy", _version(), text_document_sync_kind=T.TextDocumentSyncKind.Full)
        self.settings = Settings()
        self.engine = IncrementalChecker()
        self.executor = make_executor()
        self.docs: dict[str, _DocState] = {}

    # -- documents and files

    def file_of(self, uri: str) -> str:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        return str(Path(path).resolve()) if path else uri

    def overlays(self, exclude: str) -> dict[str, str]:
        """Unsaved text of the other open documents, for imports."""
        out = {}
        for uri, doc in list(self.workspace.text_documents.items()):
            if uri != exclude and uri.startswith("file:"):
                out[self.file_of(uri)] = doc.source
        return out

    def state(self, uri: str) -> _DocState:
        return self.docs.setdefault(uri, _DocState())

    # -- scheduling

    def schedule(self, uri: str, delay: float) -> None:
        """Debounce: each change restarts the timer; only the newest version is published."""
        st = self.state(uri)
        st.generation += 1
        if st.task is not None and not st.task.done():
            st.task.cancel()
        st.task = asyncio.get_running_loop().create_task(self._check_later(uri, st.generation, delay))

    def schedule_dependents(self, uri: str) -> None:
        file = self.file_of(uri)
        for other, st in list(self.docs.items()):
            if other != uri and st.analysis is not None and file in st.analysis.report.sources:
                self.schedule(other, self.settings.debounce)

    async def _check_later(self, uri: str, generation: int, delay: float) -> None:
        st, version = self.state(uri), None
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            doc = self.workspace.get_text_document(uri)
            text, version, file = doc.source, doc.version, self.file_of(uri)
            loop = asyncio.get_running_loop()
            started = loop.time()
            analysis = await loop.run_in_executor(self.executor, self.engine.analyse, text, file,
                                                  self.settings, self.overlays(uri))
            log.info("checked %s v%s in %.1f ms (%d check runs%s)", uri, version, 1000 * (loop.time() - started),
                     analysis.runs, ", full" if analysis.full else "")
            if st.generation != generation:
                return
            st.analysis = analysis
            self.publish(uri, version, analysis)
            if analysis.stale_units:
                await self._warm(uri, generation, text, file)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing check must never take the server down
            self.internal_error(uri, version, exc)

    async def _warm(self, uri: str, generation: int, text: str, file: str) -> None:
        """Refill the unit cache after a full check, one unit at a time, while nothing is edited."""
        loop = asyncio.get_running_loop()
        remaining = 1
        while remaining and self.state(uri).generation == generation:
            remaining = await loop.run_in_executor(self.executor, self.engine.warm, text, file, self.settings,
                                                   self.overlays(uri))
        if self.state(uri).generation == generation:
            self.log_message(T.MessageType.Log, f"fuzzpy: analysis cache ready for {uri}")

    # -- output

    def publish(self, uri: str, version: Optional[int], analysis: Analysis) -> None:
        lines = analysis.text.splitlines(True) or [""]
        diags = [self.to_lsp(d, analysis, lines) for d in analysis.report.diagnostics]
        self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, version=version,
                                                                          diagnostics=diags))
        self.state(uri).published = version
        self.refresh_lenses()

    def to_lsp(self, d: Diagnostic, analysis: Analysis, lines: list[str]) -> T.Diagnostic:
        message = "\n".join([d.message] + [f"note: {n}" for n in d.notes])
        severity = {"error": T.DiagnosticSeverity.Error, "warning": T.DiagnosticSeverity.Warning}.get(
            d.severity, T.DiagnosticSeverity.Information)
        related = None
        span = d.span
        if span is not None and span.file != analysis.file:
            # An error inside an imported file: shown on the import, with a link to the place.
            related = [T.DiagnosticRelatedInformation(
                T.Location(from_fs_path(span.file) or span.file, span_to_range(span, [], None)), d.message)]
            span = _import_span_for(analysis, span.file)
        return T.Diagnostic(range=span_to_range(span, lines, self.codec()), message=message, severity=severity,
                            code=d.code, source=SOURCE, related_information=related)

    def internal_error(self, uri: str, version: Optional[int], exc: BaseException) -> None:
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        log.error("analysis of %s failed:\n%s", uri, detail)
        self.log_message(T.MessageType.Error, f"fuzzpy: analysis of {uri} failed:\n{detail}")
        diag = T.Diagnostic(range=T.Range(T.Position(0, 0), T.Position(0, 0)),
                            message=f"internal error in fuzzpy while checking this file: "
                                    f"{type(exc).__name__}: {exc} (please report it; details in the server log)",
                            severity=T.DiagnosticSeverity.Error, code=INTERNAL_CODE, source=SOURCE)
        try:
            self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, version=version,
                                                                              diagnostics=[diag]))
        except Exception:  # noqa: BLE001 - the connection itself may be gone
            log.exception("could not publish the internal error")

    def log_message(self, kind: T.MessageType, message: str) -> None:
        try:
            self.window_log_message(T.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001
            log.exception("could not send a log message")

    def refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace if self.client_capabilities else None
        lens = caps.code_lens if caps else None
        if lens is not None and lens.refresh_support:
            try:
                self.workspace_code_lens_refresh(None).add_done_callback(lambda f: f.exception())
            except Exception:  # noqa: BLE001
                log.exception("code lens refresh failed")

    def markup(self, value: str, formats: Optional[list]) -> T.MarkupContent:
        """Markdown when the client accepts it, else the same text without the fences."""
        if formats and T.MarkupKind.Markdown in formats:
            return T.MarkupContent(kind=T.MarkupKind.Markdown, value=value)
        plain = re.sub(r"```\w*\n?", "", value).replace("**", "").replace("`", "")
        return T.MarkupContent(kind=T.MarkupKind.PlainText, value=plain.strip())

    def text_caps(self) -> Any:
        caps = self.client_capabilities
        return caps.text_document if caps is not None else None

    def hover_formats(self) -> Optional[list]:
        hover = getattr(self.text_caps(), "hover", None)
        return hover.content_format if hover is not None else None

    def completion_formats(self) -> Optional[list]:
        completion = getattr(self.text_caps(), "completion", None)
        item = completion.completion_item if completion is not None else None
        return item.documentation_format if item is not None else None

    def codec(self) -> Any:
        try:
            return self.workspace.position_codec
        except Exception:  # noqa: BLE001 - before initialize
            return None

    # -- queries

    def analysis(self, uri: str) -> Optional[Analysis]:
        st = self.docs.get(uri)
        return st.analysis if st else None

    def cursor(self, uri: str, pos: T.Position) -> tuple[int, int, str]:
        """The 1-based (line, column) in code points and the text of that line."""
        doc = self.workspace.get_text_document(uri)
        server_pos = doc.position_from_client_units(pos)
        lines = doc.lines
        text = lines[server_pos.line] if server_pos.line < len(lines) else ""
        return server_pos.line + 1, server_pos.character + 1, text.rstrip("\r\n")


def _import_span_for(analysis: Analysis, file: str) -> Optional[Span]:
    imports = [d for d in analysis.own_decls if isinstance(d, A.Import)]
    for d in imports:
        target = resolve_import(d.path, analysis.file)
        if target is not None and str(target) == file:
            return d.span
    return imports[0].span if imports else None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("fuzzpy")
    except Exception:  # noqa: BLE001
        return "0.0.0"


# ---- feature handlers ---------------------------------------------------------------------------


def _safe(default: Any) -> Callable:
    """Handlers answer `default` (and log) instead of raising."""

    def wrap(fn: Callable) -> Callable:
        def handler(ls: FuzzpyServer, params: Any) -> Any:
            try:
                return fn(ls, params)
            except Exception:  # noqa: BLE001 - a request must never crash the server
                log.exception("%s failed", fn.__name__)
                ls.log_message(T.MessageType.Error, f"fuzzpy: {fn.__name__} failed:\n{traceback.format_exc()}")
                return default
        handler.__name__ = fn.__name__
        return handler

    return wrap


def hover(ls: FuzzpyServer, params: T.HoverParams) -> Optional[T.Hover]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is None:
        return None
    line, col, text = ls.cursor(uri, params.position)
    word = word_at(text, col - 1)
    value = _hover_text(analysis, line, col, word, text)
    if value is None:
        return None
    rng = None
    if word is not None:
        rng = span_to_range(Span("", line, word[1] + 1, line, word[2] + 1), [""] * (line - 1) + [text], ls.codec())
    return T.Hover(contents=ls.markup(value, ls.hover_formats()), range=rng)


def _hover_text(analysis: Analysis, line: int, col: int, word: Optional[tuple[str, int, int]],
                text: str) -> Optional[str]:
    report = analysis.report
    mechs = [m for m in report.mechanisms if m.span.file == analysis.file and _contains(m.span, line, col)]
    if word is None:
        return hover_mechanisms(mechs[:1]) if mechs else None
    name, start, _ = word
    if start > 0 and text[start - 1] == ".":
        return None  # a field name
    on_head = [m for m in mechs if m.span.line == line and m.span.col == start + 1 and m.name == name]
    if on_head:
        return hover_mechanisms(on_head) + "\n\n---\n\n" + (hover_primitive(name) or "")
    local = _local_at(analysis, line, col, name)
    if local is not None and local.binder is not None:
        found = [b for b in analysis.bindings if b.span == local.binder]
        if found:
            return hover_binding(name, found)
        return _fence(f"{name}") + "\n\n(not checked yet: the function has errors)"
    fn_text = hover_function(report, name)
    if fn_text is not None:
        return fn_text
    prim = hover_primitive(name)
    if prim is not None:
        return prim
    return _hover_declaration(analysis, name)


def _hover_declaration(analysis: Analysis, name: str) -> Optional[str]:
    for d in analysis.decls:
        if isinstance(d, A.ParamDecl) and d.name == name:
            value = analysis.report.params.get(name)
            shown = f" = {fmt_coef(value)}" if isinstance(value, Fraction) else ""
            return _fence(f"param {name}{shown}") + "\n\nA public parameter: set it with `--param`."
        if isinstance(d, A.SchemaDecl) and d.name == name:
            schema = analysis.report.schemas.get(name)
            cols = ", ".join(f"{c.name} : {c.type}" for c in schema.columns) if schema else ""
            return _fence(f"schema {name} {{ {cols} }}")
    return None


def _local_at(analysis: Analysis, line: int, col: int, name: str) -> Optional[_Hit]:
    decl = enclosing_function(analysis.own_decls, line, col)
    return find_local(decl, line, col, name) if decl is not None else None


def definition(ls: FuzzpyServer, params: T.DefinitionParams) -> Optional[list[T.Location]]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is None:
        return None
    line, col, text = ls.cursor(uri, params.position)
    word = word_at(text, col - 1)
    if word is None or (word[1] > 0 and text[word[1] - 1] == "."):
        return None
    name = word[0]
    local = _local_at(analysis, line, col, name)
    if local is not None and local.binder is not None:
        return [_location(ls, analysis, local.binder)]
    for d in analysis.decls:
        if isinstance(d, (A.FunDecl, A.ParamDecl, A.SchemaDecl)) and d.name == name:
            return [_location(ls, analysis, d.name_span or d.span)]
    return None


def _location(ls: FuzzpyServer, analysis: Analysis, span: Span) -> T.Location:
    text = analysis.report.sources.get(span.file, "")
    uri = from_fs_path(span.file) if not span.file.startswith("<") and "://" not in span.file else span.file
    return T.Location(uri=uri or span.file, range=span_to_range(span, text.splitlines(True), ls.codec()))


def completion(ls: FuzzpyServer, params: T.CompletionParams) -> T.CompletionList:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    items: dict[str, T.CompletionItem] = {}
    for kw in KEYWORDS:
        items[kw] = T.CompletionItem(label=kw, kind=T.CompletionItemKind.Keyword)
    formats = ls.completion_formats()
    for name, prim in all_primitives().items():
        items[name] = T.CompletionItem(label=name, kind=T.CompletionItemKind.Function, detail=prim.signature,
                                       documentation=ls.markup(prim.doc, formats))
    if analysis is not None:
        _complete_declarations(analysis, items)
    doc = ls.workspace.get_text_document(uri)
    for name in _locals_before(doc.source, params.position.line):
        items.setdefault(name, T.CompletionItem(label=name, kind=T.CompletionItemKind.Variable))
    return T.CompletionList(is_incomplete=False, items=list(items.values()))


def _complete_declarations(analysis: Analysis, items: dict[str, T.CompletionItem]) -> None:
    types = {f.name: f.type for f in analysis.report.functions}
    for d in analysis.decls:
        if isinstance(d, A.FunDecl):
            items[d.name] = T.CompletionItem(label=d.name, kind=T.CompletionItemKind.Function,
                                             detail=types.get(d.name, "function"))
        elif isinstance(d, A.ParamDecl):
            items[d.name] = T.CompletionItem(label=d.name, kind=T.CompletionItemKind.Constant,
                                             detail="param (public)")
        elif isinstance(d, A.SchemaDecl):
            items[d.name] = T.CompletionItem(label=d.name, kind=T.CompletionItemKind.Struct, detail="schema")


def _locals_before(source: str, line0: int) -> list[str]:
    """Names bound earlier in the declaration around the cursor (textual, so it works while the
    declaration does not parse yet)."""
    lines = source.split("\n")[: line0 + 1]
    start = 0
    for i in range(len(lines) - 1, -1, -1):
        if _DECL_NAME.match(lines[i]):
            start = i
            break
    names = []
    for m in _LOCAL_BINDERS.finditer("\n".join(lines[start:])):
        for group in m.groups():
            if group:
                names.extend(group.split())
    return [n for n in dict.fromkeys(names) if n not in KEYWORDS and n != "_"]


def code_lens(ls: FuzzpyServer, params: T.CodeLensParams) -> list[T.CodeLens]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is None:
        return []
    report = analysis.report
    decl = next((d for d in analysis.own_decls if isinstance(d, A.FunDecl) and d.name == ls.settings.entry), None)
    if decl is None:
        return []
    title = epsilon_summary(report)
    if title is None:
        errors = sum(d.severity == "error" for d in report.diagnostics)
        title = f"epsilon: not proven ({errors} error{'s' if errors != 1 else ''})"
    lines = analysis.text.splitlines(True)
    return [T.CodeLens(range=span_to_range(decl.name_span, lines, ls.codec()),
                       command=T.Command(title=title, command="fuzzpy.privacyReport", arguments=[uri]))]


def privacy_report(ls: FuzzpyServer, *args: Any) -> Optional[dict]:
    """`fuzzpy.privacyReport uri`: the document's report as `fuzzpy check --format json` gives it."""
    from .report import report_json

    try:
        analysis = ls.analysis(args[0]) if args and isinstance(args[0], str) else None
        return report_json(analysis.report) if analysis is not None else None
    except Exception:  # noqa: BLE001
        log.exception("privacyReport failed")
        return None


def create_server() -> FuzzpyServer:
    ls = FuzzpyServer()

    @ls.feature(T.INITIALIZE)
    def on_initialize(ls: FuzzpyServer, params: T.InitializeParams) -> None:
        try:
            ls.settings = Settings.from_options(params.initialization_options)
        except Exception:  # noqa: BLE001 - bad options fall back to the defaults
            log.exception("invalid initializationOptions %r", params.initialization_options)

    @ls.feature(T.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: FuzzpyServer, params: T.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @ls.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: FuzzpyServer, params: T.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.settings.debounce)
        ls.schedule_dependents(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: FuzzpyServer, params: T.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @ls.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: FuzzpyServer, params: T.DidCloseTextDocumentParams) -> None:
        st = ls.docs.pop(params.text_document.uri, None)
        if st is not None and st.task is not None:
            st.task.cancel()
        ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri,
                                                                        diagnostics=[]))

    ls.feature(T.TEXT_DOCUMENT_HOVER)(_safe(None)(hover))
    ls.feature(T.TEXT_DOCUMENT_DEFINITION)(_safe(None)(definition))
    ls.feature(T.TEXT_DOCUMENT_COMPLETION)(_safe(T.CompletionList(is_incomplete=False, items=[]))(completion))
    ls.feature(T.TEXT_DOCUMENT_CODE_LENS)(_safe([])(code_lens))
    ls.command("fuzzpy.privacyReport")(privacy_report)
    return ls


def main() -> None:
    """Serve on stdin/stdout (the editor starts this process)."""
    logging.basicConfig(level=logging.WARNING, format="fuzzpy-lsp %(levelname)s %(message)s")
    all_primitives()  # load the registry before the first request
    create_server().start_io()


if __name__ == "__main__":  # pragma: no cover
    main()
