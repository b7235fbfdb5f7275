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
parameters are instantiated before solving, as DESIGN.md asks for non-linear bounds).  A
recursive call with the same instance key gets unknown sensitivities, solved by the LP in
`solving/lp.py` once the outermost recursive instance is complete.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError, Span
from ..primitives.registry import NOCONST, OPERATORS, Arg, Instantiated, Result, lookup
from ..solving.lp import Unsolvable, solve_least
from ..syntax import ast as A
from . import ir as I
from .sens import (INF, ONE, ZERO, Coef, ConstraintStore, Dist, NonLinear, d_add, d_inf, d_scale,
                   d_substitute, fmt_coef, is_const, substitute)
from .types import (BOOL, STRING, UNIT, Bag, Bool, Cat, Fun, Fuzzy, Hole, ListT, Num, Parts, Record, Seq, Str,
                    SumT, Tensor, TVar, Type, Unit, With, is_subtype, join_types)
from .typeexpr import TypeResolver, match_type, subst_tvars
from .values import Closure, Env, FnT, FnValue, Opaque, Partial, TopFn, Val, fn_params

MAX_INSTANCE_DEPTH = 2000
# Past this many nested instances of one function, numeric constant arguments are forgotten, so a
# counter that changes at each call (i + 1) stops producing new instances and the recursion is
# solved as a fixpoint.  Public lists stay constant: recursion over them is structural and ends.
WIDEN_AFTER = 256


@dataclass
class MechanismRecord:
    name: str
    span: Span
    sensitivity: Fraction
    epsilon: Fraction
    scale: Fraction
    function: str
    extra: dict = field(default_factory=dict)


@dataclass
class Summary:
    """A checked function instance, as its callers see it."""

    cod: Type
    coefs: list[Coef]
    captured: Dist
    instance: Optional[I.Instance] = None  # top-level functions
    params: list[str] = field(default_factory=list)
    body: Optional[I.IR] = None            # closures: code checked at this site
    param_types: list[Type] = field(default_factory=list)


@dataclass
class _Active:
    summary: Summary
    recursive: bool = False


