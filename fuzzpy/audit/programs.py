"""A checked program as an audit target: its interpreter run is the sampler.

Each draw is one complete run of the entry point (`evaluate_entry`) over synthetic tables with
the runtime's real mechanisms and exact samplers, seeded for reproducibility (a seeded source
gives no privacy; here there is nothing private to protect).  Runs happen on one thread with a
large stack, as `fuzzpy run` does, because the interpreter recurses.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from fractions import Fraction
from typing import Any, Optional

import numpy as np

from ..diagnostics import Diagnostic, FuzzError
from ..typesystem.sens import INF
from ..typesystem.types import Schema
from .neighbours import Tables, string_literals, table_pairs
from .search import Pair, Sampler


def audit_error(message: str, *notes: str) -> FuzzError:
    return FuzzError(Diagnostic("E0801", message, None, list(notes)))


def private_inputs(report: Any, delta: Fraction = Fraction(0)) -> list[tuple[str, Schema, Fraction]]:
    """(parameter, schema, its claimed epsilon) for each entry parameter; all must be `bag Schema`.
    The claim is the table's pure epsilon, or with Gaussian releases (delta > 0) the epsilon at
    delta that claims.claimed_epsilon gives for the table's rho and pure epsilon."""
    from .auditor import _grid_sigma
    from .claims import claimed_epsilon

    sigma = _grid_sigma(report)
    out = []
    for inp, schema in _tables(report):
        rho = Fraction(inp.rho_gauss)
        if rho and not delta:
            raise audit_error(f"'{inp.name}' enters Gaussian releases: its claim needs a delta")
        out.append((inp.name, schema, claimed_epsilon(rho, Fraction(inp.epsilon), delta, sigma, inp.rho_pure) if rho
                    else Fraction(inp.epsilon)))
    return out


def _tables(report: Any) -> list[tuple[Any, Schema]]:
    """(input report, schema) for each entry parameter; all must be `bag Schema` with finite costs."""
    out = []
    for inp in report.inputs:
        schema = report.table_schema(inp)
        if schema is None:
            raise audit_error(f"entry parameter '{inp.name}' has type {inp.type}; the auditor can only build "
                              "neighbouring inputs for parameters of type bag Schema")
        if INF in (inp.epsilon, inp.rho_gauss):
            raise audit_error(f"the checker proved no finite epsilon for '{inp.name}'")
        out.append((inp, schema))
    if not out:
        raise audit_error("the entry point has no private input: there is nothing to audit")
    return out


def program_pairs(report: Any, rng: np.random.Generator, max_pairs: int,
                  claimed: Optional[Fraction] = None, delta: Fraction = Fraction(0)) -> list[Pair]:
    """Neighbouring synthetic tables, each compared with its table's claim at `delta`; `claimed`
    replaces every table's epsilon (for tests)."""
    inputs = private_inputs(report, delta)
    if claimed is not None:
        inputs = [(name, schema, claimed) for name, schema, _ in inputs]
    strings = string_literals("\n".join(report.sources.values()))
    pairs = table_pairs(inputs, strings, rng, max_pairs)
    return [replace(p, delta=delta) for p in pairs] if delta else pairs


def program_sampler(report: Any, batch: bool = True, exact: bool = False) -> Sampler:
    """sample(tables, n, rng): n runs of the entry point on `tables` (a `Tables`); `batch=False`
    runs the interpreter once per sample (the reference the batched sampler is tested against);
    `exact` draws every mechanism with its exact runtime sampler in the batched path too."""
    from ..runtime.samplers import RandomSource

    instance = report.entry_instance
    schemas = {inp.name: schema for inp, schema in _tables(report)}

    mode = {"batch": batch}  # a program that could not be batched once is not tried again

    def sample(tables: Tables, n: int, rng: np.random.Generator) -> list[Any]:
        frames = tables.frames(schemas)
        source = RandomSource.seeded(int(rng.integers(2**63)))
        return _on_big_stack(lambda: _runs(instance, frames, source, n, mode, exact))

    def many(inputs: list[Tables], n: int, rng: np.random.Generator) -> Optional[list[list[Any]]]:
        """n runs for each input, drawn together (`batched.draw_inputs`: every input's run j gets
        the same noise, as `sample` called with the same rng state gives each input), in groups
        of at most MANY_PAIRS (lane, row) pairs, each group from the same seed; None where the
        program's structure does not allow it (the caller then samples input by input)."""
        if not (mode["batch"] and mode.get("many", True)) or n < 2 or not inputs:
            return None
        seed = int(rng.integers(2**63))
        out: list[list[Any]] = []
        for group in _groups(inputs, n):  # consecutive: the outputs come back in input order
            source = RandomSource.seeded(seed)
            tables = [inputs[i] for i in group]
            got = _on_big_stack(lambda: _merged_runs(instance, schemas, tables, source, n))
            if got is None:
                mode["many"] = False  # not tried again: the caller samples input by input
                return None
            out.extend(got)
        return out

    if not exact:  # the exact samplers draw per lane: together, the inputs would not share their noise
        sample.many = many  # type: ignore[attr-defined]
    return sample


