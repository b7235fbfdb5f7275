"""The typing rules of the expression forms other than application: literals, variables,
ascriptions, let, sample, return, if and case (with their branches), lambdas, operators, sums,
fields, projections, tuples, records and lists.

`ExpressionRules` is mixed into `Checker` (checker.py): `self` is the checker, and `expr`
dispatches each AST node to its `x_<NodeClass>` method, wherever it is defined.
"""

from __future__ import annotations

import difflib
from fractions import Fraction
from typing import Any, Optional

from .. import limits
from ..diagnostics import Span
from ..hints import PRIVATE_DIVISOR
from ..primitives.registry import NOCONST, OPERATORS
from ..syntax import ast as A
from ..typesystem import ir as I
from ..typesystem.effects import FAIL, r_base, r_presence, r_union
from ..typesystem.sens import ONE, Dist, d_add, d_inf
from ..typesystem.types import (
    BOOL,
    STRING,
    UNIT,
    Bool,
    Fun,
    Fuzzy,
    Hole,
    ListT,
    Num,
    Parts,
    Record,
    SumT,
    Tensor,
    Type,
    With,
    is_subtype,
    join_types,
)
from .helpers import _branch_choice, _free_vars
from .values import Closure, Env, FnT, Opaque, Val

_RULES: dict[type, Any] = {}  # AST node class -> its rule (the `x_<Node>` method)


