"""Function instances and recursion (docs/soundness.md, rules Instance, Recursion, Unroll and
Widen).  Mixed into `Checker` (checker.py).

A function is checked once per *instance*: its parameter types, its public constant arguments
and the function values it is given.  Calling an instance maps its summary (the sensitivity in
each parameter, what it captures, its failure risk, how much it grows tables) onto the
arguments.  A call whose instance is being checked already (the same key, further up) is a
recursive call: it gets an *assumed* summary whose every component is an LP unknown, the body
is checked against that assumption, and the least solution is found once the outermost
recursion is complete.  A recursion over public constants makes a new key at each level and is
unrolled; a speculative one (under branches on non-constant values) stops unrolling after
`WIDEN_SPECULATIVE` levels by forgetting the constants that change from one level to the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from .. import limits
from ..diagnostics import FuzzError, Span
from ..hints import in_stdlib, nested_fuzzy_hint, shown_span
from ..primitives.registry import NOCONST, lookup
from ..solving.lp import Unsolvable, solve_least
from ..syntax import ast as A
from ..typesystem import ir as I
from ..typesystem.effects import FAIL, r_base, r_normal, r_presence, r_union
from ..typesystem.quadratic import (
    CHANNELS,
    UNKNOWN,
    base_of,
    channel_of,
    is_inventory,
    is_shadow,
    laplace_channel,
    pop_quad,
    pure_channel,
    shadow,
    subsampled_channel,
)
from ..typesystem.sens import (
    INF,
    ONE,
    ZERO,
    Coef,
    ConstraintStore,
    Dist,
    Lin,
    c_add,
    d_add,
    d_substitute,
    fmt_coef,
    is_const,
    substitute,
)
from ..typesystem.types import (
    MAX_TYPE_SIZE,
    Fun,
    Fuzzy,
    ListT,
    Num,
    Type,
    components,
    holds_choices,
    holds_fuzzy,
    holds_tables,
    is_subtype,
    type_size,
)
from .helpers import (
    _fn_identity,
    _has_hole,
    _has_tvar,
    _hashable,
    _widen,
    apply_scale,
    infinite_part,
)
from .typeexpr import bind_tvars, match_type, subst_tvars
from .values import Closure, Env, FnT, FnValue, Opaque, Partial, TopFn, Val

# Rule Inventory: the pure mechanisms whose releases a recursion may count (laplace in its own
# channel, the others in the pure channel of their epsilon).
_COUNTED = frozenset({"laplace", "noisy_max", "exponential", "above_threshold", "randomized_response"})
# The arithmetic a mechanism's constant argument may be written with (rule Constant parameters).
_ARITHMETIC = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
               "/": lambda a, b: a / b if b != 0 else None}
_FIRST_READ = _COUNTED | {"gaussian", "subsample"}  # their first argument is an epsilon, a rho or a rate
_SCANS_PER_FUNCTION = 8  # sets of constants a function's body is scanned with (rule Constant parameters)

# Speculative levels (under branches on values that are not constants) of one function's chain
# of nested instances before its changing numeric constants are forgotten (rule Widen).
WIDEN_SPECULATIVE = 256
WIDEN_MARGIN = 16  # further levels before a chain that no widening closes is refused
# Instances of one function checked under such branches before the constant lists it is given
# there are forgotten (rule Widen, breadth): a branch on each element of a public list, each arm
# calling on with a different constant list, would otherwise check a number of instances that
# grows exponentially with the recursion's depth (top_k: one list per sequence of winners).
WIDEN_BREADTH = 48
# Instances checked in one program, in all (each costs a check of the function's body).
MAX_INSTANCES = 200_000


@dataclass(slots=True)
class Summary:
    """A checked function instance, as its callers see it (rule Instance).  `coefs`, `captured`,
    `risk` and `growth` are the components a call maps onto its arguments; `risk` and `growth`
    are keyed by `param_syms` (the parameters' distance symbols) and by captured symbols."""

    cod: Type
    coefs: list[Coef]
    captured: Dist
    instance: Optional[I.Instance] = None  # top-level functions
    params: list[str] = field(default_factory=list)
    body: Optional[I.IR] = None            # closures: code checked at this site
    param_types: list[Type] = field(default_factory=list)
    param_syms: list[str] = field(default_factory=list)
    risk: Dist = field(default_factory=dict)
    growth: Dist = field(default_factory=dict)
    depth: int = 1  # calls nested when it runs, this one included (rule Unroll)
    calls: int = 1  # calls it makes in all, this one included (rule Unroll)
    draw_depth: int = 0  # calls nested when distributions it builds are drawn (from depth 0)
    returned: Optional[Any] = None  # a function value it returns, with its environment (rule Closure)
    frame: Optional[Env] = None     # the scope of its parameters
    since: int = 0                  # splits made before its body was checked
    # Rule Rho: each parameter's shadow coefficients (channel -> r: rho <= r * d^2), mapped onto
    # the argument by `lift` at each call (typesystem/quadratic.py).
    quad: list[dict] = field(default_factory=list)


@dataclass(slots=True)
class _Active:
    """An instance whose body is being checked."""

    summary: Summary
    name: Optional[str]           # the top-level function, or None for a closure
    speculation: int              # the checker's speculation depth when it was entered
    consts: tuple                 # its constant arguments (None where not constant)
    candidates: frozenset         # symbols its function arguments capture (rule Recursion)
    since: int = 0                # splits made before it was entered
    recursive: bool = False
    growth: Dist = field(default_factory=dict)
    callee_depth: int = 0
    draw_depth: int = 0
    deferred: int = 0             # the checker's depth in `sample` when it was entered
    recursion_eager: bool = False  # a recursive call of it runs now, not when a sample is drawn
    calls: int = 0                # calls its body makes, callees' included
    fns: tuple = ()               # the identities of its function arguments (instance_key)


class InstanceRules:
    """Function instances and recursion (a mixin of `Checker`)."""

    # ---- rule Instance: look up or check the instance of a call ---------------------------------

    # rule Instance: one checked instance per key, looked up or checked here
    # rule Unroll: at most UNROLL_DEPTH nested instances, argument types of MAX_TYPE_SIZE parts
    def summary(self, fn: FnValue, args: list[Val], span: Span) -> tuple[Summary, list[Val]]:
        """The checked instance for these arguments, and the arguments as passed (function
        values given to parameters of declared function type carry their code)."""
        params = fn.decl.params if isinstance(fn, TopFn) else fn.params  # type: ignore[union-attr]
        args = self._widen_speculative(fn, args, params, span)
        param_types = [self.param_type(p, a, span) for p, a in zip(params, args)]
        if any(type_size(t) > MAX_TYPE_SIZE for t in param_types):
            name = fn.decl.name if isinstance(fn, TopFn) else "this function"
            raise self.fail("E0306", f"the arguments of {name} have types of more than {MAX_TYPE_SIZE} parts",
                            span, "a recursion whose argument types grow at each call (a tuple of the argument, "
                            "say) cannot be checked; give the parameter a declared type")
        args = [a if a.type is t or isinstance(t, FnT) else self.coerce(a, t, span, _parameter(fn, p))
                for a, t, p in zip(args, param_types, params)]  # an argument of its own type is kept
        key = self.instance_key(fn, param_types, args)
        known = self.instances.get(key)  # (one hash of the key: it hashes every parameter type)
        if known is not None:
            return known, args
        if key in self.active:
            return self.recursive_summary(fn, key, span), args
        counting = getattr(self, "_counting", None)
        if counting is not None and counting[0] == key[0]:
            # Rule Count checks one level for a non-constant counter: a call of itself that is not
            # the recursive call (a new function argument at each level, say) cannot be counted.
            raise self.fail("E0306", "not a counted recursion", span)
        counted = self.counted(fn, args, key, span) if isinstance(fn, TopFn) else None
        if counted is not None:  # rule Count: checked once for every level (and kept by it)
            return counted, args
        if len(self.stack) >= limits.UNROLL_DEPTH or self.instance_count >= MAX_INSTANCES:
            raise self.fail("E0306", f"function calls nested more than {limits.UNROLL_DEPTH} deep (or more than "
                            f"{MAX_INSTANCES} function instances) at check time", span,
                            "recursion on public constants is unrolled while checking, one level per call; "
                            "make sure it reaches its base case within that depth")
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
        if isinstance(fn, TopFn) and getattr(fn.decl, "span", None) == span:
            return  # the entry point, checked from its declaration: no use to show
        if in_stdlib(span) and diag.span is not None and not in_stdlib(diag.span):
            return  # the user's own code is wrong (a lambda given to a stdlib function): not its insides
        name = fn.decl.name if isinstance(fn, TopFn) else "a function"
        if diag.span is not None and in_stdlib(diag.span) and not in_stdlib(span):
            # What the user passed to a stdlib function does not fit it: the caret goes on their
            # call, and the place inside the library becomes a note.
            trail = next((i for i, n in enumerate(diag.notes) if n.startswith("in the use of")), len(diag.notes))
            diag.notes.insert(trail, f"the error is at {shown_span(diag.span)}, reached through {name}")
            diag.span = span
            return
        sites = [n for n in diag.notes if n.startswith("in the use of")]
        if len(sites) < 3:
            diag.notes.append(f"in the use of {name} at {shown_span(span)}")

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

    # rule Instance: the function, its parameter types, constants, function values and public arguments
    def instance_key(self, fn: FnValue, types: list[Type], args: list[Val]):
        # Closures are keyed by the object itself (identity hash), which also keeps it alive:
        # an id() could be reused by a later closure and return a wrong cached instance.
        ident = ("top", fn.decl.name) if isinstance(fn, TopFn) else ("closure", fn)  # type: ignore[union-attr]
        consts = tuple([None if a.const is NOCONST else _hashable(a.const) for a in args])
        fns = tuple([_fn_identity(a.fn) for a in args])
        return (ident, tuple(types), consts, fns, tuple([_public(a) for a in args]))

    # ---- rule Instance for a closure a primitive applies (instantiate) ---------------------------

    # rule Instance: the instance of a closure applied to fresh holders, its key built directly
    def apply_to_holders(self, f: Val, holders: list[Val], span: Span) -> Val:
        """`apply(f, holders)` for `instantiate`, whose holders are fresh values of the types the
        primitive gives (no constant, function or risk).  A closure applied to all of them, its
        parameters without declared types or sensitivities, takes a direct path to
        `check_instance`: its key is built from what the holders are known to be, and the steps
        of `apply` and `summary` that cannot apply to them (widening, coercion, a known or
        recursive instance, rule Count) are skipped.  The result is `apply`'s."""
        fn = f.fn
        key = self._holder_key(fn, holders)
        if key is None:
            return self.apply(f, holders, span)
        try:
            summary = self._check_closure_instance(fn, list(key[1]), holders, key, span)
        except FuzzError as exc:
            self._note_call_site(exc, fn, span)
            raise
        dist, risk = self.map_summary(summary, holders, span)
        node = I.IApply(f.ir, [h.ir for h in holders], summary.params, summary.body, span=span)
        fn_out = self.returned_opaque(summary) if isinstance(summary.cod, Fun) else \
            self.rebind_returned(summary, holders, span)
        return Val(summary.cod, dist, node, NOCONST, fn_out, risk=r_union(f.risk, risk) if f.risk else risk)

    def _holder_key(self, fn: Optional[FnValue], holders: list[Val]) -> Optional[tuple]:
        """The instance key `summary` would build for a closure applied to fresh holders, when
        the direct path gives what `apply` gives; None otherwise (and for a key already known or
        being checked, or past the limits: `summary` answers those)."""
        if type(fn) is not Closure or len(fn.params) != len(holders) or self._counting is not None:
            return None
        for p in fn.params:
            if p.type is not None or p.sens is not None:
                return None  # a declared type is resolved and coerced to, a sensitivity checked
        types = tuple([h.type for h in holders])
        for t in types:
            if isinstance(t, (Fun, FnT)) or type_size(t) > MAX_TYPE_SIZE:
                return None
        none = (None,) * len(holders)  # no constants, no function values
        key = (("closure", fn), types, none, none, tuple([not h.dist for h in holders]))  # `_public`
        if key in self.instances or key in self.active:
            return None
        if len(self.stack) >= limits.UNROLL_DEPTH or self.instance_count >= MAX_INSTANCES:
            return None
        return key

    # ---- rule Widen: stop unrolling a speculative chain ------------------------------------------

    def _widen_speculative(self, fn: FnValue, args: list[Val], params: list, span: Span) -> list[Val]:
        """Past WIDEN_SPECULATIVE speculative levels of one function's nested instances, the
        numeric constants that changed since the enclosing instance are forgotten; constants that
        stay the same (an epsilon, clip bounds) are kept.  Forgetting a constant only makes the
        instance more general, so this is always sound (rule Widen)."""
        if not isinstance(fn, TopFn):
            return args
        args = self._widen_breadth(fn, args, span)
        chain = self.chains.get(fn.decl.name)
        if not chain or self.speculation - chain[0].speculation < WIDEN_SPECULATIVE:
            return args
        last = chain[-1].consts
        fresh = [a for i, a in enumerate(args) if isinstance(a.fn, (Closure, Partial))
                 and (i >= len(chain[-1].fns) or _fn_identity(a.fn) != chain[-1].fns[i])]
        if fresh and self.speculation - chain[0].speculation >= WIDEN_SPECULATIVE + WIDEN_MARGIN:
            # A new function at each level: no instance repeats, so no fixpoint (rule Widen).  The
            # margin lets an enclosing recursion, widened at the same depth, close first.
            raise self.fail("E0306", f"{fn.decl.name} is given a new function at each level of a recursion whose "
                            "depth is not a public constant", fresh[0].ir.span or span,
                            "pass the same function at each level, or recurse on a public constant")
        out = []
        for i, (a, p) in enumerate(zip(args, params)):
            before = last[i] if i < len(last) else None
            if a.is_const and isinstance(a.type, Num) and _hashable(a.const) != before:
                declared = self.types.resolve(p.type) if p.type is not None else None
                out.append(_widen(a, declared if isinstance(declared, Num) else None))
                self.widened.append((fn.decl.name, span))
            else:
                out.append(a)
        return out

    def _widen_breadth(self, fn: TopFn, args: list[Val], span: Span) -> list[Val]:
        """Rule Widen (breadth): once WIDEN_BREADTH instances of a function have been checked under
        conditions that are not public constants, the constant lists it is given there are
        forgotten: the argument becomes a public value that is not a constant (distance 0, as a
        constant is the same on neighbouring inputs), passed at run time as the constant itself.
        Numbers are kept: a public counter (the k of top_k) still unrolls exactly; so is the empty
        list, a single value (whose element type a non-empty list fixes)."""
        if not self.speculation or self.speculative_checks.get(fn.decl.name, 0) < WIDEN_BREADTH:
            return args
        out = []
        for a in args:
            if a.is_const and a.fn is None and isinstance(a.type, ListT) and len(a.const) > 0:
                ir = a.ir if isinstance(a.ir, I.IConst) else I.IConst(a.const, span=a.ir.span)
                out.append(Val(a.type, {}, ir))
                self.widened_lists.append((fn.decl.name, span))
            else:
                out.append(a)
        return out

    # ---- rule Recursion: the assumed summary of a recursive call ---------------------------------

    # rule Recursion: a call of an instance being checked gets the assumed summary
    def recursive_summary(self, fn: FnValue, key, span: Span) -> Summary:
        state = self.active[key]
        if self.deferred == state.deferred:
            state.recursion_eager = True
        if not state.recursive:
            if not isinstance(fn, TopFn) or fn.decl.ret is None:
                name = fn.decl.name if isinstance(fn, TopFn) else "this function"
                raise self.fail("E0212", f"recursive function {name} needs a declared return type", span,
                                "write function f (x : num) : num { ... }")
            state.recursive = True
            self._assume(fn.decl, state, counted=key == getattr(self, "_counting", None))
        return state.summary

    # rule Recursion: every component of the assumed summary is an unknown
    def _assume(self, decl: A.FunDecl, state: _Active, counted: bool = False) -> None:
        """Every component of the summary becomes an unknown the body is checked against:
        sensitivities (or their annotations), what the function arguments capture, the failure
        risk and the growth of tables.  The risk includes FAIL (a recursion may not complete),
        except under rule Count, where the recursion ends and FAIL is an unknown like the rest:
        the body's own FAIL (rule Exact, say) then carries through the levels."""
        s, store = state.summary, self.store
        s.coefs = []
        for p, t in zip(decl.params, s.param_types):
            if isinstance(t, FnT):
                s.coefs.append(ZERO)  # its applications are checked in the body, through candidates
            elif p.sens is not None:
                s.coefs.append(Fraction(p.sens) if p.sens != INF else INF)
            else:
                s.coefs.append(store.fresh(f"{decl.name}.{p.name}", minimise=True))
        # Rule Rho: shadow unknowns only where a release may happen.  An unknown times an infinite
        # distance is infinite at once (an argument computed by a product, say), which would
        # charge every such recursion infinitely; a recursion that cannot release anything
        # assumes no shadow cost, and the check of its body confirms it (E0304 otherwise).
        gauss = self._may_release(decl, state) or any(_holds_function(t) for t in s.param_types)
        # Rule Inventory: a count for each Laplace epsilon written as a public constant in the
        # function (or those it names), and the unknown mark for anything else.
        channels = CHANNELS + (UNKNOWN, *self._laplace_channels(decl, state)) if gauss else ()
        s.quad = [{ch: store.fresh(f"{decl.name}.{p.name}.rho", minimise=True) for ch in channels}
                  if not isinstance(t, FnT) else {} for p, t in zip(decl.params, s.param_types)]
        cands = sorted(state.candidates)
        s.captured = {c: store.fresh(f"{decl.name}.captured", minimise=True) for c in cands}
        s.captured.update({shadow(c, ch): store.fresh(f"{decl.name}.captured.rho", minimise=True)
                           for c in cands for ch in channels})
        fail = store.fresh(f"{decl.name}.fail", minimise=True) if counted else ONE
        s.risk = {FAIL: fail, **{x: store.fresh(f"{decl.name}.risk", minimise=True) for x in s.param_syms + cands}}
        grows = [x for x in s.param_syms + cands if x in self.table_syms]
        s.growth = {x: store.fresh(f"{decl.name}.growth", minimise=True) for x in grows}
        s.depth = s.draw_depth = s.calls = 0  # the recursion's own nesting is rule Count's, or FAIL's
        s.cod = self._declared_return(decl, s.param_types)
        if _has_hole(s.cod):
            raise self.fail("E0212", f"the recursive calls of {decl.name} cannot be given a return type: its type "
                            f"variables are only given by empty lists here ({s.cod})", decl.ret.span,
                            "pass a non-empty list for the type variable, or declare the element type")

    @staticmethod
    def _fold_uncounted(flat: Dist, assumed: Dist) -> Dist:
        """Inventory counts on captured symbols that the assumption has no unknown for become the
        unknown mark of that symbol (rule Inventory)."""
        out: Dist = {}
        for key, c in flat.items():
            if is_shadow(key) and key not in assumed and is_inventory(channel_of(key)):
                mark = shadow(base_of(key), UNKNOWN)
                if mark in assumed:
                    key = mark  # a presence: the count itself, which may be an unknown that is 0
            out[key] = c_add(out[key], c) if key in out else c
        return out

    def _laplace_channels(self, decl: A.FunDecl, state: _Active) -> tuple[str, ...]:
        """The inventory channels of the `laplace` calls (and of the other pure mechanisms) whose
        epsilon is a public constant, in the function and the top-level functions it names (rule
        Inventory); the epsilon, rho or rate may be a constant parameter of this instance or of a
        function it calls with constants (rule Constant parameters)."""
        from .helpers import _spine

        found: set[str] = set()
        seen: set[tuple] = set()
        counted: set[tuple[str, Fraction]] = set()
        rates: set[Fraction] = set()
        todo: list[tuple[A.Node, dict]] = [(decl.body, self._numeric_parameters(decl, state))]
        while todo:
            node, names = todo.pop()
            if isinstance(node, A.Apply):
                head, args = _spine(node)
                # only a mechanism's first argument is read (evaluating costs a check per call)
                released = isinstance(head, A.Var) and head.name in _FIRST_READ and args
                first = self._constant_of(args[0], names) if released else None
                if isinstance(head, A.Var) and head.name in _COUNTED and first is not None and first > 0:
                    found.add(laplace_channel(first) if head.name == "laplace" else pure_channel(first))
                    counted.add(("laplace" if head.name == "laplace" else "pure", first))
                if isinstance(head, A.Var) and head.name == "gaussian" and first is not None and first > 0:
                    counted.add(("gauss", first))  # a release on one symbol costs rho in channel gs
                if isinstance(head, A.Var) and head.name == "subsample" and first is not None and 0 < first < 1:
                    rates.add(first)
                callee = self.functions.get(head.name) if isinstance(head, A.Var) else None
                if callee is not None:  # its parameters bound to the constants it is given here
                    bound = {p.name: v for p, a in zip(callee.params, args)
                             if (v := self._constant_of(a, names)) is not None}
                    self._visit(callee, bound, seen, todo)
            if isinstance(node, A.Var) and node.name in self.functions:
                self._visit(self.functions[node.name], {}, seen, todo)
            todo.extend((child, names) for child in A.children(node))
        # rule Poisson subsampling: each counted epsilon on a sample of each rate found here
        found.update(subsampled_channel(kind, q, eps) for q in rates for kind, eps in counted)
        return tuple(sorted(found))

    # rule Constant parameters: a called function's body scanned with the constants it is given
    @staticmethod
    def _visit(f: A.FunDecl, bound: dict, seen: set, todo: list) -> None:
        """Scan f's body once per set of constants it is given, at most _SCANS_PER_FUNCTION sets
        (a recursion on a constant would give a new set at each level)."""
        key = (f.name, tuple(sorted(bound.items())))
        if key not in seen and sum(1 for name, _ in seen if name == f.name) < _SCANS_PER_FUNCTION:
            seen.add(key)
            todo.append((f.body, bound))

    # rule Constant parameters: a parameter bound to a constant by this instance
    @staticmethod
    def _numeric_parameters(decl: A.FunDecl, state: _Active) -> dict[str, Fraction]:
        """The instance's numeric constant arguments, by parameter name (its key holds them)."""
        out = {}
        for p, t, c in zip(decl.params, state.summary.param_types, state.consts):
            if isinstance(t, Num) and c is not None and not isinstance(c, bool):
                out[p.name] = Fraction(*c) if isinstance(c, tuple) else Fraction(c)
        return out

    # rule Constant parameters: a literal, a param, a parameter bound to a constant, or arithmetic
    def _constant_of(self, e: A.Expr, names: dict) -> Optional[Fraction]:
        """The value of a mechanism's first argument or of an argument of a call, when it is
        known here: a literal, a program parameter, a parameter bound to a constant (`names`),
        or arithmetic of them.  Only these are evaluated: evaluating anything else in the
        middle of an assumption could check other instances."""
        if isinstance(e, A.Var) and e.name in names:
            return names[e.name]
        if isinstance(e, (A.Lit, A.Var)):
            return self._public_constant(e)
        if isinstance(e, A.BinOp) and e.op in _ARITHMETIC:
            left, right = self._constant_of(e.left, names), self._constant_of(e.right, names)
            return None if left is None or right is None else _ARITHMETIC[e.op](left, right)
        return None

    def _may_release(self, decl: A.FunDecl, state: _Active) -> bool:
        """Could a call of this instance make a release (which has a shadow cost)?  Conservative:
        a mechanism's name occurs in its body or in a top-level function it names, or it is
        given function values (whose code is checked inside it)."""
        if any(f is not None for f in state.fns):
            return True
        seen: set[str] = set()
        todo: list[A.Node] = [decl.body]
        while todo:
            node = todo.pop()
            if isinstance(node, A.Var):
                prim = lookup(node.name)
                if prim is not None and prim.is_mechanism:
                    return True
                f = self.functions.get(node.name)
                if f is not None and node.name not in seen:
                    seen.add(node.name)
                    todo.append(f.body)
            todo.extend(A.children(node))
        return False

    def _declared_return(self, decl: A.FunDecl, param_types: list[Type]) -> Type:
        """The declared return type, with type variables bound by this instance's parameters."""
        ret = self.types.resolve(decl.ret)
        if not _has_tvar(ret):
            return ret
        binding: dict = {}
        for p, t in zip(decl.params, param_types):
            if p.type is not None:
                bind_tvars(self.types.resolve(p.type), t, binding)
        ret = subst_tvars(ret, binding)
        if _has_tvar(ret):
            raise self.fail("E0212", f"the return type of {decl.name} has a type variable that its parameters "
                            "do not fix", decl.ret.span)
        return ret

    # ---- checking an instance ---------------------------------------------------------------------

    # rule Instance: the body checked with a fresh symbol per parameter gives the summary
    def check_instance(self, fn, params, param_types, args, key, span) -> Summary:
        label = fn.decl.name if isinstance(fn, TopFn) else fn.label
        names = [p.name for p in params]
        instance = I.Instance(label, names, key=key) if isinstance(fn, TopFn) else None
        summary = Summary(FnT(label), [], {}, instance, names, None, param_types)
        name = fn.decl.name if isinstance(fn, TopFn) else None
        saved_function, since = self.current_function, len(self.splits)
        state = _Active(summary, name, self.speculation, key[2], _candidates(args, param_types), since,
                        deferred=self.deferred, fns=key[3])
        self._enter(key, state)
        self.instance_count += 1
        if self.speculation and name is not None:  # rule Widen (breadth)
            self.speculative_checks[name] = self.speculative_checks.get(name, 0) + 1
        self.current_function = label if isinstance(fn, TopFn) else self.current_function
        try:
            body, symbols = self._check_body(fn, params, param_types, args, summary)
            body = self._coerce_return(fn, body, param_types)
        finally:
            self.current_function = saved_function
            self._leave(key, state)
        flat = self.eliminate(body.dist, since)
        coefs = [flat.pop(s, ZERO) for s in symbols]
        quad = [pop_quad(flat, s) for s in symbols]
        risk = r_normal(r_base(self.eliminate(body.risk, since)))
        growth = state.growth
        self._check_annotations(fn, params, coefs, symbols)
        cod = self._check_return(fn, body, param_types)
        if state.recursive:
            coefs, quad, flat, risk, growth = self._require_assumed(state, coefs, quad, flat, risk, growth, span)
        self._finish_instance(summary, state, body, cod, (coefs, quad, flat, risk, growth), span)
        self.instances[key] = summary
        if _mentions_unknowns(summary):
            self.unsolved.append(summary)
        if key == self._counting:
            self._counted_state = state  # rule Count solves it (counting.py)
        elif state.recursive and not any(a.recursive for a in self.stack):
            self.solve_pending(span)
        return summary

    # rule Unroll: the calls an instance nests and makes, and the runtime's limits on them
    def _finish_instance(self, summary: Summary, state: _Active, body: Val, cod: Type, parts: tuple,
                         span: Span) -> None:
        """The summary's components from its checked body (rules Instance and Unroll)."""
        summary.cod = cod
        summary.coefs, summary.quad, summary.captured, summary.risk, summary.growth = parts
        if isinstance(body.type, FnT) and isinstance(body.fn, (Closure, Partial)):
            summary.returned, summary.since = body.fn, state.since  # applied at each call (rebind_returned)
        elif isinstance(body.fn, Opaque):
            summary.returned = body.fn  # its depth counts where it is applied (rule Unroll)
        summary.depth, summary.draw_depth = 1 + state.callee_depth, state.draw_depth
        summary.calls = 1 + state.calls
        if summary.calls > limits.MAX_CALLS:  # it may not finish in practice: a failure (rule Unroll)
            summary.risk = r_union(summary.risk, {FAIL: ONE})
        if max(summary.depth, summary.draw_depth) > limits.CALL_DEPTH:  # rule Unroll: the runtime's limit
            raise self.fail("E0306", f"function calls nested more than {limits.CALL_DEPTH} deep at run time", span,
                            "recursion on public constants runs one nested call per level (except calls in the "
                            "rest of a sample block, which run after it); make sure it reaches its base case "
                            "within that depth")
        if summary.instance is not None:
            summary.instance.body = body.ir
        else:
            summary.body = body.ir

    # rule Instance for `apply_to_holders`: check_instance without the steps that cannot apply
    def _check_closure_instance(self, fn: Closure, types: list[Type], holders: list[Val], key, span: Span) -> Summary:
        """`check_instance` of a closure applied to fresh holders: no declared types or
        sensitivities (`_holder_key`), no function arguments (so no candidates), not the step
        of rule Count, and never recursive (a closure's recursive call is refused, E0212, before
        it could assume a summary): what the other steps would do here is nothing."""
        summary = Summary(FnT(fn.label), [], {}, None, [p.name for p in fn.params], None, types)
        saved_function, since = self.current_function, len(self.splits)
        state = _Active(summary, None, self.speculation, key[2], frozenset(), since, deferred=self.deferred,
                        fns=key[3])
        self.active[key] = state
        self.stack.append(state)
        self.instance_count += 1
        try:
            body, symbols = self._check_holder_body(fn, types, holders, summary)
        finally:
            self.current_function = saved_function
            self.active.pop(key)
            self.stack.pop()
        flat = self.eliminate(body.dist, since)
        coefs = [flat.pop(s, ZERO) for s in symbols]
        quad = [pop_quad(flat, s) for s in symbols]
        risk = r_normal(r_base(self.eliminate(body.risk, since)))
        self._finish_instance(summary, state, body, body.type, (coefs, quad, flat, risk, state.growth), span)
        self.instances[key] = summary
        if _mentions_unknowns(summary):
            self.unsolved.append(summary)
        return summary

    def _enter(self, key, state: _Active) -> None:
        self.active[key] = state
        self.stack.append(state)
        if state.name is not None:
            chain = self.chains.get(state.name)
            if chain is None:
                self.chains[state.name] = [state]
            else:
                chain.append(state)

    def _leave(self, key, state: _Active) -> None:
        self.active.pop(key)
        self.stack.pop()
        if state.name is not None:
            self.chains[state.name].pop()

    # rule Rho: the body's shadow coefficients must fit the assumed ones
    def _require_assumed(self, state: _Active, coefs, quad, flat, risk, growth, span):
        """Rule Recursion: what the body needs must fit what its recursive calls assumed; the
        summary is the assumption (solved once the outermost recursion is complete)."""
        a = state.summary
        for c, u in zip(coefs, a.coefs):
            self.store.require(c, u, "recursive call")
        for q, assumed in zip(quad, a.quad):
            for ch, c in q.items():
                if ch not in assumed and is_inventory(ch) and UNKNOWN in assumed:
                    ch = UNKNOWN  # a count the assumption has no unknown for: not counted (rule Inventory)
                if ch not in assumed:  # a function parameter: its releases are checked where it is applied
                    raise self.fail("E0304", "cannot bound the releases of this recursive function in zCDP",
                                    span)
                self.store.require(c, assumed[ch], "recursive call")
        flat = self._fold_uncounted(flat, a.captured)
        for part, assumed, what in ((flat, a.captured, "captures"), (risk, a.risk, "may fail on"),
                                    (growth, a.growth, "grows tables by")):
            for sym, c in part.items():
                if sym not in assumed:
                    raise self.fail("E0304", f"cannot bound what this recursive function {what}: it depends on "
                                    f"{self.describe(sym)}, which its arguments do not give it", span)
                self.store.require(c, assumed[sym], "recursive call")
        return list(a.coefs), [dict(q) for q in a.quad], dict(a.captured), dict(a.risk), dict(a.growth)

    # rule Instance: the body checked with a symbol per parameter (none for a public argument)
    def _check_body(self, fn, params, param_types, args, summary: Summary):
        env = self.globals if isinstance(fn, TopFn) else fn.env
        bindings, symbols = {}, []
        for p, t, a in zip(params, param_types, args):
            sym = self.fresh_symbol(p.name, t)
            symbols.append(sym)
            if a.fn is not None and not isinstance(t, Fun):
                bindings[p.name] = Val(a.type, a.dist, I.IVar(p.name), a.const, a.fn)
            elif isinstance(t, Fun):
                # Its symbol is how far the function moves (what it captured); one that captures
                # nothing private does not move (the key says so), and charges its releases nothing
                # more than its arguments' (rule Rho).
                bindings[p.name] = Val(t, {} if _public(a) else {sym: ONE}, I.IVar(p.name), NOCONST, Opaque(t))
            elif _public(a):  # a released value: the same on neighbouring inputs (the key says so)
                bindings[p.name] = Val(t, {}, I.IVar(p.name))
            else:
                bindings[p.name] = Val(t, {sym: ONE}, I.IVar(p.name), a.const)
            self._note_binding(p.span, p.name, bindings[p.name])
        summary.param_syms = symbols  # a recursive call met in the body maps onto these
        summary.frame = env.extend(bindings)
        body = fn.decl.body if isinstance(fn, TopFn) else fn.body
        return self.expr(body, summary.frame), symbols

    def _check_holder_body(self, fn: Closure, types: list[Type], holders: list[Val], summary: Summary):
        """`_check_body` for fresh holders: each is public (distance {}) or moves by one symbol,
        and carries no constant or function, so a parameter is bound as `_check_body` binds it."""
        bindings, symbols = {}, []
        for p, t, h in zip(fn.params, types, holders):
            sym = self.fresh_symbol(p.name, t)
            symbols.append(sym)
            bindings[p.name] = v = Val(t, {sym: ONE} if h.dist else {}, I.IVar(p.name))
            self._note_binding(p.span, p.name, v)
        summary.param_syms = symbols
        summary.frame = fn.env.extend(bindings)
        return self.expr(fn.body, summary.frame), symbols

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
        coerced = self.to_opaque(body, declared, fn.decl.body.span)
        coerced.risk = r_union(body.risk, coerced.risk)
        return coerced

    def _check_return(self, fn, body: Val, param_types: list[Type]) -> Type:
        """The body's type must fit the declared return type, type variables instantiated by this
        instance's parameters (rule Instance): a recursive call assumed exactly that type."""
        if not isinstance(fn, TopFn) or fn.decl.ret is None:
            return body.type
        declared = self._declared_return(fn.decl, param_types)
        if _has_hole(declared):  # a type variable only given by an empty list: the body's type decides
            fits = match_type(self.types.resolve(fn.decl.ret), body.type)
        else:
            fits = is_subtype(body.type, declared)
        if not fits:
            raise self.fail("E0202", f"{fn.decl.name} returns {body.type}, but its declared return type is "
                            f"{declared}", fn.decl.body.span,
                            *nested_fuzzy_hint(body.type.inner if isinstance(body.type, Fuzzy) else None))
        return body.type if _has_hole(declared) else declared

    # ---- the caller's side of rule Instance ------------------------------------------------------

    # rule Rho: each parameter's shadow coefficients lifted onto its argument
    # rule Unroll: the calls it nests and makes are noted in the caller
    def map_summary(self, summary: Summary, args: list[Val], span: Span) -> tuple[Dist, Dist]:
        """A call's distance and failure risk, and its table growth noted in the caller: each
        parameter's component scaled by (or, for risk, present on) its argument."""
        dist: Dist = dict(summary.captured)
        # (an empty risk or growth, the common case, skips its comprehension's call)
        risk = {s: c for s, c in summary.risk.items() if s not in summary.param_syms} if summary.risk else {}
        # Functions of a declared type given to it are applied inside it: their nesting adds up,
        # and one of unknown depth may exceed the runtime's limits there (FAIL).
        given = [a.fn for a, t in zip(args, summary.param_types) if isinstance(t, Fun) and isinstance(a.fn, Opaque)]
        if given and not all(g.complete for g in given):
            risk = r_union(risk, {FAIL: ONE})
        growth = {s: c for s, c in summary.growth.items() if s not in summary.param_syms} if summary.growth else {}
        for i, (coef, a, t, sym) in enumerate(zip(summary.coefs, args, summary.param_types, summary.param_syms)):
            if isinstance(t, FnT) or not a.dist:
                # A function value checked inside this instance (not through a symbol): each of
                # its applications, and any use of it as data, is already in the body's distance.
                # An argument at distance {} adds nothing below (each term is a multiple of it).
                continue
            dist = d_add(dist, self._scale(coef, a.dist, span, apply=True))
            if summary.quad and summary.quad[i]:
                dist = d_add(dist, self.lift(summary.quad[i], a.dist, span))
            present = summary.risk.get(sym)
            if present is not None and present != 0:
                risk = r_union(risk, r_presence(a.dist, present))
            if FAIL in risk and holds_choices(t):
                # An argument that may move infinitely far (a bool, a sum's side, a list's length)
                # can change which branches run inside, whatever its parameter's coefficient: the
                # risk's counterpart of 0 * inf = inf (rule Instance).  Numbers, strings and
                # categories are only branched on through comparisons, which rule Branch sees.
                risk = r_union(risk, self.choice_presence(a.dist))
            g = summary.growth.get(sym, ZERO)
            if g != 0 and holds_tables(t):  # only tables have a size to grow
                growth = d_add(growth, self._scale(g, a.dist, span, apply=True))
        self.note_growth(growth)
        if given:
            self.note_depth(summary.depth + max(g.depth for g in given),
                            max([summary.draw_depth] + [g.depth + g.draw_depth for g in given]))
        else:
            self.note_depth(summary.depth, summary.draw_depth)
        if self.stack:
            self.stack[-1].calls += summary.calls
        return dist, risk

    @staticmethod
    def choice_presence(d: Dist) -> Dist:
        """The presence of d's entries that are (or, not solved yet, may be) infinite: an entry
        still unknown inside a recursion may turn out infinite, so it counts (sound, and a known
        source of false rejections: docs/soundness.md, rule Instance)."""
        return r_presence(infinite_part(d))

    # rule Declared: a returned function of a declared type, with the calls it nests
    @staticmethod
    def returned_opaque(summary: Summary) -> Opaque:
        """Rule Unroll: a function of a declared type returned by an instance, with the calls its
        applications nest; a recursion's assumed summary does not know them (`complete` false)."""
        if isinstance(summary.returned, Opaque):
            return summary.returned
        return Opaque(summary.cod, complete=False)

    def note_depth(self, depth: int, draw_depth: int) -> None:
        """Rule Unroll: a call nesting `depth` calls when it runs (and `draw_depth` when what it
        builds is drawn) is made here; under `sample` it runs when drawn, from depth 0."""
        if not self.stack:
            return
        top = self.stack[-1]
        if self.deferred > top.deferred:
            top.draw_depth = max(top.draw_depth, depth, draw_depth)
        else:
            top.callee_depth = max(top.callee_depth, depth)
            top.draw_depth = max(top.draw_depth, draw_depth)

    def rebind_returned(self, summary: Summary, args: list[Val], span: Span) -> Optional[FnValue]:
        """Rule Closure: a function value an instance returns, seen from the call.  Its
        environment is the instance's, where parameters are distance symbols; at the call they
        stand for the arguments, so every value the function can reach is re-expressed in the
        caller's symbols (parts split inside the instance first replaced by what they split).
        Each later application then checks its body in that environment, as for any closure."""
        if summary.returned is None or summary.frame is None:
            return None
        subst = {sym: a.dist for sym, a, t in zip(summary.param_syms, args, summary.param_types)
                 if not isinstance(t, FnT)}
        return _Rebinder(self, subst, summary.frame, summary.since, span).fn(summary.returned)

    # rule Growth: a table built here, in rows of the input tables
    def note_growth(self, dist: Dist) -> None:
        """A table as large as `dist` (rows of the inputs it is built from) exists at run time."""
        if dist and self.stack:
            top = self.stack[-1]  # parts split in this instance are replaced by what they split
            rows = {s: c for s, c in self.eliminate(dist, top.since).items() if s in self.table_syms}
            top.growth = self.d_max(top.growth, rows)

    # ---- solving --------------------------------------------------------------------------------

    # rule Recursion: the least solution of the unknowns, certified, then substituted
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
            summary.quad = [_nonzero(d_substitute(q, values)) for q in summary.quad]
            summary.captured = _nonzero(d_substitute(summary.captured, values))
            summary.risk = r_normal(_nonzero(d_substitute(summary.risk, values)))
            summary.growth = _nonzero(d_substitute(summary.growth, values))
        self.unsolved = []
        for c, bound, pspan, name in self.pending_checks:
            v = substitute(c, values)
            if v > bound:
                raise self.fail("E0301", f"{name} is used with sensitivity {fmt_coef(v)} by this recursive "
                                f"function, but its annotation allows {fmt_coef(bound)}", pspan)
        self.store = ConstraintStore()
        self.pending_checks = []


# rule Closure: a returned function's scopes re-expressed in the caller's symbols
class _Rebinder:
    """Re-express values reachable from a returned function in the caller's symbols."""

    def __init__(self, checker, subst: dict[str, Dist], frame: Env, since: int, span: Span):
        self.ck, self.subst, self.frame, self.since, self.span = checker, subst, frame, since, span
        self.envs: dict[int, Env] = {}

    def fn(self, f: FnValue) -> FnValue:
        if isinstance(f, Closure):
            env = self.env(f.env)
            return f if env is f.env else Closure(f.params, f.body, env, f.label)
        if isinstance(f, Partial):
            fv, given = self.val(f.fn), [self.val(v) for v in f.given]
            if fv is f.fn and all(a is b for a, b in zip(given, f.given)):
                return f
            return Partial(fv, given, f.arity_left)
        return f  # top-level functions and functions of a declared type capture nothing here

    def env(self, env: Optional[Env]) -> Optional[Env]:
        """Every scope of the chain is rebuilt, whoever created it: a function returned through
        several calls carries scopes rebuilt by the inner calls, whose values already mention
        the parameters of this one.  Scopes that mention none of them are kept as they are."""
        if env is None or env is self.ck.globals:
            return env
        done = self.envs.get(id(env))
        if done is None:
            parent = self.env(env.parent)
            vals = {n: self.val(v) for n, v in env.vars.items()}
            same = parent is env.parent and all(vals[n] is v for n, v in env.vars.items())
            done = self.envs[id(env)] = env if same else Env(vals, parent)
        return done

    def val(self, v: Val) -> Val:
        parts = None if v.parts is None else [self.dist(p) for p in v.parts]
        fn = None if v.fn is None else self.fn(v.fn)
        dist = self.dist(v.dist)
        if dist is v.dist and fn is v.fn and (parts is None or all(p is q for p, q in zip(parts, v.parts))):
            return v
        return Val(v.type, dist, v.ir, v.const, fn, parts)

    def dist(self, d: Dist) -> Dist:
        flat = self.ck.eliminate(d, self.since)
        if not any(sym in self.subst or base_of(sym) in self.subst for sym in flat):
            return d if flat == d else flat
        out: Dist = {}
        for sym, c in flat.items():
            if sym in self.subst:
                out = d_add(out, self.ck.scale_apply(c, self.subst[sym], self.span))
            elif is_shadow(sym) and base_of(sym) in self.subst:  # rule Rho
                out = d_add(out, self.ck.lift({channel_of(sym): c}, self.subst[base_of(sym)], self.span))
            else:
                out = d_add(out, {sym: c})
        return out


def _parameter(fn: FnValue, p: A.Param) -> str:
    """A parameter, as coerce names it in an error."""
    fname = fn.decl.name if isinstance(fn, TopFn) else "this function"  # type: ignore[union-attr]
    return f"parameter {p.name} of {fname}"


# rule Instance: an argument whose parameter is checked as public (the key records it)
def _public(a: Val) -> bool:
    """A public value that is not a constant (a released value, a public candidate), or a function
    of a declared type that captures nothing private: an instance checked for it treats the
    parameter as public and is never used for a private argument."""
    if a.fn is not None:
        return isinstance(a.fn, Opaque) and not a.dist
    return not a.dist and not a.is_const


def _candidates(args: list[Val], param_types: list[Type]) -> frozenset:
    """The symbols an instance can capture: those of the function values it is given (a
    top-level function's own environment holds only public constants).  Their shadow entries
    (rule Rho) are costs on those symbols: the symbol is the candidate, and the assumed summary
    gets a shadow unknown for it (`_assume`)."""
    out: set[str] = set()
    for a, t in zip(args, param_types):
        if a.fn is not None and not isinstance(t, Fun):
            out |= {base_of(s) for s in a.dist}
    return frozenset(out)


def _mentions_unknowns(s: Summary) -> bool:
    """Does any component mention an LP unknown (a `Lin`, what is_const tells apart)?"""
    for c in s.coefs:
        if isinstance(c, Lin):
            return True
    for part in (s.captured, s.risk, s.growth, *s.quad):
        for c in part.values():
            if isinstance(c, Lin):
                return True
    return False


def _nonzero(d: Dist) -> Dist:
    return {s: c for s, c in d.items() if c != 0}


__all__ = ["Summary", "InstanceRules", "WIDEN_SPECULATIVE", "MAX_INSTANCES", "apply_scale"]


# rule Functions in containers: a container's function may release when a recursion applies it
def _holds_function(t: Type) -> bool:
    """Does a parameter of this type carry, inside a container, a function whose result holds
    distributions (applied by its type in the body, so a recursion may release through it)?"""
    parts = components(t)
    return parts is not None and any(isinstance(p, Fun) and holds_fuzzy(p) or _holds_function(p) for p in parts)
