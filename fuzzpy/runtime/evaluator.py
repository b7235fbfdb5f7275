"""The evaluator: the IR of a checked program, one node at a time (docs/runtime.md).

Only programs the checker accepted reach it, and it never re-decides what the checker decided:
which branch a constant condition takes, which function instance is called, each mechanism's
calibration (in `IPrim.info`) all come from the IR.

Evaluation is eager except for distributions: `sample x = d; body` evaluates to a `Bind` that
runs only when sampled, so a distribution sampled twice draws fresh noise twice (as the checker
charged).  A primitive runs through what the runtime registered on its declaration (its
kernels, runtime/kernels/): its reference evaluator here, exactly on exact numbers.  Public
functions run as compiled Python (compiled.py); the column evaluator (vectorize.py) and the
lane evaluator (batch.py) change what a step does.

Nothing here may raise on a data-dependent value: primitives are total, and the only errors
this module raises itself (`RunFailure`) carry messages fixed by the program text.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .. import limits
from ..primitives.registry import Primitive, lookup
from ..typesystem import ir as I
from . import compiled
from .numbers import _NOT_EXACT, as_float, fold_exact, shared_const
from .state import Bind, Context, RunFailure, RunState, bind, call_with_context
from .values import Closure, Returned, field_of, is_distribution, materialise

_UNSET = object()


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

    # rule Unroll: a call deeper than CALL_DEPTH fails with a public message
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

    # rule Engines: a table held by another engine goes to that engine first (the hook)
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
        if prim.lazy_bags:
            if prim.bag_only:
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


_NODE_TYPES = (I.IConst, I.IVar, I.ILet, I.ISample, I.IReturn, I.IIf, I.IPrim, I.ICall, I.IClosure, I.ILambda,
               I.IApply, I.ITuple, I.IProj, I.IField, I.IRecord, I.IInject, I.ICase, I.IList, I.ICons)


def _dispatch_table(cls: type) -> dict[type, Callable[..., Any]]:
    """node type -> the class's `e_<Node>` method (so subclasses' overrides are used)."""
    return {t: getattr(cls, "e_" + t.__name__) for t in _NODE_TYPES}


Interpreter._table = _dispatch_table(Interpreter)
