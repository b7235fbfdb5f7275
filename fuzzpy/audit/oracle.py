"""The soundness oracle: run a checked program on two neighbouring tables with every mechanism
replaced by the identity, and compare what happened with what the checker proved.

The first run (A) records the exact input of every mechanism call and releases it unchanged (no
noise).  The second run (B) releases, at its k-th call, A's k-th released value: the control
flow after a release is then the same in both runs, which is the coupling behind the
differential-privacy proof of sequential composition.  For a checker that is sound,

* both runs make the same mechanism calls, at the same sites, in the same order;
* the observed privacy loss  sum_k charged_k * |input_A - input_B|_k / S_k  is at most the
  epsilon the checker proved for the table that changed (a call with S = 0 cannot move), and
  the observed Gaussian loss  sum_k rho_k * ||input_A - input_B||_2^2 / S_k^2  (zCDP) at most
  the rho the checker proved for its Gaussian releases;
* both runs succeed or both fail (with the same error), and their results, which are
  post-processing of the released values, are equal.

Everything is exact: the interpreter computes scalars in Fractions outside row functions, and
released values stay exact here.  See docs/oracle.md.
"""

from __future__ import annotations

import ctypes
import math
import queue
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd

from .. import limits
from ..accounting.partition_selection import MAX_MOVED_KEYS, keep_interval, selection_divergence
from ..diagnostics import FuzzError
from ..limits import RECURSION_LIMIT, STACK_BYTES
from ..primitives.registry import Primitive
from ..primitives.units import SELECTIONS
from ..runtime.interpreter import (  # the runtime, with every primitive's kernels
    Interpreter,
    RunFailure,
    RunState,
)
from ..runtime.numbers import exact_scalar
from ..runtime.state import Context
from ..runtime.unit_rows import attach_units
from ..runtime.values import Distribution, is_distribution, materialise
from ..typesystem import ir as I

INF = math.inf


class OracleTimeout(BaseException):
    """The run went past its deadline.  A BaseException: the row-by-row fallback of row
    functions turns every Exception into a missing value, and a timeout must end the run."""


class ReplayDiverged(BaseException):
    """Run B asked for a release that run A did not make (another site, or one call more)."""


class OracleError(Exception):
    """The oracle itself cannot go on (a mechanism it does not know, real noise requested)."""


# ---- what one run observes ----------------------------------------------------------------------

@dataclass
class Call:
    """One release: the mechanism's exact input and the value it released."""

    site: int            # id() of the IPrim node: A and B run the same checked IR
    where: str           # file:line:col of the call, for reports
    mechanism: str
    observed: Any        # number, tuple of numbers, tuple of scores, or bool
    released: Any
    sensitivity: Fraction
    charged: Fraction    # the epsilon the checker charges per unit of distance over S
    rho: Fraction = Fraction(0)  # a Gaussian release's rho at a move of S (L2)
    info: dict = field(default_factory=dict)  # the checked call's parameters (a partition selection's delta)


@dataclass
class Outcome:
    status: str                   # "ok" | "failed" | "error" | "timeout" | "diverged"
    result: Any = None            # canonical form of the entry point's value (status ok)
    code: Optional[str] = None    # error code ("E0604") or exception type (status failed/error)
    message: str = ""
    calls: list[Call] = field(default_factory=list)
    max_depth: int = 0            # deepest nesting of function calls outside row functions
    seconds: float = 0.0


@dataclass
class Violation:
    kind: str      # "outcome" | "calls" | "loss" | "rho" | "delta" | "zero-sensitivity" | "result"
    detail: str
    over: int = 0  # for "loss": calls whose input moved more than their proven sensitivity


# ---- exact values and distances -------------------------------------------------------------------