class Checker:
    def __init__(self, functions: dict[str, A.FunDecl], resolver: TypeResolver, globals_: dict[str, Val]):
        self.functions = functions
        self.types = resolver
        self.globals = Env(dict(globals_))
        self.store = ConstraintStore()
        self.splits: list[tuple[list[str], Dist]] = []
        self.split_of: dict[str, int] = {}  # part symbol -> index of its split
        self.integral_syms: set[str] = set()  # symbols whose distances are whole numbers
        self.symbol_names: dict[str, str] = {}
        self.uses: dict[str, list[Span]] = {}
        self.mechanisms: list[MechanismRecord] = []
        self.instances: dict[Any, Summary] = {}
        self.active: dict[Any, _Active] = {}
        self.pending_checks: list[tuple[Coef, Coef, Span, str]] = []
        self.unsolved: list[Summary] = []  # summaries whose coefficients mention LP unknowns
        self.inf_origins: list[tuple[Span, str]] = []  # where private data first met an unbounded rule
        self.current_function = "<top>"
        self._sym = 0

    # ---- symbols, splits and elimination ----------------------------------------------------

    def fresh_symbol(self, name: str, t: Optional[Type] = None) -> str:
        self._sym += 1
        sym = f"{name}#{self._sym}"
        self.symbol_names[sym] = name
        if t is not None and _integral_type(t):
            self.integral_syms.add(sym)
        return sym

    def integral(self, sym: str) -> bool:
        """Does this symbol only ever move by whole numbers (tables, ints, discrete values)?"""
        return sym in self.integral_syms

    def split(self, parent: Dist, labels: list[str], types: Optional[list[Type]] = None) -> list[Dist]:
        """The distances of the parts of a value: fresh part symbols with sum(parts) <= parent.
        Each part also keeps the parent's infinite entries: a part of something that depends
        infinitely on an input (a branch on it may flip) does so too, and a finite part symbol
        alone would let a branch on the part look free.  `types` are the parts' types (bags by
        default: primitives split tables)."""
        types = types or [Bag(Unit())] * len(labels)
        parts = [self.fresh_symbol(f"part[{label}]", t) for label, t in zip(labels, types)]
        for p in parts:
            self.split_of[p] = len(self.splits)
        self.splits.append((parts, dict(parent)))
        infinite = {s: INF for s, c in parent.items() if c == INF}
        return [{p: ONE, **infinite} for p in parts]

    def scale_apply(self, k: Coef, dist: Dist, span: Optional[Span] = None) -> Dist:
        """k * dist for applying a k-sensitive function (0 * inf = inf; E0304 if non-linear)."""
        return self._scale(k, dist, span, apply=True)

    def eliminate(self, dist: Dist, since: int = 0) -> Dist:
        """Replace split parts by their parent: sum_k c_k d_k <= max_k c_k * d(parent), the exact
        maximum of the linear form over {sum_k d_k <= d(parent)}.  Splits are eliminated newest
        first (a parent only mentions older symbols); only the splits that occur are visited."""
        out = dict(dist)
        pending = {self.split_of[s] for s in out if self.split_of.get(s, -1) >= since}
        while pending:
            j = max(pending)
            pending.discard(j)
            parts, parent = self.splits[j]
            coefs = [out.pop(p) for p in parts if p in out]
            if not coefs:
                continue
            pending |= {self.split_of[s] for s in parent if self.split_of.get(s, -1) >= since}
            m: Coef = coefs[0]
            for c in coefs[1:]:
                m = self.store.c_max(m, c)
            out = d_add(out, self._scale(m, parent, None))
        return out

    def _scale(self, k: Coef, d: Dist, span: Optional[Span], apply: bool = False) -> Dist:
        try:
            return apply_scale(k, d) if apply else d_scale(k, d)
        except NonLinear:
            raise self.fail("E0304", "cannot infer this sensitivity: it is a product of two unknown "
                            "sensitivities", span, "annotate the recursive function's parameters, e.g. (x :[2] num)")

    # ---- the RuleContext used by primitives ---------------------------------------------------

    def fail(self, code: str, message: str, span: Optional[Span], *notes: str) -> FuzzError:
        return FuzzError(Diagnostic(code, message, span, list(notes)))

    def c_max(self, a: Coef, b: Coef) -> Coef:
        return self.store.c_max(a, b)

    def d_max(self, a: Dist, b: Dist) -> Dist:
        return self.store.d_max(a, b)

    def sensitivity(self, dist: Dist, span: Span) -> Fraction:
        """The proven sensitivity of a mechanism's argument: the largest distance it can move
        when any one input moves by one, after eliminating split parts."""
        flat = self.eliminate(dist)
        finite = {s: c for s, c in flat.items() if c != INF}
        if flat and not finite:
            sym = next(iter(flat))
            raise self.fail("E0305", f"the argument of this mechanism has unbounded sensitivity in "
                            f"{self.describe(sym)}", span, *self._why_infinite())
        best = ZERO
        # Inputs it depends on infinitely are charged infinity by the cost (eps/S) * distance,
        # so they must be public at every use; the noise is calibrated on the others.
        for sym, c in finite.items():
            if not is_const(c):
                raise self.fail("E0304", "the sensitivity of this mechanism's argument depends on the "
                                "sensitivity of a recursive function that is not solved yet", span,
                                "annotate the recursive function's parameters with their sensitivity")
            best = max(best, Fraction(c))
        return best

    def _why_infinite(self) -> list[str]:
        return ["a value is infinitely sensitive when it branches on private data, compares private "
                "numbers, multiplies or divides by something unbounded, or sums unbounded values"]

    def record_mechanism(self, name, span, sensitivity, epsilon, scale, cost, extra=None) -> None:
        self.mechanisms.append(MechanismRecord(name, span, sensitivity, epsilon, scale,
                                               self.current_function, dict(extra or {})))

    def instantiate(self, arg: Arg, param_types: list[Type], span: Span) -> Instantiated:
        """Check a function argument at the given parameter types (for higher-order primitives)."""
        fn = arg.fn
        if fn is None:
            raise self.fail("E0203", f"expected a function here, but this is {arg.type}", arg.span)
        names = [f"_a{self._sym}_{i}" for i in range(len(param_types))]
        holders = []
        for name, t in zip(names, param_types):
            sym = self.fresh_symbol(name, t)
            holders.append(Val(t, {sym: ONE}, I.IVar(name, span=span)))
        since = len(self.splits)
        fval = Val(arg.type, arg.dist, arg.ir, arg.const, fn)
        result = self.apply(fval, holders, span)
        flat = self.eliminate(result.dist, since)
        coefs = [flat.pop(next(iter(h.dist)), ZERO) for h in holders]
        code = I.ILambda(names, result.ir, span=span)
        return Instantiated(result.type, coefs, flat, code)

    # ---- names -------------------------------------------------------------------------------

    def _note_binding(self, span: Span, name: str, v: Val) -> None:
        """Tool hook: when a tool (the language server's hover) has set `Checker.on_bind`, tell
        it each local binding's span, name and value.  Checking never depends on it."""
        hook = getattr(Checker, "on_bind", None)
        if hook is not None:
            hook(self, span, name, v)

    def describe(self, sym: str) -> str:
        return self.symbol_names.get(sym, sym)

    def var(self, e: A.Var, env: Env) -> Val:
        v = env.lookup(e.name)
        if v is not None:
            if len(v.dist) == 1:
                sym = next(iter(v.dist))
                self.uses.setdefault(sym, []).append(e.span)
            return Val(v.type, v.dist, I.IVar(e.name, span=e.span) if not isinstance(v.ir, I.IConst) else v.ir,
                       v.const, v.fn, v.parts)
        if e.name in self.functions:
            decl = self.functions[e.name]
            return Val(FnT(e.name), {}, I.IClosure(span=e.span), NOCONST, TopFn(decl))
        if lookup(e.name) is not None:
            prim = lookup(e.name)
            raise self.fail("E0210", f"primitive {e.name} must be applied to all {prim.arity} of its "
                            f"arguments ({' '.join(prim.params)})", e.span,
                            f"to pass it as a function, wrap it: fun x -> {e.name} x")
        raise self.unknown_name(e.name, e.span, env)

    def unknown_name(self, name: str, span: Span, env: Env) -> FuzzError:
        from ..primitives.registry import all_primitives
        candidates = env.names() | set(self.functions) | set(all_primitives())
        close = difflib.get_close_matches(name, sorted(candidates), n=3, cutoff=0.6)
        notes = [f"did you mean {' or '.join(close)}?"] if close else []
        return self.fail("E0201", f"unknown name '{name}'", span, *notes)

    # ---- expressions -------------------------------------------------------------------------

    def expr(self, e: A.Expr, env: Env) -> Val:
        method = getattr(self, "x_" + type(e).__name__)
        return method(e, env)

    def x_Lit(self, e: A.Lit, env: Env) -> Val:
        v = e.value
        if isinstance(v, bool):
            return Val(BOOL, {}, I.IConst(v, span=e.span), v)
        if isinstance(v, Fraction):
            return Val(Num(v, v, e.integer), {}, I.IConst(v, span=e.span), v)
        if isinstance(v, str):
            return Val(STRING, {}, I.IConst(v, span=e.span), v)
        return Val(UNIT, {}, I.IConst(None, span=e.span), None)

    def x_Var(self, e: A.Var, env: Env) -> Val:
        return self.var(e, env)

    def x_Ascribe(self, e: A.Ascribe, env: Env) -> Val:
        v = self.expr(e.value, env)
        t = self.types.resolve(e.type)
        if isinstance(v.type, FnT) and isinstance(t, Fun):
            return self.to_opaque(v, t, e.span)
        if not is_subtype(v.type, t):
            raise self.fail("E0202", f"this has type {v.type}, which does not fit the annotation {t}", e.span)
        return Val(t, v.dist, v.ir, v.const, v.fn, v.parts)

    def x_Let(self, e: A.Let, env: Env) -> Val:
        bound = self.expr(e.bound, env)
        bindings, pat = self.bind_pattern(e.pattern, bound)
        body = self.expr(e.body, env.extend(bindings))
        return Val(body.type, body.dist, I.ILet(pat, bound.ir, body.ir, span=e.span), body.const, body.fn, body.parts)

    def x_Sample(self, e: A.Sample, env: Env) -> Val:
        bound = self.expr(e.bound, env)
        if not isinstance(bound.type, Fuzzy):
            raise self.fail("E0202", f"sample expects a distribution (fuzzy T), but this is {bound.type}",
                            e.bound.span, "use let for values that are not distributions")
        released = Val(bound.type.inner, {}, I.IVar("_", span=e.span))
        bindings, pat = self.bind_pattern(e.pattern, released)
        body = self.expr(e.body, env.extend(bindings))
        if not isinstance(body.type, Fuzzy):
            raise self.fail("E0202", f"the rest of a sample block must be a distribution (end it with "
                            f"return ...), but it is {body.type}", e.body.span)
        return Val(body.type, d_add(bound.dist, body.dist), I.ISample(pat, bound.ir, body.ir, span=e.span))

    def note_infinite(self, span: Span, dist: Dist, reason: str) -> None:
        if dist and len(self.inf_origins) < 20:
            self.inf_origins.append((span, reason))

    def x_Return(self, e: A.Return, env: Env) -> Val:
        v = self.expr(e.value, env)
        self.note_infinite(e.span, v.dist, "a private value is returned without noise")
        # Point masses at different values are infinitely far apart in max-divergence.
        return Val(Fuzzy(v.type), d_inf(v.dist), I.IReturn(v.ir, span=e.span))

    def x_If(self, e: A.If, env: Env) -> Val:
        cond = self.expr(e.cond, env)
        if not isinstance(cond.type, Bool):
            raise self.fail("E0202", f"the condition of if must be a bool, but it is {cond.type}", e.cond.span)
        if cond.is_const:  # public constant: only the branch taken is checked and run
            return self.expr(e.then if cond.const else e.other, env)
        then, other = self.branch(e.then, env), self.branch(e.other, env)
        self.note_infinite(e.cond.span, _branch_choice(cond.dist), "this condition depends on private data, so it "
                           "reveals it through the branch taken")
        t = self.join(then, other, e.span)
        dist = d_add(_branch_choice(cond.dist), self.d_max(then.dist, other.dist))
        return Val(t, dist, I.IIf(cond.ir, then.ir, other.ir, span=e.span), fn=self._join_fn(then, other))

    def branch(self, e: A.Expr, env: Env, since: Optional[int] = None) -> Val:
        """Check one branch, with the parts it split eliminated: the max of two branches must
        compare distances over common symbols (a part and its whole are related only through
        their split constraint)."""
        since = len(self.splits) if since is None else since
        v = self.expr(e, env)
        return Val(v.type, self.eliminate(v.dist, since), v.ir, v.const, v.fn, None)

    def join(self, a: Val, b: Val, span: Span) -> Type:
        if isinstance(a.type, FnT) or isinstance(b.type, FnT):
            raise self.fail("E0202", "branches that return functions need a function type annotation",
                            span, "write (e : num -o[2] num) around the branches")
        t = join_types(a.type, b.type)
        if t is None:
            raise self.fail("E0202", f"the branches have different types: {a.type} and {b.type}", span)
        return t

    def _join_fn(self, a: Val, b: Val):
        if isinstance(a.fn, Opaque) and isinstance(b.fn, Opaque):
            return Opaque(join_types(a.fn.type, b.fn.type))  # type: ignore[arg-type]
        return None

    def x_Lambda(self, e: A.Lambda, env: Env) -> Val:
        clo = Closure(e.params, e.body, env, f"at line {e.span.line}")
        captured = self._captured_estimate(e, env)
        return Val(FnT(f"(lambda at line {e.span.line})"), captured, I.IClosure(span=e.span), NOCONST, clo)

    def _captured_estimate(self, e: A.Lambda, env: Env) -> Dist:
        """A closure stored as data: anything private it captures counts as infinitely used
        (applications are checked precisely instead, at each application site)."""
        free = _free_vars(e.body, {p.name for p in e.params})
        total: Dist = {}
        for name in free:
            v = env.lookup(name)
            if v is not None:
                total = d_add(total, v.dist)
        return d_inf(total)

    def x_Case(self, e: A.Case, env: Env) -> Val:
        scrut = self.expr(e.scrutinee, env)
        kinds = sorted(arm.kind for arm in e.arms)
        if kinds == ["inl", "inr"] and isinstance(scrut.type, SumT):
            return self._case_sum(e, scrut, env)
        if kinds == ["cons", "nil"] and isinstance(scrut.type, ListT):
            return self._case_list(e, scrut, env)
        raise self.fail("E0202", f"case arms do not match the scrutinee type {scrut.type}", e.span,
                        "a sum needs arms inl x => ... | inr y => ...; a list needs [] => ... | h :: t => ...")

    def _case_sum(self, e: A.Case, scrut: Val, env: Env) -> Val:
        arms = {arm.kind: arm for arm in e.arms}
        t: SumT = scrut.type  # type: ignore[assignment]
        if scrut.is_const:
            side, value = scrut.const
            arm = arms[side]
            inner = Val(t.left if side == "inl" else t.right, {}, I.IConst(value), value)
            bindings, pat = self.bind_pattern(arm.patterns[0], inner)
            body = self.expr(arm.body, env.extend(bindings))
            return Val(body.type, body.dist, I.ILet(pat, I.IConst(value), body.ir, span=e.span), body.const,
                       body.fn)
        results = []
        for side, inner_t in (("inl", t.left), ("inr", t.right)):
            inner = Val(inner_t, scrut.dist, I.IVar("_"))
            bindings, pat = self.bind_pattern(arms[side].patterns[0], inner)
            results.append((pat, self.branch(arms[side].body, env.extend(bindings))))
        (lp, lv), (rp, rv) = results
        rtype = self.join(lv, rv, e.span)
        dist = d_add(_branch_choice(scrut.dist), self.d_max(lv.dist, rv.dist))
        return Val(rtype, dist, I.ICase(scrut.ir, "sum", (lp, lv.ir), (rp, rv.ir), span=e.span))

    def _case_list(self, e: A.Case, scrut: Val, env: Env) -> Val:
        arms = {arm.kind: arm for arm in e.arms}
        elem = scrut.type.elem  # type: ignore[attr-defined]
        cons = arms["cons"]
        if scrut.is_const:
            items = scrut.const
            if not items:
                return self.expr(arms["nil"].body, env)
            head = self.const_val(items[0], elem)
            tail = self.const_val(tuple(items[1:]), scrut.type)
            hb, hp = self.bind_pattern(cons.patterns[0], head)
            tb, tp = self.bind_pattern(cons.patterns[1], tail)
            body = self.expr(cons.body, env.extend({**hb, **tb}))
            return Val(body.type, body.dist, body.ir, body.const, body.fn, body.parts)
        nil = self.branch(arms["nil"].body, env)
        # Head and tail are the two components of a tensor: d(h) + d(t) <= d(list).
        since = len(self.splits)
        hd, td = self.split(scrut.dist, ["head", "tail"], [elem, scrut.type])
        hb, hp = self.bind_pattern(cons.patterns[0], Val(elem, hd, I.IVar("_")))
        tb, tp = self.bind_pattern(cons.patterns[1], Val(scrut.type, td, I.IVar("_")))
        consv = self.branch(cons.body, env.extend({**hb, **tb}), since)
        rtype = self.join(nil, consv, e.span)
        dist = d_add(_branch_choice(scrut.dist), self.d_max(nil.dist, consv.dist))
        return Val(rtype, dist, I.ICase(scrut.ir, "list", (None, nil.ir), ((hp, tp), consv.ir), span=e.span))

    def const_val(self, value: Any, t: Type) -> Val:
        return Val(t, {}, I.IConst(value), value)

    def x_BinOp(self, e: A.BinOp, env: Env) -> Val:
        return self.call_primitive(OPERATORS[e.op], [e.left, e.right], env, e.span)

    def x_UnOp(self, e: A.UnOp, env: Env) -> Val:
        return self.call_primitive("not" if e.op == "!" else "neg", [e.operand], env, e.span)

    def x_Inject(self, e: A.Inject, env: Env) -> Val:
        v = self.expr(e.value, env)
        # The other side is unconstrained; `unit` is a placeholder that joins with anything via annotations.
        t = SumT(v.type, Hole()) if e.side == "inl" else SumT(Hole(), v.type)
        const = (e.side, v.const) if v.is_const else NOCONST
        return Val(t, v.dist, I.IInject(e.side, v.ir, span=e.span), const)

    def x_Field(self, e: A.Field, env: Env) -> Val:
        v = self.expr(e.value, env)
        if isinstance(v.type, Record):
            ft = v.type.field_type(e.name)
            if ft is None:
                names = [n for n, _ in v.type.fields]
                close = difflib.get_close_matches(e.name, names, n=1)
                notes = [f"did you mean {close[0]}?"] if close else [f"the fields are: {', '.join(names)}"]
                raise self.fail("E0205", f"{v.type} has no field '{e.name}'", e.name_span or e.span, *notes)
            const = dict(v.const)[e.name] if v.is_const else NOCONST
            idx = [n for n, _ in v.type.fields].index(e.name)
            dist = v.parts[idx] if v.parts is not None else v.dist
            return Val(ft, dist, I.IField(v.ir, e.name, span=e.span), const)
        if isinstance(v.type, Parts):
            return self.call_primitive_vals("part", [v, self.const_val(e.name, STRING)], e.span)
        raise self.fail("E0205", f"field access .{e.name} needs a record, but this is {v.type}", e.span)

    def x_Proj(self, e: A.Proj, env: Env) -> Val:
        v = self.expr(e.value, env)
        if not isinstance(v.type, (Tensor, With)) or not 1 <= e.index <= len(v.type.items):
            raise self.fail("E0202", f"projection .{e.index} needs a tuple with at least {e.index} "
                            f"components, but this is {v.type}", e.span)
        i = e.index - 1
        const = v.const[i] if v.is_const else NOCONST
        dist = v.parts[i] if v.parts is not None else v.dist  # a component moves at most as the whole
        return Val(v.type.items[i], dist, I.IProj(v.ir, i, span=e.span), const, None)

    def x_Tuple(self, e: A.Tuple, env: Env) -> Val:
        vals = [self.expr(x, env) for x in e.items]
        kind = e.kind
        t = (Tensor if kind == "tensor" else With)(tuple(v.type for v in vals))
        parts = [v.dist for v in vals]
        if kind == "tensor":
            dist = d_add(*parts)
        else:
            dist = parts[0]
            for p in parts[1:]:
                dist = self.d_max(dist, p)
        const = tuple(v.const for v in vals) if all(v.is_const for v in vals) else NOCONST
        return Val(t, dist, I.ITuple(kind, [v.ir for v in vals], span=e.span), const, None, parts)

    def x_RecordLit(self, e: A.RecordLit, env: Env) -> Val:
        names = [n for n, _ in e.fields]
        if len(set(names)) != len(names):
            raise self.fail("E0206", "a field appears twice in this record", e.span)
        vals = [self.expr(x, env) for _, x in e.fields]
        t = Record(tuple((n, v.type) for n, v in zip(names, vals)))
        const = tuple((n, v.const) for n, v in zip(names, vals)) if all(v.is_const for v in vals) else NOCONST
        parts = [v.dist for v in vals]
        return Val(t, d_add(*parts), I.IRecord([(n, v.ir) for n, v in zip(names, vals)], span=e.span), const,
                   None, parts)

    def x_ListLit(self, e: A.ListLit, env: Env) -> Val:
        vals = [self.expr(x, env) for x in e.items]
        elem: Optional[Type] = None
        for v in vals:
            elem = v.type if elem is None else join_types(elem, v.type)
            if elem is None:
                raise self.fail("E0202", "list elements have different types", v.ir.span or e.span)
        t = ListT(elem if elem is not None else Hole())
        const = tuple(v.const for v in vals) if all(v.is_const for v in vals) else NOCONST
        return Val(t, d_add(*[v.dist for v in vals]), I.IList([v.ir for v in vals], span=e.span), const)

    def x_Cons(self, e: A.Cons, env: Env) -> Val:
        h, tl = self.expr(e.head, env), self.expr(e.tail, env)
        if not isinstance(tl.type, ListT):
            raise self.fail("E0202", f":: needs a list on its right, but this is {tl.type}", e.tail.span)
        elem = h.type if isinstance(tl.type.elem, Hole) else join_types(h.type, tl.type.elem)
        if elem is None:
            raise self.fail("E0202", f"cannot put {h.type} into a list of {tl.type.elem}", e.head.span)
        const = (h.const,) + tuple(tl.const) if h.is_const and tl.is_const else NOCONST
        return Val(ListT(elem), d_add(h.dist, tl.dist), I.ICons(h.ir, tl.ir, span=e.span), const)

    # ---- patterns ------------------------------------------------------------------------------

    def bind_pattern(self, p: A.Pattern, v: Val) -> tuple[dict[str, Val], Any]:
        if isinstance(p, A.PVar):
            self._note_binding(p.span, p.name, v)
            return {p.name: v}, p.name
        if isinstance(p, A.PWild):
            return {}, None
        assert isinstance(p, A.PProduct)
        want = Tensor if p.kind == "tensor" else With
        if not isinstance(v.type, want) or len(v.type.items) != len(p.items):
            raise self.fail("E0202", f"this pattern has {len(p.items)} components but the value is {v.type}",
                            p.span)
        dists = self._component_dists(p.kind, v)
        bindings: dict[str, Val] = {}
        pats = []
        for i, (sub, t, d) in enumerate(zip(p.items, v.type.items, dists)):
            const = v.const[i] if v.is_const else NOCONST
            ir = I.IConst(const) if const is not NOCONST else I.IVar("_")  # constants are inlined
            b, sp = self.bind_pattern(sub, Val(t, d, ir, const))
            bindings.update(b)
            pats.append(sp)
        return bindings, (p.kind, pats)

    def _component_dists(self, kind: str, v: Val) -> list[Dist]:
        n = len(v.type.items)  # type: ignore[attr-defined]
        if v.parts is not None:
            return v.parts
        if kind == "with" or not v.dist:
            return [v.dist] * n  # each component of a with-pair moves at most as the whole
        # Tensor destructuring (Fuzz's rule): components share the whole's distance.
        labels = [f"component {i + 1}" for i in range(n)]
        return self.split(v.dist, labels, list(v.type.items))  # type: ignore[attr-defined]

    # ---- application ---------------------------------------------------------------------------

    def x_Apply(self, e: A.Apply, env: Env) -> Val:
        head, args = _spine(e)
        if isinstance(head, A.Var) and env.lookup(head.name) is None and head.name not in self.functions:
            prim = lookup(head.name)
            if prim is not None:
                if len(args) < prim.arity:
                    raise self.fail("E0210", f"primitive {head.name} needs {prim.arity} arguments "
                                    f"({' '.join(prim.params)}), but has {len(args)}", e.span)
                result = self.call_primitive(head.name, args[:prim.arity], env, _cover(head, args[:prim.arity]))
                rest = [self.expr(a, env) for a in args[prim.arity:]]
                return self.apply(result, rest, e.span) if rest else result
        fval = self.expr(head, env)
        return self.apply(fval, [self.expr(a, env) for a in args], e.span)

    def call_primitive(self, name: str, arg_exprs: list[A.Expr], env: Env, span: Span) -> Val:
        return self.call_primitive_vals(name, [self.expr(a, env) for a in arg_exprs], span)

    def call_primitive_vals(self, name: str, vals: list[Val], span: Span) -> Val:
        prim = lookup(name)
        assert prim is not None
        args = [Arg(v.type, v.dist, v.const, v.ir.span or span, v.ir, v.fn, v.parts) for v in vals]
        res: Result = prim.rule(self, args, span)
        ir_args = res.ir_args if res.ir_args is not None else [v.ir for v in vals]
        node = I.IPrim(name, ir_args, dict(res.info), span=span)
        if res.const is not NOCONST:
            node = I.IConst(res.const, span=span)
        return Val(res.type, res.dist, node, res.const, None, res.parts)

    def apply(self, f: Val, args: list[Val], span: Span) -> Val:
        while args:
            fn = f.fn
            if fn is None:
                raise self.fail("E0203", f"this is not a function (it is {f.type}), but it is applied "
                                f"to an argument", span)
            if isinstance(fn, Opaque):
                f, args = self._apply_opaque(f, fn, args[0], span), args[1:]
                continue
            n = fn_params(fn)
            if len(args) < n:
                return Val(FnT("(partial application)"), d_inf(d_add(f.dist, *[a.dist for a in args])),
                           I.IClosure(span=span), NOCONST, Partial(f, list(args), n - len(args)))
            f, args = self._apply_full(f, fn, args[:n], span), args[n:]
        return f

    def _apply_opaque(self, f: Val, fn: Opaque, arg: Val, span: Span) -> Val:
        t = fn.type
        arg = self.coerce(arg, t.dom, span)
        dist = d_add(self._scale(t.sens, arg.dist, span, apply=True), f.dist)
        fn_out = Opaque(t.cod) if isinstance(t.cod, Fun) else None  # a curried function type
        return Val(t.cod, dist, I.IApply(f.ir, [arg.ir], span=span), NOCONST, fn_out)

    def _apply_full(self, f: Val, fn: FnValue, args: list[Val], span: Span) -> Val:
        if isinstance(fn, Partial):
            names = [f"_p{self._sym}_{i}" for i in range(len(args))]
            self._sym += 1
            inner = self.apply(fn.fn, list(fn.given) + args, span)
            body = _rename_args(inner.ir, args, names)
            return Val(inner.type, inner.dist, I.IApply(f.ir, [a.ir for a in args], names, body, span=span),
                       inner.const, inner.fn, inner.parts)
        summary, args = self.summary(fn, args, span)
        dist = dict(summary.captured)
        for coef, a, t in zip(summary.coefs, args, summary.param_types):
            if isinstance(t, FnT):
                # A function value checked inside this instance (not through a symbol): each of
                # its applications, and any use of it as data, is already in the body's distance.
                continue
            dist = d_add(dist, self._scale(coef, a.dist, span, apply=True))
        if summary.instance is not None:
            node: I.IR = I.ICall(summary.instance, [a.ir for a in args], span=span)
        else:
            node = I.IApply(f.ir, [a.ir for a in args], summary.params, summary.body, span=span)
        return Val(summary.cod, dist, node, NOCONST, Opaque(summary.cod) if isinstance(summary.cod, Fun) else None)

    def coerce(self, v: Val, t: Type, span: Span) -> Val:
        """Check that v can be passed where t is expected (giving function values a Fun type)."""
        if isinstance(v.type, FnT) and isinstance(t, Fun):
            return self.to_opaque(v, t, span)
        if not is_subtype(v.type, t):
            raise self.fail("E0202", f"expected {t}, but this argument is {v.type}", v.ir.span or span)
        return v

    def to_opaque(self, v: Val, t: Fun, span: Span) -> Val:
        """Give a function value the declared type t; a function of n parameters can stand for a
        curried type A1 -o[s1] ... An -o[sn] B (checked at all n domains at once)."""
        doms, senses, cod = [t.dom], [t.sens], t.cod
        n = fn_params(v.fn) if v.fn is not None else 1
        while len(doms) < n and isinstance(cod, Fun):
            doms.append(cod.dom)
            senses.append(cod.sens)
            cod = cod.cod
        arg = Arg(v.type, v.dist, v.const, span, v.ir, v.fn)
        inst = self.instantiate(arg, doms, span)
        for coef, sens in zip(inst.param_coefs, senses):
            if is_const(coef) and coef > sens:
                raise self.fail("E0301", f"this function is {fmt_coef(coef)}-sensitive, but {t} allows "
                                f"{fmt_coef(sens)}", span)
            if not is_const(coef):
                self.store.require(coef, sens, "function argument annotation")
                self.pending_checks.append((coef, sens, span, "the function given here"))
        if not is_subtype(inst.cod, cod):
            raise self.fail("E0202", f"this function returns {inst.cod}, but {t} expects {cod}", span)
        code = inst.code
        if len(code.params) > 1:  # curried: one parameter per function value
            body = code.body
            for name in reversed(code.params[1:]):
                body = I.ILambda([name], body, span=span)
            code = I.ILambda(code.params[:1], body, span=span)
        return Val(t, inst.captured, code, NOCONST, Opaque(t))

    # ---- function instances -------------------------------------------------------------------

    def summary(self, fn: FnValue, args: list[Val], span: Span) -> tuple[Summary, list[Val]]:
        """The checked instance for these arguments, and the arguments as passed (function
        values given to parameters of declared function type carry their code)."""
        params = fn.decl.params if isinstance(fn, TopFn) else fn.params  # type: ignore[union-attr]
        if self._unrolled(fn) >= WIDEN_AFTER:
            args = [_widen(a) for a in args]
        param_types = [self.param_type(p, a, span) for p, a in zip(params, args)]
        args = [self.coerce(a, t, span) if not isinstance(t, FnT) else a for a, t in zip(args, param_types)]
        key = self.instance_key(fn, param_types, args)
        if key in self.instances:
            return self.instances[key], args
        if key in self.active:
            return self.recursive_summary(fn, key, span), args
        if len(self.active) >= MAX_INSTANCE_DEPTH:
            raise self.fail("E0306", f"recursion is more than {MAX_INSTANCE_DEPTH} calls deep at check time",
                            span, "recursion on public constants is unrolled while checking; "
                            "make sure it reaches its base case")
        try:
            return self.check_instance(fn, params, param_types, args, key, span), args
        except FuzzError as exc:
            self._note_call_site(exc, fn, span)
            raise

    def _note_call_site(self, exc: FuzzError, fn: FnValue, span: Span) -> None:
        """Errors inside a function instance also say which use of the function led there."""
        diag = exc.diagnostics[0]
        if diag.span is not None and diag.span.file == span.file and diag.span.line == span.line:
            return
        sites = [n for n in diag.notes if n.startswith("in the use of")]
        if len(sites) < 3:
            name = fn.decl.name if isinstance(fn, TopFn) else "a function"
            diag.notes.append(f"in the use of {name} at {span}")

    def _unrolled(self, fn: FnValue) -> int:
        """How many instances of this function are being checked, one inside the other."""
        if not isinstance(fn, TopFn):
            return 0
        return sum(1 for key in self.active if key[0] == ("top", fn.decl.name))

    def param_type(self, p: A.Param, arg: Val, span: Span) -> Type:
        if p.type is None:
            return arg.type
        declared = self.types.resolve(p.type)
        if _has_tvar(declared):
            if isinstance(arg.type, FnT) or not match_type(declared, arg.type):
                raise self.fail("E0202", f"argument for {p.name} should be {declared}, but it is {arg.type}",
                                arg.ir.span or span)
            return arg.type
        return declared

    def instance_key(self, fn: FnValue, types: list[Type], args: list[Val]):
        # Closures are keyed by the object itself (identity hash), which also keeps it alive:
        # an id() could be reused by a later closure and return a wrong cached instance.
        ident = ("top", fn.decl.name) if isinstance(fn, TopFn) else ("closure", fn)  # type: ignore[union-attr]
        consts = tuple(_hashable(a.const) if a.is_const else None for a in args)
        fns = tuple(_fn_identity(a.fn) for a in args)
        return (ident, tuple(types), consts, fns)

    def recursive_summary(self, fn: FnValue, key, span: Span) -> Summary:
        state = self.active[key]
        if not state.recursive:
            if not isinstance(fn, TopFn) or fn.decl.ret is None:
                name = fn.decl.name if isinstance(fn, TopFn) else "this function"
                raise self.fail("E0212", f"recursive function {name} needs a declared return type", span,
                                "write function f (x : num) : num { ... }")
            state.recursive = True
            decl = fn.decl
            coefs: list[Coef] = []
            for p in decl.params:
                if p.sens is not None:
                    coefs.append(Fraction(p.sens) if p.sens != INF else INF)
                else:
                    coefs.append(self.store.fresh(f"{decl.name}.{p.name}", minimise=True))
            state.summary.coefs = coefs
            state.summary.cod = self._declared_return(decl, state.summary.param_types)
        return state.summary

    def _declared_return(self, decl: A.FunDecl, param_types: list[Type]) -> Type:
        """The declared return type, with type variables bound by this instance's parameters."""
        ret = self.types.resolve(decl.ret)
        if not _has_tvar(ret):
            return ret
        binding: dict = {}
        for p, t in zip(decl.params, param_types):
            if p.type is not None:
                match_type(self.types.resolve(p.type), t, binding)
        ret = subst_tvars(ret, binding)
        if _has_tvar(ret):
            raise self.fail("E0212", f"the return type of {decl.name} has a type variable that its parameters "
                            "do not fix", decl.ret.span)
        return ret

    def check_instance(self, fn, params, param_types, args, key, span) -> Summary:
        label = fn.decl.name if isinstance(fn, TopFn) else fn.label
        names = [p.name for p in params]
        instance = I.Instance(label, names, key=key) if isinstance(fn, TopFn) else None
        summary = Summary(FnT(label), [], {}, instance, names, None, param_types)
        self.active[key] = _Active(summary)
        saved_function, since = self.current_function, len(self.splits)
        self.current_function = label if isinstance(fn, TopFn) else self.current_function
        try:
            body, symbols = self._check_body(fn, params, param_types, args)
            body = self._coerce_return(fn, body, param_types)
        finally:
            self.current_function = saved_function
            state = self.active.pop(key)
        flat = self.eliminate(body.dist, since)
        coefs = [flat.pop(s, ZERO) for s in symbols]
        self._check_annotations(fn, params, coefs, symbols)
        cod = self._check_return(fn, body)
        if state.recursive:
            for c, u in zip(coefs, state.summary.coefs):
                self.store.require(c, u, "recursive call")
            coefs = list(state.summary.coefs)
        summary.cod, summary.coefs, summary.captured = cod, coefs, flat
        if instance is not None:
            instance.body = body.ir
        else:
            summary.body = body.ir
        self.instances[key] = summary
        if any(not is_const(c) for c in summary.coefs) or any(not is_const(c) for c in summary.captured.values()):
            self.unsolved.append(summary)
        if state.recursive and not any(a.recursive for a in self.active.values()):
            self.solve_pending(span)
        return summary

    def _check_body(self, fn, params, param_types, args):
        env = self.globals if isinstance(fn, TopFn) else fn.env
        bindings, symbols = {}, []
        for p, t, a in zip(params, param_types, args):
            sym = self.fresh_symbol(p.name, t)
            symbols.append(sym)
            if a.fn is not None and not isinstance(t, Fun):
                bindings[p.name] = Val(a.type, a.dist, I.IVar(p.name), a.const, a.fn)
            elif isinstance(t, Fun):
                bindings[p.name] = Val(t, {sym: ONE}, I.IVar(p.name), NOCONST, Opaque(t))
            else:
                bindings[p.name] = Val(t, {sym: ONE}, I.IVar(p.name), a.const)
            self._note_binding(p.span, p.name, bindings[p.name])
        body = fn.decl.body if isinstance(fn, TopFn) else fn.body
        return self.expr(body, env.extend(bindings)), symbols

    def _check_annotations(self, fn, params, coefs, symbols) -> None:
        for p, c, sym in zip(params, coefs, symbols):
            if p.sens is None:
                continue
            bound = Fraction(p.sens) if p.sens != INF else INF
            if is_const(c):
                if c > bound:
                    raise self.overflow(p, c, bound, sym)
            else:
                self.store.require(c, bound, "annotation")
                self.pending_checks.append((c, bound, p.span, p.name))

    def overflow(self, p: A.Param, used: Coef, bound: Coef, sym: str) -> FuzzError:
        sites = self.uses.get(sym, [])
        where = ", ".join(f"line {s.line}:{s.col}" for s in sites[:6])
        notes = [f"{p.name} is used {len(sites)} time{'s' if len(sites) != 1 else ''} ({where})"] if sites else []
        notes.append("each use adds its sensitivity; a with-pair (| a, b |) or a branch takes the max instead")
        return self.fail("E0301", f"{p.name} is used with sensitivity {fmt_coef(used)}, but its annotation "
                         f"allows {fmt_coef(bound)}", p.span, *notes)

    def _coerce_return(self, fn, body: Val, param_types: list[Type]) -> Val:
        """A function returned where a function type is declared is checked against it (its
        sensitivity too) and carries its own code, like a function argument."""
        if not isinstance(fn, TopFn) or fn.decl.ret is None or not isinstance(body.type, FnT):
            return body
        declared = self._declared_return(fn.decl, param_types)
        if not isinstance(declared, Fun):
            return body
        return self.to_opaque(body, declared, fn.decl.body.span)

    def _check_return(self, fn, body: Val) -> Type:
        if not isinstance(fn, TopFn) or fn.decl.ret is None:
            return body.type
        declared = self.types.resolve(fn.decl.ret)
        if not is_subtype(body.type, declared) and not _has_tvar(declared):
            raise self.fail("E0202", f"{fn.decl.name} returns {body.type}, but its declared return type is "
                            f"{declared}", fn.decl.body.span)
        return declared if not _has_tvar(declared) else body.type

    def solve_pending(self, span: Span) -> None:
        """Solve the least annotations of finished recursive instances and substitute them."""
        constraints = [(a, b) for a, b, _ in self.store.constraints]
        try:
            values = solve_least(constraints, self.store.unknowns)
        except Unsolvable as exc:
            raise self.fail("E0304", f"could not certify the sensitivity of a recursive function ({exc})", span,
                            "annotate the parameters of recursive functions with their sensitivity")
        for summary in self.unsolved:
            summary.coefs = [substitute(c, values) for c in summary.coefs]
            summary.captured = d_substitute(summary.captured, values)
        self.unsolved = []
        for c, bound, pspan, name in self.pending_checks:
            v = substitute(c, values)
            if v > bound:
                raise self.fail("E0301", f"{name} is used with sensitivity {fmt_coef(v)} by this recursive "
                                f"function, but its annotation allows {fmt_coef(bound)}", pspan)
        self.store = ConstraintStore()
        self.pending_checks = []


