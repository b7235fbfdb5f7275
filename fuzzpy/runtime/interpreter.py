"""The interpreter: evaluates the IR of a checked program over loaded tables.

Only programs the checker accepted reach this module, and the runtime never re-decides what the
checker decided: which branch a constant condition takes, which function instance is called,
each mechanism's calibration (in `IPrim.info`) all come from the IR.

Evaluation is eager except for distributions: `sample x = d; body` evaluates to a `Bind` that
runs only when sampled, so a distribution sampled twice draws fresh noise twice (as the checker
charged).  The entry point's distribution is sampled once, at the top.  Row functions given to
bag primitives run column-at-a-time (`vectorize.py`).  See docs/runtime.md.

Nothing here may raise on a data-dependent value: primitives are total, and the only errors
this module raises itself (`RunFailure`) carry messages fixed by the program text.
"""

from __future__ import annotations

import numpy as np

import math
import operator
import sys
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

from ..checking import ir as I
from ..diagnostics import Diagnostic, FuzzError, Span
from ..primitives.registry import Primitive, lookup
from .node_memo import NodeMemo
from .values import (Closure, Distribution, Located, ReleaseRecord, Returned, is_distribution,
                     materialise)

from .. import limits
from ..limits import RECURSION_LIMIT, STACK_BYTES  # noqa: F401 - re-exported for the auditor

# Primitives whose runtimes accept lazy MaskedBags; every other primitive gets plain frames.
# (`part` and `values` hand parts on as they are: a list of released results is not walked.)
LAZY_BAG_PRIMITIVES = frozenset({"count", "filter", "map", "sum", "union", "split", "groupby", "part",
                                 "values", "pmap", "each", "vsum"})
# Those of them with no run context, fold or vectors: their arguments are bags, partitions and
# keys (strings), which `as_float` returns unchanged, so they run on them as they are
# (tests/runtime/test_interpreter.py checks this list against the registry).
BAG_ONLY = frozenset({"count", "part", "values", "union"})


class RunFailure(FuzzError):
    """An error whose message depends only on the program (never on data): safe to show."""

    def __init__(self, message: str, span: Optional[Span] = None):
        super().__init__(Diagnostic("E0604", message, span))


# How far back `Context.release_of` looks: estimates are made right after their releases.
PROVENANCE_WINDOW = 16


# ---- run state and the RunContext handed to primitives -----------------------------------------

@dataclass
class RunState:
    rng: Any
    vectorise: bool = True           # False: every row function runs row by row (tests)
    batch: bool = True               # False: pmap and selection scores run once per part/candidate (tests)
    releases: list[ReleaseRecord] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)     # partition keys of the `each` being sampled
    no_vector: set[int] = field(default_factory=set)  # row functions known to need the fallback
    depth: int = 0                                    # function instances nested right now
    named: int = 0                                    # releases below this index have a name
    row_calls: Optional[int] = None                   # calls one row may still make (row by row)
    fallbacks: int = 0                                # row functions that ran row by row
    user_file: Optional[str] = None                   # the program's own file: labels come from it
    sites: list = field(default_factory=list)         # calls in user_file being run, innermost last
    user_named: int = 0                               # releases below this index have a user name
    engine: Any = None                                # the tables' engine when not pandas (engines/)
    memo: dict = field(default_factory=dict)          # groupby key codes per base table (partitions.py)
    kept: dict = field(default_factory=dict)          # id(table) -> (table, KeptCodes): codes kept across runs
    estimates: list = field(default_factory=list)     # EstimateRecords (post-processing of releases)
    compiled: bool = True                             # False: public functions are walked too (tests)
    # False: only public functions run compiled; the others' bindings stay IR (`Bind`), which the
    # auditor's batched sampler evaluates on lanes (audit/batched.py)
    effects_compiled: bool = True


