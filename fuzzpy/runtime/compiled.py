"""Checked functions compiled to Python: the interpreter's own semantics without its steps.

A function spends most of its time in the interpreter's own bookkeeping (a dispatch, an
environment copy and a list of arguments per step), so it is translated once into Python
source whose locals are the program's variables, one Python function per instance, and the
interpreter calls that instead of walking the body (docs/runtime.md, "Compiled functions").

* `compiled_function`: a public function (its body, and the body of every function it calls,
  made only of constants, variables, `let`, `if`, tuples, lists, cons, `case`, injections and
  calls of primitives that take neither a context nor a table).  It cannot release, sample or
  read a row, so its code leaves out the call sites that label releases and the per-row call
  budget; the batched lane evaluator runs it once per lane.  One that recurses once per element
  of a list parameter, applying a primitive or a cons on the way back (`lsum`, `append`), runs
  as two loops with the calls' order and depth levels (`_right_fold`, `_Body.fold_loop`), and
  one that calls itself in tail position (`member`) as one loop (`_Body.tail_loop`).
* `effectful_function`: any function, with samples (`CompiledBind`), returns, function values,
  applications and every primitive (through the decisions of the interpreter's `call_prim`),
  and the user's call sites pushed as `call_instance` pushes them.
* `body_function`: a function value's body (a lambda's, or the one an application gives a
  named function passed as a value), reading the names it does not bind from the captured
  environment.

The translation is the interpreter's rules one for one: the same values (exact Fractions,
tuples for tuples and lists, ("inl", v) for injections, the interpreter's Closures), the same
primitive calls (`fold_exact` on the exact path, `call_prim` otherwise), the same evaluation
order, and the same limit on nested calls with the same error.  A function that does not
translate, or whose source Python will not compile, is run by the interpreter as before (the
functions return None).
"""

from __future__ import annotations

import operator
import threading
from dataclasses import fields, replace
from fractions import Fraction
from typing import Any, Callable, Optional

from .. import limits
from ..primitives.arith import fold_mul
from ..primitives.registry import Primitive, lookup
from ..typesystem import ir as I
from .node_memo import NodeMemo
from .numbers import (
    _NOT_EXACT,
    _WHOLE,
    SMALL_WHOLES,
    _immutable,
    _whole_by_slots,
    fold_exact,
    shared_const,
    small_wholes,
    whole_fraction,
)
from .state import CompiledBind, RunFailure, call_with_context
from .values import Closure, Returned, field_of, materialise

# The code lives on the objects it translates, exactly as long as the checked program: it refers
# to the program's nodes, so a weak table would keep them forever (runtime/node_memo.py).
_COMPILED = NodeMemo("public")    # instance -> its public code, or None
_EFFECTFUL = NodeMemo("effects")  # instance -> its code with effects, or None
_BODIES = NodeMemo("body")        # body -> (params, (code, free names) or None)
_LOCK = threading.RLock()  # an effectful group compiles the public functions it calls meanwhile


class NotCompilable(Exception):
    """The function (or one it calls) has a node the translation does not take."""


def compiled_function(inst: I.Instance) -> Optional[Callable[..., Any]]:
    """`inst` as a Python function fn(interpreter, state, *args), or None when it must be
    interpreted.  Translated once per instance (with every function it calls)."""
    try:
        return _COMPILED[inst]
    except KeyError:
        pass
    with _LOCK:
        if inst not in _COMPILED:
            _compile_group(inst)
        return _COMPILED[inst]


def effectful_function(inst: I.Instance) -> Optional[Callable[..., Any]]:
    """`inst` as a Python function fn(interpreter, state, *args) whatever it does (docs/runtime.md,
    "Compiled functions"): its public code (`compiled_function`) when it has one,
    else a translation that also takes samples, returns, function values and applications, and
    every primitive (through the interpreter's own `call_prim`); None when it must be
    interpreted."""
    pure = compiled_function(inst)
    if pure is not None:
        return pure
    try:
        return _EFFECTFUL[inst]
    except KeyError:
        pass
    with _LOCK:
        if inst not in _EFFECTFUL:
            _compile_group(inst, effects=True)
        return _EFFECTFUL[inst]