class ExpressionRules:
    """The rules of the expression forms (a mixin of `Checker`)."""

    # ---- expressions -------------------------------------------------------------------------

    def expr(self, e: A.Expr, env: Env) -> Val:
        rule = _RULES.get(type(e))
        if rule is None:
            rule = _RULES[type(e)] = getattr(type(self), "x_" + type(e).__name__)
        return rule(self, e, env)

    def x_Lit(self, e: A.Lit, env: Env) -> Val:
        v = e.value
        if isinstance(v, bool):
            return Val(BOOL, {}, I.IConst(v, span=e.span), v)
        if isinstance(v, Fraction):
            return Val(Num(v, v, e.integer), {}, I.IConst(v, span=e.span), v)
        if isinstance(v, str):
            return Val(STRING, {}, I.IConst(v, span=e.span), v)
        return Val(UNIT, {}, I.IConst(None, span=e.span), None)

    # rule Var: the value the scope gives
    def x_Var(self, e: A.Var, env: Env) -> Val:
        return self.var(e, env)

    # rule Ascription: T <: T' gives the value the type T', a function value via rule Declared
    def x_Ascribe(self, e: A.Ascribe, env: Env) -> Val:
        v = self.expr(e.value, env)
        t = self.types.resolve(e.type)
        if isinstance(v.type, FnT) and isinstance(t, Fun):
            return self.to_opaque(v, t, e.span)  # keeps v's risk: the value is computed once
        if not is_subtype(v.type, t):
            raise self.fail("E0202", f"this has type {v.type}, which does not fit the annotation {t}", e.span)
        return Val(t, v.dist, v.ir, v.const, v.fn, v.parts, v.risk, v.fns)

    def x_Let(self, e: A.Let, env: Env) -> Val:
        bound = self.expr(e.bound, env)
        bindings, pat = self.bind_pattern(e.pattern, bound)
        body = self.expr(e.body, env.extend(bindings))
        if body.is_const and body.fn is None:  # rule Const: a constant body needs nothing computed
            return Val(body.type, body.dist, I.IConst(body.const, span=e.span), body.const, None, body.parts)
        # The bound value is computed even if the body never uses it: its failure risk counts,
        # used or not (rule Let).
        return Val(body.type, body.dist, I.ILet(pat, bound.ir, body.ir, span=e.span), body.const, body.fn,
                   body.parts, r_union(bound.risk, body.risk), body.fns)

    # rule Sample: both sides run when the distribution is drawn
    def x_Sample(self, e: A.Sample, env: Env) -> Val:
        self.deferred += 1  # the interpreter runs both when the distribution is drawn (rule Unroll)
        try:
            return self._sample(e, env)
        finally:
            self.deferred -= 1

    # rule Sample: losses add, the sampled value is public, risks unite
    def _sample(self, e: A.Sample, env: Env) -> Val:
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
        return Val(body.type, d_add(bound.dist, body.dist), I.ISample(pat, bound.ir, body.ir, span=e.span),
                   risk=r_union(bound.risk, body.risk))

    def note_infinite(self, span: Span, dist: Dist, reason: str) -> None:
        if dist and len(self.inf_origins) < 20 + 20 * (reason == PRIVATE_DIVISOR):  # room for a hint's origin
            self.inf_origins.append((span, reason, tuple(dist)))

    # rule Return: a point mass, infinitely far from any other
    def x_Return(self, e: A.Return, env: Env) -> Val:
        v = self.expr(e.value, env)
        self.note_infinite(e.span, v.dist, "a private value is returned without noise")
        # Point masses at different values are infinitely far apart in max-divergence.
        return Val(Fuzzy(v.type), d_inf(v.dist), I.IReturn(v.ir, span=e.span), risk=v.risk)

    # rule Branch: a constant condition checks one arm; else choice + max of the arms
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
        risk = self.branch_risk(cond, [then, other], e.cond.span)
        return Val(t, dist, I.IIf(cond.ir, then.ir, other.ir, span=e.span), fn=self._join_fn(then, other), risk=risk,
                   fns=self._join_fns(then, other))

    def branch(self, e: A.Expr, env: Env, since: Optional[int] = None) -> Val:
        """Check one branch, with the parts it split eliminated: the max of two branches must
        compare distances over common symbols (a part and its whole are related only through
        their split constraint)."""
        since = len(self.splits) if since is None else since
        calls = self.stack[-1].calls if self.stack else 0
        self.speculation += 1  # a branch of a non-constant choice: it may not run (instances.py)
        try:
            v = self.expr(e, env)
        finally:
            self.speculation -= 1
        risk = r_base(self.eliminate(v.risk, since))
        if self.stack and self.stack[-1].calls - calls > limits.MAX_CALLS:
            # More calls than the budget in this arm alone: it may not finish in practice (FAIL,
            # rule Unroll), so which arm runs matters (rule Branch).
            risk = r_union(risk, {FAIL: ONE})
        return Val(v.type, self.eliminate(v.dist, since), v.ir, v.const, v.fn, None, risk, v.fns)

    def branch_risk(self, scrutinee: Val, arms: list[Val], span: Span) -> Dist:
        """Risk of a branch (soundness.md, rule Branch): the scrutinee's and the arms', and, when
        an arm may fail at all, the choice itself: which arm runs then decides whether the run
        completes."""
        risk = r_union(scrutinee.risk, *[a.risk for a in arms])
        if any(FAIL in a.risk for a in arms):
            choice = r_presence(_branch_choice(scrutinee.dist))
            if choice:
                self.note_risk(span, choice, "this condition depends on private data and decides whether a "
                               "part that may not complete runs (a recursion the checker could not unroll, more calls "
                               "than the call budget, or exact products of non-constant numbers)")
            risk = r_union(risk, choice)
        return risk

    # rule Join: the arms' common type (E0202 when they have none)
    def join(self, a: Val, b: Val, span: Span) -> Type:
        if isinstance(a.type, FnT) or isinstance(b.type, FnT):
            raise self.fail("E0202", "branches that return functions need a function type annotation",
                            span, "write (e : num -o[2] num) around the branches")
        t = join_types(a.type, b.type)
        if t is None:
            raise self.fail("E0202", f"the branches have different types: {a.type} and {b.type}", span)
        return t

    # rule Join: two functions of a declared type as one
    def _join_fn(self, a: Val, b: Val):
        if isinstance(a.fn, Opaque) and isinstance(b.fn, Opaque):
            return Opaque(join_types(a.fn.type, b.fn.type), max(a.fn.depth, b.fn.depth),  # type: ignore[arg-type]
                          max(a.fn.draw_depth, b.fn.draw_depth), a.fn.complete and b.fn.complete)
        return None

    # rule Functions in containers: the arms' functions component by component
    def _join_fns(self, a: Val, b: Val) -> Optional[list]:
        """The function values a branch's container holds: where both arms hold a function of a
        declared type at a component, their join (rule Join); anything else is not kept, and a
        function of a declared type there is then known by its type alone
        (`applications._known_by_type`)."""
        if a.fns is None or b.fns is None or len(a.fns) != len(b.fns):
            return None
        return [self._join_fn(Val(a.type, {}, a.ir, fn=x), Val(b.type, {}, b.ir, fn=y)) if x is not y else x
                for x, y in zip(a.fns, b.fns)]

    # rule Lambda: building a closure evaluates nothing; as data it costs its captures
    def x_Lambda(self, e: A.Lambda, env: Env) -> Val:
        where = f"at line {e.span.line}"
        clo = Closure(e.params, e.body, env, where)
        captured = self._captured_estimate(e, env)
        return Val(FnT(f"(lambda {where})"), captured, I.IClosure(span=e.span), NOCONST, clo)

    # rule Lambda: what a stored closure captures, charged infinitely
    def _captured_estimate(self, e: A.Lambda, env: Env) -> Dist:
        """A closure stored as data: anything private it captures counts as infinitely used
        (applications are checked precisely instead, at each application site)."""
        memo = self.__dict__.setdefault("_lambda_free", {})  # id -> (node kept alive, its free names)
        hit = memo.get(id(e))
        if hit is None or hit[0] is not e:
            hit = memo[id(e)] = (e, _free_vars(e.body, {p.name for p in e.params}))
        free = hit[1]  # only read: the same set, in the same order, at every check of this lambda
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

    # rule Branch: case on a sum: one arm if constant, else choice + max of the arms
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
                       body.fn, risk=body.risk)
        results = []
        for side, inner_t in (("inl", t.left), ("inr", t.right)):
            inner = Val(inner_t, scrut.dist, I.IVar("_"))
            bindings, pat = self.bind_pattern(arms[side].patterns[0], inner)
            results.append((pat, self.branch(arms[side].body, env.extend(bindings))))
        (lp, lv), (rp, rv) = results
        rtype = self.join(lv, rv, e.span)
        dist = d_add(_branch_choice(scrut.dist), self.d_max(lv.dist, rv.dist))
        risk = self.branch_risk(scrut, [lv, rv], e.scrutinee.span)
        return Val(rtype, dist, I.ICase(scrut.ir, "sum", (lp, lv.ir), (rp, rv.ir), span=e.span), risk=risk)

    # rule Branch: case on a list: one arm if constant, else choice + max of the arms
    # rule Functions in containers: the head is the list's function, the tail keeps it
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
            return Val(body.type, body.dist, body.ir, body.const, body.fn, body.parts, body.risk)
        nil = self.branch(arms["nil"].body, env)
        # Head and tail are the two components of a tensor: d(h) + d(t) <= d(list).
        since = len(self.splits)
        # A public list (distance 0 everywhere) has public parts: nothing to split (rule Widen (breadth)).
        hd, td = self.split(scrut.dist, ["head", "tail"], [elem, scrut.type]) if scrut.dist else ({}, {})
        element_fn = scrut.fns[0] if scrut.fns else None  # rule Functions in containers
        hb, hp = self.bind_pattern(cons.patterns[0], Val(elem, hd, I.IVar("_"), fn=element_fn))
        tb, tp = self.bind_pattern(cons.patterns[1], Val(scrut.type, td, I.IVar("_"), fns=scrut.fns))
        consv = self.branch(cons.body, env.extend({**hb, **tb}), since)
        rtype = self.join(nil, consv, e.span)
        dist = d_add(_branch_choice(scrut.dist), self.d_max(nil.dist, consv.dist))
        risk = self.branch_risk(scrut, [nil, consv], e.scrutinee.span)
        return Val(rtype, dist, I.ICase(scrut.ir, "list", (None, nil.ir), ((hp, tp), consv.ir), span=e.span),
                   risk=risk)

    def const_val(self, value: Any, t: Type) -> Val:
        return Val(t, {}, I.IConst(value), value)

    # (call_primitive_vals directly, not call_primitive: one call and one list fewer per operator)
    def x_BinOp(self, e: A.BinOp, env: Env) -> Val:
        return self.call_primitive_vals(OPERATORS[e.op], [self.expr(e.left, env), self.expr(e.right, env)], e.span)

    def x_UnOp(self, e: A.UnOp, env: Env) -> Val:
        return self.call_primitive_vals("not" if e.op == "!" else "neg", [self.expr(e.operand, env)], e.span)

    # rule Tuples: an injection keeps its value's distance and risk
    def x_Inject(self, e: A.Inject, env: Env) -> Val:
        v = self.expr(e.value, env)
        # The other side is unconstrained; `unit` is a placeholder that joins with anything via annotations.
        t = SumT(v.type, Hole()) if e.side == "inl" else SumT(Hole(), v.type)
        const = (e.side, v.const) if v.is_const else NOCONST
        return Val(t, v.dist, I.IInject(e.side, v.ir, span=e.span), const, risk=v.risk)

    # rule Tuples: a field's distance if known, else the record's; the record's risk
    # rule Functions in containers: and the field's function
    def x_Field(self, e: A.Field, env: Env) -> Val:
        v = self.expr(e.value, env)
        if isinstance(v.type, Record):
            idx, ft = _field_at(v.type, e.name)
            if ft is None:
                names = [n for n, _ in v.type.fields]
                close = difflib.get_close_matches(e.name, names, n=1)
                notes = [f"did you mean {close[0]}?"] if close else [f"the fields are: {', '.join(names)}"]
                raise self.fail("E0205", f"{v.type} has no field '{e.name}'", e.name_span or e.span, *notes)
            const = dict(v.const)[e.name] if v.is_const else NOCONST
            dist = v.parts[idx] if v.parts is not None else v.dist
            return Val(ft, dist, I.IField(v.ir, e.name, span=e.span), const, _component_fn(v, idx), risk=v.risk)
        if isinstance(v.type, Parts):  # `part` refuses a partition of released keys
            return self.call_primitive_vals("part", [v, self.const_val(e.name, STRING)], e.span)
        raise self.fail("E0205", f"field access .{e.name} needs a record, but this is {v.type}", e.span)

    # rule Tuples: a component's distance if known, else the whole's; the whole's risk
    # rule Functions in containers: and the component's function
    def x_Proj(self, e: A.Proj, env: Env) -> Val:
        v = self.expr(e.value, env)
        if not isinstance(v.type, (Tensor, With)) or not 1 <= e.index <= len(v.type.items):
            raise self.fail("E0202", f"projection .{e.index} needs a tuple with at least {e.index} "
                            f"components, but this is {v.type}", e.span)
        i = e.index - 1
        const = v.const[i] if v.is_const else NOCONST
        dist = v.parts[i] if v.parts is not None else v.dist  # a component moves at most as the whole
        return Val(v.type.items[i], dist, I.IProj(v.ir, i, span=e.span), const, _component_fn(v, i), risk=v.risk)

    # rule Tuples: tensor tuples add their distances, with-pairs take the max; risks unite
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
        return Val(t, dist, I.ITuple(kind, [v.ir for v in vals], span=e.span), const, None, parts,
                   r_union(*[v.risk for v in vals]), _component_fns(vals))

    # rule Tuples: a record adds its fields' distances; risks unite
    def x_RecordLit(self, e: A.RecordLit, env: Env) -> Val:
        names = [n for n, _ in e.fields]
        if len(set(names)) != len(names):
            raise self.fail("E0206", "a field appears twice in this record", e.span)
        vals = [self.expr(x, env) for _, x in e.fields]
        t = Record(tuple((n, v.type) for n, v in zip(names, vals)))
        const = tuple((n, v.const) for n, v in zip(names, vals)) if all(v.is_const for v in vals) else NOCONST
        parts = [v.dist for v in vals]
        return Val(t, d_add(*parts), I.IRecord([(n, v.ir) for n, v in zip(names, vals)], span=e.span), const,
                   None, parts, r_union(*[v.risk for v in vals]), _component_fns(vals))

    # rule Tuples: a list adds its elements' distances; risks unite
    def x_ListLit(self, e: A.ListLit, env: Env) -> Val:
        vals = [self.expr(x, env) for x in e.items]
        elem: Optional[Type] = None
        for v in vals:
            elem = v.type if elem is None else join_types(elem, v.type)
            if elem is None:
                raise self.fail("E0202", "list elements have different types", v.ir.span or e.span)
        t = ListT(elem if elem is not None else Hole())
        const = tuple(v.const for v in vals) if all(v.is_const for v in vals) else NOCONST
        return Val(t, d_add(*[v.dist for v in vals]), I.IList([v.ir for v in vals], span=e.span), const,
                   risk=r_union(*[v.risk for v in vals]), fns=self._element_fn([v.fn for v in vals]))

    # rule Tuples: h :: t adds the two distances; risks unite
    def x_Cons(self, e: A.Cons, env: Env) -> Val:
        h, tl = self.expr(e.head, env), self.expr(e.tail, env)
        if not isinstance(tl.type, ListT):
            raise self.fail("E0202", f":: needs a list on its right, but this is {tl.type}", e.tail.span)
        elem = h.type if isinstance(tl.type.elem, Hole) else join_types(h.type, tl.type.elem)
        if elem is None:
            raise self.fail("E0202", f"cannot put {h.type} into a list of {tl.type.elem}", e.head.span)
        const = (h.const,) + tuple(tl.const) if h.is_const and tl.is_const else NOCONST
        if const is NOCONST:
            # A constant side is the same value on neighbouring inputs: distance 0, whatever symbol
            # it arrived through (a released head on a constant tail stays public: rule Widen (breadth)).
            dist = d_add({} if h.is_const else h.dist, {} if tl.is_const else tl.dist)
        else:
            dist = d_add(h.dist, tl.dist)
        elements = [h.fn] if tl.is_const and not tl.const else [h.fn, tl.fns[0] if tl.fns else None]
        return Val(ListT(elem), dist, I.ICons(h.ir, tl.ir, span=e.span), const,
                   risk=r_union(h.risk, tl.risk), fns=self._element_fn(elements))

    # rule Functions in containers: the one function every element of a list is
    def _element_fn(self, fns: list) -> Optional[list]:
        """[f] when every element is known to be f (one closure), or functions of declared types
        (their join, rule Join: a list's elements have one type); None otherwise."""
        if not fns or any(f is None for f in fns):
            return None
        out = fns[0]
        for f in fns[1:]:
            if f is out:
                continue
            if not (isinstance(out, Opaque) and isinstance(f, Opaque)):
                return None
            out = self._join_fn(Val(out.type, {}, I.IConst(None), fn=out), Val(f.type, {}, I.IConst(None), fn=f))
            if out is None:
                return None
        return [out]


def _field_at(t: Record, name: str) -> tuple[int, Optional[Type]]:
    """The index and type of a record's first field of that name ((-1, None) if it has none), in
    one pass over its fields (`field_type` and a list's `index` were two)."""
    for i, (n, ft) in enumerate(t.fields):
        if n == name:
            return i, ft
    return -1, None


# rule Functions in containers: a component's function travels with the container
def _component_fns(vals: list) -> Optional[list]:
    return [v.fn for v in vals] if any(v.fn is not None for v in vals) else None


# rule Functions in containers: the function of one component, where the container kept it
def _component_fn(v: Val, i: int):
    return v.fns[i] if v.fns is not None and i < len(v.fns) else None