class Context:
    """The RunContext of one primitive call (see primitives/registry.py)."""

    __slots__ = ("interp", "info", "span", "site")

    def __init__(self, interp: "Interpreter", info: dict, span: Optional[Span]):
        self.interp = interp
        self.info = info
        self.span = span
        sites = interp.state.sites
        self.site = sites[-1] if sites else None  # a mechanism may be drawn after its call returned

    @property
    def rng(self) -> Any:
        return self.interp.state.rng

    def call(self, fn: Any, *args: Any) -> Any:
        return self.interp.apply(fn, list(args))

    def vectorised(self, fn: Any) -> Callable[[Any], Any]:
        from .vectorize import row_function

        return row_function(self.interp.state, fn)

    def record_release(self, mechanism: str, value: Any, epsilon: Fraction, scale: Fraction,
                       accuracy: Any, **extra: Any) -> None:
        state = self.interp.state
        site = state.sites[-1] if state.sites else self.site
        state.releases.append(ReleaseRecord(mechanism, self.span, _fraction(epsilon), _fraction(scale), accuracy,
                                            value, None, tuple(state.keys), extra, site))

    def release_of(self, value: Any, mechanisms: tuple[str, ...], window: int = 1) -> Optional[ReleaseRecord]:
        """Among the last `window` releases, the latest by one of `mechanisms` whose value (or one
        of whose coordinates) is this very object: the provenance of a released value passed on
        unchanged.  Additive mechanisms return fresh float objects, so identity names exactly
        one release; an estimate is made right after its releases, hence the small window."""
        releases = self.interp.state.releases
        for rec in reversed(releases[-min(window, PROVENANCE_WINDOW):]):
            if rec.mechanism in mechanisms and (rec.value is value or (  # a coordinate: fresh floats only
                    rec.mechanism in ("laplace", "gaussian") and isinstance(rec.value, tuple)
                    and any(v is value for v in rec.value))):
                return rec
        return None

    def record_estimate(self, estimate: Any) -> None:
        self.interp.state.estimates.append(estimate)


def _fraction(x: Any) -> Fraction:
    """x as a Fraction: itself when it is one (Fraction(x) goes through the numbers ABC)."""
    return x if type(x) is Fraction else Fraction(x)


# ---- distributions built by the interpreter --------------------------------------------------------

class Bind(Distribution):
    """`sample pattern = bound; body`, not yet run."""

    __slots__ = ("interp", "node", "env", "site")

    def __init__(self, interp: "Interpreter", node: I.ISample, env: dict):
        self.interp, self.node, self.env = interp, node, env
        sites = interp.state.sites
        self.site = sites[-1] if sites else None  # drawn later: the user's call that built it

    @staticmethod
    def _label(state: Any, node: I.ISample, before: int) -> None:
        label = pattern_label(node.pattern)  # releases made while drawing `bound` are this binding's
        # Inner bindings named theirs already (all releases below `named` have a name), so
        # a chain of n nested samples labels n releases, not n^2.
        for rec in state.releases[max(before, state.named):]:
            if rec.name is None:
                rec.name = label
        state.named = len(state.releases)
        if state.user_file is not None and node.span is not None and node.span.file == state.user_file:
            for rec in state.releases[max(before, state.user_named):]:  # the user's name wins
                rec.user_name = label
            state.user_named = len(state.releases)

    def bound(self) -> Any:
        """The distribution to draw from, evaluated when the binding is sampled."""
        return self.interp.eval(self.node.bound, self.env)

    def rest(self, value: Any) -> Any:
        """The body with the pattern bound to the drawn value."""
        return self.interp.eval(self.node.body, bind(self.env, self.node.pattern, value))

    def sample(self, ctx: Any) -> Any:
        dist: Any = self
        while isinstance(dist, Bind):  # a loop, not recursion: long sample chains stay flat
            interp, node = dist.interp, dist.node
            state = interp.state
            before = len(state.releases)
            site = dist.site
            if site is not None:  # Binds built below (the rest of a chain) keep the user's call
                state.sites.append(site)
            try:
                value = interp.draw(dist.bound())
                self._label(state, node, before)
                dist = dist.rest(value)
            finally:
                if site is not None:
                    state.sites.pop()
        return self.interp.draw(dist)


class CompiledBind(Bind):
    """A `sample` in a compiled function (compiled.py): the same binding, with its bound and its
    body as the generated Python functions that evaluate them (`env` is unused)."""

    __slots__ = ("bound_fn", "rest_fn")

    def __init__(self, interp: "Interpreter", node: I.ISample, bound_fn: Callable[[], Any],
                 rest_fn: Callable[[Any], Any]):
        super().__init__(interp, node, {})
        self.bound_fn, self.rest_fn = bound_fn, rest_fn

    def bound(self) -> Any:
        return self.bound_fn()

    def rest(self, value: Any) -> Any:
        return self.rest_fn(value)


# ---- patterns and constants -----------------------------------------------------------------------