def _widen(v: Val) -> Val:
    if v.is_const and isinstance(v.type, Num):
        return Val(Num(None, None, v.type.integer), v.dist, v.ir, NOCONST, v.fn, v.parts)
    return v


def _integral_type(t: Type) -> bool:
    """Values of these types are at whole-number (or infinite) distances from each other."""
    if isinstance(t, Num):
        return t.integer
    if isinstance(t, (Bag, Seq, Parts, Bool, Str, Cat, Unit)):
        return True
    if isinstance(t, (Tensor, With)):
        return all(_integral_type(i) for i in t.items)
    if isinstance(t, Record):
        return all(_integral_type(ft) for _, ft in t.fields)
    if isinstance(t, ListT):
        return _integral_type(t.elem)
    return False


def _branch_choice(scrutinee: Dist) -> Dist:
    """Which branch runs can change only where the scrutinee can move infinitely far: bools,
    sums and lists of different shapes are infinitely apart, so a finite move keeps the branch.
    Anything a private comparison decided is infinite, and so is what it controls."""
    return {s: INF for s, c in scrutinee.items() if c == INF}


def apply_scale(coef: Coef, arg: Dist) -> Dist:
    """coef * distance for a function application, with 0 * inf = inf: a 0-sensitive function
    may still tell apart arguments that are infinitely far apart (a branch on a bool)."""
    if coef == 0:
        return {s: INF for s, c in arg.items() if c == INF}
    return d_scale(coef, arg)


