"""Application: the `x_Apply` rule, calls of primitives, applying function values (full and
partial application, functions of a declared type), and giving a function value a declared
function type (`coerce`, `to_opaque`).  Mixed into `Checker` (checker.py); the checking of a
function's body for given arguments is in instances.py."""

from __future__ import annotations

from fractions import Fraction

from ..diagnostics import Span
from ..primitives.registry import NOCONST, REGISTRY, Arg, Result, lookup  # noqa: F401
from ..primitives.units import SCALAR_TYPES, refuse_units
from ..syntax import ast as A
from ..typesystem import ir as I
from ..typesystem.effects import ARGS, FAIL, r_presence, r_union
from ..typesystem.quadratic import DELTA, GAUSS_CHANNELS, UNKNOWN, without_channel, zcdp_of_pure
from ..typesystem.sens import ONE, ZERO, Dist, NonLinear, d_add, d_inf, fmt_coef, is_const
from ..typesystem.types import Fun, Type, holds_choices, holds_fuzzy, is_subtype
from .helpers import _application, _primitive_cover, _rename_args
from .values import Env, FnT, FnValue, Opaque, Partial, TopFn, Val, fn_params


class ApplicationRules:
    """Applications and function types (a mixin of `Checker`)."""

    # ---- application ---------------------------------------------------------------------------

    def x_Apply(self, e: A.Apply, env: Env) -> Val:
        kept = _application(e)
        head, args = kept[0], kept[1]
        # The registry is asked first: most heads that are not primitives are then never looked
        # up through every scope.
        prim = lookup(head.name) if isinstance(head, A.Var) else None
        if prim is not None and head.name not in self.functions and env.lookup(head.name) is None:
            arity = prim.arity
            if len(args) < arity:
                raise self.fail("E0210", f"primitive {head.name} needs {arity} arguments "
                                f"({' '.join(prim.params)}), but has {len(args)}", e.span)
            given = args[:arity]
            result = self.call_primitive(head.name, given, env, _primitive_cover(kept, arity))
            if len(args) == arity:
                return result
            return self.apply(result, [self.expr(a, env) for a in args[arity:]], e.span)
        fval = self.expr(head, env)
        return self.apply(fval, [self.expr(a, env) for a in args], e.span)

    def call_primitive(self, name: str, arg_exprs: list[A.Expr], env: Env, span: Span) -> Val:
        return self.call_primitive_vals(name, [self.expr(a, env) for a in arg_exprs], span)

    # rule Primitive: the primitive's rule, and the risk of its evaluated arguments
    def call_primitive_vals(self, name: str, vals: list[Val], span: Span) -> Val:
        # (the registry itself first: a declared primitive is complete once registered; `lookup`
        # loads the registry, and waits for it, when the name is not there yet)
        prim = REGISTRY.get(name) or lookup(name)
        assert prim is not None
        args, irs, given_fn, structured, risks = [], [], False, False, []
        for v in vals:  # const_ir(v), inline: this runs for every argument of every primitive call
            ir = v.ir
            if v.fn is not None:
                given_fn = True
                if v.risk:  # _evaluated_risks, inline
                    risks.append(v.risk)
            else:
                if v.const is not NOCONST:
                    if not isinstance(ir, I.IConst):
                        ir = I.IConst(v.const, span=ir.span)
                elif v.risk:
                    risks.append(v.risk)
                structured = structured or type(v.type) not in SCALAR_TYPES
            args.append(Arg(v.type, v.dist, v.const, v.ir.span or span, ir, v.fn, v.parts))
            irs.append(ir)
        if structured and not prim.units:  # only a structured value can hold a table
            refuse_units(self, name, args)  # rule Units
        applied: Dist = {}
        if given_fn:
            res, applied = self._rule_applying_functions(prim, args, vals, span)
        else:
            res = prim.rule(self, args, span)
        if I.EXPLAINED in res.info:  # a primitive that says why its result moves as it does (a join)
            self._note_primitive(span, name, res)
        if res.const is not NOCONST:
            return Val(res.type, res.dist, I.IConst(res.const, span=span), res.const, None, res.parts)
        ir_args = res.ir_args if res.ir_args is not None else irs  # (the arguments' IR, as the loop built it)
        info = dict(res.info) if res.info else {}
        return Val(res.type, res.dist, I.IPrim(name, ir_args, info, span=span), res.const, None,
                   res.parts, r_union(res.risk, applied, *risks) if res.risk or applied or risks else {})

    def _rule_applying_functions(self, prim, args: list[Arg], vals: list[Val], span: Span) -> tuple[Result, Dist]:
        """Rule Primitive for a primitive given functions: the functions its rule checks
        (ctx.instantiate) add the risk and the table growth of their bodies, mapped onto what the
        primitive applies them to, its other arguments."""
        self.primitive_risk.append({})
        self.primitive_growth.append(ZERO)
        try:
            res: Result = prim.rule(self, args, span)
        finally:
            applied, grown = self.primitive_risk.pop(), self.primitive_growth.pop()
        data = [v for v in vals if v.fn is None]
        if applied.pop(ARGS, 0):
            applied = r_union(applied, *[r_presence(v.dist) for v in data])
        if FAIL in applied:  # as for a call: an argument that may move infinitely far (rule Instance)
            applied = r_union(applied, *[self.choice_presence(v.dist) for v in data
                                         if holds_choices(v.type)])
        if grown != 0:
            self.note_growth(self._scale(grown, d_add(*[v.dist for v in data]), span))
        return res, applied

    def apply(self, f: Val, args: list[Val], span: Span) -> Val:
        while args:
            fn = f.fn if f.fn is not None or not isinstance(f.type, Fun) else _known_by_type(f.type)
            if fn is None:
                raise self.fail("E0203", f"this is not a function (it is {f.type}), but it is applied "
                                f"to an argument", span, *_lost_function_note(f.type))
            if isinstance(fn, Opaque):
                f, args = self._apply_opaque(f, fn, args[0], span), args[1:]
                continue
            n = fn_params(fn)
            if len(args) < n:
                return Val(FnT("(partial application)"), d_inf(d_add(f.dist, *[a.dist for a in args])),
                           I.IClosure(span=span), NOCONST, Partial(f, list(args), n - len(args)),
                           risk=r_union(f.risk, *[a.risk for a in args]))
            given = args[:n]
            out = self._apply_full(f, fn, given, span)
            out.risk = r_union(f.risk, out.risk, *_evaluated_risks(given))
            f, args = out, args[n:]
        return f

    # rule Declared: an application costs what it captured plus s times the argument
    # rule Rho: the last application charges the whole release in channel z
    def _apply_opaque(self, f: Val, fn: Opaque, arg: Val, span: Span) -> Val:
        t = fn.type
        arg = self.coerce(arg, t.dom, span)
        dist = d_add(self._scale(t.sens, arg.dist, span, apply=True), f.dist)
        if holds_fuzzy(t.cod):
            # Rule Inventory: what it releases is not counted; its argument's symbols are marked.
            dist = d_add(dist, self.lift({UNKNOWN: ONE}, arg.dist, span))
        # Rule Rho: nothing is released before the last argument is given, and then every pure
        # release the result holds is, in all, (its ordinary distance)-DP: that bound replaces
        # the channel-z entries the function value and the argument brought.
        dist = without_channel(dist, "z")
        if holds_fuzzy(t.cod) and not isinstance(t.cod, Fun):
            dist = d_add(dist, self._zcdp_of_result(dist, span))
        fn_out = Opaque(t.cod, fn.depth, fn.draw_depth, fn.complete) if isinstance(t.cod, Fun) else None
        self.note_depth(fn.depth, fn.draw_depth)  # rule Unroll: the calls it nests, where it is applied
        # A function of a declared type completes (to_opaque checks it) within the depth it carries;
        # one whose depth is unknown may exceed the runtime's limits.
        if not fn.complete and getattr(self, "_counting", None) is not None:
            # Rule Count does not iterate the depth of returned functions: unroll instead.
            raise self.fail("E0306", "not a counted recursion", span)
        own = {} if fn.complete else {FAIL: ONE}
        return Val(t.cod, dist, I.IApply(f.ir, [const_ir(arg)], span=span), NOCONST, fn_out,
                   risk=r_union(f.risk, evaluated_risk(arg), own))

    # rule Rho: an epsilon-DP result is epsilon^2/2-zCDP
    def _zcdp_of_result(self, dist: Dist, span: Span) -> Dist:
        """The channel-z entries of a result whose pure releases are, in all, as far apart as its
        ordinary distance says (Cauchy-Schwarz over its symbols, quadratic.zcdp_of_pure)."""
        try:
            return zcdp_of_pure(dist)
        except NonLinear:
            raise self.fail("E0304", "cannot bound the zCDP cost of the releases of a function of a declared type "
                            "here: how far it moves depends on the sensitivity of a recursive function that is "
                            "not solved yet", span, "annotate the recursive function's parameters with their "
                            "sensitivity, or apply the function outside the recursion")

    def _apply_full(self, f: Val, fn: FnValue, args: list[Val], span: Span) -> Val:
        if isinstance(fn, Partial):
            names = [f"_p{self._sym}_{i}" for i in range(len(args))]
            self._sym += 1
            inner = self.apply(fn.fn, list(fn.given) + args, span)
            body = _rename_args(inner.ir, args, names)
            return Val(inner.type, inner.dist, I.IApply(f.ir, [const_ir(a) for a in args], names, body, span=span),
                       inner.const, inner.fn, inner.parts, inner.risk)
        summary, args = self.summary(fn, args, span)
        dist, risk = self.map_summary(summary, args, span)
        if isinstance(fn, TopFn):
            self._note_call(span, fn.decl.name, summary, dist)
        if summary.instance is not None:
            node: I.IR = I.ICall(summary.instance, [const_ir(a) for a in args], span=span)
        else:
            node = I.IApply(f.ir, [const_ir(a) for a in args], summary.params, summary.body, span=span)
        fn_out = self.returned_opaque(summary) if isinstance(summary.cod, Fun) else \
            self.rebind_returned(summary, args, span)
        return Val(summary.cod, dist, node, NOCONST, fn_out, risk=risk)

    # rule Subtyping: an argument must be a subtype of its parameter's declared type
    def coerce(self, v: Val, t: Type, span: Span, target: str | None = None) -> Val:
        """Check that v can be passed where t is expected (giving function values a Fun type).
        `target` names where it goes ("parameter n of loop") in the error."""
        if isinstance(v.type, FnT) and isinstance(t, Fun):
            return self.to_opaque(v, t, span)
        if not is_subtype(v.type, t):
            where = f" for {target}" if target else ""
            raise self.fail("E0202", f"expected {t}{where}, but this argument is {v.type}", v.ir.span or span,
                            *self._declared_param_fix(v, t))
        return v

    def _declared_param_fix(self, v: Val, t: Type) -> list[str]:
        """When the argument is a program parameter (the checker's globals) declared with another
        type than the one expected (`param iters : num = 9` passed as an int), the declaration
        that fixes it."""
        if v.const is NOCONST or not isinstance(v.ir, I.IConst):
            return []
        names = [name for name, g in self.globals.vars.items() if g.const == v.const and g.type == v.type]
        if len(names) != 1:  # not a parameter, or not one we can name for sure
            return []
        value = v.const if not isinstance(v.const, Fraction) or v.const.denominator != 1 else v.const.numerator
        return [f"if this is the parameter '{names[0]}', declare it as {t}: `param {names[0]} : {t} = {value}`"]

    def to_opaque(self, v: Val, t: Fun, span: Span) -> Val:
        """Give a function value the declared type t; a function of n parameters can stand for a
        curried type A1 -o[s1] ... An -o[sn] B (checked at all n domains at once)."""
        doms, senses, cod = [t.dom], [t.sens], t.cod
        n = fn_params(v.fn) if v.fn is not None else 1
        while len(doms) < n and isinstance(cod, Fun):
            doms.append(cod.dom)
            senses.append(cod.sens)
            cod = cod.cod
        # The function value is computed once (`let tmp = v; fun x -> tmp x`), not at each application.
        tmp = None if isinstance(v.ir, (I.IVar, I.IClosure, I.ILambda, I.IConst)) else f"_f{self._sym}"
        self._sym += 1
        arg = Arg(v.type, v.dist, v.const, span, v.ir if tmp is None else I.IVar(tmp, span=span), v.fn)
        inst = self.instantiate(arg, doms, span, record=False, quadratic=True)
        # Rule Rho: the zCDP of its pure releases is bounded by the type's epsilon (applications
        # charge it, _apply_opaque); a Gaussian release's cost the type cannot state.
        if any(DELTA in q for q in inst.quad):  # rule Partition selection
            raise self.fail("E0332", f"a function given the type {t} cannot select keys from its arguments: a "
                            "declared type states a linear cost, and a partition selection also costs a delta", span,
                            "leave the function's type undeclared, so that each application is checked")
        if any(ch in q for q in inst.quad for ch in GAUSS_CHANNELS):
            raise self.fail("E0313", f"a function given the type {t} cannot make Gaussian releases on its "
                            "arguments: a declared type states a linear cost, and a Gaussian release's cost grows "
                            "with the square of the distance", span,
                            "leave the function's type undeclared, so that each application is checked")
        if any(s != FAIL for s in inst.risk):
            # Whether it completes depends on its argument or on private data: a declared type
            # cannot say which, so each application would have to be checked (rule Declared).
            raise self.fail("E0310", f"a function given the type {t} must complete on every argument, but this "
                            "one may not: it runs a recursion the checker could not unroll", span,
                            *self.risk_notes(), "leave the function's type undeclared, so that it is checked at "
                            "each application, or make the recursion's arguments public constants")
        if inst.grows != 0:
            raise self.fail("E0310", f"a function given the type {t} may not add rows to the tables it is given "
                            "(it applies union to them): applied again and again it could double them each time",
                            span, "leave the function's type undeclared, so that each application is checked")
        for coef, sens in zip(inst.param_coefs, senses):
            if is_const(coef) and coef > sens:
                raise self.fail("E0301", f"this function is {fmt_coef(coef)}-sensitive, but {t} allows "
                                f"{fmt_coef(sens)}", span)
            if not is_const(coef):
                self.store.require(coef, sens, "function argument annotation")
                self.pending_checks.append((coef, sens, span, "the function given here"))
        if not is_subtype(inst.cod, cod):
            raise self.fail("E0202", f"this function returns {inst.cod}, but {t} expects {cod}", span)
        code: I.IR = inst.code
        if len(inst.code.params) > 1:  # curried: one parameter per function value
            body = inst.code.body
            for name in reversed(inst.code.params[1:]):
                body = I.ILambda([name], body, span=span)
            code = I.ILambda(inst.code.params[:1], body, span=span)
        if tmp is not None:
            code = I.ILet(tmp, v.ir, code, span=span)
        # One that may fail whatever it is given (FAIL alone) is `complete` no more: each
        # application carries FAIL.
        fn = Opaque(t, inst.depth, inst.draw_depth, complete=FAIL not in inst.risk)
        # Rule Rho: its releases are charged in channel z, whole, where it is last applied
        # (_apply_opaque); a cost of what it captured kept here would count them twice.
        return Val(t, without_channel(inst.captured, "z"), code, NOCONST, fn, risk=dict(v.risk))


