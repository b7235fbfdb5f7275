"""Running a checked program's entry point (docs/runtime.md): the runtime's front door.

`run_program`, `start_run` and `evaluate_entry` bind the entry point's parameters to the tables,
evaluate its body (evaluator.py) and sample its distribution once.  Importing this module
registers every primitive's kernels (runtime/kernels/), so whatever runs a program through it
finds each primitive's evaluators on its declaration.  The names callers outside the runtime use
with these (`Interpreter`, `RunState`, `RunFailure`, ...) are importable from here too.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ..limits import RECURSION_LIMIT, STACK_BYTES
from ..typesystem import ir as I
from . import kernels  # noqa: F401 - registers every primitive's evaluators
from .engines import engine_of
from .evaluator import Interpreter
from .state import RunFailure, RunState
from .unit_rows import attach_units
from .values import ReleaseRecord, is_distribution, materialise

__all__ = ["RECURSION_LIMIT", "STACK_BYTES", "Interpreter", "RunFailure", "RunHandle", "RunResult", "RunState",
           "evaluate_entry", "run_program", "start_run"]


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
        state.engine = engine_of(tables)
    tables = attach_units(tables, getattr(instance, "units", None) or {})  # rule Units
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
