"""n runs of a program's distribution drawn at once, where its structure allows it (docs/audit.md,
"Batched program sampling").

The entry point's body is evaluated once (as `programs._runs` does); its distribution is then
sampled for n runs together.  A `sample x = d; body` draws d for all n runs (one vectorised draw
of the mechanism where it has one: `Distribution.batch`, the batch samplers `--mechanism` audits
use; any other mechanism with its exact sampler once per run), binds x to the n released values
(a *lane* per run, fuzzpy/runtime/batch.py) and evaluates the body once for all runs.  A
mechanism whose input differs between runs (it reads an earlier release) is drawn for all runs
at once with `Distribution.per_run`, each run with its own input.  Post-processing of released
values computes what the interpreter computes from the same released values, lane by lane or
with numpy where that gives the same exact results.  No primitive is special-cased here by
name: the body runs on the lane evaluator, which reads each primitive's registered batched
evaluator (fuzzpy/runtime/kernels/), and a mechanism is drawn through the distribution its
evaluator built (`MechanismDistribution.batch` and `.per_run`).

The n runs are independent draws of the program's law: every mechanism call gets fresh,
independent noise per run, and the deterministic computations between draws are those of one
run.  An `if` on a released value splits the runs between its branches.  A program whose runs
this sampler cannot follow (a `case` on values whose shape differs between runs, a distribution
it does not know) raises `NotBatchable`, and the auditor falls back to one interpreter run per
sample.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional

import numpy as np

from ..runtime.batch import (
    LaneEvaluator,
    Lanes,
    LaneSplit,
    NotBatchable,
    PerRunMechanism,
    _transpose,
    compact,
    lane_view,
    unlane,
)
from .outputs import Rows, row_shape


class _Quiet:
    """The sampling context of a mechanism drawn outside a run: its releases are not recorded."""

    __slots__ = ("rng",)

    def __init__(self, rng: Any):
        self.rng = rng

    def record_release(self, *args: Any, **kw: Any) -> None:
        return None


def draw_batch(state: Any, value: Any, n: int, rng: Any, vectorised: bool = True) -> list[Any]:
    """n independent samples of the distribution `value` (made by an interpreter on `state`).
    `vectorised=False` draws every mechanism with its exact sampler (no numpy batch samplers)."""
    return _outputs(_sample(LaneEvaluator(state, n, fuzzy=True), value, n, rng, vectorised), n)


def draw_inputs(state: Any, body: Any, env: dict, copies: int, runs: int, rng: Any) -> list[Any]:
    """`runs` samples of the entry point's body for each of `copies` inputs at once: `env` binds
    each table to a lane bag whose lane i * runs + j holds input i's rows (`programs._lane_table`).
    The body is evaluated once over all lanes, as each input's own evaluation would be lane by
    lane, and its distribution drawn for all lanes with the vectorised samplers, every input's
    run j with the same noise where they draw for all lanes (`SharedRuns`).  Returns the copies * runs
    outputs, input by input.  Raises like `draw_batch` where the program's structure does not
    allow it, and NotBatchable where it would do per lane what each input's own evaluation
    does once (`LaneEvaluator.inputs`)."""
    from ..runtime.samplers import SharedRuns

    n = copies * runs
    ev = LaneEvaluator(state, n, fuzzy=True, inputs=True)
    value = ev.eval(body, env)
    if not _drawable(value):
        return _outputs(value, n)
    source = SharedRuns(rng, copies, runs) if copies > 1 else rng
    return _outputs(_sample(ev, value, n, source, True), n)


def _outputs(value: Any, n: int) -> Any:
    """The n outputs: `Rows` where they are numbers in one of the shapes the auditor encodes as
    rows (their Fractions are not built), else a list of the values."""
    from ..runtime.values import materialise

    rows = _number_rows(value, n)
    if rows is not None:
        return rows
    out = unlane(value, n)
    return [materialise(v) for v in out] if _holds_bags(out[:1]) else out


def _number_rows(value: Any, n: int) -> Optional[Rows]:
    """`Rows` of the outputs when they have a row shape (`outputs.row_shape`: a tuple of numbers,
    a tuple of tuples of numbers, a dict of numbers, whose numbers are floats, ints and
    Fractions); else None."""
    if n < 1:
        return None
    t = type(value)
    if t is tuple and value and not any(type(x) is tuple for x in value):
        leaves = list(value)
    elif t is tuple and value and all(type(x) is tuple for x in value):
        leaves = [x for part in value for x in part]
    elif t is dict and value:
        leaves = list(value.values())
    else:
        return None
    columns = []
    for leaf in leaves:
        column = _number_column(leaf, n)
        if column is None:
            return None
        columns.append(column)
    first = lane_view(value, 0)
    if not columns or row_shape(first) is None:
        return None
    return Rows.of_columns(columns, first, lambda i: lane_view(value, i))


_NO_INTS = np.zeros(0, dtype=object)


def _number_column(leaf: Any, n: int) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """A coordinate's column for `Rows.of_columns`, or None when a lane's value is not a float, an
    int or a Fraction."""
    from ..runtime.numbers import as_float

    t = type(leaf)
    if t is Lanes:
        got = leaf.numbers()
        if got is None:
            return None
        floats, is_exact, exact = got
        return (floats, is_exact, exact.num, exact.den) if len(exact) else (floats, is_exact, _NO_INTS, _NO_INTS)
    if t is float or t is int:  # the same number in every lane
        return np.full(n, as_float(leaf), dtype=np.float64), np.zeros(n, dtype=bool), _NO_INTS, _NO_INTS
    if t is Fraction:
        return (np.full(n, as_float(leaf)), np.ones(n, dtype=bool), np.full(n, leaf.numerator, dtype=object),
                np.full(n, leaf.denominator, dtype=object))
    return None


def _holds_bags(sample: list) -> bool:
    """Whether the outputs hold a lazy bag `materialise` would turn into a frame (it rebuilds the
    tuples and partitions around one, and nothing else changes)."""
    from ..runtime.values import MaskedBag, holds

    return any(holds(v, MaskedBag) for v in sample)


def _sample(ev: LaneEvaluator, dist: Any, n: int, rng: Any, vectorised: bool) -> Any:
    from ..runtime.state import Bind, bind
    from ..runtime.values import EachDistribution, Located, MechanismDistribution, Returned

    while True:
        t = type(dist)
        if t is Located:
            dist = dist.inner
        elif t is Returned:
            return dist.value
        elif t is MechanismDistribution:
            return _mechanism(dist, n, rng, vectorised)
        elif t is Bind:
            node, env = dist.node, dist.env
            drawn = _sample(ev, ev.eval(node.bound, env), n, rng, vectorised)
            if type(drawn) is Lanes and not isinstance(node.pattern, (str, type(None))):
                drawn = _transpose(drawn, n)
            dist = ev.eval(node.body, bind(env, node.pattern, drawn))
        elif t is EachDistribution:
            return {k: _sample(ev, d, n, rng, vectorised) if _drawable(d) else d for k, d in dist.parts.items()}
        elif t is LaneSplit:  # an `if` on a released value: each branch's runs drawn together
            return _sample_split(dist, rng, vectorised)
        elif t is PerRunMechanism:  # a mechanism whose input depends on the run
            draws = _draw_runs(dist.first, _run_inputs(dist.inputs, dist.n), rng) if vectorised else None
            return _released(draws) if draws is not None else _per_run(dist.each_lane().values(), rng, vectorised)
        elif t is Lanes:  # one distribution per run
            return _per_run(dist.values(), rng, vectorised)
        else:
            raise NotBatchable("a distribution this sampler does not know")


def _drawable(d: Any) -> bool:
    """A distribution, or one per run (a part's mechanism whose input differs between runs)."""
    from ..runtime.values import is_distribution

    if type(d) is Lanes:
        return d.ratios is None and type(d.data) is list and any(is_distribution(x) for x in d.data)
    return type(d) is LaneSplit or type(d) is PerRunMechanism or is_distribution(d)


def _sample_split(dist: LaneSplit, rng: Any, vectorised: bool) -> Lanes:
    """Each group of runs samples its own branch's distribution (with that branch's evaluator,
    over its own runs); the outputs are put back in run order."""
    out: list = [None] * dist.n
    rng = getattr(rng, "base", rng)  # some of the lanes: their own draws (SharedRuns is for all)
    for idx, d, ev in dist.parts:
        k = len(idx)
        drawn = unlane(_sample(ev, d, k, rng, vectorised), k)
        for i, x in zip(idx.tolist(), drawn):
            out[i] = x
    return compact(out)


def _mechanism(dist: Any, n: int, rng: Any, vectorised: bool) -> Lanes:
    from ..runtime.samplers import shared_copies

    draws: Optional[list] = None
    if vectorised and dist.batch is not None:
        copies = shared_copies(rng, n)
        if copies > 1:  # one input for every lane: each run drawn once, the same for every input
            one = dist.batch(rng.base, n // copies)
            draws = None if one is None else list(one) * copies
        else:
            draws = dist.batch(rng, n)
    if draws is None:
        quiet = _Quiet(rng)
        draws = [dist.sample(quiet) for _ in range(n)]
    return Lanes(draws)


def _per_run(dists: list, rng: Any, vectorised: bool) -> Any:
    """A mechanism built once per run (its input depends on the run): all drawn at once when
    they share one calibration and it has a vectorised sampler, else each with its exact one."""
    ms = [_mechanism_of(d) for d in dists]
    plans = {m.per_run[0] if m.per_run is not None else None for m in ms}
    if vectorised and ms and None not in plans and len(plans) == 1:
        draws = _draw_runs(ms[0], [m.per_run[1] for m in ms], rng)
        if draws is not None:
            return _released(draws)
    quiet = _Quiet(rng)
    return Lanes([m.sample(quiet) for m in ms])


def _draw_runs(first: Any, inputs: list, rng: Any) -> Optional[list]:
    """One draw per run, run i's of inputs[i], all with `first`'s calibration (vectorised), or None."""
    return first.per_run[2](inputs, rng)


def _released(draws: Any) -> Any:
    """Per-run draws as a lane value: a list (or float64 array) holds each run's release; a
    tuple holds the columns of tuple releases (a tuple of lane values is the lanes' tuples)."""
    if type(draws) is tuple:
        return tuple(_column(col) for col in draws)
    return _column(draws)


def _column(col: Any) -> Lanes:
    """One release per run: floats from a float64 array stay Python floats in the lanes' values
    (what one run releases), with the array kept for column arithmetic."""
    if isinstance(col, np.ndarray) and col.dtype == np.float64 and col.ndim == 1:
        return Lanes.of_floats(col)
    return Lanes(col.tolist() if isinstance(col, np.ndarray) else col)


def _run_inputs(inputs: Any, n: int) -> Any:
    """A per-run mechanism's inputs as its vectorised draw takes them: coordinate by coordinate
    when every coordinate is held as exact ratios (no Fraction per run), else run by run."""
    from ..runtime.ratios import ExactColumns

    coords = inputs if type(inputs) is tuple else (inputs,)
    held = [_input_ratios(c) for c in coords]
    if held and all(r is not None for r in held):
        return ExactColumns(tuple(held), type(inputs) is not tuple)  # type: ignore[arg-type]
    return unlane(inputs, n)


def _input_ratios(c: Any) -> Any:
    """A coordinate's inputs as ratios when a mechanism draws the same from them as from the
    values: exact rationals, or finite floats other than -0.0 (a noiseless release gives a
    float input back as it is)."""
    from ..runtime.ratios import Ratios

    if type(c) is not Lanes:
        return None
    if c._data is None:
        return c.ratios
    if c.exact is not None:  # sums, with the float 0.0 of empty ones: the same exact values
        return c.exact
    if c.floats is not None or (type(c.data) is list and c.data and set(map(type, c.data)) == {float}):
        x = c.floats if c.floats is not None else np.asarray(c.data, dtype=np.float64)
        if not np.signbit(x[x == 0]).any():
            return Ratios.of_floats(x)  # None for an infinity or NaN
    return None


def _mechanism_of(dist: Any) -> Any:
    from ..runtime.values import Located, MechanismDistribution

    while type(dist) is Located:
        dist = dist.inner
    if type(dist) is not MechanismDistribution:
        raise NotBatchable("a per-run distribution that is not a mechanism")
    return dist