def exact_value(v: Any) -> Any:
    """A mechanism input as an exact value: Fractions (floats for infinities and NaN), tuples of
    them, or a bool."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, tuple):
        return tuple(exact_value(x) for x in v)
    q = exact_scalar(v)
    if q is None:
        raise OracleError(f"a mechanism input is not a number: {type(v).__name__}")
    return q


def number_distance(a: Any, b: Any) -> Any:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return abs(a - b)
    if a == b or (a != a and b != b):  # the same infinity, or NaN on both sides
        return Fraction(0)
    return INF


@dataclass(frozen=True)
class UnitCounts:
    """The input of a partition selection: each key's number of units (each unit counted in at
    most m of its keys), as sorted (key, count) pairs."""

    m: int
    counts: tuple


def distance(mechanism: str, a: Any, b: Any) -> Any:
    """How far the input of one call moved: L1 over a Laplace tuple, the largest move over the
    scores of a selection or sparse-vector call, 0 or 1 for a bool; for a partition selection,
    the L1 move of its counts over all keys divided by m (its calibration: units, each in at
    most m keys)."""
    if isinstance(a, UnitCounts) and isinstance(b, UnitCounts):
        ca, cb = dict(a.counts), dict(b.counts)
        return Fraction(sum(abs(ca.get(k, 0) - cb.get(k, 0)) for k in set(ca) | set(cb)), a.m)
    if isinstance(a, bool) or isinstance(b, bool):
        return Fraction(0) if a == b else Fraction(1)
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return INF
        parts = [distance(mechanism, x, y) for x, y in zip(a, b)]
        if not parts:
            return Fraction(0)
        return sum(parts, Fraction(0)) if mechanism == "laplace" else max(parts)
    return number_distance(a, b)


def squared_l2(a: Any, b: Any) -> Any:
    """The squared L2 move of a Gaussian release's input (exact; infinite for a shape change)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return INF
        total: Any = Fraction(0)
        for x, y in zip(a, b):
            total = total + squared_l2(x, y)
        return total
    d = number_distance(a, b)
    return INF if d == INF else d * d


def call_rho(call: Call, sq: Any) -> Any:
    """The zCDP loss of a Gaussian release whose input moved by sqrt(sq): rho * sq / S^2."""
    if sq == 0:
        return Fraction(0)
    if call.sensitivity == 0 or sq == INF:
        return INF
    return call.rho * sq / call.sensitivity ** 2


def call_loss(call: Call, delta: Any) -> Any:
    """The privacy loss the mechanism's calibration allows for this move: charged * delta / S."""
    if delta == 0:
        return Fraction(0)
    if call.sensitivity == 0 or delta == INF:
        return INF
    return call.charged * delta / call.sensitivity


def canonical(v: Any) -> Any:
    """A comparable form of a result: exact numbers, tuples for lists and records."""
    v = materialise(v)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (str, type(None))):
        return v
    if isinstance(v, tuple):
        return tuple(canonical(x) for x in v)
    if isinstance(v, dict):
        return ("record", tuple((k, canonical(x)) for k, x in v.items()))
    if isinstance(v, (pd.DataFrame, pd.Series)):
        return ("bag", repr(v.to_dict()))
    q = exact_scalar(v)
    if q is None:
        return ("opaque", type(v).__name__)
    return "nan" if q != q else q


# ---- the identity runtime -------------------------------------------------------------------------

class Recorder:
    """Releases of one run: A records, B replays A's released values in order."""

    def __init__(self, replay: Optional[list[Call]] = None):
        self.calls: list[Call] = []
        self.replay = replay

    def release(self, node: I.IPrim, mechanism: str, observed: Any, identity: Any) -> Any:
        k = len(self.calls)
        info = node.info
        released = identity
        diverged = False
        if self.replay is not None:
            if k < len(self.replay) and self.replay[k].site == id(node):
                released = self.replay[k].released
            else:
                diverged = True
        self.calls.append(Call(id(node), str(node.span), mechanism, observed, released,
                               Fraction(info["sensitivity"]), Fraction(info.get("charged", 0)),
                               Fraction(info.get("charged_rho", 0)), info))
        if diverged:
            raise ReplayDiverged(k)
        return released


class IdentityRelease(Distribution):
    """A mechanism applied to its inputs: sampling it releases the exact input (or, in a replay,
    the value released at the same point of the recorded run)."""

    __slots__ = ("recorder", "node", "mechanism", "observed", "identity")

    def __init__(self, recorder: Recorder, node: I.IPrim, mechanism: str, observed: Any, identity: Any):
        self.recorder, self.node, self.mechanism = recorder, node, mechanism
        self.observed, self.identity = observed, identity

    def sample(self, ctx: Any) -> Any:
        return self.recorder.release(self.node, self.mechanism, self.observed, self.identity)


