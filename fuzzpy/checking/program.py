"""Check a whole program: declarations, public parameters, every function, the entry point.

`check_source` / `check_file` are the checking stage's API, used by the CLI, the runtime and
the language server.  They never raise for a user error: everything ends in diagnostics.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..diagnostics import Diagnostic, FuzzError, Span
from ..hints import drop_cascades, private_divisor_hint, shown_span
from ..primitives.registry import NOCONST
from ..primitives.units import SELECTIONS
from ..syntax import ast as A
from ..syntax.loader import load_program, read_source
from ..typesystem import ir as I
from ..typesystem.effects import FAIL
from ..typesystem.quadratic import DELTA, SAMPLED_GAUSS
from ..typesystem.sens import INF, c_add, fmt_coef, is_const, is_inf
from ..typesystem.types import Bool, Cat, Column, Fun, Fuzzy, Num, PublicSchema, Schema, Str, Type, UnitBag, is_subtype
from .records import MechanismRecord
from .typeexpr import TypeResolver
from .values import FnT, TopFn, Val

if TYPE_CHECKING:
    from .checker import Checker

from ..limits import MAX_GROWTH, MAX_PER_KEY, RECURSION_LIMIT, in_large_stack_thread

# The report's classes live in reports.py (reading a cached report imports no checker); re-exported.
from .reports import CheckReport, FunctionReport, InputReport  # noqa: E402,F401


def check_file(path: str | Path, params: dict[str, str] | None = None, entry: str | None = "main") -> CheckReport:
    path = Path(path)
    text, err = read_source(path)
    if err is not None:
        report = CheckReport(str(path), {})
        report.diagnostics.append(err)
        return report
    return check_source(text, str(path), params, entry)


def check_source(source: str, file: str = "<input>", params: dict[str, str] | None = None,
                 entry: str | None = "main", overlays: dict[str, str] | None = None,
                 virtual: dict[str, str] | None = None) -> CheckReport:
    """Parse and check; runs in a thread with a large stack so deep programs cannot crash.
    `virtual`: modules read as if imported first (see `syntax.loader.load_program`)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["report"] = _check(source, file, params or {}, entry, overlays, virtual)
        except RecursionError:
            report = CheckReport(file, {file: source})
            report.diagnostics.append(Diagnostic("E0107", "program nested too deeply to check",
                                                 Span.point(file, 1, 1)))
            box["report"] = report
        except Exception as exc:  # noqa: BLE001 - a checker bug must still end in a diagnostic
            report = CheckReport(file, {file: source})
            report.diagnostics.append(Diagnostic("E0901", f"internal error in the checker ({type(exc).__name__}); "
                                                 "this is a bug in fuzzpy, please report it with the program",
                                                 Span.point(file, 1, 1)))
            box["report"] = report

    in_large_stack_thread(work, "fuzzpy-check")
    return box["report"]


def _check(source: str, file: str, params: dict[str, str], entry: str | None,
           overlays: dict[str, str] | None, virtual: dict[str, str] | None = None) -> CheckReport:
    import gc
    import sys

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))  # safe: this thread has a large stack
    # A check allocates many small, short-lived objects and few cycles: the cyclic collector's
    # full passes over a growing heap made checking superlinear in the program's size.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _check_inner(source, file, params, entry, overlays, virtual)
    finally:
        sys.setrecursionlimit(old_limit)
        if gc_was_enabled:
            gc.enable()


