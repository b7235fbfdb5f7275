"""What the checker knows about a value: its type, distance, constant value, IR, function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..primitives.registry import NOCONST
from ..syntax import ast as A
from ..typesystem.ir import IR
from ..typesystem.sens import Dist
from ..typesystem.types import Fun, Type, memoise_hash


@memoise_hash
@dataclass(frozen=True)
class FnT(Type):
    """The type of a check-time function value that has not been given a `Fun` type yet
    (a lambda or generic function: it is checked anew at each application)."""

    label: str

    def __str__(self) -> str:
        return f"function {self.label}"


@dataclass(slots=True)  # built thousands of times per check: slots make it smaller and quicker
class Val:
    type: Type
    dist: Dist
    ir: IR
    const: Any = NOCONST
    fn: Optional["FnValue"] = None
    parts: Optional[list[Dist]] = None  # per-component distances (tuples, partitions)
    risk: Dist = field(default_factory=dict)  # effects.py: on what evaluating it may fail
    # Rule Functions in containers: the function value of each component of a tuple or record,
    # or the one of every element of a list; None where a component holds no known function.
    fns: Optional[list[Optional["FnValue"]]] = None

    @property
    def is_const(self) -> bool:
        return self.const is not NOCONST


class FnValue:
    """A function known to the checker."""


@dataclass(eq=False)
class TopFn(FnValue):
    decl: A.FunDecl


@dataclass(eq=False, slots=True)  # one per lambda evaluated
class Closure(FnValue):
    params: list[A.Param]
    body: A.Expr
    env: "Env"
    label: str


@dataclass(eq=False)
class Partial(FnValue):
    fn: Val  # the function value being partially applied
    given: list[Val]
    arity_left: int


# rule Declared: a function known only by its declared type
@dataclass(eq=False)
class Opaque(FnValue):
    """A function known only by its `Fun` type (a parameter declared with a function type, or a
    function value given one).  `depth` and `draw_depth` are the calls an application of it
    nests (rule Unroll): 0 for a parameter, whose argument's are added where it is given.
    `complete` is false when they are not known (a function a recursion returns): an
    application may then exceed the runtime's limits, a failure (FAIL)."""

    type: Fun
    depth: int = 0
    draw_depth: int = 0
    complete: bool = True


def fn_params(fn: FnValue) -> int:
    if isinstance(fn, TopFn):
        return len(fn.decl.params)
    if isinstance(fn, Closure):
        return len(fn.params)
    if isinstance(fn, Partial):
        return fn.arity_left
    return 1


@dataclass(slots=True)  # one per let, pattern and call: slots make it quicker to build and walk
class Env:
    """Lexical scope: a chain of frames from the innermost outwards."""

    vars: dict[str, Val] = field(default_factory=dict)
    parent: Optional["Env"] = None

    def lookup(self, name: str) -> Optional[Val]:
        env: Optional[Env] = self
        while env is not None:
            v = env.vars.get(name)
            if v is not None:
                return v
            env = env.parent
        return None

    def extend(self, bindings: dict[str, Val]) -> "Env":
        return Env(dict(bindings), self)

    def names(self) -> set[str]:
        out: set[str] = set()
        env: Optional[Env] = self
        while env is not None:
            out |= set(env.vars)
            env = env.parent
        return out
