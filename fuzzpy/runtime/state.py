"""What every evaluator of a run shares: its state, the context handed to a primitive, the
distributions the evaluator builds for `sample`, and the one error a run may show.

The evaluator (evaluator.py), the code compiled from functions (compiled.py), the batched and
column evaluators and the engines all read these; none of them is defined in terms of another
evaluator, so this module imports no evaluator (docs/runtime.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

from ..diagnostics import Diagnostic, FuzzError, Span
from ..primitives.registry import Primitive
from ..typesystem import ir as I
from .values import Distribution, Located, ReleaseRecord, is_distribution


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
    together: list = field(default_factory=list)     # per `each` being sampled: (its epsilon in all, its parts)
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

    def __init__(self, interp: Any, info: dict, span: Optional[Span]):
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

    def record_release(self, mechanism: str, value: Any, epsilon: Fraction, scale: Fraction,
                       accuracy: Any, **extra: Any) -> None:
        state = self.interp.state
        site = state.sites[-1] if state.sites else self.site
        if state.together and state.together[0] is not None:  # the outermost each: the whole histogram
            extra["together"] = state.together[0]
        state.releases.append(ReleaseRecord(mechanism, self.span, _fraction(epsilon), _fraction(scale), accuracy,
                                            value, None, tuple(state.keys), extra, site))

    # rule Estimate: a released value is found by identity among the last releases
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

    def __init__(self, interp: Any, node: I.ISample, env: dict):
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

    def __init__(self, interp: Any, node: I.ISample, bound_fn: Callable[[], Any],
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


def call_with_context(interp: Any, prim: Primitive, node: I.IPrim, args: list[Any]) -> Any:
    """A primitive that takes a run context, on arguments as `call_prim` prepares them; a
    distribution it makes is drawn later with this call's context (its span labels releases)."""
    ctx = Context(interp, node.info, node.span)
    out = prim.run(ctx, *args)  # type: ignore[misc]
    return Located(out, ctx) if is_distribution(out) else out