def _check_inner(source: str, file: str, params: dict[str, str], entry: str | None,
                 overlays: dict[str, str] | None, virtual: dict[str, str] | None = None) -> CheckReport:
    t0 = time.perf_counter()
    modules, diags, texts = load_program(source, file, overlays, virtual)
    report = CheckReport(file, texts, list(diags))
    report.pragma_budget, pragma_errors = read_pragmas(source, file)
    report.pragma_delta, delta_errors = read_pragmas(source, file, "delta")
    report.diagnostics.extend(pragma_errors + delta_errors)
    report.timings["parse"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    from ..solving.lp import LP_STATS

    solves0 = LP_STATS["solves"]
    decls = [d for m in modules for d in m.decls]
    program = _ProgramChecker(report, decls, params, entry)
    program.run()
    report.diagnostics = drop_cascades(report.diagnostics, texts)
    report.instances = getattr(getattr(program, "checker", None), "instance_count", 0)
    report.timings["check"] = time.perf_counter() - t1
    report.lp_solves = LP_STATS["solves"] - solves0
    return report


def _pragma(word: str) -> str:
    return rf"^\s*#\s*fuzzpy\s*:?\s*{word}\b(.*)$"  # matched case-insensitively: near misses count


def read_pragmas(source: str, file: str, word: str = "budget") -> tuple[Optional[Fraction], list[Diagnostic]]:
    """`# fuzzpy: budget 1.0` lines declare the file's own budget: every one counts (the
    smallest wins, so a stricter line added anywhere cannot be bypassed), and a malformed one is
    an error (E0103, an invalid literal) rather than silently not a pragma.  A trailing
    `# comment` is allowed.  `# fuzzpy: delta 1e-6` likewise (word="delta"): the delta at which
    a program with Gaussian releases is stated as (epsilon, delta), in (0, 1)."""
    import re

    from ..exact import parse_exact

    values, diags = [], []
    for m in re.finditer(_pragma(word), source, re.M | re.I):
        text = m.group(1).split("#", 1)[0].strip()
        line = source.count("\n", 0, m.start()) + 1
        exact_form = re.match(rf"^\s*#\s*fuzzpy:\s*{word}\b", m.group(0))
        try:
            if not exact_form:
                raise ValueError(f"write it exactly as '# fuzzpy: {word} B'")
            value = parse_exact(text)
            if value < 0 or (word == "delta" and not 0 < value < 1):
                raise ValueError("out of range")
            values.append(value)
        except ValueError:
            wanted = "a number strictly between 0 and 1" if word == "delta" else "a non-negative number"
            diags.append(Diagnostic("E0103", f"invalid {word} pragma: expected {wanted} after "
                                    f"'fuzzpy: {word}', got {text[:40]!r}", Span.point(file, line, 1)))
    return (min(values) if values else None), diags


def pragma_budget(source: str) -> Optional[Fraction]:
    """The smallest well-formed `# fuzzpy: budget` of a file (see read_pragmas)."""
    return read_pragmas(source, "<source>")[0]


def pragma_delta(source: str) -> Optional[Fraction]:
    """The smallest well-formed `# fuzzpy: delta` of a file (see read_pragmas)."""
    return read_pragmas(source, "<source>", "delta")[0]


class _ProgramChecker:
    def __init__(self, report: CheckReport, decls: list[A.Decl], params: dict[str, str], entry: str | None):
        self.report = report
        self.decls = decls
        self.cli_params = params
        self.entry = entry
        self.functions: dict[str, A.FunDecl] = {}
        self.schemas: dict[str, Schema] = {}

    def error(self, exc: FuzzError) -> None:
        seen = {(d.code, d.span, d.message) for d in self.report.diagnostics}
        for d in exc.diagnostics:
            if (d.code, d.span, d.message) not in seen:
                self.report.diagnostics.append(d)

    def run(self) -> None:
        self.collect()
        resolver = TypeResolver(self.schemas)
        self.resolver = resolver
        self.build_schemas(resolver)
        globals_ = self.build_params(resolver)
        from .checker import Checker  # imported when a program is checked, not when a report is read

        self.checker = Checker(self.functions, resolver, globals_)
        for decl in self.functions.values():
            if decl.name != self.entry:
                self.check_function(decl)
        if self.entry is not None:
            self.check_entry()

    def collect(self) -> None:
        seen: dict[str, A.Decl] = {}
        for d in self.decls:
            name = getattr(d, "name", None)
            if name is None:
                continue
            if name in seen:
                self.error(FuzzError(Diagnostic("E0206", f"'{name}' is declared twice", d.span,
                                                [f"first declared at {seen[name].span}"])))
                continue
            seen[name] = d
            if isinstance(d, A.FunDecl):
                self.functions[name] = d

    # ---- schemas ------------------------------------------------------------------------------

    def build_schemas(self, resolver: TypeResolver) -> None:
        for d in self.decls:
            if isinstance(d, A.SchemaDecl) and d.name not in self.schemas:
                try:
                    self.schemas[d.name] = self.build_schema(d, resolver)
                except FuzzError as exc:
                    self.error(exc)
        self.report.schemas = dict(self.schemas)

    def build_schema(self, d: A.SchemaDecl, resolver: TypeResolver) -> Schema:
        columns = []
        names = set()
        per_key = {}
        for c in d.columns:
            if isinstance(c, A.KeyedColumnDecl):
                per_key[c.name] = self.column_key(d, c)
            if c.name in names:
                raise FuzzError(Diagnostic("E0206", f"column '{c.name}' is declared twice in schema {d.name}", c.span))
            names.add(c.name)
            t = resolver.resolve(c.type)
            if not isinstance(t, (Num, Bool, Str, Cat)):
                raise FuzzError(Diagnostic("E0208", f"column '{c.name}' has type {t}; columns must be num, int, "
                                           "bool, string or cat{...}", c.type.span))
            default = None
            if c.policy == "default":
                default = self.column_default(c, t)
            columns.append(Column(c.name, t, c.policy, default))
        if isinstance(d, A.PublicSchemaDecl):
            return PublicSchema(d.name, tuple(columns), per_key=tuple(sorted(per_key.items())))
        schema = Schema(d.name, tuple(columns), d.unit)
        check_unit_column(schema, d)
        return schema

    def column_key(self, d: A.SchemaDecl, c: A.KeyedColumnDecl) -> int:
        """The most rows of a public table that share one value of column c (`unique`: 1)."""
        if not isinstance(d, A.PublicSchemaDecl):
            raise FuzzError(Diagnostic("E0208", f"column '{c.name}' of schema {d.name} declares how many rows share "
                                       "a value, but only a public schema may: a private table's rows are not "
                                       "inspected", c.key_span,
                                       ["declare the schema public (public schema Name { ... }) if its data is "
                                        "public; truncate a private table instead (truncate k \"column\" table)"]))
        if c.most.denominator != 1 or not 1 <= c.most <= MAX_PER_KEY:
            raise FuzzError(Diagnostic("E0208", f"the rows per value of column '{c.name}' must be a whole number "
                                       f"from 1 to {MAX_PER_KEY}", c.key_span))
        return int(c.most)

    def column_default(self, c: A.ColumnDecl, t: Type) -> Any:
        v = c.default.value if c.default is not None else None
        ok = ((isinstance(t, Num) and isinstance(v, Fraction) and (t.lo is None or v >= t.lo)
               and (t.hi is None or v <= t.hi) and (not t.integer or v.denominator == 1))
              or (isinstance(t, Cat) and v in t.values) or (isinstance(t, Str) and isinstance(v, str))
              or (isinstance(t, Bool) and isinstance(v, bool)))
        if not ok:
            raise FuzzError(Diagnostic("E0208", f"the default of column '{c.name}' is not a valid {t}",
                                       c.default.span if c.default else c.span))
        return v

    # ---- public parameters --------------------------------------------------------------------

    def build_params(self, resolver: TypeResolver) -> dict[str, Val]:
        from ..syntax.parser import parse_expr

        declared = {d.name: d for d in self.decls if isinstance(d, A.ParamDecl)}
        for name in self.cli_params:
            if name not in declared:
                import difflib
                close = difflib.get_close_matches(name, sorted(declared), n=1)
                note = [f"did you mean {close[0]}?"] if close else ["declare it with: param name : num;"]
                self.error(FuzzError(Diagnostic("E0211", f"--param {name}: the program declares no parameter "
                                                f"'{name}'", None, note)))
        out: dict[str, Val] = {}
        from .checker import Checker

        scratch = Checker({}, resolver, {})
        for name, d in declared.items():
            if name in self.cli_params:
                try:
                    out[name] = self.param_value(name, d, parse_expr(self.cli_params[name], f"--param {name}"),
                                                 scratch, resolver)
                    continue
                except FuzzError as exc:
                    self.error(_malformed_param(name, d, self.cli_params[name], exc, resolver))
                    if d.default is None:
                        continue
                    # Checked on with the declared default, so the program's uses of the
                    # parameter do not cascade into further errors (the report is not ok).
            try:
                if d.default is not None:
                    expr = d.default
                else:
                    raise FuzzError(Diagnostic("E0211", f"parameter '{name}' has no value", d.span,
                                               [f"pass it with --param {name}=VALUE or give a default"]))
                out[name] = self.param_value(name, d, expr, scratch, resolver)
            except FuzzError as exc:
                self.error(exc)
        self.report.params = {k: v.const for k, v in out.items()}
        self.report.param_types = {k: resolver.resolve(declared[k].type) for k in out}
        return out

    def param_value(self, name: str, d: A.ParamDecl, expr: A.Expr, scratch: Checker,
                    resolver: TypeResolver) -> Val:
        from ..typesystem.types import ListT

        v = scratch.expr(expr, scratch.globals)
        if not v.is_const:
            raise FuzzError(Diagnostic("E0209", f"parameter '{name}' must be a constant", expr.span))
        t = resolver.resolve(d.type)
        actual = v.type
        if isinstance(t, ListT) and isinstance(actual, ListT) and actual.elem.__class__.__name__ == "_Hole":
            actual = t
        if not is_subtype(actual, t):
            raise FuzzError(Diagnostic("E0702", f"parameter '{name}' should be {t}, but the value given is {v.type}",
                                       expr.span))
        if isinstance(t, Num):
            t = Num(v.const, v.const, t.integer)  # public constants carry their exact value
        return Val(t, {}, I.IConst(v.const), v.const)

    # ---- functions ------------------------------------------------------------------------------

    def is_generic(self, decl: A.FunDecl) -> bool:
        from .helpers import _has_tvar

        return any(p.type is None or _has_tvar(self.resolver.resolve(p.type)) for p in decl.params)

    def check_function(self, decl: A.FunDecl) -> None:
        try:
            if self.is_generic(decl):
                self.report.functions.append(FunctionReport(decl.name, decl.name_span, _generic_sig(decl), True))
                return
            summary, types = self.generic_instance(decl)
            self.report.functions.append(FunctionReport(decl.name, decl.name_span,
                                                        _fun_type(types, summary.coefs, summary.cod, summary.quad),
                                                        coefs=list(summary.coefs),
                                                        rhos=[_gauss_rho(q) for q in summary.quad],
                                                        param_names=[p.name for p in decl.params]))
        except FuzzError as exc:
            if exc.diagnostics[0].code in ("E0209", "E1501") and decl.params:
                # It needs some arguments to be public constants (an epsilon, clip bounds):
                # it is checked at each use, with the constants of that use.
                sig = "uses constant arguments; checked at each use"
                self.report.functions.append(FunctionReport(decl.name, decl.name_span, sig, True))
                return
            self.error(exc)

    def generic_instance(self, decl: A.FunDecl, public: frozenset[str] = frozenset()):
        types = [self.resolver.resolve(p.type) for p in decl.params]  # type: ignore[arg-type]
        # Each parameter stands for any value, private ones included (a distance symbol of its own);
        # the entry point's `public` tables are public data (distance 0).
        placeholders = [Val(t, {} if p.name in public else {self.checker.fresh_symbol(p.name, t): Fraction(1)},
                            I.IVar(p.name), NOCONST)
                        for p, t in zip(decl.params, types)]
        for v, t in zip(placeholders, types):
            if isinstance(t, Fun):
                from .values import Opaque
                v.fn = Opaque(t)
        ck = self.checker
        ck.current_function = decl.name
        fval = Val(FnT(decl.name), {}, I.IClosure(), NOCONST, TopFn(decl))
        summary, _ = ck.summary(fval.fn, placeholders, decl.span)
        return summary, types

    # rule Entry: main's tables: finite epsilon, no private risk, bounded growth, closed
    def check_entry(self) -> None:
        decl = self.functions.get(self.entry)  # type: ignore[arg-type]
        if decl is None and any(d.code.startswith("E01") for d in self.report.diagnostics):
            return  # the entry point may be the declaration that failed to parse
        if decl is None:
            close = [n for n in self.functions]
            note = [f"functions here: {', '.join(close[:8])}"] if close else []
            self.error(FuzzError(Diagnostic("E0207", f"no entry point: declare function {self.entry} "
                                            f"(db : bag Schema) : fuzzy T", None, note)))
            return
        try:
            if any(p.type is None for p in decl.params):
                p = next(p for p in decl.params if p.type is None)
                raise FuzzError(Diagnostic("E0212", f"parameter '{p.name}' of the entry point needs a type, "
                                           "e.g. (db : bag Adult)", p.span))
            first_origin = len(self.checker.inf_origins)
            public = self.public_tables(decl)
            summary, types = self.generic_instance(decl, frozenset(public))
            if not isinstance(summary.cod, Fuzzy):
                raise FuzzError(Diagnostic("E0202", f"the entry point {decl.name} must return a distribution "
                                           f"(fuzzy T), but it returns {summary.cod}", decl.name_span,
                                           ["release values with a mechanism, e.g. sample c = laplace 0.1 "
                                            "(count db); return c"]))
            self.report.entry = decl.name
            self.report.entry_instance = summary.instance
            if summary.instance is not None:  # rule Units: which tables count units, and by which column
                summary.instance.units = {p.name: t.unit for p, t in zip(decl.params, types) if isinstance(t, UnitBag)}
            self.report.entry_type = summary.cod
            self.report.functions.append(FunctionReport(decl.name, decl.name_span,
                                                        _fun_type(types, summary.coefs, summary.cod, summary.quad),
                                                        coefs=list(summary.coefs),
                                                        rhos=[_gauss_rho(q) for q in summary.quad],
                                                        param_names=[p.name for p in decl.params]))
            self.report.public_tables = public
            for p, t, c, q in zip(decl.params, types, summary.coefs, summary.quad):
                if p.name in public:
                    continue  # public data: nothing to charge
                rho_g, rho_z, delta, rho_s = (q.get(ch, Fraction(0)) for ch in ("g", "z", DELTA, SAMPLED_GAUSS))
                rho_g = _gauss_rho(q, Fraction(0))
                self.report.inputs.append(InputReport(p.name, str(t), c if is_const(c) else INF, t,
                                                      rho_g if is_const(rho_g) else INF,
                                                      rho_z if is_const(rho_z) else INF, _inventory(q),
                                                      _inventory(q, pure=True),
                                                      delta if is_const(delta) else INF, _subsampled(q),
                                                      rho_s if is_const(rho_s) else INF))
            self.check_closed(decl, summary)
            self.check_bounded(decl, summary, first_origin)
            self.check_completes(decl, summary)
            self.check_growth(decl, summary)
        except FuzzError as exc:
            self.error(exc)
        finally:
            self.report.mechanisms = _unique(self.checker.mechanisms)


    # rule Public tables: an entry parameter `bag S` of a public schema S is public data
    def public_tables(self, decl: A.FunDecl) -> dict[str, PublicSchema]:
        """The entry point's public tables: parameter name -> its public schema."""
        out = {}
        for p in decl.params:
            t = p.type
            if isinstance(t, A.TWrap) and t.kind == "bag" and isinstance(t.inner, A.TName):
                schema = self.schemas.get(t.inner.name)
                if isinstance(schema, PublicSchema):
                    out[p.name] = schema
        return out

    # rule Entry: every table's coefficient finite (E0302)
    def check_bounded(self, decl: A.FunDecl, summary, first_origin: int) -> None:
        """An entry point with infinite epsilon is not differentially private: an error (E0302)."""
        check_selection_delta(self.report, decl)
        unbounded = [i.name for i in self.report.inputs if INF in (i.epsilon, i.rho_gauss)]
        if not unbounded:
            return
        # The caret goes on the first expression of the user's file where private data met an
        # unbounded rule; main itself is named in a note.
        origins = self.checker.inf_origins
        here = _caret_origin(origins[first_origin:], decl.name_span.file, set(summary.param_syms))
        others = [o for o in origins if o is not here][:3 if here is None else 2]
        notes = [here[1]] if here else []
        notes += [f"{shown_span(span)}: {reason}" for span, reason, *_ in others]
        if here is not None:
            notes.append(f"{decl.name} is declared at {shown_span(decl.name_span)}")
            notes += private_divisor_hint([here], None)
        notes.append("release private values only through mechanisms (laplace, ...) and branch only on "
                     "released (sampled) values")
        self.error(FuzzError(Diagnostic("E0302", f"{decl.name} is not differentially private in "
                                        f"{', '.join(unbounded)}: its privacy loss is unbounded",
                                        here[0] if here else decl.name_span, notes)))


    def check_closed(self, decl: A.FunDecl, summary) -> None:
        """Rule Entry: the entry point's distance, risk and growth mention only its own
        parameters (and FAIL).  Anything else is a symbol that escaped the function that made it,
        a bug in a rule: fail closed, never report a smaller epsilon."""
        own = set(summary.param_syms)
        stray = [s for part in (summary.captured, summary.risk, summary.growth) for s in part
                 if s not in own and s != FAIL]
        if stray:
            raise FuzzError(Diagnostic("E0901", "internal error in the checker (a distance symbol escaped its "
                                       "function); this is a bug in fuzzpy, please report it with the program",
                                       decl.name_span))

    def check_completes(self, decl: A.FunDecl, summary) -> None:
        """Rule Entry: whether a run completes must not depend on private data (E0309)."""
        risky = [p.name for p, sym in zip(decl.params, summary.param_syms) if summary.risk.get(sym, 0) != 0]
        if not risky:
            return
        notes = self.checker.risk_notes()
        notes.append("a run that fails or does not finish on one table and not on its neighbour reveals which one "
                     "it ran on; recurse on public constants or released values, and keep work that may not "
                     "finish out of branches on private data")
        self.error(FuzzError(Diagnostic("E0309", f"whether a run of {decl.name} completes may depend on private "
                                        f"data in {', '.join(risky)}", decl.name_span, notes)))

    def check_growth(self, decl: A.FunDecl, summary) -> None:
        """Rule Entry: every table the program builds has at most `growth` times the rows of its
        inputs (union is the one primitive that adds rows); bounded by limits.MAX_GROWTH (E0311)."""
        g = max([summary.growth.get(sym, 0) for sym in summary.param_syms] + [Fraction(1)])
        self.report.growth = g if is_const(g) else INF
        if self.report.growth > MAX_GROWTH:
            self.error(FuzzError(Diagnostic(
                "E0311", f"{decl.name} can build a table with {fmt_coef(self.report.growth)} times the rows of its "
                f"input; at most {MAX_GROWTH} times is allowed", decl.name_span,
                ["union adds the rows of both its arguments: a union of a table with itself, repeated, doubles "
                 "it each time", "the limit keeps the memory a run needs within a fixed multiple of its input, "
                 "whatever the data"])))


def _inventory(quad: dict, pure: bool = False) -> Optional[tuple]:
    """Rule Inventory: the counted Laplace releases of one entry parameter (with `pure`: all its
    counted pure releases, scalar Laplace or not), or None when a pure release on it was not
    counted (the unknown mark) or a count is not a finite number; without `pure`, also None when
    a release is not a scalar Laplace one."""
    import math

    from ..typesystem.quadratic import PURE_PREFIX, SUBSAMPLED_PREFIX, UNKNOWN, is_inventory

    out = []
    for ch, c in quad.items():
        if not is_inventory(ch):
            continue
        if ch == UNKNOWN or not is_const(c) or c == INF:
            return None
        if ch.startswith(SUBSAMPLED_PREFIX):
            continue  # counted apart (`_subsampled`)
        if ch.startswith(PURE_PREFIX):
            if not pure:
                return None
            out.append((Fraction(ch[len(PURE_PREFIX):]), math.ceil(Fraction(c))))
        else:
            out.append((Fraction(ch[2:]), math.ceil(Fraction(c))))
    return tuple(sorted(out))


# rule Poisson subsampling: the rho of every Gaussian release, on samples or not
def _gauss_rho(quad: dict, absent: Any = 0):
    """Channel g plus channel gs (a sum: INF when either is); channel g as it is without gs."""
    if SAMPLED_GAUSS not in quad:
        return quad.get("g", absent)
    return c_add(quad.get("g", Fraction(0)), quad[SAMPLED_GAUSS])


# rule Poisson subsampling: the counted releases on Poisson samples of one entry parameter
def _subsampled(quad: dict) -> Optional[tuple]:
    """Its releases on Poisson samples as ((kind, rate, epsilon, most releases), ...); None when
    a release is not counted (the inventory's unknown mark, or a count that is not finite)."""
    import math

    from ..typesystem.quadratic import SUBSAMPLED_PREFIX, UNKNOWN, parse_subsampled

    if quad.get(UNKNOWN, 0) != 0:
        return None
    out = []
    for ch, c in quad.items():
        if ch.startswith(SUBSAMPLED_PREFIX) and c != 0:
            if not is_const(c) or c == INF:
                return None
            out.append((*parse_subsampled(ch), math.ceil(Fraction(c))))
    return tuple(sorted(out))


def _fun_type(types: list[Type], coefs, cod: Type, quad=None) -> str:
    """The function's type with its sensitivities; a Gaussian release's rho per unit of a
    parameter's distance squared is shown as `-o[rho r]` (rule Rho)."""
    if not types:
        return str(cod)
    parts = []
    for t, c, q in zip(types, coefs, quad or [{}] * len(types)):
        g = _gauss_rho(q)
        if g != 0:
            rho = f"rho {fmt_coef(g)}"
            arrow = "->" if INF in (c, g) else f"-o[{rho}]" if c == 0 else f"-o[{fmt_coef(c)}; {rho}]"
        else:
            arrow = "->" if is_inf(c) else "-o" if c == 1 else f"-o[{fmt_coef(c)}]"
        dom = f"({t})" if isinstance(t, Fun) else str(t)
        parts.append(f"{dom} {arrow}")
    return " ".join(parts) + f" {cod}"


def _generic_sig(decl: A.FunDecl) -> str:
    return f"generic in {', '.join(p.name for p in decl.params if p.type is None) or 'its type variables'}; " \
           "checked at each use"


def _unique(records: list[MechanismRecord]) -> list[MechanismRecord]:
    """The records in order, each (span, name, sensitivity, epsilon, scale) once.  The numbers of
    the records of one span and name are compared, not hashed: a Fraction's hash is slow (a modular
    inverse), and equal numbers hash alike, so a set would find the same ones."""
    seen: dict[tuple, list[tuple]] = {}
    out = []
    for r in records:
        numbers = (r.sensitivity, r.epsilon, r.scale)
        known = seen.get((r.span, r.name))
        if known is None:
            seen[(r.span, r.name)] = [numbers]
        elif numbers in known:
            continue
        else:
            known.append(numbers)
        out.append(r)
    return out





def _malformed_param(name: str, d: A.ParamDecl, text: str, exc: FuzzError, resolver: Any) -> FuzzError:
    """A --param value that is not a constant of the parameter's type says so: "abc" is a
    malformed value, not an unknown name to correct."""
    diag = exc.diagnostics[0]
    if diag.code == "E0702":
        return exc
    want = resolver.resolve(d.type)
    shown = text if len(text) <= 40 else text[:37] + "..."
    return FuzzError(Diagnostic("E0702", f"malformed value for --param {name}: '{shown}' is not a {want}", None,
                                [f"parameter '{name}' is declared at {d.span} as {want}; pass a literal such as "
                                 + _example_literal(want).replace("NAME", name), f"(reading it gave: {diag.message})"]))


def _example_literal(t: Any) -> str:
    from ..typesystem.types import Bool, ListT, Str

    if isinstance(t, Num):
        return f"--param NAME={t.lo if t.lo is not None else (1 if t.integer else 0.5)}"
    if isinstance(t, Bool):
        return "--param NAME=true"
    if isinstance(t, Str):
        return '--param NAME=\'"text"\' (quoted)'
    if isinstance(t, ListT):
        return "--param NAME='[1, 2, 3]'"
    return "a constant of that type"


def _caret_origin(origins: list, file: str, params: set[str]) -> Optional[tuple]:
    """Where E0302's caret goes: of the origins of infinity recorded while checking the entry point,
    in its file, the first that is infinite in the entry point's own parameters, else the first;
    None (the caret stays on the entry point's name) if there is none."""
    mine = [o for o in origins if o[0].file == file]
    return next((o for o in mine if params & set(o[2])), mine[0] if mine else None)


# rule Units: the unit is a declared column whose values name individuals
def check_unit_column(schema: Schema, d: A.SchemaDecl) -> None:
    """A schema's privacy unit must be one of its columns, of a type whose values are compared
    exactly (a string, an int or a category): its values name the individuals."""
    if schema.unit is None:
        return
    column = schema.column(schema.unit)
    if column is None:
        raise FuzzError(Diagnostic("E0208", f"the privacy unit of schema {schema.name} is '{schema.unit}', which is "
                                   "not one of its columns", getattr(d, "unit_span", None) or d.span,
                                   ["declare the column that names the individual of each row, e.g. "
                                    f"schema {schema.name} unit {schema.unit} {{ {schema.unit} : string, ... }}"]))
    t = column.type
    if not (isinstance(t, (Str, Cat)) or (isinstance(t, Num) and t.integer)):
        raise FuzzError(Diagnostic("E0208", f"the privacy unit '{schema.unit}' has type {t}; a unit column must be "
                                   "a string, an int or a category", getattr(d, "unit_span", None) or d.span))


# rule Partition selection: a delta that would need group privacy is refused
def check_selection_delta(report: CheckReport, decl: A.FunDecl) -> None:
    """E0332 when a partition selection's input may move by more than one unit when a table
    moves by one (its delta would grow faster than linearly: group privacy)."""
    moved = [i.name for i in report.inputs if i.delta == INF]
    if not moved:
        return
    sites = [f"{m.name} at {shown_span(m.span)}" for m in report.mechanisms if m.name in SELECTIONS][:3]
    raise FuzzError(Diagnostic("E0332", f"{decl.name} selects keys from a table that moves by more than one unit "
                               f"when {', '.join(moved)} moves by one", decl.name_span,
                               [*sites, "give select_keys a table as it was loaded, filtered or mapped (not a "
                                "union with itself, a bounded table or a part of a partition), so that one unit "
                                "added or removed moves it by one unit"]))