def _spine(e: A.Apply) -> tuple[A.Expr, list[A.Expr]]:
    args = []
    node: A.Expr = e
    while isinstance(node, A.Apply):
        args.append(node.arg)
        node = node.fn
    return node, list(reversed(args))


def _cover(head: A.Expr, args: list[A.Expr]) -> Span:
    first, last = head.span, (args[-1].span if args else head.span)
    return Span(first.file, first.line, first.col, last.end_line, last.end_col)


def _hashable(v: Any):
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def _fn_identity(fn: Optional[FnValue]):
    if fn is None:
        return None
    if isinstance(fn, TopFn):
        return ("top", fn.decl.name)
    if isinstance(fn, Opaque):
        return ("opaque", fn.type)
    return ("id", fn)


def _has_tvar(t: Type) -> bool:
    if isinstance(t, TVar):
        return True
    for value in vars(t).values() if hasattr(t, "__dict__") else []:
        if isinstance(value, Type) and _has_tvar(value):
            return True
        if isinstance(value, tuple):
            for item in value:
                if isinstance(item, Type) and _has_tvar(item):
                    return True
                if isinstance(item, tuple) and any(isinstance(x, Type) and _has_tvar(x) for x in item):
                    return True
    return False


def _free_vars(e: A.Node, bound: set[str]) -> set[str]:
    if isinstance(e, A.Var):
        return set() if e.name in bound else {e.name}
    out: set[str] = set()
    if isinstance(e, (A.Let, A.Sample)):
        return _free_vars(e.bound, bound) | _free_vars(e.body, bound | _pattern_names(e.pattern))
    if isinstance(e, A.Lambda):
        return _free_vars(e.body, bound | {p.name for p in e.params})
    if isinstance(e, A.CaseArm):
        names = set().union(*[_pattern_names(p) for p in e.patterns]) if e.patterns else set()
        return _free_vars(e.body, bound | names)
    for child in A.children(e):
        out |= _free_vars(child, bound)
    return out


def _pattern_names(p: A.Pattern) -> set[str]:
    if isinstance(p, A.PVar):
        return {p.name}
    if isinstance(p, A.PProduct):
        return set().union(*[_pattern_names(x) for x in p.items])
    return set()


def _rename_args(body: I.IR, args: list[Val], names: list[str]) -> I.IR:
    """The IR of a completed partial application refers to its new arguments by name."""
    if isinstance(body, I.ICall):
        n = len(names)
        body.args = body.args[:-n] + [I.IVar(x) for x in names] if n else body.args
    elif isinstance(body, I.IApply):
        n = len(names)
        body.args = body.args[:-n] + [I.IVar(x) for x in names] if n else body.args
    return body

