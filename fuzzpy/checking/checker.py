"""The sensitivity checker: types, distances, and the IR of a program, in one pass.

Every expression is checked to a `Val`: its type, its distance expression over distance symbols
(function parameters and split parts), its value when it is a public constant, and its IR.
The rules are Fuzz's, written over distance expressions: using a value twice adds its distance,
scaling multiplies, branches take the pointwise max, a function application scales the argument
by the function's sensitivity, branching on anything private makes the result infinitely
sensitive, `return` of a private value is infinitely sensitive (point masses are infinitely far
apart in max-divergence), and sampling adds privacy losses.

Functions are checked per *instance*: a function whose parameters have no declared type, or
whose arguments are public constants, is checked again for each distinct use (public
parameters are instantiated before solving, so that their bounds stay linear).  A
recursive call with the same instance key gets unknown sensitivities, solved by the LP in
`solving/lp.py` once the outermost recursive instance is complete.

This module holds the `Checker` itself: its state, distance symbols, splits and their
elimination, the `RuleContext` methods the primitives call, and name lookup.  The rules are
mixed in from the modules next to it:

* `expressions.py`: the `x_*` rule of each expression form except application (literals,
  let, sample, return, branches, case, lambdas, records, tuples, lists);
* `patterns.py`: binding patterns and the distances of a value's components;
* `applications.py`: applications, primitives, partial application, giving function values
  a declared function type;
* `instances.py`: function instances, recursion, widening and solving LP unknowns;
* `helpers.py`: the free helper functions the rules share.
"""

from __future__ import annotations

import difflib
from fractions import Fraction
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError, Span
from ..hints import hint, private_divisor_hint
from ..primitives.registry import NOCONST, Arg, Instantiated, lookup
from ..syntax import ast as A
from ..typesystem import ir as I
from ..typesystem.effects import ARGS, r_base, r_union
from ..typesystem.quadratic import base_of, is_count, lift, linear_part, pop_quad
from ..typesystem.sens import (
    INF,
    ONE,
    ZERO,
    Coef,
    ConstraintStore,
    Dist,
    NonLinear,
    c_add,
    c_mul,
    d_add,
    d_scale,
    is_const,
    is_inf,
)
from ..typesystem.types import Bag, Num, Record, Type, Unit, holds_tables
from .applications import ApplicationRules
from .counting import CountRules
from .expressions import ExpressionRules
from .helpers import (  # noqa: F401 - re-exported
    _branch_choice,
    _cover,
    _fn_identity,
    _free_vars,
    _has_tvar,
    _hashable,
    _integral_type,
    _pattern_names,
    _rename_args,
    _spine,
    _widen,
    apply_scale,
    infinite_part,
)
from .instances import WIDEN_SPECULATIVE, InstanceRules, Summary, _Active  # noqa: F401
from .patterns import PatternRules
from .records import MechanismRecord  # noqa: F401 - re-exported
from .typeexpr import TypeResolver
from .values import Env, FnT, TopFn, Val