# At most this many (lane, row) pairs of all tables in one merged draw (`many`): the lanes of a
# screening stage's 320 inputs of 400 runs over tables of a few rows, not more memory than that.
MANY_PAIRS = 1 << 20


def _groups(inputs: list[Tables], n: int) -> list[list[int]]:
    """The inputs' indices in consecutive groups of at most MANY_PAIRS (lane, row) pairs over n
    runs each (an input alone may hold more)."""
    groups: list[list[int]] = [[]]
    pairs = 0
    for i, t in enumerate(inputs):
        size = n * max(1, sum(len(rows) for _, rows in t.tables))
        if groups[-1] and pairs + size > MANY_PAIRS:
            groups.append([])
            pairs = 0
        groups[-1].append(i)
        pairs += size
    return groups


def _merged_runs(instance: Any, schemas: dict, inputs: list[Tables], source: Any,
                 n: int) -> Optional[list[list[Any]]]:
    """n runs of the entry point on each of `inputs` at once, or None when the program's
    structure does not allow it (or the merged evaluation fails: each input's own run then
    reports what failed)."""
    from ..runtime.interpreter import RunState
    from .batched import draw_inputs

    if instance.body is None or any(p not in schemas for p in instance.params):
        return None
    env = {p: _lane_table(schemas[p], [t.rows(p) for t in inputs], n) for p in instance.params}
    try:
        out = draw_inputs(RunState(source), instance.body, env, len(inputs), n, source)
    except Exception:  # noqa: BLE001 - not batchable together: input by input
        return None
    return [out[i * n:(i + 1) * n] for i in range(len(inputs))]


def _lane_table(schema: Schema, tables: list[tuple], n: int) -> Any:
    """The tables of several inputs as one lane bag: their rows one after another in one frame,
    lane i * n + j holding input i's rows in order (n runs per input)."""
    from ..runtime.batch import LaneBag
    from .neighbours import make_frame

    frame = make_frame(schema, [row for rows in tables for row in rows])
    sizes = np.repeat(np.array([len(rows) for rows in tables], dtype=np.int64), n)  # rows per lane
    starts = np.repeat(np.concatenate([[0], np.cumsum([len(rows) for rows in tables])[:-1]]).astype(np.int64), n)
    lanes = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)  # each lane's first pair
    rows = np.arange(len(lanes), dtype=np.int64) - firsts[lanes] + starts[lanes]
    return LaneBag(frame, rows, lanes, len(sizes))


def _runs(instance: Any, frames: dict, source: Any, n: int, mode: Optional[dict] = None,
          exact: bool = False) -> list[Any]:
    """n runs of the entry point.  Its body is evaluated once and the distribution it evaluates
    to is sampled n times: evaluation outside distributions is deterministic (all randomness is
    drawn when a distribution is sampled, and `sample` bindings re-run their bodies on every
    draw), so this has the law of n complete runs, as `evaluate_entry` performs them, at a
    fraction of the cost on the deterministic part.  With mode["batch"], the n samples are drawn
    together where the program allows it (`batched.draw_batch`: the same law), else one by one;
    a failed attempt sets mode["batch"] to False, so later calls do not pay for it again."""
    from ..runtime.interpreter import Interpreter, RunFailure, RunState
    from ..runtime.values import is_distribution, materialise

    if instance.body is None or any(p not in frames for p in instance.params):
        raise RunFailure("no input given for the entry point")
    batch = mode is not None and bool(mode.get("batch")) and n > 1
    # The batched sampler evaluates the bindings' code on lanes: they must be IR (`Bind`), not
    # the compiled code of functions with effects (RunState.effects_compiled).
    state = RunState(source, effects_compiled=not batch)
    interp = Interpreter(state)
    value = interp.eval(instance.body, {p: frames[p] for p in instance.params})
    if not is_distribution(value):
        return [materialise(value)] * n
    if batch:
        from .batched import draw_batch

        try:  # all n runs at once where the program's structure allows it (audit/batched.py)
            return draw_batch(state, value, n, source, vectorised=not exact)
        except Exception:  # noqa: BLE001 - not batchable (or failing): one interpreter run per sample
            mode["batch"] = False  # type: ignore[index]
        # one run per sample, with compiled code: evaluation outside distributions draws nothing,
        # so evaluating the body again gives the same distribution
        state = RunState(source)
        interp = Interpreter(state)
        value = interp.eval(instance.body, {p: frames[p] for p in instance.params})
    out = []
    for _ in range(n):
        state.releases.clear()  # releases are not needed: the entry point's value is the output
        state.named = 0
        out.append(materialise(interp.draw(value)))
    return out


def _on_big_stack(fn: Any) -> Any:
    from ..runtime.interpreter import RECURSION_LIMIT, STACK_BYTES

    box: dict[str, Any] = {}

    def main() -> None:
        try:
            sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    old = threading.stack_size()
    threading.stack_size(STACK_BYTES)
    try:
        t = threading.Thread(target=main, name="fuzzpy-audit", daemon=True)
        t.start()
    finally:
        threading.stack_size(old)
    t.join()
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, FuzzError):
            raise exc
        # Synthetic tables only, so the message holds nothing private; it is still kept short.
        raise audit_error(f"the program failed on a synthetic input ({type(exc).__name__}: {exc})"[:300])
    return box["value"]