class _NoNoise:
    """The run state's random source: a mechanism that escaped the oracle would draw noise.
    Only the contribution bounds' random bits are given (`randbytes`, which no noise sampler
    uses): all zero, so each unit keeps its first rows and first groups in row order, a choice
    that depends on the unit's own rows only, which rules Bound rows and Bounded groups cover.
    The secret that chooses which rows a truncation keeps is given too (`secret`): the same in
    both runs of a pair, as the proof of rule Truncate couples them."""

    def __init__(self, secret: int = 0):
        self._secret = secret

    def randbytes(self, n: int) -> bytes:
        return bytes(n)

    def secret(self) -> int:
        return self._secret

    def __getattr__(self, name: str) -> Any:
        raise OracleError("a mechanism drew real noise during an oracle run")


class OracleInterpreter(Interpreter):
    """The interpreter with mechanisms replaced by identity releases, a deadline, and the
    deepest nesting of function calls recorded."""

    def __init__(self, state: RunState, recorder: Recorder, deadline: float):
        super().__init__(state)
        self.recorder = recorder
        self.deadline = deadline
        self.max_depth = 0
        self._ticks = 0

    def eval(self, node: I.IR, env: dict) -> Any:
        self._ticks += 1
        if self._ticks & 1023 == 0 and time.monotonic() > self.deadline:
            raise OracleTimeout()
        return self._table[type(node)](self, node, env)

    def call_instance(self, node: I.ICall, args: list[Any]) -> Any:
        self.max_depth = max(self.max_depth, self.state.depth + 1)
        return super().call_instance(node, args)

    def call_prim(self, prim: Primitive, node: I.IPrim, args: list[Any]) -> Any:
        if not prim.is_mechanism:
            return super().call_prim(prim, node, args)
        args = [materialise(a) for a in args]
        observed, identity = self.observe(prim.name, node, args)
        return IdentityRelease(self.recorder, node, prim.name, observed, identity)

    def observe(self, name: str, node: I.IPrim, args: list[Any]) -> tuple[Any, Any]:
        """(the mechanism's exact input, what the identity releases), computed as the real
        runtime computes its inputs (scores of every candidate, eagerly and in order)."""
        identity = IDENTITY.get(name)
        if identity is None:
            raise OracleError(f"the oracle has no identity semantics for the mechanism {name}")
        return identity(Context(self, node.info, node.span), name, args)


# ---- each mechanism without its noise ---------------------------------------------------------------
# The oracle's own model of each mechanism, keyed by its name, not one of its evaluators: what a
# release observes (its exact input: a number, a tuple, the scores) and what it gives back
# without noise.  The runtime's evaluators (fuzzpy/runtime/kernels/mechanisms.py) draw noise,
# which the oracle must never do (`_NoNoise`), so the oracle does not call them;
# tests/runtime/test_kernels.py checks that every registered mechanism has an entry here.

def _additive(ctx: Context, name: str, args: list[Any]) -> tuple[Any, Any]:
    x = exact_value(args[1])
    return x, x


def _coin(ctx: Context, name: str, args: list[Any]) -> tuple[Any, Any]:
    return bool(args[1]), bool(args[1])


def _selection(ctx: Context, name: str, args: list[Any]) -> tuple[Any, Any]:
    cands = list(args[1])
    if not cands:  # as the real runtime: a public list, so a public failure
        raise RunFailure(f"{name} was given an empty list of candidates", ctx.span)
    scores = tuple(exact_value(ctx.call(args[2], c)) for c in cands)
    best = max(range(len(cands)), key=lambda i: (_order_key(scores[i]), -i))
    return scores, cands[best]


def _sparse_vector(ctx: Context, name: str, args: list[Any]) -> tuple[Any, Any]:
    scores = tuple(exact_value(ctx.call(args[4], q)) for q in args[3])
    return scores, first_trues(scores, Fraction(ctx.info["threshold"]), int(ctx.info["cutoff"]))


# rule Partition selection: each key's units, each unit in its first m keys (a choice that depends
# only on the unit's own rows, as the runtime's random one does); the identity releases every key
def _partition_selection(ctx: Context, name: str, args: list[Any]) -> tuple[Any, Any]:
    from ..runtime.kernels.units import key_strings, rows_and_units
    from ..runtime.vectorize import row_function

    rows, units = rows_and_units(args[4])
    codes, names = key_strings(row_function(ctx.interp.state, args[3])(rows), ctx.info["key_kind"])
    m = int(ctx.info["m"])
    pairs = sorted({(int(u), names[int(c)]) for u, c in zip(units, codes) if u >= 0 and c >= 0})
    kept: dict[int, int] = {}
    counts: dict[str, int] = {}
    for unit, key in pairs:
        if kept.get(unit, 0) < m:
            kept[unit] = kept.get(unit, 0) + 1
            counts[key] = counts.get(key, 0) + 1
    return UnitCounts(m, tuple(sorted(counts.items()))), tuple(sorted(counts))