def body_function(body: I.IR, params: tuple) -> Optional[tuple[Callable[..., Any], frozenset]]:
    """The code of a function value applied by the scalar evaluator (an ILambda's body, or the
    body an IApply gives an IClosure's value) as fn(interpreter, state, env, *args), with the
    names it reads from the captured environment `env` (the caller checks they are all there);
    None when it must be interpreted.  Translated once per body, with the functions it calls."""
    try:
        hit = _BODIES[body]
    except KeyError:
        hit = None
    except AttributeError:  # not a node (a list of them): not compiled
        return None
    if hit is None or hit[0] != params:
        with _LOCK:
            hit = _BODIES.get(body)
            if hit is None or hit[0] != params:
                hit = _BODIES[body] = (params, _compile_body(body, params))
    return hit[1]


def _compile_body(body: I.IR, params: tuple) -> Optional[tuple[Callable[..., Any], frozenset]]:
    gen = _Module(effects=True)
    try:
        name, free = gen.body(body, params)
        while gen.pending:
            gen.function(gen.pending.pop())
        fns = gen.build(name)
    except (NotCompilable, SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    for inst, fn in fns.items():
        if isinstance(inst, I.Instance):
            _EFFECTFUL.setdefault(inst, fn)
    return fns[name], free


def _compile_group(root: I.Instance, effects: bool = False) -> None:
    """Translate `root` and every instance it reaches through calls, as one module (they may
    call each other).  If one of them does not qualify, `root` does not; the others are tried
    on their own when they are called.  With `effects`, the public functions reached are called
    as their own compiled code, and the module holds the others."""
    table = _EFFECTFUL if effects else _COMPILED
    gen = _Module(effects)
    try:
        gen.function(root)
        while gen.pending:
            gen.function(gen.pending.pop())
        fns = gen.build()
    except (NotCompilable, SyntaxError, RecursionError, MemoryError, ValueError):
        table[root] = None
        return
    for inst, fn in fns.items():
        table.setdefault(inst, fn)


# ---- primitive calls ---------------------------------------------------------------------------------

def _fold_call(prim: Primitive, node: I.IPrim) -> Callable[..., Any]:
    """A scalar primitive as the interpreter's `call_prim` runs it without an engine, exactly:
    the fold on exact arguments (`fold_exact`), `call_prim` itself for anything else."""
    fold = prim.fold
    whole = _WHOLE.get(fold)

    def call(it: Any, *args: Any) -> Any:
        out = fold_exact(fold, args)
        return it.call_prim(prim, node, list(args)) if out is _NOT_EXACT else out

    if whole is None or len(prim.params) != 2:
        return call

    def call2(it: Any, a: Any, b: Any) -> Any:
        # fold_exact's first case inlined: two Fractions that are whole numbers (an accumulated
        # sum, a count made exact), the most common call of a public list function
        if type(a) is Fraction and type(b) is Fraction and a.denominator == 1 and b.denominator == 1:
            return whole(a, b)
        out = fold_exact(fold, (a, b))
        return it.call_prim(prim, node, [a, b]) if out is _NOT_EXACT else out

    return call2


# Inline cases of a two-argument fold, written into the compiled code in front of its call (the
# call's own first cases, without a Python call): comparisons of two values of one type that
# Python compares exactly (fold_exact compares such values directly), and +, -, *, max, min of
# two whole-number Fractions (fold_exact's `_WHOLE` cases, on the Fractions' slots).
_SAME_TYPE_COMPARE = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
                      operator.eq: "==", operator.ne: "!="}
_WHOLE_ARITH = {operator.add: "+", operator.sub: "-", fold_mul: "*"}
_WHOLE_PICK = {max: ">", min: "<"}  # the second operand when it is strictly larger (smaller)
_DIRECT_TYPES = frozenset({str, bool, int, float, Fraction})


def _inline_fold(fold: Any, a: str, b: str) -> Optional[str]:
    """The expression computing fold(a, b) in its inline case (`_inline_test`), or None."""
    if fold in _SAME_TYPE_COMPARE:
        return f"({a} {_SAME_TYPE_COMPARE[fold]} {b})"
    if whole_fraction is not _whole_by_slots:  # Fractions kept some other way: no slot reads
        return None
    if fold in _WHOLE_ARITH:
        # a small result from the table of small whole numbers (`whole_fractions`), no new object
        return (f"(_sw[_s] if 0 <= (_s := {a}._numerator {_WHOLE_ARITH[fold]} {b}._numerator) < {SMALL_WHOLES} "
                f"else _wf(_s))")
    if fold in _WHOLE_PICK:
        return f"({b} if {b}._numerator {_WHOLE_PICK[fold]} {a}._numerator else {a})"
    return None