# rule Functions in containers: why a closure taken out of a container that lost it is refused
def _lost_function_note(t: Type) -> list[str]:
    """Why a function value without a declared type cannot be applied here."""
    if not isinstance(t, FnT):
        return []
    return ["a function without a declared type is known only where it is written, and in the tuples, records "
            "and lists built there; passed to a function, returned, or chosen by a branch inside a container, "
            "it is not: give it a declared type, (fun t -> ... : A -o[s] B), which travels with the container"]


# rule Functions in containers: a function taken out of a container that did not keep it
def _known_by_type(t: Fun) -> Opaque:
    """A value of a declared function type whose function the checker no longer knows (a tuple
    parameter's component, a branch's container): its type states its sensitivity and its
    distance what it captured (rule Declared); the calls it nests are unknown, so it is not
    `complete` and each application may fail."""
    return Opaque(t, complete=False)


def evaluated_risk(v: Val) -> Dist:
    """The risk of an argument as the IR passes it: nothing for a constant (rule Const)."""
    return {} if v.is_const and v.fn is None else v.risk


def _evaluated_risks(vals: list[Val]) -> list[Dist]:
    """The risks of the arguments that carry one (`evaluated_risk` of each, empty ones left out:
    a union skips them anyway)."""
    return [v.risk for v in vals if v.risk and (v.const is NOCONST or v.fn is not None)]


# rule Const: a known value is passed on as the constant itself
def const_ir(v: Val) -> I.IR:
    """The IR that passes v on: its constant itself when the checker knows it.  The expression
    that produced the constant is not run (the language is pure, so nothing is lost), and so
    cannot fail or run long at run time depending on private data it discarded."""
    if v.is_const and v.fn is None and not isinstance(v.ir, I.IConst):
        return I.IConst(v.const, span=v.ir.span)
    return v.ir