def pattern_label(pattern: Any) -> str:
    """How a binding pattern is shown next to the values released for it: x, (u, v), _."""
    if pattern is None:
        return "_"
    if isinstance(pattern, str):
        return pattern
    kind, items = pattern
    inner = ", ".join(pattern_label(p) for p in items)
    return f"({inner})" if kind == "tensor" else f"(|{inner}|)"


def bind(env: dict, pattern: Any, value: Any) -> dict:
    """A new environment with `pattern` (name, None, or (kind, [patterns])) bound to `value`."""
    if pattern is None:
        return env
    out = dict(env)
    _bind_into(out, pattern, value)
    return out


def _bind_into(out: dict, pattern: Any, value: Any) -> None:
    if pattern is None:
        return
    if isinstance(pattern, str):
        out[pattern] = value
        return
    _, items = pattern
    if not isinstance(value, tuple) or len(value) != len(items):
        raise TypeError("tuple pattern on a value that is not a tuple")  # vector mode falls back
    for p, v in zip(items, value):
        _bind_into(out, p, v)


def runtime_const(v: Any, exact: bool = True) -> Any:
    """Check-time constants as runtime values: exact (Fractions) for scalar evaluation, floats
    for column evaluation (`exact=False`)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (Fraction, int)):
        return Fraction(v) if exact else as_float(v)
    if isinstance(v, (tuple, list)):
        return tuple(runtime_const(x, exact) for x in v)
    if isinstance(v, dict):
        return {k: runtime_const(x, exact) for k, x in v.items()}
    return v


# A constant's runtime value per IR node, shared by every interpreter (a program run many times,
# a lane evaluator per batch): converting a long public list to Fractions is otherwise repeated at
# every run.  Only immutable values are shared (no dicts), kept on the node (runtime/node_memo.py):
# they live as long as the checked program.
_CONSTS = NodeMemo("const")


def shared_const(node: Any, exact: bool) -> Any:
    pair = _CONSTS.get(node)
    if pair is None:
        pair = (_UNSET, _UNSET)
    v = pair[0 if exact else 1]
    if v is _UNSET:
        v = runtime_const(node.value, exact)
        if _immutable(v):
            _CONSTS[node] = (v, pair[1]) if exact else (pair[0], v)
    return v


_UNSET = object()


def _immutable(v: Any, depth: int = 0) -> bool:
    if type(v) is tuple:
        return depth < 16 and all(_immutable(x, depth + 1) for x in v)
    return v is None or isinstance(v, (bool, str, int, float, Fraction))


def as_float(v: Any) -> Any:
    """An exact number as a float (saturating), for numpy; anything else unchanged."""
    t = type(v)
    if t is float:  # the common case first: a released value, a row function's float
        return v
    if t is Fraction or t is int or isinstance(v, Fraction) or (isinstance(v, int) and not isinstance(v, bool)):
        try:
            return float(v)
        except OverflowError:
            return float("inf") if v > 0 else float("-inf")
    return v


def exact_scalar(v: Any) -> Any:
    """A number as an exact Fraction (ints, finite floats, numpy scalars); an infinity or NaN
    stays a float (Python mixes it with Fractions as an extended real: min(q, inf) is q, exactly);
    None when it is not a number (an array, a string...)."""
    t = type(v)
    if t is float:  # the common case first: a released value
        return Fraction(v) if math.isfinite(v) else v
    if t is Fraction:
        return v
    if isinstance(v, bool):
        return None
    if isinstance(v, Fraction):
        return v
    if isinstance(v, (int, np.integer)):
        return whole_fraction(int(v))
    if isinstance(v, (float, np.floating)):
        return Fraction(float(v)) if np.isfinite(v) else float(v)
    return None


def field_of(value: Any, name: str) -> Any:
    if isinstance(value, tuple):  # a record constant: ((name, value), ...)
        return dict(value)[name]
    return value[name]


# ---- the evaluator ------------------------------------------------------------------------------

class Interpreter:
    """Evaluates IR to runtime values (docs/runtime.md).  One instance per row-wise context;
    all of them share one `RunState`."""

    def __init__(self, state: RunState, exact: bool = True):
        self.state = state
        self._prims: dict[str, Primitive] = {}
        self._consts: dict[int, Any] = {}
        self._compiled: dict[int, tuple] = {}  # id(instance) -> (instance, its compiled code or None)
        self._effectful: dict[int, tuple] = {}  # the same, for any function (compiled.effectful_function)
        self._bodies: dict[int, tuple] = {}  # id(body) -> (body, params, compiled.body_function's answer)
        # Exact arithmetic for values that can reach a mechanism; row functions (which only
        # ever feed per-row results to bag primitives) use floats, like their column path.
        self.exact = exact
        # Functions run as compiled Python (compiled.py) from this evaluator only: the
        # subclasses change what a step does (lanes, columns, the oracle's records).
        self.compiled = exact and state.compiled and type(self) is Interpreter  # public functions
        self.effects = self.compiled and state.effects_compiled  # functions with effects and function values too

    # -- entry points --------------------------------------------------------------------------

    _table: dict[type, Callable[..., Any]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._table = _dispatch_table(cls)

    def eval(self, node: I.IR, env: dict) -> Any:
        return self._table[type(node)](self, node, env)

    def apply(self, fn: Any, args: list[Any]) -> Any:
        """Call a function value that carries its own code (row functions, per-part functions)."""
        if not isinstance(fn, Closure) or fn.body is None or fn.params is None:
            raise RunFailure("internal error: a function passed to a primitive has no code")
        if self.effects:
            code = self.body_code(fn.body, fn.params, fn.env, args)
            if code is not None:
                return code(self, self.state, fn.env, *args)
        env = dict(fn.env)
        env.update(zip(fn.params, args))
        return self.eval(fn.body, env)

    def draw(self, value: Any) -> Any:
        """Sample a distribution (the checker guarantees `value` is one)."""
        if is_distribution(value):
            return value.sample(Context(self, {}, None))
        raise RunFailure("internal error: sampled something that is not a distribution")

    # -- nodes -----------------------------------------------------------------------------------

    def e_IConst(self, node: I.IConst, env: dict) -> Any:
        v = self._consts.get(id(node), _UNSET)
        if v is _UNSET:
            v = self._consts[id(node)] = shared_const(node, self.exact)
        return v

    def e_IVar(self, node: I.IVar, env: dict) -> Any:
        try:
            return env[node.name]
        except KeyError:
            raise RunFailure(f"internal error: '{node.name}' is not bound at run time", node.span) from None

    def e_ILet(self, node: I.ILet, env: dict) -> Any:
        while type(node) is I.ILet:  # let chains are loops, not recursion
            env = bind(env, node.pattern, self.eval(node.bound, env))
            node = node.body  # type: ignore[assignment]
        return self.eval(node, env)

    def e_ISample(self, node: I.ISample, env: dict) -> Any:
        return Bind(self, node, env)

    def e_IReturn(self, node: I.IReturn, env: dict) -> Any:
        return Returned(self.eval(node.value, env))

    def e_IIf(self, node: I.IIf, env: dict) -> Any:
        return self.eval(node.then if self.eval(node.cond, env) else node.other, env)

    def e_IPrim(self, node: I.IPrim, env: dict) -> Any:
        prim = self.prim(node)
        return self.call_prim(prim, node, [self.eval(a, env) for a in node.args])

    def e_ICall(self, node: I.ICall, env: dict) -> Any:
        return self.call_instance(node, [self.eval(a, env) for a in node.args])

    def e_IClosure(self, node: I.IClosure, env: dict) -> Any:
        return Closure(env)

    def e_ILambda(self, node: I.ILambda, env: dict) -> Any:
        # The code was checked at this program point, so the current environment is the one
        # its free names (including the function it wraps) refer to.
        return Closure(env, node.params, node.body)

    def e_IApply(self, node: I.IApply, env: dict) -> Any:
        fn = self.eval(node.fn, env)
        args = [self.eval(a, env) for a in node.args]
        if node.body is None:
            return self.apply(fn, args)
        return self.apply_at(node, fn, args)

    def apply_at(self, node: I.IApply, fn: Any, args: list[Any]) -> Any:
        """An application whose code is known at its site (an IClosure's value applied)."""
        if not isinstance(fn, Closure):
            raise RunFailure("internal error: applied a value that is not a function", node.span)
        if self.effects and node.params is not None:
            code = self.body_code(node.body, node.params, fn.env, args)
            if code is not None:
                return code(self, self.state, fn.env, *args)
        inner = dict(fn.env)
        inner.update(zip(node.params or [], args))
        return self.eval(node.body, inner)

    def e_ITuple(self, node: I.ITuple, env: dict) -> Any:
        return tuple(self.eval(x, env) for x in node.items)

    def e_IProj(self, node: I.IProj, env: dict) -> Any:
        return self.eval(node.value, env)[node.index]

    def e_IField(self, node: I.IField, env: dict) -> Any:
        return field_of(self.eval(node.value, env), node.name)

    def e_IRecord(self, node: I.IRecord, env: dict) -> Any:
        return {name: self.eval(x, env) for name, x in node.fields}

    def e_IInject(self, node: I.IInject, env: dict) -> Any:
        return (node.side, self.eval(node.value, env))

    def e_ICase(self, node: I.ICase, env: dict) -> Any:
        return self.case_on(node, self.eval(node.scrutinee, env), env)

    def e_IList(self, node: I.IList, env: dict) -> Any:
        return tuple(self.eval(x, env) for x in node.items)

    def e_ICons(self, node: I.ICons, env: dict) -> Any:
        head = self.eval(node.head, env)
        return (head,) + tuple(self.eval(node.tail, env))

    # -- shared pieces (overridden by the vectorising evaluator) ------------------------------------

    def case_on(self, node: I.ICase, value: Any, env: dict) -> Any:
        if node.kind == "sum":
            side, inner = value
            pattern, body = node.left if side == "inl" else node.right
            return self.eval(body, bind(env, pattern, inner))
        if len(value) == 0:
            return self.eval(node.left[1], env)
        (head_p, tail_p), body = node.right
        return self.eval(body, bind(bind(env, head_p, value[0]), tail_p, tuple(value[1:])))

    def call_instance(self, node: I.ICall, args: list[Any]) -> Any:
        inst = node.instance
        if inst.body is None:
            raise RunFailure(f"internal error: function {inst.name} was not checked", node.span)
        state = self.state
        if state.depth >= limits.CALL_DEPTH:  # only recursion the checker could not unroll gets here
            raise RunFailure(f"function calls nested more than {limits.CALL_DEPTH} deep", node.span)
        if state.row_calls is not None:  # one row's budget: past it the row's value is missing
            state.row_calls -= 1
            if state.row_calls < 0:
                raise RunFailure(f"a row made more than {limits.ROW_CALLS} calls", node.span)
        state.depth += 1
        site = node.span is not None and node.span.file == state.user_file
        if site:
            state.sites.append(node.span)
        try:
            return self.call_body(inst, args)
        finally:
            state.depth -= 1
            if site:
                state.sites.pop()

    def call_body(self, inst: I.Instance, args: list[Any]) -> Any:
        """A checked function's body on its arguments (the call itself counted by the caller)."""
        if self.compiled:
            state = self.state
            if state.engine is None and state.row_calls is None:
                fn = self.compiled_of(inst, effects=self.effects)
                if fn is not None:
                    return fn(self, state, *args)
        return self.eval(inst.body, dict(zip(inst.params, args)))  # type: ignore[arg-type]

    def body_code(self, body: I.IR, params: list[str], env: dict, args: list[Any]) -> Optional[Callable[..., Any]]:
        """compiled.body_function's code for a function value's body, when it may run here as
        call_body decides for a function (no engine, no row budget), on exactly its parameters,
        with every name it reads captured."""
        state = self.state
        if state.engine is not None or state.row_calls is not None or len(args) != len(params):
            return None
        hit = self._bodies.get(id(body))
        if hit is None or hit[0] is not body or (hit[1] is not params and hit[1] != params):
            hit = self._bodies[id(body)] = (body, params, compiled.body_function(body, tuple(params)))
        found = hit[2]
        if found is None or not found[1] <= env.keys():
            return None
        return found[0]

    def compiled_of(self, inst: I.Instance, effects: bool = False) -> Optional[Callable[..., Any]]:
        """compiled.compiled_function(inst) (a public function's code), or with `effects`
        compiled.effectful_function(inst) (any function's), looked up once per instance by this
        evaluator (a dictionary lookup by id, cheaper than asking compiled.py at every call)."""
        table = self._effectful if effects else self._compiled
        hit = table.get(id(inst))
        if hit is None or hit[0] is not inst:
            make = compiled.effectful_function if effects else compiled.compiled_function
            hit = table[id(inst)] = (inst, make(inst))
        return hit[1]

    def prim(self, node: I.IPrim) -> Primitive:
        prim = self._prims.get(node.name)
        if prim is None:
            prim = lookup(node.name)
            if prim is None or prim.run is None:
                raise RunFailure(f"primitive {node.name} has no runtime implementation", node.span)
            self._prims[node.name] = prim
        return prim

    def call_prim(self, prim: Primitive, node: I.IPrim, args: list[Any]) -> Any:
        if self.state.engine is not None:  # tables held by another engine (runtime/engines)
            out = self.state.engine.call_prim(self, prim, node, args)
            if out is not NotImplemented:
                return out
        elif self.exact and prim.fold is not None and not prim.needs_context and not prim.structured:
            # Scalar arithmetic and comparisons (most calls of a program's public control flow):
            # materialising is the identity on scalars, so this is the path below, taken first.
            exact = fold_exact(prim.fold, args)
            if exact is not _NOT_EXACT:
                return exact
        if prim.name in LAZY_BAG_PRIMITIVES:
            if prim.name in BAG_ONLY:
                return prim.run(*args)  # type: ignore[misc]
        else:
            args = [materialise(a) for a in args]
        if prim.needs_context:
            return call_with_context(self, prim, node, args)
        if prim.structured:  # vectors: exact on exact numbers (outside row functions), floats in rows
            return prim.run(*args)  # type: ignore[misc]
        if prim.fold is not None and self.exact:
            exact = fold_exact(prim.fold, args)
            if exact is not _NOT_EXACT:
                return exact
        return prim.run(*[as_float(a) for a in args])  # type: ignore[misc]


def call_with_context(interp: Interpreter, prim: Primitive, node: I.IPrim, args: list[Any]) -> Any:
    """A primitive that takes a run context, on arguments as `call_prim` prepares them; a
    distribution it makes is drawn later with this call's context (its span labels releases)."""
    ctx = Context(interp, node.info, node.span)
    out = prim.run(ctx, *args)  # type: ignore[misc]
    return Located(out, ctx) if is_distribution(out) else out


_NOT_EXACT = object()


def fold_exact(fold: Callable[..., Any], args: Any) -> Any:
    """Scalar arithmetic and comparisons in exact arithmetic (the checker's reals, extended with
    the infinities); booleans and strings pass through.  _NOT_EXACT when an argument is not a
    scalar."""
    if len(args) == 2:
        a, b = args
        ta, tb = type(a), type(b)
        if fold in _COMPARE and ta in _NUMBERS and tb in _NUMBERS:
            # Python compares ints, floats and Fractions with each other exactly (an infinity or
            # NaN as the extended real exact_arg keeps it as), so the comparison of the values
            # themselves is the comparison of their exact values.
            return fold(a, b)
        if (ta is Fraction or ta is int) and (tb is Fraction or tb is int):
            # Two exact numbers (exact_arg: an int is its Fraction).  On whole numbers (counts,
            # their sums, public integers) the fold's result comes from the integers directly:
            # the same value and type, without the Fraction protocol (`_WHOLE`).
            on_ints = _WHOLE.get(fold)
            if on_ints is not None and a.denominator == 1 and b.denominator == 1:
                return on_ints(a, b)
            return fold(a if ta is Fraction else whole_fraction(a),
                        b if tb is Fraction else whole_fraction(b))
        if (ta is str or ta is bool) and (tb is str or tb is bool):  # exact_arg keeps them as they are
            return fold(a, b)
    exact = []
    for a in args:
        q = exact_arg(a)
        if q is None:
            return _NOT_EXACT
        exact.append(q)
    return fold(*exact)


def _whole_by_slots(n: int) -> Fraction:
    f = _new_object(Fraction)
    f._numerator, f._denominator = n, 1  # type: ignore[attr-defined]
    return f


_new_object = object.__new__
# whole_fraction(n): Fraction(n) for a Python int n.  Whole numbers (counts and their sums) are
# most of the Fractions a run makes, and the constructor's argument handling is two thirds of
# making one; the Fraction built directly has the same value and state (lowest terms,
# denominator 1).  Only where fractions.Fraction keeps its value in exactly these two slots
# (CPython 3.10 to 3.13); anywhere else, the constructor.
whole_fraction: Callable[[int], Fraction] = (
    _whole_by_slots if getattr(Fraction, "__slots__", None) == ("_numerator", "_denominator")
    and _whole_by_slots(7) == Fraction(7) and hash(_whole_by_slots(7)) == hash(Fraction(7)) else Fraction)


SMALL_WHOLES = 4096
_SMALL: Optional[list[Fraction]] = None


def whole_fractions(ints: np.ndarray) -> list[Fraction]:
    """[whole_fraction(v) for v in ints] for an int array.  Counts are mostly small: those in
    [0, SMALL_WHOLES) are taken from one table of Fractions made once (Fractions are immutable,
    so one object can stand for every equal count; making one costs five times reading one)."""
    table = small_wholes()
    # a test per element, not a min and a max of the array: lanes are often a dozen candidates
    return [table[v] if 0 <= v < SMALL_WHOLES else whole_fraction(v) for v in ints.tolist()]


def small_wholes() -> list[Fraction]:
    """The table of whole_fraction(i) for i in [0, SMALL_WHOLES), made on first use."""
    global _SMALL
    table = _SMALL
    if table is None:  # built whole, then published: a thread sees the whole table or none
        table = _SMALL = [whole_fraction(i) for i in range(SMALL_WHOLES)]
    return table


def _whole_max(a: Any, b: Any) -> Fraction:
    """max(a, b) of whole numbers: the operand max returns (the first unless the second is
    larger), as a Fraction."""
    m = b if b.numerator > a.numerator else a
    return m if type(m) is Fraction else whole_fraction(m)


def _whole_min(a: Any, b: Any) -> Fraction:
    m = b if b.numerator < a.numerator else a
    return m if type(m) is Fraction else whole_fraction(m)


def _whole_folds() -> dict:
    """fold -> its value on two whole numbers (ints or Fractions with denominator 1), computed
    on their integers: what the fold computes on their Fractions (comparisons of whole numbers
    compare their numerators; +, -, * of them are whole; `mul`'s 0 * x = 0 is 0 too)."""
    from ..primitives.arith import fold_mul

    out: dict = {
        operator.add: lambda a, b: whole_fraction(a.numerator + b.numerator),
        operator.sub: lambda a, b: whole_fraction(a.numerator - b.numerator),
        max: _whole_max,
        min: _whole_min,
    }
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        out[op] = lambda a, b, op=op: op(a.numerator, b.numerator)
    out[fold_mul] = lambda a, b: whole_fraction(a.numerator * b.numerator)
    return out


def exact_arg(a: Any) -> Any:
    """An argument as `fold_exact` takes it: booleans and strings as they are, numbers exact
    (`exact_scalar`); None for anything else."""
    t = type(a)
    if t is Fraction or t is bool or t is str:
        return a
    if t is int:
        return whole_fraction(a)
    if isinstance(a, (bool, str)):
        return a
    return exact_scalar(a)


_WHOLE = _whole_folds()
_NUMBERS = frozenset({int, float, Fraction})  # by type: a bool is not one of them
_COMPARE = frozenset({operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne})

_NODE_TYPES = (I.IConst, I.IVar, I.ILet, I.ISample, I.IReturn, I.IIf, I.IPrim, I.ICall, I.IClosure, I.ILambda,
               I.IApply, I.ITuple, I.IProj, I.IField, I.IRecord, I.IInject, I.ICase, I.IList, I.ICons)


def _dispatch_table(cls: type) -> dict[type, Callable[..., Any]]:
    """node type -> the class's `e_<Node>` method (so subclasses' overrides are used)."""
    return {t: getattr(cls, "e_" + t.__name__) for t in _NODE_TYPES}


Interpreter._table = _dispatch_table(Interpreter)


# ---- running an entry point ---------------------------------------------------------------------

@dataclass
class RunResult:
    value: Any
    releases: list[ReleaseRecord]
    fallbacks: int = 0  # row functions that could not be vectorised
    estimates: list = field(default_factory=list)  # EstimateRecords computed from the releases


def evaluate_entry(instance: I.Instance, tables: dict[str, Any], state: RunState) -> RunResult:
    """Run the entry point with its parameters bound to `tables` and sample its distribution.
    Releases are appended to `state.releases` as they happen (they survive a failure)."""
    missing = [p for p in instance.params if p not in tables]
    if missing or instance.body is None:
        raise RunFailure(f"no input given for {', '.join(missing) or 'the entry point'}")
    if state.engine is None:
        from .engines import engine_of

        state.engine = engine_of(tables)
    interp = Interpreter(state)
    value = interp.call_body(instance, [tables[p] for p in instance.params])
    result = interp.draw(value) if is_distribution(value) else value
    return RunResult(materialise(result), state.releases, state.fallbacks, state.estimates)


class RunHandle:
    """A run on its own thread with a large stack (deep recursion over public lists)."""

    def __init__(self, instance: I.Instance, tables: dict[str, Any], state: RunState):
        self.state = state
        self._box: dict[str, Any] = {}
        self._args = (instance, tables)
        # Made by `start` only: a thread holds its target, this handle's method, until it has run,
        # and a handle run on the caller's worker (`run_program`) would otherwise be in a cycle
        # with its never-started thread, its run's releases and values freed only by the garbage
        # collector instead of when the caller drops them.
        self._thread: Optional[threading.Thread] = None

    def _main(self, instance: I.Instance, tables: dict[str, Any]) -> None:
        import warnings

        try:
            sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
            # A library warning ("overflow encountered") printed to stderr would say something
            # about the rows: none may be shown while a program runs over private data.
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                self._box["result"] = evaluate_entry(instance, tables, self.state)
        except BaseException as exc:  # handed to the caller, who decides what may be shown
            self._box["error"] = exc

    def start(self) -> "RunHandle":
        self._thread = threading.Thread(target=self._main, args=self._args, name="fuzzpy-run", daemon=True)
        old = threading.stack_size()
        threading.stack_size(STACK_BYTES)
        try:
            self._thread.start()
        finally:
            threading.stack_size(old)
        return self

    def wait(self, timeout: Optional[float] = None) -> bool:
        assert self._thread is not None, "wait for a started run"
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self) -> RunResult:
        if "error" in self._box:
            raise self._box["error"]
        return self._box["result"]