IDENTITY = {"laplace": _additive, "gaussian": _additive, "randomized_response": _coin, "exponential": _selection,
            "noisy_max": _selection, "above_threshold": _sparse_vector, "select_keys": _partition_selection,
            "select_keys_optimal": _partition_selection}


def _order_key(score: Any) -> Any:
    return -INF if score != score else score  # NaN loses


def first_trues(scores: tuple, threshold: Fraction, cutoff: int) -> tuple[bool, ...]:
    """The sparse vector without noise: score >= threshold, in order, up to the cutoff-th True."""
    out, trues = [], 0
    for s in scores:
        hit = bool(s >= threshold)
        out.append(hit)
        trues += hit
        if trues >= cutoff:
            break
    return tuple(out)


# ---- running one table ----------------------------------------------------------------------------

@contextmanager
def call_depth(limit: int) -> Iterator[None]:
    """The shared call-depth limit of checker and runtime, lowered for the oracle (so recursion
    as deep as the data is observable on small tables) and restored afterwards."""
    old = limits.CALL_DEPTH
    limits.CALL_DEPTH = limit
    try:
        yield
    finally:
        limits.CALL_DEPTH = old


def run_identity(instance: I.Instance, tables: dict[str, Any], *, replay: Optional[list[Call]] = None,
                 timeout: float = 5.0, secret: int = 0) -> Outcome:
    """Run the entry point on `tables` with identity mechanisms; with `replay`, release the
    recorded values instead.  Runs on a thread with a large stack, as `fuzzpy run` does.
    `secret`: what a truncation's choice of rows is keyed with."""
    recorder = Recorder(replay)
    box: dict[str, Any] = {}
    start = time.monotonic()
    interp_box: list[OracleInterpreter] = []

    def main() -> None:
        import warnings

        old_limit = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))  # this thread has the stack for it
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                interp = OracleInterpreter(RunState(_NoNoise(secret)), recorder, start + timeout)
                interp_box.append(interp)
                units = attach_units(tables, getattr(instance, "units", None) or {})  # rule Units
                value = interp.eval(instance.body, {p: units[p] for p in instance.params})  # type: ignore[arg-type]
                result = interp.draw(value) if is_distribution(value) else value
                box["result"] = canonical(result)
        except BaseException as exc:  # classified by the caller's thread
            box["error"] = exc
        finally:
            sys.setrecursionlimit(old_limit)

    finished = _WORKER.run(main, timeout)
    out = _classify(box, not finished)
    out.calls = recorder.calls
    out.max_depth = interp_box[0].max_depth if interp_box else 0
    out.seconds = time.monotonic() - start
    return out


class _BigStackWorker:
    """One long-lived thread with a large stack that runs the oracle's runs one at a time
    (starting a thread with a 1 GB stack for every run costs more than a small run).  A run
    past its deadline outside the evaluator (a row function, a library call) is interrupted;
    a thread that still does not stop is abandoned and replaced."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread: Optional[threading.Thread] = None
        self.lock = threading.Lock()

    def run(self, fn: Any, timeout: float) -> bool:
        """Run fn() on the worker; False if it had not finished in time."""
        with self.lock:
            thread = self._thread()
            # An interrupt sent as the previous run ended may still wait in the idle thread: it
            # would fire when this job is taken from the queue, and lose it.
            _clear_interrupt(thread)
            done = threading.Event()
            self.jobs.put((fn, done))
            if done.wait(timeout * 1.5 + 1):
                return True
            give_up = time.monotonic() + timeout + 5
            while time.monotonic() < give_up:
                # Sent again every half second: Python prints and drops an exception raised while
                # the thread runs a weakref callback or a destructor, and the run would go on.
                _interrupt(thread)
                if done.wait(0.5):
                    return True
            self.thread, self.jobs = None, queue.SimpleQueue()  # abandon it (a daemon thread)
            return False

    def _thread(self) -> threading.Thread:
        if self.thread is None or not self.thread.is_alive():
            old = threading.stack_size()
            threading.stack_size(STACK_BYTES)
            try:
                self.thread = threading.Thread(target=self._loop, args=(self.jobs,), name="fuzzpy-oracle",
                                               daemon=True)
                self.thread.start()
            finally:
                threading.stack_size(old)
        return self.thread

    @staticmethod
    def _loop(jobs: queue.SimpleQueue) -> None:
        done: Optional[threading.Event] = None
        while True:
            try:
                fn, done = jobs.get()
                try:
                    fn()
                finally:
                    done.set()
            except OracleTimeout:  # an interrupt that arrived after its run had finished (or in `set`)
                if done is not None:
                    done.set()


_WORKER = _BigStackWorker()


def _interrupt(thread: threading.Thread) -> None:
    """Raise OracleTimeout inside a thread at its next Python instruction."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(OracleTimeout))