def _inline_test(fold: Any, a: str, b: str) -> str:
    if fold in _SAME_TYPE_COMPARE:
        return f"type({a}) is type({b}) and type({a}) in _direct"
    return f"type({a}) is _F is type({b}) and {a}._denominator == 1 == {b}._denominator"


def _plain_call(prim: Primitive, node: I.IPrim) -> Callable[..., Any]:
    def call(it: Any, *args: Any) -> Any:
        return it.call_prim(prim, node, list(args))

    return call


def _too_deep(span: Any) -> RunFailure:
    return RunFailure(f"function calls nested more than {limits.CALL_DEPTH} deep", span)


# ---- the translation ---------------------------------------------------------------------------------

class _Module:
    """Python source for a group of instances; constants, primitives and spans live in the
    module's globals as _g<n>."""

    def __init__(self, effects: bool = False) -> None:
        self.effects = effects  # samples, function values and every primitive taken too
        self.names: dict[I.Instance, str] = {}
        self.pending: list[I.Instance] = []
        self.globals: dict[str, Any] = {"_limits": limits, "_too_deep": _too_deep, "_F": Fraction,
                                        "_wf": whole_fraction, "_direct": _DIRECT_TYPES, "_sw": small_wholes(),
                                        "_Bind": CompiledBind, "_Ret": Returned, "_Cl": Closure,
                                        "_field": field_of, "_ctx_call": call_with_context, "_mat": materialise}
        self.lines: list[str] = []
        self._n = 0
        # While a function value's body is translated: its free names, each read once from the
        # captured environment when the body starts (name -> the Python local holding it).
        self.free: Optional[dict[str, str]] = None

    def fresh(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def glob(self, value: Any) -> str:
        name = self.fresh("_g")
        self.globals[name] = value
        return name

    def name_of(self, inst: I.Instance) -> str:
        if inst not in self.names:
            if inst.body is None:
                raise NotCompilable(inst.name)
            self.names[inst] = self.fresh("_f")
            self.pending.append(inst)
        return self.names[inst]

    def function(self, inst: I.Instance) -> None:
        name = self.name_of(inst)
        if inst in self.pending:
            self.pending.remove(inst)
        scope = {p: self.fresh("v") for p in inst.params}
        body = _Body(self)
        header = f"def {name}(it, st, {', '.join(scope[p] for p in inst.params)}):"
        fold = None if self.effects else _right_fold(inst)
        if fold is not None:
            body.fold_loop(inst, fold, scope)
        elif not self.effects and _tail_calls(inst.body, inst):
            body.tail_loop(inst, scope)
        else:
            body.emit(f"return {body.expr(inst.body, scope)}")
        self.lines.append(header)
        self.lines.extend("    " + line for line in body.lines)

    def body(self, node: Any, params: tuple) -> tuple[str, frozenset]:
        """A function value's body as fn(it, st, env, *params): names it does not bind are
        read from env, the environment the value captured, as the interpreter reads them."""
        name = self.fresh("_a")
        scope = {p: self.fresh("v") for p in params}
        self.free = {}
        body = _Body(self)
        result = body.expr(node, scope)
        free, self.free = self.free, None
        self.lines.append(f"def {name}(it, st, env, {''.join(scope[p] + ', ' for p in params)}):")
        self.lines.extend(f"    {var} = env[{n!r}]" for n, var in free.items())
        self.lines.extend("    " + line for line in body.lines)
        self.lines.append(f"    return {result}")
        return name, frozenset(free)

    def build(self, extra: Optional[str] = None) -> dict[Any, Callable[..., Any]]:
        source = "\n".join(self.lines) + "\n"
        namespace = dict(self.globals)
        exec(_code_of(source), namespace)
        out: dict[Any, Callable[..., Any]] = {inst: namespace[name] for inst, name in self.names.items()}
        if extra is not None:
            out[extra] = namespace[extra]
        return out


# Python code objects by source text: functions translated to the same text (a lambda passed at
# several partition types, a group reached from several roots, the same program checked again by
# a service) are compiled once.  A code object is a function of the text alone and refers to no
# node; the values it uses are names in the namespace given at exec.  Bounded by the texts'
# length (DiffPID3's: 87,000 characters, about twice that in code), then started again.
CODE_CHARS = 2_000_000
_CODE: "dict[str, Any]" = {}
_code_chars = 0


def _code_of(source: str) -> Any:
    global _code_chars
    code = _CODE.get(source)
    if code is None:
        code = compile(source, "<fuzzpy compiled>", "exec")
        with _LOCK:
            if _code_chars + len(source) > CODE_CHARS:
                _CODE.clear()
                _code_chars = 0
            if source not in _CODE:
                _CODE[source] = code
                _code_chars += len(source)
    return code


class _Fold:
    """A public function that is a right fold over one of its list parameters (`_right_fold`):

        f .. xs .. = case xs of { [] => empty | h :: t => lets; op(pre.., f .. t ..) }

    with the recursive call the last operand of `op` (a primitive, or the tail of a cons), every
    other argument of it the parameter itself, and `t` read by that call alone."""

    __slots__ = ("position", "case", "lets", "op", "pre", "rec")

    def __init__(self, position: int, case: I.ICase, lets: list, op: Any, pre: list, rec: I.ICall) -> None:
        self.position, self.case, self.lets, self.op, self.pre, self.rec = position, case, lets, op, pre, rec


def _right_fold(inst: I.Instance) -> Optional[_Fold]:
    """`inst` as a `_Fold`, or None when its body does not have that shape exactly."""
    case = inst.body
    if type(case) is not I.ICase or case.kind != "list" or type(case.scrutinee) is not I.IVar:
        return None
    params = list(inst.params)
    if case.scrutinee.name not in params:
        return None
    position = params.index(case.scrutinee.name)
    (head_p, tail_p), node = case.right
    if not isinstance(tail_p, str):
        return None
    lets = []
    while type(node) is I.ILet:
        lets.append(node)
        node = node.body
    if type(node) is I.ICons:
        op, pre, rec = node, [node.head], node.tail
    elif type(node) is I.IPrim and node.args:
        op, pre, rec = node, list(node.args[:-1]), node.args[-1]
    else:
        return None
    if type(rec) is not I.ICall or rec.instance is not inst or len(rec.args) != len(params):
        return None
    wanted = [tail_p if k == position else name for k, name in enumerate(params)]
    if any(type(a) is not I.IVar or a.name != w for a, w in zip(rec.args, wanted)):
        return None
    bound = _pattern_names(head_p) | {tail_p}
    for let in lets:
        bound |= _pattern_names(let.pattern)
    if bound & set(params):
        return None  # a parameter shadowed: the call's arguments would not be the parameters
    forward = [let.bound for let in lets] + pre
    names, calls = _reads(forward + [case.left[1]])
    if tail_p in names or case.scrutinee.name in names or inst in calls:
        return None  # the tail, or the list itself, read elsewhere; another call of itself
    return _Fold(position, case, lets, op, pre, rec)


def _pattern_names(pattern: Any) -> set:
    if pattern is None:
        return set()
    if isinstance(pattern, str):
        return {pattern}
    return set().union(*(_pattern_names(p) for p in pattern[1]))


def _reads(nodes: list) -> tuple[set, set]:
    """The variable names `nodes` read and the instances they call (a superset: every name)."""
    names: set = set()
    calls: set = set()
    stack: list = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(node)
        elif type(node) is I.IVar:
            names.add(node.name)
        elif type(node) is I.ICall:
            calls.add(node.instance)
            stack.extend(node.args)
        elif isinstance(node, I.IR):
            stack.extend(getattr(node, f.name) for f in fields(node) if f.name not in ("span", "info"))
    return names, calls


def _tail_calls(node: Any, inst: I.Instance) -> bool:
    """Whether `node`, `inst`'s body, calls `inst` in tail position (through `let`, `if` and
    `case`): such a function runs as a loop (`_Body.tail_loop`)."""
    t = type(node)
    if t is I.ILet:
        return _tail_calls(node.body, inst)
    if t is I.IIf:
        return _tail_calls(node.then, inst) or _tail_calls(node.other, inst)
    if t is I.ICase:
        return _tail_calls(node.left[1], inst) or _tail_calls(node.right[1], inst)
    return t is I.ICall and node.instance is inst


class _Body:
    """One function's statements.  `expr` emits the statements that evaluate a node, in the
    interpreter's order, and returns the name (or constant) holding its value."""

    def __init__(self, module: _Module) -> None:
        self.m = module
        self.lines: list[str] = []
        self.depth = 0
        # while a function with tail calls of itself is written as a loop (`tail_loop`): it, its
        # parameters' locals, and the local counting the levels its calls would have added
        self.loop: Optional[tuple[I.Instance, list[str], str]] = None

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def expr(self, node: Any, scope: dict[str, str]) -> str:
        handler = getattr(self, "x_" + type(node).__name__, None)
        if handler is None:
            raise NotCompilable(type(node).__name__)
        return handler(node, scope)

    def let(self, value: str) -> str:
        name = self.m.fresh("t")
        self.emit(f"{name} = {value}")
        return name

    # -- binding -----------------------------------------------------------------------------------

    def bind(self, pattern: Any, value: str, scope: dict[str, str]) -> dict[str, str]:
        """The interpreter's `bind`: a name, _ (None), or a tuple pattern destructured."""
        if pattern is None:
            return scope
        out = dict(scope)
        self.emit(f"{self._target(pattern, out)} = {value}")
        return out

    def _target(self, pattern: Any, scope: dict[str, str]) -> str:
        if pattern is None:
            return "_"
        if isinstance(pattern, str):
            scope[pattern] = self.m.fresh("v")
            return scope[pattern]
        _, items = pattern
        return "(" + "".join(self._target(p, scope) + ", " for p in items) + ")"

    # -- nodes ------------------------------------------------------------------------------------

    def x_IConst(self, node: I.IConst, scope: dict[str, str]) -> str:
        value = shared_const(node, True)
        if not _immutable(value):
            raise NotCompilable("a mutable constant")
        return self.m.glob(value)

    def x_IVar(self, node: I.IVar, scope: dict[str, str]) -> str:
        if node.name not in scope:
            if self.m.free is None:
                raise NotCompilable(f"free name {node.name}")
            if node.name not in self.m.free:  # a function value's captured name
                self.m.free[node.name] = self.m.fresh("v")
            return self.m.free[node.name]
        return scope[node.name]

    def x_ILet(self, node: I.ILet, scope: dict[str, str]) -> str:
        while type(node) is I.ILet:
            scope = self.bind(node.pattern, self.expr(node.bound, scope), scope)
            node = node.body  # type: ignore[assignment]
        return self.expr(node, scope)

    def x_IIf(self, node: I.IIf, scope: dict[str, str]) -> str:
        cond = self.expr(node.cond, scope)
        out = self.m.fresh("t")
        self.emit(f"if {cond}:")
        self.branch(node.then, scope, out)
        self.emit("else:")
        self.branch(node.other, scope, out)
        return out

    def branch(self, node: Any, scope: dict[str, str], out: str) -> None:
        self.depth += 1
        self.emit(f"{out} = {self.expr(node, scope)}")
        self.depth -= 1

    def x_IPrim(self, node: I.IPrim, scope: dict[str, str]) -> str:
        prim = lookup(node.name)
        if prim is None or prim.run is None:
            raise NotCompilable(f"primitive {node.name}")
        if prim.needs_context or prim.lazy_bags:  # a table or the run: never in a public function's code
            if not self.m.effects:
                raise NotCompilable(f"primitive {node.name}")
            return self._effect_prim(prim, node, [self.expr(a, scope) for a in node.args])
        args = [self.expr(a, scope) for a in node.args]
        exact = prim.fold is not None and not prim.structured
        call = self.m.glob((_fold_call if exact else _plain_call)(prim, node))
        inline = _inline_fold(prim.fold, *args) if exact and len(args) == 2 else None
        if inline is not None:
            a, b = args
            return self.let(f"{inline} if {_inline_test(prim.fold, a, b)} else {call}(it, {a}, {b})")
        return self.let(f"{call}(it, {''.join(a + ', ' for a in args)})")

    def x_ICall(self, node: I.ICall, scope: dict[str, str]) -> str:
        if self.m.effects:
            public = compiled_function(node.instance)
            if public is None:
                return self._effectful_call(node, scope)
            fn = self.m.glob(public)  # public code: no site to record (it releases nothing)
        else:
            fn = self.m.name_of(node.instance)
        args = [self.expr(a, scope) for a in node.args]
        out = self.m.fresh("t")
        # the interpreter's call_instance: the same limit, checked before the call, same error
        self.emit(f"if st.depth >= _limits.CALL_DEPTH: raise _too_deep({self.m.glob(node.span)})")
        self.emit("st.depth += 1")
        self.emit("try:")
        self.emit(f"    {out} = {fn}(it, st, {''.join(a + ', ' for a in args)})")
        self.emit("finally:")
        self.emit("    st.depth -= 1")
        return out

    def _effectful_call(self, node: I.ICall, scope: dict[str, str]) -> str:
        """The interpreter's call_instance written out: the depth limit, then the call site
        pushed while the callee runs when it is in the user's file (releases and samples made
        below are labelled with it); under a per-row call budget, the interpreter's own call."""
        done = _EFFECTFUL.get(node.instance)  # translated by another group already: called, not translated again
        fn = self.m.glob(done) if done is not None else self.m.name_of(node.instance)
        args = [self.expr(a, scope) for a in node.args]
        out, site = self.m.fresh("t"), self.m.fresh("t")
        span = self.m.glob(node.span)
        self.emit("if st.row_calls is not None:")
        self.emit(f"    {out} = it.call_instance({self.m.glob(node)}, [{', '.join(args)}])")
        self.emit("else:")
        self.depth += 1
        self.emit(f"if st.depth >= _limits.CALL_DEPTH: raise _too_deep({span})")
        self.emit("st.depth += 1")
        self.emit(f"{site} = {span} is not None and {span}.file == st.user_file")
        self.emit(f"if {site}: st.sites.append({span})")
        self.emit("try:")
        self.emit(f"    {out} = {fn}(it, st, {''.join(a + ', ' for a in args)})")
        self.emit("finally:")
        self.emit("    st.depth -= 1")
        self.emit(f"    if {site}: st.sites.pop()")
        self.depth -= 1
        return out

    # -- effects (only with _Module.effects) ----------------------------------------------------------

    def _effect_prim(self, prim: Primitive, node: I.IPrim, args: list[str]) -> str:
        """The interpreter's `call_prim` for a primitive that takes a context or a table, with
        its decisions made here: they depend only on the primitive, and compiled code runs
        only with exact arithmetic and no engine (`Interpreter.call_body`)."""
        listed = "[" + ", ".join(args) + "]"
        if prim.bag_only:  # lazy bags, partitions and keys, as they are
            return self.let(f"{self.m.glob(prim.run)}({', '.join(args)})")
        if not prim.needs_context:
            return self.let(f"it.call_prim({self.m.glob(prim)}, {self.m.glob(node)}, {listed})")
        if not prim.lazy_bags:  # plain values for everything else
            listed = "[" + ", ".join(f"_mat({a})" for a in args) + "]"
        return self.let(f"_ctx_call(it, {self.m.glob(prim)}, {self.m.glob(node)}, {listed})")

    def _effects(self, what: str) -> None:
        if not self.m.effects:
            raise NotCompilable(what)

    def _env(self, scope: dict[str, str]) -> str:
        """The interpreter's environment at this point: every program variable in scope, after
        (in a function value's body) the environment the value captured."""
        captured = "**env, " if self.m.free is not None else ""
        return "{" + captured + "".join(f"{name!r}: {var}, " for name, var in scope.items()) + "}"

    def _nested(self, name: str, param: Optional[str], pattern: Any, node: Any, scope: dict[str, str]) -> None:
        """A Python function evaluating `node` later (a sample's bound or body), with `param`
        bound to `pattern` first."""
        sub = _Body(self.m)
        inner = sub.bind(pattern, param, scope) if param is not None else scope
        result = sub.expr(node, inner)
        self.emit(f"def {name}({param or ''}):")
        for line in sub.lines:
            self.emit("    " + line)
        self.emit(f"    return {result}")

    def x_ISample(self, node: I.ISample, scope: dict[str, str]) -> str:
        """A Bind: nothing is evaluated until it is sampled, then the bound, then the body."""
        self._effects("sample")
        bound, rest, value = self.m.fresh("_b"), self.m.fresh("_k"), self.m.fresh("v")
        self._nested(bound, None, None, node.bound, scope)
        self._nested(rest, value, node.pattern, node.body, scope)
        return self.let(f"_Bind(it, {self.m.glob(node)}, {bound}, {rest})")

    def x_IReturn(self, node: I.IReturn, scope: dict[str, str]) -> str:
        self._effects("return")
        return self.let(f"_Ret({self.expr(node.value, scope)})")

    def x_ILambda(self, node: I.ILambda, scope: dict[str, str]) -> str:
        self._effects("fun")
        return self.let(f"_Cl({self._env(scope)}, {self.m.glob(node.params)}, {self.m.glob(node.body)})")

    def x_IClosure(self, node: I.IClosure, scope: dict[str, str]) -> str:
        self._effects("a function value")
        return self.let(f"_Cl({self._env(scope)})")

    def x_IApply(self, node: I.IApply, scope: dict[str, str]) -> str:
        self._effects("an application")
        fn = self.expr(node.fn, scope)
        args = "[" + ", ".join(self.expr(a, scope) for a in node.args) + "]"
        if node.body is None:
            return self.let(f"it.apply({fn}, {args})")
        return self.let(f"it.apply_at({self.m.glob(node)}, {fn}, {args})")

    def x_IField(self, node: I.IField, scope: dict[str, str]) -> str:
        self._effects("a field")
        return self.let(f"_field({self.expr(node.value, scope)}, {node.name!r})")

    def x_IRecord(self, node: I.IRecord, scope: dict[str, str]) -> str:
        self._effects("a record")
        values = [(name, self.expr(x, scope)) for name, x in node.fields]
        return self.let("{" + "".join(f"{name!r}: {v}, " for name, v in values) + "}")

    def x_ITuple(self, node: I.ITuple, scope: dict[str, str]) -> str:
        return self._tuple(node.items, scope)

    def x_IList(self, node: I.IList, scope: dict[str, str]) -> str:
        return self._tuple(node.items, scope)

    def _tuple(self, items: list[Any], scope: dict[str, str]) -> str:
        values = [self.expr(x, scope) for x in items]
        return self.let("(" + "".join(v + ", " for v in values) + ")")

    def x_IProj(self, node: I.IProj, scope: dict[str, str]) -> str:
        return self.let(f"{self.expr(node.value, scope)}[{int(node.index)}]")

    def x_IInject(self, node: I.IInject, scope: dict[str, str]) -> str:
        return self.let(f"({self.m.glob(node.side)}, {self.expr(node.value, scope)})")

    def x_ICons(self, node: I.ICons, scope: dict[str, str]) -> str:
        head = self.expr(node.head, scope)
        tail = self.expr(node.tail, scope)
        return self.let(f"({head},) + tuple({tail})")

    def x_ICase(self, node: I.ICase, scope: dict[str, str]) -> str:
        value = self.expr(node.scrutinee, scope)
        out = self.m.fresh("t")
        if node.kind == "sum":
            side, inner = self.m.fresh("t"), self.m.fresh("t")
            self.emit(f"{side}, {inner} = {value}")
            self.emit(f"if {side} == 'inl':")
            self._arm(node.left[0], inner, node.left[1], scope, out)
            self.emit("else:")
            self._arm(node.right[0], inner, node.right[1], scope, out)
            return out
        self.emit(f"if len({value}) == 0:")
        self.branch(node.left[1], scope, out)
        self.emit("else:")
        (head_p, tail_p), body = node.right
        self.depth += 1
        inner_scope = self.bind(head_p, f"{value}[0]", scope)
        inner_scope = self.bind(tail_p, f"tuple({value}[1:])", inner_scope)
        self.emit(f"{out} = {self.expr(body, inner_scope)}")
        self.depth -= 1
        return out

    def _arm(self, pattern: Any, value: str, body: Any, scope: dict[str, str], out: str) -> None:
        self.depth += 1
        self.emit(f"{out} = {self.expr(body, self.bind(pattern, value, scope))}")
        self.depth -= 1

    # -- a right fold as a loop ----------------------------------------------------------------------

    def fold_loop(self, inst: I.Instance, fold: _Fold, scope: dict[str, str]) -> None:
        """A `_Fold` as two loops instead of a call per element.  Forward, element i runs at the
        depth the i-th nested call would (one more level per element, each checked against the
        limit as that call checks it, with its error): its `let`s and `op`'s other operands, in
        the order the call evaluates them.  Then the empty list's value, and `op` applied from
        the last element back to the first, as the calls return; a cons is the elements' tuple
        joined to the empty list's value at once, the same tuple the conses build one by one.
        The depth is given back however the function ends."""
        xs = scope[inst.params[fold.position]]
        base, i, n, pre, acc = (self.m.fresh("_L") for _ in range(5))
        span = self.m.glob(fold.rec.span)
        self.emit(f"{base} = st.depth")
        self.emit(f"{pre} = []")
        self.emit(f"{i} = 0")
        self.emit(f"{n} = len({xs})")
        self.emit("try:")
        self.depth += 1
        self.emit(f"while {i} < {n}:")
        self.depth += 1
        (head_p, _), _ = fold.case.right
        inner = self.bind(head_p, f"{xs}[{i}]", scope)
        for let in fold.lets:
            inner = self.bind(let.pattern, self.expr(let.bound, inner), inner)
        operands = [self.expr(a, inner) for a in fold.pre]
        # one operand as itself (a cons's head, a sum's term), several as a tuple
        item = operands[0] if len(operands) == 1 else "(" + "".join(o + ", " for o in operands) + ")"
        self.emit(f"{pre}.append({item})")
        self.emit(f"if st.depth >= _limits.CALL_DEPTH: raise _too_deep({span})")
        self.emit("st.depth += 1")
        self.emit(f"{i} += 1")
        self.depth -= 1
        self.emit(f"{acc} = {self.expr(fold.case.left[1], scope)}")
        if type(fold.op) is I.ICons:
            self.emit(f"if {pre}:")
            self.emit(f"    {acc} = tuple({pre}) + tuple({acc})")
        else:
            names = [f"#{k}" for k in range(len(fold.pre))]
            row = self.m.fresh("_L")
            self.emit(f"for {row} in reversed({pre}):")
            self.depth += 1
            back = dict(scope)
            if len(names) == 1:
                back[names[0]] = row
            elif names:
                self.emit(f"{''.join(back.setdefault(k, self.m.fresh('v')) + ', ' for k in names)}= {row}")
            back["#acc"] = acc
            step = replace(fold.op, args=[I.IVar(k) for k in names] + [I.IVar("#acc")])
            self.emit(f"{acc} = {self.expr(step, back)}")
            self.depth -= 1
        self.depth -= 1
        self.emit("finally:")
        self.emit(f"    st.depth = {base}")
        self.emit(f"return {acc}")

    # -- calls of itself in tail position as a loop ------------------------------------------------

    def tail_loop(self, inst: I.Instance, scope: dict[str, str]) -> None:
        """A function that calls itself in tail position, as a loop: such a call evaluates its
        arguments, checks the limit as the call would (same error), counts one more level, sets
        the parameters and goes round again, so the rest of the body runs at the depth the call
        would have run it at; nothing is left to do after the call, so its value is the
        function's.  The levels are given back however the function ends."""
        levels = self.m.fresh("_L")
        self.loop = (inst, [scope[p] for p in inst.params], levels)
        self.emit(f"{levels} = 0")
        self.emit("try:")
        self.emit("    while True:")
        self.depth += 2
        self.tail(inst.body, scope)
        self.depth -= 2
        self.emit("finally:")
        self.emit(f"    st.depth -= {levels}")
        self.loop = None

    def tail(self, node: Any, scope: dict[str, str]) -> None:
        """`node` in tail position: statements ending in `return` of its value or, for a call of
        the function itself, in the next round.  `let`, `if` and `case` evaluate as `expr` does
        and pass the position on to their bodies."""
        t = type(node)
        if t is I.ILet:
            while type(node) is I.ILet:
                scope = self.bind(node.pattern, self.expr(node.bound, scope), scope)
                node = node.body
            self.tail(node, scope)
        elif t is I.IIf:
            self.emit(f"if {self.expr(node.cond, scope)}:")
            self._tail_arm(node.then, scope)
            self.emit("else:")
            self._tail_arm(node.other, scope)
        elif t is I.ICase and node.kind == "sum":
            value = self.expr(node.scrutinee, scope)
            side, inner = self.m.fresh("t"), self.m.fresh("t")
            self.emit(f"{side}, {inner} = {value}")
            self.emit(f"if {side} == 'inl':")
            self._tail_arm(node.left[1], scope, node.left[0], inner)
            self.emit("else:")
            self._tail_arm(node.right[1], scope, node.right[0], inner)
        elif t is I.ICase:
            value = self.expr(node.scrutinee, scope)
            self.emit(f"if len({value}) == 0:")
            self._tail_arm(node.left[1], scope)
            self.emit("else:")
            (head_p, tail_p), body = node.right
            self.depth += 1
            inner = self.bind(head_p, f"{value}[0]", scope)
            self.tail(body, self.bind(tail_p, f"tuple({value}[1:])", inner))
            self.depth -= 1
        elif t is I.ICall and self.loop is not None and node.instance is self.loop[0]:
            _, params, levels = self.loop
            args = [self.expr(a, scope) for a in node.args]
            self.emit(f"if st.depth >= _limits.CALL_DEPTH: raise _too_deep({self.m.glob(node.span)})")
            self.emit("st.depth += 1")
            self.emit(f"{levels} += 1")
            self.emit(f"{''.join(p + ', ' for p in params)}= {''.join(a + ', ' for a in args)}")
            self.emit("continue")
        else:
            self.emit(f"return {self.expr(node, scope)}")

    def _tail_arm(self, node: Any, scope: dict[str, str], pattern: Any = None, value: str = "") -> None:
        self.depth += 1
        self.tail(node, self.bind(pattern, value, scope))
        self.depth -= 1
