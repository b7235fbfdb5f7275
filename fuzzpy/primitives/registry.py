"""The one registry of primitives.

Each built-in is declared exactly once, with its name, its signature (type with sensitivities,
for people), its typing rule (for the checker), its runtime implementation (for the
interpreter), a documentation line (hover, generated docs) and a justification of why its
rule is sound, with a reference.  The checker, the interpreter, the language server and
`docs/primitives.md` all read `REGISTRY`.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional, Protocol

from ..checking.ir import IR, ILambda
from ..checking.sens import Coef, Dist
from ..checking.types import Type
from ..diagnostics import Span


class _NoConst:
    def __repr__(self) -> str:
        return "NOCONST"


NOCONST: Any = _NoConst()  # "value not known at check time"


@dataclass
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


@dataclass
class Result:
    type: Type
    dist: Dist
    const: Any = NOCONST
    info: dict = field(default_factory=dict)
    ir_args: Optional[list[IR]] = None  # replaces the argument IR (e.g. functions -> code)
    parts: Optional[list[Dist]] = None  # per-component distances (splits, partitions)
    risk: Dist = field(default_factory=dict)  # a failure risk of the primitive's own (checking/effects.py)


@dataclass
class Instantiated:
    """A function argument checked at a given parameter type."""

    cod: Type
    param_coefs: list[Coef]  # sensitivity in each parameter
    captured: Dist           # distance of what the function captured from its context
    code: ILambda
    risk: Dist = field(default_factory=dict)  # on what applying it may fail (checking/effects.py)
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
    """What the interpreter hands to primitives declared with `needs_context=True`.

    Calling convention: `run(ctx, *argument_values)`.  Plain primitives are called as
    `run(*argument_values)` and must work on Python scalars, numpy arrays and pandas Series.
    Function arguments arrive as runtime closures; call them with `ctx.call(fn, *args)` or
    vectorise them with `ctx.vectorised(fn)` (column-at-a-time).  Mechanisms return a
    `Distribution` (an object with `sample(ctx) -> value`); the interpreter samples it at a
    `sample` binding.  Nothing here may raise on a data-dependent value."""

    info: dict        # what the primitive's typing rule decided (bounds, calibration)
    span: Any         # source span of the call
    rng: Any          # fuzzpy.runtime.noise.RandomSource

    def call(self, fn: Any, *args: Any) -> Any: ...
    def vectorised(self, fn: Any) -> Callable[[Any], Any]: ...
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
    run: Optional[Callable[..., Any]] = None
    category: str = "other"
    is_mechanism: bool = False
    # Can the runtime apply it to whole columns (vectorised row functions)?
    vectorised: bool = False
    fold: Optional[Callable[..., Any]] = None  # evaluate on check-time constants
    needs_context: bool = False  # run(ctx, *args) instead of run(*args); see RunContext
    # Its run takes and gives tuples (vectors, primitives/vectors.py): exact on exact numbers, and
    # on tuples of columns in row functions (each component a column, runtime/vectorize.py).
    structured: bool = False

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
              category: str, run: Optional[Callable[..., Any]] = None, is_mechanism: bool = False,
              vectorised: bool = False, fold: Optional[Callable[..., Any]] = None,
              needs_context: bool = False, structured: bool = False) -> Callable[[Rule], Rule]:
    """Decorator declaring a primitive; the decorated function is its typing rule."""

    def register(rule: Rule) -> Rule:
        if name in REGISTRY:
            raise ValueError(f"primitive {name} declared twice")
        REGISTRY[name] = Primitive(name, params, signature, doc, justification, rule, run, category,
                                   is_mechanism, vectorised, fold, needs_context, structured)
        return rule

    return register


def runtime(name: str) -> Any:
    """The module fuzzpy.runtime.<name>, imported on first use (checking loads the primitives
    without the runtime) and then read from a dict: an import statement in a primitive's run,
    made at every node of a tree, costs more than the lookup."""
    module = _RUNTIME.get(name)
    if module is None:
        module = _RUNTIME[name] = importlib.import_module(f"fuzzpy.runtime.{name}")
    return module


_RUNTIME: dict[str, Any] = {}


def lookup(name: str) -> Optional[Primitive]:
    _load()
    return REGISTRY.get(name)


def all_primitives() -> dict[str, Primitive]:
    _load()
    return REGISTRY


_loaded = False
_load_lock = threading.RLock()


def _load() -> None:
    # Marked loaded only once every module has registered: a concurrent first check (the
    # curator service checks on many threads) must not see a half-filled registry.
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            from . import arith, bags, binning, estimates, library, lists, mechanisms, ordered, partitions, trees, vectors  # noqa: F401
            _loaded = True
