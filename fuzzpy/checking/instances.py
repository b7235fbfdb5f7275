"""Function instances: a function is checked once per instance (its parameter types, public
constant arguments and function arguments), recursive calls get LP unknowns for their
sensitivities, deep recursion on counters is widened, and the least annotations are solved
once the outermost recursive instance is complete.  Mixed into `Checker` (checker.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from ..diagnostics import FuzzError, Span
from ..primitives.registry import NOCONST
from ..solving.lp import Unsolvable, solve_least
from ..syntax import ast as A
from . import ir as I
from .helpers import _fn_identity, _has_tvar, _hashable, _widen
from .sens import INF, ONE, ZERO, Coef, ConstraintStore, Dist, d_substitute, fmt_coef, is_const, substitute
from .types import Fun, Type, is_subtype
from .typeexpr import match_type, subst_tvars
from .values import FnT, FnValue, Opaque, TopFn, Val

MAX_INSTANCE_DEPTH = 2000
# Past this many nested instances of one function, numeric constant arguments are forgotten, so a
# counter that changes at each call (i + 1) stops producing new instances and the recursion is
# solved as a fixpoint.  Public lists stay constant: recursion over them is structural and ends.
WIDEN_AFTER = 256


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


class InstanceRules:
    """Function instances and recursion (a mixin of `Checker`)."""

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
