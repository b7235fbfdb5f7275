"""The incremental checker: checks a document, re-using the results of the functions an edit
did not affect.

Speed: the checker costs 0.5-1 ms per function, so re-checking a 1,000-line file on every key
press takes 40-100 ms.  `IncrementalChecker` re-checks only the top-level functions whose
text, or the text of a function they call (transitively), changed:

* A *unit* is a declaration chunk of the open file (see `syntax.parser.split_chunks`) holding
  exactly one function.  Its key is a hash of the *prelude* (every other chunk with its line:
  schemas, params, imports, plus the text of imported files and the server settings) and of the
  code of each function in its dependency closure (functions it names, transitively), in file
  order, without their lines: a result found at other lines is reused with its spans moved
  (`moved`), unless it shows a line in a text.
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
* With a peer process (peer.py) and a core to spare, that full check runs in two halves at
  once: the units split into two groups of about equal cost (`two_groups`), each group checked
  as a unit is, on a reduced source whose needed functions are its units' closures, one group
  here and one in the peer; the two results are merged as units' results are.

Chunks that fail to parse are left out (blank lines) of every run, so typing inside a broken
function does not invalidate the others; their syntax errors come from the parser directly.
Files without the entry function are treated as libraries: no "missing entry point" error.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from ...checking.program import CheckReport, check_source, pragma_budget, pragma_delta  # the one reading of the pragmas
from ...diagnostics import Diagnostic, Span
from ...hints import drop_cascades
from ...limits import STACK_BYTES
from ...pipeline.budget import apply_budget
from ...syntax import ast as A
from ...syntax.loader import load_program
from ...syntax.parser import MAX_SOURCE_BYTES, parse_chunk, split_chunks
from .analysis import _RECORDER, Analysis, Settings, UnitResult

SYNTHETIC_ENTRY = "__fuzzpy_lsp_entry__"
FULL_FACTOR = 1.5   # re-run changed units unless that costs more than 1.5 full checks
RUN_OVERHEAD = 3    # fixed cost of one check run, in "functions"
CACHE_ENTRIES = 5_000
SUPERSEDED = "superseded"  # what a check in two halves gives when a newer version came meanwhile
SPLIT_WORTH = 0.8  # a full check is split in two (peer.py) only when its larger half costs at most 0.8 of it
PREPARE_PER_UNIT = 5  # results whose movability one background step finds out (a few ms), per unit it may check


# A small program using the common constructs, checked once when the server starts.
WARM_UP_PROGRAM = """\
schema Rows { a : num[0, 10] }
param eps : num = 0.1;
function part (db : bag Rows) : fuzzy num {
  let xs = map (fun r -> clip 0 5 r.a) (filter (fun r -> r.a >= 1) db);
  sample x = laplace eps (sum xs);
  return x
}
function main (db : bag Rows) : fuzzy num {
  sample y = part db;
  return y
}
"""


@dataclass
class _Chunk:
    first_line: int
    text: str
    decls: tuple
    errors: tuple

    @property
    def last_line(self) -> int:  # a final newline ends this chunk's last line; the next chunk starts after it
        return self.first_line + self.text.count("\n") - self.text.endswith("\n")

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
    virtual: Optional[dict[str, str]] = None  # published schemas checked with it (remote.py)
    layouts: dict[str, tuple] = dataclasses.field(default_factory=dict)  # per unit: UnitResult.layout
    extents: dict[str, tuple] = dataclasses.field(default_factory=dict)  # per unit: UnitResult.extents


class IncrementalChecker:
    """Checks documents, re-using the results of functions an edit did not affect."""

    def __init__(self, max_entries: int = CACHE_ENTRIES, full_factor: float = FULL_FACTOR) -> None:
        self.cache: OrderedDict[str, UnitResult] = OrderedDict()
        self.max_entries = max_entries
        self.full_factor = full_factor
        self.lock = threading.Lock()
        self.names_used: dict[str, frozenset] = {}  # per chunk text: names it mentions
        self.peer: Optional[Any] = None  # peer.Peer: checks half of a full check in another process
        self.shown_to_peer: set[str] = set()  # files the peer was sent to parse ahead (`analyse`)

    # -- public

    def analyse(self, text: str, file: str, settings: Settings,
                overlays: Optional[dict[str, str]] = None,
                superseded: Optional[Callable[[], bool]] = None) -> Optional[Analysis]:
        """Check `text`; must run in a thread with a large stack (see `make_executor`).  When
        `superseded()` turns true between two unit runs (a newer version of the document came),
        stop there and return None: the runs done are cached, the rest is left for the newer one."""
        with self.lock:
            watch = Stopwatch()
            self._show_to_peer(text, file, overlays)
            modules, parse_diags, texts, virtual = _load(text, file, settings, overlays)
            watch.lap("load")
            plan = self._plan(text, file, settings, modules, texts)
            plan.virtual = virtual
            watch.lap("plan")
            if not settings.incremental or plan.reason_full:
                return self._full(plan, settings, modules, parse_diags, texts, overlays, watch)
            missing = [u for u in plan.units if self._lookup(plan, u) is None]
            watch.lap("lookup")
            if _unit_cost(plan, missing) > self.full_factor * _unit_cost(plan, None) and len(missing) > 1:
                return self._full(plan, settings, modules, parse_diags, texts, overlays, watch, superseded)
            results = []
            for name in sorted(missing, key=lambda u: len(plan.closure[u])):
                if results and superseded is not None and superseded():
                    return None
                results.append(self._run_unit(plan, settings, name, overlays))
            results += [self._lookup(plan, u) for u in plan.units if u not in missing]  # type: ignore[misc]
            if not plan.units:
                results.append(self._prelude_run(plan, settings, overlays))
            watch.lap("check")
            analysis = self._merge(plan, settings, modules, parse_diags, texts, results, runs=len(missing))
            analysis.stale_units = len(self._unprepared(plan))
            watch.lap("merge")
            analysis.stages = watch.stages
            return analysis

    def _show_to_peer(self, text: str, file: str, overlays: Optional[dict[str, str]]) -> None:
        """A file's first check is a full check: have the peer parse it meanwhile (parsing is
        most of that check), so that its half finds the chunks parsed."""
        peer = self.peer
        if peer is None or file in self.shown_to_peer or not peer.core_to_spare():
            return
        if len(self.shown_to_peer) > self.max_entries:
            self.shown_to_peer.clear()
        if peer.prepare(text, file, overlays):
            self.shown_to_peer.add(file)

    def warm(self, text: str, file: str, settings: Settings, overlays: Optional[dict[str, str]] = None,
             limit: Optional[int] = 1, stop: Optional[Callable[[], bool]] = None) -> int:
        """Fill the cache for up to `limit` units of this text (None: all), then find out whether
        up to `PREPARE_PER_UNIT * limit` cached results can move; returns how many are left.
        When `stop()` turns true between two of these steps (an edit came, or the caller's time
        slice is over), return there: the file is loaded and planned once for all the steps."""
        with self.lock:
            modules, _, texts, virtual = _load(text, file, settings, overlays)
            plan = self._plan(text, file, settings, modules, texts)
            plan.virtual = virtual
            if plan.reason_full or not settings.incremental:
                return 0
            missing = sorted((u for u in plan.units if self._lookup(plan, u) is None),
                             key=lambda u: len(plan.closure[u]))
            for done, name in enumerate(missing[:limit]):
                if done and stop is not None and stop():
                    return len(missing) - done
                self._run_unit(plan, settings, name, overlays)
            if limit is not None and len(missing) > limit:
                return len(missing) - limit
            unprepared = self._unprepared(plan)
            prepare = len(unprepared) if limit is None else PREPARE_PER_UNIT * limit
            for done, result in enumerate(unprepared[:prepare]):
                if (done or missing) and stop is not None and stop():
                    return len(unprepared) - done
                result.movable = _movable(result, plan.file)
            return max(0, len(unprepared) - prepare)

    def _unprepared(self, plan: _Plan) -> list[UnitResult]:
        """This plan's cached results not yet known to be movable or not (found out while the
        editor idles, so that the next inserted line does not pay for it)."""
        hits = (self.cache.get(plan.keys[u]) for u in plan.units)
        return [hit for hit in hits if hit is not None and hit.movable is None]

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
        # Trailing blank lines are left out of the keys: a line inserted above a declaration
        # lengthens the chunk before it, and blank lines change nothing but later positions.
        prelude = [(c.first_line, c.text.rstrip()) for c in chunks if c.function is None and not c.broken]
        # The entry point is whatever the parser found, wherever it sits (indented, sharing a
        # line, or in an imported file): the editor must check what `fuzzpy check` checks.
        entry_mode = settings.entry in units or any(
            isinstance(d, A.FunDecl) and d.name == settings.entry for m in modules for d in m.decls)
        if entry_mode and settings.entry not in units and reason is None:
            reason = "the entry point is not a declaration of its own in this file"  # check it all
        prelude_key = _hash((file, settings.key(), entry_mode, tuple(prelude), library))
        plan = _Plan(file, text, chunks, units, closure, {}, prelude_key, tuple(sorted(units)), entry_mode, reason)
        _key_units(plan, prelude)
        return plan

    def _names_of(self, chunk: _Chunk) -> frozenset:
        key = chunk.text  # the names a function mentions do not depend on where it sits
        names = self.names_used.get(key)
        if names is None:
            if len(self.names_used) > self.max_entries:
                self.names_used.clear()
            names = self.names_used[key] = frozenset(_NAME.findall(key))
        return names

    def _lookup(self, plan: _Plan, unit: str) -> Optional[UnitResult]:
        key = plan.keys[unit]
        hit = self.cache.get(key)
        if hit is None or (hit.uses_names and hit.names != plan.names):
            return None
        if hit.layout != plan.layouts[unit]:  # the same functions, at other lines
            hit = moved(hit, plan.file, plan.layouts[unit], plan.extents[unit])
            if hit is None:
                return None
            self.cache[key] = hit
        self.cache.move_to_end(key)
        return hit

    def _store(self, key: str, result: UnitResult) -> None:
        self.cache[key] = result
        self.cache.move_to_end(key)
        while len(self.cache) > self.max_entries:
            self.cache.popitem(last=False)

    # -- running

    def _run_unit(self, plan: _Plan, settings: Settings, name: str,
                  overlays: Optional[dict[str, str]]) -> UnitResult:
        unit = frozenset((name,))
        result = self._group_result(plan, settings, unit, run_check(self._group_job(plan, settings, unit, overlays)))
        result.uses_names = any(d.code == "E0201" for d in result.diagnostics)
        result.names = plan.names
        result.layout, result.extents = plan.layouts[name], plan.extents[name]
        self._store(plan.keys[name], result)
        return result

    def _prelude_run(self, plan: _Plan, settings: Settings, overlays: Optional[dict[str, str]]) -> UnitResult:
        key = _hash(("prelude", plan.prelude_key))
        hit = self.cache.get(key)
        if hit is None:
            hit = self._check(_reduced_source(plan, frozenset(), True), plan, settings, SYNTHETIC_ENTRY,
                              overlays, frozenset())
            hit.entry = None
            self._store(key, hit)
        return hit

    def _full(self, plan: _Plan, settings: Settings, modules: list[A.Module], parse_diags: list[Diagnostic],
              texts: dict[str, str], overlays: Optional[dict[str, str]], watch: Optional[Stopwatch] = None,
              superseded: Optional[Callable[[], bool]] = None) -> Optional[Analysis]:
        """A check of every function: in two halves at once (one in the peer process) when the
        file splits well and the peer can take its half now, else in one run here."""
        watch = watch or Stopwatch()
        peer = self.peer  # read once: the server may drop it meanwhile
        worth_it = peer is not None and not plan.reason_full and peer.core_to_spare()
        groups = two_groups(plan, settings.entry) if worth_it else None
        if groups is not None:
            results = self._check_halves(peer, plan, settings, overlays, groups, watch, superseded)
            if results == SUPERSEDED:
                return None
            if results is not None:
                analysis = self._merge(plan, settings, modules, parse_diags, texts, results[0], runs=2)
                return self._finish_full(plan, analysis, watch, peer=results[1])
        source, entry = plan.text, settings.entry
        if not plan.entry_mode:
            source, entry = _with_synthetic_entry(plan.text), SYNTHETIC_ENTRY
        result = self._check(source, plan, settings, entry, overlays, None)
        if not plan.entry_mode:
            result.entry = None
        watch.lap("check")
        analysis = self._merge(plan, settings, modules, parse_diags, texts, [result], runs=1)
        return self._finish_full(plan, analysis, watch, peer=False)

    def _finish_full(self, plan: _Plan, analysis: Analysis, watch: Stopwatch, peer: bool) -> Analysis:
        analysis.full, analysis.peer = True, peer
        analysis.stale_units = 0 if plan.reason_full else sum(1 for u in plan.units if self._stale(plan, u))
        watch.lap("merge")
        analysis.stages = watch.stages
        return analysis

    def _check_halves(self, peer: Any, plan: _Plan, settings: Settings, overlays: Optional[dict[str, str]],
                      groups: tuple[frozenset, frozenset], watch: Stopwatch,
                      superseded: Optional[Callable[[], bool]]) -> Any:
        """Check the units of `groups[1]` in the peer while this thread checks `groups[0]`:
        ([ours, theirs], whether the peer's result came), SUPERSEDED when a newer version
        came while waiting for the peer, or None when the peer cannot take its half now."""
        theirs_job = self._group_job(plan, settings, groups[1], overlays)
        ticket = peer.submit(theirs_job)
        if ticket is None:
            return None
        started = time.perf_counter()
        ours = self._group_result(plan, settings, groups[0], run_check(self._group_job(plan, settings, groups[0],
                                                                                         overlays)))
        watch.lap("check")
        theirs = peer.result(ticket, time.perf_counter() - started, superseded)
        watch.lap("wait for the peer")
        came = theirs is not None
        if not came:
            if superseded is not None and superseded():
                return SUPERSEDED
            theirs = run_check(theirs_job)  # the peer failed: its half is checked here
            watch.lap("check")
        return [ours, self._group_result(plan, settings, groups[1], theirs)], came

    def _group_job(self, plan: _Plan, settings: Settings, units: frozenset,
                   overlays: Optional[dict[str, str]]) -> RunJob:
        """One run for a group of units (one unit's, `_run_unit`, or half a full check's): a
        reduced source holding their closures, with the real entry point if it is one of them."""
        needed = frozenset().union(*(plan.closure[u] for u in units))
        is_entry = plan.entry_mode and settings.entry in units
        source = _reduced_source(plan, needed, synthetic_entry=not is_entry)
        entry = settings.entry if is_entry else SYNTHETIC_ENTRY
        return RunJob(source, plan.file, dict(settings.params), entry, overlays, plan.virtual,
                      _lines_of(plan, needed))

    def _group_result(self, plan: _Plan, settings: Settings, units: frozenset, result: UnitResult) -> UnitResult:
        if not (plan.entry_mode and settings.entry in units):
            result.entry = None
        return result

    def _stale(self, plan: _Plan, unit: str) -> bool:
        """Whether the background should check this unit or find out if its result moves (not
        `_lookup`, which would move results before the full check's diagnostics are published)."""
        hit = self.cache.get(plan.keys[unit])
        return hit is None or (hit.uses_names and hit.names != plan.names) or (
            hit.layout != plan.layouts[unit] and hit.movable is not True)

    def _check(self, source: str, plan: _Plan, settings: Settings, entry: str,
               overlays: Optional[dict[str, str]], lines: Optional[frozenset]) -> UnitResult:
        return run_check(RunJob(source, plan.file, dict(settings.params), entry, overlays, plan.virtual, lines))

    # -- merging

    def _merge(self, plan: _Plan, settings: Settings, modules: list[A.Module], parse_diags: list[Diagnostic],
               texts: dict[str, str], results: list[UnitResult], runs: int) -> Analysis:
        report = CheckReport(plan.file, dict(texts))
        report.diagnostics = drop_cascades(_dedupe(list(parse_diags) + [d for r in results for d in r.diagnostics]),
                                           texts)
        keys = [merge_keys(r) for r in results]
        report.functions = _unique_keyed(zip(r.functions, k[0]) for r, k in zip(results, keys))
        report.mechanisms = _unique_keyed(zip(r.mechanisms, k[1]) for r, k in zip(results, keys))
        for r in results:
            report.params.update(r.params)
            report.schemas.update(r.schemas)
        entry = next((r.entry for r in results if r.entry is not None), None)
        if entry is not None:
            report.entry, report.inputs, report.entry_type = entry.entry, list(entry.inputs), entry.entry_type
        report.pragma_budget = pragma_budget(plan.text)
        report.pragma_delta = pragma_delta(plan.text)
        apply_budget(report, settings.budget, settings.delta)
        report.diagnostics.sort(key=_diag_order)
        bindings = [b for r in results for b in r.bindings]  # duplicates are merged by hover
        calls = _unique_keyed(zip(r.calls, k[2]) for r, k in zip(results, keys))
        return Analysis(plan.file, plan.text, report, modules, bindings, runs, calls=calls)


class Stopwatch:
    """Seconds spent in each named stage of a piece of work, for the server's log."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        """Charge the time since the previous lap (or the start) to `stage`."""
        now = time.perf_counter()
        self.stages[stage] = self.stages.get(stage, 0.0) + now - self.last
        self.last = now


@dataclass(frozen=True)
class RunJob:
    """One check run as plain data (it crosses to the peer process, peer.py): the source, the
    entry point, and the lines of `file` whose records are kept (None: all; the others belong
    to stubbed functions or to other units)."""

    source: str
    file: str
    params: dict[str, str]
    entry: str
    overlays: Optional[dict[str, str]]
    virtual: Optional[dict[str, str]]
    lines: Optional[frozenset]

    def keeps(self, span: Span) -> bool:
        return self.lines is None or span.file != self.file or span.line in self.lines


def run_check(job: RunJob) -> UnitResult:
    """One check run, with the bindings and calls the checker reports: what the worker thread
    and the peer process both run.  Must run in a thread with a large stack (`make_executor`)."""
    file = job.file
    _RECORDER.items, _RECORDER.calls = [], []
    try:
        report = check_source(job.source, file, job.params, job.entry, job.overlays, job.virtual)
        bindings = [b for b in _RECORDER.items if job.keeps(b.span)]
        calls = _unique_by((c for c in _RECORDER.calls if c.span.file == file and job.keeps(c.span)), lambda c: c)
    finally:
        _RECORDER.items, _RECORDER.calls = None, []
    functions = [f for f in report.functions if f.name != SYNTHETIC_ENTRY and job.keeps(f.span)]
    entry_part = CheckReport(file, {}, entry=report.entry, inputs=list(report.inputs),
                             entry_type=report.entry_type)  # not the IR: cache entries stay small
    return UnitResult(list(report.diagnostics), functions, list(report.mechanisms), bindings,
                      dict(report.params), dict(report.schemas), entry_part, calls=calls)


def _load(text: str, file: str, settings: Settings, overlays: Optional[dict[str, str]]
          ) -> tuple[list[A.Module], list[Diagnostic], dict[str, str], Optional[dict[str, str]]]:
    """`load_program`, with the published schemas the program does not declare itself (its
    own or its imports' declarations win: the file is read again only when some are added)."""
    loaded = load_program(text, file, overlays)
    if not settings.published:
        return (*loaded, None)
    declared = {d.name for m in loaded[0] for d in m.decls if isinstance(d, A.SchemaDecl)}
    virtual = settings.virtual(declared)
    if not virtual:
        return (*loaded, None)
    return (*load_program(text, file, overlays, virtual), virtual)


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


# rule Reused reports
def _key_units(plan: _Plan, prelude: list[tuple[int, str]]) -> None:
    """Each unit's key, layout and extents.  The key holds the code of the functions of its
    closure in file order, each with the number of prelude chunks above it, but not their lines:
    a result found at another layout is reused with its spans moved (`moved`)."""
    code = {name: c.text.rstrip() for name, c in plan.units.items()}
    starts = sorted(line for line, _ in prelude)
    for name in plan.units:
        order = sorted(plan.closure[name], key=lambda g: plan.units[g].first_line)
        firsts = [plan.units[g].first_line for g in order]
        plan.keys[name] = _hash((plan.prelude_key, name, tuple(
            (bisect.bisect_left(starts, first), g, code[g]) for g, first in zip(order, firsts))))
        plan.layouts[name] = tuple((first, plan.units[g].last_line) for g, first in zip(order, firsts))
        plan.extents[name] = tuple((first, first + code[g].count("\n")) for g, first in zip(order, firsts))


# Line numbers written into text (a lambda's type, a recursion's call sites, `file:line:col`).
_LINE_TEXT = re.compile(r"\blines? \d|:\d+:\d+")


# rule Reused reports
def moved(result: UnitResult, file: str, layout: tuple, extents: tuple) -> Optional[UnitResult]:
    """The result of the same functions checked at `layout`: every span of `file` moved by its
    function's shift, or None when the result cannot be moved (docs/soundness.md, "Moved
    results"): it writes a line number in a message or a type, holds a position that is not one
    of its known spans, or has a span outside its functions' code."""
    if result.movable is None:
        result.movable = _movable(result, file)
    if not result.movable or len(extents) != len(result.extents):
        return None
    starts = [first for first, _ in result.extents]
    shifts = [new[0] - old[0] for old, new in zip(result.extents, extents)]

    def shift(span: Any) -> Any:
        if span is None or span.file != file:
            return span
        d = shifts[bisect.bisect_right(starts, span.line) - 1]  # _movable: inside that function's code
        if d == 0:
            return span
        # Built without the frozen class's checked __init__ (a moved result holds a thousand spans).
        copy = object.__new__(Span)
        copy.__dict__.update(file=span.file, line=span.line + d, col=span.col, end_line=span.end_line + d,
                             end_col=span.end_col)
        return copy

    diagnostics = [_with_span(d, shift(d.span)) for d in result.diagnostics]
    for d in diagnostics:
        d.notes = list(d.notes)
    return dataclasses.replace(
        result, diagnostics=diagnostics,
        functions=[_with_span(f, shift(f.span)) for f in result.functions],
        mechanisms=[_with_span(m, shift(m.span)) for m in result.mechanisms],
        bindings=[_with_span(b, shift(b.span)) for b in result.bindings],
        calls=[_with_span(c, shift(c.span)) for c in result.calls],
        layout=layout, extents=extents, movable=True, merge_keys=None)


def _with_span(item: Any, span: Any) -> Any:
    """A shallow copy of a record (a dataclass, frozen or not) with another span: the cached
    one is never changed.  Copied field by field, since `dataclasses.replace` costs 20 times more
    and a moved result holds thousands of bindings."""
    copy = object.__new__(type(item))
    copy.__dict__.update(item.__dict__)
    copy.__dict__["span"] = span
    return copy


# rule Reused reports
def _movable(result: UnitResult, file: str) -> bool:
    spans = [x.span for group in (result.diagnostics, result.functions, result.mechanisms, result.bindings,
                                  result.calls) for x in group if x.span is not None]
    try:
        shown = repr(result)  # every field, however deep: no other span, no line number in any text
    except RecursionError:  # a type nested too deeply to show here: checked again instead of moved
        return False
    if shown.count("Span(") != len(spans) or _LINE_TEXT.search(shown):
        return False
    return all(s.file != file or _extent_of(result.extents, s) is not None for s in spans)


def _extent_of(extents: tuple, span: Span) -> Optional[int]:
    """The index of the function whose code holds the whole span."""
    for i, (first, last) in enumerate(extents):
        if first <= span.line and span.end_line <= last:
            return i
    return None


# Every name a chunk's text can mention (the grammar's NAME): a superset of the names its body
# uses (the parser makes a variable only from a NAME token), and a word in a comment or a string
# only adds a dependency, which is safe.  Much cheaper than walking the syntax tree.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def two_groups(plan: _Plan, entry: str) -> Optional[tuple[frozenset, frozenset]]:
    """The units in two groups of about equal cost (the functions of their closures), the one
    holding the entry point first; None when the larger would cost more than `SPLIT_WORTH` of a
    full check (functions calling each other land in one group: nothing to split).  Greedy,
    largest closure first: a unit goes where its closure is already checked, else where the
    larger group grows least."""
    members: list[list[str]] = [[], []]
    needed: list[set] = [set(), set()]
    for unit in sorted(plan.units, key=lambda u: (-len(plan.closure[u]), plan.units[u].first_line)):
        closure = plan.closure[unit]
        added = [len(closure - n) for n in needed]
        if 0 in added:
            side = added.index(0)
        else:
            side = min((0, 1), key=lambda k: (max(len(needed[k]) + added[k], len(needed[1 - k])), added[k]))
        members[side].append(unit)
        needed[side] |= closure
    if not members[1] or max(map(len, needed)) + RUN_OVERHEAD > SPLIT_WORTH * _unit_cost(plan, None):
        return None
    first, second = frozenset(members[0]), frozenset(members[1])
    return (second, first) if entry in second else (first, second)


def _unit_cost(plan: _Plan, missing: Optional[list[str]]) -> int:
    """Estimated cost, in function checks, of running these units (None: one full check); each
    run also pays a fixed set-up (re-reading the file, schemas, params) of a few functions."""
    if missing is None:
        return len(plan.units) + RUN_OVERHEAD
    return sum(len(plan.closure[u]) + RUN_OVERHEAD for u in missing)


def _lines_of(plan: _Plan, needed: frozenset) -> frozenset:
    return frozenset({line for n in needed for line in range(plan.units[n].first_line, plan.units[n].last_line + 1)})


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


class _Key:
    """A record's merge key with its hash computed once: a cached result is merged again at every
    edit, and hashing its keys (spans, exact fractions) was most of an edit's merge."""

    __slots__ = ("key", "hash")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.hash == other.hash and self.key == other.key


def merge_keys(result: UnitResult) -> tuple:
    """The keys that identify a result's functions, mechanisms and calls when results are merged
    (the same record found by two units is shown once), made on its first merge."""
    if result.merge_keys is None:
        result.merge_keys = (
            [_Key((f.name, f.span)) for f in result.functions],
            [_Key((m.span, m.name, m.sensitivity, m.epsilon, m.scale)) for m in result.mechanisms],
            [_Key((c,)) for c in result.calls])
    return result.merge_keys


def _unique_keyed(groups: Iterable[Iterable[tuple[Any, _Key]]]) -> list[Any]:
    """The records of (record, key) pairs, in order, each key's first only."""
    seen: set = set()
    out = []
    for group in groups:
        for item, key in group:
            if key not in seen:
                seen.add(key)
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