def start_run(instance: I.Instance, tables: dict[str, Any], rng: Any, *, vectorise: bool = True,
              user_file: Optional[str] = None, batch: bool = True,
              kept: Optional[dict[str, Any]] = None) -> RunHandle:
    """`user_file`: the program's own file, whose calls and `sample` names label the releases.
    `batch=False` turns batched evaluation off (tests compare both paths).  `kept`: a
    runtime.kept.KeptCodes per table name, from a holder that keeps those tables unchanged
    across runs (group key codes are then computed once, not once per run)."""
    return RunHandle(instance, tables, _state(rng, vectorise, batch, user_file, tables, kept)).start()


def _state(rng: Any, vectorise: bool, batch: bool, user_file: Optional[str], tables: dict[str, Any],
           kept: Optional[dict[str, Any]]) -> "RunState":
    state = RunState(rng, vectorise, batch=batch, user_file=user_file)
    for name, codes in (kept or {}).items():
        if name in tables:
            state.kept[id(tables[name])] = (tables[name], codes)
    return state


def run_program(instance: I.Instance, tables: dict[str, Any], rng: Any, *, vectorise: bool = True,
                user_file: Optional[str] = None, batch: bool = True,
                kept: Optional[dict[str, Any]] = None) -> RunResult:
    """Run to completion on a large-stack thread; re-raises whatever the run raised.

    The thread is a reused worker (starting a thread with a large stack costs about as much as a
    small query); `start_run`, whose runs may be waited for with a time limit and stopped, gives
    every run its own thread.  `kept`: as for `start_run`."""
    handle = RunHandle(instance, tables, _state(rng, vectorise, batch, user_file, tables, kept))
    _Worker.take().submit(handle._main, instance, tables)
    return handle.result()