def _clear_interrupt(thread: threading.Thread) -> None:
    """Withdraw an interrupt `_interrupt` sent that the thread has not raised yet."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), None)  # None: NULL, clears


def _classify(box: dict[str, Any], alive: bool) -> Outcome:
    if alive:
        return Outcome("timeout", message="the run could not be stopped")
    if "result" in box:
        return Outcome("ok", result=box["result"])
    exc = box["error"]
    if isinstance(exc, OracleTimeout):
        return Outcome("timeout")
    if isinstance(exc, ReplayDiverged):
        return Outcome("diverged", message=f"call {exc.args[0] + 1} differs from the recorded run")
    if isinstance(exc, OracleError):
        raise exc
    if isinstance(exc, FuzzError):
        d = exc.diagnostics[0]
        return Outcome("failed", code=d.code, message=d.message)
    if isinstance(exc, RecursionError):
        return Outcome("failed", code="RecursionError", message="Python recursion limit")
    return Outcome("error", code=type(exc).__name__, message=str(exc)[:200])


# ---- comparing two runs ---------------------------------------------------------------------------

def compare(a: Outcome, b: Outcome, epsilon: Any, rho: Any = 0, rho_pure: Any = None) -> list[Violation]:
    """What a sound checker guarantees about runs A and B of one program on neighbouring tables,
    B replaying A's releases; `epsilon` is the proven epsilon of the table that changed, `rho`
    the proven zCDP rho of its Gaussian releases."""
    out: list[Violation] = []
    if (a.status, a.code) != (b.status, b.code) and b.status != "diverged":
        out.append(Violation("outcome", f"A {_status(a)}, B {_status(b)}"))
    elif b.status == "diverged" and a.status != "ok" and len(b.calls) > len(a.calls):
        out.append(Violation("outcome", f"A {_status(a)} after {len(a.calls)} mechanism call(s), "
                             f"B went on to call {len(b.calls)}"))
    common = min(len(a.calls), len(b.calls))
    same_sites = all(x.site == y.site for x, y in zip(a.calls, b.calls))
    # A run that fails stops making calls: that is already the outcome's difference.
    if (not same_sites or len(a.calls) != len(b.calls)) and not out:
        out.append(Violation("calls", f"A made {len(a.calls)} mechanism call(s), B {len(b.calls)}"
                             + ("" if same_sites else " (at different sites)")))
    total: Any = Fraction(0)
    rho_total: Any = Fraction(0)
    pure_total: Any = Fraction(0)
    over: list[str] = []
    for k in range(common):
        x, y = a.calls[k], b.calls[k]
        if x.site != y.site:
            break
        if x.mechanism == "gaussian":
            sq = squared_l2(x.observed, y.observed)
            if x.sensitivity == 0 and sq != 0:
                out.append(Violation("zero-sensitivity", f"call {k + 1} (gaussian at {x.where}) was proven "
                                     "0-sensitive but its input moved"))
            if sq > x.sensitivity ** 2:
                over.append(f"call {k + 1} (gaussian at {x.where}): moved sqrt({_num(sq)}) in L2, proven "
                            f"sensitivity {_num(x.sensitivity)}")
            rho_total = rho_total + call_rho(x, sq)
            continue
        delta = distance(x.mechanism, x.observed, y.observed)
        if x.sensitivity == 0 and delta != 0:
            out.append(Violation("zero-sensitivity", f"call {k + 1} ({x.mechanism} at {x.where}) was proven "
                                 f"0-sensitive but its input moved by {_num(delta)}"))
        if delta > x.sensitivity:
            over.append(f"call {k + 1} ({x.mechanism} at {x.where}): moved {_num(delta)}, proven sensitivity "
                        f"{_num(x.sensitivity)}")
        total = total + call_loss(x, delta)
        out += selection_delta(k, x, y, call_loss(x, delta))
        pure_total = pure_total + call_loss(x, delta) ** 2 / 2
    if rho_pure is not None and pure_total > rho_pure:
        out.append(Violation("rho", f"observed pure zCDP {_num(pure_total)} > proven rho_pure {_num(rho_pure)}"))
    if total > epsilon:
        out.append(Violation("loss", f"observed privacy loss {_num(total)} > proven epsilon {_num(epsilon)}"
                             + ("; " + "; ".join(over[:3]) if over else ""), len(over)))
    if rho_total > rho:
        out.append(Violation("rho", f"observed Gaussian loss rho {_num(rho_total)} > proven rho {_num(rho)}"
                             + ("; " + "; ".join(over[:3]) if over else ""), len(over)))
    if a.status == "ok" and b.status == "ok" and a.result != b.result:
        out.append(Violation("result", f"results differ: A {_short(a.result)}, B {_short(b.result)}"))
    return out


# rule Partition selection, rule Optimal partition selection: each call's (eps, delta) on its counts
def selection_delta(k: int, x: Call, y: Call, loss: Any) -> list[Violation]:
    """A partition selection whose released key sets on the two runs' counts are further apart than
    its proven delta at the epsilon charged for the move: the exact hockey-stick divergence of the
    laws of the keys whose count moved (each key released independently).  A call that moves more
    than MAX_MOVED_KEYS keys is not measured (its loss already exceeds what the checker proved)."""
    if x.mechanism not in SELECTIONS or not x.charged or loss == INF:
        return []
    ca, cb = dict(x.observed.counts), dict(y.observed.counts)
    moved = sorted(key for key in set(ca) | set(cb) if ca.get(key, 0) != cb.get(key, 0))
    if not moved or len(moved) > MAX_MOVED_KEYS:
        return []
    keep_a = [keep_interval(ca.get(key, 0), x.info) for key in moved]
    keep_b = [keep_interval(cb.get(key, 0), x.info) for key in moved]
    observed = selection_divergence(keep_a, keep_b, Fraction(loss))
    proven = Fraction(x.info["delta"])
    if observed <= proven:
        return []
    return [Violation("delta", f"call {k + 1} ({x.mechanism} at {x.where}): its released keys on the two tables are "
                      f"at delta {float(observed):.6g} at epsilon {_num(loss)}, proven delta {_num(proven)}")]


def _status(o: Outcome) -> str:
    if o.status == "ok":
        return "succeeded"
    if o.status in ("failed", "error"):
        return f"failed ({o.code}: {o.message[:80]})"
    return o.status if o.status != "diverged" else f"diverged ({o.message})"


def _num(x: Any) -> str:
    if isinstance(x, Fraction):
        return str(x) if x.denominator == 1 or x.denominator < 10_000 else f"{float(x):.6g}"
    return str(x)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class PairResult:
    a: Outcome
    b: Outcome
    violations: list[Violation]


def audit_pair(instance: I.Instance, epsilon: Any, tables_a: dict[str, Any], tables_b: dict[str, Any],
               timeout: float = 5.0, rho: Any = 0, rho_pure: Any = None, secret: int = 0) -> PairResult:
    """Run A (recording) and B (replaying A) and compare.  A run that times out while the other
    does not is retried with four times the time, so a slow machine is not taken for a
    data-dependent failure; a pair whose A run still times out cannot be replayed.  Both runs
    truncate with the same `secret`."""
    a = run_identity(instance, tables_a, timeout=timeout, secret=secret)
    if a.status == "timeout":
        a = run_identity(instance, tables_a, timeout=4 * timeout, secret=secret)
        if a.status == "timeout":
            return PairResult(a, Outcome("timeout"), [])
    b = run_identity(instance, tables_b, replay=a.calls, timeout=timeout, secret=secret)
    if b.status == "timeout":
        b = run_identity(instance, tables_b, replay=a.calls, timeout=4 * timeout, secret=secret)
    return PairResult(a, b, compare(a, b, epsilon, rho, rho_pure))
