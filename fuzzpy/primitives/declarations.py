"""Declaring a primitive: what the checker, the language server and the docs know of it.

`primitive` declares one built-in, once: its name, its signature (type with sensitivities, for
people), its typing rule (for the checker), a documentation line (hover, generated docs), a
justification of why its rule is sound, with a reference, and its exact semantics on check-time
constants (`fold`).  The families of primitives (arith.py, bags.py, ...) declare theirs with
it; registry.py loads them and is where everything else looks primitives up.  The slots for
the runtime's evaluators are filled by `registry.kernel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional, Protocol

from ..diagnostics import Span
from ..typesystem.ir import IR, ILambda
from ..typesystem.sens import Coef, Dist
from ..typesystem.types import Type


class _NoConst:
    def __repr__(self) -> str:
        return "NOCONST"


NOCONST: Any = _NoConst()  # "value not known at check time"


@dataclass(slots=True)  # built for every argument of every primitive call: slots are cheaper
class Arg:
    """What the checker knows about one argument of a primitive call."""

    type: Type
    dist: Dist
    const: Any
    span: Span
    ir: IR
    fn: Any = None  # a check-time function value, for higher-order primitives
    parts: Optional[list[Dist]] = None  # per-component distances of a tuple or partition

    @property
    def is_const(self) -> bool:
        return self.const is not NOCONST


# rule Exact: a result carries the failure risk of the primitive itself (`risk`)
@dataclass(slots=True)
class Result:
    type: Type
    dist: Dist
    const: Any = NOCONST
    info: dict = field(default_factory=dict)
    ir_args: Optional[list[IR]] = None  # replaces the argument IR (e.g. functions -> code)
    parts: Optional[list[Dist]] = None  # per-component distances (splits, partitions)
    risk: Dist = field(default_factory=dict)  # a failure risk of the primitive's own (typesystem/effects.py)


@dataclass(slots=True)
class Instantiated:
    """A function argument checked at a given parameter type."""

    cod: Type
    param_coefs: list[Coef]  # sensitivity in each parameter
    captured: Dist           # distance of what the function captured from its context
    code: ILambda
    risk: Dist = field(default_factory=dict)  # on what applying it may fail (typesystem/effects.py)
    grows: Any = 0       # rows it may add, per row of what it is applied to (rule Growth)
    depth: int = 0       # calls an application nests, and when drawn (rule Unroll)
    draw_depth: int = 0
    quad: list[dict] = field(default_factory=list)  # per parameter: shadow coefficients (rule Rho)


class RuleContext(Protocol):
    def fail(self, code: str, message: str, span: Span | None, *notes: str) -> Exception: ...
    def c_max(self, a: Coef, b: Coef) -> Coef: ...
    def d_max(self, a: Dist, b: Dist) -> Dist: ...
    def instantiate(self, arg: Arg, param_types: list[Type], span: Span, per_row: bool = False,
                    public: bool = False, times: int = 1, quadratic: bool = False) -> Instantiated: ...
    def note_growth(self, dist: Dist) -> None: ...
    def note_infinite(self, span: Span, dist: Dist, reason: str) -> None: ...
    def sensitivity(self, dist: Dist, span: Span) -> Fraction: ...
    def split(self, parent: Dist, labels: list[str], types: list[Type] | None = None) -> list[Dist]: ...
    def scale_apply(self, k: Coef, dist: Dist, span: Span | None = None) -> Dist: ...
    def lift(self, quad: dict, arg: Dist, span: Span | None) -> Dist: ...
    def integral(self, symbol: str) -> bool: ...
    def record_mechanism(self, name: str, span: Span, sensitivity: Fraction, epsilon: Fraction,
                         scale: Fraction, cost: Dist, extra: dict | None = None) -> None: ...


Rule = Callable[[RuleContext, list[Arg], Span], Result]


class RunContext(Protocol):
    """What the interpreter hands to a reference evaluator registered with `context=True`.

    Calling convention: `run(ctx, *argument_values)`.  Plain ones are called as
    `run(*argument_values)` and must work on Python scalars, numpy arrays and pandas Series.
    Function arguments arrive as runtime closures; call them with `ctx.call(fn, *args)`, or
    column-at-a-time with the runtime's row functions (fuzzpy/runtime/vectorize.py).  Mechanisms
    return a distribution (an object with `sample(ctx) -> value`); the interpreter samples it at
    a `sample` binding.  Nothing here may raise on a data-dependent value."""

    info: dict        # what the primitive's typing rule decided (bounds, calibration)
    span: Any         # source span of the call
    rng: Any          # fuzzpy.runtime.noise.RandomSource

    def call(self, fn: Any, *args: Any) -> Any: ...
    def record_release(self, mechanism: str, value: Any, epsilon: Fraction, scale: Fraction,
                       accuracy: Any, **extra: Any) -> None: ...


@dataclass
class Primitive:
    name: str
    params: tuple[str, ...]
    signature: str
    doc: str
    justification: str
    rule: Rule
    category: str = "other"
    is_mechanism: bool = False
    # A function of each row's values alone, so the runtime may apply it to whole columns
    # (vectorised row functions)?
    vectorised: bool = False
    fold: Optional[Callable[..., Any]] = None  # evaluate on check-time constants
    # It takes and gives tuples (vectors, primitives/vectors.py): exact on exact numbers, and on
    # tuples of columns in row functions (each component a column, runtime/vectorize.py).
    structured: bool = False
    # It accepts tables with a privacy unit (rule Units): keeps each row with its unit (filter,
    # map, union) or bounds what a unit contributes (primitives/units.py).  Every other primitive
    # refuses them (E0330).
    units: bool = False
    # ---- its evaluators: registered by the runtime (`kernel`); None until the runtime is loaded
    run: Optional[Callable[..., Any]] = None  # the reference evaluator
    needs_context: bool = False  # run(ctx, *args) instead of run(*args); see RunContext
    lazy_bags: bool = False      # run accepts lazy MaskedBags (others get plain frames)
    # lazy_bags, and nothing else to decide (no context, fold or vectors): run on its arguments
    # as they are (bags, partitions and keys)
    bag_only: bool = False
    batched: Any = None          # its evaluator on lane values (runtime/batch.py), or PER_LANE
    dask: Any = None             # on the Dask engine's tables; or NO_TABLE, PASSES_TABLES, Refused
    kernels_from: Optional[str] = None  # the module that registered them (fuzzpy.runtime.kernels.<family>)

    @property
    def arity(self) -> int:
        return len(self.params)


REGISTRY: dict[str, Primitive] = {}

# Source operators and the primitives that implement them.
OPERATORS: dict[str, str] = {
    "+": "add", "-": "sub", "*": "mul", "/": "div",
    "==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge",
    "&&": "and", "||": "or", "!": "not", "neg": "neg",
}


def primitive(name: str, params: tuple[str, ...], signature: str, doc: str, justification: str, *,
              category: str, is_mechanism: bool = False, vectorised: bool = False,
              fold: Optional[Callable[..., Any]] = None, structured: bool = False,
              units: bool = False) -> Callable[[Rule], Rule]:
    """Decorator declaring a primitive; the decorated function is its typing rule."""

    def register(rule: Rule) -> Rule:
        if name in REGISTRY:
            raise ValueError(f"primitive {name} declared twice")
        REGISTRY[name] = Primitive(name, params, signature, doc, justification, rule, category=category,
                                   is_mechanism=is_mechanism, vectorised=vectorised, fold=fold, structured=structured,
                                   units=units)
        return rule

    return register
