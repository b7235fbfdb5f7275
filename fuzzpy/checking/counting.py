"""Rule Count (docs/soundness.md): a recursion over a public counter, checked once.

A function whose body is `if n <op> c then BASE else STEP` (or the arms the other way round),
where every call of itself in STEP passes `n - k` (counting down) or every one `n + k`
(counting up) for its counter n (k > 0 public) and the same other arguments, called with a
constant N, runs STEP a number of times D that the checker can compute, then BASE. The bound c
is public, or a parameter every call passes on unchanged; `let`s may precede the `if`. Instead
of unrolling D levels (rule Unroll, one check per level), the body is checked once with n
public but not constant, its recursive call assumed to have the summary U (rule Recursion),
which gives the body's summary as a monotone function F(U); the summary of the call is F
applied D times to the summary of the base level, computed in exact arithmetic. By induction on
the level, F^d(S_base) bounds the level-d call: the body check holds for every public value of
n, and level d calls level d - 1. Anything the rule cannot establish (another shape, a
mechanism that needs the recursion's own sensitivity, a nested recursion) falls back to
unrolling.

Rule Count over a range: a public counter that is not a constant but an integer of a small range
(a released value clipped) is counted for every value of the range; the call's summary is the
pointwise maximum of F^d(S_base) over the levels d those values need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from .. import limits
from ..diagnostics import FuzzError, Span
from ..primitives.registry import NOCONST
from ..syntax import ast as A
from ..typesystem.effects import FAIL, r_union
from ..typesystem.sens import INF, ONE, ZERO, Coef, ConstraintStore, Lin, is_const
from ..typesystem.types import Num
from .helpers import _free_vars, _pattern_names, _spine, _widen
from .values import TopFn, Val

# Levels a counted recursion may have: each costs one step of exact arithmetic on its summary.
MAX_COUNT_LEVELS = 1_000_000
# Counter values rule Count over a range enumerates (each one's levels found; past it, unrolled).
MAX_COUNT_RANGE = 4096
_FLIP = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "==": "==", "!=": "!="}


@dataclass(frozen=True)
class CountShape:
    """The syntactic shape rule Count needs, read off a function declaration."""

    param: int            # index of the counter parameter
    op: str               # the guard is `n op bound`
    bound: A.Expr         # mentions no parameter, or is the parameter `bound_param`
    base_is_then: bool    # the `then` arm is the base (holds no recursive call)
    steps: tuple          # the step expressions k of the recursive calls (no parameter)
    up: bool = False      # the calls pass `n + k` (counting up) rather than `n - k`
    bound_param: Optional[int] = None  # the bound is this parameter, passed on unchanged


# rule Count: the shape `if n op c then BASE else STEP`, read off the declaration
def count_shape(decl: A.FunDecl) -> Optional[CountShape]:
    if decl.ret is None or not _guard_of(_after_lets(decl.body)):
        return None  # no `if n op c` after the lets: no shape, without walking the body
    params = [p.name for p in decl.params]
    body, bound_names = _guarded(decl)
    if not _guard_of(body):
        return None
    cond = body.cond
    sides = [(cond.left, cond.op, cond.right), (cond.right, _FLIP[cond.op], cond.left)]
    for counter, op, bound in sides:  # `i >= n` with both parameters: either may be the counter
        if isinstance(counter, A.Var) and counter.name in params:
            if _free_vars(bound, set()) & bound_names:
                continue  # the bound names a local value, not a parameter or a public constant
            shape = _shape_with_counter(decl, body, params, counter.name, op, bound)
            if shape is not None:
                return shape
    return None


# rule Count: local definitions (a closure, a constant) before the guard
def _guarded(decl: A.FunDecl) -> tuple[A.Expr, set]:
    """The body's `if`, after the `let`s that precede it (they run at every level, base
    included, and the check of the body sees them), and the names those lets bind.  A let whose
    value calls the function itself is not peeled: its call would not be a step of the count."""
    body, names = decl.body, set()
    while isinstance(body, A.Let) and not _mentions(body.bound, decl.name):
        names |= set(_pattern_names(body.pattern))
        body = body.body
    return body, names


# rule Count: the shape with one parameter as the counter (the other side its bound)
def _shape_with_counter(decl: A.FunDecl, body: A.If, params: list, name: str, op: str,
                        bound: A.Expr) -> Optional[CountShape]:
    bound_param = params.index(bound.name) if isinstance(bound, A.Var) and bound.name in params else None
    if bound_param == params.index(name) or _binds(decl.body, name):
        return None
    if bound_param is None and _free_vars(bound, set()) & set(params):
        return None
    in_then, in_other = _mentions(body.then, decl.name), _mentions(body.other, decl.name)
    if in_then == in_other:
        return None
    step_arm = body.then if in_then else body.other
    steps = _recursive_steps(step_arm, decl.name, params.index(name), name, len(params), set(params))
    if not steps or len({sign for sign, _ in steps}) != 1:
        return None  # no call, or calls that count in both directions
    if bound_param is not None and (_binds(decl.body, bound.name)
                                    or not _passed_on(step_arm, decl.name, bound_param, bound.name)):
        return None  # a bound that may change from level to level
    return CountShape(params.index(name), op, bound, not in_then, tuple(k for _, k in steps), steps[0][0] == "+",
                      bound_param)


# Most bodies are not counted recursions: their shape is refused before any walk of the body.
# `_guarded` peels only the lets whose value does not call the function; where it stops early,
# its body is a let, not an `if`, so peeling every let first refuses all that it refuses.
def _after_lets(body: A.Expr) -> A.Expr:
    while isinstance(body, A.Let):
        body = body.body
    return body


def _guard_of(body: A.Expr) -> bool:
    """Is body `if a op b then ... else ...`, op a comparison?"""
    return isinstance(body, A.If) and isinstance(body.cond, A.BinOp) and body.cond.op in _FLIP


def _mentions(e: A.Node, name: str) -> bool:
    todo = [e]  # a stack, not recursion: rule Count asks this of whole bodies
    while todo:
        node = todo.pop()
        if isinstance(node, A.Var) and node.name == name:
            return True
        todo += A.children(node)
    return False


def _binds(e: A.Node, name: str) -> bool:
    """Is `name` bound anywhere inside e (so that some occurrence is not the parameter)?"""
    if isinstance(e, (A.Let, A.Sample)) and name in _pattern_names(e.pattern):
        return True
    if isinstance(e, A.Lambda) and any(p.name == name for p in e.params):
        return True
    if isinstance(e, A.CaseArm) and any(name in _pattern_names(p) for p in e.patterns):
        return True
    return any(_binds(c, name) for c in A.children(e))


def _recursive_steps(e: A.Node, fname: str, index: int, counter: str, arity: int, params: set) -> list:
    """The step (`-` or `+`, k) of every call of fname in e, or [] if some occurrence of fname is
    not a full call whose counter argument is `counter - k` or `counter + k` with k free of
    parameters."""
    out: list = []
    ok = [True]

    def walk(node: A.Node) -> None:
        if isinstance(node, A.Apply):
            head, args = _spine(node)
            if isinstance(head, A.Var) and head.name == fname:
                arg = args[index] if len(args) == arity else None
                if (isinstance(arg, A.BinOp) and arg.op in ("-", "+") and isinstance(arg.left, A.Var)
                        and arg.left.name == counter and not (_free_vars(arg.right, set()) & params)):
                    out.append((arg.op, arg.right))
                    for a in args:
                        walk(a)
                    return
                ok[0] = False
                return
        if isinstance(node, A.Var) and node.name == fname:
            ok[0] = False  # used as a value, or partially applied
            return
        for c in A.children(node):
            walk(c)

    walk(e)
    return out if ok[0] else []


# rule Count: a bound parameter must be the same constant at every level
def _passed_on(e: A.Node, fname: str, index: int, name: str) -> bool:
    """Does every call of fname in e pass the parameter `name` itself as its argument `index`?
    (`_recursive_steps` has checked that every occurrence of fname is a full call.)"""
    if isinstance(e, A.Apply):
        head, args = _spine(e)
        if isinstance(head, A.Var) and head.name == fname:
            arg = args[index]
            if not (isinstance(arg, A.Var) and arg.name == name):
                return False
            return all(_passed_on(a, fname, index, name) for a in args)
    return all(_passed_on(c, fname, index, name) for c in A.children(e))


def _holds(op: str, n: Fraction, bound: Fraction) -> bool:
    return {"<=": n <= bound, "<": n < bound, ">=": n >= bound, ">": n > bound,
            "==": n == bound, "!=": n != bound}[op]


def levels(shape: CountShape, n: Fraction, bound: Fraction, k: Fraction) -> Optional[int]:
    """How many times the step arm runs from counter n, moving by -k at each level (k > 0 counts
    down, k < 0 up; None: never stops, or more than MAX_COUNT_LEVELS)."""
    def step(x: Fraction) -> bool:
        return not _holds(shape.op, x, bound) if shape.base_is_then else _holds(shape.op, x, bound)

    if not step(n):
        return 0
    lo, hi = 0, 1  # step(n - lo k) holds; find the first t with step(n - t k) false
    while step(n - hi * k):
        lo, hi = hi, hi * 2
        if hi > MAX_COUNT_LEVELS:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if step(n - mid * k) else (lo, mid)
    # The steps before t must all hold (monotone guards hold from n down; == and != may not).
    return hi if all(step(n - t * k) for t in _samples(hi)) else None


def _samples(t: int) -> range | list:
    return range(t) if t <= 64 else sorted({0, 1, t // 2, t - 2, t - 1})


class CountRules:
    """Rule Count (a mixin of `Checker`; see the module docstring)."""

    def counted(self, fn: TopFn, args: list[Val], key, span: Span):
        """Rule Count: the summary of a counted recursion called with a constant counter, or
        with a public counter whose type is a small integer range (rule Count over a range), or
        None when neither applies (the caller then unrolls).  The summary is kept as the call's
        instance."""
        shape = self._shape(fn.decl)
        if shape is None or self._counting is not None:
            return None
        n = args[shape.param]
        if not isinstance(n.type, Num):
            return None
        consts = [self._bound(shape, args), *(self._public_constant(e) for e in shape.steps)]
        if any(c is None for c in consts) or any(c != consts[1] for c in consts[1:]) or consts[1] <= 0:
            return None
        bound, k = consts[0], (-consts[1] if shape.up else consts[1])  # the counter moves by -k per level
        if not n.is_const:
            return self._counted_over_range(fn, args, key, shape, bound, k, span)
        depth = levels(shape, Fraction(n.const), bound, k)
        if depth is None or depth < 2:
            return None
        summary = self._count(fn, args, shape, {Fraction(n.const) - depth * k: (depth, depth)}, span)
        if summary is not None:
            self.instances[key] = summary
        return summary

    # rule Count over a range: a public counter known to lie in [lo, hi], every value counted
    def _counted_over_range(self, fn: TopFn, args: list[Val], key, shape: CountShape, bound: Fraction,
                            k: Fraction, span: Span):
        """The pointwise maximum of the summaries of the call for every integer counter value in
        its type's range, or None (a private counter, an unbounded or too large range, a value
        for which the count never stops).  Cached under the call's key and the range: the key
        alone stands for any public counter."""
        n = args[shape.param]
        t = n.type
        if n.dist or not t.integer or not t.bounded or t.hi - t.lo + 1 > MAX_COUNT_RANGE:
            return None
        range_key = (key, "count over", t.lo, t.hi)
        if range_key in self.instances:
            return self.instances[range_key]
        by_base = _levels_by_base(shape, t, bound, k)
        if by_base is None or sum(hi for _, hi in by_base.values()) > MAX_COUNT_LEVELS:
            return None
        summary = self._count(fn, self._forget_changing_constants(fn, args, shape), shape, by_base, span)
        if summary is not None:
            self.instances[range_key] = summary
        return summary

    def _forget_changing_constants(self, fn: TopFn, args: list[Val], shape: CountShape) -> list[Val]:
        """Rule Count over a range: a numeric constant that the recursive calls do not pass on as
        itself (an accumulator's start) is forgotten (rule Widen), so that every level, the
        first and the base included, is the instance the step check describes."""
        out = list(args)
        for i, p in enumerate(fn.decl.params):
            if i != shape.param and args[i].is_const and not _passed_on(fn.decl.body, fn.decl.name, i, p.name):
                declared = self.types.resolve(p.type) if p.type is not None else None
                out[i] = _widen(args[i], declared if isinstance(declared, Num) else None)
        return out

    def _shape(self, decl: A.FunDecl) -> Optional[CountShape]:
        key = id(decl)
        if key not in self._shapes:
            self._shapes[key] = (decl, count_shape(decl))
        return self._shapes[key][1]

    def _bound(self, shape: CountShape, args: list[Val]) -> Optional[Fraction]:
        """Rule Count: the guard's bound: a public constant, or the constant given for the parameter that
        every level passes on unchanged."""
        if shape.bound_param is None:
            return self._public_constant(shape.bound)
        b = args[shape.bound_param]
        return Fraction(b.const) if b.is_const and isinstance(b.type, Num) else None

    def _public_constant(self, e: A.Expr) -> Optional[Fraction]:
        try:
            v = self.expr(e, self.globals)
        except FuzzError:
            return None
        return Fraction(v.const) if v.is_const and isinstance(v.type, Num) else None

    def _count(self, fn: TopFn, args: list[Val], shape: CountShape, by_base: dict, span: Span):
        """The summary over the counter values given as {base level's counter: (fewest, most)
        levels from it}: one entry for a constant counter, one per base reached for a range."""
        bases = []
        for base_n, depths in by_base.items():
            base_args = list(args)
            base_args[shape.param] = self.const_val(base_n, Num(base_n, base_n, args[shape.param].type.integer))
            bases.append((self.summary(fn, base_args, span)[0], depths))
        step_args = list(args)
        counter = args[shape.param]
        step_args[shape.param] = Val(Num(None, None, counter.type.integer), {}, counter.ir)  # public, not constant
        snapshot = self._save()
        try:
            step = self._check_step(fn, step_args, span)
            if step is None:
                self._restore(snapshot)
                return None
            summary, state, key = step
            self._iterate(summary, state, bases, span)
        except FuzzError:
            self._restore(snapshot)
            return None
        finally:
            self.store, self.unsolved, self.pending_checks = snapshot[0], snapshot[1], snapshot[2]
            self._counting = None
        self.instances.pop(key, None)  # the summary holds for these counter values only (counted keys it)
        if max(summary.depth, summary.draw_depth) > limits.CALL_DEPTH:
            # The count's depth is an upper bound (each level's deepest path): unrolling decides,
            # and no level below tries rule Count again (which would make unrolling quadratic).
            self._restore(snapshot)
            self._shapes[id(fn.decl)] = (fn.decl, None)
            return None
        return summary

    def _check_step(self, fn: TopFn, step_args: list[Val], span: Span):
        params = fn.decl.params
        param_types = [self.param_type(p, a, span) for p, a in zip(params, step_args)]
        step_args = [self.coerce(a, t, span) if not _is_fnt(t) else a for a, t in zip(step_args, param_types)]
        key = self.instance_key(fn, param_types, step_args)
        if key in self.active or key in self.instances:
            return None
        self.store, self.unsolved, self.pending_checks = ConstraintStore(), [], []
        self._counting = key
        summary = self.check_instance(fn, params, param_types, step_args, key, span)
        state = self._counted_state
        own = set(_assumed_unknowns(summary))
        if not state.recursive or any(u not in own and not u.startswith("max~") for u in self.store.unknowns):
            return None  # not recursive after all, or a nested recursion: unroll instead
        return summary, state, key

    # rule Count: the summary is F applied D times to the base level's, exactly
    # rule Count over a range: the pointwise maximum of F^d(S_base) over every d a value may need
    def _iterate(self, summary, state, bases: list, span: Span) -> None:
        """summary := F^depth(base) (a constant counter), or the maximum of F^d(base) over d in
        [fewest, most] for each base (a range), F being one level of the body given the level below."""
        rows = [(lhs, _single(rhs)) for lhs, rhs, _ in self.store.constraints]
        assumed = set(_assumed_unknowns(summary))
        maxes = [r for r in rows if r[1] is not None and r[1] not in assumed]
        steps = [r for r in rows if r[1] is not None and r[1] in assumed]
        top: dict = {}
        ranged = len(bases) > 1 or bases[0][1][0] != bases[0][1][1]
        for base, (fewest, most) in bases:
            values = _start(summary, base)
            for d in range(most + 1):
                if d:
                    self._level(values, maxes, steps, assumed)
                if d >= fewest or ranged:  # a range's annotations hold at every level of every value
                    self._check_level(values, span)
                if d >= fewest:
                    top = {u: max(v, top.get(u, ZERO)) for u, v in {**top, **values}.items()}
        self._substitute(summary, top)
        deepest = max(most for _, (_, most) in bases)
        base = _Deepest(*(max(getattr(b, f) for b, _ in bases) for f in ("calls", "depth", "draw_depth")))
        self._count_depth(summary, state, base, deepest, span)

    @staticmethod
    def _level(values: dict, maxes: list, steps: list, assumed: set) -> None:
        """One level more: values := F(values), the maxima first (they read the level below)."""
        for m in {u for _, u in maxes}:
            values[m] = ZERO
        for _ in range(len(maxes) + 1):  # maxima depend on one another without cycles
            changed = False
            for lhs, u in maxes:
                v = _eval(lhs, values)
                if v > values[u]:
                    values[u], changed = v, True
            if not changed:
                break
        nxt = {u: ZERO for u in assumed}
        for lhs, u in steps:
            nxt[u] = max(nxt[u], _eval(lhs, values))
        values.update(nxt)

    def _check_level(self, values: dict, span: Span) -> None:
        """The constraints that are not one level's definitions (annotations) hold at this level."""
        for lhs, rhs, why in self.store.constraints:
            if _single(rhs) is None and _eval(lhs, values) > _eval(rhs, values):
                raise self.fail("E0301", f"this counted recursion needs more than its annotation allows ({why})", span)
        for c, bound, pspan, name in self.pending_checks:
            if _eval(c, values) > bound:
                raise self.fail("E0301", f"{name} is used with sensitivity {_eval(c, values)} by this recursion, but "
                                f"its annotation allows {bound}", pspan)

    def _substitute(self, summary, values: dict) -> None:
        from ..typesystem.sens import d_substitute, substitute

        for s in self.unsolved + [summary]:
            s.coefs = [substitute(c, values) for c in s.coefs]
            s.quad = [{k: v for k, v in d_substitute(q, values).items() if v != 0} for q in s.quad]
            s.captured = {k: v for k, v in d_substitute(s.captured, values).items() if v != 0}
            s.risk = {k: v for k, v in d_substitute(s.risk, values).items() if v != 0}
            s.growth = {k: v for k, v in d_substitute(s.growth, values).items() if v != 0}

    # rule Count: the depth and calls of D levels and the base
    def _count_depth(self, summary, state, base, depth: int, span: Span) -> None:
        """Rule Unroll for a counted recursion: an eager recursive call nests one level per step;
        one under `sample` runs from depth 0 when drawn.  Every level makes its calls."""
        summary.calls = depth * summary.calls + base.calls
        if summary.calls > limits.MAX_CALLS:  # it may not finish in practice (rule Unroll)
            summary.risk = r_union(summary.risk, {FAIL: ONE})
        per_level = summary.depth
        if state.recursion_eager:
            summary.depth = depth * per_level + base.depth
        else:
            summary.draw_depth = max(summary.draw_depth, per_level, base.depth, base.draw_depth)

    def _save(self) -> tuple:
        return (self.store, self.unsolved, self.pending_checks, len(self.mechanisms), dict(self.instances),
                len(self.inf_origins), len(self.risk_origins), len(self.widened))

    def _restore(self, snap: tuple) -> None:
        self.store, self.unsolved, self.pending_checks = snap[0], snap[1], snap[2]
        del self.mechanisms[snap[3]:]
        self.instances = snap[4]
        del self.inf_origins[snap[5]:]
        del self.risk_origins[snap[6]:]
        del self.widened[snap[7]:]


@dataclass(frozen=True)
class _Deepest:
    """The most calls and nesting of the base levels a range of counters reaches (rule Count over
    a range; rule Unroll counts them)."""

    calls: int
    depth: int
    draw_depth: int


# rule Count over a range: the levels of every counter value, grouped by the base level it reaches
def _levels_by_base(shape: CountShape, t: Num, bound: Fraction, k: Fraction) -> Optional[dict]:
    """{base counter: (fewest, most) levels} over the integers of [t.lo, t.hi], or None when
    some value never stops."""
    out: dict = {}
    for n in range(math.ceil(t.lo), math.floor(t.hi) + 1):
        depth = levels(shape, Fraction(n), bound, k)
        if depth is None:
            return None
        base = Fraction(n) - depth * k
        fewest, most = out.get(base, (depth, depth))
        out[base] = (min(fewest, depth), max(most, depth))
    return out or None


def _is_fnt(t) -> bool:
    from .values import FnT
    return isinstance(t, FnT)


def _key_of(v: Any):
    f = Fraction(v)
    return (f.numerator, f.denominator)


def _assumed_unknowns(summary) -> list[str]:
    out = []
    quad = [c for q in summary.quad for c in q.values()]
    for c in list(summary.coefs) + quad + list(summary.captured.values()) + list(summary.risk.values()) + \
            list(summary.growth.values()):
        if isinstance(c, Lin):
            out += [u for u, _ in c.terms]
    return out


def _start(summary, base) -> dict:
    """The assumed unknowns set to the base level's summary (parameters matched by position)."""
    values: dict[str, Coef] = {}
    pos = {s: i for i, s in enumerate(summary.param_syms)}

    def put(c: Coef, v: Coef) -> None:
        if isinstance(c, Lin) and len(c.terms) == 1 and c.const == 0:
            values[c.terms[0][0]] = v

    for c, v in zip(summary.coefs, base.coefs):
        put(c, v)
    for q, base_q in zip(summary.quad, base.quad):  # rule Rho: the shadow coefficients likewise
        for ch, c in q.items():
            put(c, base_q.get(ch, ZERO))
    for sym, c in summary.captured.items():
        put(c, base.captured.get(sym, ZERO))
    for part, base_part in ((summary.risk, base.risk), (summary.growth, base.growth)):
        for sym, c in part.items():
            if sym in pos:
                put(c, base_part.get(base.param_syms[pos[sym]], ZERO))
            else:
                put(c, base_part.get(sym, ZERO))
    return values


def _single(rhs: Coef) -> Optional[str]:
    if isinstance(rhs, Lin) and rhs.const == 0 and len(rhs.terms) == 1 and rhs.terms[0][1] == 1:
        return rhs.terms[0][0]
    return None


def _eval(c: Coef, values: dict) -> Coef:
    if not isinstance(c, Lin):
        return c
    total: Coef = c.const
    for u, k in c.terms:
        v = values.get(u, ZERO)
        if v == INF:
            return INF
        total += k * v
    return total


__all__ = ["CountRules", "count_shape", "levels", "NOCONST", "is_const"]