class _Worker:
    """A large-stack daemon thread running synchronous runs one after another.  Idle workers wait
    in `_idle` (at most `_KEEP`); a run that finds none starts a new one, so concurrent callers
    never wait for each other."""

    _idle: list["_Worker"] = []
    _lock = threading.Lock()
    _KEEP = 2

    def __init__(self) -> None:
        import queue

        self._jobs: Any = queue.SimpleQueue()
        old = threading.stack_size()
        threading.stack_size(STACK_BYTES)
        try:
            threading.Thread(target=self._loop, name="fuzzpy-run", daemon=True).start()
        finally:
            threading.stack_size(old)

    @classmethod
    def take(cls) -> "_Worker":
        with cls._lock:
            if cls._idle:
                return cls._idle.pop()
        return cls()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Run fn(*args) on this worker and wait for it (fn handles its own exceptions).  The
        worker releases a lock the caller holds (a lighter hand-off than an Event's condition)."""
        done = threading.Lock()
        done.acquire()
        self._jobs.put((fn, args, done))
        done.acquire()

    def _loop(self) -> None:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
        while True:
            fn, args, done = self._jobs.get()
            try:
                fn(*args)
            finally:
                fn = args = None  # an idle worker holds no run (its tables, its releases)
                with self._lock:  # idle again before the caller resumes, so its next run reuses us
                    keep = len(self._idle) < self._KEEP
                    if keep:
                        self._idle.append(self)
                done.release()
            if not keep:
                return


from . import compiled  # noqa: E402 - it builds on this module (read at call time)