class Checker(ExpressionRules, PatternRules, ApplicationRules, InstanceRules, CountRules):
    """Checks a program's functions; the rules come from the mixins (see the module docstring)."""

    # Tool hooks (`_note_binding` and its neighbours): a tool such as the language server's hover
    # sets them; None, the case of every plain check, costs one attribute read per binding.
    on_bind: Optional[Any] = None
    on_call: Optional[Any] = None
    on_primitive: Optional[Any] = None

    def __init__(self, functions: dict[str, A.FunDecl], resolver: TypeResolver, globals_: dict[str, Val]):
        self.functions = functions
        self.types = resolver
        self.globals = Env(dict(globals_))
        self.store = ConstraintStore()
        self.splits: list[tuple[list[str], Dist]] = []
        self.split_of: dict[str, int] = {}  # part symbol -> index of its split
        # split index -> (m, uniform): each part moves by at most parent/m; `uniform`: one symbol
        # stands for every part (released keys), so its coefficient is every part's
        self.split_spread: dict[int, tuple[int, bool]] = {}
        self.integral_syms: set[str] = set()  # symbols whose distances are whole numbers
        self.table_syms: set[str] = set()     # symbols of values that hold tables
        self._integral_types: dict[Type, bool] = {}  # fresh_symbol's memo of _integral_type
        self.symbol_names: dict[str, str] = {}
        self.uses: dict[str, list[Span]] = {}
        self.mechanisms: list[MechanismRecord] = []
        self.instances: dict[Any, Summary] = {}
        self.active: dict[Any, _Active] = {}
        self.pending_checks: list[tuple[Coef, Coef, Span, str]] = []
        self.unsolved: list[Summary] = []  # summaries whose coefficients mention LP unknowns
        # where private data first met an unbounded rule, and the symbols it was infinite in
        self.inf_origins: list[tuple[Span, str, tuple[str, ...]]] = []
        self.risk_origins: list[tuple[Span, str]] = []  # where a failure first came to depend on data
        self.current_function = "<top>"
        self._sym = 0
        # Function instances (instances.py): the ones being checked, innermost last, and per
        # top-level function; how deep in branches of non-constant choices the check is.
        self.stack: list[_Active] = []
        self.chains: dict[str, list[_Active]] = {}
        self.speculation = 0
        self.deferred = 0  # inside a `sample` (bound or rest): evaluated when drawn, not now
        self.instance_count = 0
        self.widened: list[tuple[str, Span]] = []
        self.speculative_checks: dict[str, int] = {}  # instances checked under speculation, per function
        self.widened_lists: list[tuple[str, Span]] = []  # rule Widen (breadth): where lists were forgotten
        self.primitive_risk: list[Dist] = []  # risk of the functions a primitive's rule checked
        self.primitive_growth: list[Coef] = []  # their growth relative to what they are applied to
        self._shapes: dict[int, Any] = {}  # counting.py: each declaration's rule Count shape
        self._counting: Any = None         # the key of the counted step being checked
        self._counted_state: Any = None

    # ---- symbols, splits and elimination ----------------------------------------------------

    def fresh_symbol(self, name: str, t: Optional[Type] = None) -> str:
        self._sym += 1
        sym = f"{name}#{self._sym}"
        self.symbol_names[sym] = name
        if t is not None:
            if self._integral(t):
                self.integral_syms.add(sym)
            if holds_tables(t):
                self.table_syms.add(sym)  # rule Growth counts the rows of these
        return sym

    def _integral(self, t: Type) -> bool:
        """`_integral_type`, kept per type: each row function's parameter asks it of the same
        row type twice (its holder and its parameter), and the walk visits every field."""
        if type(t) is Num:
            return t.integer
        known = self._integral_types.get(t)
        if known is None:
            known = self._integral_types[t] = _integral_type(t)
        return known

    def integral(self, sym: str) -> bool:
        """Does this symbol only ever move by whole numbers (tables, ints, discrete values)?"""
        return sym in self.integral_syms

    # rule Split: fresh part symbols whose sum is at most the parent's distance
    def split(self, parent: Dist, labels: list[str], types: Optional[list[Type]] = None,
              spread: int = 1, uniform: bool = False) -> list[Dist]:
        """The distances of the parts of a value: fresh part symbols with sum(parts) <= parent.
        Each part also keeps the parent's infinite entries: a part of something that depends
        infinitely on an input (a branch on it may flip) does so too, and a finite part symbol
        alone would let a branch on the part look free.  `types` are the parts' types (bags by
        default: primitives split tables).  With `spread` m, moreover each part moves by at most
        parent/m (rule Bounded groups: a unit's rows in at most m groups, c in each).  `uniform`:
        the one label stands for every part of a partition of released keys (rule Released keys)."""
        types = types or [Bag(Unit())] * len(labels)
        parts = [self.fresh_symbol(f"part[{label}]", t) for label, t in zip(labels, types)]
        for p in parts:
            self.split_of[p] = len(self.splits)
        if spread > 1 or uniform:
            self.split_spread[len(self.splits)] = (spread, uniform)
        self.splits.append((parts, dict(parent)))
        infinite = infinite_part(parent)
        return [{p: ONE, **infinite} for p in parts]

    def scale_apply(self, k: Coef, dist: Dist, span: Optional[Span] = None) -> Dist:
        """k * dist for applying a k-sensitive function (0 * inf = inf; E0304 if non-linear)."""
        return self._scale(k, dist, span, apply=True)

    # rule Split: parts replaced by their parent, newest first (the LP's exact optimum)
    def eliminate(self, dist: Dist, since: int = 0) -> Dist:
        """Replace split parts by their parent: sum_k c_k d_k <= max_k c_k * d(parent), the exact
        maximum of the linear form over {sum_k d_k <= d(parent)}.  Splits are eliminated newest
        first (a parent only mentions older symbols); only the splits that occur are visited.
        Shadow entries likewise (rule Rho): sum_k r_k d_k^2 <= max_k r_k * (sum_k d_k)^2
        <= max_k r_k * d(parent)^2, and d(parent)^2 is lifted onto the parent's expression."""
        if not dist:
            return {}
        out = dict(dist)
        if since >= len(self.splits):  # no split made since: nothing to replace (most instances)
            return out
        pending = {self.split_of[s] for s in map(base_of, out) if self.split_of.get(s, -1) >= since}
        while pending:
            j = max(pending)
            pending.discard(j)
            parts, parent = self.splits[j]
            coefs = [out.pop(p) for p in parts if p in out]
            quads = [pop_quad(out, p) for p in parts]
            if not coefs and not any(quads):
                continue
            pending |= {self.split_of[s] for s in map(base_of, parent) if self.split_of.get(s, -1) >= since}
            spread, uniform = self.split_spread.get(j, (1, False))
            if coefs:
                out = d_add(out, self._scale(self._parts_bound(coefs, 1 if uniform else spread), parent, None))
            for ch in sorted({ch for q in quads for ch in q}):
                rs = [q[ch] for q in quads if ch in q]
                # Rule Inventory: one row is in one part of a table, so the counts of the part that
                # moves are the most; parts that may move together (a number's) add up.  A unit
                # is in up to `spread` parts (rule Bounded groups): its counts add up too.
                together = is_count(ch) and (spread > 1 or not all(self.integral(p) for p in parts))
                r: Coef = rs[0]
                for c in rs[1:]:
                    r = c_add(r, c) if together else self.store.c_max(r, c)
                if spread > 1 and not is_count(ch):  # rule Bounded groups: sum_k p_k^2 <= (L/m) L
                    r = c_mul(r, Fraction(1, spread))
                out = d_add(out, self.lift({ch: r}, parent, None))
        return out

    # rule Bounded groups: the most sum_k c_k p_k can be when sum_k p_k <= L and each p_k <= L/m
    def _parts_bound(self, coefs: list[Coef], spread: int) -> Coef:
        """The factor f with sum_k c_k p_k <= f * parent, the exact optimum of the linear program
        {sum_k p_k <= L, 0 <= p_k <= L/m}: the m largest coefficients, each on L/m (fractional
        knapsack).  With m = 1, for one symbol standing for every part, or with a coefficient not
        known yet: the largest coefficient, which is at least that optimum."""
        m: Coef = coefs[0]
        for c in coefs[1:]:
            m = self.store.c_max(m, c)
        if spread == 1 or not all(is_const(c) for c in coefs) or INF in coefs:
            return m
        top = sorted(coefs, reverse=True)[:spread]
        return sum(top, ZERO) / spread

    def lift(self, quad: dict, arg: Dist, span: Optional[Span]) -> Dist:
        """Rule Rho: shadow coefficients of a symbol replaced by the expression `arg`."""
        try:
            return lift(quad, arg)
        except NonLinear:
            raise self.fail("E0304", "cannot bound the cost of a Gaussian release here: the distance it is "
                            "applied to depends on the sensitivity of a recursive function that is not solved yet",
                            span, "annotate the recursive function's parameters with their sensitivity")

    def _scale(self, k: Coef, d: Dist, span: Optional[Span], apply: bool = False) -> Dist:
        try:
            return apply_scale(k, d) if apply else d_scale(k, d)
        except NonLinear:
            raise self.fail("E0304", "cannot infer this sensitivity: it is a product of two unknown "
                            "sensitivities", span, "annotate the recursive function's parameters, e.g. (x :[2] num)")

    # ---- the RuleContext used by primitives ---------------------------------------------------

    # rule Widen: an E0209 names the recursion whose constants were forgotten
    def fail(self, code: str, message: str, span: Optional[Span], *notes: str) -> FuzzError:
        notes_ = list(notes)
        widened = [(name, where) for name, where in self.widened if self.chains.get(name)]
        if code == "E0209" and widened:  # only a recursion being checked here
            name, where = widened[0]
            notes_ = [n for n in notes_ if n != hint("released-clip-bound")]  # not released: widened
            notes_.append(f"the checker stopped unrolling {name} at {where}: after {WIDEN_SPECULATIVE} nested calls "
                          "under conditions that are not public constants, the arguments that change from call to "
                          "call are no longer constants; compute constants such as epsilon outside the recursion "
                          "and pass them unchanged, or make the recursion's condition a public constant")
        return FuzzError(Diagnostic(code, message, span, notes_))

    def note_risk(self, span: Span, risk: Dist, reason: str) -> None:
        if risk and len(self.risk_origins) < 20:
            self.risk_origins.append((span, reason))

    def risk_notes(self) -> list[str]:
        return [f"{span}: {reason}" for span, reason in self.risk_origins[:3]]

    def c_max(self, a: Coef, b: Coef) -> Coef:
        return self.store.c_max(a, b)

    def d_max(self, a: Dist, b: Dist) -> Dist:
        return self.store.d_max(a, b)

    # rule Mechanisms: S, the largest finite coefficient after elimination (E0305 if none)
    def sensitivity(self, dist: Dist, span: Span) -> Fraction:
        """The proven sensitivity of a mechanism's argument: the largest distance it can move
        when any one input moves by one, after eliminating split parts."""
        flat = linear_part(self.eliminate(dist))  # shadow entries are costs, not distances (rule Rho)
        finite = {s: c for s, c in flat.items() if not is_inf(c)}  # no Fraction-float comparison
        if flat and not finite:
            sym = next(iter(flat))
            raise self.fail("E0305", f"the argument of this mechanism has unbounded sensitivity in "
                            f"{self.describe(sym)}", span, *self._why_infinite(),
                            *private_divisor_hint(self.inf_origins, span))
        best = ZERO
        # Inputs it depends on infinitely are charged infinity by the cost (eps/S) * distance,
        # so they must be public at every use; the noise is calibrated on the others.
        for sym, c in finite.items():
            if not is_const(c):
                raise self.fail("E0304", "the sensitivity of this mechanism's argument depends on the "
                                "sensitivity of a recursive function that is not solved yet", span,
                                "annotate the recursive function's parameters with their sensitivity")
            best = max(best, c if type(c) is Fraction else Fraction(c))
        return best

    def _why_infinite(self) -> list[str]:
        return ["a value is infinitely sensitive when it branches on private data, compares private "
                "numbers, multiplies or divides by something unbounded, or sums unbounded values"]

    def record_mechanism(self, name, span, sensitivity, epsilon, scale, cost, extra=None) -> None:
        self.mechanisms.append(MechanismRecord(name, span, sensitivity, epsilon, scale,
                                               self.current_function, dict(extra or {})))

    # rule Primitive: a function a primitive applies, checked where the primitive applies it
    def instantiate(self, arg: Arg, param_types: list[Type], span: Span, per_row: bool = False,
                    record: bool = True, public: bool = False, times: int = 1,
                    quadratic: bool = False) -> Instantiated:
        """Check a function argument at the given parameter types (for higher-order primitives).

        Its failure risk goes to the primitive being checked (`record`), except for a row
        function (`per_row`): the runtime runs it once per row and turns a row's failure into a
        missing value for that row, so no failure of a row function ends the run (rule Row).  A
        risk on its own parameters means it may fail depending on what it is applied to: the
        primitive's arguments (ARGS).  With `public`, the primitive applies the function only to
        public values (candidates, queries): its parameters are public.  `times` is how often the
        primitive applies it (a public number, e.g. once per key of a partition): its calls count
        that many times towards the call budget (rule Unroll).  `quadratic`: the primitive maps
        the shadow coefficients (`Instantiated.quad`, rule Rho) onto what it applies the function
        to; other primitives refuse a function that makes Gaussian releases on its parameters."""
        fn = arg.fn
        if fn is None:
            raise self.fail("E0203", f"expected a function here, but this is {arg.type}", arg.span)
        names = [f"_a{self._sym}_{i}" for i in range(len(param_types))]
        holders = []
        for name, t in zip(names, param_types):
            sym = self.fresh_symbol(name, t)
            holders.append(Val(t, {} if public else {sym: ONE}, I.IVar(name, span=span)))
        since = len(self.splits)
        fval = Val(arg.type, arg.dist, arg.ir, arg.const, fn)
        top = self.stack[-1]
        # What the function's body grows and nests, on its own.
        outer = top.growth, top.callee_depth, top.draw_depth, top.calls
        top.growth, top.callee_depth, top.draw_depth, top.calls = {}, 0, 0, 0
        first_sym, first_origin = self._sym, len(self.inf_origins)
        try:
            result = self.apply_to_holders(fval, holders, span)
        finally:
            growth, depth, draw_depth, calls = top.growth, top.callee_depth, top.draw_depth, top.calls
            top.growth, top.callee_depth, top.draw_depth, top.calls = outer
        syms = [next(iter(h.dist)) for h in holders if h.dist]
        flat = self.eliminate(result.dist, since)
        coefs = [flat.pop(s, ZERO) for s in syms] if syms else [ZERO] * len(holders)
        quad = [pop_quad(flat, s) for s in syms] if syms else [{} for _ in holders]
        if any(quad) and not quadratic:
            raise self.fail("E0313", "this function makes a Gaussian release on what it is applied to, which "
                            "this primitive cannot account for", span,
                            "Gaussian releases compose in zCDP, whose cost grows with the square of the distance; "
                            "only each/pmap over a partition, and direct calls, account for it: release the "
                            "result of the primitive instead")
        risk = r_base(self.eliminate(result.risk, since))
        for s in syms if risk else ():
            if risk.pop(s, ZERO) != 0:  # (the entries after the first one found are kept)
                risk[ARGS] = ONE
                break
        grows = ZERO
        for s in syms:
            g = growth.pop(s, None)
            if g is not None:  # (the max with an absent 0 would keep `grows`, never negative)
                grows = self.c_max(grows, g)
        self.note_growth(growth)  # tables built from what it captures, whoever applies it
        code = I.ILambda(names, result.ir, span=span)
        if per_row:
            risk = {}
            self._forget_row_origins(first_origin, first_sym)
        if record:  # a primitive applies it here and now, `times` times, one application after another
            top.callee_depth = max(top.callee_depth, depth)
            top.draw_depth = max(top.draw_depth, draw_depth)
            top.calls += calls * times
            if grows != 0:
                self.primitive_growth[-1] = self.c_max(self.primitive_growth[-1], grows)
            if self.primitive_risk:
                self.primitive_risk[-1] = r_union(self.primitive_risk[-1], risk)
        return Instantiated(result.type, coefs, flat, code, risk, grows, depth, draw_depth, quad)

    def _forget_row_origins(self, first_origin: int, first_sym: int) -> None:
        """A row function may be infinitely sensitive in its row: an origin of infinity in symbols
        made inside it alone explains no error of the entry point, and would misplace its caret."""
        if len(self.inf_origins) <= first_origin:  # it noted none
            return

        def local(sym: str) -> bool:
            number = sym.rpartition("#")[2]
            return number.isdigit() and int(number) > first_sym
        self.inf_origins[first_origin:] = [o for o in self.inf_origins[first_origin:]
                                           if not all(local(s) for s in o[2])]

    # ---- names -------------------------------------------------------------------------------

    def _note_binding(self, span: Span, name: str, v: Val) -> None:
        """Tool hook: when a tool (the language server's hover) has set `Checker.on_bind`, tell
        it each local binding's span, name and value.  Checking never depends on it."""
        hook = Checker.on_bind
        if hook is not None:
            hook(self, span, name, v)

    def _note_call(self, span: Span, name: str, summary: Any, dist: Any) -> None:
        """Tool hook: when a tool (the language server's hover) has set `Checker.on_call`, tell
        it each call of a top-level function: the call's span, the function's name, the checked
        instance (its summary) and the call's distance in the caller's symbols.  Checking never
        depends on it."""
        hook = Checker.on_call
        if hook is not None:
            hook(self, span, name, summary, dist)

    def _note_primitive(self, span: Span, name: str, result: Any) -> None:
        """Tool hook: when a tool (the language server's hover) has set `Checker.on_primitive`, tell
        it each call of a primitive whose rule explains its result's distance (`info["explained"]`:
        a join, a truncation), with that result.  Checking never depends on it."""
        hook = Checker.on_primitive
        if hook is not None:
            hook(self, span, name, result)

    def describe(self, sym: str) -> str:
        return self.symbol_names.get(sym, sym)

    # rule Var: a variable has the distance its scope gives it, and evaluates nothing
    def var(self, e: A.Var, env: Env) -> Val:
        v = env.lookup(e.name)
        if v is not None:
            if len(v.dist) == 1:
                sym = next(iter(v.dist))
                sites = self.uses.get(sym)
                if sites is None:
                    self.uses[sym] = [e.span]
                else:
                    sites.append(e.span)
            return Val(v.type, v.dist, I.IVar(e.name, span=e.span) if not isinstance(v.ir, I.IConst) else v.ir,
                       v.const, v.fn, v.parts, fns=v.fns)
        if e.name in self.functions:
            decl = self.functions[e.name]
            return Val(FnT(e.name), {}, I.IClosure(span=e.span), NOCONST, TopFn(decl))
        if lookup(e.name) is not None:
            prim = lookup(e.name)
            raise self.fail("E0210", f"primitive {e.name} must be applied to all {prim.arity} of its "
                            f"arguments ({' '.join(prim.params)})", e.span,
                            f"to pass it as a function, wrap it: fun x -> {e.name} x")
        raise self.unknown_name(e.name, e.span, env)

    x_Var = var  # `expr` dispatches a variable here directly, not through ExpressionRules.x_Var's call

    def unknown_name(self, name: str, span: Span, env: Env) -> FuzzError:
        from ..primitives.registry import OPERATORS, all_primitives
        # Operators' primitive names (ge for >=) are not written as names: never suggested.
        candidates = env.names() | set(self.functions) | (set(all_primitives()) - set(OPERATORS.values()))
        fields = _row_fields(env)  # `age` inside `fun r -> ...` meant r.age
        close = [fields[f] for f in difflib.get_close_matches(name, sorted(fields), n=2, cutoff=0.6)]
        close += difflib.get_close_matches(name, sorted(candidates), n=3 - len(close), cutoff=0.6)
        notes = [f"did you mean {' or '.join(close)}?"] if close else []
        return self.fail("E0201", f"unknown name '{name}'", span, *notes)


def _row_fields(env: Env) -> dict[str, str]:
    """Field name -> `var.field` for the record-typed variables in scope (innermost first)."""
    out: dict[str, str] = {}
    for var in sorted(env.names()):
        v = env.lookup(var)
        if v is not None and isinstance(v.type, Record):
            for f, _ in v.type.fields:
                out.setdefault(f, f"{var}.{f}")
    return out
